// Issue 19, the money defects: a past-due card update whose outcome is unknown (and its twin, the
// claim whose commit answer was lost) must not block cancellation for days; a restricted key
// without payments:read learns nothing of a payment from a refused refund; PUT /subscriptions/{id}
// answers the row as committed, not as it read it; and a canceled subscription shows
// cancel_at_period_end: false. Each test asserts the correct behaviour, against the real local D1
// and a processor that keeps a ledger (test/support/faults.ts).
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { runScheduled } from "../../src/cron";
import { useClock } from "../../src/lib/clock";
import { useProcessor } from "../../src/processor";
import { renewChunk } from "../../src/billing/renewals";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { type Account, call, expectError, fetchWith, signup, withEnv } from "../support/http";
import { createKey, createPlan, createUser, subscribed } from "../support/fixtures";
import { CARDS, cardFields } from "../support/cards";
import { advance, createClock, makeDue } from "../support/clock";
import { countOf, one } from "../support/db";
import { type D1Op, type Ledger, faultyD1, ledgerProcessor, recordingQueue, sqlMatches, writesTo } from "../support/faults";
import { atMostOneProcessorCallPer, mark, paymentsEqualCharges } from "../support/invariants";
import { invariants } from "../support/checks";

afterEach(() => {
  useProcessor();
  useClock();
});

/** The cron, run once at `at` (the wall clock moved there), with queues that only record. */
async function cronAt(at: number) {
  useClock({ now: () => at });
  try {
    const ctx = createExecutionContext();
    const result = await runScheduled(withEnv({ JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }), at, ctx).then(
      () => null,
      (error: unknown) => error,
    );
    await waitOnExecutionContext(ctx);
    return result;
  } finally {
    useClock();
  }
}

const MINUTE = 60_000;
const LEASE = 10 * MINUTE;

/** A subscription whose first renewal was declined: past_due, its next dunning retry a day away. */
async function pastDue(acct: Account) {
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
  await makeDue(sub.id);
  expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
  return sub;
}

const subscriptionRow = (id: string) =>
  one<{ status: string; periods_billed: number; dunning_attempts: number; card_last4: string; cancel_at_period_end: number }>("SELECT * FROM subscriptions WHERE id = ?", id);
