// Attacks on the money paths: lost replies, duplicate and late messages, two workers at once,
// a worker dying between steps, hostile input. Each test asserts the correct behaviour.
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { renewChunk } from "../../src/billing/renewals";
import { useProcessor } from "../../src/processor";
import { useClock } from "../../src/lib/clock";
import { type Account, call, expectError, fetchWith, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { cardFields, CARDS } from "../support/cards";
import { makeDue } from "../support/clock";
import { countRows } from "../support/db";
import { runCron } from "../support/queue";
import { faultyD1, gate, ledgerProcessor, recordingProcessor, sleep, writesTo } from "../support/faults";


afterEach(() => {
  useProcessor();
  useClock();
});

const idempotencyRecord = (accountId: string, key: string) =>
  env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(accountId, key).first<Record<string, any>>();

async function pastDue(acct: Account) {
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
  await makeDue(sub.id);
  expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
  return { user, plan, sub };
}

describe("past-due card update: a lost reply after the charge was recorded", () => {
  it("a committed charge whose reply was lost answers 200 and keeps its stored answer", async () => {
    const acct = await signup();
    const { sub } = await pastDue(acct);
    const body = cardFields(CARDS.visa);
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "payments") });
    const res = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: body, headers: { "idempotency-key": "pd-lost-1" } });
    expect(db.fired).toHaveLength(1);
    const stored = await env.DB.prepare("SELECT status FROM subscriptions WHERE id = ?").bind(sub.id).first<{ status: string }>();
    expect(stored!.status).toBe("active"); // the charge committed
    const record = await idempotencyRecord(acct.id, "pd-lost-1");
    expect(record?.status, `the charge committed, but the answer was ${res.status} ${res.text} and the key's record is ${JSON.stringify(record)}`).toBe("completed");
    expect(res.status, res.text).toBe(200);
    const retry = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body, idempotencyKey: "pd-lost-1" });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
  });

  it("a committed decline whose reply was lost answers 402 and keeps its stored answer", async () => {
    const acct = await signup();
    const { sub } = await pastDue(acct);
    const body = cardFields(CARDS.declined);
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "payments") });
    const res = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: body, headers: { "idempotency-key": "pd-lost-2" } });
    expect(db.fired).toHaveLength(1);
    expect(res.status, res.text).toBe(402);
    expect((await idempotencyRecord(acct.id, "pd-lost-2"))?.status).toBe("completed");
  });
});

describe("first charge: an Idempotency-Key reused after its record expired", () => {
  it("a new subscription with a key whose 24 h record has expired is really created", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const first = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "reuse-1" });
    expect(first.status, first.text).toBe(201);
    // 24 hours later the cron deletes the record: the key is free again.
    await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE account_id = ? AND key = ?").bind(Date.now() - 1, acct.id, "reuse-1").run();
    await runCron();
    expect(await idempotencyRecord(acct.id, "reuse-1")).toBeNull();
    const second = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "reuse-1" });
    if (second.status === 201) {
      // An answer of 201 must name a subscription that exists.
      expect(second.body.id).not.toBe(first.body.id);
      const read = await call(`/subscriptions/${second.body.id}`, { key: acct.key });
      expect(read.status, `201 answered for ${second.body.id}, which does not exist`).toBe(200);
    } else {
      expect(second.status).toBeGreaterThanOrEqual(400);
    }
  });

  it("a declined first charge's key, reused after expiry with a good card, creates the subscription", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const declined = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.declined) }, idempotencyKey: "reuse-2" });
    expect(declined.status).toBe(402);
    await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE account_id = ? AND key = ?").bind(Date.now() - 1, acct.id, "reuse-2").run();
    const second = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) }, idempotencyKey: "reuse-2" });
    if (second.status === 201) {
      const read = await call(`/subscriptions/${second.body.id}`, { key: acct.key });
      expect(read.status, `201 answered for ${second.body.id}, which does not exist`).toBe(200);
    } else {
      expect(second.status).toBeGreaterThanOrEqual(400);
    }
  });
});


