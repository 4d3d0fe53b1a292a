// Usage events at volume (DESIGN.md "Books that close"): POST /usage-events takes up to 100
// metered usage events a call, each accepted or rejected on its own, and deduplicated by the
// caller's id for 35 days across calls. An accepted event is a usage record (`increment`) like one
// POST /subscriptions/{id}/usage writes, carrying its `event_id`, so a period's close counts both
// paths the same way, once (src/billing/usage.ts).
//
// D1 has one writer per database, so a call writes with ONE statement, not one per event: the
// Worker checks each event against the subscriptions it reads, then a single INSERT … SELECT over
// the events (bound as one JSON parameter, read with json_each) inserts those whose subscription
// is still active and as read, whose period is still open and has room (the usage bound of the
// usage route), ON CONFLICT DO NOTHING on (account, mode, event_id). The answer is read in the
// same batch, after the insert, so a concurrent call carrying the same id makes it a duplicate
// here, and an Idempotency-Key replay sends that same answer (it is stored by the same SQL).
//
// The cron forgets ids older than 35 days, a page a run (forgetUsageEventIds): their event_id is
// set to null, the usage stays. A busy account can send ids faster than that, so a call first
// forgets its own ids' records older than 35 days, in its batch (forgetExpiredIds): an id counts
// once for 35 days, and again after, whatever the cron's pace. A duplicate (an id recorded
// already, or earlier in the call) takes none of its period's room.
import { type SQL, and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { rawStatement, runBatch, type Statement } from "../db/batch";
import { createDb } from "../db/client";
import { plans, subscriptions, testClocks, users } from "../db/schema";
import { largestBillableUsage, usagePeriodAt } from "../domain/usage";
import { newId } from "../domain/ids";
import { isoTime } from "../lib/clock";
import { exactPriceOf, type PlanRow } from "./pricing";
import { afterCancelAtEnd, isMetered } from "./usage";
import type { Bindings } from "../env";

/** Events one call takes at the most. */
export const MAX_USAGE_EVENTS = 100;
/** How long an event id is remembered: a repeat within it counts once. */
export const USAGE_EVENT_ID_DAYS = 35;
/** How far in the future (by the subscription's clock) an event's timestamp may be. */
export const USAGE_EVENT_FUTURE_MS = 5 * 60_000;
/** The largest quantity of one event (as the usage route's). */
export const MAX_EVENT_QUANTITY = 1_000_000_000;
/** Ids one run forgets on a shard at the most. */
export const FORGET_PAGE = 500;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface UsageEventInput {
  id: string;
  subscription_id: string;
  quantity?: unknown;
  timestamp?: unknown;
}

export interface Rejection {
  index: number;
  code: string;
  message: string;
  param?: string;
}

export interface UsageEventsAnswer {
  livemode: boolean;
  accepted: number;
  duplicates: number;
  rejected: Rejection[];
}

interface Tenant {
  accountId: string;
  livemode: boolean;
}

/** A subscription as the events of a call are checked against it. */
interface SubscriptionRead {
  id: string;
  status: string;
  planId: string;
  billingAnchor: string;
  periodsBilled: number;
  plan: PlanRow;
  clockTime: string | null;
}

/**
 * One event as the statement reads it: i (its index), e (its id); pending ones carry their row id
 * (r), subscription (s), period (p), timestamp (t), quantity (q), the period's usage bound (m), the
 * second its bound is counted at (k, for max and last_during_period plans), and the plan and anchor
 * the period was computed from (pl, a); rejected ones carry their code (c), message (msg), param.
 */
interface EventParam {
  i: number;
  e: string;
  r?: string;
  s?: string;
  p?: number;
  t?: string;
  q?: number;
  m?: number;
  k?: string | null;
  pl?: string;
  a?: string;
  c?: string;
  msg?: string;
  param?: string;
}

async function readSubscriptions(db: Db, tenant: Tenant, ids: string[]): Promise<Map<string, SubscriptionRead>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ sub: subscriptions, plan: plans, clockTime: testClocks.frozenTime })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
    // The ids as one JSON parameter: D1 binds at most 100 values a statement.
    .where(and(eq(subscriptions.accountId, tenant.accountId), eq(subscriptions.livemode, tenant.livemode), sql`${subscriptions.id} IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`));
  return new Map(
    rows.map(({ sub, plan, clockTime }) => [
      sub.id,
      { id: sub.id, status: sub.status, planId: sub.planId, billingAnchor: sub.billingAnchor, periodsBilled: sub.periodsBilled, plan, clockTime },
    ]),
  );
}

