// POST /subscriptions/{id}/usage and GET /subscriptions/{id}/usage: a metered subscription's usage
// (src/billing/usage.ts). A record goes into the billing period that holds its timestamp; a period
// already invoiced (claimed by the run that invoices it) refuses it with 400 usage_period_closed,
// checked in the batch that writes it.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { and, asc, eq, sql } from "drizzle-orm";
import { guard } from "../../db/batch";
import { invoices, subscriptionPeriods, usageRecords } from "../../db/schema";
import { periodStartMs } from "../../domain/billing-calendar";
import { newId } from "../../domain/ids";
import { MAX_AMOUNT } from "../../domain/money";
import { aggregateUsage, type AggregateUsage, largestBillableUsage, usagePeriodAt } from "../../domain/usage";
import { exactPriceOf } from "../../billing/pricing";
import { afterCancelAtEnd, isMetered, type UsageRecordRow } from "../../billing/usage";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import { withLiveKeyAll } from "../reads";
import { commitAndRespond } from "../write-path";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { bodyObject, closedSet, instantField, livemodeField, timestamp, wholeNumber } from "../shared";
import { alreadyCanceled, billingNow, loadSubscription, subscriptionId, tags, SUBSCRIPTION_CANCELED } from "./common";

export const UsageBody = bodyObject({
  quantity: wholeNumber("quantity", 0, 1_000_000_000).openapi({ description: "The usage: units added (increment) or the usage at this timestamp (set).", example: 1000 }),
  timestamp: z
    .string({ error: "timestamp must be a date and time in ISO 8601 with its offset, such as 2027-01-31T12:00:00Z." })
    .max(40)
    .optional()
    .openapi({ description: "When the usage happened (ISO 8601; default now, on the user's test clock if it has one). Not in the future; its billing period must not be invoiced yet." }),
  action: closedSet("action", ["increment", "set"])
    .default("increment")
    .openapi({ description: "increment adds quantity to the usage at this timestamp (whole seconds); set replaces it." }),
}).openapi("UsageRecordRequest");

