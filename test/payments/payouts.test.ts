// Payouts over HTTP (POST /payout, list, read, cancel), their settlement through the job queue
// (driven by hand, and once by the real local queue), the cron sweep, idempotency under
// concurrency, and proof that no card number or CVV is stored or logged.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CURRENT_API_VERSION, PAYOUT_NEEDS_RECIPIENT } from "../../src/domain/api-versions";
import { isoDate } from "../../src/lib/clock";
import { settlePayout } from "../../src/payments/settle-payout";
import { sandboxProcessor } from "../../src/processor/sandbox";
import { type Account, call, expectError, ISO_MS, roundTrips, signup } from "../support/http";
import { createKey, createPayout, createUser } from "../support/fixtures";
import { captureLogs, cardFields, CARDS, expectNoCardData, nextYear, payoutBody, sentCvvs, sentPans } from "../support/cards";
import { countRows, eventsFor, eventsOf } from "../support/db";
import { runCron, runJobs } from "../support/queue";
import { waitFor } from "../support/wait";

const logs = captureLogs();
let acct: Account;
let other: Account;

beforeAll(async () => {
  acct = await signup("Payer");
  other = await signup("Other");
});

afterAll(async () => {
  const scanned = await expectNoCardData();
  expect(scanned.cells).toBeGreaterThan(100);
  logs.expectNoCardData();
  logs.restore();
});

const settle = (payoutId: string) => runJobs({ kind: "settlePayout", payoutId });

/** A response must never carry the card number or the CVV, in any form. */
function expectNoCardEcho(text: string) {
  for (const pan of sentPans) expect(text).not.toContain(pan);
  for (const cvv of sentCvvs) expect(text).not.toMatch(new RegExp(`"${cvv}"`));
}

