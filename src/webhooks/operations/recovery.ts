// Recovery over a time range (POST /api/webhooks/{id}/recover): the job that sends an endpoint every
// event of [since, until) it takes and has no 2xx for, once more, oldest first. It walks the
// account's feed (commit order, which is also each object's sequence order) a page at a time. Each
// page is ONE batch: a guard that the recovery is still running at the cursor this worker read, the
// deliveries of the page's missed events set to pending now (a new one where the endpoint never had
// it; a failed one, or one still being retried, with a fresh 24-hour window, as a redelivery to one
// endpoint does), and the recovery's cursor and counts moved on. So a duplicate message, or two
// workers at once, send nothing twice: the second batch's guard fails and it stops. The deliveries
// then go through the delivery queue like any other: the attempt lease keeps a recovery and the
// endpoint's own retries from recording one event twice, and a per_object endpoint's deliveries
// wait for the earlier ones about the same object as they always do.
import { type SQL, and, eq, lt, sql } from "drizzle-orm";
import { type Db, createDb } from "../../db/client";
import { failureReason, guard, rawStatement, runBatch } from "../../db/batch";
import { livesHere } from "../../db/scope";
import { events, webhookDeliveries, webhookEndpoints, webhookRecoveries } from "../../db/schema";
import type { Bindings } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { ALL_EVENTS, TEST_EVENT_TYPE } from "../catalog";
import { deliveryIdOf, deliveryIdSql, enqueueDeliveries } from "../outbox";

/** The job queue's message that runs (or continues) a recovery. */
export interface RecoveryJobMessage {
  kind: "webhooks.recover";
  recoveryId: string;
}

/** Events one page goes through (one batch, one enqueue). */
export const RECOVERY_PAGE = 100;
/** Pages one message goes through before it hands the rest to a new message. */
export const PAGES_PER_MESSAGE = 10;
/** A running recovery untouched this long lost its message: the cron sends another. */
export const RECOVERY_STALLED_AFTER_MS = 5 * 60_000;

const RECOVERY_MOVED_ON = "recovery_moved_on";
const ENDPOINT_INACTIVE = "recovery_endpoint_inactive";

export const recoveryMessage = (recoveryId: string): RecoveryJobMessage => ({ kind: "webhooks.recover", recoveryId });

/**
 * SQL: event `ev` is one the endpoint `e` takes: of its account and mode, of a type it is
 * subscribed to (a test event only when it was sent to this endpoint), and not about the endpoint
 * itself (its webhook_endpoint.disabled and webhook_delivery.exhausted go to the others only).
 */
const takenBy = (ev: SQL, e: SQL): SQL => sql`${ev}.account_id = ${e}.account_id AND ${ev}.livemode = ${e}.livemode
  AND EXISTS (SELECT 1 FROM json_each(${e}.events) WHERE value IN (${ev}.type, ${ALL_EVENTS}))
  AND (${ev}.object_id IS NULL OR ${ev}.object_id <> ${e}.id)
  AND (${ev}.type <> ${TEST_EVENT_TYPE} OR EXISTS (SELECT 1 FROM ${webhookDeliveries} AS t WHERE t.event_id = ${ev}.id AND t.endpoint_id = ${e}.id))`;

type Recovery = typeof webhookRecoveries.$inferSelect;
type Endpoint = typeof webhookEndpoints.$inferSelect;

/** What one page did: `more` when the recovery is still running after it. */
interface PageResult {
  more: boolean;
}

/** The recovery is over: nothing more to send (or the endpoint went away). Only from the cursor read. */
async function finish(db: Db, recovery: Recovery, now: number): Promise<void> {
  await db
    .update(webhookRecoveries)
    .set({ status: "done", completedAt: isoTime(now), updatedAt: now })
    .where(and(eq(webhookRecoveries.id, recovery.id), eq(webhookRecoveries.status, "running"), eq(webhookRecoveries.cursor, recovery.cursor)));
}

/** The feed positions of a range's first and last event. */
export interface FeedSpan {
  first: number;
  last: number;
}

