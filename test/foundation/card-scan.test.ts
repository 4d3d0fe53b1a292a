// The card scan of every JSON body (src/middleware/body.ts): a card number is refused wherever it
// appears outside the documented card fields of the top-level body of a route that takes a card:
// any key (`card_number`, `cvv` and `amount` included), any depth, inside arrays, as a string or
// as a JSON number (even one past 2^53, read from its source text). The answer is 400
// card_number_in_text naming the field's path, and nothing is stored: not the object, not the
// idempotency record, not an event.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { luhnValid } from "../../src/domain/cards";
import { type Account, type CallResult, call, expectError, signup } from "../support/http";
import { CARDS, cardFields, expectNoCardData, payoutBody, sentPans } from "../support/cards";
import { countRows } from "../support/db";

/** A 19-digit Visa number that passes Luhn: past 2^53, so a JSON number loses its last digits. */
const VISA_19 = (() => {
  const body = "411111111111111111";
  for (let d = 0; d <= 9; d++) if (luhnValid(`${body}${d}`)) return `${body}${d}`;
  throw new Error("no check digit");
})();

let acct: Account;

beforeAll(async () => {
  acct = await signup("Card scan");
  for (const pan of [CARDS.visa, CARDS.mastercard, CARDS.amex, VISA_19]) sentPans.add(pan);
});

afterAll(async () => {
  // No PAN sent in this file is anywhere in the database (any table, any column, any prefix).
  const scanned = await expectNoCardData();
  expect(scanned.cells).toBeGreaterThan(0);
});

const rows = (table: string) => countRows(table, "account_id = ?", acct.id);
const records = (key: string) => countRows("idempotency_keys", "account_id = ? AND key = ?", acct.id, key);

function expectRefused(res: CallResult, param: string) {
  const error = expectError(res, 400, "invalid_request_error", "card_number_in_text");
  expect(error.param, res.text).toBe(param);
  expect(error.message.startsWith(`${param}: `), error.message).toBe(true);
  for (const pan of [CARDS.visa, CARDS.mastercard, CARDS.amex, VISA_19]) expect(res.text).not.toContain(pan);
}

/** Sends `text` as the JSON body (for numbers JSON.stringify cannot write exactly). */
const raw = (path: string, text: string, idempotencyKey?: string) =>
  call(path, { key: acct.key, rawBody: text, headers: { "content-type": "application/json" }, idempotencyKey });

describe("a card number under a card-like key, below the top level", () => {
  it("refuses metadata.card_number, metadata.cvv and metadata.amount (string or number) on POST /api/request-id, and stores nothing", async () => {
    const before = { ids: await rows("request_ids"), events: await rows("events"), records: await countRows("idempotency_keys", "account_id = ?", acct.id) };
    const cases: [unknown, string][] = [
      [{ purpose: "x", metadata: { card_number: CARDS.visa } }, "metadata.card_number"],
      [{ purpose: "x", metadata: { amount: Number(CARDS.visa) } }, "metadata.amount"],
      [{ purpose: "x", metadata: { amount: CARDS.mastercard } }, "metadata.amount"],
      [{ purpose: "x", metadata: { cvv: CARDS.amex } }, "metadata.cvv"],
      [{ purpose: "x", metadata: { card_number: Number(CARDS.mastercard) } }, "metadata.card_number"],
    ];
    for (const [i, [body, param]] of cases.entries()) {
      const key = `scan-nested-${i}`;
      expectRefused(await call("/api/request-id", { key: acct.key, body, idempotencyKey: key }), param);
      expect(await records(key), `${param}: no idempotency record`).toBe(0);
    }
    expect(await rows("request_ids")).toBe(before.ids);
    expect(await rows("events")).toBe(before.events);
    expect(await countRows("idempotency_keys", "account_id = ?", acct.id)).toBe(before.records);
  });

  it("refuses a card number inside nested arrays, at any key and as a number, naming the path", async () => {
    const before = await rows("request_ids");
    const cases: [unknown, string][] = [
      [{ purpose: "x", metadata: { list: [[CARDS.visa]] } }, "metadata.list.0.0"],
      [{ purpose: "x", tags: [[{ card_number: CARDS.visa }]] }, "tags.0.0.card_number"],
      [{ purpose: "x", tags: [{}, [1, Number(CARDS.visa)]] }, "tags.1.1"],
      [{ purpose: "x", extra: { deep: { amount: [Number(CARDS.mastercard)] } } }, "extra.deep.amount.0"],
      [{ purpose: "x", extra: { cvv: { card_number: { amount: CARDS.amex } } } }, "extra.cvv.card_number.amount"],
    ];
    for (const [body, param] of cases) expectRefused(await call("/api/request-id", { key: acct.key, body }), param);
    expect(await rows("request_ids")).toBe(before);
  });

  it("reads a JSON number from its source text: a 19-digit card number (past 2^53) and a decimal or exponent form are refused", async () => {
    const before = await rows("request_ids");
    const cases: [string, string][] = [
      [`{"purpose":"x","metadata":{"n":${VISA_19}}}`, "metadata.n"],
      [`{"purpose":"x","metadata":{"amount":${VISA_19}}}`, "metadata.amount"],
      [`{"purpose":"x","metadata":{"n":${CARDS.visa}.0}}`, "metadata.n"],
      [`{"purpose":"x","metadata":{"n":4.242424242424242e15}}`, "metadata.n"],
      [`{"purpose":"x","metadata":{"n":-${CARDS.visa}}}`, "metadata.n"],
    ];
    for (const [text, param] of cases) expectRefused(await raw("/api/request-id", text), param);
    expect(await rows("request_ids")).toBe(before);
  });
});

