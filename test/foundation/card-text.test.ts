// A card number sent in free text (a purpose, a description, a name, a metadata value or key) would
// be stored in clear. Every JSON body is scanned before any write: such a body answers 400
// card_number_in_text naming the field, nothing is written, and the answer never echoes the number.
// card_number and cvv, whose job is to carry card data, are exempt.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { CARDS, expectNoCardData, payoutBody, sentPans } from "../support/cards";
import { countRows } from "../support/db";

const VISA_SPACED = "4242 4242 4242 4242";
const MC_DASHED = "5555-5555-5555-4444";
const AMEX_GROUPED = "3782 822463 10005";

let acct: Account;

beforeAll(async () => {
  acct = await signup("Card text");
  // Every PAN used here, in any form, must be absent from every table afterwards.
  for (const pan of [CARDS.visa, CARDS.mastercard, CARDS.amex]) sentPans.add(pan);
});

afterAll(async () => {
  const scanned = await expectNoCardData();
  expect(scanned.cells).toBeGreaterThan(0);
});

/** Asserts the refusal: 400 card_number_in_text on `param`, with a message that does not echo the number. */
function expectCardInText(res: Awaited<ReturnType<typeof call>>, param: string | undefined) {
  const error = expectError(res, 400, "invalid_request_error", "card_number_in_text");
  expect(error.param).toBe(param);
  if (param) expect(error.message.startsWith(`${param}: `), error.message).toBe(true);
  expect(error.message).toContain("card_number");
  expect(error.message).not.toMatch(/[0-9]{4}/);
  for (const pan of [CARDS.visa, CARDS.mastercard, CARDS.amex]) expect(res.text).not.toContain(pan);
  for (const form of [VISA_SPACED, MC_DASHED, AMEX_GROUPED]) expect(res.text).not.toContain(form);
  return error;
}

const rows = (table: string) => countRows(table, "account_id = ?", acct.id);

describe("POST /api/request-id", () => {
  it("refuses a card number in purpose, in a metadata value or in a metadata key, and stores nothing", async () => {
    const before = await rows("request_ids");
    const events = await rows("events");
    const cases: [unknown, string][] = [
      [{ purpose: CARDS.visa }, "purpose"],
      [{ purpose: `refund to ${VISA_SPACED}` }, "purpose"],
      [{ purpose: "checkout", metadata: { note: "card 4242 4242 4242 4242" } }, "metadata.note"],
      [{ purpose: "checkout", metadata: { order: "A-1001", backup: MC_DASHED } }, "metadata.backup"],
      [{ purpose: "checkout", metadata: { [CARDS.amex]: "amex" } }, "metadata"],
      // A number is stored as its digits too.
      [{ purpose: "checkout", metadata: { card: 4242424242424242 } }, "metadata.card"],
    ];
    for (const [body, param] of cases) {
      expectCardInText(await call("/api/request-id", { key: acct.key, body }), param);
    }
    expect(await rows("request_ids")).toBe(before);
    expect(await rows("events")).toBe(events);
    const list = await call("/api/request-id?limit=100", { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain("4242");
  });

  it("accepts the same bodies without the card, and everyday numbers in text", async () => {
    const before = await rows("request_ids");
    const bodies = [
      { purpose: "refund to card ending 4242" },
      { purpose: "checkout", metadata: { note: "card ending 4242", order: "A-1001", phone: "+1 415-555-0132", date: "2026-01-15" } },
      { purpose: "checkout", metadata: { reference: "1234567890123456789012345", ref: "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b", bad_luhn: "4242 4242 4242 4241" } },
    ];
    for (const body of bodies) {
      const res = await call("/api/request-id", { key: acct.key, body });
      expect(res.status, res.text).toBe(201);
      expect(res.body).toMatchObject(body);
    }
    expect(await rows("request_ids")).toBe(before + bodies.length);
  });
});

describe("POST /api/users", () => {
  it("refuses a card number in the name and creates no user", async () => {
    const before = await rows("users");
    const res = await call("/api/users", { key: acct.key, body: { name: `Ada ${VISA_SPACED}`, email: "ada@example.com" } });
    expectCardInText(res, "name");
    expect(await rows("users")).toBe(before);
    const list = await call("/api/users?limit=100", { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body.data.some((u: { name: string }) => u.name.startsWith("Ada "))).toBe(false);

    const ok = await call("/api/users", { key: acct.key, body: { name: "Ada Lovelace", email: "ada@example.com" } });
    expect(ok.status, ok.text).toBe(201);
    expect(await rows("users")).toBe(before + 1);
  });
});

describe("POST /payout", () => {
  it("refuses a card number in the description, creates no payout and emits no event", async () => {
    const payouts = await rows("payouts");
    const events = await rows("events");
    for (const description of [`Refund to ${MC_DASHED}`, AMEX_GROUPED, CARDS.visa]) {
      expectCardInText(await call("/payout", { key: acct.key, body: payoutBody({ description }) }), "description");
    }
    expect(await rows("payouts")).toBe(payouts);
    expect(await rows("events")).toBe(events);
  });

  it("still accepts the card in card_number (any format) with a plain description", async () => {
    const before = await rows("payouts");
    for (const card_number of [CARDS.visa, VISA_SPACED, "4242-4242-4242-4242"]) {
      const res = await call("/payout", { key: acct.key, body: payoutBody({ card_number }) });
      expect(res.status, res.text).toBe(201);
      expect(res.body).toMatchObject({ description: "Vendor invoice 1042", card: { brand: "visa", last4: "4242" } });
    }
    const amex = await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.amex, "7391") });
    expect(amex.status, amex.text).toBe(201);
    expect(await rows("payouts")).toBe(before + 4);
  });

  it("a request refused this way can be retried with a corrected body under the same Idempotency-Key", async () => {
    const before = await rows("payouts");
    const idempotencyKey = "card-text-retry-1";
    const refused = await call("/payout", { key: acct.key, idempotencyKey, body: payoutBody({ description: `Refund to ${VISA_SPACED}` }) });
    expectCardInText(refused, "description");
    expect(await countRows("idempotency_keys", "account_id = ? AND key = ?", acct.id, idempotencyKey)).toBe(0);

    const corrected = await call("/payout", { key: acct.key, idempotencyKey, body: payoutBody({ description: "Refund to card ending 4242" }) });
    expect(corrected.status, corrected.text).toBe(201);
    expect(corrected.body.description).toBe("Refund to card ending 4242");

    const replay = await call("/payout", { key: acct.key, idempotencyKey, body: payoutBody({ description: "Refund to card ending 4242" }) });
    expect(replay.status).toBe(201);
    expect(replay.body.id).toBe(corrected.body.id);
    expect(await rows("payouts")).toBe(before + 1);
  });
});