describe("first charge: a stale claim taken over while the first request is still at the processor", () => {
  it("the request whose claim was taken over never answers 201 for a subscription that does not exist", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const held = gate();
    let firstCall = true;
    const calls = recordingProcessor((method) => {
      if (method !== "chargeCard" || !firstCall) return undefined;
      firstCall = false;
      return held.opened;
    });
    const slow = call("/subscriptions", { key: acct.key, body, idempotencyKey: "takeover-1" });
    await sleep(100);
    // The first request has been at the processor for over a minute: its claim looks dead.
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - 120000 WHERE account_id = ? AND key = ?").bind(acct.id, "takeover-1").run();
    const retry = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "takeover-1" });
    expect(retry.status, retry.text).toBe(201);
    held.open();
    const first = await slow;
    // The same request, taken over, reaches the processor with the same reference: one charge.
    const references = calls.filter((c) => c.method === "chargeCard").map((c) => c.reference);
    expect(references).toHaveLength(2);
    expect(references[0]).toMatch(new RegExp(`^${acct.id}:idempotency:takeover-1:`));
    expect(references[1]).toBe(references[0]);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(1);
    if (first.status === 201) {
      const read = await call(`/subscriptions/${first.body.id}`, { key: acct.key });
      expect(read.status, `the first request answered 201 for ${first.body.id}, which does not exist`).toBe(200);
    } else {
      expect(first.status).toBe(409);
    }
  });
});

describe("cancel at period end under a renewal charge in flight", () => {
  it("DELETE ?at_period_end=true answers 409 charge_in_progress while the charge is at the processor", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const held = gate();
    recordingProcessor((method) => (method === "chargeToken" ? held.opened : undefined));
    const charging = renewChunk(env, [sub.id]);
    await sleep(100);
    const res = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    expectError(res, 409, "invalid_request_error", "charge_in_progress");
    held.open();
    expect(await charging).toEqual(["renewed"]);
  });

  it("PUT cancel_at_period_end=true is refused the same way while the charge is at the processor", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const held = gate();
    recordingProcessor((method) => (method === "chargeToken" ? held.opened : undefined));
    const charging = renewChunk(env, [sub.id]);
    await sleep(100);
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: true } });
    held.open();
    expect(await charging).toEqual(["renewed"]);
    // The caller must not be told "no further charge" while a period's charge is at the processor.
    expect(res.status, res.text).toBe(409);
    expect(res.body.error?.code).toBe("charge_in_progress");
  });
});

// ---------------------------------------------------------------------------------------------
// Attacks the code withstood: kept as regression tests.

import { settlePayout } from "../../src/payments/settle-payout";
import { settleRefund } from "../../src/payments/settle-refund";
import { processDelivery } from "../../src/webhooks/consumer";
import { expireRecords } from "../../src/jobs/expiry";
import { DELIVERY_WINDOW_MS, FINAL_ATTEMPT_LEAD_MS } from "../../src/domain/webhook-retry-schedule";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { droppingQueue } from "../support/queue";
import { payoutBody } from "../support/cards";
import { createClock } from "../support/clock";

const withDb = (db: D1Database) => ({ ...env, DB: db }) as typeof env;
const newPayout = async (acct: Account, amount = 1234) => {
  const res = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody({ amount }) });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
};
const eventCount = (accountId: string, type: string) => countRows("events", "account_id = ? AND type = ?", accountId, type);

