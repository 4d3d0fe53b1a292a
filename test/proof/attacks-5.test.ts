// Fifth-round attacks, on the issue 19 fixes: hostile input (card numbers hidden in every way a
// caller can hide one, in bodies, keys, form bodies, query strings and headers), API versions
// against data shaped like the API's own objects, the commit-ordered events feed under many
// writers and other tenants' cursors, and `tender listen` with a secret from the environment.
// Each test asserts the correct behaviour against the real local D1; a defect found has its fix
// in src/ and its test failed before it (see the report of this round).
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containsCardNumber, luhnValid } from "../../src/domain/cards";
import { type Account, type CallResult, call, expectError, signup } from "../support/http";
import { CARDS, captureLogs, cardFields, expectNoCardData, sentPans } from "../support/cards";
import { countRows } from "../support/db";
import { createPlan, createUser, subscribed } from "../support/fixtures";

/** A 19-digit Visa number that passes Luhn. */
const VISA_19 = (() => {
  const body = "400000000000000000";
  for (let d = 0; d <= 9; d++) if (luhnValid(`${body}${d}`)) return `${body}${d}`;
  throw new Error("no check digit");
})();

let acct: Account;

beforeAll(async () => {
  acct = await signup("Attacks 5");
  for (const pan of [CARDS.visa, CARDS.mastercard, CARDS.amex, VISA_19]) sentPans.add(pan);
});

afterAll(async () => {
  // No PAN sent in this file is in the database, in ASCII digits, anywhere.
  await expectNoCardData();
});

const rows = (table: string) => countRows(table, "account_id = ?", acct.id);

/** Every digit of `pan` written in another Unicode script whose digits run 0..9 from `zero`. */
const inScript = (pan: string, zero: number) => [...pan].map((d) => String.fromCodePoint(zero + Number(d))).join("");
const groupsOf = (pan: string, sep: string) => pan.match(/.{1,4}/g)!.join(sep);

/**
 * Card numbers as a person or a hostile caller can write them, each of which a reader (or a
 * regular expression over the stored text, after NFKC) reads back as the PAN.
 */
const HIDDEN: [string, string][] = [
  ["fullwidth digits", inScript(CARDS.visa, 0xff10)],
  ["Arabic-Indic digits", inScript(CARDS.visa, 0x0660)],
  ["Devanagari digits", inScript(CARDS.mastercard, 0x0966)],
  ["mathematical bold digits", inScript(CARDS.visa, 0x1d7ce)],
  ["fullwidth amex, grouped", inScript("3782", 0xff10) + " " + inScript("822463", 0xff10) + " " + inScript("10005", 0xff10)],
  ["no-break spaces", groupsOf(CARDS.visa, "\u00a0")],
  ["narrow no-break spaces", groupsOf(CARDS.visa, "\u202f")],
  ["zero-width spaces", groupsOf(CARDS.visa, "\u200b")],
  ["a zero-width space between every digit", [...CARDS.visa].join("\u200b")],
  ["soft hyphens", groupsOf(CARDS.mastercard, "\u00ad")],
  ["en dashes", groupsOf(CARDS.visa, "\u2013")],
  ["dots", groupsOf(CARDS.visa, ".")],
  ["underscores", groupsOf(CARDS.visa, "_")],
  ["two spaces", groupsOf(CARDS.visa, "  ")],
  ["space, dash, space", groupsOf(CARDS.visa, " - ")],
  ["tabs", groupsOf(CARDS.visa, "\t")],
  ["new lines", groupsOf(CARDS.visa, "\n")],
  ["then the expiry and CVV", `${CARDS.visa} 12 27 123`],
  ["grouped, then the CVV", `${groupsOf(CARDS.visa, " ")} 123`],
  ["grouped, then the expiry", `card ${groupsOf(CARDS.mastercard, " ")} 12/27`],
];

