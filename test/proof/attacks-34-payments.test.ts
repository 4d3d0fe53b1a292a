// Reviewer R4's attacks on issue 34's one-off payments and saved cards (test mode, the ledger
// processor, which is idempotent by reference as a real processor is; and live mode against the
// fake Stripe). After each: no money made or lost (what the processor captured is what Tender
// says was received; received + released = authorized; refunds never more than received), and
// each payment's events once, in order.
import { env } from "../support/env";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createUser, dueSubscription } from "../support/fixtures";
import { renewChunk } from "../../src/billing/renewals";
import { CARDS, captureLogs, card, cardFields, expectNoCardData } from "../support/cards";
import { countRows, eventsFor } from "../support/db";
import { ledgerProcessor } from "../support/faults";
import { useProcessor } from "../../src/processor";
import { AUTHORIZATION_LIFETIME_MS, expireAuthorizations } from "../../src/payments/intents";
import { MAX_AMOUNT } from "../../src/domain/money";
import { type LiveAccount, STRIPE_CARDS, connectStripe, installFakeStripe } from "../support/live";

const logs = captureLogs();
let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let customer: { id: string; email: string };

beforeAll(async () => {
  acct = await signup("R4 shop");
  other = await signup("R4 other");
  customer = await createUser(acct, { name: "Grace Hopper", email: "grace@example.com" });
});

afterEach(() => useProcessor());

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const pay = (body: Record<string, unknown>, options: { key?: string; idempotencyKey?: string } = {}) =>
  call("/payments", { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body: { amount: 1000, currency: "usd", user_id: customer.id, ...cardFields(CARDS.visa), ...body } });
const capture = (id: string, body: Record<string, unknown> = {}, idempotencyKey?: string, key = acct.key) => call(`/payments/${id}/capture`, { key, idempotencyKey, body });
const cancel = (id: string, body: Record<string, unknown> = {}, idempotencyKey?: string, key = acct.key) => call(`/payments/${id}/cancel`, { key, idempotencyKey, body });
const read = async (id: string) => (await call(`/payments/${id}`, { key: acct.key })).body;
const types = async (id: string) => (await eventsFor(acct.id, id)).map((e) => e.type);

async function authorized(amount = 1000, extra: Record<string, unknown> = {}) {
  const res = await pay({ amount, capture_method: "manual", ...extra });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("requires_capture");
  return res.body as { id: string; created_at: string; capture_before: string; amount: number };
}

/** Lets a claim whose outcome is unknown be retried (as after the idempotency lock's timeout). */
const unlock = (key: string) => env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - 600000 WHERE account_id = ? AND key = ?").bind(acct.id, key).run();

