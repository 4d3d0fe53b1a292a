// Renewals and dunning. A renewal of period n of a subscription goes in three steps:
//
//   1. claim: insert the period's row (unique on subscription and period index), or, for a
//      dunning retry, move its `attempts` from k to k + 1 with a conditional update. Each claim
//      also re-checks, inside the same statement, that the subscription is still due in the state
//      that was read. A second run, an overlapping cron or a redelivered message loses the claim
//      and charges nothing, so each attempt of each period is charged at most once.
//   2. charge the vaulted token at the processor;
//   3. settle in one batch: the payment and its event, the period, the subscription (advanced,
//      past_due with its next retry, or canceled when the retries are used up) and its
//      notifications. A chunk's settlements share one batch (one D1 round trip); should it fail,
//      each is committed alone.
//
// A claim whose worker died between steps 1 and 3 is taken over once it is CLAIM_STALE_MS old.
import { type SQL, and, asc, eq, gt, gte, inArray, isNull, lte, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { createDb } from "../db/client";
import { guard, rawStatement, runBatch, type Statement } from "../db/batch";
import { plans, subscriptionPeriods, subscriptions, testClocks, users } from "../db/schema";
import { newId } from "../domain/ids";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { charge } from "../payments/charge";
import { cardOf } from "../payments/serialize";
import { commitWrites, type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { nextRetryAt, periodStartMs } from "./calendar";
import { type PlanRow, periodAmount } from "./pricing";
import { processorOfReference } from "../processor";
import { sendInBatches } from "../lib/queue";

export type SubscriptionRow = typeof subscriptions.$inferSelect;
export type UserRow = typeof users.$inferSelect;
export type PeriodRow = typeof subscriptionPeriods.$inferSelect;

export interface RenewalRow {
  sub: SubscriptionRow;
  plan: PlanRow;
  user: UserRow;
  /** The row of the period being collected (index = periods_billed), once claimed. */
  period: PeriodRow | null;
}

export type RenewalOutcome = "renewed" | "past_due" | "canceled" | "skipped";

/** A claim older than this belongs to a worker that died before settling; it may be taken over. */
export const CLAIM_STALE_MS = 10 * 60 * 1000;
/** Subscriptions per job message. */
export const RENEWAL_CHUNK_SIZE = 50;
/** Job messages one cron run may enqueue; what is not reached is picked up by the next run. */
export const MAX_RENEWAL_MESSAGES_PER_RUN = 100;
/** Parallel processor calls within one chunk. */
const CHARGE_CONCURRENCY = 10;
const RENEWING = ["active", "past_due"] as const;

/** The subscriptions, with what a renewal needs, in one query. */
export function selectRenewalRows(db: Db) {
  return db
    .select({ sub: subscriptions, plan: plans, user: users, period: subscriptionPeriods })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(
      subscriptionPeriods,
      and(eq(subscriptionPeriods.subscriptionId, subscriptions.id), eq(subscriptionPeriods.periodIndex, subscriptions.periodsBilled)),
    );
}

const isDue = (sub: SubscriptionRow, at: number) =>
  (sub.status === "active" || sub.status === "past_due") && sub.dueAt !== null && sub.dueAt <= at;

/** The subscription is still in the state the renewal read, and due at `at`. */
const stillDue = (sub: SubscriptionRow, at: number) => sql`EXISTS (SELECT 1 FROM subscriptions AS due
  WHERE due.id = ${sub.id} AND due.status = ${sub.status} AND due.periods_billed = ${sub.periodsBilled}
    AND due.dunning_attempts = ${sub.dunningAttempts} AND due.due_at <= ${at})`;

function claimStatement(db: Db, row: RenewalRow, at: number, realNow: number): Statement {
  const { sub, plan } = row;
  const n = sub.periodsBilled;
  const nowIso = isoTime(realNow);
  const staleIso = isoTime(realNow - CLAIM_STALE_MS);
  if (sub.status === "active") {
    const start = isoTime(periodStartMs(sub.billingAnchor, plan.interval, n));
    const amount = periodAmount(plan, sub.quantity);
    return rawStatement(
      db,
      sql`INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at)
        SELECT ${newId("period", realNow)}, ${sub.accountId}, ${sub.id}, ${n}, ${start}, ${amount}, ${plan.currency}, 'open', 1, ${nowIso}, ${nowIso}
        WHERE ${stillDue(sub, at)}
        ON CONFLICT (subscription_id, period_index) DO UPDATE SET updated_at = excluded.updated_at
          WHERE subscription_periods.status = 'open' AND subscription_periods.attempts = 1 AND subscription_periods.updated_at < ${staleIso}
        RETURNING attempts, amount, currency`,
    );
  }
  const k = sub.dunningAttempts;
  return rawStatement(
    db,
    sql`UPDATE subscription_periods SET attempts = ${k + 1}, updated_at = ${nowIso}
      WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open'
        AND (attempts = ${k} OR (attempts = ${k + 1} AND updated_at < ${staleIso}))
        AND ${stillDue(sub, at)}
      RETURNING attempts, amount, currency`,
  );
}

interface Claim {
  attempts: number;
  amount: number;
  currency: string;
}

const claimOf = (result: unknown): Claim | null => (result as { results?: Claim[] }).results?.[0] ?? null;

/** The conditional match of a settlement: the subscription as the claim saw it. */
const asClaimed = (sub: SubscriptionRow) =>
  and(
    eq(subscriptions.id, sub.id),
    eq(subscriptions.periodsBilled, sub.periodsBilled),
    eq(subscriptions.dunningAttempts, sub.dunningAttempts),
    inArray(subscriptions.status, [...RENEWING]),
  );

interface Settlement {
  outcome: RenewalOutcome;
  writes: { statements: Statement[]; events: EmittedEvent[] };
}

/** Charges a claimed period and builds (without committing) the batch that settles it. */
async function chargeClaimed(env: Bindings, db: Db, row: RenewalRow, claim: Claim, at: number, realNow: number): Promise<Settlement> {
  const { sub, plan, user } = row;
  const n = sub.periodsBilled;
  const result = await charge({
    db,
    processor: processorOfReference(env, sub.processorToken),
    accountId: sub.accountId,
    customer: { id: user.id, email: user.email },
    subscriptionId: sub.id,
    amount: claim.amount,
    currency: claim.currency,
    source: { token: sub.processorToken },
    summary: cardOf(sub),
    fingerprint: sub.cardFingerprint,
    at: realNow,
    processorReference: `${sub.id}:period:${n}:attempt:${claim.attempts}`,
  });
  const period = and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.periodIndex, n));
  const statements: Statement[] = [...result.statements];
  const events: EmittedEvent[] = [...result.events];
  const notify = (type: "subscription_renewal" | "subscription_canceled", status: string) =>
    events.push(emitEvent(db, sub.accountId, { type, subscriptionId: sub.id, status }, realNow));
  let outcome: RenewalOutcome;

  if (result.succeeded) {
    const next = periodStartMs(sub.billingAnchor, plan.interval, n + 1);
    statements.push(
      db.update(subscriptionPeriods).set({ status: "paid", paymentId: result.payment.id, updatedAt: isoTime(realNow) }).where(period),
      db
        .update(subscriptions)
        .set({
          status: "active",
          periodsBilled: n + 1,
          currentPeriodStart: isoTime(periodStartMs(sub.billingAnchor, plan.interval, n)),
          nextBillingDate: isoTime(next),
          dueAt: next,
          dunningAttempts: 0,
          updatedAt: isoTime(realNow),
        })
        .where(asClaimed(sub)),
    );
    notify("subscription_renewal", "success");
    outcome = "renewed";
  } else {
    const failedAttempts = claim.attempts;
    const retryAt = nextRetryAt(failedAttempts, at);
    notify("subscription_renewal", "failed");
    if (retryAt !== null) {
      statements.push(
        db.update(subscriptionPeriods).set({ updatedAt: isoTime(realNow) }).where(period),
        db
          .update(subscriptions)
          .set({ status: "past_due", dunningAttempts: failedAttempts, dueAt: retryAt, updatedAt: isoTime(realNow) })
          .where(asClaimed(sub)),
      );
      outcome = "past_due";
    } else {
      statements.push(
        db.update(subscriptionPeriods).set({ status: "uncollectible", updatedAt: isoTime(realNow) }).where(period),
        db
          .update(subscriptions)
          .set({ status: "canceled", canceledAt: isoTime(at), dueAt: null, dunningAttempts: failedAttempts, updatedAt: isoTime(realNow) })
          .where(asClaimed(sub)),
      );
      notify("subscription_canceled", "canceled");
      outcome = "canceled";
    }
  }
  // The payment is recorded whatever happened to the subscription meanwhile: money moved.
  return { outcome, writes: { statements, events } };
}