describe("POST /payout", () => {
  it("creates a pending payout and emits payout.created with the same object", async () => {
    const before = Date.now();
    const res = await call("/payout", { key: acct.key, body: payoutBody() });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^po_[0-9a-z]{26}$/),
      object: "payout",
      livemode: false,
      recipient_id: null,
      amount: 2500,
      currency: "usd",
      description: "Vendor invoice 1042",
      status: "pending",
      date: isoDate(before),
      card: { brand: "visa", last4: "4242", exp_month: 12, exp_year: nextYear },
      failure_code: null,
      failure_message: null,
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
    });
    expect(res.body.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expectNoCardEcho(res.text);

    const read = await call(`/payouts/${res.body.id}`, { key: acct.key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);

    const [created] = await eventsFor(acct.id, res.body.id);
    expect(created.type).toBe("payout.created");
    expect(created.body).toEqual({ id: created.id, type: "payout.created", data: res.body, created_at: res.body.created_at, object_id: res.body.id, sequence: 1, livemode: false });
  });

  it("since Tender-Version 2026-11-27 a test-mode payout needs recipient_id: 400 parameter_missing naming it, and nothing is written", async () => {
    const current = await signup("Current payer", { apiVersion: CURRENT_API_VERSION });
    expect(CURRENT_API_VERSION).toBe(PAYOUT_NEEDS_RECIPIENT);
    const payoutsBefore = await countRows("payouts");
    const eventsBefore = await countRows("events");
    const missing = await call("/payout", { key: current.key, body: payoutBody(), idempotencyKey: "needs-recipient" });
    const error = expectError(missing, 400, "invalid_request_error", "parameter_missing");
    expect(error.param).toBe("recipient_id");
    expect(error.message).toMatch(/^recipient_id: .*Tender-Version 2026-11-27/);
    expect(missing.headers.get("tender-version")).toBe(PAYOUT_NEEDS_RECIPIENT);
    // An account pinned to an older version that asks for the new one is refused the same way.
    expectError(await call("/payout", { key: acct.key, body: payoutBody(), headers: { "tender-version": PAYOUT_NEEDS_RECIPIENT } }), 400, "invalid_request_error", "parameter_missing");
    expect(await countRows("payouts")).toBe(payoutsBefore);
    expect(await countRows("events")).toBe(eventsBefore);
    expect((await call("/payouts", { key: current.key })).body.data).toEqual([]);
    // With the recipient it is paid, under the same key (the refusal did not keep it).
    const user = await createUser(current);
    const paid = await call("/payout", { key: current.key, body: payoutBody({ recipient_id: user.id }), idempotencyKey: "needs-recipient" });
    expect(paid.status, paid.text).toBe(201);
    expect(paid.body).toMatchObject({ recipient_id: user.id, status: "pending", livemode: false });
  });

  it("the OpenAPI document, which describes the current version, lists recipient_id as required and its sample sends it", async () => {
    const doc = (await call("/openapi.json")).body;
    expect(doc.info.version).toBe(PAYOUT_NEEDS_RECIPIENT);
    expect(doc.components.schemas.CreatePayoutRequest.required).toContain("recipient_id");
    expect(doc.components.schemas.CreatePayoutRequest.properties.recipient_id.description).toMatch(/Required since Tender-Version 2026-11-27/);
    expect(doc.paths["/payout"].post["x-codeSamples"][0].source).toMatch(/recipient_id: "usr_/);
  });

  it("under 2026-11-22 and earlier, a test-mode payout without recipient_id is paid (the interface document's sample), pinned or asked for", async () => {
    for (const version of ["2026-11-01", "2026-11-22"]) {
      const pinned = await signup(`Pinned ${version}`, { apiVersion: version });
      const res = await call("/payout", { key: pinned.key, body: payoutBody() });
      expect(res.status, res.text).toBe(201);
      expect(res.headers.get("tender-version")).toBe(version);
      expect(res.body).toMatchObject({ recipient_id: null, status: "pending" });
    }
    const current = await signup("Asks for the old version", { apiVersion: CURRENT_API_VERSION });
    const asked = await call("/payout", { key: current.key, body: payoutBody(), headers: { "tender-version": "2026-11-22" } });
    expect(asked.status, asked.text).toBe(201);
    expect(asked.body.recipient_id).toBeNull();
  });

  it("pays a recipient who is a user of the account", async () => {
    const user = await createUser(acct);
    const payout = await createPayout(acct, { recipient_id: user.id, currency: "EUR" });
    expect(payout.recipient_id).toBe(user.id);
    expect(payout.currency).toBe("eur");
    const listed = await call(`/payouts?recipient_id=${user.id}`, { key: acct.key });
    expect(listed.body.data.map((p: { id: string }) => p.id)).toEqual([payout.id]);
  });

  it("answers 404 for a recipient that is not a user of this account", async () => {
    const theirs = await createUser(other, { name: "Grace", email: "grace@example.com" });
    const before = await countRows("payouts", "account_id = ?", acct.id);
    for (const recipient_id of [theirs.id, "usr_01m7z2d8n7zgev6x3n0epk9rxn", "not-an-id"]) {
      const res = await call("/payout", { key: acct.key, body: payoutBody({ recipient_id }) });
      const error = expectError(res, 404, "not_found_error", "resource_missing");
      expect(error.param).toBe("recipient_id");
      expect(error.message).toContain(recipient_id);
    }
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(before);
  });

  it("accepts an American Express card with a four-digit CVV", async () => {
    const payout = await createPayout(acct, {}, CARDS.amex, "7391");
    expect(payout.card).toEqual({ brand: "amex", last4: "0005", exp_month: 12, exp_year: nextYear });
  });

  it("accepts a card number written with spaces", async () => {
    const payout = await createPayout(acct, { card_number: "4242 4242 4242 4242" });
    expect(payout.card.last4).toBe("4242");
  });

  describe("card validation (400, never echoing the card)", () => {
    const cases: [string, Record<string, unknown>, string, string][] = [
      ["a number failing the Luhn check", { card_number: "4242424242424241" }, "invalid_number", "card_number"],
      ["a number too short", { card_number: "4242" }, "invalid_number", "card_number"],
      ["letters in the number", { card_number: "4242abcd42424242" }, "invalid_number", "card_number"],
      ["month 13", { expiration_month: 13 }, "invalid_expiry_month", "expiration_month"],
      ["month 0", { expiration_month: 0 }, "invalid_expiry_month", "expiration_month"],
      ["a two-digit year", { expiration_year: 30 }, "invalid_expiry_year", "expiration_year"],
      ["an expired card", { expiration_month: 1, expiration_year: 2020 }, "expired_card", "expiration_year"],
      ["last month", { expiration_month: new Date().getUTCMonth() === 0 ? 12 : new Date().getUTCMonth(), expiration_year: new Date().getUTCMonth() === 0 ? new Date().getUTCFullYear() - 1 : new Date().getUTCFullYear() }, "expired_card", "expiration_year"],
      ["a two-digit CVV", { cvv: "98" }, "invalid_cvc", "cvv"],
      ["a four-digit CVV on Visa", { cvv: "9871" }, "invalid_cvc", "cvv"],
      ["a CVV with letters", { cvv: "9a7" }, "invalid_cvc", "cvv"],
    ];
    for (const [name, overrides, code, param] of cases) {
      it(`refuses ${name}`, async () => {
        if (typeof overrides.card_number === "string" && overrides.card_number.length >= 12) sentPans.add(overrides.card_number);
        if (typeof overrides.cvv === "string") sentCvvs.add(overrides.cvv);
        const res = await call("/payout", { key: acct.key, body: payoutBody(overrides) });
        const error = expectError(res, 400, "card_error", code);
        expect(error.param).toBe(param);
        expect(error.message).not.toMatch(/[0-9]/);
        expectNoCardEcho(res.text);
      });
    }

    it("refuses a three-digit CVV on an American Express card", async () => {
      const res = await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.amex, "739") });
      const error = expectError(res, 400, "card_error", "invalid_cvc");
      expect(error.message).toBe("The CVV must be four digits for American Express cards.");
    });

    it("refuses a payment method other than card, and a missing one", async () => {
      let error = expectError(await call("/payout", { key: acct.key, body: payoutBody({ payment_method: "bank_transfer" }) }), 400, "invalid_request_error", "payment_method_invalid");
      expect(error.param).toBe("payment_method");
      const { payment_method: _, ...body } = payoutBody();
      error = expectError(await call("/payout", { key: acct.key, body }), 400, "invalid_request_error", "parameter_missing");
      expect(error.param).toBe("payment_method");
    });

    it("refuses card fields of the wrong type without echoing them", async () => {
      sentPans.add("4242424242424242");
      const res = await call("/payout", { key: acct.key, body: payoutBody({ card_number: 4242424242424242 }) });
      const error = expectError(res, 400, "invalid_request_error", "parameter_invalid");
      expect(error.param).toBe("card_number");
      expectNoCardEcho(res.text);
      const cvv = await call("/payout", { key: acct.key, body: payoutBody({ cvv: 987 }) });
      expect(expectError(cvv, 400, "invalid_request_error").param).toBe("cvv");
      expectNoCardEcho(cvv.text);
    });
  });

  describe("money", () => {
    const raw = (json: string) => call("/payout", { key: acct.key, rawBody: json, headers: { "content-type": "application/json" } });
    const rest = (currency: string) => {
      const { amount: _, currency: __, ...fields } = payoutBody();
      return JSON.stringify({ ...fields, currency }).slice(1, -1);
    };

    it("refuses the decimal 100.00 and names the integer meant, per the currency's exponent", async () => {
      let error = expectError(await raw(`{"amount": 100.00, ${rest("usd")}}`), 400, "invalid_request_error", "amount_not_integer");
      expect(error.param).toBe("amount");
      expect(error.message).toContain("10000");
      error = expectError(await raw(`{"amount": 100.00, ${rest("JPY")}}`), 400, "invalid_request_error", "amount_not_integer");
      expect(error.message).toContain("send 100.");
      expect(error.message).not.toContain("10000");
      error = expectError(await raw(`{"amount": 1.234, ${rest("kwd")}}`), 400, "invalid_request_error", "amount_not_integer");
      expect(error.message).toContain("1234");
      expect(await countRows("payouts", "account_id = ? AND amount IN (100, 10000, 1234)", acct.id)).toBe(0);
    });

    it("refuses amounts outside 1 to 99999999999", async () => {
      for (const amount of [0, -5, 100_000_000_000]) {
        const error = expectError(await call("/payout", { key: acct.key, body: payoutBody({ amount }) }), 400, "invalid_request_error", "parameter_invalid");
        expect(error.param).toBe("amount");
        expect(error.message).toContain("99999999999");
      }
      expectError(await call("/payout", { key: acct.key, body: payoutBody({ amount: "2500" }) }), 400, "invalid_request_error", "parameter_invalid");
      const max = await createPayout(acct, { amount: 99_999_999_999 });
      expect(max.amount).toBe(99_999_999_999);
    });

    it("refuses an unknown currency and returns a known one lowercase", async () => {
      for (const currency of ["xyz", "US", "dollars", "XAU"]) {
        const error = expectError(await call("/payout", { key: acct.key, body: payoutBody({ currency }) }), 400, "invalid_request_error", "currency_invalid");
        expect(error.param).toBe("currency");
      }
      expect((await createPayout(acct, { currency: "GbP" })).currency).toBe("gbp");
      const testing = expectError(await call("/payout", { key: acct.key, body: payoutBody({ currency: "XTS" }) }), 400, "invalid_request_error", "currency_invalid");
      expect(testing.message).toBe('currency must be an ISO 4217 code such as "usd"; "XTS" is ISO 4217\'s code for testing (codes reserved for tests), not a currency money is charged in.');
      expect(expectError(await call("/payout", { key: acct.key, body: payoutBody({ currency: "xyz" }) }), 400, "invalid_request_error", "currency_invalid").message).toBe(
        'currency must be an ISO 4217 code such as "usd"; "xyz" is not one.',
      );
    });

    it("pays out JPY (no decimals) and KWD (three decimals) end to end", async () => {
      const jpy = await createPayout(acct, { amount: 5000, currency: "JPY" });
      const kwd = await createPayout(acct, { amount: 1234, currency: "kwd" });
      expect([jpy.amount, jpy.currency, kwd.amount, kwd.currency]).toEqual([5000, "jpy", 1234, "kwd"]);
      await runJobs({ kind: "settlePayout", payoutId: jpy.id }, { kind: "settlePayout", payoutId: kwd.id });
      for (const [payout, amount, currency] of [[jpy, 5000, "jpy"], [kwd, 1234, "kwd"]] as const) {
        const read = await call(`/payouts/${payout.id}`, { key: acct.key });
        expect(read.body).toMatchObject({ status: "paid", amount, currency });
        const paid = (await eventsFor(acct.id, payout.id)).find((e) => e.type === "payout.paid")!;
        expect(paid.body.data).toMatchObject({ amount, currency, status: "paid" });
      }
    });
  });

  it("refuses a description over 1000 characters", async () => {
    const error = expectError(await call("/payout", { key: acct.key, body: payoutBody({ description: "x".repeat(1001) }) }), 400, "invalid_request_error", "parameter_invalid");
    expect(error.param).toBe("description");
    expect((await createPayout(acct, { description: "y".repeat(1000) })).description).toHaveLength(1000);
  });

  it("needs a credential with payouts:write to create, payouts:read to read", async () => {
    const noCredential = await call("/payout", { body: payoutBody() });
    expectError(noCredential, 401, "authentication_error");
    expect(noCredential.headers.get("www-authenticate")).toMatch(/^Bearer/);

    const reader = (await createKey(acct, ["payouts:read"])).secret;
    expectError(await call("/payout", { key: reader, body: payoutBody() }), 403, "permission_error", "missing_scope");
    expect((await call("/payouts", { key: reader })).status).toBe(200);

    const unrelated = (await createKey(acct, ["users:read"])).secret;
    expectError(await call("/payouts", { key: unrelated }), 403, "permission_error", "missing_scope");

    const writer = (await createKey(acct, ["payouts:write"])).secret;
    const created = await call("/payout", { key: writer, body: payoutBody() });
    expect(created.status, created.text).toBe(201);
    expectError(await call(`/payouts/${created.body.id}/cancel`, { key: reader, method: "POST" }), 403, "permission_error", "missing_scope");
  });
});

