// Paying an open invoice on its hosted page in live mode, against the fake Stripe: a renewal that
// the bank refused off session for want of 3-D Secure leaves its invoice open; the payer pays it
// on the page with the subscription's card, on session (a PaymentIntent whose Idempotency-Key is
// the period attempt's reference); the challenge runs Stripe.js handleNextAction; the return reads
// the PaymentIntent at Stripe, and Stripe's payment_intent.* events record the same outcome, once,
// in either order: the period settled, or the attempt counted and dunning going on.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE, browse, call, signup } from "../support/http";
import { captureLogs, card } from "../support/cards";
import { quiesce } from "../support/db";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";
import { type Connected, type LiveAccount, STRIPE_CARDS, connectStripe, deliverStripeEvents, expectOneKeyPerObject, expectSpecClean, installFakeStripe, skipStripeEvents } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
const logs = captureLogs();
let acct: LiveAccount;
let connected: Connected;
let userId: string;
let planId: string;
const RETURN = "https://shop.example.com/done";

beforeAll(async () => {
  acct = await signup("Live invoice shop");
  connected = await connectStripe(acct, { publishableKey: "pk_live_51InvoiceShop000000000" });
  userId = (await call("/api/users", { key: acct.liveKey, body: { name: "Live Payer", email: "live.invoice@example.com" } })).body.id;
  const plan = await call("/subscription-plans", { key: acct.liveKey, body: { name: "Live monthly", price: 12, currency: "eur", interval: "month" } });
  expect(plan.status, plan.text).toBe(201);
  planId = plan.body.id;
});

afterAll(async () => {
  await quiesce();
  expectSpecClean(fake);
  expectOneKeyPerObject(fake, "invoice page payments");
  logs.restore();
  stripe.restore();
});


const intentOf = async (paymentId: string) => {
  const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(paymentId).first<{ processor_reference: string }>();
  return fake.paymentIntents.get(row!.processor_reference)!;
};

/** A live subscription whose card asks for 3-D Secure on every charge: its first charge authenticated, its renewal refused off session. */
async function pastDue() {
  skipStripeEvents(fake);
  const res = await call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication) } });
  expect(res.status, res.text).toBe(201);
  fake.authenticate((await intentOf(res.body.latest_payment.id)).id, "complete");
  await deliverStripeEvents(fake, connected);
  const sub = res.body.id as string;
  expect((await call(`/subscriptions/${sub}`, { key: acct.liveKey })).body.status).toBe("active");
  await makeDue(sub);
  await runJobs({ kind: "billing.renew", subscriptionIds: [sub] });
  expect((await call(`/subscriptions/${sub}`, { key: acct.liveKey })).body.status).toBe("past_due");
  const [invoice] = (await call(`/invoices?subscription_id=${sub}&status=open`, { key: acct.liveKey })).body.data;
  return { sub, invoice: invoice as { id: string; hosted_invoice_url: string }, page: new URL(invoice.hosted_invoice_url).pathname };
}

const invoiceStatus = async (id: string) => (await call(`/invoices/${id}`, { key: acct.liveKey })).body.status;

