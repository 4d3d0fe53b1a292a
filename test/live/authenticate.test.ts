// 3-D Secure for one-off payments in live mode, against the fake Stripe: POST /payments confirms
// the PaymentIntent on session (no error_on_requires_action) and answers requires_action; the page
// runs Stripe.js with the connection's publishable key and the intent's client secret (read from
// Stripe as the page is rendered, never stored); the payer's return makes Tender READ the intent
// at Stripe (never trust the browser); Stripe's payment_intent.* events record the same outcome,
// once, in either order with the return; a success after Tender canceled is given back.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE, browse, call, expectError, signup } from "../support/http";
import { captureLogs, card } from "../support/cards";
import { eventsFor, quiesce } from "../support/db";
import { runJobs } from "../support/queue";
import { AUTHORIZATION_LIFETIME_MS, expireAuthorizations } from "../../src/payments/intents";
import { type Connected, type LiveAccount, STRIPE_CARDS, connectStripe, deliverStripeEvents, expectOneKeyPerObject, expectSpecClean, installFakeStripe, operationsOf, skipStripeEvents } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
const logs = captureLogs();
let acct: LiveAccount;
let connected: Connected;
let userId: string;
const PUBLISHABLE = "pk_live_51CornerShop3ds00000000";

beforeAll(async () => {
  acct = await signup("Live corner shop");
  connected = await connectStripe(acct, { publishableKey: PUBLISHABLE });
  const user = await call("/api/users", { key: acct.liveKey, body: { name: "Live Payer", email: "live.payer@example.com" } });
  userId = user.body.id;
});

afterAll(async () => {
  // The late success's refund settles through the queue: let it finish against the fake.
  await quiesce();
  expectSpecClean(fake);
  expectOneKeyPerObject(fake, "3-D Secure payments");
  logs.restore();
  stripe.restore();
});

const RETURN = "https://shop.example.com/done";

async function asked(body: Record<string, unknown> = {}, idempotencyKey?: string) {
  skipStripeEvents(fake);
  const from = fake.requests.length;
  const res = await call("/payments", { key: acct.liveKey, idempotencyKey, body: { amount: 4200, currency: "eur", user_id: userId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication), ...body } });
  expect(res.status, res.text).toBe(201);
  expect(res.body).toMatchObject({ livemode: true, status: "requires_action", next_action: { type: "redirect_to_url" } });
  const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.id).first<{ processor_reference: string }>();
  const intent = fake.paymentIntents.get(row!.processor_reference)!;
  return { payment: res.body as { id: string; next_action: { url: string } }, intent, created: fake.requests.slice(from).filter((r) => r.operation === "POST /v1/payment_intents") };
}


const read = async (id: string) => (await call(`/payments/${id}`, { key: acct.liveKey })).body;
const types = async (id: string) => (await eventsFor(acct.id, id)).map((e) => e.type);