describe("GET /payouts", () => {
  it("lists newest first with cursors and a status filter, and only this account's payouts", async () => {
    const fresh = await signup("Lister");
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createPayout(fresh, { amount: 100 + i })).id);
    await call(`/payouts/${ids[0]}/cancel`, { key: fresh.key, method: "POST" });

    const page1 = await call("/payouts?limit=2", { key: fresh.key });
    expect(page1.body.object).toBe("list");
    expect(page1.body.data.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.has_more).toBe(true);
    const page2 = await call(`/payouts?limit=2&starting_after=${ids[1]}`, { key: fresh.key });
    expect(page2.body.data.map((p: { id: string }) => p.id)).toEqual([ids[0]]);
    expect(page2.body.has_more).toBe(false);

    const canceled = await call("/payouts?status=canceled", { key: fresh.key });
    expect(canceled.body.data.map((p: { id: string }) => p.id)).toEqual([ids[0]]);
    expectError(await call("/payouts?status=lost", { key: fresh.key }), 400, "invalid_request_error", "parameter_invalid");
    expectError(await call("/payouts?starting_after=usr_01m7z2d8n7zgev6x3n0epk9rxn", { key: fresh.key }), 400, "invalid_request_error", "invalid_cursor");

    const theirs = await call("/payouts?limit=100", { key: other.key });
    expect(theirs.body.data.filter((p: { id: string }) => ids.includes(p.id))).toEqual([]);
  });

  it("answers 404 for another account's payout, and for an unknown one", async () => {
    const payout = await createPayout(acct);
    expectError(await call(`/payouts/${payout.id}`, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await call(`/payouts/${payout.id}/cancel`, { key: other.key, method: "POST" }), 404, "not_found_error", "resource_missing");
    expectError(await call("/payouts/po_01m7z2d8n7zgev6x3n0epk9rxn", { key: acct.key }), 404, "not_found_error", "resource_missing");
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("pending");
  });
});