const completedFor = (id: string) => countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed'", id);
const idempotencyRecord = (accountId: string, key: string) =>
  env.DB.prepare("SELECT status FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(accountId, key).first<{ status: string }>();

/** Every call for this subscription's period charges times out after the processor charged. */
const timesOutFor = (ledger: Ledger, subscriptionId: string) =>
  ledger.inject({ kind: "timeout_after_success", method: ["chargeCard", "chargeToken"], when: (c) => c.reference.startsWith(`${subscriptionId}:`) });

async function withLedger(run: (ledger: Ledger) => Promise<void>) {
  const ledger = ledgerProcessor();
  ledger.install();
  try {
    await run(ledger);
  } finally {
    ledger.uninstall();
  }
}

describe("a past-due card update whose processor call never answers", () => {
  it("is settled by the cron within the 10-minute lease, not due and not canceled: the charge recorded once, the subscription active, then a cancel goes through", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const sub = await pastDue(acct);
      const since = await mark(ledger);
      const start = Date.now();
      timesOutFor(ledger, sub.id);
      const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard), idempotencyKey: "pd-unknown-1" });
      expect(put.status, put.text).toBe(500);
      expect(put.body.error.code).toBe("outcome_unknown");
      expect(ledger.moneyMoved(["chargeCard", "chargeToken"], since.ledger), "the processor charged the new card").toHaveLength(1);
      // While the outcome is unknown a cancel is refused: the charge may have moved money.
      expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "charge_in_progress");

      // The processor answers again; the cron runs within the lease, the subscription not due for a day.
      ledger.inject();
      const due = await one<{ due_at: number }>("SELECT due_at FROM subscriptions WHERE id = ?", sub.id);
      expect(due.due_at).toBeGreaterThan(start + LEASE + MINUTE);
      expect(await cronAt(start + LEASE)).toBeNull();
      await ledger.idle();

      const row = await subscriptionRow(sub.id);
      expect(row, "the charge is recorded: the period paid, the subscription active on the new card").toMatchObject({ status: "active", periods_billed: 2, dunning_attempts: 0, card_last4: "4444" });
      expect(await completedFor(sub.id), "the first charge and the card update's").toBe(2);
      await invariants("cron settles the card update's claim", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since }),
      ]);
      // The same reference was sent again, with the same card: the processor answered the first charge.
      const calls = ledger.calls.slice(since.ledger).filter((c) => c.reference.startsWith(`${sub.id}:`));
      expect(new Set(calls.map((c) => `${c.method}:${c.reference}`)).size, calls.map((c) => `${c.method}:${c.reference}`).join(", ")).toBe(1);
      expect(calls.at(-1)?.replay).toBe(true);

      const cancel = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
      expect(cancel.status, cancel.text).toBe(200);
      expect(cancel.body.status).toBe("canceled");
    });
  });

  it("a decline on the resend releases the claim: the attempt counts, the subscription stays past_due, a cancel goes through", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const sub = await pastDue(acct);
      const start = Date.now();
      // The processor never answers the request; its stored outcome, given on the resend, is a decline.
      ledger.inject(
        { kind: "decline", method: ["chargeCard", "chargeToken"], when: (c) => c.reference.startsWith(`${sub.id}:`) },
        { kind: "timeout_after_success", method: ["chargeCard", "chargeToken"], when: (c) => c.reference.startsWith(`${sub.id}:`), times: 3 },
      );
      const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard) });
      expect(put.status, put.text).toBe(500);
      ledger.inject();
      expect(await cronAt(start + LEASE)).toBeNull();
      const row = await subscriptionRow(sub.id);
      expect(row).toMatchObject({ status: "past_due", periods_billed: 1, dunning_attempts: 2 });
      expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'failed'", sub.id)).toBe(2);
      const cancel = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
      expect(cancel.status, cancel.text).toBe(200);
    });
  });

  it("works under a test clock too: the clocked subscription's claim is settled by the wall-clock cron", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const clock = await createClock(acct, "2026-01-15T12:00:00.000Z");
      const user = await createUser(acct, { testClock: clock.id });
      const plan = await createPlan(acct);
      const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
      await advance(acct, clock.id, "2026-02-16T12:00:00.000Z");
      expect((await subscriptionRow(sub.id)).status).toBe("past_due");
      const since = await mark(ledger);
      const start = Date.now();
      timesOutFor(ledger, sub.id);
      const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard) });
      expect(put.status, put.text).toBe(500);
      expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "charge_in_progress");
      ledger.inject();
      expect(await cronAt(start + LEASE)).toBeNull();
      await ledger.idle();
      expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2 });
      await invariants("test clock", [() => paymentsEqualCharges(ledger, { since })]);
      const cancel = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
      expect(cancel.status, cancel.text).toBe(200);
    });
  });

  it("once the subscription is due, the renewal run's takeover charges the card update's card with its reference, never the old card", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const sub = await pastDue(acct);
      const since = await mark(ledger);
      timesOutFor(ledger, sub.id);
      const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard) });
      expect(put.status, put.text).toBe(500);
      ledger.inject();
      // The dunning retry falls due; the renewal run, not the claim settlement, takes the claim over.
      await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ? AND status = 'open'").bind(new Date(Date.now() - LEASE - MINUTE).toISOString(), sub.id).run();
      await makeDue(sub.id);
      await renewChunk(env, [sub.id]);
      await ledger.idle();
      expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2, card_last4: "4444" });
      await invariants("renewal takeover of a card update", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since }),
      ]);
    });
  });

  it("the cron leaves a claim alone while its lease runs: a card update still at the processor is never overlapped", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const sub = await pastDue(acct);
      const start = Date.now();
      timesOutFor(ledger, sub.id);
      // The request dies before it can give its claim back (its lease release is lost).
      const db = faultyD1(env.DB, { kind: "fail_before_commit", on: "any", when: (o) => writesTo(o, "subscription_periods") && sqlMatches(o, /^\s*update/i), nth: 1, times: 5 });
      const put = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: cardFields(CARDS.mastercard) });
      expect(put.status, put.text).toBe(500);
      ledger.inject();
      const calls = ledger.calls.length;
      expect(await cronAt(start + LEASE / 2)).toBeNull();
      expect(ledger.calls.length, "no resend while the lease runs").toBe(calls);
      expect((await subscriptionRow(sub.id)).status).toBe("past_due");
      expect(await cronAt(start + LEASE + MINUTE)).toBeNull();
      expect((await subscriptionRow(sub.id)).status).toBe("active");
    });
  });
});