describe("live 3-D Secure", () => {
  it("POST /payments confirms on session without error_on_requires_action and answers requires_action with the intent as its reference", async () => {
    const { payment, intent, created } = await asked({}, "live-3ds-1");
    expect(intent.status).toBe("requires_action");
    expect(created).toHaveLength(1);
    expect(created[0].params.error_on_requires_action).toBeUndefined();
    expect(created[0].params.confirm).toBe("true");
    expect(created[0].idempotencyKey).toBeTruthy();
    expect(await types(payment.id)).toEqual(["payment.requires_action"]);
    // The client secret is Stripe's, never Tender's to keep.
    const row = await env.DB.prepare("SELECT * FROM payments WHERE id = ?").bind(payment.id).first();
    expect(JSON.stringify(row)).not.toContain(intent.client_secret);
  });

  it("the page runs Stripe.js with the publishable key and the client secret read from Stripe; no secret key; CSP allows Stripe.js", async () => {
    const { payment, intent } = await asked();
    const from = fake.requests.length;
    const page = await browse(payment.next_action.url);
    expect(page.status).toBe(200);
    expect(operationsOf(fake).slice(from)).toEqual(["GET /v1/payment_intents/{intent}"]);
    expect(page.text).toContain('<script src="https://js.stripe.com/v3/"');
    expect(page.text).toContain(`data-publishable-key="${PUBLISHABLE}"`);
    expect(page.text).toContain(`data-client-secret="${intent.client_secret}"`);
    expect(page.text).toContain("Live corner shop");
    expect(page.text).not.toContain(connected.secretKey);
    expect(page.text).not.toContain(">Complete<");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self' https://js.stripe.com");
    // The sandbox's buttons are not live mode's.
    expect((await browse(`${payment.next_action.url}/complete`, {})).status).toBe(404);
    expect(await read(payment.id)).toMatchObject({ status: "requires_action" });
    const script = await browse("/pay/assets/authenticate.js");
    expect(script.text).toContain("handleNextAction");
    for (const line of logs.lines) expect(line.includes(intent.client_secret), "client secret logged").toBe(false);
  });

  it("a return before the payer finished records nothing (Tender asks Stripe, not the browser) and sends the payer back to the page", async () => {
    const { payment } = await asked();
    const back = await browse(`${payment.next_action.url}/return`, {});
    expect(back.status).toBe(303);
    expect(back.headers.get("location")).toBe(new URL(payment.next_action.url).pathname);
    expect(await read(payment.id)).toMatchObject({ status: "requires_action" });
    expect(await types(payment.id)).toEqual(["payment.requires_action"]);
  });

  it("completed at Stripe: the return records completed (payment.completed), then Stripe's payment_intent.succeeded changes nothing", async () => {
    const { payment, intent } = await asked();
    fake.authenticate(intent.id, "complete");
    const done = await browse(`${payment.next_action.url}/return`, {});
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`${RETURN}?payment_id=${payment.id}`);
    expect(await read(payment.id)).toMatchObject({ status: "completed", amount_received: 4200, next_action: null });
    const answers = await deliverStripeEvents(fake, connected, { twice: true });
    expect(answers.map((a) => [a.type, a.status])).toEqual([
      ["payment_intent.succeeded", 200],
      ["payment_intent.succeeded", 200],
    ]);
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.completed"]);
  });

  it("the event first, then the return: recorded once by the event, the return lands on return_url and records nothing", async () => {
    const { payment, intent } = await asked();
    fake.authenticate(intent.id, "complete");
    await deliverStripeEvents(fake, connected);
    expect(await read(payment.id)).toMatchObject({ status: "completed", amount_received: 4200 });
    const done = await browse(`${payment.next_action.url}/return`, {});
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`${RETURN}?payment_id=${payment.id}`);
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.completed"]);
  });

  it("the return and the event at once: one payment.completed", async () => {
    const { payment, intent } = await asked();
    fake.authenticate(intent.id, "complete");
    await Promise.all([browse(`${payment.next_action.url}/return`, {}), deliverStripeEvents(fake, connected), browse(`${payment.next_action.url}/return`, {})]);
    expect(await read(payment.id)).toMatchObject({ status: "completed" });
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.completed"]);
  });

  it("manual capture: payment_intent.amount_capturable_updated makes it requires_capture (payment.authorized); capture then works", async () => {
    const { payment, intent } = await asked({ capture_method: "manual" });
    fake.authenticate(intent.id, "complete");
    await deliverStripeEvents(fake, connected);
    expect(await read(payment.id)).toMatchObject({ status: "requires_capture", amount_capturable: 4200 });
    const captured = await call(`/payments/${payment.id}/capture`, { key: acct.liveKey, body: {} });
    expect(captured.status, captured.text).toBe(200);
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.authorized", "payment.completed"]);
  });

  it("failed at Stripe: payment_intent.payment_failed records failed, authentication_failed (payment.failed); the return lands on return_url", async () => {
    const { payment, intent } = await asked();
    fake.authenticate(intent.id, "fail");
    await deliverStripeEvents(fake, connected);
    expect(await read(payment.id)).toMatchObject({ status: "failed", failure_code: "authentication_failed", next_action: null });
    const done = await browse(`${payment.next_action.url}/return`, {});
    expect(done.headers.get("location")).toBe(`${RETURN}?payment_id=${payment.id}`);
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.failed"]);
  });

  it("cancel cancels the intent at Stripe (payment.canceled); Stripe's payment_intent.canceled changes nothing more", async () => {
    const { payment, intent } = await asked();
    const res = await call(`/payments/${payment.id}/cancel`, { key: acct.liveKey, body: {} });
    expect(res.status, res.text).toBe(200);
    expect(intent.status).toBe("canceled");
    await deliverStripeEvents(fake, connected);
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.canceled"]);
    const page = await browse(payment.next_action.url);
    expect(page.text).toContain("Payment canceled");
    expect(page.text).not.toContain("<button");
  });

  it("a success that arrives after Tender canceled the payment is refunded in full at once, with refund.initiated, once", async () => {
    const { payment, intent } = await asked();
    // Canceled at Tender while the payer was finishing at Stripe (Tender's cancel lost the race there).
    await env.DB.prepare("UPDATE payments SET status = 'canceled', next_action = NULL, canceled_at = ? WHERE id = ?").bind(new Date().toISOString(), payment.id).run();
    fake.authenticate(intent.id, "complete");
    await deliverStripeEvents(fake, connected, { twice: true });
    await browse(`${payment.next_action.url}/return`, {});
    const now = await read(payment.id);
    expect(now).toMatchObject({ status: "refunded", amount_received: 4200, amount_refunded: 4200 });
    const refunds = await env.DB.prepare("SELECT id, amount FROM refunds WHERE payment_id = ?").bind(payment.id).all();
    expect(refunds.results).toHaveLength(1);
    expect(refunds.results[0]).toMatchObject({ amount: 4200 });
    const refundEvents = (await eventsFor(acct.id, refunds.results[0].id as string)).map((e) => e.type);
    expect(refundEvents[0]).toBe("refund.initiated");
    // And the money goes back at Stripe: one refund of the whole intent.
    await runJobs({ kind: "settleRefund", refundId: refunds.results[0].id as string });
    expect([...fake.refunds.values()].filter((r) => r.payment_intent === intent.id).map((r) => r.amount)).toEqual([4200]);
  });

  it("Stripe unreachable: the page and the return answer a 'try again' page (409), never JSON or internals, and record nothing", async () => {
    const { payment } = await asked();
    fake.inject({ kind: "status", status: 500, operation: "GET /v1/payment_intents/{intent}", times: 8 });
    const page = await browse(payment.next_action.url);
    expect(page.status).toBe(409);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.text).toContain("Please try again");
    expect(page.text).not.toMatch(/stripe|error:|at \w+ \(/i);
    const back = await browse(`${payment.next_action.url}/return`, {});
    expect(back.status).toBe(409);
    fake.inject();
    expect(await types(payment.id)).toEqual(["payment.requires_action"]);
  });

  it("the cron's 7-day cancel of a payment whose payer finished at Stripe meanwhile records nothing wrong; Stripe's event then records the success", async () => {
    const { payment, intent } = await asked();
    fake.authenticate(intent.id, "complete");
    const later = Date.now() + AUTHORIZATION_LIFETIME_MS + 60_000;
    await expireAuthorizations(env, later);
    expect(await read(payment.id)).toMatchObject({ status: "requires_action" });
    expect(await types(payment.id)).toEqual(["payment.requires_action"]);
    await deliverStripeEvents(fake, connected);
    expect(await read(payment.id)).toMatchObject({ status: "completed", amount_received: 4200 });
    expect(await types(payment.id)).toEqual(["payment.requires_action", "payment.completed"]);
  });

  it("another account's key reads no live payment of this one (404), and a wrong page secret is 404", async () => {
    const { payment } = await asked();
    const stranger = await signup("Stranger");
    expectError(await call(`/payments/${payment.id}`, { key: stranger.liveKey }), 404, "not_found_error");
    expect((await browse(`/pay/authenticate/${payment.id}/${"x".repeat(40)}/return`, {})).status).toBe(404);
    expect((await browse(`/pay/authenticate/${payment.id}/${"x".repeat(40)}`)).status).toBe(404);
  });
});