describe("settlement", () => {
  const outcomes: [string, string, "paid" | "failed", string | null][] = [
    ["Visa 4242", CARDS.visa, "paid", null],
    ["Mastercard 5555", CARDS.mastercard, "paid", null],
    ["the declined card", CARDS.declined, "failed", "card_declined"],
    ["the insufficient-funds card", CARDS.insufficientFunds, "failed", "insufficient_funds"],
    ["the expired card", CARDS.expired, "failed", "expired_card"],
    ["the processing-error card", CARDS.processingError, "failed", "processing_error"],
    ["the decline-after-first card (payouts are not renewals)", CARDS.declineAfterFirst, "paid", null],
  ];
  for (const [name, pan, status, failureCode] of outcomes) {
    it(`settles a payout to ${name} as ${status}`, async () => {
      const payout = await createPayout(acct, {}, pan);
      expect(payout.status).toBe("pending");
      const result = await settle(payout.id);
      expect(result.explicitAcks).toHaveLength(1);
      expect(result.retryMessages).toEqual([]);

      const read = (await call(`/payouts/${payout.id}`, { key: acct.key })).body;
      expect(read).toMatchObject({ id: payout.id, status, failure_code: failureCode, card: { last4: pan.slice(-4) } });
      if (failureCode) expect(read.failure_message).toEqual(expect.any(String));
      else expect(read.failure_message).toBeNull();
      expect(read.updated_at >= payout.updated_at).toBe(true);

      const events = await eventsFor(acct.id, payout.id);
      expect(events.map((e) => e.type)).toEqual(["payout.created", `payout.${status}`]);
      expect(events[1].body.data).toEqual(read);
    });
  }

  it("a duplicated settlement message changes nothing and emits nothing more", async () => {
    const payout = await createPayout(acct, {}, CARDS.declined);
    const first = await runJobs({ kind: "settlePayout", payoutId: payout.id }, { kind: "settlePayout", payoutId: payout.id });
    expect(first.explicitAcks).toHaveLength(2);
    const settled = (await call(`/payouts/${payout.id}`, { key: acct.key })).body;
    await Promise.all([settle(payout.id), settle(payout.id)]);
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body).toEqual(settled);
    expect((await eventsFor(acct.id, payout.id)).map((e) => e.type)).toEqual(["payout.created", "payout.failed"]);
    expect(await settlePayout({ kind: "settlePayout", payoutId: payout.id }, env)).toBe("skipped");
  });

  it("a message for an unknown payout is acknowledged and does nothing", async () => {
    const result = await settle("po_01m7z2d8n7zgev6x3n0epk9rxn");
    expect(result.explicitAcks).toHaveLength(1);
  });

  it("a processor error is retried, and a payout being sent can no longer be canceled", async () => {
    const payout = await createPayout(acct);
    const failing = { ...sandboxProcessor, sendPayout: async () => Promise.reject(new Error("processor unreachable")) };
    await expect(settlePayout({ kind: "settlePayout", payoutId: payout.id }, env, failing)).rejects.toThrow("processor unreachable");
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("pending");

    const cancel = await call(`/payouts/${payout.id}/cancel`, { key: acct.key, method: "POST" });
    expect(expectError(cancel, 409, "invalid_request_error", "payout_not_pending").message).toContain("already being sent");

    // The queue's retry finishes the job.
    const retried = await settle(payout.id);
    expect(retried.explicitAcks).toHaveLength(1);
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("paid");
    expect((await eventsFor(acct.id, payout.id)).map((e) => e.type)).toEqual(["payout.created", "payout.paid"]);
  });

  it("the real local queue settles a new payout after its hold", async () => {
    const payout = await createPayout(acct, {}, CARDS.insufficientFunds);
    await waitFor(async () => expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("failed"), 20_000);
    const read = (await call(`/payouts/${payout.id}`, { key: acct.key })).body;
    expect(read.failure_code).toBe("insufficient_funds");
    expect((await eventsFor(acct.id, payout.id)).map((e) => e.type)).toEqual(["payout.created", "payout.failed"]);
  }, 30_000);

  it("the cron sweep re-enqueues a payout whose settlement message was lost", async () => {
    const payout = await createPayout(acct, {}, CARDS.mastercard);
    // As if created ten minutes ago and its enqueue lost: the sweep finds it.
    const old = new Date(Date.now() - 10 * 60_000).toISOString();
    await env.DB.prepare("UPDATE payouts SET created_at = ? WHERE id = ?").bind(old, payout.id).run();
    await runCron();
    await waitFor(async () => expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("paid"), 15_000);
    expect((await eventsFor(acct.id, payout.id)).map((e) => e.type)).toEqual(["payout.created", "payout.paid"]);
  }, 30_000);
});

