// Every sandbox charge outcome through charge(), read back over GET /payments, with the
// payment.completed / payment.failed events; the shared card input helper; tenant isolation.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/lib/errors";
import { readCard } from "../../src/payments/card-input";
import { type Account, call, expectError, signup } from "../support/http";
import { chargeCard, createKey, createUser } from "../support/fixtures";
import { captureLogs, cardFields, CARDS, expectNoCardData, nextYear, sentPans } from "../support/cards";
import { eventsFor } from "../support/db";

const logs = captureLogs();
let acct: Account;
let other: Account;
let customer: { id: string; email: string };

beforeAll(async () => {
  acct = await signup("Merchant");
  other = await signup("Other");
  customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

describe("charges through the sandbox", () => {
  const outcomes: [string, string, string, "completed" | "failed", string | null][] = [
    ["Visa 4242", CARDS.visa, "visa", "completed", null],
    ["Mastercard 5555", CARDS.mastercard, "mastercard", "completed", null],
    ["4000000000000002", CARDS.declined, "visa", "failed", "card_declined"],
    ["4000000000009995", CARDS.insufficientFunds, "visa", "failed", "insufficient_funds"],
    ["4000000000000069", CARDS.expired, "visa", "failed", "expired_card"],
    ["4000000000000119", CARDS.processingError, "visa", "failed", "processing_error"],
    ["4000000000000341 (first charge)", CARDS.declineAfterFirst, "visa", "completed", null],
  ];
  for (const [name, pan, brand, status, failureCode] of outcomes) {
    it(`charging ${name} is ${status}${failureCode ? ` (${failureCode})` : ""}`, async () => {
      const result = await chargeCard(acct, customer, { pan, amount: 1999, subscriptionId: "sub_01m7z2d8n7zgev6x3n0epk9rxn" });
      expect(result.succeeded).toBe(status === "completed");
      expect(result.declineCode).toBe(failureCode);
      expect(result.token).toMatch(/^tok_sandbox_/);
      expect(result.token).not.toContain(pan);

      const res = await call(`/payments/${result.payment.id}`, { key: acct.key });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({
        id: result.payment.id,
        object: "payment",
        livemode: false,
        subscription_id: "sub_01m7z2d8n7zgev6x3n0epk9rxn",
        // chargeCard charges for an invoice of one line, as billing does.
        invoice_id: expect.stringMatching(/^in_/),
        user_id: customer.id,
        amount: 1999,
        currency: "usd",
        status,
        // A subscription charge is captured when it is made: what it received is its amount, unless it failed.
        capture_method: "automatic",
        amount_capturable: 0,
        amount_received: status === "completed" ? 1999 : 0,
        amount_refunded: 0,
        next_action: null,
        payment_method_id: null,
        capture_before: null,
        canceled_at: null,
        cancellation_reason: null,
        description: null,
        metadata: {},
        failure_code: failureCode,
        failure_message: failureCode ? expect.any(String) : null,
        card: { brand, last4: pan.slice(-4), exp_month: 12, exp_year: nextYear },
        created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      });
      expect(res.text).not.toContain(pan);

      const events = await eventsFor(acct.id, result.payment.id);
      expect(events).toHaveLength(1);
      expect(events[0].type).toBe(status === "completed" ? "payment.completed" : "payment.failed");
      expect(events[0].body.data).toEqual({
        transaction_id: result.payment.id,
        amount: 1999,
        currency: "usd",
        status,
        customer: { id: customer.id, email: "ada@example.com" },
        subscription_id: "sub_01m7z2d8n7zgev6x3n0epk9rxn",
      });
    });
  }

  it("4000000000000341: the first charge succeeds, a later charge of its token is declined", async () => {
    const first = await chargeCard(acct, customer, { pan: CARDS.declineAfterFirst });
    expect(first.succeeded).toBe(true);
    const renewal = await chargeCard(acct, customer, { pan: CARDS.declineAfterFirst, token: first.token! });
    expect(renewal.succeeded).toBe(false);
    expect(renewal.declineCode).toBe("card_declined");
    expect((await call(`/payments/${renewal.payment.id}`, { key: acct.key })).body).toMatchObject({ status: "failed", failure_code: "card_declined" });

    // A good card's token keeps succeeding.
    const good = await chargeCard(acct, customer, { pan: CARDS.visa });
    const goodRenewal = await chargeCard(acct, customer, { pan: CARDS.visa, token: good.token! });
    expect(goodRenewal.succeeded).toBe(true);
  });

  it("charges JPY (no decimals) and KWD (three decimals) in their smallest units", async () => {
    const jpy = await chargeCard(acct, customer, { amount: 5000, currency: "jpy" });
    const kwd = await chargeCard(acct, customer, { amount: 1234, currency: "kwd" });
    expect((await call(`/payments/${jpy.payment.id}`, { key: acct.key })).body).toMatchObject({ amount: 5000, currency: "jpy" });
    expect((await call(`/payments/${kwd.payment.id}`, { key: acct.key })).body).toMatchObject({ amount: 1234, currency: "kwd" });
  });
});

describe("GET /payments", () => {
  it("lists newest first, filtered by user or subscription, only for this account", async () => {
    const fresh = await signup("Lister");
    const ada = await createUser(fresh, { name: "Ada", email: "ada@example.com" });
    const bob = await createUser(fresh, { name: "Bob", email: "bob@example.com" });
    const a1 = await chargeCard(fresh, ada, { subscriptionId: "sub_01m7z2d8n7zgev6x3n0epk9aaa" });
    const b1 = await chargeCard(fresh, bob, { subscriptionId: "sub_01m7z2d8n7zgev6x3n0epk9bbb", pan: CARDS.declined });
    const a2 = await chargeCard(fresh, ada, { subscriptionId: "sub_01m7z2d8n7zgev6x3n0epk9aaa" });
    await chargeCard(other, null);

    const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((p) => p.id);
    const all = await call("/payments", { key: fresh.key });
    expect(all.body.object).toBe("list");
    expect(ids(all)).toEqual([a2.payment.id, b1.payment.id, a1.payment.id]);
    expect(all.body.has_more).toBe(false);
    expect(ids(await call(`/payments?user_id=${ada.id}`, { key: fresh.key }))).toEqual([a2.payment.id, a1.payment.id]);
    expect(ids(await call("/payments?subscription_id=sub_01m7z2d8n7zgev6x3n0epk9bbb", { key: fresh.key }))).toEqual([b1.payment.id]);
    expect(ids(await call(`/payments?user_id=${ada.id}&subscription_id=sub_01m7z2d8n7zgev6x3n0epk9bbb`, { key: fresh.key }))).toEqual([]);

    const page = await call("/payments?limit=1", { key: fresh.key });
    expect(ids(page)).toEqual([a2.payment.id]);
    expect(page.body.has_more).toBe(true);
    const next = await call(`/payments?limit=2&starting_after=${a2.payment.id}`, { key: fresh.key });
    expect(ids(next)).toEqual([b1.payment.id, a1.payment.id]);
    const back = await call(`/payments?ending_before=${a1.payment.id}`, { key: fresh.key });
    expect(ids(back)).toEqual([a2.payment.id, b1.payment.id]);

    expectError(await call("/payments?limit=0", { key: fresh.key }), 400, "invalid_request_error", "parameter_invalid");
    expectError(await call("/payments?starting_after=po_01m7z2d8n7zgev6x3n0epk9rxn", { key: fresh.key }), 400, "invalid_request_error", "invalid_cursor");
  });

  it("answers 404 for another account's payment and for an unknown id", async () => {
    const mine = await chargeCard(acct, customer);
    expectError(await call(`/payments/${mine.payment.id}`, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await call("/payments/pay_01m7z2d8n7zgev6x3n0epk9rxn", { key: acct.key }), 404, "not_found_error", "resource_missing");
    const theirs = await call("/payments?limit=100", { key: other.key });
    expect(theirs.body.data.map((p: { id: string }) => p.id)).not.toContain(mine.payment.id);
  });

  it("needs payments:read", async () => {
    const payment = await chargeCard(acct, customer);
    expectError(await call("/payments"), 401, "authentication_error");
    const payouts = (await createKey(acct, ["payouts:write"])).secret;
    expectError(await call("/payments", { key: payouts }), 403, "permission_error", "missing_scope");
    expectError(await call(`/payments/${payment.payment.id}`, { key: payouts }), 403, "permission_error", "missing_scope");
    const reader = (await createKey(acct, ["payments:read"])).secret;
    expect((await call(`/payments/${payment.payment.id}`, { key: reader })).status).toBe(200);
  });
});

describe("readCard (the shared card input)", () => {
  it("returns the card for the processor, a summary and a keyed fingerprint that ignores spacing", async () => {
    const now = Date.now();
    const a = await readCard(env, cardFields("4242 4242 4242 4242"), now);
    const b = await readCard(env, cardFields(CARDS.visa), new Date(now));
    expect(a.card).toEqual({ number: CARDS.visa, expMonth: 12, expYear: nextYear, cvv: "987" });
    expect(a.summary).toEqual({ brand: "visa", last4: "4242", exp_month: 12, exp_year: nextYear });
    expect(a.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(a.fingerprint).toBe(b.fingerprint);
    expect((await readCard(env, cardFields(CARDS.mastercard), now)).fingerprint).not.toBe(a.fingerprint);
  });

  it("throws the 400 card error, with the field as param and no digits in the message", async () => {
    sentPans.add("4242424242424241");
    const error = await readCard(env, cardFields("4242424242424241"), Date.now()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 400, type: "card_error", code: "invalid_number", param: "card_number" });
    expect((error as Error).message).not.toMatch(/[0-9]/);
    const method = await readCard(env, { ...cardFields(), payment_method: "paypal" }, Date.now()).catch((e: unknown) => e);
    expect(method).toMatchObject({ status: 400, code: "payment_method_invalid", param: "payment_method" });
  });
});

describe("the card-data scan", () => {
  it("finds a PAN or a stored CVV wherever it is hidden", async () => {
    await env.DB.prepare("CREATE TABLE scan_probe (note TEXT)").run();
    try {
      await env.DB.prepare("INSERT INTO scan_probe (note) VALUES (?)").bind(`prefix-${CARDS.visa}-suffix`).run();
      await expect(expectNoCardData()).rejects.toThrow(/PAN found in scan_probe.note/);
      await env.DB.prepare("UPDATE scan_probe SET note = ?").bind('{"code":"987"}').run();
      await expect(expectNoCardData()).rejects.toThrow(/CVV 987 found in scan_probe.note/);
    } finally {
      await env.DB.prepare("DROP TABLE scan_probe").run();
    }
  });
});