const reject = (i: number, e: string, c: string, msg: string, param?: string): EventParam => ({ i, e, c, msg, ...(param ? { param } : {}) });

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/** Each event checked in the Worker: what the statement inserts, and what it rejects at once. */
function checkEvents(events: UsageEventInput[], subs: Map<string, SubscriptionRead>, realNow: number): EventParam[] {
  const bounds = new Map<string, number>();
  const boundOf = (plan: PlanRow) => {
    let bound = bounds.get(plan.id);
    if (bound === undefined) bounds.set(plan.id, (bound = largestBillableUsage(plan.pricingModel, exactPriceOf(plan))));
    return bound;
  };
  return events.map((event, i): EventParam => {
    const e = event.id;
    const { quantity } = event;
    if (quantity === undefined) return reject(i, e, "parameter_missing", "quantity is required.", "quantity");
    if (typeof quantity !== "number" || !Number.isInteger(quantity) || quantity < 0 || quantity > MAX_EVENT_QUANTITY) {
      return reject(i, e, "parameter_invalid", `quantity must be a whole number from 0 to ${MAX_EVENT_QUANTITY}.`, "quantity");
    }
    const sub = subs.get(event.subscription_id);
    // Another account's or mode's subscription reads as missing, as an unknown one.
    if (!sub) return reject(i, e, "resource_missing", `No such subscription: ${event.subscription_id.slice(0, 255)}`, "subscription_id");
    if (!isMetered(sub.plan)) {
      return reject(i, e, "subscription_not_metered", `Subscription ${sub.id} is on plan ${sub.planId}, which is licensed: usage is reported only for a metered plan.`, "subscription_id");
    }
    if (sub.status === "canceled") return reject(i, e, "subscription_canceled", `Subscription ${sub.id} is canceled; it takes no usage.`, "subscription_id");
    const now = sub.clockTime ? Date.parse(sub.clockTime) : realNow;
    let at = now;
    if (event.timestamp !== undefined) {
      const text = event.timestamp;
      at = typeof text === "string" && TIMESTAMP.test(text) ? Date.parse(text) : Number.NaN;
      if (Number.isNaN(at)) return reject(i, e, "parameter_invalid", "timestamp must be a date and time in ISO 8601 with its offset, such as 2027-01-31T12:00:00Z.", "timestamp");
      if (at > now + USAGE_EVENT_FUTURE_MS) {
        return reject(i, e, "timestamp_in_future", `timestamp must not be more than 5 minutes after now (${isoTime(now)}${sub.clockTime ? ", the subscription's test clock" : ""}).`, "timestamp");
      }
    }
    if (at < Date.parse(sub.billingAnchor)) return reject(i, e, "parameter_invalid", `timestamp must not be before the subscription's first period (${sub.billingAnchor}).`, "timestamp");
    const period = usagePeriodAt(sub.billingAnchor, sub.plan.interval, at);
    if (period.index < sub.periodsBilled) return reject(i, e, "usage_period_closed", `The billing period that began ${isoTime(period.start)} has been invoiced; it takes no more usage.`, "timestamp");
    const bound = boundOf(sub.plan);
    if (quantity > bound) return reject(i, e, "usage_too_large", tooLarge(bound), "quantity");
    const t = isoTime(at);
    return {
      i,
      e,
      r: newId("usageRecord", realNow),
      s: sub.id,
      p: period.index,
      t,
      q: quantity,
      m: bound,
      k: (sub.plan.aggregateUsage ?? "sum") === "sum" ? null : t.slice(0, 19),
      pl: sub.planId,
      a: sub.billingAnchor,
    };
  });
}

