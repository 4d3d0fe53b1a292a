// One-off payments (POST /payments, capture, cancel, the cron's expiry of authorizations) in test
// mode: every status, the events, refunds on what was captured, bad input that writes nothing,
// another account's or mode's objects, and retries or races that capture once.
import { env } from "../support/env";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Account, ISO_MS, call, d1Usage, expectError, roundTrips, signup } from "../support/http";
import { createUser, warm } from "../support/fixtures";
import { CARDS, captureLogs, cardFields, expectNoCardData } from "../support/cards";
import { countRows, eventsFor, eventsOf } from "../support/db";
import { ledgerProcessor } from "../support/faults";
import { useProcessor } from "../../src/processor";
import { AUTHORIZATION_LIFETIME_MS, expireAuthorizations } from "../../src/payments/intents";

const logs = captureLogs();
let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let customer: { id: string; email: string };

beforeAll(async () => {
  acct = await signup("Shop");
  other = await signup("Other shop");
  customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
});

afterEach(() => useProcessor());

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const pay = (body: Record<string, unknown>, options: { key?: string; idempotencyKey?: string; pan?: string } = {}) =>
  call("/payments", {
    key: options.key ?? acct.key,
    idempotencyKey: options.idempotencyKey,
    body: { amount: 1000, currency: "usd", user_id: customer.id, ...cardFields(options.pan ?? CARDS.visa), ...body },
  });

async function authorized(amount = 1000) {
  const res = await pay({ amount, capture_method: "manual" });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("requires_capture");
  return res.body as { id: string; created_at: string };
}

const capture = (id: string, body: Record<string, unknown> = {}, options: { key?: string; idempotencyKey?: string } = {}) =>
  call(`/payments/${id}/capture`, { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body });
const cancel = (id: string, body: Record<string, unknown> = {}, options: { key?: string; idempotencyKey?: string } = {}) =>
  call(`/payments/${id}/cancel`, { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body });

describe("POST /payments", () => {
  it("captures at once by default: 201 completed, amount_received, payment.completed in the document's shape", async () => {
    const res = await pay({ description: "Order 6735", metadata: { order_id: "6735" } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^pay_/),
      object: "payment",
      livemode: false,
      subscription_id: null,
      invoice_id: null,
      user_id: customer.id,
      amount: 1000,
      currency: "usd",
      status: "completed",
      capture_method: "automatic",
      amount_capturable: 0,
      amount_received: 1000,
      amount_refunded: 0,
      next_action: null,
      payment_method_id: null,
      capture_before: null,
      canceled_at: null,
      cancellation_reason: null,
      description: "Order 6735",
      metadata: { order_id: "6735" },
      failure_code: null,
      failure_message: null,
      card: { brand: "visa", last4: "4242", exp_month: 12, exp_year: expect.any(Number) },
      created_at: expect.stringMatching(ISO_MS),
    });
    expect((await call(`/payments/${res.body.id}`, { key: acct.key })).body).toEqual(res.body);
    const events = await eventsFor(acct.id, res.body.id);
    expect(events.map((e) => e.type)).toEqual(["payment.completed"]);
    expect(events[0].body.data).toEqual({
      transaction_id: res.body.id,
      amount: 1000,
      currency: "usd",
      status: "completed",
      customer: { id: customer.id, email: "ada@example.com" },
      subscription_id: null,
    });
  });

  it("capture_method manual authorizes: requires_capture, amount_capturable held 7 days, payment.authorized with the payment", async () => {
    const res = await pay({ capture_method: "manual", amount: 2500 });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "requires_capture", capture_method: "manual", amount: 2500, amount_capturable: 2500, amount_received: 0 });
    expect(Date.parse(res.body.capture_before) - Date.parse(res.body.created_at)).toBe(AUTHORIZATION_LIFETIME_MS);
    const events = await eventsFor(acct.id, res.body.id);
    expect(events.map((e) => e.type)).toEqual(["payment.authorized"]);
    expect(events[0].body.data).toEqual(res.body);
    expect(events[0].body.object_id).toBe(res.body.id);
  });

  it("a decline answers 402 card_declined with decline_code and payment_id, and keeps the failed payment (payment.failed)", async () => {
    const res = await pay({}, { pan: CARDS.insufficientFunds });
    expectError(res, 402, "card_error", "card_declined");
    expect(res.body.error.decline_code).toBe("insufficient_funds");
    const id = res.body.error.payment_id;
    expect(id).toMatch(/^pay_/);
    const payment = await call(`/payments/${id}`, { key: acct.key });
    expect(payment.body).toMatchObject({ status: "failed", failure_code: "insufficient_funds", amount_received: 0, amount_capturable: 0, subscription_id: null });
    expect((await eventsFor(acct.id, id)).map((e) => e.type)).toEqual(["payment.failed"]);
  });

  it("a manual capture of a declining card fails the same way, holding nothing", async () => {
    const res = await pay({ capture_method: "manual" }, { pan: CARDS.declined });
    expectError(res, 402, "card_error", "card_declined");
    const payment = await call(`/payments/${res.body.error.payment_id}`, { key: acct.key });
    expect(payment.body).toMatchObject({ status: "failed", capture_method: "manual", amount_capturable: 0, capture_before: null });
  });

  it("a retry with the same Idempotency-Key replays the answer and authorizes once", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const first = await pay({ capture_method: "manual" }, { idempotencyKey: "pay-retry-1" });
    const again = await pay({ capture_method: "manual" }, { idempotencyKey: "pay-retry-1" });
    expect(first.status, first.text).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(first.body.id);
    expect(ledger.moneyMoved("authorizeCard")).toHaveLength(1);
    expect(await countRows("payments", "account_id = ? AND charge_reference LIKE '%pay-retry-1%'", acct.id)).toBe(1);
  });
});