describe("live: paying an open invoice on its page", () => {
  it("the page offers the subscription's card and no card fields; paying asks for 3-D Secure through a PaymentIntent keyed by the attempt's reference", async () => {
    const d = await pastDue();
    const page = await browse(d.page);
    expect(page.status).toBe(200);
    expect(page.text).toContain("•••• 3184");
    expect(page.text).not.toContain('autocomplete="cc-number"');
    const from = fake.requests.length;
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    expect(res.status, res.text).toBe(303);
    expect(res.location).toMatch(/\/pay\/authenticate\/pay_[0-9a-z]+\/[0-9A-Za-z]{40}$/);
    const created = fake.requests.slice(from).filter((r) => r.operation === "POST /v1/payment_intents");
    // The attempt's reference keys both: the charge that learns the bank asks, then the on-session PaymentIntent the payer authenticates.
    const reference = `${d.sub}:period:1:attempt:2`;
    expect(created.map((r) => r.idempotencyKey)).toEqual([`${reference}:payment_intent`, `${reference}:authenticate:payment_intent`]);
    expect(created[1].params.error_on_requires_action).toBeUndefined();
    // The challenge page runs Stripe.js with the publishable key.
    const challenge = await browse(res.location!);
    expect(challenge.text).toContain("pk_live_51InvoiceShop000000000");
    // Complete at Stripe: the return and Stripe's events (twice) settle the period once.
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    fake.authenticate((await intentOf(paymentId)).id, "complete");
    const [, back] = await Promise.all([deliverStripeEvents(fake, connected, { twice: true }), browse(`${new URL(res.location!).pathname}/return`, {})]);
    expect(new URL(back.location!).pathname).toBe(d.page);
    expect(await invoiceStatus(d.invoice.id)).toBe("paid");
    expect((await call(`/subscriptions/${d.sub}`, { key: acct.liveKey })).body.status).toBe("active");
    const paid = await env.DB.prepare("SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'invoice.paid' AND payload LIKE ?").bind(acct.id, `%${d.invoice.id}%`).first<{ n: number }>();
    expect(paid!.n).toBe(1);
  });

  it("another card goes through Stripe's Payment Element: the page loads Stripe.js (CSP allows it), posts only the PaymentMethod id, takes no card fields", async () => {
    const d = await pastDue();
    const page = await browse(d.page);
    expect(page.text).toContain('id="payment-element"');
    expect(page.text).toContain('data-publishable-key="pk_live_51InvoiceShop000000000"');
    expect(page.text).toContain('<script src="https://js.stripe.com/v3/" defer="">');
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self' https://js.stripe.com");
    expect(page.text).not.toMatch(/sk_live_|whsec_/);
    const typed = await browse(`${d.page}/pay`, { source: "card", card_number: STRIPE_CARDS.succeeds, exp_month: "12", exp_year: "2031", cvc: "123" });
    expect(typed.status).toBe(400);
    const mixed = await browse(`${d.page}/pay`, { source: "processor_token", processor_token: "pm_x", card_number: STRIPE_CARDS.succeeds });
    expect(mixed.status).toBe(400);
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 11, expYear: 2031 });
    const paid = await browse(`${d.page}/pay`, { source: "processor_token", processor_token: pm });
    expect(paid.status, paid.text).toBe(303);
    expect(paid.location).toBe(d.page);
    expect(await invoiceStatus(d.invoice.id)).toBe("paid");
    const sub = (await call(`/subscriptions/${d.sub}`, { key: acct.liveKey })).body;
    expect(sub).toMatchObject({ status: "active", card: { last4: "4242" } });
  });

  it("Fail at Stripe leaves the invoice open and counts the attempt; dunning goes on", async () => {
    const d = await pastDue();
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    fake.authenticate((await intentOf(paymentId)).id, "fail");
    await deliverStripeEvents(fake, connected);
    expect(await invoiceStatus(d.invoice.id)).toBe("open");
    const row = await env.DB.prepare("SELECT status, dunning_attempts AS n FROM subscriptions WHERE id = ?").bind(d.sub).first<{ status: string; n: number }>();
    expect(row).toMatchObject({ status: "past_due", n: 2 });
    const back = await browse(`${new URL(res.location!).pathname}/return`, {});
    const landing = await browse(`${new URL(back.location!).pathname}${new URL(back.location!).search}`);
    expect(landing.text).toContain("did not succeed");
  });

  it("Stripe's answer lost after it charged: the same Idempotency-Key is sent again, and the invoice is paid by one charge", async () => {
    const d = await pastDue();
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 11, expYear: 2031 });
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents", times: 1 });
    const paid = await browse(`${d.page}/pay`, { source: "processor_token", processor_token: pm });
    fake.inject();
    expect(paid.status, paid.text).toBe(303);
    expect(await invoiceStatus(d.invoice.id)).toBe("paid");
    const charged = [...fake.paymentIntents.values()].filter((pi: any) => String(pi.metadata?.tender_reference ?? "").startsWith(`${d.sub}:period:1:attempt:2`) && pi.status === "succeeded");
    expect(charged).toHaveLength(1);
  });

  it("Stripe unreachable: the page says try again and nothing is recorded; the cron then sends the same reference and records the attempt once", async () => {
    const d = await pastDue();
    fake.inject({ kind: "status", status: 500, operation: "POST /v1/payment_intents", times: 40 });
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    // Stripe is back.
    (fake as unknown as { faults: unknown[] }).faults = [];
    expect(res.status).toBe(409);
    expect(res.text).toContain("Please try again");
    expect(res.text).not.toMatch(/stripe|error:|at \w+ \(/i);
    expect(await invoiceStatus(d.invoice.id)).toBe("open");
    const reference = `${d.sub}:period:1:attempt:2`;
    const recorded = async () => (await env.DB.prepare("SELECT COUNT(*) AS n FROM payments WHERE charge_reference = ?").bind(reference).first<{ n: number }>())!.n;
    expect(await recorded()).toBe(0);
    // The claim was given back: the cron's next run takes it over at once, with the same reference.
    const { settleStaleClaims } = await import("../../src/billing/claims");
    expect(await settleStaleClaims(env as any)).toEqual(["past_due"]);
    expect(await settleStaleClaims(env as any)).toEqual([]);
    expect(await recorded()).toBe(1);
    expect(await invoiceStatus(d.invoice.id)).toBe("open");
  });

  it("a success Stripe reports after the period was settled otherwise is refunded in full", async () => {
    const d = await pastDue();
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    await env.DB.batch([
      env.DB.prepare("UPDATE invoices SET status = 'void' WHERE id = ?").bind(d.invoice.id),
      env.DB.prepare("UPDATE subscription_periods SET status = 'void' WHERE subscription_id = ? AND period_index = 1").bind(d.sub),
    ]);
    fake.authenticate((await intentOf(paymentId)).id, "complete");
    await deliverStripeEvents(fake, connected, { twice: true });
    const payment = (await call(`/payments/${paymentId}`, { key: acct.liveKey })).body;
    expect(payment).toMatchObject({ amount_received: 1200, amount_refunded: 1200 });
    const refunds = await env.DB.prepare("SELECT id FROM refunds WHERE payment_id = ?").bind(paymentId).all<{ id: string }>();
    expect(refunds.results).toHaveLength(1);
    await runJobs({ kind: "settleRefund", refundId: refunds.results[0].id });
  });
});

