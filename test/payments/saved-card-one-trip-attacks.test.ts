// Review by attack of the one-round-trip saved-card payment (test mode, src/payments/payer.ts's
// memory of payers, keyAndPayerStillAsRead, the key recorded in the payment's own batch). Each attack
// runs against a warm memory (the payer already read in this isolate) unless it says otherwise.
import { describe, expect, it } from "vitest";
import { env } from "../support/env";
import { call, expectError, fetchWith, roundTrips, signup } from "../support/http";
import { createKey, createUser } from "../support/fixtures";
import { countRows } from "../support/db";
import { type D1Op, faultyD1, gate, sqlMatches } from "../support/faults";

const paysIn = (op: D1Op) => op.kind === "batch" && sqlMatches(op, /^\s*insert\s+into\s+"payments"/i);

/** A D1 binding that holds the payment's batch until `release()`; `atBatch` settles when a payment reaches it. */
function heldAtPaymentBatch() {
  const reached = gate();
  const held = gate();
  const db = faultyD1(env.DB, [], { gate: (op) => (paysIn(op) ? (reached.open(), held.opened) : Promise.resolve()) });
  return { db, atBatch: reached.opened, release: held.open };
}

async function setup(token = "pm_card_visa") {
  const acct = await signup("One trip attacks");
  const customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  const card = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: token } });
  expect(card.status, card.text).toBe(201);
  const bodyOf = (body: Record<string, unknown> = {}) => ({ amount: 1500, currency: "usd", user_id: customer.id, payment_method: card.body.id, ...body });
  const pay = (body: Record<string, unknown> = {}, options: { key?: string; idempotencyKey?: string } = {}) =>
    call("/payments", { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body: bodyOf(body) });
  /** The same request through a D1 binding of the test's making (faultyD1). */
  const payThrough = (db: D1Database, body: Record<string, unknown> = {}, idempotencyKey?: string) =>
    fetchWith({ DB: db }, "/payments", { key: acct.key, json: bodyOf(body), headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {} });
  // Warm: this isolate now remembers the payer.
  const warm = await pay();
  expect(warm.status, warm.text).toBe(201);
  return { acct, customer, card: card.body as { id: string }, pay, payThrough, bodyOf };
}

const paymentsWithKey = (accountId: string, key: string) => countRows("payments", "account_id = ? AND charge_reference LIKE ?", accountId, `%:idempotency:${key}:%`);

describe("attack: two requests at once with one Idempotency-Key", () => {
  it("same body, the first held just before its batch while the second commits: one payment, both answer it", async () => {
    const { acct, payThrough, pay } = await setup();
    const { db, atBatch, release } = heldAtPaymentBatch();
    const first = payThrough(db, {}, "race-same");
    await atBatch;
    const second = await pay({}, { idempotencyKey: "race-same" });
    expect(second.status, second.text).toBe(201);
    release();
    const held = await first;
    expect(held.status, held.text).toBe(201);
    expect(held.headers.get("idempotent-replayed")).toBe("true");
    expect(held.body).toEqual(second.body);
    expect(await paymentsWithKey(acct.id, "race-same")).toBe(1);
  });

  it("different bodies, the first held before its batch: the second's payment only, the first 422, nothing else written", async () => {
    const { acct, payThrough, pay } = await setup();
    const { db, atBatch, release } = heldAtPaymentBatch();
    const first = payThrough(db, { amount: 700 }, "race-other");
    await atBatch;
    const second = await pay({ amount: 800 }, { idempotencyKey: "race-other" });
    expect(second.status, second.text).toBe(201);
    release();
    expectError(await first, 422, "idempotency_error", "idempotency_key_reused");
    expect(await paymentsWithKey(acct.id, "race-other")).toBe(1);
    expect(await countRows("payments", "account_id = ? AND amount = 700", acct.id)).toBe(0);
  });

  it("a burst of five with one key and one body: one payment, every answer 201 (replays) or 409, never a 500", async () => {
    const { acct, pay } = await setup();
    const answers = await Promise.all(Array.from({ length: 5 }, () => pay({ amount: 901 }, { idempotencyKey: "burst" })));
    for (const res of answers) expect([201, 409], res.text).toContain(res.status);
    const made = answers.filter((res) => res.status === 201);
    expect(made.length).toBeGreaterThan(0);
    for (const res of made) expect(res.body.id).toBe(made[0].body.id);
    expect(await paymentsWithKey(acct.id, "burst")).toBe(1);
  });
});