describe("captures that are lost, retried or doubled", () => {
  it("a capture whose answer was lost, then a capture of another amount under another key: Tender records what the processor captured", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const auth = await authorized(1000);
    // Every try of the first capture times out after the processor captured: its outcome is unknown.
    ledger.inject({ kind: "timeout_after_success", method: "capturePayment" });
    const lost = await capture(auth.id, { amount: 400 }, "r4-lost-a");
    expect(lost.status, lost.text).toBe(500);
    ledger.inject();
    const second = await capture(auth.id, { amount: 900 }, "r4-lost-b");
    const captured = ledger.moneyMoved("capturePayment").filter((c) => c.reference.startsWith(auth.id));
    expect(captured.map((c) => c.amount)).toEqual([400]);
    const payment = await read(auth.id);
    // The processor captured 400: Tender must never say 900 was received (500 would be refundable money that never came in).
    if (payment.status === "completed") expect(payment.amount_received).toBe(400);
    if (second.status === 200) expect(second.body.amount_received).toBe(400);
    expect(payment.amount_received + payment.amount_capturable).toBeLessThanOrEqual(1000);
    const refund = await call("/refunds", { key: acct.key, body: { payment_id: auth.id } });
    if (refund.status === 201) expect(refund.body.amount).toBeLessThanOrEqual(400);
  });

  it("the same Idempotency-Key with another amount answers 422 and captures nothing more", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const auth = await authorized(1000);
    expect((await capture(auth.id, { amount: 300 }, "r4-same-key")).status).toBe(200);
    const again = await capture(auth.id, { amount: 500 }, "r4-same-key");
    expectError(again, 422, "idempotency_error", "idempotency_key_reused");
    expect(ledger.moneyMoved("capturePayment")).toHaveLength(1);
    expect(await read(auth.id)).toMatchObject({ status: "completed", amount_received: 300 });
    expect(await types(auth.id)).toEqual(["payment.authorized", "payment.completed"]);
  });

  it("POST /payments: the same key with another amount answers 422; a replay after a decline replays the 402", async () => {
    const first = await pay({ amount: 700 }, { idempotencyKey: "r4-pay-key" });
    expect(first.status).toBe(201);
    expectError(await pay({ amount: 701 }, { idempotencyKey: "r4-pay-key" }), 422, "idempotency_error", "idempotency_key_reused");
    const declined = await call("/payments", { key: acct.key, idempotencyKey: "r4-decline", body: { amount: 500, currency: "usd", user_id: customer.id, ...cardFields(CARDS.declined) } });
    expectError(declined, 402, "card_error", "card_declined");
    const replay = await call("/payments", { key: acct.key, idempotencyKey: "r4-decline", body: { amount: 500, currency: "usd", user_id: customer.id, ...cardFields(CARDS.declined) } });
    expect(replay.status).toBe(402);
    expect(replay.body.error.payment_id).toBe(declined.body.error.payment_id);
    expect(await countRows("payments", "id = ?", declined.body.error.payment_id)).toBe(1);
    expect(await types(declined.body.error.payment_id)).toEqual(["payment.failed"]);
  });

  it("three captures at once under three keys: one capture at the processor, one payment.completed", async () => {
    const ledger = ledgerProcessor([{ kind: "slow", method: "capturePayment", ms: 40 }]);
    ledger.install();
    const auth = await authorized(1000);
    const answers = await Promise.all([100, 200, 300].map((amount, i) => capture(auth.id, { amount }, `r4-three-${i}`)));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(ledger.moneyMoved("capturePayment")).toHaveLength(1);
    const won = answers.find((a) => a.status === 200)!;
    expect((await read(auth.id)).amount_received).toBe(won.body.amount_received);
    expect(await types(auth.id)).toEqual(["payment.authorized", "payment.completed"]);
  });

  it("a capture whose lease ran out while it was at the processor, and a second capture meanwhile: one capture recorded, the amount the processor took", async () => {
    const ledger = ledgerProcessor([{ kind: "slow", method: "capturePayment", ms: 150, times: 1 }]);
    ledger.install();
    const auth = await authorized(1000);
    const first = capture(auth.id, { amount: 250 }, "r4-lease-a");
    await new Promise((r) => setTimeout(r, 40));
    // The first's lease runs out (as after 2 minutes at the processor).
    await env.DB.prepare("UPDATE job_runs SET lease_until = 0 WHERE key = ?").bind(`payment_step:${auth.id}`).run();
    const second = await capture(auth.id, { amount: 750 }, "r4-lease-b");
    const a = await first;
    expect([a.status, second.status].filter((s) => s === 200)).toHaveLength(1);
    const moved = ledger.moneyMoved("capturePayment");
    expect(moved).toHaveLength(1);
    expect((await read(auth.id)).amount_received).toBe(moved[0].amount);
    expect(await types(auth.id)).toEqual(["payment.authorized", "payment.completed"]);
  });
});