describe("the twin: the card update's claim commits and its answer is lost", () => {
  const claimBatch = (o: D1Op) => o.kind === "batch" && writesTo(o, "subscription_periods") && !writesTo(o, "payments");

  it("the request finds its own claim and goes on: the new card is charged once and answered 200, and a cancel goes through", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const sub = await pastDue(acct);
      const since = await mark(ledger);
      const db = faultyD1(env.DB, { kind: "commit_then_throw", when: claimBatch });
      const put = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: cardFields(CARDS.mastercard), headers: { "idempotency-key": "twin-1" } });
      expect(db.fired, "the fault hit the claim").toHaveLength(1);
      expect(put.status, put.text).toBe(200);
      expect(put.body).toMatchObject({ status: "active", card: { last4: "4444" } });
      expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2 });
      await invariants("twin", [() => paymentsEqualCharges(ledger, { since }), () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true })]);
      const replay = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard), idempotencyKey: "twin-1" });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      const cancel = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
      expect(cancel.status, cancel.text).toBe(200);
    });
  });

  it("when even the read-back fails the key stays claimed (500 outcome_unknown), the cron settles the claim after its lease, and a cancel goes through", async () => {
    await withLedger(async (ledger) => {
      const acct = await signup();
      const sub = await pastDue(acct);
      const since = await mark(ledger);
      const start = Date.now();
      const db = faultyD1(env.DB, [
        { kind: "commit_then_throw", when: claimBatch },
        { kind: "fail_before_commit", on: "statement", when: (o) => sqlMatches(o, /from\s+"?subscription_periods"?/i), times: 5 },
      ]);
      const put = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: cardFields(CARDS.mastercard), headers: { "idempotency-key": "twin-2" } });
      expect(put.status, put.text).toBe(500);
      expect(put.body.error.code).toBe("outcome_unknown");
      expect((await idempotencyRecord(acct.id, "twin-2"))?.status, "an unknown outcome never frees the key").toBe("in_flight");
      expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "charge_in_progress");
      expect(await cronAt(start + LEASE + MINUTE)).toBeNull();
      await ledger.idle();
      expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2, card_last4: "4444" });
      await invariants("twin, read lost", [() => paymentsEqualCharges(ledger, { since }), () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true })]);
      // The client's retry, once the key's lock ran out, finds the subscription paid.
      await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, "twin-2").run();
      const retry = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard), idempotencyKey: "twin-2" });
      expect(retry.status, retry.text).toBe(200);
      expect(retry.body.status).toBe("active");
      expect(await completedFor(sub.id)).toBe(2);
      const cancel = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
      expect(cancel.status, cancel.text).toBe(200);
    });
  });
});

describe("a restricted key with refunds:write only", () => {
  it("learns nothing of the payment from refund_exceeds_payment; a key that may read payments is told what remains", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect(payment.amount).toBeGreaterThan(0);
    expect((await call("/refunds", { key: acct.key, body: { payment_id: payment.id, amount: 100 } })).status).toBe(201);
    const remaining = payment.amount - 100;

    // More than remains, less than was charged: the caller's own figure may be named, no other.
    const asked = payment.amount - 50;
    const writeOnly = await createKey(acct, ["refunds:write"]);
    const refused = await call("/refunds", { key: writeOnly.secret, body: { payment_id: payment.id, amount: asked } });
    const error = expectError(refused, 400, "invalid_request_error", "refund_exceeds_payment");
    expect(error.param).toBe("amount");
    for (const figure of [String(remaining), String(payment.amount), (remaining / 100).toFixed(2), (payment.amount / 100).toFixed(2), payment.currency.toUpperCase()]) {
      expect(error.message, `the message shows ${figure}`).not.toContain(figure);
    }
    // The same key cannot read the payment.
    expect((await call(`/payments/${payment.id}`, { key: writeOnly.secret })).status).toBe(403);

    for (const key of [acct.key, (await createKey(acct, ["refunds:write", "payments:read"])).secret]) {
      const told = expectError(await call("/refunds", { key, body: { payment_id: payment.id, amount: asked } }), 400, "invalid_request_error", "refund_exceeds_payment");
      expect(told.message).toContain(`${remaining} (`);
    }
  });
});

