// Refunds: full, partial and default amounts, the refundable-remainder CHECK under concurrency,
// settlement through the job queue (by hand and by the real queue), and tenant isolation.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../src/domain/ids";
import { settleRefund } from "../../src/payments/settle-refund";
import { sandboxProcessor } from "../../src/processor/sandbox";
import { type Account, call, expectError, ISO_MS, roundTrips, signup } from "../support/http";
import { chargeCard, createKey, createUser } from "../support/fixtures";
import { captureLogs, CARDS, expectNoCardData } from "../support/cards";
import { countRows, eventsFor } from "../support/db";
import { runCron, runJobs } from "../support/queue";
import { waitFor } from "../support/wait";

const logs = captureLogs();
let acct: Account;
let other: Account;
let customer: { id: string; email: string };

beforeAll(async () => {
  acct = await signup("Merchant");
  other = await signup("Other");
  customer = await createUser(acct);
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const paid = async (amount = 10_000, currency = "usd", owner: Account = acct) =>
  (await chargeCard(owner, owner === acct ? customer : null, { amount, currency })).payment;
const refund = (body: Record<string, unknown>, options: { key?: string; idempotencyKey?: string } = {}) =>
  call("/refunds", { key: options.key ?? acct.key, body, idempotencyKey: options.idempotencyKey });
const payment = async (id: string) => (await call(`/payments/${id}`, { key: acct.key })).body;
const settle = (refundId: string) => runJobs({ kind: "settleRefund", refundId });

describe("POST /refunds", () => {
  it("refunds the whole payment by default, emits refund.initiated, then refund.completed when settled", async () => {
    const charged = await paid(10_000);
    const res = await refund({ payment_id: charged.id, reason: "requested_by_customer" });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^re_[0-9a-z]{26}$/),
      object: "refund",
      livemode: false,
      payment_id: charged.id,
      amount: 10_000,
      currency: "usd",
      reason: "requested_by_customer",
      status: "pending",
      created_at: expect.stringMatching(ISO_MS),
      completed_at: null,
    });
    expect(await payment(charged.id)).toMatchObject({ status: "refunded", amount_refunded: 10_000 });
    expect((await call(`/refunds/${res.body.id}`, { key: acct.key })).body).toEqual(res.body);

    const [initiated] = await eventsFor(acct.id, res.body.id);
    expect(initiated.body).toEqual({ id: initiated.id, type: "refund.initiated", data: res.body, created_at: res.body.created_at, object_id: res.body.id, sequence: 1, livemode: false });

    const result = await settle(res.body.id);
    expect(result.explicitAcks).toHaveLength(1);
    const settled = (await call(`/refunds/${res.body.id}`, { key: acct.key })).body;
    expect(settled).toEqual({ ...res.body, status: "succeeded", completed_at: expect.stringMatching(ISO_MS) });
    const events = await eventsFor(acct.id, res.body.id);
    expect(events.map((e) => e.type)).toEqual(["refund.initiated", "refund.completed"]);
    expect(events[1].body.data).toEqual(settled);
  });

  it("refunds partly, then the remainder, then refuses more", async () => {
    const charged = await paid(10_000);
    const first = await refund({ payment_id: charged.id, amount: 3000 });
    expect(first.body).toMatchObject({ amount: 3000, reason: null, status: "pending" });
    expect(await payment(charged.id)).toMatchObject({ status: "partially_refunded", amount_refunded: 3000 });

    const second = await refund({ payment_id: charged.id, amount: 2500, reason: "duplicate" });
    expect(second.body).toMatchObject({ amount: 2500, reason: "duplicate" });
    expect(await payment(charged.id)).toMatchObject({ status: "partially_refunded", amount_refunded: 5500 });

    const rest = await refund({ payment_id: charged.id });
    expect(rest.body.amount).toBe(4500);
    expect(await payment(charged.id)).toMatchObject({ status: "refunded", amount_refunded: 10_000 });

    const more = await refund({ payment_id: charged.id, amount: 1 });
    expect(expectError(more, 409, "invalid_request_error", "payment_already_refunded").message).toContain(charged.id);
    const list = await call(`/refunds?payment_id=${charged.id}`, { key: acct.key });
    expect(list.body.data.map((r: { amount: number }) => r.amount)).toEqual([4500, 2500, 3000]);
  });

  it("refuses a refund beyond what remains, naming the refundable remainder", async () => {
    const charged = await paid(10_000);
    await refund({ payment_id: charged.id, amount: 6000 });
    const res = await refund({ payment_id: charged.id, amount: 4001 });
    const error = expectError(res, 400, "invalid_request_error", "refund_exceeds_payment");
    expect(error.param).toBe("amount");
    expect(error.message).toContain("4000 (40.00 USD)");
    expect(await payment(charged.id)).toMatchObject({ status: "partially_refunded", amount_refunded: 6000 });
    expect(await countRows("refunds", "payment_id = ?", charged.id)).toBe(1);

    const whole = await paid(500);
    expect(expectError(await refund({ payment_id: whole.id, amount: 501 }), 400, "invalid_request_error", "refund_exceeds_payment").message).toContain(
      "500 (5.00 USD) of 500",
    );
  });

  it("refuses to refund a failed payment", async () => {
    const failed = (await chargeCard(acct, customer, { pan: CARDS.declined })).payment;
    const error = expectError(await refund({ payment_id: failed.id }), 409, "invalid_request_error", "payment_not_refundable");
    expect(error.message).toContain("failed");
    expect(await countRows("refunds", "payment_id = ?", failed.id)).toBe(0);
    expect(await payment(failed.id)).toMatchObject({ status: "failed", amount_refunded: 0 });
  });

  it("answers 404 for another account's payment, an unknown one and a malformed id", async () => {
    const theirs = await paid(1000, "usd", other);
    for (const payment_id of [theirs.id, "pay_01m7z2d8n7zgev6x3n0epk9rxn", "po_01m7z2d8n7zgev6x3n0epk9rxn"]) {
      const error = expectError(await refund({ payment_id }), 404, "not_found_error", "resource_missing");
      expect(error.param).toBe("payment_id");
    }
    expect((await call(`/payments/${theirs.id}`, { key: other.key })).body).toMatchObject({ status: "completed", amount_refunded: 0 });
  });

  it("validates amount and reason", async () => {
    const charged = await paid(1000);
    for (const amount of [0, -1, "10"]) {
      expect(expectError(await refund({ payment_id: charged.id, amount }), 400, "invalid_request_error", "parameter_invalid").param).toBe("amount");
    }
    const decimal = await call("/refunds", { key: acct.key, rawBody: `{"payment_id":"${charged.id}","amount":10.50}`, headers: { "content-type": "application/json" } });
    expect(expectError(decimal, 400, "invalid_request_error", "amount_not_integer").message).toContain("1050");
    expect(expectError(await refund({ payment_id: charged.id, reason: "changed_mind" }), 400, "invalid_request_error", "parameter_invalid").param).toBe("reason");
    expect(expectError(await refund({}), 400, "invalid_request_error", "parameter_missing").param).toBe("payment_id");
    expect(await countRows("refunds", "payment_id = ?", charged.id)).toBe(0);
  });

  it("refunds JPY (no decimals) and KWD (three decimals) end to end", async () => {
    const jpy = await paid(5000, "jpy");
    const r1 = await refund({ payment_id: jpy.id, amount: 1200 });
    expect(r1.body).toMatchObject({ amount: 1200, currency: "jpy" });
    const over = await refund({ payment_id: jpy.id, amount: 3801 });
    expect(expectError(over, 400, "invalid_request_error", "refund_exceeds_payment").message).toContain("3800 (3800 JPY)");

    const kwd = await paid(1234, "kwd");
    const r2 = await refund({ payment_id: kwd.id, amount: 234 });
    expect(r2.body).toMatchObject({ amount: 234, currency: "kwd" });
    expect(expectError(await refund({ payment_id: kwd.id, amount: 1001 }), 400, "invalid_request_error", "refund_exceeds_payment").message).toContain(
      "1000 (1.000 KWD)",
    );
    await runJobs({ kind: "settleRefund", refundId: r1.body.id }, { kind: "settleRefund", refundId: r2.body.id });
    for (const [r, amount, currency] of [[r1, 1200, "jpy"], [r2, 234, "kwd"]] as const) {
      const completed = (await eventsFor(acct.id, r.body.id)).find((e) => e.type === "refund.completed")!;
      expect(completed.body.data).toMatchObject({ amount, currency, status: "succeeded" });
    }
  });

  it("needs refunds:write to refund and refunds:read to read", async () => {
    const charged = await paid(1000);
    expectError(await call("/refunds", { body: { payment_id: charged.id } }), 401, "authentication_error");
    const reader = (await createKey(acct, ["refunds:read", "payments:read"])).secret;
    expectError(await refund({ payment_id: charged.id }, { key: reader }), 403, "permission_error", "missing_scope");
    const writer = (await createKey(acct, ["refunds:write"])).secret;
    const created = await refund({ payment_id: charged.id, amount: 100 }, { key: writer });
    expect(created.status, created.text).toBe(201);
    expect((await call(`/refunds/${created.body.id}`, { key: reader })).status).toBe(200);
    const payouts = (await createKey(acct, ["payouts:read"])).secret;
    expectError(await call("/refunds", { key: payouts }), 403, "permission_error", "missing_scope");
  });

  // Two: the read of the payment's invoice and its credit notes (a refund of an invoiced payment
  // issues a credit note, planned line by line from them), then the one batch.
  it("costs two D1 round trips with a warm credential, with or without an Idempotency-Key, and replays", async () => {
    const charged = await paid(1000);
    const plain = await refund({ payment_id: charged.id, amount: 100 });
    expect(roundTrips(plain)).toBe(2);
    const keyed = await refund({ payment_id: charged.id, amount: 100 }, { idempotencyKey: `refund-${charged.id}` });
    expect(roundTrips(keyed)).toBe(2);
    const replay = await refund({ payment_id: charged.id, amount: 100 }, { idempotencyKey: `refund-${charged.id}` });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(keyed.body);
    expect(await payment(charged.id)).toMatchObject({ amount_refunded: 200 });
  });
});