describe("payouts: lost replies and duplicates around the send lease", () => {
  it("a lease batch that committed but lost its reply: no double send, cancel refused, sent once the lease ran out", async () => {
    const acct = await signup();
    const id = await newPayout(acct);
    const calls = recordingProcessor();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "job_runs") || op.sql.some((s) => /INSERT INTO "?job_runs/i.test(s)) });
    await expect(settlePayout({ kind: "settlePayout", payoutId: id }, withDb(db))).rejects.toThrow();
    expect(db.fired).toHaveLength(1);
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("skipped");
    expectError(await call(`/payouts/${id}/cancel`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "payout_not_pending");
    await env.DB.prepare("UPDATE job_runs SET lease_until = ? WHERE key = ?").bind(Date.now() - 1, `payout_send:${id}`).run();
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("paid");
    expect(calls.filter((c) => c.method === "sendPayout")).toHaveLength(1);
    expect(await eventCount(acct.id, "payout.paid")).toBe(1);
  });

  it("a settlement batch lost after the processor paid: the retry waits for the lease, then settles once with the same reference", async () => {
    const acct = await signup();
    const id = await newPayout(acct);
    const calls = recordingProcessor();
    const db = faultyD1(env.DB, { kind: "fail_before_commit", when: (op) => writesTo(op, "payouts") });
    await expect(settlePayout({ kind: "settlePayout", payoutId: id }, withDb(db))).rejects.toThrow();
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("skipped");
    await env.DB.prepare("UPDATE job_runs SET lease_until = ? WHERE key = ?").bind(Date.now() - 1, `payout_send:${id}`).run();
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("paid");
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("skipped");
    expect(new Set(calls.filter((c) => c.method === "sendPayout").map((c) => c.reference))).toEqual(new Set([id]));
    expect(await eventCount(acct.id, "payout.paid")).toBe(1);
  });

  it("a settlement batch that committed but lost its reply: a redelivered message changes and emits nothing", async () => {
    const acct = await signup();
    const id = await newPayout(acct);
    const calls = recordingProcessor();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "payouts") });
    await expect(settlePayout({ kind: "settlePayout", payoutId: id }, withDb(db))).rejects.toThrow();
    await env.DB.prepare("UPDATE job_runs SET lease_until = ? WHERE key = ?").bind(Date.now() - 1, `payout_send:${id}`).run();
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("skipped");
    expect(calls.filter((c) => c.method === "sendPayout")).toHaveLength(1);
    expect(await eventCount(acct.id, "payout.paid")).toBe(1);
  });

  it("cancel wins before the send: no processor call; cancel during the send: 409, and the payout is paid", async () => {
    const acct = await signup();
    const calls = recordingProcessor();
    const first = await newPayout(acct);
    expect((await call(`/payouts/${first}/cancel`, { key: acct.key, method: "POST" })).status).toBe(200);
    expect(await settlePayout({ kind: "settlePayout", payoutId: first }, env)).toBe("skipped");
    expect(calls).toHaveLength(0);
    const second = await newPayout(acct);
    const held = gate();
    recordingProcessor((m) => (m === "sendPayout" ? held.opened : undefined));
    const sending = settlePayout({ kind: "settlePayout", payoutId: second }, env);
    await sleep(80);
    const cancel = call(`/payouts/${second}/cancel`, { key: acct.key, method: "POST" });
    expectError(await cancel, 409, "invalid_request_error", "payout_not_pending");
    held.open();
    expect(await sending).toBe("paid");
    expect(await eventCount(acct.id, "payout.canceled")).toBe(1);
  });

  it("two cancels with one Idempotency-Key at once: one cancel, one event", async () => {
    const acct = await signup();
    const id = await newPayout(acct);
    const results = await Promise.all([1, 2].map(() => call(`/payouts/${id}/cancel`, { key: acct.key, method: "POST", idempotencyKey: "cancel-twice" })));
    expect(results.map((r) => r.status).sort()).toEqual(expect.arrayContaining([200]));
    for (const r of results) expect([200, 409]).toContain(r.status);
    expect(await eventCount(acct.id, "payout.canceled")).toBe(1);
  });
});

describe("refunds: lost replies, duplicates, and two refunds at once", () => {
  async function paid(acct: Account) {
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    return (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0] as { id: string; amount: number };
  }

  it("a completion batch that committed but lost its reply: the retry emits no second refund.completed", async () => {
    const acct = await signup();
    const payment = await paid(acct);
    const refund = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/refunds", { key: acct.key, json: { payment_id: payment.id, amount: 100 } });
    const calls = recordingProcessor();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "refunds") });
    await expect(settleRefund({ kind: "settleRefund", refundId: refund.body.id }, withDb(db))).rejects.toThrow();
    expect(await settleRefund({ kind: "settleRefund", refundId: refund.body.id }, env)).toBe("skipped");
    expect(calls.filter((c) => c.method === "refund")).toHaveLength(1);
    expect(await eventCount(acct.id, "refund.completed")).toBe(1);
  });

  it("two refunds that together exceed the payment, at once: one succeeds, the other is refused, never over-refunded", async () => {
    const acct = await signup();
    const payment = await paid(acct);
    const part = Math.ceil(payment.amount * 0.6);
    const results = await Promise.all([1, 2].map(() => fetchWith({ JOB_QUEUE: droppingQueue() }, "/refunds", { key: acct.key, json: { payment_id: payment.id, amount: part } })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 400]);
    const row = await env.DB.prepare("SELECT amount, amount_refunded FROM payments WHERE id = ?").bind(payment.id).first<{ amount: number; amount_refunded: number }>();
    expect(row!.amount_refunded).toBe(part);
  });

  it("a refund of another account's payment is 404, and a decimal amount is refused", async () => {
    const acct = await signup();
    const payment = await paid(acct);
    const other = await signup();
    expectError(await call("/refunds", { key: other.key, body: { payment_id: payment.id, amount: 100 } }), 404, "not_found_error");
    const decimal = await call("/refunds", { key: acct.key, rawBody: `{"payment_id":"${payment.id}","amount":100.00}`, headers: { "content-type": "application/json" } });
    expect(decimal.status).toBe(400);
    expect(await countRows("refunds", "payment_id = ?", payment.id)).toBe(0);
  });
});