describe("capture against cancel and the expiry cron", () => {
  it("a capture and the cron at the 7-day boundary: one wins, money and events balance", async () => {
    const ledger = ledgerProcessor([{ kind: "slow", ms: 30 }]);
    ledger.install();
    const auth = await authorized(1000);
    const boundary = Date.parse(auth.capture_before);
    const [res, cron] = await Promise.all([capture(auth.id, { amount: 600 }), expireAuthorizations(env, boundary)]);
    const payment = await read(auth.id);
    const moved = ledger.calls.filter((c) => c.reference.startsWith(auth.id) && c.moved && c.method !== "authorizeCard").map((c) => c.method);
    expect(moved).toHaveLength(1);
    if (payment.status === "completed") {
      expect(res.status).toBe(200);
      expect(moved).toEqual(["capturePayment"]);
      expect(payment.amount_received).toBe(600);
      expect(await types(auth.id)).toEqual(["payment.authorized", "payment.completed"]);
    } else {
      expect(payment).toMatchObject({ status: "canceled", cancellation_reason: "expired", amount_received: 0 });
      expect(cron.canceled).toBe(1);
      expect(moved).toEqual(["cancelPayment"]);
      expect(res.status).toBe(409);
      expect(await types(auth.id)).toEqual(["payment.authorized", "payment.canceled"]);
    }
  });

  it("a capture after capture_before, before the cron came by: refused as Stripe refuses it (409), nothing captured; the cron then cancels it", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const auth = await authorized(1000);
    const lapsed = new Date(Date.now() - 1000).toISOString();
    await env.DB.prepare("UPDATE payments SET capture_before = ? WHERE id = ?").bind(lapsed, auth.id).run();
    const late = await capture(auth.id, { amount: 500 });
    expectError(late, 409, "invalid_request_error", "payment_unexpected_state");
    expect(late.body.error.message).toContain("expired");
    expect(ledger.moneyMoved("capturePayment")).toHaveLength(0);
    await expireAuthorizations(env, Date.now());
    expect(await read(auth.id)).toMatchObject({ status: "canceled", cancellation_reason: "expired", amount_received: 0 });
    expect(await types(auth.id)).toEqual(["payment.authorized", "payment.canceled"]);
  });

  it("the cron never cancels an authorization a millisecond before capture_before", async () => {
    const auth = await authorized(1000);
    await expireAuthorizations(env, Date.parse(auth.capture_before) - 1);
    expect((await read(auth.id)).status).toBe("requires_capture");
    await expireAuthorizations(env, Date.parse(auth.capture_before));
    expect(await read(auth.id)).toMatchObject({ status: "canceled", cancellation_reason: "expired" });
  });
});

describe("refunds of a partial capture", () => {
  it("concurrent refunds never take more than was received", async () => {
    const auth = await authorized(1000);
    expect((await capture(auth.id, { amount: 600 })).status).toBe(200);
    const answers = await Promise.all([0, 1, 2].map((i) => call("/refunds", { key: acct.key, idempotencyKey: `r4-refund-${i}`, body: { payment_id: auth.id, amount: 250 } })));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(2);
    const sum = await env.DB.prepare("SELECT COALESCE(SUM(amount), 0) AS n FROM refunds WHERE payment_id = ? AND status != 'failed'").bind(auth.id).first<{ n: number }>();
    expect(sum!.n).toBeLessThanOrEqual(600);
    expect((await read(auth.id)).amount_refunded).toBe(500);
  });
});

describe("amounts and currencies at the limits", () => {
  for (const [currency, amount] of [
    ["usd", 1],
    ["usd", MAX_AMOUNT],
    ["jpy", 1],
    ["jpy", 123_456],
    ["kwd", 1],
    ["bhd", 12_345],
  ] as const) {
    it(`${amount} ${currency}: authorized, captured in full, refunded in full, integers throughout`, async () => {
      const auth = await authorized(amount, { currency });
      const done = await capture(auth.id);
      expect(done.status, done.text).toBe(200);
      expect(done.body).toMatchObject({ currency, amount, amount_received: amount, amount_capturable: 0 });
      const refund = await call("/refunds", { key: acct.key, body: { payment_id: auth.id } });
      expect(refund.status, refund.text).toBe(201);
      expect(refund.body.amount).toBe(amount);
      expect(Number.isInteger((await read(auth.id)).amount_refunded)).toBe(true);
    });
  }

  it("MAX_AMOUNT + 1 answers 400, and a capture of 0 or MAX + 1 answers 400", async () => {
    expectError(await pay({ amount: MAX_AMOUNT + 1 }), 400, "invalid_request_error", "parameter_invalid");
    const auth = await authorized(5);
    expectError(await capture(auth.id, { amount: MAX_AMOUNT + 1 }), 400, "invalid_request_error", "parameter_invalid");
  });
});