/**
 * The feed positions the range's events lie between, read once per message through the events'
 * (account, created_at) index: the pages then walk the feed index between them, rather than from
 * the account's first event (a range far in the past) or on to its newest (a short range).
 */
async function spanOf(db: Db, recovery: Recovery): Promise<FeedSpan | null> {
  const [span] = await db.all<{ first: number | null; last: number | null }>(sql`
    SELECT MIN(feed_position) AS first, MAX(feed_position) AS last FROM ${events}
    WHERE account_id = ${recovery.accountId} AND created_at >= ${recovery.since} AND created_at < ${recovery.until} AND livemode = ${recovery.livemode ? 1 : 0}`);
  return span?.first == null || span.last == null ? null : { first: span.first, last: span.last };
}

/** One page of a recovery: the next events after its cursor, their missed deliveries queued. */
export async function recoverPage(env: Bindings, recoveryId: string, pageSize = RECOVERY_PAGE, known?: { span: FeedSpan | null }): Promise<PageResult> {
  const db = createDb(env.DB);
  const [row] = await db
    .select({ recovery: webhookRecoveries, endpoint: webhookEndpoints })
    .from(webhookRecoveries)
    .innerJoin(webhookEndpoints, eq(webhookEndpoints.id, webhookRecoveries.endpointId))
    .where(eq(webhookRecoveries.id, recoveryId))
    .limit(1);
  if (!row || row.recovery.status !== "running") return { more: false };
  const { recovery, endpoint } = row;
  const now = clock.now();
  // A recovery sends to an active endpoint only (the route refuses a disabled one): one disabled or
  // deleted meanwhile ends it with what it sent.
  if (!isActive(endpoint) || endpoint.accountId !== recovery.accountId || endpoint.livemode !== recovery.livemode) {
    await finish(db, recovery, now);
    return { more: false };
  }
  const span = known ? known.span : await spanOf(db, recovery);
  const page = span
    ? await db.all<{ id: string; feed_position: number }>(sql`
    SELECT ev.id, ev.feed_position FROM ${events} AS ev, ${webhookEndpoints} AS e
    WHERE e.id = ${endpoint.id} AND ev.account_id = ${recovery.accountId} AND ev.livemode = ${recovery.livemode ? 1 : 0}
      AND ev.feed_position > ${Math.max(recovery.cursor, span.first - 1)} AND ev.feed_position <= ${span.last}
      AND ev.created_at >= ${recovery.since} AND ev.created_at < ${recovery.until}
      AND ${takenBy(sql`ev`, sql`e`)}
    ORDER BY ev.feed_position LIMIT ${pageSize}`)
    : [];
  if (page.length === 0) {
    await finish(db, recovery, now);
    return { more: false };
  }
  const last = page[page.length - 1].feed_position;
  const ids = JSON.stringify(page.map((p) => p.id));
  const done = page.length < pageSize;
  const missed = sql`NOT EXISTS (SELECT 1 FROM ${webhookDeliveries} AS d WHERE d.event_id = ev.id AND d.endpoint_id = e.id AND d.status = 'delivered')`;
  let results: unknown[];
  try {
    results = await runBatch(db, [
      // The recovery is where this worker read it: a duplicate message, or another worker, that
      // went through this page first moved the cursor on, and this batch changes nothing.
      guard(db, RECOVERY_MOVED_ON, sql`EXISTS (SELECT 1 FROM ${webhookRecoveries} WHERE id = ${recovery.id} AND status = 'running' AND cursor = ${recovery.cursor})`),
      guard(db, ENDPOINT_INACTIVE, sql`EXISTS (SELECT 1 FROM ${webhookEndpoints} WHERE id = ${endpoint.id} AND status = 'active' AND deleted_at IS NULL)`),
      rawStatement(
        db,
        sql`INSERT INTO ${webhookDeliveries} (id, account_id, livemode, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
          SELECT ${deliveryIdSql(sql`ev.id`, sql`e.id`)}, ev.account_id, ev.livemode, ev.id, e.id, 'pending', 0, ${isoTime(now)}, ${now}
          FROM ${events} AS ev JOIN ${webhookEndpoints} AS e ON e.id = ${endpoint.id} AND e.account_id = ev.account_id AND e.livemode = ev.livemode
          WHERE ev.id IN (SELECT value FROM json_each(${ids})) AND ${missed}
          ON CONFLICT (event_id, endpoint_id) DO UPDATE SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, waiting_for = NULL, updated_at = ${now}
            WHERE webhook_deliveries.status <> 'delivered'
          RETURNING id`,
      ),
      // Every delivery of the page's events to the endpoint that is not delivered was just queued.
      db
        .update(webhookRecoveries)
        .set({
          cursor: last,
          total: sql`${webhookRecoveries.total} + ${page.length}`,
          sent: sql`${webhookRecoveries.sent} + (SELECT count(*) FROM ${webhookDeliveries} AS q
            WHERE q.endpoint_id = ${endpoint.id} AND q.event_id IN (SELECT value FROM json_each(${ids})) AND q.status <> 'delivered')`,
          updatedAt: now,
          ...(done ? { status: "done" as const, completedAt: isoTime(now) } : {}),
        })
        .where(eq(webhookRecoveries.id, recovery.id)),
    ]);
  } catch (error) {
    const reason = failureReason(error);
    if (reason === RECOVERY_MOVED_ON) return { more: false };
    // Disabled or deleted since the read: the recovery ends with what it sent.
    if (reason === ENDPOINT_INACTIVE) {
      await finish(db, recovery, now);
      return { more: false };
    }
    throw error;
  }
  const queued = new Set(((results[2] as { results?: { id: string }[] }).results ?? []).map((r) => r.id));
  // Oldest first: the page's order is the feed's.
  const deliveryIds = page.map((p) => deliveryIdOf(p.id, endpoint.id)).filter((id) => queued.has(id));
  if (deliveryIds.length > 0) {
    await enqueueDeliveries(env.DELIVERY_QUEUE, deliveryIds).catch((error) => {
      console.error(JSON.stringify({ message: "recovery enqueue failed; the sweeper will send them", recovery: recovery.id, deliveries: deliveryIds.length, error: String(error) }));
    });
  }
  return { more: !done };
}