describe("bad input: a clear 4xx, nothing written", () => {
  const refusals: [string, Record<string, unknown>, number, string, string | undefined][] = [
    ["amount 0", { amount: 0 }, 400, "parameter_invalid", "amount"],
    ["a negative amount", { amount: -5 }, 400, "parameter_invalid", "amount"],
    ["a fractional amount", { amount: 10.5 }, 400, "amount_not_integer", "amount"],
    ["an amount as a string", { amount: "1000" }, 400, "parameter_invalid", "amount"],
    ["an unknown currency", { currency: "xyz" }, 400, "currency_invalid", "currency"],
    ["an unknown capture_method", { capture_method: "later" }, 400, "parameter_invalid", "capture_method"],
    ["a typo'd field", { descripton: "x" }, 400, "parameter_unknown", "descripton"],
    ["an unknown user", { user_id: "usr_01jd2x4k5m6n7p8q9r0s1t2v3w" }, 404, "resource_missing", "user_id"],
    ["a return_url that is not http(s)", { return_url: "javascript:alert(1)" }, 400, "url_invalid", "return_url"],
    ["a plain-http return_url off localhost", { return_url: "http://shop.example.com/done" }, 400, "url_invalid", "return_url"],
    ["a return_url with a user name and password", { return_url: "https://user:pw@shop.example.com/done" }, 400, "url_invalid", "return_url"],
    ["a data: return_url", { return_url: "data:text/html,<script>alert(1)</script>" }, 400, "url_invalid", "return_url"],
    ["metadata with a number value", { metadata: { n: 1 } }, 400, "parameter_invalid", "metadata.n"],
    ["a saved payment method with card fields beside it", { payment_method: "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w" }, 400, "parameter_unexpected", "card_number"],
    [
      "an unknown saved payment method",
      { payment_method: "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w", card_number: undefined, expiration_month: undefined, expiration_year: undefined, cvv: undefined },
      404,
      "resource_missing",
      "payment_method",
    ],
    ["a card number in the description", { description: "card 4242424242424242" }, 400, "card_number_in_text", "description"],
  ];
  for (const [name, body, status, code, param] of refusals) {
    it(`${name}: ${status} ${code}`, async () => {
      const before = await countRows("payments", "account_id = ?", acct.id);
      const events = (await eventsOf(acct.id)).length;
      const res = await pay(body);
      expect(res.status, res.text).toBe(status);
      expect(res.body.error.code).toBe(code);
      if (param) expect(res.body.error.param).toBe(param);
      expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
      expect((await eventsOf(acct.id)).length).toBe(events);
    });
  }

  it("a user of another account, or of the other mode, answers 404", async () => {
    const stranger = await createUser(other, { name: "Eve", email: "eve@example.com" });
    const res = await pay({ user_id: stranger.id });
    expectError(res, 404, "not_found_error", "resource_missing");
    expect(res.body.error.param).toBe("user_id");
    const liveUser = await call("/api/users", { key: acct.liveKey, body: { name: "Live Lu", email: "lu@example.com" } });
    expect(liveUser.status, liveUser.text).toBe(201);
    expectError(await pay({ user_id: liveUser.body.id }), 404, "not_found_error", "resource_missing");
  });

  it("a live key without a processor connection answers 400 livemode_unavailable, charging nothing", async () => {
    const liveUser = await call("/api/users", { key: acct.liveKey, body: { name: "Live Lu", email: "lu2@example.com" } });
    const before = await countRows("payments", "account_id = ?", acct.id);
    const res = await pay({ user_id: liveUser.body.id }, { key: acct.liveKey });
    expectError(res, 400, "invalid_request_error", "livemode_unavailable");
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
  });
});

