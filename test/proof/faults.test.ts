// Faults: what happens when the machinery fails halfway, against the real local D1, queues,
// Durable Objects and cron (only webhook receivers are simulated).
//
// Where each required fault is covered:
// - A crash between the commit and the enqueue:
//     webhook deliveries: test/webhooks/delivery.test.ts "the sweeper delivers an event whose enqueue was lost"
//       (rows written by hand), and here through POST /api/users with a failing delivery queue;
//     refunds: test/payments/refunds.test.ts "the cron sweep re-enqueues a refund whose settlement message was lost";
//     payouts: here. (test/payments/payouts.test.ts "the cron sweep re-enqueues a payout ..." backdates a payout
//       whose own settlement message still exists, so it cannot tell the sweep from that message; here the
//       message is really lost.)
// - The same queue message delivered twice:
//     webhook deliveries: test/webhooks/delivery.test.ts "a duplicated queue message causes one attempt and one send";
//     settlePayout / settleRefund twice in one batch, and again after settling: test/payments/payouts.test.ts
//       "a duplicated settlement message ..." and test/payments/refunds.test.ts "a duplicated settlement message ...";
//     here: both messages in flight at once, in separate batches, while the payout or refund is still pending.
//     renewals: test/billing/renewals.test.ts "renews a chunk; the same message run concurrently or redelivered ...".
// - An alarm handler that throws: test/webhooks/delivery.test.ts "an alarm whose enqueue throws keeps the retry and tries again".
// - A receiver down for the whole 24 hours, then a manual redelivery: test/webhooks/delivery.test.ts
//     "walks the whole 24-hour schedule to failed, then a manual redelivery succeeds".
// - Overlapping renewal runs: test/billing/renewals.test.ts "two overlapping cron runs charge a due subscription once".
// - Concurrent requests with the same Idempotency-Key: 20 concurrent POST /payout is
//     test/payments/payouts.test.ts "20 concurrent POST /payout with one Idempotency-Key make exactly one payout"
//     (and POST /api/users in test/foundation/idempotency.test.ts); here: every other create operation of the
//     OpenAPI document, and a cancel, each 20 times at once with one key.
// - Concurrent refunds never pass the charged amount: test/payments/refunds.test.ts
//     "10 parallel refunds of 30% each never pass the charged amount" and "5 parallel full refunds make exactly one refund".
// Also here: concurrent writes to one webhook endpoint (PATCH + PATCH, PATCH + DELETE, rotate + rotate,
// rotate + DELETE), which lost updates and answered 200 for changes never stored before the fix in
// src/routes/webhooks/index.ts.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { settlePayout } from "../../src/payments/settle-payout";
import { settleRefund } from "../../src/payments/settle-refund";
import { sandboxProcessor } from "../../src/processor/sandbox";
import type { Processor } from "../../src/processor/types";
import { type Account, call, expectError, fetchWith, signup } from "../support/http";
import { type Fixtures, payoutWithoutSettlement, refundWithoutSettlement, seed } from "../support/fixtures";
import { captureLogs, CARDS, expectNoCardData } from "../support/cards";
import { backdate } from "../support/clock";
import { countRows, deliveriesOfEvent, deliveryRow, eventsFor } from "../support/db";
import { failingQueue, runCron, runJobs } from "../support/queue";
import { waitFor } from "../support/wait";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { type Operation, label, operations, validBody } from "../support/operations";

const logs = captureLogs();
// Every webhook delivery of this file goes to the simulated receiver.
const receiver = installReceiver();
let acct: Account;
let fx: Fixtures;

beforeAll(async () => {
  acct = await signup("Faults");
  fx = await seed(acct);
});

