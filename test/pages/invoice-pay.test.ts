// Paying an open invoice on its hosted page (src/pages/invoice-pay.tsx,
// src/billing/invoice-payments.ts), in test mode: the subscription's card or another card, on
// session; a card whose bank asks goes through the 3-D Secure page and back. The charge settles
// the invoice's period as a paid dunning retry does, once however many clicks, tabs and retries;
// a decline or a failed challenge leaves the invoice open and dunning going on.
import { env } from "../support/env";
import { afterAll, describe, expect, it } from "vitest";
import { exports } from "cloudflare:workers";
import { BASE, type Account, browse, call, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { CARDS, captureLogs, expectNoCardData, sentCvvs, sentPans } from "../support/cards";
import { eventsOf } from "../support/db";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";

const AUTH_CARD = "4000002760003184";
const logs = captureLogs();

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});


/** The page's card form, filled in (the PAN and CVV recorded: none may be found anywhere afterwards). */
function card(pan: string) {
  sentPans.add(pan);
  sentCvvs.add("987");
  return { source: "card", card_number: pan, exp_month: "12", exp_year: String(new Date().getUTCFullYear() + 3), cvc: "987" };
}
const SAVED = { source: "subscription" };

interface Dunned {
  acct: Account;
  sub: string;
  invoice: { id: string; hosted_invoice_url: string; number: string };
  page: string;
}

/**
 * A past-due subscription with its open invoice: a first charge that went through and a renewal
 * declined (declineAfterFirst), or a trial whose end the bank refused off session for want of
 * 3-D Secure (AUTH_CARD).
 */
async function dunned(pan: string = CARDS.declineAfterFirst, name = "Invoice Pay Co"): Promise<Dunned> {
  const acct = await signup(name);
  const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  const plan = await createPlan(acct, { price: 30, name: "Pro" });
  const sub = await subscribed(acct, user.id, plan.id, pan, pan === AUTH_CARD ? { trial_period_days: 7 } : {});
  await makeDue(sub.id);
  await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
  expect((await getSubscription(acct, sub.id)).status).toBe("past_due");
  const [invoice] = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data;
  expect(invoice?.hosted_invoice_url).toBeTruthy();
  return { acct, sub: sub.id, invoice, page: new URL(invoice.hosted_invoice_url).pathname };
}

const invoiceOf = async (d: Dunned) => (await call(`/invoices/${d.invoice.id}`, { key: d.acct.key })).body;
const paymentsOf = async (d: Dunned) =>
  (await call(`/payments?subscription_id=${d.sub}&limit=100`, { key: d.acct.key })).body.data as { id: string; status: string; amount: number; invoice_id: string | null }[];
/** The payments that took money for the open invoice (a first charge before it is not one). */
const completed = async (d: Dunned) => (await paymentsOf(d)).filter((p) => p.invoice_id === d.invoice.id && (p.status === "completed" || p.status === "refunded"));

describe("the Pay part of an open invoice's page", () => {
  it("offers the subscription's card and another card; a paid invoice's page offers nothing", async () => {
    const d = await dunned();
    const page = await browse(d.page);
    expect(page.status).toBe(200);
    expect(page.text).toContain("Pay 30.00 USD with Visa •••• 0341");
    expect(page.text).toContain('autocomplete="cc-number"');
    expect(page.text).toMatch(new RegExp(`<form method="post" action="${d.page}/pay"`));
    const paid = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(paid.status).toBe(303);
    const after = await browse(d.page);
    expect(after.text).toContain("30.00 USD paid");
    expect(after.text).not.toContain("<form");
  });
});

