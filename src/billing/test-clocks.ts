// Test clocks: a user created with a test clock has its subscriptions billed by the clock's frozen
// time instead of the wall clock. Advancing the clock runs, in time order, each renewal and dunning
// retry that falls due up to the new time, through the same renewal code as the cron.
//
// Bounds, as Stripe's: one advance moves the clock at most two intervals of the shortest
// subscription on it, so it runs a bounded number of renewals. An advance that could not finish
// within its request continues on the job queue, and the cron resumes any clock whose
// continuation died (a clock with due work is "advancing" until that work is done).
import { and, asc, eq, inArray, lte, notInArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { createDb } from "../db/client";
import { type Tenant, livesHere, ownedBy } from "../db/scope";
import { plans, subscriptions, testClocks, users } from "../db/schema";
import { addIntervals, type BillingInterval } from "../domain/billing-calendar";
import type { Bindings } from "../env";
import { clock as tenderClock } from "../lib/clock";
import { sendInBatches } from "../lib/queue";
import { RENEWING, selectBillableRows } from "./periods";
import { renewSubscriptions } from "./renewals";
import { sendTestClockTrialNotices, TRIAL_NOTICES_PER_RUN } from "./trials";

/** Renewal steps one advance request runs itself; the rest continues on the job queue. */
export const TEST_CLOCK_SYNC_STEPS = 24;
/** How many intervals of the shortest subscription on the clock one advance may cover. */
export const MAX_ADVANCE_INTERVALS = 2;
/** Clocks the cron resumes per run. */
const RESUME_LIMIT = 100;

export interface TestClockJobMessage {
  kind: "billing.advance_test_clock";
  testClockId: string;
}

/** A clock, and the tenant (account and mode) whose users it holds. */
type ClockRef = Tenant & { id: string; frozenTime: string };

const dueOnClock = (clock: Tenant & { id: string }, frozenMs: number) =>
  and(
    ownedBy(users, clock),
    eq(users.testClockId, clock.id),
    inArray(subscriptions.status, [...RENEWING]),
    lte(subscriptions.dueAt, frozenMs),
  );

/** Whether a subscription on the clock is still due at its frozen time (the clock is "advancing"). */
export async function testClockHasDueWork(db: Db, clock: ClockRef): Promise<boolean> {
  const [row] = await db
    .select({ id: subscriptions.id })
    .from(subscriptions)
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .where(dueOnClock(clock, Date.parse(clock.frozenTime)))
    .limit(1);
  return row !== undefined;
}

/**
 * The latest time one advance of `clock` may reach: two intervals of the shortest subscription
 * on it (a month before a year), or null when no subscription is on it (nothing to run).
 */
export async function maxAdvanceTime(db: Db, clock: ClockRef): Promise<number | null> {
  const rows = await db
    .selectDistinct({ interval: plans.interval })
    .from(subscriptions)
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .where(and(ownedBy(users, clock), eq(users.testClockId, clock.id), inArray(subscriptions.status, [...RENEWING])));
  if (rows.length === 0) return null;
  const shortest: BillingInterval = rows.some((r) => r.interval === "month") ? "month" : "year";
  return addIntervals(new Date(clock.frozenTime), shortest, MAX_ADVANCE_INTERVALS).getTime();
}

/**
 * Runs the renewals and dunning of a test clock's subscriptions up to its frozen time, one due
 * event at a time in time order, each at the moment it falls due, for at most `maxSteps` events.
 * Returns whether everything due has been done.
 */
export async function runTestClock(env: Bindings, db: Db, clock: ClockRef, maxSteps: number): Promise<{ steps: number; done: boolean }> {
  const frozenMs = Date.parse(clock.frozenTime);
  // The trial notices that fell due first (a notice is due before the trial's end it announces,
  // and a trial's end is charged only once its notice is out): all of them, a run's worth at a time.
  while ((await sendTestClockTrialNotices(env, db, clock.id, frozenMs, tenderClock.now())) === TRIAL_NOTICES_PER_RUN);
  // A subscription whose period cannot be priced is left due (and logged by the renewal run); the
  // clock moves past it, so the others on it are not held back.
  const unpriceable: string[] = [];
  for (let steps = 0; steps < maxSteps; steps++) {
    const [row] = await selectBillableRows(db)
      .where(and(dueOnClock(clock, frozenMs), unpriceable.length > 0 ? notInArray(subscriptions.id, unpriceable) : undefined))
      .orderBy(asc(subscriptions.dueAt), asc(subscriptions.id))
      .limit(1);
    if (!row) return { steps, done: unpriceable.length === 0 };
    const [outcome] = await renewSubscriptions(env, db, [row], (r) => r.sub.dueAt as number);
    if (outcome === "unpriceable") unpriceable.push(row.sub.id);
    // Claimed by a concurrent run of the same clock: that run carries on.
    else if (outcome === "skipped") return { steps, done: false };
  }
  return { steps: maxSteps, done: !(await testClockHasDueWork(db, clock)) };
}

/** The job: continues a test clock's advance that did not finish within its request. */
export async function continueTestClock(env: Bindings, message: TestClockJobMessage): Promise<void> {
  const db = createDb(env.DB);
  const clock = await db.query.testClocks.findFirst({ where: eq(testClocks.id, message.testClockId) });
  if (!clock) return;
  const { steps, done } = await runTestClock(env, db, clock, TEST_CLOCK_SYNC_STEPS);
  // Done, or no progress because another run holds the next renewal: that run carries on, and
  // should it die, the cron resumes the clock.
  if (done || steps === 0) return;
  await env.JOB_QUEUE.send(message satisfies TestClockJobMessage);
}

/** Cron: a continuation for every clock that still has due work, so no clock stays advancing for good. */
export async function resumeTestClocks(env: Bindings): Promise<number> {
  const db = createDb(env.DB);
  const rows = await db
    .selectDistinct({ id: testClocks.id })
    .from(testClocks)
    .innerJoin(users, eq(users.testClockId, testClocks.id))
    .innerJoin(subscriptions, eq(subscriptions.userId, users.id))
    .where(and(inArray(subscriptions.status, [...RENEWING]), sql`${subscriptions.dueAt} <= (unixepoch(${testClocks.frozenTime}, 'subsec') * 1000)`, livesHere(testClocks.accountId)))
    .limit(RESUME_LIMIT);
  await sendInBatches(
    env.JOB_QUEUE,
    rows.map((row) => ({ body: { kind: "billing.advance_test_clock", testClockId: row.id } satisfies TestClockJobMessage })),
  );
  return rows.length;
}