const isActive = (endpoint: Endpoint) => endpoint.status === "active" && endpoint.deletedAt === null;

/**
 * The job: pages until the recovery is done, at most PAGES_PER_MESSAGE, then the rest in a new
 * message. A failure to send that message throws, so the queue retries this one, which starts again
 * from the cursor (nothing is sent twice); the cron resumes a recovery whose messages were all lost.
 */
export async function runRecovery(env: Bindings, message: RecoveryJobMessage, pageSize = RECOVERY_PAGE): Promise<void> {
  const db = createDb(env.DB);
  const [recovery] = await db.select().from(webhookRecoveries).where(eq(webhookRecoveries.id, message.recoveryId)).limit(1);
  if (!recovery || recovery.status !== "running") return;
  const known = { span: await spanOf(db, recovery) };
  for (let pages = 0; pages < PAGES_PER_MESSAGE; pages++) {
    const { more } = await recoverPage(env, message.recoveryId, pageSize, known);
    if (!more) return;
  }
  await env.JOB_QUEUE.send(recoveryMessage(message.recoveryId) satisfies RecoveryJobMessage);
}

/** Cron task: running recoveries whose job went quiet (a message lost) are sent on again. */
export async function resumeStalledRecoveries(env: Bindings, now: number): Promise<number> {
  const db = createDb(env.DB);
  const stalled = await db
    .update(webhookRecoveries)
    .set({ updatedAt: now })
    .where(and(eq(webhookRecoveries.status, "running"), lt(webhookRecoveries.updatedAt, now - RECOVERY_STALLED_AFTER_MS), livesHere(webhookRecoveries.accountId)))
    .returning({ id: webhookRecoveries.id });
  for (const { id } of stalled) await env.JOB_QUEUE.send(recoveryMessage(id));
  return stalled.length;
}