describe("paying with another card", () => {
  it("settles the period as a paid retry: invoice paid, subscription active with the new card, invoice.paid and payment.completed", async () => {
    const d = await dunned();
    const res = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(res.status, res.text).toBe(303);
    expect(res.location).toBe(d.page);
    const invoice = await invoiceOf(d);
    expect(invoice).toMatchObject({ status: "paid", amount_paid: 3000 });
    const sub = await getSubscription(d.acct, d.sub);
    expect(sub.status).toBe("active");
    expect(sub.card.last4).toBe("4242");
    const [done] = await completed(d).then((list) => list.filter((p) => p.id === invoice.payment_id));
    expect(done).toMatchObject({ status: "completed", amount: 3000 });
    expect((await eventsOf(d.acct.id, "invoice.paid")).filter((e) => e.body.data.id === d.invoice.id)).toHaveLength(1);
    expect((await eventsOf(d.acct.id, "payment.completed")).some((e) => e.body.data.transaction_id === invoice.payment_id)).toBe(true);
  });

  it("takes one of Stripe's test PaymentMethods as the live page's Payment Element would post it, never with card fields", async () => {
    const d = await dunned();
    expect((await browse(`${d.page}/pay`, { ...card(CARDS.visa), source: "processor_token", processor_token: "pm_card_visa" })).status).toBe(400);
    expect((await browse(`${d.page}/pay`, { source: "processor_token", processor_token: "pm_card_nothing" })).status).toBe(400);
    const res = await browse(`${d.page}/pay`, { source: "processor_token", processor_token: "pm_card_visa" });
    expect(res.status, res.text).toBe(303);
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: 3000 });
  });

  it("a declined card shows the decline on the page and leaves the invoice open", async () => {
    const d = await dunned();
    const before = await getSubscription(d.acct, d.sub);
    const res = await browse(`${d.page}/pay`, card(CARDS.declined));
    expect(res.status).toBe(402);
    expect(res.text).toContain("Your card was declined");
    expect(res.text).toContain("Nothing was charged");
    expect(res.text).not.toContain(CARDS.declined);
    expect((await invoiceOf(d)).status).toBe("open");
    const after = await getSubscription(d.acct, d.sub);
    expect(after.status).toBe("past_due");
    // The subscription keeps its card; the attempt counts, as a declined Pay now's does.
    expect(after.card.last4).toBe(before.card.last4);
    expect(await completed(d)).toHaveLength(0);
  });

  it("a card that cannot be read is refused on the page without repeating it, and nothing is charged", async () => {
    const d = await dunned();
    const count = (await paymentsOf(d)).length;
    const res = await browse(`${d.page}/pay`, card("4242424242424241"));
    expect(res.status).toBe(400);
    expect(res.text).not.toContain("4242424242424241");
    expect((await paymentsOf(d)).length).toBe(count);
  });
});

describe("paying with the subscription's card", () => {
  it("a decline shows on the page and the invoice stays open", async () => {
    const d = await dunned();
    const res = await browse(`${d.page}/pay`, SAVED);
    expect(res.status).toBe(402);
    expect(res.text).toContain("The card was declined.");
    expect((await invoiceOf(d)).status).toBe("open");
    expect((await getSubscription(d.acct, d.sub)).status).toBe("past_due");
  });
});