const UsageRecordSchema = z
  .object({
    id: z.string().openapi({ example: "mbur_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("usage_record"),
    livemode: livemodeField,
    subscription_id: z.string(),
    quantity: z.number().int(),
    action: z.enum(["increment", "set"]),
    timestamp: timestamp("When the usage happened."),
    period_start: timestamp("The start of the billing period it falls in."),
    period_end: timestamp("The end of that period: its usage is invoiced then."),
    created_at: timestamp("When it was recorded."),
  })
  .openapi("UsageRecord");

const UsagePeriodSchema = z
  .object({
    object: z.literal("usage_period"),
    livemode: livemodeField,
    period_start: timestamp("The period's start."),
    period_end: timestamp("The period's end: its usage is invoiced then."),
    total_usage: z.number().int().openapi({ description: "The period's usage, aggregated as the plan says (sum, max or last_during_period)." }),
    records: z.number().int().openapi({ description: "How many usage records fall in it." }),
    invoiced: z.boolean().openapi({ description: "Whether the period has been invoiced (no more usage is taken for it)." }),
    invoice_id: z.string().nullable(),
  })
  .openapi("UsagePeriod");

const create = apiRoute({
  method: "post",
  path: "/subscriptions/{id}/usage",
  tags,
  operationId: "createUsageRecord",
  summary: "Report usage of a metered subscription",
  description:
    "Records usage in the billing period that holds its timestamp. At the period's end the period's usage, aggregated as the plan says, is priced through the plan's unit price or tiers, invoiced and charged. A period already invoiced answers 400 usage_period_closed, as does a period after the end of a subscription set to cancel at its period's end (never billed); quantities that would add up, within one period, to more than the plan can charge (the largest chargeable amount) answer 400 usage_too_large. Send an Idempotency-Key: a retry then records once.",
  scope: "subscriptions:write",
  request: { params: subscriptionId, ...jsonBodyOf(UsageBody) },
  responses: { 201: json(UsageRecordSchema, "The usage record.") },
  extraErrors: [409],
});

const list = apiRoute({
  method: "get",
  path: "/subscriptions/{id}/usage",
  tags,
  operationId: "listUsage",
  summary: "A metered subscription's usage per period",
  description: "The current period and every period with usage, newest first: each period's total, as it is (or was) invoiced.",
  scope: "subscriptions:read",
  request: { params: subscriptionId },
  responses: { 200: json(z.object({ object: z.literal("list"), data: z.array(UsagePeriodSchema), has_more: z.boolean() }).openapi("UsagePeriodList"), "Usage per period, newest first.") },
});

const USAGE_PERIOD_CLOSED = "usage_period_closed";
const USAGE_AFTER_END = "usage_after_end";
const USAGE_TOO_LARGE = "usage_too_large";

const notMetered = (id: string, planId: string) =>
  invalidRequest("subscription_not_metered", `Subscription ${id} is on plan ${planId}, which is licensed: usage is reported only for a metered plan.`);
const periodClosed = (start: string) =>
  invalidRequest("usage_period_closed", `The billing period that began ${start} has been invoiced; it takes no more usage.`, "timestamp");

const afterEnd = (id: string, start: string) =>
  invalidRequest(
    "usage_period_closed",
    `Subscription ${id} is set to cancel at the end of its current period, so the billing period that began ${start} never comes: it takes no usage.`,
    "timestamp",
  );

/** SQL: the period `index` comes after the end of a subscription set to cancel at its period's end (never billed). */
const beyondCancelAt = (id: string, index: number) => sql`EXISTS (SELECT 1 FROM subscriptions AS ce WHERE ce.id = ${id} AND ${afterCancelAtEnd("ce", sql`${index}`)})`;

const usageTooLarge = (start: string, planId: string, maxUsage: number) =>
  invalidRequest(
    USAGE_TOO_LARGE,
    `The quantities reported for the billing period that began ${start} (for a max or last_during_period plan, at this timestamp's second) would add up to more than ${maxUsage}: beyond that, plan ${planId} could price the period above the largest chargeable amount (${MAX_AMOUNT} minor units).`,
    "quantity",
  );

export function registerUsage(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createUsageRecord(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const realNow = clock.now();
    const { sub, plan, clock: testClock } = await loadSubscription(c, id);
    if (!isMetered(plan)) throw notMetered(id, plan.id);
    if (sub.status === "canceled") throw alreadyCanceled(id);
    const now = billingNow(testClock, realNow);
    let at = now;
    if (body.timestamp !== undefined) {
      const parsed = instantField(body.timestamp, "timestamp");
      if (parsed > now) throw invalidRequest("parameter_invalid", "timestamp must not be in the future.", "timestamp");
      at = parsed;
    }
    if (at < Date.parse(sub.billingAnchor)) throw invalidRequest("parameter_invalid", `timestamp must not be before the subscription's first period (${sub.billingAnchor}).`, "timestamp");
    const period = usagePeriodAt(sub.billingAnchor, plan.interval, at);
    if (period.index < sub.periodsBilled) throw periodClosed(isoTime(period.start));
    // The usage at a second is at most the sum of the quantities recorded at it; a period's `sum`
    // is at most the sum of all its records', and its `max` or `last_during_period` at most the
    // largest sum at one second. Keeping that within maxUsage keeps every period chargeable
    // (checked in the batch, against records written concurrently).
    const maxUsage = largestBillableUsage(plan.pricingModel, exactPriceOf(plan));
    const perSecond = (plan.aggregateUsage ?? "sum") !== "sum";
    if (body.quantity > maxUsage) throw usageTooLarge(isoTime(period.start), plan.id, maxUsage);
    const row: UsageRecordRow = {
      id: newId("usageRecord", realNow),
      accountId: auth.accountId,
      livemode: auth.livemode,
      subscriptionId: id,
      periodIndex: period.index,
      quantity: body.quantity,
      action: body.action,
      timestamp: isoTime(at),
      createdAt: isoTime(realNow),
      eventId: null,
    };
    return commitAndRespond(
      c,
      {
        statements: [
          // The period may have been claimed for its invoice since it was read: then it is closed.
          guard(db, USAGE_PERIOD_CLOSED, sql`NOT EXISTS (SELECT 1 FROM ${subscriptionPeriods} WHERE subscription_id = ${id} AND period_index = ${period.index})`),
          guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions WHERE id = ${id} AND status != 'canceled')`),
          // Nor is a period after the end of a subscription set to cancel at its period's end.
          guard(db, USAGE_AFTER_END, sql`NOT ${beyondCancelAt(id, period.index)}`),
          guard(
            db,
            USAGE_TOO_LARGE,
            sql`(SELECT COALESCE(SUM(quantity), 0) FROM ${usageRecords} WHERE subscription_id = ${id} AND period_index = ${period.index}
              ${perSecond ? sql`AND substr(timestamp, 1, 19) = ${row.timestamp.slice(0, 19)}` : sql``}) + ${body.quantity} <= ${maxUsage}`,
          ),
          db.insert(usageRecords).values(row),
        ],
      },
      201,
      {
        id: row.id,
        object: "usage_record" as const,
        livemode: row.livemode,
        subscription_id: id,
        quantity: row.quantity,
        action: row.action,
        timestamp: row.timestamp,
        period_start: isoTime(period.start),
        period_end: isoTime(period.end),
        created_at: row.createdAt,
      },
      {
        failures: {
          [USAGE_PERIOD_CLOSED]: () => periodClosed(isoTime(period.start)),
          [USAGE_AFTER_END]: () => afterEnd(id, isoTime(period.start)),
          [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id),
          [USAGE_TOO_LARGE]: () => usageTooLarge(isoTime(period.start), plan.id, maxUsage),
        },
      },
    );
  });

  app.openapi(list, async function listUsage(c) {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const { sub, plan, clock: testClock } = await loadSubscription(c, id);
    if (!isMetered(plan)) throw notMetered(id, plan.id);
    const [records, invoiced] = await withLiveKeyAll<[UsageRecordRow[], { periodIndex: number | null; id: string }[]]>(c, [
      db.select().from(usageRecords).where(eq(usageRecords.subscriptionId, id)).orderBy(asc(usageRecords.id)),
      db.select({ periodIndex: invoices.periodIndex, id: invoices.id }).from(invoices).where(and(eq(invoices.subscriptionId, id))),
    ]);
    const current = sub.status === "canceled" ? -1 : usagePeriodAt(sub.billingAnchor, plan.interval, Math.max(billingNow(testClock, clock.now()), Date.parse(sub.billingAnchor))).index;
    const indexes = new Set(records.map((r) => r.periodIndex));
    if (current >= 0) indexes.add(current);
    const invoiceOf = new Map(invoiced.map((i) => [i.periodIndex, i.id]));
    const data = [...indexes]
      .sort((a, b) => b - a)
      .map((n) => {
        const start = periodStartMs(sub.billingAnchor, plan.interval, n);
        const end = periodStartMs(sub.billingAnchor, plan.interval, n + 1);
        const own = records.filter((r) => r.periodIndex === n);
        return {
          object: "usage_period" as const,
          livemode: sub.livemode,
          period_start: isoTime(start),
          period_end: isoTime(end),
          total_usage: aggregateUsage(own, (plan.aggregateUsage ?? "sum") as AggregateUsage, { start, end }),
          records: own.length,
          invoiced: n < sub.periodsBilled,
          invoice_id: invoiceOf.get(n) ?? null,
        };
      });
    return c.json({ object: "list" as const, data, has_more: false }, 200);
  });
}