describe("attack: the same key retried after a lost reply", () => {
  it("the batch committed and its answer was lost: the request answers the committed payment, a retry replays it, one payment", async () => {
    const { acct, payThrough, pay } = await setup();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: paysIn });
    const lost = await payThrough(db, { amount: 1234 }, "lost-reply");
    expect(db.fired).toHaveLength(1);
    expect(lost.status, lost.text).toBe(201);
    const retry = await pay({ amount: 1234 }, { idempotencyKey: "lost-reply" });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body.id).toBe(lost.body.id);
    expect(await paymentsWithKey(acct.id, "lost-reply")).toBe(1);
  });

  it("without a key, the batch committed and its answer lost: 201 with the payment it made (as before the one-trip path), not a 500", async () => {
    const { acct, payThrough } = await setup();
    const before = await countRows("payments", "account_id = ?", acct.id);
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: paysIn });
    const lost = await payThrough(db, { amount: 1236 });
    expect(db.fired).toHaveLength(1);
    expect(lost.status, lost.text).toBe(201);
    expect(lost.body).toMatchObject({ object: "payment", amount: 1236, status: "completed" });
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before + 1);
    expect(await countRows("payments", "id = ?", lost.body.id)).toBe(1);
  });

  it("without a key, a declined payment's batch committed and its answer lost: 402 naming the failed payment kept", async () => {
    const { acct, customer, payThrough } = await setup();
    const declining = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_chargeDeclined" } });
    expect(declining.status, declining.text).toBe(201);
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: paysIn });
    const lost = await payThrough(db, { payment_method: declining.body.id });
    expect(db.fired).toHaveLength(1);
    expectError(lost, 402, "card_error", "card_declined");
    expect(await countRows("payments", "id = ? AND status = 'failed'", lost.body.error.payment_id)).toBe(1);
  });

  it("the batch failed before it committed: 500 outcome_unknown with no internals, and the retry makes the payment once", async () => {
    const { acct, payThrough, pay } = await setup();
    const db = faultyD1(env.DB, { kind: "fail_before_commit", when: paysIn });
    const lost = await payThrough(db, { amount: 1235 }, "lost-before");
    expectError(lost, 500, "api_error", "outcome_unknown");
    expect(lost.text).not.toMatch(/D1_ERROR|Network connection/);
    expect(await paymentsWithKey(acct.id, "lost-before")).toBe(0);
    const retry = await pay({ amount: 1235 }, { idempotencyKey: "lost-before" });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    const again = await pay({ amount: 1235 }, { idempotencyKey: "lost-before" });
    expect(again.body.id).toBe(retry.body.id);
    expect(await paymentsWithKey(acct.id, "lost-before")).toBe(1);
  });
});