const tooLarge = (bound: number | string) =>
  `The quantities reported for this event's billing period (for a max or last_during_period plan, at its second) would add up to more than ${bound}, beyond which the plan could price the period above the largest chargeable amount.`;

/** The events of a call, as rows: `ev` (every event) for the statements below. */
const eventsTable = (param: string) => sql`SELECT CAST(j.key AS INTEGER) AS idx,
    json_extract(j.value, '$.e') AS event_id, json_extract(j.value, '$.r') AS row_id, json_extract(j.value, '$.s') AS sub_id,
    json_extract(j.value, '$.p') AS period_index, json_extract(j.value, '$.t') AS ts, json_extract(j.value, '$.q') AS quantity,
    json_extract(j.value, '$.m') AS max_usage, json_extract(j.value, '$.k') AS sec, json_extract(j.value, '$.pl') AS plan_id,
    json_extract(j.value, '$.a') AS anchor, json_extract(j.value, '$.c') AS code, json_extract(j.value, '$.msg') AS msg,
    json_extract(j.value, '$.param') AS param
  FROM json_each(${param}) AS j`;

/**
 * SQL: why pending event `ev` cannot go in now, against subscription `s` (null when it can), but
 * for the period's room: the subscription is canceled or changed since it was read, or the
 * period was invoiced (claimed), or comes after the end of a subscription set to cancel at its
 * period's end (afterCancelAtEnd, as the usage route checks it).
 */
const blockedReason = sql`CASE
    WHEN s.id IS NULL OR s.status = 'canceled' THEN 'subscription_canceled'
    WHEN s.plan_id != ev.plan_id OR s.billing_anchor != ev.anchor THEN 'subscription_changed'
    WHEN ev.period_index < s.periods_billed
      OR EXISTS (SELECT 1 FROM subscription_periods AS sp WHERE sp.subscription_id = ev.sub_id AND sp.period_index = ev.period_index)
      OR ${afterCancelAtEnd("s", sql`ev.period_index`)}
      THEN 'usage_period_closed'
    END`;

const ownSubscription = (tenant: Tenant) => sql`s.id = ev.sub_id AND s.account_id = ${tenant.accountId} AND s.livemode = ${tenant.livemode ? 1 : 0}`;

/**
 * The one write of a call: the pending events whose subscription, period and room still hold,
 * inserted in their order; a repeated id (earlier in the call, in an earlier call, or in a call
 * committed meanwhile) is skipped by the unique index.
 */
