// The money-safety defects, one test each, every one reproduced against the code before its fix:
// a lost commit answer, payout and refund send leases, the delivery lease and the 24-hour
// window's last attempt, a renewal against cancel-at-period-end, a stale claim taken over, a
// past-due card update racing another change, and record expiry. The broad sweeps (every route
// and job under every fault, generated interleavings) are fault-matrix.test.ts and
// interleavings.test.ts beside this file.
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { renewChunk } from "../../src/billing/renewals";
import { processDelivery } from "../../src/webhooks/consumer";
import { settlePayout } from "../../src/payments/settle-payout";
import { settleRefund } from "../../src/payments/settle-refund";
import { useProcessor } from "../../src/processor";
import { useClock } from "../../src/lib/clock";
import { DELIVERY_WINDOW_MS, FINAL_ATTEMPT_LEAD_MS } from "../../src/domain/webhook-retry-schedule";
import { type Account, call, expectError, fetchWith, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { cardFields, CARDS, payoutBody } from "../support/cards";
import { makeDue } from "../support/clock";
import { countRows, deliveryRow } from "../support/db";
import { droppingQueue, runCron } from "../support/queue";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { faultyD1, gate, recordingProcessor, writesTo } from "../support/faults";


afterEach(() => {
  useProcessor();
  useClock();
});

const idempotencyRecord = (accountId: string, key: string) =>
  env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(accountId, key).first<Record<string, any>>();

describe("an unknown outcome never frees the Idempotency-Key", () => {
  it("POST /payout whose commit answer is lost: the request and its retry answer the one payout", async () => {
    const acct = await signup();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "payouts") });
    const first = await fetchWith({ DB: db, JOB_QUEUE: droppingQueue() }, "/payout", {
      key: acct.key,
      json: payoutBody({ amount: 700 }),
      headers: { "idempotency-key": "lost-answer-1" },
    });
    expect(db.fired).toHaveLength(1);
    // The record says the batch committed: its answer is given, not a 500.
    expect(first.status, first.text).toBe(201);
    const retry = await call("/payout", { key: acct.key, body: payoutBody({ amount: 700 }), idempotencyKey: "lost-answer-1" });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body.id).toBe(first.body.id);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(1);
  });

  it("POST /subscriptions whose commit answer is lost: one subscription and one completed charge", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields() };
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "subscriptions") });
    const first = await fetchWith({ DB: db }, "/subscriptions", { key: acct.key, json: body, headers: { "idempotency-key": "sub-lost-1" } });
    expect(first.status, first.text).toBe(201);
    const retry = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "sub-lost-1" });
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(first.body.id);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(1);
    expect(await countRows("payments", "account_id = ? AND status = 'completed'", acct.id)).toBe(1);
  });

  it("a payout batch that failed without saying whether it committed: 500 outcome_unknown, and the retry runs once (the key is recorded in that batch)", async () => {
    const acct = await signup();
    const db = faultyD1(env.DB, { kind: "fail_before_commit", when: (op) => writesTo(op, "payouts") });
    const first = await fetchWith({ DB: db, JOB_QUEUE: droppingQueue() }, "/payout", {
      key: acct.key,
      json: payoutBody({ amount: 800 }),
      headers: { "idempotency-key": "unknown-1" },
    });
    const error = expectError(first, 500, "api_error", "outcome_unknown");
    expect(error.message).toContain("Idempotency-Key");
    expect(first.text).not.toMatch(/D1_ERROR|stack/);
    // The record and the payout share one batch: neither was kept.
    expect(await idempotencyRecord(acct.id, "unknown-1")).toBeNull();
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(0);
    const retry = await call("/payout", { key: acct.key, body: payoutBody({ amount: 800 }), idempotencyKey: "unknown-1" });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    const again = await call("/payout", { key: acct.key, body: payoutBody({ amount: 800 }), idempotencyKey: "unknown-1" });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(retry.body.id);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(1);
  });

  it("a first charge's batch that failed without saying whether it committed keeps the key: 500 outcome_unknown, then 409, then a takeover once stale", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields() };
    const db = faultyD1(env.DB, { kind: "fail_before_commit", when: (op) => writesTo(op, "subscriptions"), times: 3 });
    const first = await fetchWith({ DB: db }, "/subscriptions", { key: acct.key, json: body, headers: { "idempotency-key": "unknown-sub" } });
    expectError(first, 500, "api_error", "outcome_unknown");
    // Money moved at the processor before the batch: the claim is kept, never freed.
    expect((await idempotencyRecord(acct.id, "unknown-sub"))?.status).toBe("in_flight");
    expectError(await call("/subscriptions", { key: acct.key, body, idempotencyKey: "unknown-sub" }), 409, "invalid_request_error", "idempotency_key_in_use");
    // Once the claim is stale the same request takes it over: the same processor reference, one charge.
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - 120000 WHERE account_id = ? AND key = ?").bind(acct.id, "unknown-sub").run();
    const retry = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "unknown-sub" });
    expect(retry.status, retry.text).toBe(201);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(1);
    expect(await countRows("payments", "account_id = ? AND status = 'completed'", acct.id)).toBe(1);
  });

  it("two POST /payout with one key while the first's batch is slow: one payout, and the second replays it", async () => {
    const acct = await signup();
    const held = gate();
    const db = faultyD1(env.DB, [], { gate: (op) => (writesTo(op, "payouts") ? held.opened : Promise.resolve()) });
    const body = payoutBody({ amount: 810 });
    const slow = fetchWith({ DB: db, JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: body, headers: { "idempotency-key": "race-1" } });
    const fast = await call("/payout", { key: acct.key, body, idempotencyKey: "race-1" });
    expect(fast.status).toBe(201);
    held.open();
    const late = await slow;
    expect(late.status).toBe(201);
    expect(late.headers.get("idempotent-replayed")).toBe("true");
    expect(late.body.id).toBe(fast.body.id);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(1);
  });

  it("a refused guard is a certain failure: the key is freed for a corrected retry", async () => {
    const acct = await signup();
    const missing = await call("/payout", { key: acct.key, body: payoutBody({ recipient_id: "usr_00000000000000000000000000" }), idempotencyKey: "fix-me" });
    expectError(missing, 404, "not_found_error");
    expect(await idempotencyRecord(acct.id, "fix-me")).toBeNull();
  });
});