describe("POST /subscription-plans", () => {
  const plan = { name: "Pro", price: 19.99, currency: "usd", interval: "month" };

  it("refuses a card number in the description, the name, or a tier's field, and creates no plan", async () => {
    const before = await rows("plans");
    expectCardInText(await call("/subscription-plans", { key: acct.key, body: { ...plan, description: `Billed to ${VISA_SPACED}` } }), "description");
    expectCardInText(await call("/subscription-plans", { key: acct.key, body: { ...plan, name: CARDS.mastercard } }), "name");
    const tiered = {
      name: "Seats",
      currency: "usd",
      interval: "month",
      pricing_model: "volume",
      tiers: [{ up_to: 5, unit_price: 7 }, { up_to: null, unit_price: 5, note: AMEX_GROUPED }],
    };
    expectCardInText(await call("/subscription-plans", { key: acct.key, body: tiered }), "tiers.1.note");
    expect(await rows("plans")).toBe(before);

    const list = await call("/subscription-plans?limit=100", { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(before);
  });

  it("accepts the same plan without the card", async () => {
    const before = await rows("plans");
    const res = await call("/subscription-plans", { key: acct.key, body: { ...plan, description: "Billed monthly" } });
    expect(res.status, res.text).toBe(201);
    expect(await rows("plans")).toBe(before + 1);
  });

  it("refuses a card number in a PATCH description too, leaving the plan as it was", async () => {
    const created = await call("/subscription-plans", { key: acct.key, body: { ...plan, description: "Original" } });
    expect(created.status, created.text).toBe(201);
    const res = await call(`/subscription-plans/${created.body.id}`, { key: acct.key, method: "PATCH", body: { description: `card ${CARDS.visa}` } });
    expectCardInText(res, "description");
    const read = await call(`/subscription-plans/${created.body.id}`, { key: acct.key });
    expect(read.body.description).toBe("Original");
  });
});

describe("any JSON body", () => {
  it("names nested paths with dots and refuses a card at the top level of the body", async () => {
    expectCardInText(await call("/api/request-id", { key: acct.key, body: CARDS.visa }), undefined);
    expectCardInText(await call("/api/request-id", { key: acct.key, body: [{ purpose: "x" }, { purpose: VISA_SPACED }] }), "1.purpose");
    expectCardInText(await call("/api/request-id", { key: acct.key, body: { [VISA_SPACED]: "x" } }), undefined);
  });
});