/**
 * Commits the settlements of a chunk as one batch. Should that batch fail, each is retried in a
 * batch of its own, so one bad settlement cannot hold back the others.
 */
async function commitSettlements(env: Bindings, db: Db, settlements: Settlement[]): Promise<void> {
  const deps = { db, queue: env.DELIVERY_QUEUE };
  if (settlements.length === 0) return;
  try {
    await commitWrites(deps, {
      statements: settlements.flatMap((s) => s.writes.statements),
      events: settlements.flatMap((s) => s.writes.events),
    });
    return;
  } catch (error) {
    if (settlements.length === 1) throw error;
    console.error(JSON.stringify({ message: "renewal settlement batch failed; settling one by one", settlements: settlements.length, error: String(error) }));
  }
  const results = await Promise.allSettled(settlements.map((s) => commitWrites(deps, s.writes)));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
}

const RENEWAL_STALE = "renewal_stale";
class StaleRenewal extends ApiError {
  constructor() {
    super(409, "invalid_request_error", RENEWAL_STALE, "The subscription changed before it could be canceled at period end.");
  }
}

/** cancel_at_period_end: the renewal run cancels instead of charging. */
async function cancelAtPeriodEnd(env: Bindings, db: Db, row: RenewalRow, at: number, realNow: number): Promise<RenewalOutcome> {
  const { sub } = row;
  try {
    await commitWrites(
      { db, queue: env.DELIVERY_QUEUE },
      {
        statements: [
          guard(db, RENEWAL_STALE, sql`${stillDue(sub, at)} AND EXISTS (SELECT 1 FROM subscriptions WHERE id = ${sub.id} AND cancel_at_period_end = 1)`),
          db
            .update(subscriptions)
            // An active subscription ends exactly at its period end; a past_due one when its retry was due.
            .set({ status: "canceled", canceledAt: sub.status === "active" ? sub.nextBillingDate : isoTime(at), dueAt: null, updatedAt: isoTime(realNow) })
            .where(eq(subscriptions.id, sub.id)),
          db
            .update(subscriptionPeriods)
            .set({ status: "uncollectible", updatedAt: isoTime(realNow) })
            .where(and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.status, "open"))),
        ],
        events: [emitEvent(db, sub.accountId, { type: "subscription_canceled", subscriptionId: sub.id, status: "canceled" }, realNow)],
      },
      { [RENEWAL_STALE]: () => new StaleRenewal() },
    );
    return "canceled";
  } catch (error) {
    if (error instanceof StaleRenewal) return "skipped";
    throw error;
  }
}