afterAll(async () => {
  receiver.restore();
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const payout = async (id: string) => (await call(`/payouts/${id}`, { key: acct.key })).body;

/** A processor that counts the payouts and refunds it is asked to make, by reference. */
function countingProcessor() {
  const payouts: string[] = [];
  const refunds: string[] = [];
  const processor: Processor = {
    ...sandboxProcessor,
    async sendPayout(args) {
      payouts.push(args.reference);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return sandboxProcessor.sendPayout(args);
    },
    async refund(args) {
      refunds.push(args.reference);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return sandboxProcessor.refund(args);
    },
  };
  return { processor, payouts, refunds };
}

describe("a crash between the commit and the enqueue", () => {
  it("POST /payout answers 201 when the settlement enqueue fails; the cron sweep settles the payout", async () => {
    const res = await fetchWith({ JOB_QUEUE: failingQueue() }, "/payout", {
      key: acct.key,
      json: validBody({ operationId: "createPayout" } as Operation, fx),
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe("pending");
    expect(logs.lines.some((l) => l.includes("payout settlement enqueue failed") && l.includes(res.body.id))).toBe(true);

    // A sweep before the payout is stale leaves it alone: nothing else will ever settle it.
    await runCron();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await payout(res.body.id)).status).toBe("pending");
    expect(await countRows("job_runs", "key = ?", `payout_send:${res.body.id}`)).toBe(0);

    // Once stale, the sweep re-enqueues it and the real queue settles it, once.
    await backdate("payouts", res.body.id);
    await runCron();
    await waitFor(async () => expect((await payout(res.body.id)).status).toBe("paid"), 15_000);
    expect((await eventsFor(acct.id, res.body.id)).map((e) => e.type)).toEqual(["payout.created", "payout.paid"]);
  }, 30_000);

  it("two overlapping cron sweeps of a lost payout settle it once", async () => {
    const lost = await payoutWithoutSettlement(acct, {}, CARDS.declined);
    await backdate("payouts", lost.id);
    await Promise.all([runCron(), runCron(), runCron()]);
    await waitFor(async () => expect((await payout(lost.id)).status).toBe("failed"), 15_000);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const read = await payout(lost.id);
    expect(read).toMatchObject({ status: "failed", failure_code: "card_declined" });
    expect((await eventsFor(acct.id, lost.id)).map((e) => e.type)).toEqual(["payout.created", "payout.failed"]);
    expect(await countRows("job_runs", "key = ?", `payout_send:${lost.id}`)).toBe(1);
  }, 30_000);

  it("a canceled payout whose message was lost is never sent by the sweep", async () => {
    const lost = await payoutWithoutSettlement(acct);
    const canceled = await call(`/payouts/${lost.id}/cancel`, { key: acct.key, method: "POST" });
    expect(canceled.status, canceled.text).toBe(200);
    await backdate("payouts", lost.id);
    await runCron();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await payout(lost.id)).status).toBe("canceled");
    expect(await countRows("job_runs", "key = ?", `payout_send:${lost.id}`)).toBe(0);
  });

  it("POST /api/users answers 201 when the delivery enqueue fails; the sweeper delivers the event", async () => {
    const hooked = await signup("Hooked");
    const hook = await call("/api/webhooks", { key: hooked.key, body: { url: `${RECEIVER_ORIGIN}/lost`, events: ["customer.created"] } });
    expect(hook.status).toBe(201);
    const toHook = () => receiver.received.filter((r) => r.url === `${RECEIVER_ORIGIN}/lost`);
    const res = await fetchWith({ DELIVERY_QUEUE: failingQueue() }, "/api/users", {
      key: hooked.key,
      json: { name: "Lost Enqueue", email: "lost@example.com" },
    });
    expect(res.status, res.text).toBe(201);
    const event = (await call("/api/events?type=customer.created", { key: hooked.key })).body.data[0];
    const [delivery] = await deliveriesOfEvent(event.id);
    expect(delivery).toMatchObject({ status: "pending", attempt_count: 0 });
    expect(logs.lines.some((l) => l.includes("enqueue failed; the sweeper will retry"))).toBe(true);
    expect(toHook()).toHaveLength(0);

    // The sweeper picks up deliveries untouched for a minute.
    await env.DB.prepare("UPDATE webhook_deliveries SET updated_at = ? WHERE id = ?").bind(Date.now() - 61_000, delivery.id).run();
    await runCron();
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.status).toBe("delivered"));
    expect(toHook()).toHaveLength(1);
    expect(JSON.parse(toHook()[0].body)).toMatchObject({ id: event.id, type: "customer.created", data: { id: res.body.id } });
  });
});