function insertEvents(db: Db, tenant: Tenant, param: string, createdAt: string): Statement {
  return rawStatement(
    db,
    // `used` is MATERIALIZED: SQLite would otherwise sum the period once per event joined to it.
    // An event whose id is recorded already, or came earlier in the call, is a duplicate: it is
    // left out before the period's room is counted, so a retried call's events take none of it.
    sql`WITH called AS (${eventsTable(param)} WHERE json_extract(j.value, '$.c') IS NULL),
  ev AS (SELECT * FROM (SELECT called.*, ROW_NUMBER() OVER (PARTITION BY called.event_id ORDER BY called.idx) AS nth FROM called) AS numbered
    WHERE numbered.nth = 1 AND NOT EXISTS (SELECT 1 FROM usage_records AS d
      WHERE d.account_id = ${tenant.accountId} AND d.livemode = ${tenant.livemode ? 1 : 0} AND d.event_id = numbered.event_id)),
  used AS MATERIALIZED (
    SELECT k.sub_id, k.period_index, k.sec, (SELECT COALESCE(SUM(u.quantity), 0) FROM usage_records AS u
      WHERE u.subscription_id = k.sub_id AND u.period_index = k.period_index AND (k.sec IS NULL OR substr(u.timestamp, 1, 19) = k.sec)) AS used
    FROM (SELECT DISTINCT sub_id, period_index, sec FROM ev) AS k),
  checked AS (
    SELECT ev.*, ${blockedReason} AS blocked,
      used.used + SUM(ev.quantity) OVER (PARTITION BY ev.sub_id, ev.period_index, ev.sec ORDER BY ev.idx) AS running
    FROM ev JOIN used ON used.sub_id = ev.sub_id AND used.period_index = ev.period_index AND used.sec IS ev.sec
    LEFT JOIN subscriptions AS s ON ${ownSubscription(tenant)})
INSERT INTO usage_records (id, account_id, livemode, subscription_id, period_index, quantity, action, timestamp, created_at, event_id)
  SELECT row_id, ${tenant.accountId}, ${tenant.livemode ? 1 : 0}, sub_id, period_index, quantity, 'increment', ts, ${createdAt}, event_id
  FROM checked WHERE blocked IS NULL AND running <= max_usage ORDER BY idx
ON CONFLICT DO NOTHING`,
  );
}

/**
 * The ids of the call recorded more than 35 days ago are forgotten (as the cron forgets them, a
 * page a run, which a busy account can outpace) before its insert, in its batch: such an event is
 * new, never a duplicate. Found through the unique index, one statement a call.
 */
function forgetExpiredIds(db: Db, tenant: Tenant, param: string, cutoff: string): Statement {
  return rawStatement(
    db,
    sql`UPDATE usage_records SET event_id = NULL
      WHERE account_id = ${tenant.accountId} AND livemode = ${tenant.livemode ? 1 : 0} AND created_at < ${cutoff}
        AND event_id IN (SELECT json_extract(j.value, '$.e') FROM json_each(${param}) AS j WHERE json_extract(j.value, '$.c') IS NULL)`,
  );
}

/**
 * SQL: the call's answer as JSON text, read after its insert in the same batch: an event whose row
 * is in is accepted; else one whose id is in (from this call, an earlier one or a concurrent one)
 * is a duplicate; else it is rejected, with the Worker's reason, or the reason it was not inserted.
 */
function answerOf(tenant: Tenant, param: string, cutoff: string): SQL {
  return sql`WITH ev AS (${eventsTable(param)}),
  decided AS (
    SELECT ev.idx, ev.sub_id, ev.code, ev.msg, ev.param,
      CASE
        WHEN ev.row_id IS NOT NULL AND EXISTS (SELECT 1 FROM usage_records AS a WHERE a.id = ev.row_id) THEN 'accepted'
        WHEN EXISTS (SELECT 1 FROM usage_records AS d WHERE d.account_id = ${tenant.accountId} AND d.livemode = ${tenant.livemode ? 1 : 0} AND d.event_id = ev.event_id AND d.created_at >= ${cutoff}) THEN 'duplicate'
        ELSE 'rejected' END AS outcome
    FROM ev),
  raced AS (
    SELECT decided.idx, decided.sub_id, decided.code, decided.msg, decided.param,
      CASE WHEN decided.code IS NULL THEN COALESCE(${blockedReason}, 'usage_too_large') END AS reason
    FROM decided JOIN ev ON ev.idx = decided.idx LEFT JOIN subscriptions AS s ON ${ownSubscription(tenant)}
    WHERE decided.outcome = 'rejected'),
  rejected AS (
    SELECT idx, COALESCE(code, reason) AS code,
      COALESCE(msg, CASE reason
        WHEN 'subscription_canceled' THEN 'Subscription ' || sub_id || ' was canceled; it takes no usage.'
        WHEN 'subscription_changed' THEN 'Subscription ' || sub_id || ' changed while this event was checked; send it again.'
        WHEN 'usage_period_closed' THEN 'The billing period this event falls in has been invoiced, or comes after the subscription ends; it takes no more usage.'
        ELSE ${tooLarge("the plan's bound")} END) AS msg,
      CASE WHEN code IS NOT NULL THEN param WHEN reason = 'usage_too_large' THEN 'quantity' WHEN reason = 'usage_period_closed' THEN 'timestamp' ELSE 'subscription_id' END AS param
    FROM raced)
  SELECT json_object(
      'livemode', json(${tenant.livemode ? "true" : "false"}),
      'accepted', (SELECT COUNT(*) FROM decided WHERE outcome = 'accepted'),
      'duplicates', (SELECT COUNT(*) FROM decided WHERE outcome = 'duplicate'),
      'rejected', json(COALESCE((SELECT json_group_array(json(item)) FROM (
        SELECT CASE WHEN param IS NULL THEN json_object('index', idx, 'code', code, 'message', msg)
          ELSE json_object('index', idx, 'code', code, 'message', msg, 'param', param) END AS item
        FROM rejected ORDER BY idx)), '[]'))) AS answer`;
}