describe("PUT /subscriptions/{id} answers the row as committed", () => {
  it("a renewal that commits between the update's read and its batch shows in the answer and in the stored answer", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    let renewed = false;
    const db = faultyD1(env.DB, [], {
      gate: async (op) => {
        if (renewed || op.kind !== "batch" || !writesTo(op, "subscriptions")) return;
        renewed = true;
        expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
      },
    });
    const put = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: { quantity: 2, proration_behavior: "none" }, headers: { "idempotency-key": "put-race-1" } });
    expect(renewed, "the renewal ran between the read and the batch").toBe(true);
    expect(put.status, put.text).toBe(200);
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body.next_billing_date).not.toBe(sub.next_billing_date);
    expect(put.body).toEqual(read.body);
    const replay = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: 2, proration_behavior: "none" }, idempotencyKey: "put-race-1" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(read.body);
  });

  it("a past-due card update answers the quantity another update committed while its card was charged", async () => {
    const acct = await signup();
    const sub = await pastDue(acct);
    let changed = false;
    const db = faultyD1(env.DB, [], {
      gate: async (op) => {
        if (changed || op.kind !== "batch" || !writesTo(op, "payments")) return;
        changed = true;
        const other = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: 3 } });
        expect(other.status, other.text).toBe(200);
      },
    });
    const put = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: cardFields(CARDS.mastercard), headers: { "idempotency-key": "put-race-2" } });
    expect(changed).toBe(true);
    expect(put.status, put.text).toBe(200);
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body).toMatchObject({ status: "active", quantity: 3 });
    expect(put.body).toEqual(read.body);
    const replay = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard), idempotencyKey: "put-race-2" });
    expect(replay.body).toEqual(read.body);
  });
});

describe("a canceled subscription shows cancel_at_period_end: false", () => {
  it("after a cancel at period end takes effect", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const scheduled = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    expect(scheduled.body).toMatchObject({ status: "active", cancel_at_period_end: true });
    await makeDue(sub.id);
    expect(await renewChunk(env, [sub.id])).toEqual(["canceled"]);
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body).toMatchObject({ status: "canceled", cancel_at_period_end: false });
    const listed = await call(`/subscriptions?status=canceled`, { key: acct.key });
    expect(listed.body.data[0]).toMatchObject({ id: sub.id, cancel_at_period_end: false });
    expect((await subscriptionRow(sub.id)).cancel_at_period_end).toBe(0);
  });

  it("after a plain DELETE of a subscription set to cancel at period end: the answer, the read and the replay", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: true } });
    expect(put.body.cancel_at_period_end).toBe(true);
    const canceled = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-now-1" });
    expect(canceled.status, canceled.text).toBe(200);
    expect(canceled.body).toMatchObject({ status: "canceled", cancel_at_period_end: false });
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.cancel_at_period_end).toBe(false);
    const replay = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-now-1" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(canceled.body);
  });

  it("a row or stored answer written before the rule (canceled, flag still set) is shown false too", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const canceled = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-old-1" });
    expect(canceled.status).toBe(200);
    await env.DB.prepare("UPDATE subscriptions SET cancel_at_period_end = 1 WHERE id = ?").bind(sub.id).run();
    await env.DB.prepare("UPDATE idempotency_keys SET response_body = json_set(response_body, '$.row.cancelAtPeriodEnd', 1) WHERE account_id = ? AND key = ?").bind(acct.id, "cancel-old-1").run();
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.cancel_at_period_end).toBe(false);
    const replay = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-old-1" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.cancel_at_period_end).toBe(false);
  });
});
