// The outbox sweeper, run by the cron every minute. A delivery row is committed with its event;
// if the enqueue after the commit was lost, or a consumer died mid-attempt, or a scheduler alarm
// never fired, the delivery sits in `pending`. The sweeper puts such deliveries back on the
// queue. The consumer's attempt claim makes a duplicate harmless.
import { and, eq, inArray, isNotNull, isNull, lt, or } from "drizzle-orm";
import { createDb } from "../db/client";
import { webhookDeliveries } from "../db/schema";
import type { Bindings } from "../env";
import { clock } from "../lib/clock";
import { enqueueDeliveries } from "./outbox";
import { livesHere } from "../db/scope";

/** A delivery untouched this long, with no attempt scheduled, was lost on its way to the queue. */
export const STUCK_AFTER_MS = 60_000;
/** A scheduled attempt this far overdue means its alarm did not fire. */
export const OVERDUE_AFTER_MS = 5 * 60_000;
const MAX_PER_RUN = 1000;

export async function sweepDeliveries(env: Bindings): Promise<number> {
  const db = createDb(env.DB);
  const now = clock.now();
  const stuck = await db
    .select({ id: webhookDeliveries.id })
    .from(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.status, "pending"),
        or(
          and(isNull(webhookDeliveries.nextAttemptAt), lt(webhookDeliveries.updatedAt, now - STUCK_AFTER_MS)),
          and(isNotNull(webhookDeliveries.nextAttemptAt), lt(webhookDeliveries.nextAttemptAt, now - OVERDUE_AFTER_MS)),
        ),
        livesHere(webhookDeliveries.accountId),
      ),
    )
    .orderBy(webhookDeliveries.updatedAt)
    .limit(MAX_PER_RUN);
  const ids = stuck.map((r) => r.id);
  if (ids.length === 0) return 0;
  await enqueueDeliveries(env.DELIVERY_QUEUE, ids);
  // Touch them so the next run does not send them again while this batch is in the queue.
  for (let i = 0; i < ids.length; i += 90) {
    const chunk = ids.slice(i, i + 90);
    await db.update(webhookDeliveries).set({ updatedAt: now }).where(and(eq(webhookDeliveries.status, "pending"), inArray(webhookDeliveries.id, chunk)));
  }
  return ids.length;
}