describe("hostile input: a card number hidden in a body", () => {
  it("each hidden form, in a value or in a key, at any depth, answers 400 card_number_in_text, stores nothing and does not echo it", async () => {
    const before = { ids: await rows("request_ids"), records: await countRows("idempotency_keys", "account_id = ?", acct.id) };
    const stored: string[] = [];
    for (const [i, [how, text]] of HIDDEN.entries()) {
      for (const [where, body, param] of [
        ["purpose", { purpose: text }, "purpose"],
        ["metadata value", { purpose: "x", metadata: { note: text } }, "metadata.note"],
        ["metadata key", { purpose: "x", metadata: { [text.slice(0, 40)]: "x" } }, "metadata"],
        ["deep", { purpose: "x", deep: [{ a: [[{ b: text }]] }] }, "deep.0.a.0.0.b"],
      ] as [string, unknown, string][]) {
        if (where === "metadata key" && text.length > 40) continue;
        const res = await call("/api/request-id", { key: acct.key, body, idempotencyKey: `hidden-${i}-${where.replaceAll(" ", "-")}` });
        if (res.status !== 400 || res.body.error?.code !== "card_number_in_text") {
          stored.push(`${how} in ${where}: ${res.status} ${res.body.error?.code ?? ""}`);
          continue;
        }
        expect(res.body.error.param, `${how} in ${where}`).toBe(param);
        expect(res.text, `${how} in ${where}: the answer does not repeat it`).not.toContain(JSON.stringify(text).slice(1, -1));
      }
    }
    expect(stored, "hidden card numbers that were accepted").toEqual([]);
    expect(await rows("request_ids")).toBe(before.ids);
    expect(await countRows("idempotency_keys", "account_id = ?", acct.id)).toBe(before.records);
  });

  it("a card number as a JSON number in every notation (exponent, decimal, negative, 19 digits, past 2^53) is refused", async () => {
    const before = await rows("request_ids");
    const numbers = [
      CARDS.visa,
      "4.242424242424242e15",
      "4.242424242424242E+15",
      "0.4242424242424242e16",
      "42424242424242420e-1",
      "4242424242424242e0",
      "4242424242424242.0",
      "4242424242424242.5",
      "-4242424242424242",
      "-5.555555555554444e15",
      VISA_19,
      `${VISA_19}.000`,
      "3.78282246310005e14",
    ];
    for (const n of numbers) {
      for (const text of [`{"purpose":"x","metadata":{"n":${n}}}`, `{"purpose":"x","list":[[[${n}]]]}`, `{"purpose":"x","metadata":{"amount":${n}}}`]) {
        const res = await call("/api/request-id", { key: acct.key, rawBody: text, headers: { "content-type": "application/json" } });
        expectError(res, 400, "invalid_request_error", "card_number_in_text");
      }
    }
    expect(await rows("request_ids")).toBe(before);
  });

  it("everyday text still passes: IBANs, phone numbers, dates, versions, long references, amounts, UUIDs", async () => {
    const texts = [
      "DE89 3704 0044 0532 0130 00",
      "DE44 5001 0517 5407 3249 31",
      "GB29 NWBK 6016 1331 9268 19",
      "FR76 3000 6000 0112 3456 7890 189",
      "+1 415-555-0132",
      "+44 20 7946 0958",
      "2026-11-22 10:30:00.123",
      "v10.0.19045.2965",
      "1234567890123456789012345",
      "ref 1234 5678 9012 3456 7890",
      "4242 4242 4242",
      "4242 4242 4242 4241",
      "total 1.234.567,89 EUR",
      "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b",
      "card ending ４２４２",
    ];
    for (const text of texts) {
      const res = await call("/api/request-id", { key: acct.key, body: { purpose: "everyday", metadata: { text } } });
      expect(res.status, `${text}: ${res.text}`).toBe(201);
    }
  });

  it("containsCardNumber sees what NFKC and Unicode digits make of a PAN, and nothing in text without one", () => {
    for (const [how, text] of HIDDEN) expect(containsCardNumber(text), how).toBe(true);
    expect(containsCardNumber("№ ４２４２ ４２４２")).toBe(false);
    expect(containsCardNumber("Übergröße, naïve café")).toBe(false);
  });
});