describe("3-D Secure on the invoice's page", () => {
  it("sends the payer through the challenge; Complete settles the period and lands on the paid invoice", async () => {
    const d = await dunned(AUTH_CARD);
    const res = await browse(`${d.page}/pay`, SAVED);
    expect(res.status).toBe(303);
    expect(res.location).toMatch(/^http:\/\/127\.0\.0\.1:8787\/pay\/authenticate\/pay_[0-9a-z]+\/[0-9A-Za-z]{40}$/);
    const challenge = await browse(res.location!);
    expect(challenge.text).toContain("Complete");
    expect(challenge.text).toContain("30.00 USD");
    const done = await browse(`${new URL(res.location!).pathname}/complete`, {});
    expect(done.status).toBe(303);
    const back = new URL(done.location!);
    expect(back.pathname).toBe(d.page);
    const paymentId = back.searchParams.get("payment_id")!;
    const invoice = await invoiceOf(d);
    expect(invoice).toMatchObject({ status: "paid", amount_paid: 3000, payment_id: paymentId });
    expect((await getSubscription(d.acct, d.sub)).status).toBe("active");
    expect((await call(`/payments/${paymentId}`, { key: d.acct.key })).body.status).toBe("completed");
    const landing = await browse(`${back.pathname}${back.search}`);
    expect(landing.text).toContain("30.00 USD paid");
    const types = (await eventsOf(d.acct.id)).map((e) => e.type);
    expect(types.filter((t) => t === "invoice.paid")).toHaveLength(1);
    expect(types.filter((t) => t === "payment.requires_action")).toHaveLength(1);
    const periods = await env.DB.prepare("SELECT status FROM subscription_periods WHERE subscription_id = ? ORDER BY period_index").bind(d.sub).all<{ status: string }>();
    expect(periods.results.map((p) => p.status)).toEqual(["paid"]);
    // A second Complete (another tab) records nothing more.
    await browse(`${new URL(res.location!).pathname}/complete`, {});
    expect((await eventsOf(d.acct.id, "invoice.paid")).length).toBe(1);
    expect(await completed(d)).toHaveLength(1);
  });

  it("Fail leaves the invoice open, says so on the page, and dunning goes on", async () => {
    const d = await dunned(AUTH_CARD);
    const before = await getSubscription(d.acct, d.sub);
    const res = await browse(`${d.page}/pay`, SAVED);
    const failed = await browse(`${new URL(res.location!).pathname}/fail`, {});
    const back = new URL(failed.location!);
    expect(back.pathname).toBe(d.page);
    expect((await invoiceOf(d)).status).toBe("open");
    const landing = await browse(`${back.pathname}${back.search}`);
    expect(landing.text).toContain("did not succeed");
    expect(landing.text).toContain(`action="${d.page}/pay"`);
    const after = await getSubscription(d.acct, d.sub);
    expect(after.status).toBe("past_due");
    const attempts = async () => (await env.DB.prepare("SELECT dunning_attempts AS n FROM subscriptions WHERE id = ?").bind(d.sub).first<{ n: number }>())!.n;
    expect(await attempts()).toBe(2);
    expect(after.next_billing_date).toBe(before.next_billing_date);
    // The next retry charges the card again (off session: the bank asks again).
    await makeDue(d.sub);
    await runJobs({ kind: "billing.renew", subscriptionIds: [d.sub] });
    expect(await attempts()).toBe(3);
    expect((await paymentsOf(d)).length).toBe(3);
  });

  it("while the payer authenticates, a dunning retry, a second click and Pay now charge nothing; the page offers to continue", async () => {
    const d = await dunned(AUTH_CARD);
    const res = await browse(`${d.page}/pay`, SAVED);
    const challenge = res.location!;
    const count = (await paymentsOf(d)).length;
    await makeDue(d.sub);
    await runJobs({ kind: "billing.renew", subscriptionIds: [d.sub] });
    // Even once the claim is older than its lease, the cron's stale-claim settlement leaves it alone.
    const old = new Date(Date.now() - 60 * 60_000).toISOString();
    await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ?").bind(old, d.sub).run();
    await runJobs({ kind: "billing.renew", subscriptionIds: [d.sub] });
    const { settleStaleClaims } = await import("../../src/billing/claims");
    expect(await settleStaleClaims(env as any)).toEqual([]);
    // Nobody took the claim over (a takeover would stamp it and send its reference to the processor again).
    const claim = await env.DB.prepare("SELECT attempts, updated_at FROM subscription_periods WHERE subscription_id = ?").bind(d.sub).first<{ attempts: number; updated_at: string }>();
    expect(claim).toEqual({ attempts: 2, updated_at: old });
    const again = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(again.status).toBe(409);
    expect(again.text).toContain("Continue to your bank");
    expect(again.text).toContain(challenge);
    const api = await call(`/invoices/${d.invoice.id}/pay`, { key: d.acct.key, method: "POST" });
    expect(api.status, api.text).toBe(409);
    expect((await paymentsOf(d)).length).toBe(count);
    const page = await browse(d.page);
    expect(page.text).toContain("Continue to your bank");
    await browse(`${new URL(challenge).pathname}/complete`, {});
    expect((await invoiceOf(d)).status).toBe("paid");
    expect(await completed(d)).toHaveLength(1);
  });

  it("a payment the merchant cancels while its payer authenticates counts the attempt and frees the invoice", async () => {
    const d = await dunned(AUTH_CARD);
    const res = await browse(`${d.page}/pay`, SAVED);
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    const canceled = await call(`/payments/${paymentId}/cancel`, { key: d.acct.key, method: "POST" });
    expect(canceled.status, canceled.text).toBe(200);
    expect((await invoiceOf(d)).status).toBe("open");
    const page = await browse(d.page);
    expect(page.text).toContain(`action="${d.page}/pay"`);
    const paid = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(paid.status).toBe(303);
    expect((await invoiceOf(d)).status).toBe("paid");
    expect(await completed(d)).toHaveLength(1);
  });

  it("a payment its payer leaves unauthenticated is canceled by the cron after an hour, and dunning goes on", async () => {
    const d = await dunned(AUTH_CARD);
    const res = await browse(`${d.page}/pay`, SAVED);
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    const { expireAuthorizations } = await import("../../src/payments/intents");
    // Not yet: within the hour it waits.
    await expireAuthorizations(env as any, Date.now());
    expect((await call(`/payments/${paymentId}`, { key: d.acct.key })).body.status).toBe("requires_action");
    await expireAuthorizations(env as any, Date.now() + 61 * 60_000);
    expect((await call(`/payments/${paymentId}`, { key: d.acct.key })).body).toMatchObject({ status: "canceled", cancellation_reason: "abandoned" });
    expect((await env.DB.prepare("SELECT dunning_attempts AS n FROM subscriptions WHERE id = ?").bind(d.sub).first<{ n: number }>())!.n).toBe(2);
    expect((await invoiceOf(d)).status).toBe("open");
    // The retry it held back charges now.
    const count = (await paymentsOf(d)).length;
    await makeDue(d.sub);
    await runJobs({ kind: "billing.renew", subscriptionIds: [d.sub] });
    expect((await paymentsOf(d)).length).toBe(count + 1);
  });

  it("a success that finds the period settled otherwise is refunded in full", async () => {
    const d = await dunned(AUTH_CARD);
    const res = await browse(`${d.page}/pay`, SAVED);
    const paymentId = new URL(res.location!).pathname.split("/")[3];
    // The invoice was voided under the waiting payment (as a void slipping past the claim would).
    await env.DB.batch([
      env.DB.prepare("UPDATE invoices SET status = 'void' WHERE id = ?").bind(d.invoice.id),
      env.DB.prepare("UPDATE subscription_periods SET status = 'void' WHERE subscription_id = ?").bind(d.sub),
    ]);
    await browse(`${new URL(res.location!).pathname}/complete`, {});
    const payment = (await call(`/payments/${paymentId}`, { key: d.acct.key })).body;
    expect(payment.amount_refunded).toBe(3000);
    const refunds = (await call(`/refunds?payment_id=${paymentId}`, { key: d.acct.key })).body.data;
    expect(refunds).toHaveLength(1);
    expect((await invoiceOf(d)).status).toBe("void");
  });
});