describe("send leases: one processor call per payout or refund, whatever the queue repeats", () => {
  it("two settlement messages for one payout at once reach the processor once", async () => {
    const acct = await signup();
    const created = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody({ amount: 900 }) });
    expect(created.status).toBe(201);
    const held = gate();
    const calls = recordingProcessor((method) => (method === "sendPayout" ? held.opened : undefined));
    const job = { kind: "settlePayout" as const, payoutId: created.body.id };
    const first = settlePayout(job, env);
    // The second message arrives while the first is at the processor.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await settlePayout(job, env)).toBe("skipped");
    held.open();
    expect(await first).toBe("paid");
    expect(calls.filter((c) => c.method === "sendPayout")).toEqual([{ method: "sendPayout", reference: created.body.id }]);
    // The sweep leaves a payout alone while its lease is live, and a settled one for good.
    expect(await settlePayout(job, env)).toBe("skipped");
    expect(calls).toHaveLength(1);
  });

  it("the stale-payout sweep does not re-send a payout whose lease is live, and does once it ran out", async () => {
    const acct = await signup();
    const created = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody({ amount: 901 }) });
    const id = created.body.id as string;
    await env.DB.prepare("UPDATE payouts SET created_at = ? WHERE id = ?").bind(new Date(Date.now() - 10 * 60_000).toISOString(), id).run();
    // A worker took the lease and died before settling.
    await env.DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES (?, ?, ?, ?)")
      .bind(`payout_send:${id}`, new Date().toISOString(), Date.now() + 60_000, Date.now() + 86_400_000)
      .run();
    const calls = recordingProcessor();
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("skipped");
    expect(calls).toHaveLength(0);
    // Cancel is refused once the payout may be at the processor.
    expectError(await call(`/payouts/${id}/cancel`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "payout_not_pending");
    await env.DB.prepare("UPDATE job_runs SET lease_until = ? WHERE key = ?").bind(Date.now() - 1, `payout_send:${id}`).run();
    expect(await settlePayout({ kind: "settlePayout", payoutId: id }, env)).toBe("paid");
    expect(calls).toEqual([{ method: "sendPayout", reference: id }]);
  });

  it("two settlement messages for one refund at once reach the processor once", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    const refund = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/refunds", { key: acct.key, json: { payment_id: payment.id, amount: 100 } });
    expect(refund.status, refund.text).toBe(201);
    const held = gate();
    const calls = recordingProcessor((method) => (method === "refund" ? held.opened : undefined));
    const job = { kind: "settleRefund" as const, refundId: refund.body.id };
    const first = settleRefund(job, env);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await settleRefund(job, env)).toBe("skipped");
    held.open();
    expect(await first).toBe("succeeded");
    expect(calls).toEqual([{ method: "refund", reference: refund.body.id }]);
  });
});