describe("another account, mode or user", () => {
  it("capture and cancel of another account's payment, with its live or test key, answer 404 and change nothing", async () => {
    const auth = await authorized(1000);
    for (const key of [other.key, other.liveKey, acct.liveKey]) {
      expectError(await capture(auth.id, {}, undefined, key), 404, "not_found_error", "resource_missing");
      expectError(await cancel(auth.id, {}, undefined, key), 404, "not_found_error", "resource_missing");
    }
    expect((await read(auth.id)).status).toBe("requires_capture");
    expect(await types(auth.id)).toEqual(["payment.authorized"]);
  });

  it("another account's saved card, or a test card with a live key, answers 404 on POST /payments", async () => {
    const mine = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    expect(mine.status, mine.text).toBe(201);
    const stranger = await createUser(other, { name: "Mallory", email: "mallory@example.com" });
    const theirs = await call("/payments", { key: other.key, body: { amount: 100, currency: "usd", user_id: stranger.id, payment_method: mine.body.id } });
    expectError(theirs, 404, "not_found_error", "resource_missing");
    expect((await call(`/api/users/${customer.id}/payment-methods/${mine.body.id}`, { key: other.key, method: "DELETE" })).status).toBe(404);
  });
});

describe("saved cards", () => {
  it("a detach racing a charge of that card: either the charge was made before (and names the card) or it is refused; nothing half-written", async () => {
    const pm = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    const [charged, detached] = await Promise.all([
      call("/payments", { key: acct.key, body: { amount: 100, currency: "usd", user_id: customer.id, payment_method: pm.body.id } }),
      call(`/api/users/${customer.id}/payment-methods/${pm.body.id}`, { key: acct.key, method: "DELETE" }),
    ]);
    expect(detached.status, detached.text).toBe(200);
    if (charged.status === 201) {
      expect(await types(charged.body.id)).toEqual(["payment.completed"]);
    } else {
      expectError(charged, 400, "invalid_request_error", "payment_method_detached");
    }
    const events = await env.DB.prepare("SELECT type FROM events WHERE account_id = ? AND object_id = ? ORDER BY rowid").bind(acct.id, pm.body.id).all<{ type: string }>();
    expect(events.results.map((e) => e.type)).toEqual(["payment_method.attached", "payment_method.detached"]);
  });

  it("a detach racing a subscription's first charge of that card: never an active subscription on a detached card", async () => {
    const plan = await call("/subscription-plans", { key: acct.key, body: { name: "R4 monthly", price: 900, currency: "usd", interval: "month" } });
    expect(plan.status, plan.text).toBe(201);
    const pm = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    const ledger = ledgerProcessor([{ kind: "slow", method: "chargeToken", ms: 200 }]);
    ledger.install();
    const subscribing = call("/subscriptions", { key: acct.key, body: { user_id: customer.id, plan_id: plan.body.id, payment_method: pm.body.id } });
    await new Promise((r) => setTimeout(r, 80));
    const detached = await call(`/api/users/${customer.id}/payment-methods/${pm.body.id}`, { key: acct.key, method: "DELETE" });
    const sub = await subscribing;
    const method = (await call(`/api/users/${customer.id}/payment-methods/${pm.body.id}`, { key: acct.key })).body;
    const charging = sub.status === 201 && ["active", "trialing", "past_due", "incomplete"].includes(sub.body.status) && sub.body.payment_method === pm.body.id;
    expect({ charging, detached: method.detached_at !== null, detach: detached.status }).not.toMatchObject({ charging: true, detached: true });
    // The detach came while the card was being charged: it waits its turn (409), the subscription is made.
    expectError(detached, 409, "invalid_request_error", "payment_method_in_use");
    expect(sub.body).toMatchObject({ status: "active", payment_method: pm.body.id });
    // Whatever won, the first charge that moved money is recorded.
    expect(ledger.moneyMoved("chargeToken").length).toBe(sub.status === 201 ? 1 : 0);
  });

  it("a detach racing a past_due subscription's charge of a saved card given by PUT: the detach waits (409), the period is paid with that card", async () => {
    const plan = await call("/subscription-plans", { key: acct.key, body: { name: "Lead past-due", price: 9, currency: "usd", interval: "month" } });
    expect(plan.status, plan.text).toBe(201);
    const ledger = ledgerProcessor();
    ledger.install();
    const subscriptionId = await dueSubscription(acct, customer.id, plan.body.id);
    ledger.inject({ kind: "decline", method: "chargeToken", when: (call) => call.reference.startsWith(`${subscriptionId}:`) });
    expect(await renewChunk(env, [subscriptionId], Date.now())).toEqual(["past_due"]);
    const pm = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    expect(pm.status, pm.text).toBe(201);
    // The saved card's charge of the unpaid period is slow: the detach lands while it is at the processor.
    ledger.inject({ kind: "slow", method: "chargeToken", ms: 200 });
    const updating = call(`/subscriptions/${subscriptionId}`, { key: acct.key, method: "PUT", body: { payment_method: pm.body.id } });
    await new Promise((r) => setTimeout(r, 80));
    const detached = await call(`/api/users/${customer.id}/payment-methods/${pm.body.id}`, { key: acct.key, method: "DELETE" });
    const updated = await updating;
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body).toMatchObject({ status: "active", payment_method: pm.body.id });
    expectError(detached, 409, "invalid_request_error", "payment_method_in_use");
    const method = (await call(`/api/users/${customer.id}/payment-methods/${pm.body.id}`, { key: acct.key })).body;
    expect(method.detached_at).toBeNull();
  });

  it("the same token saved twice under one Idempotency-Key makes one payment method and one event", async () => {
    const body = { processor_token: "pm_card_mastercard" };
    const [a, b] = await Promise.all([0, 1].map(() => call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, idempotencyKey: "r4-attach", body })));
    const ok = [a, b].filter((r) => r.status === 201);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    expect(await countRows("events", "account_id = ? AND object_id = ? AND type = 'payment_method.attached'", acct.id, ok[0].body.id)).toBe(1);
  });
});