/** Runs `work` over `items` with at most `limit` in flight; every item runs, then the first error is thrown. */
async function eachLimited<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  const errors: unknown[] = [];
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index]);
      } catch (error) {
        errors.push(error);
      }
    }
  });
  await Promise.all(lanes);
  if (errors.length > 0) throw errors[0];
  return results;
}

/**
 * Renews each due row once, at the billing time `atOf(row)` (the wall clock, or a test clock's
 * time). Rows not due, or claimed by another run, are skipped.
 */
export async function renewSubscriptions(
  env: Bindings,
  db: Db,
  rows: RenewalRow[],
  atOf: (row: RenewalRow) => number,
  realNow: number = Date.now(),
): Promise<RenewalOutcome[]> {
  const outcomes: RenewalOutcome[] = rows.map(() => "skipped");
  const toCharge: number[] = [];
  const toCancel: number[] = [];
  rows.forEach((row, i) => {
    if (!isDue(row.sub, atOf(row))) return;
    if (row.sub.cancelAtPeriodEnd) toCancel.push(i);
    else toCharge.push(i);
  });

  const claims = await runBatch(db, toCharge.map((i) => claimStatement(db, rows[i], atOf(rows[i]), realNow)));
  const claimed = toCharge.flatMap((i, j) => {
    const claim = claimOf(claims[j]);
    return claim ? [{ i, claim }] : [];
  });

  const settlements: Settlement[] = [];
  let chargeError: unknown = null;
  try {
    await eachLimited(claimed, CHARGE_CONCURRENCY, async ({ i, claim }) => {
      const settlement = await chargeClaimed(env, db, rows[i], claim, atOf(rows[i]), realNow);
      settlements.push(settlement);
      outcomes[i] = settlement.outcome;
    });
  } catch (error) {
    chargeError = error;
  }
  // What was charged is settled even when another charge of the chunk failed.
  await commitSettlements(env, db, settlements);
  await eachLimited(toCancel, CHARGE_CONCURRENCY, async (i) => {
    outcomes[i] = await cancelAtPeriodEnd(env, db, rows[i], atOf(rows[i]), realNow);
  });
  if (chargeError) throw chargeError;
  return outcomes;
}