describe("live: a success after Tender recorded the payment failed", () => {
  it("is given back: Stripe keeps a PaymentIntent whose 3-D Secure failed confirmable, so a later success of it is refunded in full, never kept unrecorded", async () => {
    const d = await pastDue();
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    const intent = await intentOf(paymentId);
    fake.authenticate(intent.id, "fail");
    await deliverStripeEvents(fake, connected);
    expect((await call(`/payments/${paymentId}`, { key: acct.liveKey })).body.status).toBe("failed");
    // The payer confirms the same PaymentIntent again with its client secret (Stripe.js on a page
    // left open: requires_payment_method takes a new confirmation), and this time completes 3-D Secure.
    intent.status = "requires_action";
    fake.authenticate(intent.id, "complete");
    expect(intent.status).toBe("succeeded");
    await deliverStripeEvents(fake, connected, { twice: true });
    const payment = (await call(`/payments/${paymentId}`, { key: acct.liveKey })).body;
    expect(payment).toMatchObject({ amount_received: 1200, amount_refunded: 1200 });
    const refunds = await env.DB.prepare("SELECT id FROM refunds WHERE payment_id = ?").bind(paymentId).all<{ id: string }>();
    expect(refunds.results).toHaveLength(1);
    await runJobs({ kind: "settleRefund", refundId: refunds.results[0].id });
    // The attempt stays counted once and the invoice open: dunning goes on.
    expect(await invoiceStatus(d.invoice.id)).toBe("open");
    const row = await env.DB.prepare("SELECT status, dunning_attempts AS n FROM subscriptions WHERE id = ?").bind(d.sub).first<{ status: string; n: number }>();
    expect(row).toMatchObject({ status: "past_due", n: 2 });
  });
});

describe("live: the page's return racing Stripe's event", () => {
  it("either order, at once: the invoice paid once, invoice.paid and payment.completed once, nothing refunded", async () => {
    for (const reverse of [false, true]) {
      const d = await pastDue();
      const res = await browse(`${d.page}/pay`, { source: "subscription" });
      const challenge = new URL(res.location!).pathname;
      const paymentId = challenge.split("/")[3];
      fake.authenticate((await intentOf(paymentId)).id, "complete");
      const [back] = reverse
        ? await Promise.all([browse(`${challenge}/return`, {}), deliverStripeEvents(fake, connected, { twice: true })])
        : (await Promise.all([deliverStripeEvents(fake, connected, { twice: true }), browse(`${challenge}/return`, {})])).reverse();
      expect((back as { status: number }).status).toBe(303);
      const payment = (await call(`/payments/${paymentId}`, { key: acct.liveKey })).body;
      expect(payment).toMatchObject({ status: "completed", amount_received: 1200, amount_refunded: 0 });
      expect(await invoiceStatus(d.invoice.id)).toBe("paid");
      const events = await env.DB.prepare("SELECT type, payload AS data FROM events WHERE account_id = ? AND livemode = 1").bind(acct.id).all<{ type: string; data: string }>();
      expect(events.results.filter((e) => e.type === "invoice.paid" && e.data.includes(d.invoice.id))).toHaveLength(1);
      expect(events.results.filter((e) => e.type === "payment.completed" && e.data.includes(paymentId))).toHaveLength(1);
      expect((await call(`/subscriptions/${d.sub}`, { key: acct.liveKey })).body.status).toBe("active");
    }
  });
});