describe("the same job message delivered twice, both in flight at once", () => {
  it("settlePayout: one transition, one event, one send claim", async () => {
    const lost = await payoutWithoutSettlement(acct, {}, CARDS.mastercard);
    const message = { kind: "settlePayout" as const, payoutId: lost.id };
    const results = await Promise.all([runJobs(message), runJobs(message), runJobs(message)]);
    for (const result of results) {
      expect(result.explicitAcks).toHaveLength(1);
      expect(result.retryMessages).toEqual([]);
    }
    expect(await payout(lost.id)).toMatchObject({ status: "paid", failure_code: null });
    expect((await eventsFor(acct.id, lost.id)).map((e) => e.type)).toEqual(["payout.created", "payout.paid"]);
    expect(await countRows("job_runs", "key = ?", `payout_send:${lost.id}`)).toBe(1);
  });

  it("settlePayout: racing handlers commit one outcome, and every processor call carries the payout id as its reference", async () => {
    const lost = await payoutWithoutSettlement(acct);
    const counting = countingProcessor();
    const outcomes = await Promise.all([
      settlePayout({ kind: "settlePayout", payoutId: lost.id }, env, counting.processor),
      settlePayout({ kind: "settlePayout", payoutId: lost.id }, env, counting.processor),
    ]);
    expect(outcomes.filter((o) => o === "paid")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "skipped")).toHaveLength(1);
    // A real processor deduplicates by reference; the sandbox is told the same one each time.
    expect(counting.payouts.length).toBeGreaterThanOrEqual(1);
    expect(new Set(counting.payouts)).toEqual(new Set([lost.id]));
    expect((await eventsFor(acct.id, lost.id)).map((e) => e.type)).toEqual(["payout.created", "payout.paid"]);
  });

  it("settleRefund: one completion, one refund.completed, the payment's refunded amount counted once", async () => {
    const before = (await call(`/payments/${fx.payment}`, { key: acct.key })).body;
    const refund = await refundWithoutSettlement(acct, { payment_id: fx.payment, amount: 250 });
    const afterCreate = (await call(`/payments/${fx.payment}`, { key: acct.key })).body;
    expect(afterCreate.amount_refunded).toBe(before.amount_refunded + 250);

    const message = { kind: "settleRefund" as const, refundId: refund.id };
    const results = await Promise.all([runJobs(message), runJobs(message), runJobs(message)]);
    for (const result of results) expect(result.explicitAcks).toHaveLength(1);
    const counting = countingProcessor();
    expect(await settleRefund(message, env, counting.processor)).toBe("skipped");
    expect(counting.refunds).toEqual([]);

    expect((await call(`/refunds/${refund.id}`, { key: acct.key })).body).toMatchObject({ status: "succeeded", completed_at: expect.any(String) });
    expect((await eventsFor(acct.id, refund.id)).map((e) => e.type)).toEqual(["refund.initiated", "refund.completed"]);
    expect((await call(`/payments/${fx.payment}`, { key: acct.key })).body.amount_refunded).toBe(before.amount_refunded + 250);
  });

  it("settleRefund: racing handlers commit one outcome, each processor call with the refund id as its reference", async () => {
    const refund = await refundWithoutSettlement(acct, { payment_id: fx.payment, amount: 10 });
    const counting = countingProcessor();
    const outcomes = await Promise.all([
      settleRefund({ kind: "settleRefund", refundId: refund.id }, env, counting.processor),
      settleRefund({ kind: "settleRefund", refundId: refund.id }, env, counting.processor),
    ]);
    expect(outcomes.filter((o) => o === "succeeded")).toHaveLength(1);
    expect(new Set(counting.refunds)).toEqual(new Set([refund.id]));
    expect((await eventsFor(acct.id, refund.id)).map((e) => e.type)).toEqual(["refund.initiated", "refund.completed"]);
  });
});