/** Subscriptions whose users follow a test clock renew when their clock advances, never by the wall clock. */
const followsWallClock = sql`NOT EXISTS (SELECT 1 FROM users AS clocked WHERE clocked.id = ${subscriptions.userId} AND clocked.test_clock_id IS NOT NULL)`;

/** The job: renews one chunk of subscriptions at the wall-clock time. */
export async function renewChunk(env: Bindings, subscriptionIds: string[], now: number = Date.now()): Promise<RenewalOutcome[]> {
  const db = createDb(env.DB);
  const rows = await selectRenewalRows(db).where(and(inArray(subscriptions.id, subscriptionIds), isNull(users.testClockId)));
  return renewSubscriptions(env, db, rows, () => now, now);
}

export interface RenewalJobMessage {
  kind: "billing.renew";
  subscriptionIds: string[];
}

/**
 * The cron task: walks the subscriptions_due index in pages, oldest due first, and enqueues the
 * due subscriptions in chunks, up to MAX_RENEWAL_MESSAGES_PER_RUN messages.
 */
export async function enqueueDueRenewals(
  env: Bindings,
  now: number,
  limits: { chunkSize?: number; maxMessages?: number } = {},
): Promise<{ subscriptions: number; messages: number }> {
  const chunkSize = limits.chunkSize ?? RENEWAL_CHUNK_SIZE;
  const maxMessages = limits.maxMessages ?? MAX_RENEWAL_MESSAGES_PER_RUN;
  const pageSize = chunkSize * 10;
  const db = createDb(env.DB);
  let cursor: { dueAt: number; id: string } | null = null;
  let total = 0;
  let messages = 0;
  while (messages < maxMessages) {
    const limit = Math.min(pageSize, (maxMessages - messages) * chunkSize);
    const after: SQL | undefined = cursor
      ? and(gte(subscriptions.dueAt, cursor.dueAt), or(gt(subscriptions.dueAt, cursor.dueAt), and(eq(subscriptions.dueAt, cursor.dueAt), gt(subscriptions.id, cursor.id))))
      : undefined;
    const page: { id: string; dueAt: number | null }[] = await db
      .select({ id: subscriptions.id, dueAt: subscriptions.dueAt })
      .from(subscriptions)
      .where(and(lte(subscriptions.dueAt, now), inArray(subscriptions.status, [...RENEWING]), followsWallClock, after))
      .orderBy(asc(subscriptions.dueAt), asc(subscriptions.id))
      .limit(limit);
    if (page.length === 0) break;
    const jobs: RenewalJobMessage[] = [];
    for (let i = 0; i < page.length; i += chunkSize) {
      jobs.push({ kind: "billing.renew", subscriptionIds: page.slice(i, i + chunkSize).map((r) => r.id) });
    }
    await sendInBatches(env.JOB_QUEUE, jobs.map((body) => ({ body })));
    total += page.length;
    messages += jobs.length;
    const last = page[page.length - 1];
    cursor = { dueAt: last.dueAt as number, id: last.id };
    if (page.length < limit) break;
  }
  return { subscriptions: total, messages };
}

