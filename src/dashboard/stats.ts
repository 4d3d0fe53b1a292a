// The overview's aggregates, which the API has no route for: counts, payment volume by day and
// webhook attempt success by day over the last 30 days, and each endpoint's success rate. Read
// only, in one D1 batch, each query scoped to the session's account and mode and its live key
// through owned() (src/db/scope.ts), and each asked only when the key holds the scope that reads
// it. The figures are those of the acting key's mode, the one the dashboard's switch shows.
import { type SQL, and, count, eq, gte, inArray, isNull, sql } from "drizzle-orm";
import { hasScope, type Scope } from "../auth/scopes";
import type { Auth } from "../context";
import type { Db } from "../db/client";
import { deliveryAttempts, events, payments, payouts, subscriptions, users, webhookDeliveries, webhookEndpoints } from "../db/schema";
import { owned } from "../db/scope";
import { isoDate, isoTime } from "../lib/clock";

export const CHART_DAYS = 30;

export interface DailyVolume {
  day: string;
  currency: string;
  amount: number;
  payments: number;
}

export interface DailySuccess {
  day: string;
  succeeded: number;
  attempts: number;
}

export interface OverviewStats {
  counts: { label: string; value: number; sub?: string; scope: Scope }[];
  volume?: DailyVolume[];
  success?: DailySuccess[];
  /** The 30 days shown, oldest first, as YYYY-MM-DD. */
  days: string[];
}

export function lastDays(now: number, n = CHART_DAYS): string[] {
  const today = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate());
  return Array.from({ length: n }, (_, i) => isoDate(today - (n - 1 - i) * 86_400_000));
}

const dayOf = (column: SQL | unknown) => sql<string>`substr(${column}, 1, 10)`;
const succeeded = sql<number>`coalesce(sum(case when ${deliveryAttempts.statusCode} between 200 and 299 then 1 else 0 end), 0)`;

export async function overviewStats(db: Db, auth: Auth, now: number): Promise<OverviewStats> {
  const days = lastDays(now);
  const since = `${days[0]}T00:00:00.000Z`;
  const may = (scope: Scope) => hasScope(auth.scopes, scope);
  type Count = { label: string; scope: Scope; query: any; sub?: (row: any) => string | undefined };
  const countQueries: Count[] = [];
  if (may("users:read")) countQueries.push({ label: "Users", scope: "users:read", query: db.select({ n: count() }).from(users).where(owned(users, auth)) });
  if (may("payments:read")) {
    countQueries.push({
      label: "Payments, 30 days",
      scope: "payments:read",
      query: db
        .select({ n: count(), failed: sql<number>`coalesce(sum(case when ${payments.status} = 'failed' then 1 else 0 end), 0)` })
        .from(payments)
        .where(owned(payments, auth, gte(payments.createdAt, since))),
      sub: (row) => `${row.failed} failed`,
    });
  }
  if (may("payouts:read")) {
    countQueries.push({
      label: "Payouts pending",
      scope: "payouts:read",
      query: db.select({ n: count() }).from(payouts).where(owned(payouts, auth, eq(payouts.status, "pending"))),
    });
  }
  if (may("subscriptions:read")) {
    countQueries.push({
      label: "Active subscriptions",
      scope: "subscriptions:read",
      query: db
        .select({ n: sql<number>`coalesce(sum(case when ${subscriptions.status} = 'active' then 1 else 0 end), 0)`, pastDue: sql<number>`coalesce(sum(case when ${subscriptions.status} = 'past_due' then 1 else 0 end), 0)` })
        .from(subscriptions)
        .where(owned(subscriptions, auth, inArray(subscriptions.status, ["active", "past_due"]))),
      sub: (row) => `${row.pastDue} past due`,
    });
  }
  if (may("webhooks:read")) {
    countQueries.push({
      label: "Webhook endpoints",
      scope: "webhooks:read",
      query: db.select({ n: count() }).from(webhookEndpoints).where(owned(webhookEndpoints, auth, isNull(webhookEndpoints.deletedAt))),
    });
    countQueries.push({
      label: "Failed deliveries",
      scope: "webhooks:read",
      query: db.select({ n: count() }).from(webhookDeliveries).where(owned(webhookDeliveries, auth, eq(webhookDeliveries.status, "failed"))),
      sub: () => "ended after 24 hours of retries",
    });
  }
  if (may("events:read")) {
    countQueries.push({ label: "Events, 30 days", scope: "events:read", query: db.select({ n: count() }).from(events).where(owned(events, auth, gte(events.createdAt, since))) });
  }
  const queries: any[] = countQueries.map((q) => q.query);
  const volumeAt = may("payments:read") ? queries.push(
    db
      // What was captured: an authorization not (yet) captured, or canceled, moved no money.
      .select({ day: dayOf(payments.createdAt), currency: payments.currency, amount: sql<number>`sum(${payments.amountReceived})`, payments: count() })
      .from(payments)
      .where(owned(payments, auth, gte(payments.createdAt, since), sql`${payments.status} IN ('completed', 'partially_refunded', 'refunded')`))
      .groupBy(dayOf(payments.createdAt), payments.currency),
  ) - 1 : -1;
  const successAt = may("webhooks:read") ? queries.push(
    db
      .select({ day: dayOf(deliveryAttempts.attemptedAt), succeeded, attempts: count() })
      .from(deliveryAttempts)
      .where(owned(deliveryAttempts, auth, gte(deliveryAttempts.attemptedAt, since)))
      .groupBy(dayOf(deliveryAttempts.attemptedAt)),
  ) - 1 : -1;
  const results: any[] = queries.length ? await db.batch(queries as [any, ...any[]]) : [];
  return {
    counts: countQueries.map((q, i) => ({ label: q.label, scope: q.scope, value: Number(results[i][0]?.n ?? 0), sub: q.sub?.(results[i][0] ?? {}) })),
    volume: volumeAt >= 0 ? (results[volumeAt] as DailyVolume[]).map((r) => ({ ...r, amount: Number(r.amount), payments: Number(r.payments) })) : undefined,
    success: successAt >= 0 ? (results[successAt] as DailySuccess[]).map((r) => ({ ...r, succeeded: Number(r.succeeded), attempts: Number(r.attempts) })) : undefined,
    days,
  };
}

/** Each endpoint's share of 2xx attempts over the last 30 days, for the endpoints listed. */
export async function endpointSuccessRates(db: Db, auth: Auth, endpointIds: string[], now: number): Promise<Map<string, { succeeded: number; attempts: number }>> {
  const rates = new Map<string, { succeeded: number; attempts: number }>();
  if (endpointIds.length === 0) return rates;
  const since = isoTime(now - CHART_DAYS * 86_400_000);
  const rows = await db
    .select({ endpointId: webhookDeliveries.endpointId, succeeded, attempts: count() })
    .from(deliveryAttempts)
    .innerJoin(webhookDeliveries, eq(webhookDeliveries.id, deliveryAttempts.deliveryId))
    .where(and(owned(deliveryAttempts, auth, gte(deliveryAttempts.attemptedAt, since)), inArray(webhookDeliveries.endpointId, endpointIds)))
    .groupBy(webhookDeliveries.endpointId);
  for (const row of rows) rates.set(row.endpointId, { succeeded: Number(row.succeeded), attempts: Number(row.attempts) });
  return rates;
}