describe("20 concurrent requests with one Idempotency-Key", () => {
  /** The table each create operation writes its object to. */
  const TABLE_OF: Record<string, string> = {
    createKey: "api_keys",
    createRequestId: "request_ids",
    createUser: "users",
    createPayout: "payouts",
    createRefund: "refunds",
    createPayment: "payments",
    createWebhook: "webhook_endpoints",
    createPlan: "plans",
    createSubscription: "subscriptions",
    createTestClock: "test_clocks",
    createCoupon: "coupons",
    createCheckoutSession: "checkout_sessions",
    createPortalSession: "portal_sessions",
    createTaxRate: "tax_rates",
    createCreditNote: "credit_notes",
    // A batch: no object of its own; its events land as usage records (counted below, once).
    createUsageEvents: "usage_records",
  };
  /** Idempotency does not apply to these (README: sign-up has no account, tokens are not replayed, a move is repeated as it is). */
  const NOT_IDEMPOTENT = new Set(["createAccount", "createAccessToken", "moveAccount"]);

  it("every create operation of the OpenAPI document makes exactly one object; every 2xx has its id", async () => {
    const creates = (await operations()).filter((op) => op.method === "post" && !op.hasId && !NOT_IDEMPOTENT.has(op.operationId));
    expect(creates.map((op) => op.operationId).sort()).toEqual(Object.keys(TABLE_OF).sort());
    for (const op of creates) {
      const fresh = await signup(`Concurrent ${op.operationId}`);
      const own = await seed(fresh);
      const table = TABLE_OF[op.operationId];
      const before = await countRows(table, "account_id = ?", fresh.id);
      const body = validBody(op, own);
      const answers = await Promise.all(Array.from({ length: 20 }, () => call(op.path, { key: fresh.key, body, idempotencyKey: `once-${op.operationId}` })));
      const ok = answers.filter((a) => a.status >= 200 && a.status < 300);
      expect(ok.length, label(op)).toBeGreaterThanOrEqual(1);
      for (const a of answers.filter((x) => x.status >= 300)) expectError(a, 409, "invalid_request_error", "idempotency_key_in_use");
      if (op.operationId === "createUsageEvents") {
        // Every answer is the first one's; its accepted events are recorded once.
        for (const a of ok) expect(a.body, label(op)).toEqual(ok[0].body);
        expect(ok[0].body.accepted, label(op)).toBeGreaterThanOrEqual(1);
        expect(await countRows(table, "account_id = ?", fresh.id), label(op)).toBe(before + ok[0].body.accepted);
        const replay = await call(op.path, { key: fresh.key, body, idempotencyKey: `once-${op.operationId}` });
        expect(replay.headers.get("idempotent-replayed")).toBe("true");
        expect(replay.body).toEqual(ok[0].body);
        continue;
      }
      expect(new Set(ok.map((a) => a.body.id)).size, label(op)).toBe(1);
      expect(await countRows(table, "account_id = ?", fresh.id), label(op)).toBe(before + 1);
      if (op.operationId === "createSubscription") {
        // Charged once: one more payment, for the one subscription.
        expect(await countRows("payments", "subscription_id = ?", ok[0].body.id)).toBe(1);
      }
      if (op.operationId === "createRefund") {
        expect((await call(`/payments/${own.payment}`, { key: fresh.key })).body.amount_refunded).toBe(100 + 1);
      }
      const replay = await call(op.path, { key: fresh.key, body, idempotencyKey: `once-${op.operationId}` });
      expect(replay.status, label(op)).toBe(ok[0].status);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.body.id).toBe(ok[0].body.id);
    }
  }, 60_000);

  it("20 concurrent cancels of one payout with one key: one cancel, one payout.canceled, the same answer", async () => {
    const lost = await payoutWithoutSettlement(acct);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => call(`/payouts/${lost.id}/cancel`, { key: acct.key, method: "POST", idempotencyKey: `cancel-${lost.id}` })),
    );
    const ok = answers.filter((a) => a.status === 200);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const a of ok) expect(a.body).toEqual(ok[0].body);
    for (const a of answers.filter((x) => x.status !== 200)) expectError(a, 409, "invalid_request_error", "idempotency_key_in_use");
    expect((await eventsFor(acct.id, lost.id)).map((e) => e.type)).toEqual(["payout.created", "payout.canceled"]);
  });
});