describe("hostile input: a card number outside the JSON body", () => {
  it("an Idempotency-Key holding a card number is refused (400 card_number_in_text) and never stored, nor sent to the processor as a reference", async () => {
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    for (const key of [CARDS.visa, `order-${CARDS.mastercard}`, groupsOf(CARDS.visa, "-"), `${CARDS.visa}.retry`]) {
      const res = await call("/api/request-id", { key: acct.key, body: { purpose: "keyed" }, idempotencyKey: key });
      const error = expectError(res, 400, "invalid_request_error", "card_number_in_text");
      expect(error.param).toBe("Idempotency-Key");
      const first = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa, "739") }, idempotencyKey: key });
      expectError(first, 400, "invalid_request_error", "card_number_in_text");
    }
    // Nothing holds the key: not the idempotency records, not a payment's processor reference.
    expect(await countRows("idempotency_keys", "account_id = ? AND (key LIKE ? OR key LIKE ?)", acct.id, `%${CARDS.visa.slice(0, 12)}%`, `%4242-4242%`)).toBe(0);
    expect(await countRows("payments", "account_id = ? AND (charge_reference LIKE ? OR charge_reference LIKE ?)", acct.id, `%${CARDS.visa.slice(0, 12)}%`, `%4242-4242%`)).toBe(0);
  });

  it("a Tender-Version, a cursor, a path id or a closed-set filter holding a card number is refused without repeating it", async () => {
    const logs = captureLogs();
    const echoed: string[] = [];
    try {
      const answers: [string, CallResult][] = [
        ["Tender-Version", await call("/api/users", { key: acct.key, headers: { "tender-version": CARDS.visa } })],
        ["starting_after", await call(`/api/users?starting_after=${CARDS.visa}`, { key: acct.key })],
        ["ending_before (events)", await call(`/api/events?ending_before=${CARDS.visa}`, { key: acct.key })],
        ["path id", await call(`/subscriptions/${CARDS.visa}`, { key: acct.key })],
        ["path id (request id)", await call(`/api/request-id/${CARDS.mastercard}`, { key: acct.key })],
        ["type filter", await call(`/api/events?type=${CARDS.visa}`, { key: acct.key })],
        ["object_id filter", await call(`/api/events?object_id=${CARDS.visa}`, { key: acct.key })],
        ["unknown query parameter", await call(`/api/users?${CARDS.visa}=1`, { key: acct.key })],
        ["Tender-Consistency", await call("/api/users", { key: acct.key, headers: { "tender-consistency": CARDS.visa } })],
        ["fullwidth path id", await call(`/subscriptions/${encodeURIComponent(inScript(CARDS.visa, 0xff10))}`, { key: acct.key })],
      ];
      for (const [where, res] of answers) {
        expect(res.status, `${where}: ${res.text}`).toBeGreaterThanOrEqual(200);
        for (const pan of [CARDS.visa, CARDS.mastercard, inScript(CARDS.visa, 0xff10)]) if (res.text.includes(pan)) echoed.push(where);
      }
      expect(echoed, "answers that repeat the card number").toEqual([]);
      logs.expectNoCardData();
    } finally {
      logs.restore();
    }
  });

  it("a form body to /oauth/token is scanned like a JSON one: a card number in any parameter is refused and not repeated", async () => {
    for (const form of [
      `grant_type=client_credentials&scope=${CARDS.visa}`,
      `grant_type=client_credentials&scope=users%3Aread+${CARDS.visa}`,
      `grant_type=client_credentials&client_id=${CARDS.mastercard}`,
      `grant_type=${CARDS.visa}`,
      `grant_type=client_credentials&${CARDS.visa}=x`,
    ]) {
      const res = await call("/oauth/token", { rawBody: form, headers: { authorization: `Bearer ${acct.key}`, "content-type": "application/x-www-form-urlencoded" } });
      expectError(res, 400, "invalid_request_error", "card_number_in_text");
      expect(res.text).not.toContain(CARDS.visa);
      expect(res.text).not.toContain(CARDS.mastercard);
    }
    // The JSON form of the same request answers the same.
    const json = await call("/oauth/token", { body: { grant_type: "client_credentials", scope: CARDS.visa }, headers: { authorization: `Bearer ${acct.key}` } });
    expectError(json, 400, "invalid_request_error", "card_number_in_text");
    expect(await countRows("access_tokens", "account_id = ?", acct.id)).toBe(0);
  });

  it("the card fields of a route that takes a card still take any of these forms as a card, and keep only brand and last 4", async () => {
    const user = await createUser(acct, { name: "Card Holder" });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, groupsOf(CARDS.visa, " "));
    expect(sub.card).toMatchObject({ brand: "visa", last4: "4242" });
  });
});