describe("the top level of the body", () => {
  it("exempts card_number and cvv only on a route that takes a card: elsewhere they are refused like any field", async () => {
    const before = await rows("request_ids");
    const users = await rows("users");
    expectRefused(await call("/api/request-id", { key: acct.key, body: { purpose: "x", card_number: CARDS.visa } }), "card_number");
    expectRefused(await call("/api/request-id", { key: acct.key, body: { purpose: "x", cvv: CARDS.visa } }), "cvv");
    expectRefused(await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com", card_number: CARDS.visa } }), "card_number");
    expect(await rows("request_ids")).toBe(before);
    expect(await rows("users")).toBe(users);
  });

  it("a route that takes a card still takes it in card_number; a card number elsewhere in that body is refused", async () => {
    const payouts = await rows("payouts");
    const ok = await call("/payout", { key: acct.key, body: payoutBody() });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.card).toMatchObject({ brand: "visa", last4: "4242" });
    expectRefused(await call("/payout", { key: acct.key, body: { ...payoutBody(), metadata: { card_number: CARDS.visa } } }), "metadata.card_number");
    expectRefused(await call("/payout", { key: acct.key, body: payoutBody({ description: `to ${CARDS.mastercard}` }) }), "description");
    expect(await rows("payouts")).toBe(payouts + 1);
  });

  it("a top-level amount that is a card number is refused as one (no valid amount has 13 digits), and nothing is stored", async () => {
    const payouts = await rows("payouts");
    const key = "scan-amount-pan";
    expectRefused(await call("/payout", { key: acct.key, body: payoutBody({ amount: Number(CARDS.visa) }), idempotencyKey: key }), "amount");
    expect(await records(key)).toBe(0);
    // As source text past 2^53, too.
    const body = JSON.stringify(payoutBody()).replace('"amount":2500', `"amount":${VISA_19}`);
    expect(body).toContain(VISA_19);
    expectRefused(await raw("/payout", body), "amount");
    expect(await rows("payouts")).toBe(payouts);
  });

  it("a top-level amount is still validated as money: the largest amount passes the scan, a decimal names the integer meant", async () => {
    const largest = await call("/payout", { key: acct.key, body: payoutBody({ amount: 99_999_999_999 }) });
    expect(largest.status, largest.text).toBe(201);
    expect(largest.body.amount).toBe(99_999_999_999);
    const decimal = await call("/payout", { key: acct.key, rawBody: JSON.stringify(payoutBody()).replace('"amount":2500', '"amount":25.00'), headers: { "content-type": "application/json" } });
    expect(expectError(decimal, 400, "invalid_request_error", "amount_not_integer").message).toContain("2500");
    const tooLarge = await call("/payout", { key: acct.key, body: payoutBody({ amount: 100_000_000_000 }) });
    expect(tooLarge.status, tooLarge.text).toBe(400);
    expect(tooLarge.body.error.code).not.toBe("card_number_in_text");
  });

  it("PUT /subscriptions/{id} takes new card details at the top level and refuses them anywhere else", async () => {
    const user = await call("/api/users", { key: acct.key, body: { name: "Sub", email: "sub@example.com" } });
    const plan = await call("/subscription-plans", { key: acct.key, body: { name: "P", price: 5, currency: "usd", interval: "month" } });
    const sub = await call("/subscriptions", { key: acct.key, body: { user_id: user.body.id, plan_id: plan.body.id, ...cardFields() } });
    expect(sub.status, sub.text).toBe(201);
    const nested = await call(`/subscriptions/${sub.body.id}`, { key: acct.key, method: "PUT", body: { quantity: 2, note: { card_number: CARDS.mastercard } } });
    expectRefused(nested, "note.card_number");
    const updated = await call(`/subscriptions/${sub.body.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard) });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.card).toMatchObject({ brand: "mastercard", last4: "4444" });
    const stored = await env.DB.prepare("SELECT quantity FROM subscriptions WHERE id = ?").bind(sub.body.id).first<{ quantity: number }>();
    expect(stored?.quantity).toBe(1);
  });
});