describe("concurrent writes to one webhook endpoint", () => {
  const hookUrl = `${RECEIVER_ORIGIN}/concurrent`;
  const endpoint = async () => {
    const res = await call("/api/webhooks", { key: acct.key, body: { url: hookUrl, events: ["payout.paid"] } });
    expect(res.status).toBe(201);
    return res.body as { id: string; secret: string };
  };
  const row = (id: string) => env.DB.prepare("SELECT * FROM webhook_endpoints WHERE id = ?").bind(id).first<Record<string, any>>();

  it("two PATCHes of different fields at once both take effect", async () => {
    for (let i = 0; i < 5; i++) {
      const hook = await endpoint();
      const [a, b] = await Promise.all([
        call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { url: `${hookUrl}/moved` } }),
        call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { events: ["payout.failed"] } }),
      ]);
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(a.body.url).toBe(`${hookUrl}/moved`);
      expect(b.body.events).toEqual(["payout.failed"]);
      expect((await call(`/api/webhooks/${hook.id}`, { key: acct.key })).body).toMatchObject({ url: `${hookUrl}/moved`, events: ["payout.failed"] });
    }
  });

  it("a PATCH racing a DELETE answers 200 only for a change it made, else 404; one of two DELETEs wins", async () => {
    for (let i = 0; i < 5; i++) {
      const hook = await endpoint();
      const [deleted, patched, again] = await Promise.all([
        call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "DELETE" }),
        call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { url: `${hookUrl}/patched` } }),
        call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "DELETE" }),
      ]);
      expect([deleted.status, again.status].sort()).toEqual([200, 404]);
      const stored = (await row(hook.id))!;
      expect(stored.deleted_at).not.toBeNull();
      if (patched.status === 200) expect(stored.url).toBe(`${hookUrl}/patched`);
      else {
        expectError(patched, 404, "not_found_error", "resource_missing");
        expect(stored.url).toBe(hookUrl);
      }
    }
  });

  it("two rotations at once: both secrets answered still sign (the newer as the secret, the older as the previous one)", async () => {
    for (let i = 0; i < 5; i++) {
      const hook = await endpoint();
      const answers = await Promise.all([
        call(`/api/webhooks/${hook.id}/rotate-secret`, { key: acct.key, method: "POST" }),
        call(`/api/webhooks/${hook.id}/rotate-secret`, { key: acct.key, method: "POST" }),
      ]);
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      const stored = (await row(hook.id))!;
      expect(new Set([stored.secret, stored.previous_secret])).toEqual(new Set(answers.map((a) => a.body.secret)));
    }
  });

  it("a rotation racing a DELETE never answers a secret that was not stored", async () => {
    for (let i = 0; i < 5; i++) {
      const hook = await endpoint();
      const [, rotated] = await Promise.all([
        call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "DELETE" }),
        call(`/api/webhooks/${hook.id}/rotate-secret`, { key: acct.key, method: "POST" }),
      ]);
      const stored = (await row(hook.id))!;
      if (rotated.status === 200) expect(stored.secret).toBe(rotated.body.secret);
      else expectError(rotated, 404, "not_found_error", "resource_missing");
    }
  });
});

