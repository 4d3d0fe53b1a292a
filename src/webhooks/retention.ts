// The retention purge, run by the cron every minute on every shard: events older than their
// account's `event_retention_days` (PATCH /api/account, 1 to 365, default 30) are deleted with
// their deliveries and those deliveries' attempts, one page a run, in one batch. Their ids then
// answer 404. What is never purged, whatever its age:
// - an event with a delivery still pending (being retried inside its 24 hours, waiting for an
//   earlier one, or sent again by a redelivery or a recovery), or with an attempt in flight (its
//   lease; the endpoint was disabled meanwhile): nothing in flight is lost, and no attempt is
//   recorded after its delivery was deleted;
// - the newest event of each account and mode: the next event's feed place is the account's
//   MAX + 1 (src/webhooks/outbox.ts), so the feed's positions only grow, and `tender listen`'s
//   cursor (the newest event it saw) stays a valid `ending_before`;
// - the newest event of each object: the next one's `sequence` is the object's MAX + 1, so an
//   object's sequence never starts again at 1 for a receiver that orders by it.
// The feed pages by place, so deleting older events never reorders it nor hides a newer one.
// An account whose move is under way (src/accounts/move.ts) is left alone until it ends.
import { type SQL, sql } from "drizzle-orm";
import { rawStatement, runBatch } from "../db/batch";
import { createDb } from "../db/client";
import type { Bindings } from "../env";

/** Events one run deletes on a shard at the most (with their deliveries and attempts); the rest go in the next runs. */
export const PURGE_PAGE = 200;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * SQL: event `e` of account `a` may go (each condition is read again inside the delete batch). The
 * pending check's `+p.status` keeps it on the event's index, not the index of every pending delivery.
 */
const purgeable = (now: number): SQL => sql`
  a.moved_to IS NULL AND (a.move_token IS NULL OR a.move_until <= ${now})
  AND e.created_at < strftime('%Y-%m-%dT%H:%M:%fZ', (${now} - a.event_retention_days * ${DAY_MS}) / 1000.0, 'unixepoch')
  AND e.feed_position < (SELECT MAX(m.feed_position) FROM events AS m WHERE m.account_id = e.account_id AND m.livemode = e.livemode)
  AND (e.object_id IS NULL OR e.sequence < (SELECT MAX(o.sequence) FROM events AS o WHERE o.object_id = e.object_id))
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries AS p WHERE p.event_id = e.id AND (+p.status = 'pending' OR p.lease_until > ${now}))`;

export interface PurgeResult {
  events: number;
  deliveries: number;
  attempts: number;
}

/** Deletes one page of expired events on this shard; idempotent, and safe beside another run. */
export async function purgeExpiredEvents(env: Bindings, now: number, pageSize = PURGE_PAGE): Promise<PurgeResult> {
  const db = createDb(env.DB);
  // Each account here (CROSS JOIN keeps accounts the outer loop), then its events older than its
  // cutoff by events_account_created: a run reads the rows it deletes, not the whole table.
  const page = (await db.all<{ id: string }>(sql`SELECT e.id FROM accounts AS a CROSS JOIN events AS e ON e.account_id = a.id WHERE ${purgeable(now)} LIMIT ${pageSize}`)).map((r) => r.id);
  if (page.length === 0) return { events: 0, deliveries: 0, attempts: 0 };
  // The page, checked again in the batch (one transaction): an event a redelivery or a recovery
  // made pending since the read above, or that became its object's newest, stays.
  const chosen = sql`SELECT e.id FROM events AS e JOIN accounts AS a ON a.id = e.account_id
    WHERE e.id IN (SELECT value FROM json_each(${JSON.stringify(page)})) AND ${purgeable(now)}`;
  const [attempts, deliveries, events] = (await runBatch(db, [
    rawStatement(db, sql`DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT d.id FROM webhook_deliveries AS d WHERE d.event_id IN (${chosen}))`),
    rawStatement(db, sql`DELETE FROM webhook_deliveries WHERE event_id IN (${chosen})`),
    rawStatement(db, sql`DELETE FROM events WHERE id IN (${chosen})`),
  ])) as D1Result[];
  return { events: events.meta.changes, deliveries: deliveries.meta.changes, attempts: attempts.meta.changes };
}
