// Renewals and dunning, run by the cron (src/billing/jobs.ts) through the job queue: due
// subscriptions are claimed, charged and settled through src/billing/periods.ts, the one home of
// charging a period. A chunk's settlements share one batch (one D1 round trip); should it fail,
// each is committed alone, and one that another worker already recorded is skipped.
import { pendingItemsOf } from "./prorations";
import { type SQL, and, asc, eq, gt, gte, inArray, isNull, lte, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { createDb } from "../db/client";
import { failureReason, runBatch } from "../db/batch";
import { claimLease, JOB_RUN_TTL_MS, leaseTaken } from "../db/leases";
import { jobRuns, subscriptions, users } from "../db/schema";
import type { Bindings } from "../env";
import { clock, isoTime } from "../lib/clock";
import { commitWrites } from "../webhooks/outbox";
import {
  type BillableRow,
  CANCEL_AT_PERIOD_END_STALE,
  PERIOD_ALREADY_SETTLED,
  type PeriodClaim,
  type PeriodOutcome,
  type PeriodSettlement,
  RENEWING,
  cancelAtPeriodEndWrites,
  chargePeriod,
  claimOf,
  claimPeriod,
  attachPendingPlans,
  balanceTaken,
  hasUnsettledClaim,
  isDue,
  owesFinalInvoice,
  selectBillableRows,
} from "./periods";
import { processorResolver } from "../processor";
import { isMetered, usageOfOpenPeriods } from "./usage";
import { sendTrialNotice } from "./trials";
import type { Processor } from "../processor/types";
import { sendInBatches } from "../lib/queue";
import { livesHere } from "../db/scope";
import { publicUrl } from "../pages/public-url";

/** Subscriptions per job message. */
export const RENEWAL_CHUNK_SIZE = 50;
/** Job messages one fan-out step enqueues before it hands the rest to its continuation. */
export const MAX_RENEWAL_MESSAGES_PER_RUN = 100;
/** Parallel processor calls within one chunk. */
const CHARGE_CONCURRENCY = 10;

/**
 * Commits the settlements of a chunk as one batch. Should that batch fail, each is retried in a
 * batch of its own, so one bad settlement cannot hold back the others. One that is already
 * recorded (the failed batch did commit after all, or another worker took the claim over) is
 * refused by its guard and skipped.
 */
async function commitSettlements(env: Bindings, db: Db, settlements: PeriodSettlement[]): Promise<void> {
  const deps = { db, queue: env.DELIVERY_QUEUE };
  if (settlements.length === 0) return;
  try {
    await commitWrites(deps, {
      statements: settlements.flatMap((s) => s.writes.statements),
      events: settlements.flatMap((s) => s.writes.events),
    });
    return;
  } catch (error) {
    console.error(JSON.stringify({ message: "renewal settlement batch failed; settling one by one", settlements: settlements.length, error: String(error) }));
  }
  const results = await Promise.allSettled(settlements.map((s) => commitWrites(deps, s.writes)));
  let failure: unknown = null;
  results.forEach((result, i) => {
    if (result.status === "fulfilled") return;
    if (failureReason(result.reason) === PERIOD_ALREADY_SETTLED) settlements[i].outcome = "skipped";
    else failure ??= result.reason;
  });
  if (failure) throw failure;
}

/** cancel_at_period_end with nothing left owing: the renewal run cancels instead of charging (see cancelAtPeriodEndWrites). */
async function cancelAtPeriodEnd(env: Bindings, db: Db, row: BillableRow, at: number, realNow: number): Promise<PeriodOutcome> {
  try {
    await commitWrites({ db, queue: env.DELIVERY_QUEUE }, cancelAtPeriodEndWrites(db, row.sub, at, realNow));
    return "canceled";
  } catch (error) {
    // Changed meanwhile, or a charge of the period still in flight: a later run decides.
    if (failureReason(error) === CANCEL_AT_PERIOD_END_STALE) return "skipped";
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
  rows: BillableRow[],
  atOf: (row: BillableRow) => number,
  realNow: number = clock.now(),
): Promise<PeriodOutcome[]> {
  const outcomes: PeriodOutcome[] = rows.map(() => "skipped");
  const toCharge: number[] = [];
  const toCancel: number[] = [];
  // The processor of each row's account and mode, before anything is claimed: a live account
  // without a processor connection is left as it is (not claimed, so no attempt is counted).
  const resolve = processorResolver(env, db);
  const processors = new Map<number, Processor>();
  const dueRows = rows.flatMap((row, i) => (isDue(row.sub, atOf(row)) ? [i] : []));
  await attachPendingPlans(db, dueRows.map((i) => rows[i]));
  await Promise.all(
    dueRows.map(async (i) => {
      const processor = await resolve(rows[i].sub);
      if (processor) processors.set(i, processor);
    }),
  );
  for (const i of dueRows) {
    const row = rows[i];
    // A subscription set to cancel at period end is canceled, unless a charge of the period never
    // settled (that charge is taken over, same reference, and recorded first), or it still owes for
    // its last period: then its final invoice is claimed and charged, and its settlement cancels it.
    if (row.sub.cancelAtPeriodEnd && !hasUnsettledClaim(row) && !owesFinalInvoice(row)) toCancel.push(i);
    else if (processors.has(i)) toCharge.push(i);
  }
  // A trial's end is charged after its subscription_trial_will_end: one not sent yet (its trial is
  // shorter than the gap between two cron runs, or the notices are behind) is sent first.
  await eachLimited(
    toCharge.filter((i) => rows[i].sub.status === "trialing" && !rows[i].sub.trialWillEndSent),
    CHARGE_CONCURRENCY,
    (i) => sendTrialNotice(env, db, rows[i].sub, realNow),
  );

  // A metered period is priced by its usage, read before its claim (which checks it still holds).
  const metered = toCharge.filter((i) => isMetered(rows[i].plan) && rows[i].sub.status === "active").map((i) => rows[i].sub);
  const usage = await usageOfOpenPeriods(db, metered);
  // A period's tax is priced line by line, its pending proration items included: they are read before its claim
  // (which holds only if they are still the ones read).
  const withItems = toCharge.filter((i) => rows[i].sub.pendingItems > 0 && !(rows[i].sub.cancelAtPeriodEnd && hasUnsettledClaim(rows[i])));
  const pendingItems = new Map(await Promise.all(withItems.map(async (i) => [rows[i].sub.id, await pendingItemsOf(db, rows[i].sub.id)] as const)));
  // A period that cannot be priced (beyond the largest chargeable amount, which the usage endpoint
  // and plan changes refuse to reach) is left unclaimed and logged; the rest of the chunk goes on.
  const claimable: number[] = [];
  // Where each claim's statement is in the batch: a new period's claim is followed by what it took from the user's balance.
  const claimAt: number[] = [];
  let position = 0;
  const statements = toCharge.flatMap((i) => {
    try {
      const kind = rows[i].sub.cancelAtPeriodEnd && hasUnsettledClaim(rows[i]) ? "takeover" : "renewal";
      const statement = claimPeriod(db, { ...rows[i], usage: usage.get(rows[i].sub.id), items: pendingItems.get(rows[i].sub.id) }, kind, atOf(rows[i]), realNow);
      const taken = kind === "renewal" && (rows[i].sub.status === "active" || rows[i].sub.status === "trialing") ? balanceTaken(db, rows[i].sub, realNow) : [];
      claimable.push(i);
      claimAt.push(position);
      position += 1 + taken.length;
      return [statement, ...taken];
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      console.error(JSON.stringify({ message: "renewal: the period cannot be priced; left unclaimed", subscription: rows[i].sub.id, error: String(error) }));
      outcomes[i] = "unpriceable";
      return [];
    }
  });
  const claims = await runBatch(db, statements);
  const claimed = claimable.flatMap((i, j) => {
    const claim = claimOf(claims[claimAt[j]]);
    return claim ? [{ i, row: rows[i], claim, at: atOf(rows[i]), processor: processors.get(i)! }] : [];
  });

  const charged = await chargeAndSettle(env, db, claimed, realNow);
  charged.outcomes.forEach((outcome, j) => (outcomes[claimed[j].i] = outcome));
  await eachLimited(toCancel, CHARGE_CONCURRENCY, async (i) => {
    outcomes[i] = await cancelAtPeriodEnd(env, db, rows[i], atOf(rows[i]), realNow);
  });
  if (charged.chargeError) throw charged.chargeError;
  return outcomes;
}

/** A claimed attempt to charge: the row as the claim saw it, the claim, the billing time, and its account's processor. */
export interface ClaimedPeriod {
  row: BillableRow;
  claim: PeriodClaim;
  at: number;
  processor: Processor;
}

/**
 * Charges each claimed attempt, with its card and reference (at most CHARGE_CONCURRENCY at once),
 * and commits their settlements: what was charged is settled even when another charge failed.
 * Returns each claim's outcome, and the first charge that failed (for the caller to throw once
 * its other work is done: its claim stays, for a retry or the cron to send again).
 */
export async function chargeAndSettle(
  env: Bindings,
  db: Db,
  claimed: ClaimedPeriod[],
  realNow: number,
): Promise<{ outcomes: PeriodOutcome[]; chargeError: unknown }> {
  const outcomes: PeriodOutcome[] = claimed.map(() => "skipped");
  const settlements: PeriodSettlement[] = [];
  const indexOf = new Map<PeriodSettlement, number>();
  let chargeError: unknown = null;
  try {
    await eachLimited(
      claimed.map((c, j) => ({ ...c, j })),
      CHARGE_CONCURRENCY,
      async ({ row, claim, at, processor, j }) => {
        const settlement = await chargePeriod(db, {
          processor,
          pageBase: publicUrl(env),
          row,
          claim,
          at,
          realNow,
        });
        settlements.push(settlement);
        indexOf.set(settlement, j);
      },
    );
  } catch (error) {
    chargeError = error;
  }
  await commitSettlements(env, db, settlements);
  for (const settlement of settlements) outcomes[indexOf.get(settlement) as number] = settlement.outcome;
  return { outcomes, chargeError };
}

/** Subscriptions whose users follow a test clock renew when their clock advances, never by the wall clock. */
const followsWallClock = sql`NOT EXISTS (SELECT 1 FROM users AS clocked WHERE clocked.id = ${subscriptions.userId} AND clocked.test_clock_id IS NOT NULL)`;

/** The job: renews one chunk of subscriptions at the wall-clock time. */
export async function renewChunk(env: Bindings, subscriptionIds: string[], now: number = clock.now()): Promise<PeriodOutcome[]> {
  const db = createDb(env.DB);
  const rows = await selectBillableRows(db).where(and(inArray(subscriptions.id, subscriptionIds), isNull(users.testClockId)));
  return renewSubscriptions(env, db, rows, () => now, now);
}

export interface RenewalJobMessage {
  kind: "billing.renew";
  subscriptionIds: string[];
}

/** A position in the due index: the last subscription a fan-out step enqueued. */
export interface DueCursor {
  dueAt: number;
  id: string;
}

/**
 * One step of the renewal fan-out: walks the subscriptions_due index from `after`, oldest due
 * first, and enqueues the subscriptions due at `now` in chunks, up to `maxMessages` messages.
 * Returns where it stopped (`next`), or null when nothing due is left behind it.
 */
export async function enqueueDueRenewals(
  env: Bindings,
  now: number,
  limits: { chunkSize?: number; maxMessages?: number } = {},
  after: DueCursor | null = null,
): Promise<{ subscriptions: number; messages: number; next: DueCursor | null }> {
  const chunkSize = limits.chunkSize ?? RENEWAL_CHUNK_SIZE;
  const maxMessages = limits.maxMessages ?? MAX_RENEWAL_MESSAGES_PER_RUN;
  const pageSize = chunkSize * 10;
  const db = createDb(env.DB);
  let cursor = after;
  let total = 0;
  let messages = 0;
  while (messages < maxMessages) {
    const limit = Math.min(pageSize, (maxMessages - messages) * chunkSize);
    const from: SQL | undefined = cursor
      ? and(gte(subscriptions.dueAt, cursor.dueAt), or(gt(subscriptions.dueAt, cursor.dueAt), and(eq(subscriptions.dueAt, cursor.dueAt), gt(subscriptions.id, cursor.id))))
      : undefined;
    const page: { id: string; dueAt: number | null }[] = await db
      .select({ id: subscriptions.id, dueAt: subscriptions.dueAt })
      .from(subscriptions)
      .where(and(lte(subscriptions.dueAt, now), inArray(subscriptions.status, [...RENEWING]), followsWallClock, livesHere(subscriptions.accountId), from))
      .orderBy(asc(subscriptions.dueAt), asc(subscriptions.id))
      .limit(limit);
    if (page.length === 0) return { subscriptions: total, messages, next: null };
    const jobs: RenewalJobMessage[] = [];
    for (let i = 0; i < page.length; i += chunkSize) {
      jobs.push({ kind: "billing.renew", subscriptionIds: page.slice(i, i + chunkSize).map((r) => r.id) });
    }
    await sendInBatches(env.JOB_QUEUE, jobs.map((body) => ({ body })));
    total += page.length;
    messages += jobs.length;
    const last = page[page.length - 1];
    cursor = { dueAt: last.dueAt as number, id: last.id };
    if (page.length < limit) return { subscriptions: total, messages, next: null };
  }
  return { subscriptions: total, messages, next: cursor };
}

// The fan-out has no per-run cap: the cron starts it, each step enqueues up to
// MAX_RENEWAL_MESSAGES_PER_RUN chunks and hands the rest to a continuation message on the job
// queue, until the due index is walked to the end. The fan-out holds a lease (job_runs
// `renewal_fanout`, refreshed by each step), so the next minute's cron does not start a second
// walk over the same subscriptions while one is running; should it happen anyway (a step delayed
// past the lease), each period's claim still charges it once.

export const RENEWAL_FANOUT_KEY = "renewal_fanout";
/** How long a fan-out step holds the walk; the next step refreshes it. */
export const RENEWAL_FANOUT_LEASE_MS = 2 * 60_000;

export interface RenewalFanoutMessage {
  kind: "billing.enqueue_due";
  /** The time the walk bills at: the cron run's scheduled time. */
  now: number;
  after: DueCursor | null;
}

/** One fan-out step, then its continuation when due subscriptions are left. */
export async function fanOutRenewals(
  env: Bindings,
  message: RenewalFanoutMessage,
  limits: { chunkSize?: number; maxMessages?: number } = {},
): Promise<{ subscriptions: number; messages: number; next: DueCursor | null }> {
  const db = createDb(env.DB);
  // Refresh the walk's lease for as long as it runs.
  await db
    .insert(jobRuns)
    .values({ key: RENEWAL_FANOUT_KEY, createdAt: isoTime(clock.now()), leaseUntil: clock.now() + RENEWAL_FANOUT_LEASE_MS, expiresAt: clock.now() + JOB_RUN_TTL_MS })
    .onConflictDoUpdate({ target: jobRuns.key, set: { leaseUntil: clock.now() + RENEWAL_FANOUT_LEASE_MS, expiresAt: clock.now() + JOB_RUN_TTL_MS } });
  const step = await enqueueDueRenewals(env, message.now, limits, message.after);
  if (step.next) {
    await env.JOB_QUEUE.send({ kind: "billing.enqueue_due", now: message.now, after: step.next } satisfies RenewalFanoutMessage);
  } else {
    // The walk is done: the next cron run may start another at once.
    await db.update(jobRuns).set({ leaseUntil: 0 }).where(eq(jobRuns.key, RENEWAL_FANOUT_KEY));
  }
  return step;
}

/** The cron task: starts a fan-out over what is due at `scheduledTime`, unless one is running. */
export async function startRenewalFanout(env: Bindings, scheduledTime: number): Promise<boolean> {
  const db = createDb(env.DB);
  const [lease] = await runBatch(db, [claimLease(db, RENEWAL_FANOUT_KEY, clock.now(), RENEWAL_FANOUT_LEASE_MS)]);
  if (!leaseTaken(lease)) return false;
  await fanOutRenewals(env, { kind: "billing.enqueue_due", now: scheduledTime, after: null });
  return true;
}