describe("hostile description and metadata", () => {
  const refusals: [string, Record<string, unknown>, string][] = [
    ["a card number in a metadata value", { metadata: { note: "4242 4242 4242 4242" } }, "card_number_in_text"],
    ["a card number with dashes in the description", { description: "pay with 4000-0566-5566-5556 please" }, "card_number_in_text"],
    ["nested metadata", { metadata: { a: { b: "c" } } }, "parameter_invalid"],
    ["51 metadata keys", { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"])) }, "parameter_invalid"],
    ["a 501-character metadata value", { metadata: { k: "x".repeat(501) } }, "parameter_invalid"],
    ["a 41-character metadata key", { metadata: { ["k".repeat(41)]: "v" } }, "parameter_invalid"],
    ["a huge description", { description: "x".repeat(100_000) }, "parameter_invalid"],
  ];
  for (const [name, body, code] of refusals) {
    it(`${name}: 400 ${code}, nothing charged or written`, async () => {
      const ledger = ledgerProcessor();
      ledger.install();
      const before = await countRows("payments", "account_id = ?", acct.id);
      const res = await pay(body);
      expect(res.status, res.text.slice(0, 300)).toBe(400);
      expect(res.body.error.code).toBe(code);
      expect(ledger.calls).toHaveLength(0);
      expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
    });
  }
});

describe("live mode against the fake Stripe", () => {
  const stripe = installFakeStripe();
  const { fake } = stripe;
  let live: LiveAccount;
  beforeAll(async () => {
    live = await signup("R4 live");
    await connectStripe(live);
  });
  afterAll(() => stripe.restore());
  /** Drops the faults not used up (every try of the lost request took one). */
  const clearFaults = () => ((fake as unknown as { faults: unknown[] }).faults = []);

  async function liveAuthorized(amount: number) {
    const user = await call("/api/users", { key: live.liveKey, body: { name: "Live R4", email: `r4.${Math.random().toString(36).slice(2)}@example.com` } });
    const res = await call("/payments", { key: live.liveKey, body: { amount, currency: "usd", user_id: user.body.id, capture_method: "manual", ...card(STRIPE_CARDS.succeeds) } });
    expect(res.status, res.text).toBe(201);
    const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.id).first<{ processor_reference: string }>();
    return { id: res.body.id as string, intent: () => fake.paymentIntents.get(row!.processor_reference)! };
  }

  it("a capture whose answer was lost, Stripe's key forgotten (a day on), then a capture of another amount: Tender records what Stripe captured", async () => {
    const auth = await liveAuthorized(3000);
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents/{intent}/capture", times: 100 });
    const lost = await call(`/payments/${auth.id}/capture`, { key: live.liveKey, body: { amount: 1000 }, idempotencyKey: "r4-live-lost" });
    expect(lost.status, lost.text).toBe(500);
    clearFaults();
    expect(auth.intent()).toMatchObject({ status: "succeeded", amount_received: 1000 });
    fake.forgetIdempotencyKeys();
    const second = await call(`/payments/${auth.id}/capture`, { key: live.liveKey, body: { amount: 2500 }, idempotencyKey: "r4-live-second" });
    const payment = (await call(`/payments/${auth.id}`, { key: live.liveKey })).body;
    if (payment.status === "completed") expect(payment.amount_received).toBe(auth.intent().amount_received);
    if (second.status === 200) expect(second.body.amount_received).toBe(1000);
  });

  it("a capture whose answer was lost, then a cancel: never canceled at Tender while Stripe holds the money", async () => {
    const auth = await liveAuthorized(3000);
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents/{intent}/capture", times: 100 });
    expect((await call(`/payments/${auth.id}/capture`, { key: live.liveKey, body: { amount: 1200 }, idempotencyKey: "r4-live-cap-cancel" })).status).toBe(500);
    clearFaults();
    const canceled = await call(`/payments/${auth.id}/cancel`, { key: live.liveKey, body: {} });
    expect(canceled.status).not.toBe(200);
    const payment = (await call(`/payments/${auth.id}`, { key: live.liveKey })).body;
    expect(payment.status).not.toBe("canceled");
    expect(auth.intent()).toMatchObject({ status: "succeeded", amount_received: 1200 });
  });

  it("a capture whose answer was lost and never retried: the cron at 7 days records what Stripe captured, not a requires_capture forever", async () => {
    const user = await call("/api/users", { key: live.liveKey, body: { name: "Live Cron", email: "live.cron.r4@example.com" } });
    const made = await call("/payments", { key: live.liveKey, body: { amount: 3000, currency: "usd", user_id: user.body.id, capture_method: "manual", ...card(STRIPE_CARDS.succeeds) } });
    expect(made.status, made.text).toBe(201);
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents/{intent}/capture", times: 100 });
    expect((await call(`/payments/${made.body.id}/capture`, { key: live.liveKey, body: { amount: 1200 } })).status).toBe(500);
    (fake as unknown as { faults: unknown[] }).faults = [];
    fake.forgetIdempotencyKeys();
    await expireAuthorizations(env, Date.parse(made.body.capture_before));
    await expireAuthorizations(env, Date.parse(made.body.capture_before) + 60_000);
    // Stripe holds 1200 captured; Tender must come to say so (completed, 1200 received), not keep it requires_capture with nothing received.
    expect((await call(`/payments/${made.body.id}`, { key: live.liveKey })).body).toMatchObject({ status: "completed", amount_received: 1200, amount_capturable: 0 });
    expect((await eventsFor(live.id, made.body.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.completed"]);
  });
});

// Silence the unused import check for the lifetime constant the boundary tests lean on.
void AUTHORIZATION_LIFETIME_MS;