describe("one charge however many clicks", () => {
  it("two submits at once charge once", async () => {
    const d = await dunned();
    const answers = await Promise.all([browse(`${d.page}/pay`, card(CARDS.visa)), browse(`${d.page}/pay`, card(CARDS.visa)), browse(`${d.page}/pay`, SAVED)]);
    expect(answers.map((a) => a.status).sort()).toContain(303);
    expect(await completed(d)).toHaveLength(1);
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: 3000 });
  });

  it("a page payment racing a dunning retry charges once", async () => {
    const d = await dunned();
    // The retry's card now succeeds too: whichever claims the attempt first charges; the other nothing.
    const good = await subscribed(d.acct, (await getSubscription(d.acct, d.sub)).user_id, (await getSubscription(d.acct, d.sub)).plan_id, CARDS.visa);
    await env.DB.prepare("UPDATE subscriptions SET processor_token = (SELECT processor_token FROM subscriptions WHERE id = ?) WHERE id = ?").bind(good.id, d.sub).run();
    await makeDue(d.sub);
    const [page] = await Promise.all([browse(`${d.page}/pay`, card(CARDS.visa)), runJobs({ kind: "billing.renew", subscriptionIds: [d.sub] })]);
    // The page paid (303), or found the retry's claim (409) or the invoice paid (303): never a second charge.
    expect([303, 409]).toContain(page.status);
    expect(await completed(d)).toHaveLength(1);
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: 3000 });
  });
});

describe("what cannot be paid", () => {
  it("a paid invoice: the post lands on its page, nothing charged", async () => {
    const d = await dunned();
    await browse(`${d.page}/pay`, card(CARDS.visa));
    const count = (await paymentsOf(d)).length;
    const again = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(again.status).toBe(303);
    expect((await browse(again.location!)).text).toContain("30.00 USD paid");
    expect((await paymentsOf(d)).length).toBe(count);
  });

  it("a void invoice answers 410 and charges nothing", async () => {
    const d = await dunned();
    expect((await call(`/invoices/${d.invoice.id}/void`, { key: d.acct.key, method: "POST" })).status).toBe(200);
    const count = (await paymentsOf(d)).length;
    const res = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(res.status).toBe(410);
    expect(res.text).not.toContain("<form");
    expect((await paymentsOf(d)).length).toBe(count);
  });

  it("a draft invoice's page answers 410", async () => {
    const d = await dunned();
    await env.DB.prepare("UPDATE invoices SET status = 'draft' WHERE id = ?").bind(d.invoice.id).run();
    const res = await browse(`${d.page}/pay`, card(CARDS.visa));
    expect(res.status).toBe(410);
    expect(await completed(d)).toHaveLength(0);
  });

  it("a wrong secret, or another account's invoice under this secret, is a 404 and charges nothing", async () => {
    const d = await dunned();
    const other = await dunned(CARDS.declineAfterFirst, "Other Pay Co");
    const secret = d.page.split("/").pop()!;
    const wrong = `${secret.slice(0, 39)}${secret.endsWith("a") ? "b" : "a"}`;
    for (const path of [`/pay/invoices/${d.invoice.id}/${wrong}/pay`, `/pay/invoices/${other.invoice.id}/${secret}/pay`]) {
      const res = await browse(path, card(CARDS.visa));
      expect(res.status, path).toBe(404);
    }
    expect(await completed(d)).toHaveLength(0);
    expect(await completed(other)).toHaveLength(0);
    // The right secret pays.
    expect((await browse(`${d.page}/pay`, card(CARDS.visa))).status).toBe(303);
    expect(await completed(d)).toHaveLength(1);
  });

  it("a form posted from another site is refused", async () => {
    const d = await dunned();
    const res = await exports.default.fetch(`${BASE}${d.page}/pay`, {
      method: "POST",
      redirect: "manual",
      body: new URLSearchParams(card(CARDS.visa)),
      headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://evil.example" },
    });
    expect(res.status).toBe(400);
    expect(await completed(d)).toHaveLength(0);
  });
});
