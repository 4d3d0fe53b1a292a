// Claims whose lease ran out. A period attempt is claimed before its charge (src/billing/periods.ts)
// and settled after it; a claim left unsettled (the worker or request died, the processor never
// answered, a commit answer was lost) may have moved money, so it blocks a cancel of the
// subscription (charge_in_progress) until its outcome is known. The cron settles every such claim
// once its lease (CLAIM_STALE_MS) has run out, or at once when the request that held it gave it
// back, whether or not the subscription is due, on the wall clock or a test clock: it takes the
// claim over (one conditional UPDATE: one worker wins, and the renewal run respects it), sends the
// same reference with the same card again (the processor answers the first call's outcome, or
// makes the charge if it never received it), and records what it answers: the payment once
// (unique on its reference) with the subscription advanced, or the decline (the attempt counted,
// or dunned for a renewal). A call that still throws leaves the claim for the run after its new
// lease. Each run settles at most STALE_CLAIMS_PER_RUN claims.
import { and, asc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import { createDb } from "../db/client";
import { runBatch } from "../db/batch";
import { livesHere } from "../db/scope";
import { plans, subscriptionPeriods, subscriptions, testClocks, users } from "../db/schema";
import type { Bindings } from "../env";
import { clock as wallClock, isoTime } from "../lib/clock";
import { processorResolver } from "../processor";
import type { Processor } from "../processor/types";
import { CLAIM_STALE_MS, type PeriodOutcome, RENEWING, attachPendingPlans, awaitingPayer, claimOf, claimPeriod, openPeriodColumns } from "./periods";
import { type ClaimedPeriod, chargeAndSettle } from "./renewals";

export const STALE_CLAIMS_PER_RUN = 50;

/** The cron task: settles the unsettled claims whose lease ran out. Throws a charge that failed, after settling the rest. */
export async function settleStaleClaims(env: Bindings, realNow: number = wallClock.now(), limit = STALE_CLAIMS_PER_RUN): Promise<PeriodOutcome[]> {
  const db = createDb(env.DB);
  const found = await db
    .select({ sub: subscriptions, plan: plans, user: users, period: openPeriodColumns, clock: testClocks })
    .from(subscriptionPeriods)
    .innerJoin(subscriptions, and(eq(subscriptions.id, subscriptionPeriods.subscriptionId), eq(subscriptions.periodsBilled, subscriptionPeriods.periodIndex)))
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
    .where(
      and(
        eq(subscriptionPeriods.status, "open"),
        lt(subscriptionPeriods.updatedAt, isoTime(realNow - CLAIM_STALE_MS)),
        gt(subscriptionPeriods.attempts, subscriptions.dunningAttempts),
        // A payer authenticating the attempt on the invoice's page holds it (src/billing/invoice-payments.ts).
        sql`NOT ${awaitingPayer}`,
        inArray(subscriptions.status, [...RENEWING]),
        livesHere(subscriptions.accountId),
      ),
    )
    .orderBy(asc(subscriptionPeriods.updatedAt))
    .limit(limit);
  if (found.length === 0) return [];
  // A first attempt's settlement invoices the period with the change scheduled for it.
  await attachPendingPlans(db, found);
  // The processor of each claim's account and mode; a live account without a connection keeps its
  // claim (charge_in_progress) until it connects one, since the charge may have moved money.
  const resolve = processorResolver(env, db);
  const processors = await Promise.all(found.map((row) => resolve(row.sub)));
  const rows = found.flatMap((row, i) => (processors[i] ? [{ ...row, processor: processors[i] as Processor }] : []));
  // Billing time: the wall clock, or the user's test clock (a renewal's at the moment it fell due, as an advance bills it).
  const atOf = (row: (typeof rows)[number]) =>
    row.clock ? Math.min(Date.parse(row.clock.frozenTime), row.sub.dueAt ?? Number.POSITIVE_INFINITY) : realNow;
  const claims = await runBatch(db, rows.map((row) => claimPeriod(db, row, "takeover", atOf(row), realNow)));
  const claimed: ClaimedPeriod[] = rows.flatMap((row, i) => {
    const claim = claimOf(claims[i]);
    return claim ? [{ row, claim, at: atOf(row), processor: row.processor }] : [];
  });
  const { outcomes, chargeError } = await chargeAndSettle(env, db, claimed, realNow);
  if (chargeError) throw chargeError;
  return outcomes;
}