describe("POST /payouts/{id}/cancel", () => {
  it("cancels a pending payout; a settlement message afterwards leaves it canceled", async () => {
    const payout = await createPayout(acct);
    const res = await call(`/payouts/${payout.id}/cancel`, { key: acct.key, method: "POST" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ ...payout, status: "canceled", updated_at: expect.stringMatching(ISO_MS) });

    const result = await settle(payout.id);
    expect(result.explicitAcks).toHaveLength(1);
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body).toEqual(res.body);
    // Never handed to the processor.
    expect(await countRows("job_runs", "key = ?", `payout_send:${payout.id}`)).toBe(0);

    const events = await eventsFor(acct.id, payout.id);
    expect(events.map((e) => e.type)).toEqual(["payout.created", "payout.canceled"]);
    expect(events[1].body.data).toEqual(res.body);

    const again = await call(`/payouts/${payout.id}/cancel`, { key: acct.key, method: "POST" });
    expect(expectError(again, 409, "invalid_request_error", "payout_not_pending").message).toContain("is canceled");
  });

  it("answers 409 for a payout that was already paid", async () => {
    const payout = await createPayout(acct);
    await settle(payout.id);
    const res = await call(`/payouts/${payout.id}/cancel`, { key: acct.key, method: "POST" });
    expect(expectError(res, 409, "invalid_request_error", "payout_not_pending").message).toBe(
      `Payout '${payout.id}' is paid; only a pending payout can be canceled.`,
    );
    expect((await eventsFor(acct.id, payout.id)).map((e) => e.type)).toEqual(["payout.created", "payout.paid"]);
  });

  it("a retried cancel with the same Idempotency-Key replays the answer", async () => {
    const payout = await createPayout(acct);
    const first = await call(`/payouts/${payout.id}/cancel`, { key: acct.key, method: "POST", idempotencyKey: `cancel-${payout.id}` });
    const second = await call(`/payouts/${payout.id}/cancel`, { key: acct.key, method: "POST", idempotencyKey: `cancel-${payout.id}` });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body).toEqual(first.body);
    expect((await eventsOf(acct.id, "payout.canceled")).filter((e) => e.body.data.id === payout.id)).toHaveLength(1);
  });
});