describe("attack: the payer changes between the remembered read and the payment", () => {
  it("a payer that changes before every batch: three tries, then 409 payer_changed; nothing written, the key free", async () => {
    const { acct, customer, payThrough, pay } = await setup();
    let n = 0;
    const db = faultyD1(env.DB, [], {
      gate: async (op) => {
        if (paysIn(op)) await env.DB.prepare("UPDATE users SET email = ? WHERE id = ?").bind(`ada+${++n}@example.com`, customer.id).run();
      },
    });
    const before = await countRows("payments", "account_id = ?", acct.id);
    const eventsBefore = await countRows("events", "account_id = ?", acct.id);
    const res = await payThrough(db, {}, "keeps-changing");
    expectError(res, 409, "invalid_request_error", "payer_changed");
    expect(n).toBe(3);
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
    expect(await countRows("events", "account_id = ?", acct.id)).toBe(eventsBefore);
    expect(await countRows("idempotency_keys", "account_id = ? AND key = ?", acct.id, "keeps-changing")).toBe(0);
    const retry = await pay({}, { idempotencyKey: "keeps-changing" });
    expect(retry.status, retry.text).toBe(201);
    expect(await paymentsWithKey(acct.id, "keeps-changing")).toBe(1);
  });

  it("a card detached and its token saved again (a new pmt_): the old id 400 payment_method_detached, the new one pays", async () => {
    const { acct, customer, card, pay } = await setup();
    expect((await call(`/api/users/${customer.id}/payment-methods/${card.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const again = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    expect(again.status, again.text).toBe(201);
    expect(again.body.id).not.toBe(card.id);
    const before = await countRows("payments", "account_id = ?", acct.id);
    expectError(await pay({}, { idempotencyKey: "old-card" }), 400, "invalid_request_error", "payment_method_detached");
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
    const res = await pay({ payment_method: again.body.id }, { idempotencyKey: "new-card" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.payment_method_id).toBe(again.body.id);
  });

  it("a user gone from this account since (its row no longer this account's, as a deletion would leave it): 404 user_id, nothing written", async () => {
    const { acct, customer, pay } = await setup();
    const other = await signup("Elsewhere");
    await env.DB.batch([
      env.DB.prepare("PRAGMA defer_foreign_keys = on"),
      env.DB.prepare("UPDATE users SET account_id = ? WHERE id = ?").bind(other.id, customer.id),
      env.DB.prepare("UPDATE payment_methods SET account_id = ? WHERE user_id = ?").bind(other.id, customer.id),
      env.DB.prepare("UPDATE payments SET account_id = ? WHERE user_id = ?").bind(other.id, customer.id),
    ]);
    const res = await pay({}, { idempotencyKey: "user-gone" });
    expectError(res, 404, "not_found_error", "resource_missing");
    expect(res.body.error.param).toBe("user_id");
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(0);
    expect(await countRows("payments", "account_id = ?", other.id)).toBe(1);
  });

  it("the card's token changed under the same id (written by hand): the payment charges the token as it is now", async () => {
    const { acct, customer, card, pay } = await setup();
    const other = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_mastercard" } });
    const { token } = (await env.DB.prepare("SELECT processor_token AS token FROM payment_methods WHERE id = ?").bind(other.body.id).first<{ token: string }>())!;
    await env.DB.prepare("UPDATE payment_methods SET processor_token = ?, card_brand = 'mastercard', card_last4 = '4444' WHERE id = ?").bind(token, card.id).run();
    const res = await pay();
    expect(res.status, res.text).toBe(201);
    expect(res.body.card).toMatchObject({ brand: "mastercard", last4: "4444" });
    expect(await countRows("payments", "account_id = ? AND card_last4 = '4242'", acct.id)).toBe(1);
  });
});

describe("attack: ids and credentials against a warm memory", () => {
  it("another user's card of the same account, both payers remembered: 404 payment_method, nothing written", async () => {
    const { acct, customer, card, pay } = await setup();
    const other = await createUser(acct, { name: "Grace Hopper", email: "grace@example.com" });
    const theirs = await call(`/api/users/${other.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_mastercard" } });
    expect((await pay({ user_id: other.id, payment_method: theirs.body.id })).status).toBe(201);
    const before = await countRows("payments", "account_id = ?", acct.id);
    for (const [userId, cardId] of [[customer.id, theirs.body.id], [other.id, card.id]]) {
      const res = await pay({ user_id: userId, payment_method: cardId }, { idempotencyKey: `cross-${userId}` });
      expectError(res, 404, "not_found_error", "resource_missing");
      expect(res.body.error.param).toBe("payment_method");
    }
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
  });

  it("a restricted key without payments:write: 403 before anything, nothing written", async () => {
    const { acct, pay } = await setup();
    const reader = await createKey(acct, ["payments:read"]);
    const before = await countRows("payments", "account_id = ?", acct.id);
    const res = await pay({}, { key: reader.secret, idempotencyKey: "no-scope" });
    expect(res.status, res.text).toBe(403);
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
    expect(await countRows("idempotency_keys", "account_id = ? AND key = ?", acct.id, "no-scope")).toBe(0);
  });

  it("a key rolled (a new key, the old revoked): the old one 401, the new one pays in one round trip", async () => {
    const { acct, pay } = await setup();
    const old = await createKey(acct, ["payments:write"]);
    expect((await pay({}, { key: old.secret })).status).toBe(201);
    const fresh = await createKey(acct, ["payments:write"]);
    expect((await call(`/api/keys/${old.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expectError(await pay({}, { key: old.secret, idempotencyKey: "rolled-old" }), 401, "authentication_error");
    expect((await pay({}, { key: fresh.secret, idempotencyKey: "rolled-new" })).status).toBe(201);
    // Its credential now known in this isolate too: the payer's memory is the account's, not the key's.
    const res = await pay({}, { key: fresh.secret, idempotencyKey: "rolled-new-2" });
    expect(res.status, res.text).toBe(201);
    expect(roundTrips(res)).toBe(1);
  });
});

describe("attack: hostile input on the one-trip path", () => {
  it("odd amounts, currencies and metadata answer 400 in the documented shape, never a 500, nothing written", async () => {
    const { acct, pay } = await setup();
    const before = await countRows("payments", "account_id = ?", acct.id);
    const bodies: Record<string, unknown>[] = [
      { amount: 0 },
      { amount: -1 },
      { amount: 10.5 },
      { amount: 1e20 },
      { amount: Number.MAX_SAFE_INTEGER + 2 },
      { amount: "1500" },
      { currency: "XXX" },
      { currency: "usd'; --" },
      { currency: "" },
      { metadata: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, "v"])) },
      { metadata: { k: "x".repeat(10_000) } },
      { metadata: { nested: { deep: 1 } } },
      { user_id: "user_" + "a".repeat(5000) },
      { payment_method: "pmt_" + "\u0000" },
    ];
    for (const [i, body] of bodies.entries()) {
      const res = await pay(body, { idempotencyKey: `hostile-${i}` });
      expect(res.status, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`).toBeGreaterThanOrEqual(400);
      expect(res.status, res.text).toBeLessThan(500);
      expect(res.body.error.request_id).toBeTruthy();
    }
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
  });
});