describe("concurrency", () => {
  it("10 parallel refunds of 30% each never pass the charged amount", async () => {
    const charged = await paid(10_000);
    const answers = await Promise.all(Array.from({ length: 10 }, () => refund({ payment_id: charged.id, amount: 3000 })));
    const created = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status !== 201);
    expect(created).toHaveLength(3);
    for (const r of refused) expect(expectError(r, 400, "invalid_request_error", "refund_exceeds_payment").message).toContain("1000 (10.00 USD)");
    expect(await payment(charged.id)).toMatchObject({ status: "partially_refunded", amount_refunded: 9000 });
    const sum = await env.DB.prepare("SELECT sum(amount) AS total, count(*) AS n FROM refunds WHERE payment_id = ?").bind(charged.id).first<{ total: number; n: number }>();
    expect(sum).toEqual({ total: 9000, n: 3 });
    expect(await countRows("events", "type = 'refund.initiated' AND json_extract(payload, '$.data.payment_id') = ?", charged.id)).toBe(3);
  });

  it("5 parallel full refunds make exactly one refund", async () => {
    const charged = await paid(2500);
    const answers = await Promise.all(Array.from({ length: 5 }, () => refund({ payment_id: charged.id })));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    for (const a of answers.filter((x) => x.status !== 201)) expect([400, 409]).toContain(a.status);
    expect(await payment(charged.id)).toMatchObject({ status: "refunded", amount_refunded: 2500 });
    expect(await countRows("refunds", "payment_id = ?", charged.id)).toBe(1);
  });
});