describe("idempotency and cost", () => {
  it("20 concurrent POST /payout with one Idempotency-Key make exactly one payout", async () => {
    const fresh = await signup("Concurrent");
    const body = payoutBody({ amount: 777 });
    const answers = await Promise.all(Array.from({ length: 20 }, () => call("/payout", { key: fresh.key, body, idempotencyKey: "payout-once" })));
    const created = answers.filter((a) => a.status === 201);
    const conflicts = answers.filter((a) => a.status === 409);
    expect(created.length + conflicts.length).toBe(20);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((a) => a.body.id)).size).toBe(1);
    for (const c of conflicts) expectError(c, 409, "invalid_request_error", "idempotency_key_in_use");
    expect(await countRows("payouts", "account_id = ?", fresh.id)).toBe(1);
    expect(await countRows("events", "account_id = ? AND type = 'payout.created'", fresh.id)).toBe(1);

    const replay = await call("/payout", { key: fresh.key, body, idempotencyKey: "payout-once" });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(created[0].body);
    expectNoCardEcho(replay.text);

    // The same key with another card is a different request.
    const changed = await call("/payout", { key: fresh.key, body: { ...body, ...cardFields(CARDS.mastercard) }, idempotencyKey: "payout-once" });
    expectError(changed, 422, "idempotency_error", "idempotency_key_reused");
    expect(await countRows("payouts", "account_id = ?", fresh.id)).toBe(1);
  });

  it("a refused payout releases its Idempotency-Key for a corrected retry", async () => {
    const bad = await call("/payout", { key: acct.key, body: payoutBody({ currency: "zzz" }), idempotencyKey: "fix-and-retry" });
    expectError(bad, 400, "invalid_request_error", "currency_invalid");
    const good = await call("/payout", { key: acct.key, body: payoutBody(), idempotencyKey: "fix-and-retry" });
    expect(good.status, good.text).toBe(201);
  });

  it("POST /payout costs one D1 round trip, with or without an Idempotency-Key, and writes the rows it must", async () => {
    const fresh = await signup("Counted");
    // One endpoint subscribed to payout events: each event gets one delivery row. Its URL is
    // refused at delivery time (nothing listens), which does not matter here.
    await env.DB.prepare(
      "INSERT INTO webhook_endpoints (id, account_id, url, events, status, secret, created_at, updated_at) VALUES (?, ?, 'https://receiver.invalid/hook', '[\"payout.created\"]', 'active', 'whsec_x', ?, ?)",
    )
      .bind("whk_01m7z2d8n7zgev6x3n0epk9rxn", fresh.id, new Date().toISOString(), new Date().toISOString())
      .run();
    await call("/payouts?limit=1", { key: fresh.key }); // warms the credential cache

    const tables = ["payouts", "events", "webhook_deliveries", "idempotency_keys"];
    const counts = async () => Object.fromEntries(await Promise.all(tables.map(async (t) => [t, await countRows(t, "account_id = ?", fresh.id)])));

    const before = await counts();
    const plain = await call("/payout", { key: fresh.key, body: payoutBody() });
    expect(plain.status).toBe(201);
    expect(roundTrips(plain)).toBe(1);
    const afterPlain = await counts();
    expect(Object.fromEntries(tables.map((t) => [t, afterPlain[t] - before[t]]))).toEqual({ payouts: 1, events: 1, webhook_deliveries: 1, idempotency_keys: 0 });

    const keyed = await call("/payout", { key: fresh.key, body: payoutBody(), idempotencyKey: "counted" });
    expect(keyed.status).toBe(201);
    expect(roundTrips(keyed)).toBe(1);
    const afterKeyed = await counts();
    expect(Object.fromEntries(tables.map((t) => [t, afterKeyed[t] - afterPlain[t]]))).toEqual({ payouts: 1, events: 1, webhook_deliveries: 1, idempotency_keys: 1 });

    const withRecipient = await call("/payout", { key: fresh.key, body: payoutBody({ recipient_id: (await createUser(fresh)).id }) });
    expect(roundTrips(withRecipient)).toBe(1);
  });

  it("documents the routes in the OpenAPI document", async () => {
    const doc = (await call("/openapi.json")).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/payout", "/payouts", "/payouts/{id}", "/payouts/{id}/cancel"]));
    expect(doc.paths["/payout"].post.responses["201"]).toBeDefined();
    expect(doc.components.schemas.Payout.properties.card).toBeDefined();
  });
});
