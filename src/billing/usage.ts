// Metered usage (DESIGN.md "Billing depth"): a metered subscription is billed in arrears. Its
// usage records fall in the billing period that holds their timestamp; when a period ends, the
// renewal run claims it like any period (src/billing/periods.ts), priced by the period's usage
// aggregated by the plan (sum, max, last_during_period) and priced through its unit price or tiers,
// rounded once (src/domain/usage.ts).
//
// A record and the claim that invoices its period cannot miss each other: a record's insert is
// refused once its period is claimed (400 usage_period_closed), and the claim checks that the
// period's records are still the ones it priced (their count), else it is lost and the next run
// prices it again.
import { type SQL, and, eq, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { subscriptions, usageRecords } from "../db/schema";
import { periodStartMs } from "../domain/billing-calendar";
import { type AggregateUsage, type UsageRecord, meteredLine } from "../domain/usage";
import { exactPriceOf, type PlanRow } from "./pricing";

export type UsageRecordRow = typeof usageRecords.$inferSelect;

/** A period's records as a claim prices them. */
export interface PeriodUsage {
  records: UsageRecord[];
}

export const isMetered = (plan: Pick<PlanRow, "usageType">) => plan.usageType === "metered";

/** The records of each subscription's period `periodsBilled` (the one a claim invoices), by subscription id. */
export async function usageOfOpenPeriods(db: Db, subs: { id: string; periodsBilled: number }[]): Promise<Map<string, PeriodUsage>> {
  const out = new Map<string, PeriodUsage>(subs.map((s) => [s.id, { records: [] }]));
  if (subs.length === 0) return out;
  const wanted = new Map(subs.map((s) => [s.id, s.periodsBilled]));
  // Only the open period's records (as the subscription stands now; checked against the one read
  // below), found through the (subscription_id, period_index) index.
  const rows = await db
    .select({ subscriptionId: usageRecords.subscriptionId, periodIndex: usageRecords.periodIndex, quantity: usageRecords.quantity, action: usageRecords.action, timestamp: usageRecords.timestamp })
    .from(subscriptions)
    .innerJoin(usageRecords, and(eq(usageRecords.subscriptionId, subscriptions.id), eq(usageRecords.periodIndex, subscriptions.periodsBilled)))
    .where(inArray(subscriptions.id, [...wanted.keys()]))
    .orderBy(usageRecords.id);
  for (const row of rows) {
    if (wanted.get(row.subscriptionId) !== row.periodIndex) continue;
    out.get(row.subscriptionId)!.records.push({ quantity: row.quantity, action: row.action, timestamp: row.timestamp });
  }
  return out;
}

/** A metered period's usage and its price: the aggregated quantity, and the line's amount (rounded once). */
export function meteredPeriod(plan: PlanRow, billingAnchor: string, n: number, usage: PeriodUsage): { quantity: number; amount: number } {
  const period = { start: periodStartMs(billingAnchor, plan.interval, n), end: periodStartMs(billingAnchor, plan.interval, n + 1) };
  const { quantity, amount } = meteredLine({
    records: usage.records,
    aggregate: (plan.aggregateUsage ?? "sum") as AggregateUsage,
    period,
    pricingModel: plan.pricingModel,
    price: exactPriceOf(plan),
  });
  return { quantity, amount };
}

/** SQL: the period still has exactly the records a claim priced (none arrived since). */
export const usageUnchanged = (subscriptionId: string, n: number, usage: PeriodUsage): SQL =>
  sql`(SELECT COUNT(*) FROM ${usageRecords} WHERE ${and(eq(usageRecords.subscriptionId, subscriptionId), eq(usageRecords.periodIndex, n))}) = ${usage.records.length}`;

/**
 * SQL: period `index` comes after the end of subscription row `s` (an alias in the statement), set
 * to cancel at its period's end, so its usage would never be billed: an active one's last period
 * is the open one; a past_due one's, the period after the one dunned (open, taking usage), unless
 * the one dunned is its final invoice; a trialing one has none (its trial's end cancels it).
 */
export const afterCancelAtEnd = (s: string, index: SQL): SQL => {
  const row = sql.raw(s);
  return sql`(${row}.cancel_at_period_end = 1 AND ${index} > ${row}.periods_billed + CASE
    WHEN ${row}.status = 'trialing' THEN -1
    WHEN ${row}.status = 'past_due' AND NOT EXISTS (SELECT 1 FROM subscription_periods AS cp WHERE cp.subscription_id = ${row}.id AND cp.period_index = ${row}.periods_billed AND cp.final = 1) THEN 1
    ELSE 0 END)`;
};