describe("settlement", () => {
  it("a duplicated settlement message completes the refund once", async () => {
    const charged = await paid(1000);
    const created = (await refund({ payment_id: charged.id })).body;
    await runJobs({ kind: "settleRefund", refundId: created.id }, { kind: "settleRefund", refundId: created.id });
    await Promise.all([settle(created.id), settle(created.id)]);
    // The real queue delivers its own copy too; wait for it, then count.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const events = await eventsFor(acct.id, created.id);
    expect(events.map((e) => e.type)).toEqual(["refund.initiated", "refund.completed"]);
    expect(await settleRefund({ kind: "settleRefund", refundId: created.id }, env)).toBe("skipped");
  });

  it("the real local queue completes a refund on its own", async () => {
    const charged = await paid(1000);
    const created = (await refund({ payment_id: charged.id, amount: 400 })).body;
    await waitFor(async () => expect((await call(`/refunds/${created.id}`, { key: acct.key })).body.status).toBe("succeeded"));
    expect((await eventsFor(acct.id, created.id)).map((e) => e.type)).toEqual(["refund.initiated", "refund.completed"]);
  });

  it("a refund the processor refuses is failed and its amount becomes refundable again", async () => {
    const charged = await paid(1000);
    // A pending refund committed as POST /refunds does, but never enqueued, so nothing races.
    const refundId = newId("refund", Date.now());
    await env.DB.batch([
      env.DB.prepare("INSERT INTO refunds (id, account_id, payment_id, amount, currency, status, created_at) VALUES (?, ?, ?, 1000, 'usd', 'pending', ?)").bind(
        refundId,
        acct.id,
        charged.id,
        new Date().toISOString(),
      ),
      env.DB.prepare("UPDATE payments SET amount_refunded = 1000, status = 'refunded' WHERE id = ?").bind(charged.id),
    ]);
    const refusing = { ...sandboxProcessor, refund: async () => ({ status: "failed" as const, code: "processing_error" as const, message: "Refused." }) };
    expect(await settleRefund({ kind: "settleRefund", refundId }, env, refusing)).toBe("failed");
    expect((await call(`/refunds/${refundId}`, { key: acct.key })).body).toMatchObject({ status: "failed", completed_at: null });
    expect(await payment(charged.id)).toMatchObject({ status: "completed", amount_refunded: 0 });
    expect((await eventsFor(acct.id, refundId)).map((e) => e.type)).toEqual([]);
    // Refundable again.
    expect((await refund({ payment_id: charged.id })).body.amount).toBe(1000);
  });

  it("a processor error leaves the refund pending for the retry", async () => {
    const charged = await paid(1000);
    const refundId = newId("refund", Date.now());
    await env.DB.prepare("INSERT INTO refunds (id, account_id, payment_id, amount, currency, status, created_at) VALUES (?, ?, ?, 300, 'usd', 'pending', ?)")
      .bind(refundId, acct.id, charged.id, new Date().toISOString())
      .run();
    const down = { ...sandboxProcessor, refund: () => Promise.reject(new Error("processor unreachable")) };
    await expect(settleRefund({ kind: "settleRefund", refundId }, env, down)).rejects.toThrow("processor unreachable");
    expect((await call(`/refunds/${refundId}`, { key: acct.key })).body.status).toBe("pending");
    expect(await settleRefund({ kind: "settleRefund", refundId }, env)).toBe("succeeded");
  });

  it("the cron sweep re-enqueues a refund whose settlement message was lost", async () => {
    const charged = await paid(1000);
    const refundId = newId("refund", Date.now());
    const old = new Date(Date.now() - 10 * 60_000).toISOString();
    await env.DB.prepare("INSERT INTO refunds (id, account_id, payment_id, amount, currency, status, created_at) VALUES (?, ?, ?, 300, 'usd', 'pending', ?)")
      .bind(refundId, acct.id, charged.id, old)
      .run();
    await runCron();
    await waitFor(async () => expect((await call(`/refunds/${refundId}`, { key: acct.key })).body.status).toBe("succeeded"));
    expect((await eventsFor(acct.id, refundId)).map((e) => e.type)).toEqual(["refund.completed"]);
  });
});

describe("GET /refunds", () => {
  it("lists this account's refunds newest first, and answers 404 for another account's", async () => {
    const fresh = await signup("Lister");
    const charged = (await chargeCard(fresh, null, { amount: 3000 })).payment;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await refund({ payment_id: charged.id, amount: 1000 }, { key: fresh.key })).body.id);
    const page = await call("/refunds?limit=2", { key: fresh.key });
    expect(page.body.data.map((r: { id: string }) => r.id)).toEqual([ids[2], ids[1]]);
    expect(page.body.has_more).toBe(true);
    expect((await call(`/refunds?payment_id=${charged.id}`, { key: fresh.key })).body.data).toHaveLength(3);
    expect((await call(`/refunds?payment_id=${charged.id}`, { key: other.key })).body.data).toHaveLength(0);
    expectError(await call(`/refunds/${ids[0]}`, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await call("/refunds/re_01m7z2d8n7zgev6x3n0epk9rxn", { key: fresh.key }), 404, "not_found_error", "resource_missing");
    expectError(await call("/refunds?starting_after=pay_01m7z2d8n7zgev6x3n0epk9rxn", { key: fresh.key }), 400, "invalid_request_error", "invalid_cursor");
  });
});
