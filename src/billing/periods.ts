// Charging one billing period: claim -> charge -> settle -> advance. This module is the one home
// of that rule. Renewals, dunning retries and test-clock advances (src/billing/renewals.ts,
// src/billing/test-clocks.ts) and the past-due card update (PUT /subscriptions/{id}) all go
// through it, so there is one period claim, one processor reference format and one settlement.
//
//   1. claim: the period row of index n (= periods_billed) is inserted for a first attempt, or
//      its `attempts` moved from k to k + 1 for a retry, in one conditional statement that also
//      re-checks that the subscription is still in the state that was read (status, period,
//      attempts, cancel_at_period_end). Whoever loses the claim charges nothing.
//   2. charge: the processor is called with the reference `<sub>:period:<n>:attempt:<k>`, fixed
//      for that attempt, so a retried call is the same charge to the processor.
//   3. settle, in one batch: the payment (unique on its charge reference, so a claim taken over
//      after a crash cannot record the same processor charge twice), the period, the
//      subscription (advanced, past_due with its next retry, or canceled) and the events.
import { type SQL, and, eq, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { guard, rawStatement, type Statement } from "../db/batch";
import { plans, subscriptionPeriods, subscriptions, users } from "../db/schema";
import { newId } from "../domain/ids";
import { isoTime } from "../lib/clock";
import { charge, type ChargeResult } from "../payments/charge";
import { cardOf } from "../payments/serialize";
import type { CardDetails, Processor } from "../processor/types";
import type { CardSummary } from "../domain/cards";
import { type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { nextRetryAt, periodStartMs } from "../domain/billing-calendar";
import { type PlanRow, periodAmount } from "./pricing";

export type SubscriptionRow = typeof subscriptions.$inferSelect;
export type UserRow = typeof users.$inferSelect;
export type PeriodRow = typeof subscriptionPeriods.$inferSelect;

/** A subscription with what charging its open period needs. */
export interface BillableRow {
  sub: SubscriptionRow;
  plan: PlanRow;
  user: UserRow;
  /** The row of the period being collected (index = periods_billed), once claimed. */
  period: PeriodRow | null;
}

export type PeriodOutcome = "renewed" | "past_due" | "canceled" | "skipped";

/** A claim older than this belongs to a worker that died before settling; it may be taken over. */
export const CLAIM_STALE_MS = 10 * 60 * 1000;
export const RENEWING = ["active", "past_due"] as const;

/** The processor reference of one attempt at one period: fixed, so a retried call is the same charge. */
export const periodReference = (subscriptionId: string, periodIndex: number, attempt: number) =>
  `${subscriptionId}:period:${periodIndex}:attempt:${attempt}`;

/** Batch guard reason: this attempt's charge is already recorded (another worker settled it). */
export const PERIOD_ALREADY_SETTLED = "period_already_settled";

/** The subscriptions, with what charging a period needs, in one query. */
export function selectBillableRows(db: Db) {
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

export const isDue = (sub: SubscriptionRow, at: number) =>
  (sub.status === "active" || sub.status === "past_due") && sub.dueAt !== null && sub.dueAt <= at;

/** SQL: the subscription is still in the state that was read (and, for a renewal, due at `dueBy`). */
export const stillAsRead = (sub: SubscriptionRow, dueBy?: number) => sql`EXISTS (SELECT 1 FROM subscriptions AS as_read
  WHERE as_read.id = ${sub.id} AND as_read.status = ${sub.status} AND as_read.periods_billed = ${sub.periodsBilled}
    AND as_read.dunning_attempts = ${sub.dunningAttempts} AND as_read.cancel_at_period_end = ${sub.cancelAtPeriodEnd ? 1 : 0}
    ${dueBy === undefined ? sql`` : sql`AND as_read.due_at <= ${dueBy}`})`;

/**
 * SQL: a charge claimed for the subscription's open period has not settled, so it may be at the
 * processor now, or may have moved money whose outcome is not known yet (a claim older than
 * CLAIM_STALE_MS is taken over by the renewal run, which charges the same reference and records
 * it). A cancel must not pass under it, however old it is.
 */
export const chargeInFlight = (subscriptionId: string, _realNow?: number) => sql`EXISTS (SELECT 1 FROM subscription_periods AS p
  JOIN subscriptions AS s ON s.id = p.subscription_id
  WHERE p.subscription_id = ${subscriptionId} AND p.period_index = s.periods_billed AND p.status = 'open'
    AND p.attempts > s.dunning_attempts)`;

/** The period being collected has a claimed attempt that never settled. */
export const hasUnsettledClaim = (row: Pick<BillableRow, "sub" | "period">) =>
  row.period !== null && row.period.status === "open" && row.period.attempts > row.sub.dunningAttempts;

export interface PeriodClaim {
  attempts: number;
  amount: number;
  currency: string;
}

export const claimOf = (result: unknown): PeriodClaim | null => (result as { results?: PeriodClaim[] }).results?.[0] ?? null;

/**
 * The claim of the next attempt at the open period, as one statement returning the claim (or
 * nothing when lost). `renewal` claims a due subscription (and may take over a stale claim);
 * `card_update` claims the next attempt of a past_due one, due or not.
 */
export function claimPeriod(
  db: Db,
  row: Pick<BillableRow, "sub" | "plan">,
  kind: "renewal" | "card_update" | "takeover",
  at: number,
  realNow: number,
): Statement {
  const { sub, plan } = row;
  const n = sub.periodsBilled;
  const nowIso = isoTime(realNow);
  const staleIso = isoTime(realNow - CLAIM_STALE_MS);
  if (kind === "takeover") {
    // Only a stale, unsettled claim of this period: charged again with the same reference.
    return rawStatement(
      db,
      sql`UPDATE subscription_periods SET updated_at = ${nowIso}
        WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open'
          AND attempts > ${sub.dunningAttempts} AND updated_at < ${staleIso} AND ${stillAsRead(sub, at)}
        RETURNING attempts, amount, currency`,
    );
  }
  const asRead = stillAsRead(sub, kind === "renewal" ? at : undefined);
  if (sub.status === "active") {
    const start = isoTime(periodStartMs(sub.billingAnchor, plan.interval, n));
    return rawStatement(
      db,
      sql`INSERT INTO subscription_periods (id, account_id, livemode, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at)
        SELECT ${newId("period", realNow)}, ${sub.accountId}, ${sub.livemode ? 1 : 0}, ${sub.id}, ${n}, ${start}, ${periodAmount(plan, sub.quantity)}, ${plan.currency}, 'open', 1, ${nowIso}, ${nowIso}
        WHERE ${asRead} AND NOT ${sql.raw(sub.cancelAtPeriodEnd ? "1" : "0")}
        ON CONFLICT (subscription_id, period_index) DO UPDATE SET updated_at = excluded.updated_at
          WHERE subscription_periods.status = 'open' AND subscription_periods.attempts = 1 AND subscription_periods.updated_at < ${staleIso}
        RETURNING attempts, amount, currency`,
    );
  }
  const k = sub.dunningAttempts;
  const takeover = kind === "renewal" ? sql`OR (attempts = ${k + 1} AND updated_at < ${staleIso})` : sql``;
  return rawStatement(
    db,
    sql`UPDATE subscription_periods SET attempts = ${k + 1}, updated_at = ${nowIso}
      WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open'
        AND (attempts = ${k} ${takeover}) AND ${asRead}
      RETURNING attempts, amount, currency`,
  );
}

/** The conditional match of a settlement: the subscription as the claim saw it. */
const asClaimed = (sub: SubscriptionRow) =>
  and(
    eq(subscriptions.id, sub.id),
    eq(subscriptions.periodsBilled, sub.periodsBilled),
    eq(subscriptions.dunningAttempts, sub.dunningAttempts),
    inArray(subscriptions.status, [...RENEWING]),
  );

export interface PeriodSettlement {
  outcome: PeriodOutcome;
  charge: ChargeResult;
  /** The columns the settlement writes on the subscription (when it renewed, the advance). */
  subscriptionChanges: Partial<SubscriptionRow>;
  writes: { statements: Statement[]; events: EmittedEvent[] };
}

export interface PeriodCharge {
  processor: Processor;
  row: Pick<BillableRow, "sub" | "plan" | "user">;
  claim: PeriodClaim;
  /** The vaulted card (renewals), or new card details (a past-due card update). */
  source: { token: string } | { card: CardDetails; summary: CardSummary; fingerprint: string };
  /** Billing time (a test clock's, or the wall clock) and the wall clock. */
  at: number;
  realNow: number;
  /**
   * A decline during a renewal dunns (past_due with the next retry, or canceled when the retries
   * are used up); a decline of new card details counts the attempt and keeps the retry scheduled.
   */
  onDecline: "dun" | "count_attempt";
  /** Further column changes made with the settlement (a card update's plan, quantity or card). */
  changes?: Partial<SubscriptionRow>;
}

/** Charges a claimed period and builds, without committing, the batch that settles it. */
export async function chargePeriod(db: Db, args: PeriodCharge): Promise<PeriodSettlement> {
  const { sub, plan, user } = args.row;
  const { claim, at, realNow } = args;
  const n = sub.periodsBilled;
  const reference = periodReference(sub.id, n, claim.attempts);
  const newCard = "card" in args.source ? args.source : null;
  const result = await charge({
    db,
    processor: args.processor,
    accountId: sub.accountId,
    livemode: sub.livemode,
    customer: { id: user.id, email: user.email },
    subscriptionId: sub.id,
    amount: claim.amount,
    currency: claim.currency,
    source: newCard ? { card: newCard.card } : { token: sub.processorToken },
    summary: newCard ? newCard.summary : cardOf(sub),
    fingerprint: newCard ? newCard.fingerprint : sub.cardFingerprint,
    at: realNow,
    processorReference: reference,
  });
  const period = and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.periodIndex, n));
  const statements: Statement[] = [
    // A claim taken over after a crash charges with the same reference: record that charge once.
    guard(db, PERIOD_ALREADY_SETTLED, sql`NOT EXISTS (SELECT 1 FROM payments WHERE charge_reference = ${reference})`),
    ...result.statements,
  ];
  const events: EmittedEvent[] = [...result.events];
  const notify = (type: "subscription_renewal" | "subscription_canceled" | "subscription_updated", status: string) =>
    events.push(emitEvent(db, sub, { type, subscriptionId: sub.id, status }, realNow));
  const updatedAt = isoTime(realNow);
  let outcome: PeriodOutcome;
  let subscriptionChanges: Partial<SubscriptionRow> = {};

  if (result.succeeded) {
    const next = periodStartMs(sub.billingAnchor, plan.interval, n + 1);
    subscriptionChanges = {
      ...args.changes,
      ...(newCard && result.token ? { processorToken: result.token } : {}),
      status: "active",
      periodsBilled: n + 1,
      currentPeriodStart: isoTime(periodStartMs(sub.billingAnchor, plan.interval, n)),
      nextBillingDate: isoTime(next),
      dueAt: next,
      dunningAttempts: 0,
      updatedAt,
    };
    statements.push(
      db.update(subscriptionPeriods).set({ status: "paid", paymentId: result.payment.id, updatedAt }).where(period),
      db.update(subscriptions).set(subscriptionChanges).where(asClaimed(sub)),
    );
    notify("subscription_renewal", "success");
    if (args.onDecline === "count_attempt") notify("subscription_updated", "active");
    outcome = "renewed";
  } else if (args.onDecline === "count_attempt") {
    // The new card was declined: the attempt counts, the scheduled retry stands, nothing else changes.
    statements.push(
      db.update(subscriptionPeriods).set({ updatedAt }).where(period),
      db.update(subscriptions).set({ dunningAttempts: claim.attempts, updatedAt }).where(asClaimed(sub)),
    );
    outcome = "past_due";
  } else {
    const failedAttempts = claim.attempts;
    const retryAt = nextRetryAt(failedAttempts, at);
    notify("subscription_renewal", "failed");
    if (retryAt !== null) {
      statements.push(
        db.update(subscriptionPeriods).set({ updatedAt }).where(period),
        db.update(subscriptions).set({ status: "past_due", dunningAttempts: failedAttempts, dueAt: retryAt, updatedAt }).where(asClaimed(sub)),
      );
      outcome = "past_due";
    } else {
      statements.push(
        db.update(subscriptionPeriods).set({ status: "uncollectible", updatedAt }).where(period),
        db
          .update(subscriptions)
          .set({ status: "canceled", canceledAt: isoTime(at), dueAt: null, dunningAttempts: failedAttempts, updatedAt })
          .where(asClaimed(sub)),
      );
      notify("subscription_canceled", "canceled");
      outcome = "canceled";
    }
  }
  // The payment is recorded whatever happened to the subscription meanwhile: money moved.
  return { outcome, charge: result, subscriptionChanges, writes: { statements, events } };
}

/**
 * The batch that ends a subscription whose period is over and that was set to cancel at period
 * end. It aborts (RENEWAL_STALE) when the subscription changed since it was read, or while a
 * charge for the open period may be at the processor, so a period is never charged after the
 * subscription went canceled.
 */
export const CANCEL_AT_PERIOD_END_STALE = "cancel_at_period_end_stale";

export function cancelAtPeriodEndWrites(db: Db, sub: SubscriptionRow, at: number, realNow: number): { statements: Statement[]; events: EmittedEvent[] } {
  const updatedAt = isoTime(realNow);
  const ready: SQL = sql`${stillAsRead(sub, at)} AND ${sql.raw(sub.cancelAtPeriodEnd ? "1" : "0")} AND NOT ${chargeInFlight(sub.id, realNow)}`;
  return {
    statements: [
      guard(db, CANCEL_AT_PERIOD_END_STALE, ready),
      db
        .update(subscriptions)
        // An active subscription ends exactly at its period end; a past_due one when its retry was due.
        .set({ status: "canceled", canceledAt: sub.status === "active" ? sub.nextBillingDate : isoTime(at), dueAt: null, updatedAt })
        .where(eq(subscriptions.id, sub.id)),
      db
        .update(subscriptionPeriods)
        .set({ status: "uncollectible", updatedAt })
        .where(and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.status, "open"))),
    ],
    events: [emitEvent(db, sub, { type: "subscription_canceled", subscriptionId: sub.id, status: "canceled" }, realNow)],
  };
}
