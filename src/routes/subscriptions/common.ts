// What the subscription operations share: the resource's tag and id parameter, the load of a
// subscription with its plan, user, clock and open period, and the answers they have in common.
import type { Context } from "hono";
import { type SQL, and, eq, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { isoTime } from "../../lib/clock";
import type { Statement } from "../../db/batch";
import { alias } from "drizzle-orm/sqlite-core";
import { plans, subscriptionPeriods, subscriptions, testClocks, users } from "../../db/schema";
import { owned } from "../../db/scope";
import type { AppEnv } from "../../context";
import { cardDeclined, conflict } from "../../lib/errors";
import { found } from "../reads";
import { openPeriodColumns } from "../../billing/periods";
import { type CommitOptions, commit } from "../write-path";
import type { ChargeResult } from "../../payments/charge";
import type { EmittedEvent } from "../../webhooks/outbox";
import { idParam } from "../openapi";

export const tags = ["Subscriptions"];
export const subscriptionId = idParam("subscription", "sub_01jd2x4k5m6n7p8q9r0s1t2v3w");

export type SubscriptionRow = typeof subscriptions.$inferSelect;

export const alreadyCanceled = (id: string) => conflict("subscription_canceled", `Subscription ${id} is canceled; it cannot be changed or canceled again.`);
/** An incomplete subscription (its first payment waits for 3-D Secure) or an expired one: only a DELETE of an incomplete one is taken. */
export const notActivated = (id: string, status: string) =>
  conflict(
    status === "incomplete" ? "subscription_incomplete" : "subscription_incomplete_expired",
    status === "incomplete"
      ? `Subscription ${id} is incomplete: its first payment waits for the payer's authentication. It cannot be changed until it is active; it can be canceled.`
      : `Subscription ${id} is incomplete_expired: its first payment never succeeded, and it cannot be changed or canceled.`,
  );
/** Batch guard reasons the subscription routes share. */
export const SUBSCRIPTION_CANCELED = "subscription_canceled";
export const CHARGE_IN_FLIGHT = "charge_in_flight";
export const SUBSCRIPTION_CHANGED = "subscription_changed";

/**
 * SQL: the subscription is still active and as a prorated change read it (plan, quantity, period,
 * pending items), and `also` holds of it (`s`): the proration was computed from that.
 */
export const proratedAsRead = (sub: SubscriptionRow, also: SQL = sql``) =>
  sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status = 'active' AND s.plan_id = ${sub.planId}
    AND s.quantity = ${sub.quantity} AND s.periods_billed = ${sub.periodsBilled} AND s.pending_items = ${sub.pendingItems} ${also})`;

export const changedMeanwhile = () =>
  conflict("subscription_changed", "The subscription changed while this request ran (a renewal or another update); read it and retry.");

export const chargeInProgress = () =>
  conflict(
    "charge_in_progress",
    "A charge for this subscription's current period is in progress (one whose outcome is unknown is settled within 10 minutes). Retry in a few seconds.",
  );

/** A subscription of the caller's account with its plan, user, the user's test clock and the period being collected. */
/**
 * The current period's row (periods_billed - 1): what it was charged, for a prorated change. (D1
 * answers at most 100 columns: the periods' rows bring only the fields used.)
 */
const paidPeriods = alias(subscriptionPeriods, "paid_period");

export async function loadSubscription(c: Context<AppEnv>, id: string) {
  const { db, auth } = c.var;
  const [row] = await db
    .select({
      sub: subscriptions,
      plan: plans,
      user: users,
      clock: testClocks,
      period: openPeriodColumns,
      paid: {
        amount: paidPeriods.amount,
        status: paidPeriods.status,
        discount: paidPeriods.discount,
        itemsAmount: paidPeriods.itemsAmount,
        creditCarried: paidPeriods.creditCarried,
        tax: paidPeriods.tax,
        percentOff: paidPeriods.percentOff,
      },
    })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
    .leftJoin(
      subscriptionPeriods,
      and(eq(subscriptionPeriods.subscriptionId, subscriptions.id), eq(subscriptionPeriods.periodIndex, subscriptions.periodsBilled)),
    )
    .leftJoin(paidPeriods, and(eq(paidPeriods.subscriptionId, subscriptions.id), eq(paidPeriods.periodIndex, sql`${subscriptions.periodsBilled} - 1`)))

    .where(owned(subscriptions, auth, eq(subscriptions.id, id)))
    .limit(1);
  return found(c, row, "subscription", id);
}

/** Billing time: the user's test clock when attached, else the wall clock. */
export const billingNow = (clock: { frozenTime: string } | null, realNow: number) => (clock ? Date.parse(clock.frozenTime) : realNow);

/** billingNow as ISO text, read in SQL for the user in `userId` when the statement runs. */
export const billingNowSql = (userId: SQLiteColumn | string, realNow: number) =>
  sql`COALESCE((SELECT tc.frozen_time FROM ${testClocks} AS tc JOIN ${users} AS u ON u.test_clock_id = tc.id WHERE u.id = ${userId}), ${isoTime(realNow)})`;

export const cardColumns = (card: { summary: { brand: string; last4: string; exp_month: number; exp_year: number }; fingerprint: string }) => ({
  cardBrand: card.summary.brand,
  cardLast4: card.summary.last4,
  cardExpMonth: card.summary.exp_month,
  cardExpYear: card.summary.exp_year,
  cardFingerprint: card.fingerprint,
});

/**
 * Commits a declined charge (its failed payment and payment.failed, whatever became of the
 * caller's key meanwhile: the processor was called) with the 402 as the stored answer, then
 * throws the 402.
 */
export async function answerDecline(
  c: Context<AppEnv>,
  result: ChargeResult,
  writes: { statements: Statement[]; events: EmittedEvent[] },
  options: CommitOptions = {},
): Promise<never> {
  const error = cardDeclined(result.declineCode ?? "card_declined", result.declineMessage ?? "The card was declined.");
  await commit(c, writes, 402, error.body(c.var.requestId), { moneyMoved: { paymentId: result.payment.id }, ...options });
  throw error;
}