export interface UsageEventsWrite {
  statements: Statement[];
  /** The read of the answer, run after the insert in the same batch: one row, `answer` (JSON text). */
  answer: Statement;
  /** The same answer as an SQL expression, for the idempotency record. */
  storedAnswer: SQL;
}

/** Reads the call's subscriptions and checks each event; the batch that writes them and reads the answer. */
export async function prepareUsageEvents(db: Db, tenant: Tenant, events: UsageEventInput[], realNow: number): Promise<UsageEventsWrite> {
  const subs = await readSubscriptions(db, tenant, [...new Set(events.map((e) => e.subscription_id))]);
  const param = JSON.stringify(checkEvents(events, subs, realNow));
  // An id recorded before this is remembered no more (USAGE_EVENT_ID_DAYS).
  const cutoff = isoTime(realNow - USAGE_EVENT_ID_DAYS * DAY_MS);
  const answer = answerOf(tenant, param, cutoff);
  return {
    statements: param.includes('"r":') ? [forgetExpiredIds(db, tenant, param, cutoff), insertEvents(db, tenant, param, isoTime(realNow))] : [],
    answer: rawStatement(db, answer),
    storedAnswer: sql`(${answer})`,
  };
}

/** The answer statement's result (D1's `{ results }` of one row, `answer`), parsed. */
export function parseAnswer(result: unknown): UsageEventsAnswer {
  const rows = Array.isArray(result) ? result : (result as { results: unknown[] }).results;
  return JSON.parse((rows[0] as { answer: string }).answer) as UsageEventsAnswer;
}

/**
 * Forgets one page of event ids older than 35 days on this shard (the usage stays); idempotent,
 * and safe beside another run. An account whose move is under way is left alone until it ends
 * (the move proves its rows unchanged).
 */
export async function forgetUsageEventIds(env: Bindings, now: number, pageSize = FORGET_PAGE): Promise<number> {
  const db = createDb(env.DB);
  const cutoff = isoTime(now - USAGE_EVENT_ID_DAYS * DAY_MS);
  const [result] = (await runBatch(db, [
    rawStatement(
      db,
      sql`UPDATE usage_records SET event_id = NULL WHERE id IN (
        SELECT u.id FROM usage_records AS u JOIN accounts AS a ON a.id = u.account_id
        WHERE u.event_id IS NOT NULL AND u.created_at < ${cutoff}
          AND a.moved_to IS NULL AND (a.move_token IS NULL OR a.move_until <= ${now})
        ORDER BY u.created_at LIMIT ${pageSize})`,
    ),
  ])) as D1Result[];
  return result.meta.changes;
}