describe("POST /payments/{id}/capture", () => {
  it("captures part, releases the rest: completed, amount_received, payment.completed; refunds take only what was received", async () => {
    const auth = await authorized(1000);
    const res = await capture(auth.id, { amount: 600 });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: auth.id, status: "completed", amount: 1000, amount_received: 600, amount_capturable: 0, capture_before: null });
    expect((await call(`/payments/${auth.id}`, { key: acct.key })).body).toEqual(res.body);
    const events = await eventsFor(acct.id, auth.id);
    expect(events.map((e) => e.type)).toEqual(["payment.authorized", "payment.completed"]);
    expect(events[1].body.data).toMatchObject({ transaction_id: auth.id, amount: 1000, status: "completed", subscription_id: null });

    const tooMuch = await call("/refunds", { key: acct.key, body: { payment_id: auth.id, amount: 601 } });
    expectError(tooMuch, 400, "invalid_request_error", "refund_exceeds_payment");
    expect(tooMuch.body.error.message).toContain("600");
    const all = await call("/refunds", { key: acct.key, body: { payment_id: auth.id } });
    expect(all.status, all.text).toBe(201);
    expect(all.body.amount).toBe(600);
    expect((await call(`/payments/${auth.id}`, { key: acct.key })).body).toMatchObject({ status: "refunded", amount_refunded: 600 });
  });

  it("without amount captures all of amount_capturable", async () => {
    const auth = await authorized(1500);
    const res = await capture(auth.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "completed", amount_received: 1500 });
  });

  it("more than amount_capturable answers 400 amount_too_large and changes nothing", async () => {
    const auth = await authorized(1000);
    const res = await capture(auth.id, { amount: 1001 });
    expectError(res, 400, "invalid_request_error", "amount_too_large");
    expect(res.body.error.param).toBe("amount");
    expect((await call(`/payments/${auth.id}`, { key: acct.key })).body).toMatchObject({ status: "requires_capture", amount_capturable: 1000 });
    expect((await eventsFor(acct.id, auth.id)).map((e) => e.type)).toEqual(["payment.authorized"]);
  });

  it("a bad amount answers 400", async () => {
    const auth = await authorized(1000);
    expectError(await capture(auth.id, { amount: 0 }), 400, "invalid_request_error", "parameter_invalid");
    expectError(await capture(auth.id, { amount: 1, extra: true }), 400, "invalid_request_error", "parameter_unknown");
  });

  it("a payment in another state answers 409 naming it", async () => {
    const completed = (await pay({})).body.id;
    const res = await capture(completed);
    expectError(res, 409, "invalid_request_error", "payment_unexpected_state");
    expect(res.body.error.message).toContain("is completed");
    const auth = await authorized();
    expect((await capture(auth.id)).status).toBe(200);
    const twice = await capture(auth.id, { amount: 1 });
    expectError(twice, 409, "invalid_request_error", "payment_unexpected_state");
    expect((await eventsFor(acct.id, auth.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.completed"]);
  });

  it("another account's payment answers 404, and so does an id that is not a payment's", async () => {
    const auth = await authorized();
    expectError(await capture(auth.id, {}, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await cancel(auth.id, {}, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await capture(auth.id, {}, { key: acct.liveKey }), 404, "not_found_error", "resource_missing");
    expectError(await capture("po_01jd2x4k5m6n7p8q9r0s1t2v3w"), 404, "not_found_error", "resource_missing");
    expect((await call(`/payments/${auth.id}`, { key: acct.key })).body.status).toBe("requires_capture");
  });

  it("a retry with the same Idempotency-Key replays, and captures once", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const auth = await authorized();
    const first = await capture(auth.id, { amount: 700 }, { idempotencyKey: "cap-1" });
    const again = await capture(auth.id, { amount: 700 }, { idempotencyKey: "cap-1" });
    expect(first.status, first.text).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(ledger.calls.filter((c) => c.method === "capturePayment")).toHaveLength(1);
    expect((await eventsFor(acct.id, auth.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.completed"]);
  });

  it("two captures at once (different keys, different amounts) capture once: one 200, one 409", async () => {
    const ledger = ledgerProcessor([{ kind: "slow", method: "capturePayment", ms: 50 }]);
    ledger.install();
    const auth = await authorized(1000);
    const [a, b] = await Promise.all([capture(auth.id, { amount: 400 }, { idempotencyKey: "race-a" }), capture(auth.id, { amount: 900 }, { idempotencyKey: "race-b" })]);
    const statuses = [a.status, b.status].sort();
    expect(statuses, `${a.text} ${b.text}`).toEqual([200, 409]);
    const won = a.status === 200 ? a : b;
    const lost = a.status === 200 ? b : a;
    expect(["payment_in_progress", "payment_unexpected_state"]).toContain(lost.body.error.code);
    expect(ledger.moneyMoved("capturePayment")).toHaveLength(1);
    expect(ledger.calls.filter((c) => c.method === "capturePayment" && c.overlapped)).toEqual([]);
    const payment = (await call(`/payments/${auth.id}`, { key: acct.key })).body;
    expect(payment.amount_received).toBe(won.body.amount_received);
    expect((await eventsFor(acct.id, auth.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.completed"]);
  });

  it("a capture racing a cancel: one of them, never both", async () => {
    const ledger = ledgerProcessor([{ kind: "slow", ms: 50 }]);
    ledger.install();
    const auth = await authorized(1000);
    const [a, b] = await Promise.all([capture(auth.id), cancel(auth.id)]);
    expect([a.status, b.status].sort(), `${a.text} ${b.text}`).toEqual([200, 409]);
    const types = (await eventsFor(acct.id, auth.id)).map((e) => e.type);
    expect(types).toHaveLength(2);
    expect(types[1]).toBe(a.status === 200 ? "payment.completed" : "payment.canceled");
    expect(ledger.calls.filter((c) => c.method === "capturePayment" || c.method === "cancelPayment")).toHaveLength(1);
  });

  it("a processor that times out after capturing: 500, the key kept; the retry records the one capture", async () => {
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: "capturePayment" }]);
    ledger.install();
    const auth = await authorized(1000);
    const first = await capture(auth.id, { amount: 800 }, { idempotencyKey: "cap-timeout" });
    expect(first.status, first.text).toBe(500);
    expect(first.text).not.toContain("timeout");
    expect((await call(`/payments/${auth.id}`, { key: acct.key })).body.status).toBe("requires_capture");
    // The Idempotency-Key is not freed: the outcome is unknown.
    expect((await capture(auth.id, { amount: 800 }, { idempotencyKey: "cap-timeout" })).status).toBe(409);
    ledger.inject();
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - 600000 WHERE account_id = ? AND key = ?").bind(acct.id, "cap-timeout").run();
    const retry = await capture(auth.id, { amount: 800 }, { idempotencyKey: "cap-timeout" });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body).toMatchObject({ status: "completed", amount_received: 800 });
    expect(ledger.moneyMoved("capturePayment")).toHaveLength(1);
  });
});

describe("POST /payments/{id}/cancel", () => {
  it("releases an authorization: canceled, canceled_at, cancellation_reason; payment.canceled with the payment", async () => {
    const auth = await authorized(1000);
    const res = await cancel(auth.id, { cancellation_reason: "requested_by_customer" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "canceled", amount_capturable: 0, amount_received: 0, cancellation_reason: "requested_by_customer", capture_before: null });
    expect(res.body.canceled_at).toMatch(ISO_MS);
    const events = await eventsFor(acct.id, auth.id);
    expect(events.map((e) => e.type)).toEqual(["payment.authorized", "payment.canceled"]);
    expect(events[1].body.data).toEqual(res.body);
    const again = await cancel(auth.id);
    expectError(again, 409, "invalid_request_error", "payment_unexpected_state");
    expect(again.body.error.message).toContain("is canceled");
    const captured = await capture(auth.id);
    expectError(captured, 409, "invalid_request_error", "payment_unexpected_state");
    expect(captured.body.error.message).toContain("is canceled");
  });

  it("refuses a completed payment (409 naming it), and a reason that is not the caller's to give", async () => {
    const completed = (await pay({})).body.id;
    const res = await cancel(completed);
    expectError(res, 409, "invalid_request_error", "payment_unexpected_state");
    expect(res.body.error.message).toContain("is completed");
    const auth = await authorized();
    expectError(await cancel(auth.id, { cancellation_reason: "expired" }), 400, "invalid_request_error", "parameter_invalid");
  });

  it("an authorization, or a canceled payment, cannot be refunded (409 naming its state)", async () => {
    const auth = await authorized();
    const res = await call("/refunds", { key: acct.key, body: { payment_id: auth.id } });
    expectError(res, 409, "invalid_request_error", "payment_not_refundable");
    expect(res.body.error.message).toContain("requires_capture");
    expect(await countRows("refunds", "payment_id = ?", auth.id)).toBe(0);
    await cancel(auth.id);
    expectError(await call("/refunds", { key: acct.key, body: { payment_id: auth.id, amount: 1 } }), 409, "invalid_request_error", "payment_not_refundable");
    expect(await countRows("refunds", "payment_id = ?", auth.id)).toBe(0);
  });
});

describe("the cron cancels authorizations not captured in 7 days", () => {
  it("cancellation_reason expired, payment.canceled once, however often it runs; a captured one is left alone", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const lapsing = await authorized(1000);
    const kept = await authorized(1000);
    expect((await capture(kept.id)).status).toBe(200);
    const young = await authorized(1000);
    const later = Date.parse(lapsing.created_at) + AUTHORIZATION_LIFETIME_MS + 1000;
    // The young one was made after `lapsing`: push its capture_before past `later`.
    await env.DB.prepare("UPDATE payments SET capture_before = ? WHERE id = ?").bind(new Date(later + 60_000).toISOString(), young.id).run();
    await Promise.all([expireAuthorizations(env, later), expireAuthorizations(env, later)]);
    await expireAuthorizations(env, later + 1);
    const payment = (await call(`/payments/${lapsing.id}`, { key: acct.key })).body;
    expect(payment).toMatchObject({ status: "canceled", cancellation_reason: "expired", amount_capturable: 0 });
    expect((await eventsFor(acct.id, lapsing.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.canceled"]);
    expect(ledger.moneyMoved("cancelPayment").filter((c) => c.reference.startsWith(lapsing.id))).toHaveLength(1);
    expect((await call(`/payments/${kept.id}`, { key: acct.key })).body.status).toBe("completed");
    expect((await call(`/payments/${young.id}`, { key: acct.key })).body.status).toBe("requires_capture");
    expect((await eventsFor(acct.id, kept.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.completed"]);
  });
});

describe("a saved card (payment_method pmt_…)", () => {
  const save = async (token: string, userId = customer.id, key = acct.key) => {
    const res = await call(`/api/users/${userId}/payment-methods`, { key, body: { processor_token: token } });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: string };
  };
  const payWith = (pmt: string, body: Record<string, unknown> = {}, key = acct.key, userId = customer.id) =>
    call("/payments", { key, body: { amount: 1500, currency: "usd", user_id: userId, payment_method: pmt, ...body } });

  it("charges a saved card, or authorizes it for a later capture, and the payment names it", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const visa = await save("pm_card_visa");
    const charged = await payWith(visa.id);
    expect(charged.status, charged.text).toBe(201);
    expect(charged.body).toMatchObject({ status: "completed", amount_received: 1500, payment_method_id: visa.id, card: { brand: "visa", last4: "4242" } });
    const held = await payWith(visa.id, { capture_method: "manual" });
    expect(held.body).toMatchObject({ status: "requires_capture", amount_capturable: 1500, payment_method_id: visa.id });
    expect((await capture(held.body.id, { amount: 1000 })).body).toMatchObject({ status: "completed", amount_received: 1000 });
    // The processor was given the saved card's token, never card fields.
    const authorizations = ledger.moneyMoved("authorizeCard");
    expect(authorizations).toHaveLength(2);
  });

  it("a saved card that declines: 402 with the payment kept failed, naming the card", async () => {
    const declining = await save("pm_card_chargeDeclined");
    const res = await payWith(declining.id);
    expectError(res, 402, "card_error", "card_declined");
    const failed = (await call(`/payments/${res.body.error.payment_id}`, { key: acct.key })).body;
    expect(failed).toMatchObject({ status: "failed", payment_method_id: declining.id, amount_received: 0 });
  });

  it("another user's, account's or mode's saved card answers 404, a detached one 400; nothing is written", async () => {
    const before = await countRows("payments", "account_id = ?", acct.id);
    const otto = await createUser(acct, { name: "Otto", email: "otto@example.com" });
    const ottos = await save("pm_card_visa", otto.id);
    expectError(await payWith(ottos.id), 404, "not_found_error", "resource_missing");
    const strangers = await createUser(other, { name: "Eve", email: "eve2@example.com" });
    const eves = await save("pm_card_visa", strangers.id, other.key);
    expectError(await payWith(eves.id), 404, "not_found_error", "resource_missing");
    const detached = await save("pm_card_mastercard");
    expect((await call(`/api/users/${customer.id}/payment-methods/${detached.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expect(expectError(await payWith(detached.id), 400, "invalid_request_error", "payment_method_detached").param).toBe("payment_method");
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
  });
  // The user and the card are read in one statement (src/payments/payer.ts; in live mode in the
  // key's claim's own batch): each answer is still the one the separate reads gave.
  it("with an Idempotency-Key: the user and card read with the claim answer each error as before, and free the key", async () => {
    const before = await countRows("payments", "account_id = ?", acct.id);
    const visa = await save("pm_card_visa");
    const otto = await createUser(acct, { name: "Otto K", email: "otto-k@example.com" });
    const ottos = await save("pm_card_visa", otto.id);
    const strangers = await createUser(other, { name: "Eve K", email: "eve-k@example.com" });
    const eves = await save("pm_card_visa", strangers.id, other.key);
    const detached = await save("pm_card_mastercard");
    expect((await call(`/api/users/${customer.id}/payment-methods/${detached.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const missingUser = "user_01jd2x4k5m6n7p8q9r0s1t2v3w";
    const missingCard = "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w";
    const keyed = (body: Record<string, unknown>, key: string, apiKey = acct.key) =>
      call("/payments", { key: apiKey, idempotencyKey: key, body: { amount: 1500, currency: "usd", user_id: customer.id, ...body } });
    const cases: [string, Record<string, unknown>, number, string, string][] = [
      ["unknown-user-good-card", { user_id: missingUser, payment_method: visa.id }, 404, "resource_missing", "user_id"],
      ["other-account-user", { user_id: strangers.id, payment_method: visa.id }, 404, "resource_missing", "user_id"],
      ["other-account-user-own-card", { user_id: strangers.id, payment_method: eves.id }, 404, "resource_missing", "user_id"],
      ["unknown-user-card-fields", { user_id: missingUser, ...cardFields(CARDS.visa) }, 404, "resource_missing", "user_id"],
      ["unknown-card", { payment_method: missingCard }, 404, "resource_missing", "payment_method"],
      ["other-user-card", { payment_method: ottos.id }, 404, "resource_missing", "payment_method"],
      ["other-account-card", { payment_method: eves.id }, 404, "resource_missing", "payment_method"],
      ["detached-card", { payment_method: detached.id }, 400, "payment_method_detached", "payment_method"],
    ];
    for (const [name, body, status, code, param] of cases) {
      const key = `payer-${name}`;
      const res = await keyed(body, key);
      expect(res.status, `${name}: ${res.text}`).toBe(status);
      expect(res.body.error, name).toMatchObject({ code, param });
      // The answer changed nothing: the key is free for a corrected request.
      const corrected = await keyed({ payment_method: visa.id }, key);
      expect(corrected.status, `${name}, corrected: ${corrected.text}`).toBe(201);
      expect(corrected.body).toMatchObject({ status: "completed", payment_method_id: visa.id, user_id: customer.id });
    }
    // Another account's key naming this account's user and card: 404, as without a key.
    const theirs = await keyed({ payment_method: visa.id }, "payer-other-account", other.key);
    expect(theirs.status, theirs.text).toBe(404);
    expect(theirs.body.error).toMatchObject({ code: "resource_missing", param: "user_id" });
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before + cases.length);
  });

  // In test mode the first payment with a card in this isolate: the payer's read, then the batch
  // that records the key; the next is one round trip (test/payments/saved-card-one-trip.test.ts).
  it("with an Idempotency-Key, a saved card's first payment in this isolate costs two round trips: the user and card, then the batch", async () => {
    const visa = await save("pm_card_visa");
    const body = { amount: 1500, currency: "usd", user_id: customer.id, payment_method: visa.id };
    const res = await call("/payments", { key: acct.key, idempotencyKey: "payer-round-trips", body });
    expect(res.status, res.text).toBe(201);
    expect(roundTrips(res)).toBe(2);
    const replay = await call("/payments", { key: acct.key, idempotencyKey: "payer-round-trips", body });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(res.body);
  });

  // The hot path of issue 34's speed (bench/floor.mjs, the payment pair): every statement is prepared
  // once per isolate (src/db/prepared.ts), as POST /payout's are.
  it("with an Idempotency-Key, a saved card's payment builds no statement once warm", async () => {
    const visa = await save("pm_card_visa");
    await warm(acct.key);
    const body = { amount: 1500, currency: "usd", user_id: customer.id, payment_method: visa.id };
    for (const round of [1, 2]) {
      const res = await call("/payments", { key: acct.key, idempotencyKey: `payer-prepared-${round}`, body });
      expect(res.status, res.text).toBe(201);
      (globalThis as { __logBuilt?: boolean }).__logBuilt = round === 1;
      if (round === 2) expect(d1Usage(res, "statements-built")).toBe(0);
    }
  });
});