describe("live: modes and secrets", () => {
  it("a test-mode key neither reads nor pays a live invoice; the live page and its 3-D Secure page carry no key, webhook secret or Stripe secret", async () => {
    const d = await pastDue();
    expect((await call(`/invoices/${d.invoice.id}`, { key: acct.key })).status).toBe(404);
    expect((await call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST" })).status).toBe(404);
    const page = await browse(d.page);
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const challenge = await browse(res.location!);
    for (const text of [page.text, challenge.text]) {
      for (const secret of [acct.key, acct.liveKey, connected.secretKey, connected.webhookSecret]) expect(text).not.toContain(secret);
      expect(text).not.toMatch(/sk_(live|test)_|whsec_/);
    }
    // The invoice page itself carries no PaymentIntent's client secret (only the challenge page needs one).
    expect(page.text).not.toMatch(/pi_[A-Za-z0-9]+_secret_/);
  });
});

describe("live: the hour's abandonment against a late success", () => {
  it("a payer who completes at Stripe as the cron abandons the payment: the cancel is refused, Stripe's event pays the invoice once, nothing refunded", async () => {
    const d = await pastDue();
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    fake.authenticate((await intentOf(paymentId)).id, "complete");
    const { expireAuthorizations } = await import("../../src/payments/intents");
    await expireAuthorizations(env as any, Date.now() + 61 * 60_000);
    await deliverStripeEvents(fake, connected, { twice: true });
    const payment = (await call(`/payments/${paymentId}`, { key: acct.liveKey })).body;
    expect(payment).toMatchObject({ status: "completed", amount_received: 1200, amount_refunded: 0 });
    expect(await invoiceStatus(d.invoice.id)).toBe("paid");
  });

  it("a payer who completes after the cron canceled it: Stripe refuses, nothing is taken", async () => {
    const d = await pastDue();
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    const { expireAuthorizations } = await import("../../src/payments/intents");
    await expireAuthorizations(env as any, Date.now() + 61 * 60_000);
    expect((await call(`/payments/${paymentId}`, { key: acct.liveKey })).body.status).toBe("canceled");
    const intent = await intentOf(paymentId);
    expect(intent.status).toBe("canceled");
    expect(fake.authenticate(intent.id, "complete")).toBeNull();
    await deliverStripeEvents(fake, connected);
    expect(await invoiceStatus(d.invoice.id)).toBe("open");
  });
});

describe("live: the merchant's cancel against a late success", () => {
  it("the payer completed at Stripe before the merchant's cancel: no money kept unrecorded, the invoice paid once or the charge given back", async () => {
    const d = await pastDue();
    const res = await browse(`${d.page}/pay`, { source: "subscription" });
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    fake.authenticate((await intentOf(paymentId)).id, "complete");
    const canceled = await call(`/payments/${paymentId}/cancel`, { key: acct.liveKey, method: "POST" });
    expect([200, 402, 409], canceled.text).toContain(canceled.status);
    await deliverStripeEvents(fake, connected, { twice: true });
    const payment = (await call(`/payments/${paymentId}`, { key: acct.liveKey })).body;
    const invoice = await invoiceStatus(d.invoice.id);
    // Stripe holds 12.00: either it paid the invoice, or it was refunded in full.
    if (invoice === "paid") expect(payment).toMatchObject({ status: "completed", amount_received: 1200, amount_refunded: 0 });
    else expect(payment).toMatchObject({ amount_received: 1200, amount_refunded: 1200 });
  });
});

describe("live: an incomplete subscription's first invoice", () => {
  it("its page continues the first payment's challenge (Stripe.js), never a second PaymentIntent; Complete at Stripe makes the page show paid", async () => {
    skipStripeEvents(fake);
    const res = await call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication) } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe("incomplete");
    const challenge: string = res.body.latest_payment.next_action.url;
    const [invoice] = (await call(`/invoices?subscription_id=${res.body.id}&status=open`, { key: acct.liveKey })).body.data;
    const page = new URL(invoice.hosted_invoice_url).pathname;
    const shown = await browse(page);
    expect(shown.status).toBe(200);
    expect(shown.text).toContain("This payment needs authentication");
    expect(shown.text).toContain(`href="${challenge}?from=invoice"`);
    expect(shown.text).not.toContain("<form");
    expect(shown.text).not.toContain('id="payment-element"');
    const from = fake.requests.length;
    const again = await browse(`${page}/pay`, { source: "subscription" });
    expect(again.status).toBe(409);
    expect(again.text).toContain(`href="${challenge}?from=invoice"`);
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 11, expYear: 2031 });
    expect((await browse(`${page}/pay`, { source: "processor_token", processor_token: pm })).status).toBe(409);
    expect(fake.requests.slice(from).filter((r) => r.method === "POST")).toEqual([]);
    // The challenge runs Stripe.js with the publishable key; Complete there and Stripe's event activate the subscription.
    expect((await browse(challenge)).text).toContain("pk_live_51InvoiceShop000000000");
    fake.authenticate((await intentOf(res.body.latest_payment.id)).id, "complete");
    await deliverStripeEvents(fake, connected, { twice: true });
    expect((await call(`/subscriptions/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("active");
    const paid = await browse(page);
    expect(paid.text).toContain("12.00 EUR paid");
    expect(paid.text).not.toContain("needs authentication");
  });

  it("its challenge, opened from the page, sends the payer back to the invoice's page (not return_url) after Stripe.js: closed, completed, or decided by Stripe's event first", async () => {
    skipStripeEvents(fake);
    const res = await call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication) } });
    expect(res.body.status, res.text).toBe("incomplete");
    const [invoice] = (await call(`/invoices?subscription_id=${res.body.id}&status=open`, { key: acct.liveKey })).body.data;
    const link = /<a class="button" href="([^"]+)">\s*Continue to your bank/.exec((await browse(new URL(invoice.hosted_invoice_url).pathname)).text)![1];
    const challenge = await browse(link);
    const action = /<form method="post" action="([^"]+)" id="authenticate-return"/.exec(challenge.text)![1];
    expect(action).toBe(`${new URL(link).pathname}/return?from=invoice`);
    // The payer closed Stripe's challenge: back to the challenge, still marked.
    expect((await browse(action, {})).location).toBe(`${new URL(link).pathname}?from=invoice`);
    fake.authenticate((await intentOf(res.body.latest_payment.id)).id, "complete");
    const back = await browse(action, {});
    expect(back.status).toBe(303);
    expect(back.location).toBe(`${invoice.hosted_invoice_url}?payment_id=${res.body.latest_payment.id}`);
    expect((await browse(back.location!)).text).toContain("12.00 EUR paid");
    expect((await call(`/subscriptions/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("active");
    // Stripe's event (and a second return) afterwards record nothing more and land on the same place.
    await deliverStripeEvents(fake, connected, { twice: true });
    expect((await browse(action, {})).location).toBe(back.location);
    // The merchant's own flow (next_action.url, no marker) still returns to return_url.
    expect((await browse(`${new URL(link).pathname}/return`, {})).location).toBe(`${RETURN}?payment_id=${res.body.latest_payment.id}`);
  });

  it("a test-mode invoice's id under a live invoice page's secret, and the other way round, answer 404", async () => {
    skipStripeEvents(fake);
    const live = await call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication) } });
    expect(live.body.status).toBe("incomplete");
    const testUser = (await call("/api/users", { key: acct.key, body: { name: "Test Payer", email: "test.invoice@example.com" } })).body.id;
    const testPlan = (await call("/subscription-plans", { key: acct.key, body: { name: "Test monthly", price: 12, currency: "eur", interval: "month" } })).body.id;
    const test = await call("/subscriptions", { key: acct.key, body: { user_id: testUser, plan_id: testPlan, ...card("4000002760003184") } });
    expect(test.body.status, test.text).toBe("incomplete");
    const invoiceOf = async (key: string, sub: string) => (await call(`/invoices?subscription_id=${sub}&status=open`, { key })).body.data[0] as { id: string; hosted_invoice_url: string };
    const [liveInvoice, testInvoice] = [await invoiceOf(acct.liveKey, live.body.id), await invoiceOf(acct.key, test.body.id)];
    const secretOf = (url: string) => new URL(url).pathname.split("/").pop();
    for (const path of [`/pay/invoices/${testInvoice.id}/${secretOf(liveInvoice.hosted_invoice_url)}`, `/pay/invoices/${liveInvoice.id}/${secretOf(testInvoice.hosted_invoice_url)}`]) {
      const res = await browse(path);
      expect(res.status, path).toBe(404);
      expect(res.text).not.toContain("/pay/authenticate/");
    }
    // And a payment's challenge under the other mode's secret.
    const swapped = `/pay/authenticate/${test.body.latest_payment.id}/${secretOf(live.body.latest_payment.next_action.url)}`;
    expect((await browse(swapped)).status).toBe(404);
    expect((await browse(new URL(liveInvoice.hosted_invoice_url).pathname)).text).toContain(`href="${live.body.latest_payment.next_action.url}?from=invoice"`);
  });
});