// Test clocks ---------------------------------------------------------------------------------

/** Renewal steps one advance request runs itself; the rest continues on the job queue. */
export const TEST_CLOCK_SYNC_STEPS = 24;

export interface TestClockJobMessage {
  kind: "billing.advance_test_clock";
  testClockId: string;
}

const dueOnClock = (clock: { id: string; accountId: string }, frozenMs: number) =>
  and(
    eq(users.accountId, clock.accountId),
    eq(users.testClockId, clock.id),
    inArray(subscriptions.status, [...RENEWING]),
    lte(subscriptions.dueAt, frozenMs),
  );

/** Whether a subscription on the clock is still due at its frozen time (the clock is "advancing"). */
export async function testClockHasDueWork(db: Db, clock: { id: string; accountId: string; frozenTime: string }): Promise<boolean> {
  const [row] = await db
    .select({ id: subscriptions.id })
    .from(subscriptions)
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .where(dueOnClock(clock, Date.parse(clock.frozenTime)))
    .limit(1);
  return row !== undefined;
}

/**
 * Runs the renewals and dunning of a test clock's subscriptions up to its frozen time, one due
 * event at a time in time order, each at the moment it falls due, for at most `maxSteps` events.
 * Returns whether everything due has been done.
 */
export async function runTestClock(
  env: Bindings,
  db: Db,
  clock: { id: string; accountId: string; frozenTime: string },
  maxSteps: number,
): Promise<{ steps: number; done: boolean }> {
  const frozenMs = Date.parse(clock.frozenTime);
  for (let steps = 0; steps < maxSteps; steps++) {
    const [row] = await selectRenewalRows(db)
      .where(dueOnClock(clock, frozenMs))
      .orderBy(asc(subscriptions.dueAt), asc(subscriptions.id))
      .limit(1);
    if (!row) return { steps, done: true };
    const [outcome] = await renewSubscriptions(env, db, [row], (r) => r.sub.dueAt as number);
    // Claimed by a concurrent run of the same clock: that run carries on.
    if (outcome === "skipped") return { steps, done: false };
  }
  return { steps: maxSteps, done: !(await testClockHasDueWork(db, clock)) };
}

/** The job: continues a test clock's advance that did not finish within its request. */
export async function continueTestClock(env: Bindings, message: TestClockJobMessage): Promise<void> {
  const db = createDb(env.DB);
  const clock = await db.query.testClocks.findFirst({ where: eq(testClocks.id, message.testClockId) });
  if (!clock) return;
  const { steps, done } = await runTestClock(env, db, clock, TEST_CLOCK_SYNC_STEPS);
  if (done) return;
  // No progress: another run holds the next renewal. Fail so the queue retries later.
  if (steps === 0) throw new Error(`test clock ${clock.id}: next renewal is claimed elsewhere`);
  await env.JOB_QUEUE.send(message satisfies TestClockJobMessage);
}
