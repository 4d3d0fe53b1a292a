// A test-mode payment with a saved card (issue 34's speed): once its payer was read in this
// isolate, POST /payments is ONE D1 round trip, as POST /payout is. The payer then comes from the
// isolate's memory (src/payments/payer.ts rememberPayer), and the payment's own batch checks that
// it is still as read (keyAndPayerStillAsRead): a card detached since, a user changed since, a key
// revoked since, another account's or mode's key, each answers as without the memory and writes
// nothing. Idempotency, declines and 3-D Secure behave as on the first payment.
import { describe, expect, it } from "vitest";
import { call, expectError, roundTrips, signup } from "../support/http";
import { createKey, createUser } from "../support/fixtures";
import { countRows, eventsFor } from "../support/db";

async function setup(token = "pm_card_visa") {
  const acct = await signup("One trip");
  const customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  const card = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: token } });
  expect(card.status, card.text).toBe(201);
  const pay = (body: Record<string, unknown> = {}, options: { key?: string; idempotencyKey?: string } = {}) =>
    call("/payments", { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body: { amount: 1500, currency: "usd", user_id: customer.id, payment_method: card.body.id, ...body } });
  return { acct, customer, card: card.body as { id: string }, pay };
}

describe("a saved card's payment in test mode", () => {
  it("takes one D1 round trip once its payer was read in this isolate (the first: the read, then the batch)", async () => {
    const { card, pay } = await setup();
    const first = await pay({}, { idempotencyKey: "one-trip-1" });
    expect(first.status, first.text).toBe(201);
    expect(roundTrips(first)).toBe(2);
    const second = await pay({}, { idempotencyKey: "one-trip-2" });
    expect(second.status, second.text).toBe(201);
    expect(second.body).toMatchObject({ status: "completed", amount_received: 1500, payment_method_id: card.id, card: { brand: "visa", last4: "4242" } });
    expect(roundTrips(second)).toBe(1);
    const held = await pay({ capture_method: "manual" }, { idempotencyKey: "one-trip-3" });
    expect(held.body).toMatchObject({ status: "requires_capture", amount_capturable: 1500 });
    expect(roundTrips(held)).toBe(1);
    const keyless = await pay();
    expect(keyless.status, keyless.text).toBe(201);
    expect(roundTrips(keyless)).toBe(1);
  });

  it("keeps idempotency on the one-trip path: a retry replays the first answer, another body with the key is refused, one payment", async () => {
    const { acct, pay } = await setup();
    expect((await pay({}, { idempotencyKey: "warm" })).status).toBe(201);
    const first = await pay({ amount: 700 }, { idempotencyKey: "idem-1" });
    expect(first.status, first.text).toBe(201);
    expect(roundTrips(first)).toBe(1);
    const again = await pay({ amount: 700 }, { idempotencyKey: "idem-1" });
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    const other = await pay({ amount: 800 }, { idempotencyKey: "idem-1" });
    expectError(other, 422, "idempotency_error", "idempotency_key_reused");
    expect(await countRows("payments", "account_id = ? AND charge_reference LIKE '%:idempotency:idem-1:%'", acct.id)).toBe(1);
    expect(await countRows("payments", "account_id = ? AND amount = 800", acct.id)).toBe(0);
  });

  it("a declining card still answers 402 with the failed payment kept, and a 3-D Secure card requires_action, in one round trip", async () => {
    const declining = await setup("pm_card_chargeDeclined");
    expectError(await declining.pay(), 402, "card_error", "card_declined");
    const declined = await declining.pay({}, { idempotencyKey: "decline-2" });
    expectError(declined, 402, "card_error", "card_declined");
    expect(roundTrips(declined)).toBe(1);
    const failed = await call(`/payments/${declined.body.error.payment_id}`, { key: declining.acct.key });
    expect(failed.body).toMatchObject({ status: "failed", failure_code: "card_declined", payment_method_id: declining.card.id });
    expect((await eventsFor(declining.acct.id, failed.body.id)).map((e) => e.type)).toEqual(["payment.failed"]);
    // The key keeps the decline: its retry replays it.
    const replayed = await declining.pay({}, { idempotencyKey: "decline-2" });
    expect(replayed.status).toBe(402);
    expect(replayed.body.error.payment_id).toBe(failed.body.id);

    const asking = await setup("pm_card_authenticationRequired");
    expect((await asking.pay()).status).toBe(201);
    const res = await asking.pay({ return_url: "https://shop.example.com/done" });
    expect(res.status, res.text).toBe(201);
    expect(roundTrips(res)).toBe(1);
    expect(res.body).toMatchObject({ status: "requires_action", next_action: { type: "redirect_to_url", url: expect.stringContaining(`/pay/authenticate/${res.body.id}/`) } });
    expect((await eventsFor(asking.acct.id, res.body.id)).map((e) => e.type)).toEqual(["payment.requires_action"]);
  });
});

// The guard of the one-trip batch (keyAndPayerStillAsRead): what the isolate remembers never lets a
// payment through that a fresh read would refuse, and never writes a stale fact.
describe("a payer changed since this isolate read it", () => {
  it("a card detached since answers 400 payment_method_detached, writes nothing and frees the key", async () => {
    const { acct, customer, card, pay } = await setup();
    expect((await pay()).status).toBe(201);
    const before = await countRows("payments", "account_id = ?", acct.id);
    expect((await call(`/api/users/${customer.id}/payment-methods/${card.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const res = await pay({}, { idempotencyKey: "detached-since" });
    expectError(res, 400, "invalid_request_error", "payment_method_detached");
    expect(res.body.error.param).toBe("payment_method");
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
    // The answer changed nothing: the key is free for a corrected request.
    const another = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_mastercard" } });
    const corrected = await pay({ payment_method: another.body.id }, { idempotencyKey: "detached-since" });
    expect(corrected.status, corrected.text).toBe(201);
    expect(corrected.body).toMatchObject({ payment_method_id: another.body.id, card: { brand: "mastercard" } });
  });

  it("a user whose email changed since: the payment's event names the email as it is now", async () => {
    const { acct, customer, pay } = await setup();
    expect((await pay()).status).toBe(201);
    const renamed = await call(`/api/users/${customer.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "ada.king@example.com" } });
    expect(renamed.status, renamed.text).toBe(200);
    const res = await pay();
    expect(res.status, res.text).toBe(201);
    const [event] = await eventsFor(acct.id, res.body.id);
    expect(event.type).toBe("payment.completed");
    expect(event.body.data.customer).toEqual({ id: customer.id, email: "ada.king@example.com" });
  });

  it("a key revoked since answers 401 and writes nothing", async () => {
    const { acct, pay } = await setup();
    const key = await createKey(acct, ["payments:write"]);
    expect((await pay({}, { key: key.secret })).status).toBe(201);
    const before = await countRows("payments", "account_id = ?", acct.id);
    expect((await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expectError(await pay({}, { key: key.secret, idempotencyKey: "revoked-since" }), 401, "authentication_error");
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
  });

  it("another account's key, or this account's live key, naming a user and card this isolate knows: 404, nothing written", async () => {
    const { acct, pay } = await setup();
    expect((await pay()).status).toBe(201);
    const before = await countRows("payments", "account_id = ?", acct.id);
    const other = await signup("Other shop");
    for (const key of [other.key, acct.liveKey]) {
      const res = await pay({}, { key, idempotencyKey: `elsewhere-${key.slice(0, 8)}` });
      expectError(res, 404, "not_found_error", "resource_missing");
      expect(res.body.error.param).toBe("user_id");
    }
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
    expect(await countRows("payments", "account_id = ?", other.id)).toBe(0);
  });
});