describe("renewals: two workers on one period, and a lost settlement reply", () => {
  it("two renewal messages for one subscription at once charge it once", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const calls = recordingProcessor();
    const outcomes = await Promise.all([renewChunk(env, [sub.id]), renewChunk(env, [sub.id])]);
    expect(outcomes.flat().sort()).toEqual(["renewed", "skipped"]);
    expect(calls.filter((c) => c.method === "chargeToken")).toHaveLength(1);
    expect(await countRows("payments", "subscription_id = ? AND status = 'completed'", sub.id)).toBe(2);
  });

  it("a settlement batch that committed but lost its reply is not recorded twice, and a redelivered job charges nothing", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const calls = recordingProcessor();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "payments") });
    await renewChunk(withDb(db), [sub.id]).catch(() => undefined);
    expect(await renewChunk(env, [sub.id])).toEqual(["skipped"]);
    expect(calls.filter((c) => c.method === "chargeToken")).toHaveLength(1);
    expect(await countRows("payments", "subscription_id = ? AND status = 'completed'", sub.id)).toBe(2);
    expect(await countRows("subscription_periods", "subscription_id = ? AND status = 'paid'", sub.id)).toBe(2);
  });

  it("two advances of one test clock at once: one moves it, the other is refused, and each period is charged once", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2026-01-15T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const calls = recordingProcessor();
    const results = await Promise.all([
      call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time: "2026-02-16T00:00:00.000Z" } }),
      call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time: "2026-02-16T00:00:00.000Z" } }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(calls.filter((c) => c.method === "chargeToken")).toHaveLength(1);
    expect(await countRows("payments", "subscription_id = ? AND status = 'completed'", sub.id)).toBe(2);
  });
});