describe("webhook deliveries: a lease per attempt, and the last attempt inside the window", () => {
  async function pendingDelivery(acct: Account) {
    await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/lease`, events: ["customer.created"] } });
    const user = await fetchWith({ DELIVERY_QUEUE: droppingQueue() }, "/api/users", { key: acct.key, json: { name: "Lease", email: "lease@example.com" } });
    expect(user.status).toBe(201);
    const row = await env.DB.prepare("SELECT d.id FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.account_id = ? ORDER BY d.id DESC LIMIT 1")
      .bind(acct.id)
      .first<{ id: string }>();
    return row!.id;
  }

  it("a duplicate message during an attempt in flight sends nothing, and the attempt's 2xx marks the delivery delivered", async () => {
    const receiver = installReceiver();
    try {
      const acct = await signup();
      const id = await pendingDelivery(acct);
      const held = gate();
      receiver.answer(() => new Response("slow ok", { status: 200 }));
      const slow = held.opened.then(() => new Response("ok", { status: 200 }));
      receiver.answer(() => slow as unknown as Response);
      const first = processDelivery(env, id);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await processDelivery(env, id)).toBe("leased");
      held.open();
      expect(await first).toBe("delivered");
      expect(receiver.received.filter((r) => r.url.endsWith("/lease"))).toHaveLength(1);
      expect((await deliveryRow(id))!.status).toBe("delivered");
    } finally {
      receiver.restore();
    }
  });

  it("an attempt whose lease ran out while it waited still marks the delivery delivered on its 2xx", async () => {
    const receiver = installReceiver();
    try {
      const acct = await signup();
      const id = await pendingDelivery(acct);
      const held = gate();
      receiver.answer(() => held.opened.then(() => new Response("late ok", { status: 200 })) as unknown as Response, 500);
      const first = processDelivery(env, id);
      await new Promise((resolve) => setTimeout(resolve, 50));
      // The lease runs out; another message takes the next attempt, which fails.
      await env.DB.prepare("UPDATE webhook_deliveries SET lease_until = ? WHERE id = ?").bind(Date.now() - 1, id).run();
      expect(await processDelivery(env, id)).toBe("scheduled");
      held.open();
      expect(await first).toBe("delivered");
      const row = (await deliveryRow(id))!;
      expect(row.status).toBe("delivered");
      expect(row.next_attempt_at).toBeNull();
      expect(await countRows("delivery_attempts", "delivery_id = ?", id)).toBe(2);
    } finally {
      receiver.restore();
    }
  });

  it("the last attempt of the window is sent even when its alarm runs minutes late", async () => {
    const receiver = installReceiver();
    try {
      const acct = await signup();
      const id = await pendingDelivery(acct);
      const first = Date.now() - (DELIVERY_WINDOW_MS - FINAL_ATTEMPT_LEAD_MS) - 3 * 60_000;
      // Twelve attempts failed; the last was scheduled at 23 h 50 min and runs 3 minutes late.
      await env.DB.prepare("UPDATE webhook_deliveries SET attempt_count = 12, first_attempt_at = ?, next_attempt_at = ? WHERE id = ?")
        .bind(first, first + DELIVERY_WINDOW_MS - FINAL_ATTEMPT_LEAD_MS, id)
        .run();
      receiver.answer(200);
      expect(await processDelivery(env, id)).toBe("delivered");
      expect(receiver.received.filter((r) => r.url.endsWith("/lease"))).toHaveLength(1);
      // After the window nothing is sent.
      const late = await pendingDelivery(acct);
      await env.DB.prepare("UPDATE webhook_deliveries SET attempt_count = 12, first_attempt_at = ?, next_attempt_at = ? WHERE id = ?")
        .bind(Date.now() - DELIVERY_WINDOW_MS - 1, Date.now() - FINAL_ATTEMPT_LEAD_MS, late)
        .run();
      expect(await processDelivery(env, late)).toBe("failed");
      expect(receiver.received.filter((r) => r.url.endsWith("/lease"))).toHaveLength(1);
    } finally {
      receiver.restore();
    }
  });
});

describe("periods: one charge recorded per processor charge, no charge after a cancel", () => {
  it("a renewal never charges a period once cancel_at_period_end was set after it read the subscription", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const calls = recordingProcessor();
    // The renewal run reads the subscription, then the user sets cancel at period end before the claim.
    const held = gate();
    const original = env.DB;
    const db = new Proxy(original, {
      get(target, prop) {
        if (prop === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            await held.opened;
            return target.batch(statements);
          };
        }
        const value = Reflect.get(target, prop, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const run = renewChunk({ ...env, DB: db }, [sub.id]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const flagged = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    expect(flagged.status, flagged.text).toBe(200);
    held.open();
    expect(await run).toEqual(["skipped"]);
    expect(calls).toHaveLength(0);
    // The next run cancels it at the period end, uncharged.
    expect(await renewChunk(env, [sub.id])).toEqual(["canceled"]);
    expect(calls).toHaveLength(0);
    expect(await countRows("payments", "subscription_id = ?", sub.id)).toBe(1);
  });

  it("cancel at period end waits while a renewal charge of the period is at the processor", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const held = gate();
    recordingProcessor((method) => (method === "chargeToken" ? held.opened : undefined));
    const charging = renewChunk(env, [sub.id]);
    await new Promise((resolve) => setTimeout(resolve, 80));
    // The flag is set while the charge is in flight, and another run reaches the subscription.
    await env.DB.prepare("UPDATE subscriptions SET cancel_at_period_end = 1 WHERE id = ?").bind(sub.id).run();
    expect(await renewChunk(env, [sub.id])).toEqual(["skipped"]);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("active");
    held.open();
    expect(await charging).toEqual(["renewed"]);
    const after = (await call(`/subscriptions/${sub.id}`, { key: acct.key })).body;
    // The charged period is the subscription's: it stays active to that period's end.
    expect(after).toMatchObject({ status: "active", cancel_at_period_end: true });
    expect(await countRows("payments", "subscription_id = ? AND status = 'completed'", sub.id)).toBe(2);
  });

  it("a claim taken over after a crash records the processor's one charge once, whichever worker settles", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const held = gate();
    let slowOne = true;
    const calls = recordingProcessor((method) => {
      if (method !== "chargeToken" || !slowOne) return undefined;
      slowOne = false;
      return held.opened;
    });
    const stale = renewChunk(env, [sub.id]);
    await new Promise((resolve) => setTimeout(resolve, 80));
    // The claim looks dead: another run takes it over and charges with the same reference.
    await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ? AND status = 'open'")
      .bind(new Date(Date.now() - 11 * 60_000).toISOString(), sub.id)
      .run();
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    held.open();
    expect(await stale).toEqual(["skipped"]);
    const references = calls.filter((c) => c.method === "chargeToken").map((c) => c.reference);
    expect(references).toHaveLength(2);
    expect(new Set(references).size).toBe(1);
    expect(await countRows("payments", "subscription_id = ? AND status = 'completed'", sub.id)).toBe(2);
    expect(await countRows("payments", "charge_reference = ?", references[0])).toBe(1);
  });

  it("a past-due card update writes only what it changes: a concurrent quantity change survives", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    await makeDue(sub.id);
    expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
    const held = gate();
    // The card update charges the new card once vaulted: held at that charge.
    recordingProcessor((method) => (method === "chargeToken" ? held.opened : undefined));
    const update = call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.visa) });
    await new Promise((resolve) => setTimeout(resolve, 80));
    const quantity = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: 3 } });
    expect(quantity.status, quantity.text).toBe(200);
    held.open();
    const res = await update;
    expect(res.status, res.text).toBe(200);
    const stored = await env.DB.prepare("SELECT status, quantity FROM subscriptions WHERE id = ?").bind(sub.id).first();
    expect(stored).toEqual({ status: "active", quantity: 3 });
  });
});

describe("records expire, and no secret is stored for a replay", () => {
  it("a webhook endpoint's secret is shown once: the stored answer and a replay hold null", async () => {
    const acct = await signup();
    const body = { url: `${RECEIVER_ORIGIN}/secret`, events: ["customer.created"] };
    const first = await call("/api/webhooks", { key: acct.key, body, idempotencyKey: "whk-1" });
    expect(first.body.secret).toMatch(/^whsec_/);
    const stored = await idempotencyRecord(acct.id, "whk-1");
    expect(stored!.response_body).not.toContain("whsec_");
    const replay = await call("/api/webhooks", { key: acct.key, body, idempotencyKey: "whk-1" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual({ ...first.body, secret: null });
    const rotated = await call(`/api/webhooks/${first.body.id}/rotate-secret`, { key: acct.key, method: "POST", idempotencyKey: "rot-1" });
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect((await idempotencyRecord(acct.id, "rot-1"))!.response_body).not.toContain("whsec_");
  });

  it("the cron deletes idempotency records and job runs after 24 hours, but keeps a pending payout's send marker", async () => {
    const acct = await signup();
    await call("/api/users", { key: acct.key, body: { name: "Old", email: "old@example.com" }, idempotencyKey: "old-1" });
    await call("/api/users", { key: acct.key, body: { name: "New", email: "new@example.com" }, idempotencyKey: "new-1" });
    await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE account_id = ? AND key = 'old-1'").bind(Date.now() - 1, acct.id).run();
    const pending = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody() });
    const expired = Date.now() - 1;
    await env.DB.batch([
      env.DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES (?, ?, ?, ?)").bind("refund_send:re_gone", "2026-01-01T00:00:00.000Z", expired, expired),
      env.DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES (?, ?, ?, ?)").bind(`payout_send:${pending.body.id}`, "2026-01-01T00:00:00.000Z", expired, expired),
    ]);
    await runCron();
    expect(await idempotencyRecord(acct.id, "old-1")).toBeNull();
    expect(await idempotencyRecord(acct.id, "new-1")).not.toBeNull();
    expect(await countRows("job_runs", "key = 'refund_send:re_gone'")).toBe(0);
    expect(await countRows("job_runs", "key = ?", `payout_send:${pending.body.id}`)).toBe(1);
    // A key whose record expired is free again.
    const again = await call("/api/users", { key: acct.key, body: { name: "Other", email: "other@example.com" }, idempotencyKey: "old-1" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
  });
});