describe("live incomplete subscriptions", () => {
  let planId: string;
  beforeAll(async () => {
    const plan = await call("/subscription-plans", { key: acct.liveKey, body: { name: "Live monthly", price: 12, currency: "eur", interval: "month" } });
    expect(plan.status, plan.text).toBe(201);
    planId = plan.body.id;
  });

  async function incomplete() {
    skipStripeEvents(fake);
    const res = await call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication) } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ livemode: true, status: "incomplete", latest_payment: { status: "requires_action" } });
    const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.latest_payment.id).first<{ processor_reference: string }>();
    return { sub: res.body as { id: string; latest_payment: { id: string; next_action: { url: string } } }, intent: fake.paymentIntents.get(row!.processor_reference)! };
  }
  const status = async (id: string) => (await call(`/subscriptions/${id}`, { key: acct.liveKey })).body.status;
  const notifications = async (id: string) =>
    (await env.DB.prepare("SELECT type FROM events WHERE account_id = ? AND type LIKE 'subscription_%' AND payload LIKE ? ORDER BY id").bind(acct.id, `%${id}%`).all<{ type: string }>()).results.map((r) => r.type);

  it("Stripe's payment_intent.succeeded (twice) and the return activate it once: active, subscription_created once", async () => {
    const { sub, intent } = await incomplete();
    fake.authenticate(intent.id, "complete");
    await Promise.all([deliverStripeEvents(fake, connected, { twice: true }), browse(`${sub.latest_payment.next_action.url}/return`, {})]);
    expect(await status(sub.id)).toBe("active");
    expect(await notifications(sub.id)).toEqual(["subscription_created"]);
    expect(await read(sub.latest_payment.id)).toMatchObject({ status: "completed" });
  });

  it("23 hours on, the cron cancels its PaymentIntent at Stripe and expires it; a success Stripe reports after is refunded", async () => {
    const { sub, intent } = await incomplete();
    const { INCOMPLETE_LIFETIME_MS, expireIncompleteSubscriptions } = await import("../../src/billing/incomplete");
    await expireIncompleteSubscriptions(env, Date.now() + INCOMPLETE_LIFETIME_MS);
    expect(intent.status).toBe("canceled");
    expect(await status(sub.id)).toBe("incomplete_expired");
    expect(await notifications(sub.id)).toEqual(["subscription_updated"]);
    await deliverStripeEvents(fake, connected);
    expect(await status(sub.id)).toBe("incomplete_expired");
  });
});