describe("webhook deliveries: duplicates and a late 2xx", () => {
  async function pendingDelivery(acct: Account) {
    await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/attack`, events: ["customer.created"] } });
    const user = await fetchWith({ DELIVERY_QUEUE: droppingQueue() }, "/api/users", { key: acct.key, json: { name: "Hook", email: "hook@example.com" } });
    expect(user.status).toBe(201);
    const row = await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE account_id = ? ORDER BY id DESC LIMIT 1").bind(acct.id).first<{ id: string }>();
    return row!.id;
  }

  it("three messages for one delivery at once send it once", async () => {
    const receiver = installReceiver();
    try {
      const acct = await signup();
      const id = await pendingDelivery(acct);
      receiver.answer(200);
      const outcomes = await Promise.all([processDelivery(env, id), processDelivery(env, id), processDelivery(env, id)]);
      expect(outcomes.filter((o) => o === "delivered")).toHaveLength(1);
      expect(receiver.received.filter((r) => r.url.endsWith("/attack"))).toHaveLength(1);
    } finally {
      receiver.restore();
    }
  });

  it("a 2xx that arrives after a later attempt ended the delivery failed still marks it delivered", async () => {
    const receiver = installReceiver();
    try {
      const acct = await signup();
      const id = await pendingDelivery(acct);
      // Near the end of the window: the next failure ends the delivery.
      const first = Date.now() - DELIVERY_WINDOW_MS + FINAL_ATTEMPT_LEAD_MS - 60_000;
      await env.DB.prepare("UPDATE webhook_deliveries SET attempt_count = 11, first_attempt_at = ? WHERE id = ?").bind(first, id).run();
      const held = gate();
      receiver.answer(() => held.opened.then(() => new Response("late ok", { status: 200 })) as unknown as Response, 500);
      const slow = processDelivery(env, id);
      await sleep(80);
      await env.DB.prepare("UPDATE webhook_deliveries SET lease_until = ? WHERE id = ?").bind(Date.now() - 1, id).run();
      expect(await processDelivery(env, id)).toBe("failed");
      held.open();
      expect(await slow).toBe("delivered");
      expect((await env.DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(id).first<{ status: string }>())!.status).toBe("delivered");
    } finally {
      receiver.restore();
    }
  });
});

describe("record expiry never deletes what is still needed", () => {
  it("keeps a pending payout's send marker and any live lease; deletes a settled payout's marker", async () => {
    const acct = await signup();
    const pending = await newPayout(acct);
    const settled = await newPayout(acct);
    expect(await settlePayout({ kind: "settlePayout", payoutId: settled }, env)).toBe("paid");
    const past = Date.now() - 1;
    await env.DB.batch([
      env.DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES (?, ?, ?, ?)").bind(`payout_send:${pending}`, "2026-01-01T00:00:00.000Z", past, past),
      env.DB.prepare("UPDATE job_runs SET expires_at = ?, lease_until = ? WHERE key = ?").bind(past, past, `payout_send:${settled}`),
      env.DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES (?, ?, ?, ?)").bind(`refund_send:re_live_${pending}`, "2026-01-01T00:00:00.000Z", Date.now() + 60_000, past),
    ]);
    await expireRecords(env, Date.now());
    expect(await countRows("job_runs", "key = ?", `payout_send:${pending}`)).toBe(1);
    expect(await countRows("job_runs", "key = ?", `payout_send:${settled}`)).toBe(0);
    expect(await countRows("job_runs", "key = ?", `refund_send:re_live_${pending}`)).toBe(1);
    expectError(await call(`/payouts/${pending}/cancel`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "payout_not_pending");
  });
});

describe("hostile idempotency input", () => {
  it("a key reused on another path, or with another card, is 422 and changes nothing", async () => {
    const acct = await signup();
    const first = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody({ amount: 500 }), headers: { "idempotency-key": "hostile-1" } });
    expect(first.status).toBe(201);
    const otherCard = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody({ amount: 500 }, CARDS.mastercard), headers: { "idempotency-key": "hostile-1" } });
    expect(otherCard.status).toBe(422);
    const otherPath = await call("/api/users", { key: acct.key, body: { name: "X", email: "x@example.com" }, idempotencyKey: "hostile-1" });
    expect(otherPath.status).toBe(422);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(1);
    // Another account's same key is its own.
    const other = await signup();
    const theirs = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: other.key, json: payoutBody({ amount: 500 }), headers: { "idempotency-key": "hostile-1" } });
    expect(theirs.status).toBe(201);
    expect(theirs.body.id).not.toBe(first.body.id);
  });
});


describe("past-due card update: the processor times out after charging the new card", () => {
  it("the charge made under the card update's reference is recorded, once, by the retry or the takeover", async () => {
    const acct = await signup();
    const { sub } = await pastDue(acct);
    const ledger = ledgerProcessor();
    ledger.install();
    try {
      // The card update charges the new card once vaulted (chargeToken), under the period's reference.
      ledger.inject({ kind: "timeout_after_success", method: ["chargeCard", "chargeToken"], times: 1 });
      const body = cardFields(CARDS.visa);
      const first = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body, idempotencyKey: "pd-timeout-1" });
      // The request calls the processor again with the same reference (which answers with the
      // first outcome) and records the charge itself; were the processor down for good, it would
      // answer 5xx and keep the key.
      expect([200, 500]).toContain(first.status);
      const reference = `${sub.id}:period:1:attempt:2`;
      expect(ledger.moneyMoved(["chargeCard", "chargeToken"]).map((c) => c.reference)).toEqual([reference]);
      // The client retries the same request.
      ledger.inject();
      const retry = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body, idempotencyKey: "pd-timeout-1" });
      // Later the dunning retry is due and the claim is stale: the cron takes it over.
      await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ? AND status = 'open'")
        .bind(new Date(Date.now() - 11 * 60_000).toISOString(), sub.id)
        .run();
      await makeDue(sub.id);
      await renewChunk(env, [sub.id]);
      await ledger.idle();
      const moved = ledger.moneyMoved(["chargeCard", "chargeToken"]).filter((c) => c.reference === reference);
      const recorded = await countRows("payments", "charge_reference = ? AND status = 'completed'", reference);
      const takeover = ledger.calls.filter((c) => c.reference === reference).map((c) => `${c.method}:${c.outcome}`);
      expect({ retry: retry.status, takeover, moved: moved.length, recorded }).toEqual({ retry: expect.any(Number), takeover: expect.any(Array), moved: 1, recorded: 1 });
    } finally {
      ledger.uninstall();
    }
  });
});
