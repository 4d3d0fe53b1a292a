// Endpoint health: when an endpoint is disabled, and what its disabling and an exhausted delivery
// tell the account's other endpoints. Every rule here is statements for the batch that records
// the attempt (src/webhooks/consumer.ts) or the PATCH (src/routes/webhooks/update.ts):
// - each endpoint keeps `failing_since`, the first failed attempt since its last 2xx; a 2xx, or
//   enabling it, clears it;
// - a failed attempt at least FAILING_DISABLE_AFTER_MS after `failing_since` disables it
//   (`failing`), a 410 at once (`gone`), a person (`manual`); each by an UPDATE … WHERE status =
//   'active', so a repeated or racing attempt disables it once and emits one event;
// - disabling ends its pending deliveries `failed` (last_error endpoint_disabled), unattempted
//   and not counted as failures; enabling it sends none of them again (a redelivery or a
//   recovery does);
// - `webhook_endpoint.disabled` and `webhook_delivery.exhausted` are written by the batch whose
//   guarded write made them true, read back in that batch: a redelivered queue message, or a
//   racing attempt, finds the event already there and writes nothing.
import { type SQL, and, eq, isNotNull, isNull, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { rawStatement, type Statement } from "../db/batch";
import type { Tenant } from "../db/scope";
import { webhookDeliveries, webhookEndpoints } from "../db/schema";
import { isoTime } from "../lib/clock";
import { exhaustedDeliveryJsonSql, webhookJsonSql } from "../routes/webhooks/schema";
import { isWebhookHealthEvent } from "./catalog";
import { type EmittedEvent, emitEventWhen } from "./outbox";

/** An endpoint whose every attempt failed for this long is disabled at its next failed attempt. */
export const FAILING_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

export type DisabledReason = "failing" | "gone" | "manual";

/** A 2xx: the endpoint is healthy again. */
export const recordSuccess = (db: Db, endpointId: string): Statement =>
  db.update(webhookEndpoints).set({ failingSince: null }).where(and(eq(webhookEndpoints.id, endpointId), isNotNull(webhookEndpoints.failingSince)));

/** A failed attempt: the endpoint is failing since now, unless it was already. */
export const recordFailure = (db: Db, endpointId: string, now: number): Statement =>
  db.update(webhookEndpoints).set({ failingSince: now }).where(and(eq(webhookEndpoints.id, endpointId), isNull(webhookEndpoints.failingSince)));

/** Whether the endpoint as read has failed long enough that this failed attempt may disable it. */
export const failingLongEnough = (failingSince: number | null, now: number) => failingSince !== null && now - failingSince >= FAILING_DISABLE_AFTER_MS;

/**
 * The statements that disable an active endpoint for `reason` (for `failing`, only if it is still
 * failing since 5 days or more as the batch runs), end its pending deliveries, and emit
 * `webhook_endpoint.disabled` if this batch disabled it. The first statement RETURNs the endpoint
 * if it did. A disabled or deleted endpoint is left as it is.
 */
export function disableEndpoint(db: Db, endpoint: { id: string } & Tenant, reason: Exclude<DisabledReason, "manual">, now: number): { statements: Statement[]; event: EmittedEvent } {
  const at = isoTime(now);
  const disable = db
    .update(webhookEndpoints)
    .set({ status: "disabled", disabledReason: reason, disabledAt: at, updatedAt: at })
    .where(
      and(
        eq(webhookEndpoints.id, endpoint.id),
        eq(webhookEndpoints.status, "active"),
        isNull(webhookEndpoints.deletedAt),
        reason === "failing" ? sql`${webhookEndpoints.failingSince} <= ${now - FAILING_DISABLE_AFTER_MS}` : undefined,
      ),
    )
    .returning({ id: webhookEndpoints.id });
  return { statements: [disable, stopPendingDeliveries(db, endpoint.id, now)], event: endpointDisabledEvent(db, endpoint, now) };
}

/**
 * The endpoint's pending deliveries end failed, unattempted, once it is disabled (whoever disabled
 * it): none is sent, none counts as a failure, and enabling it again sends none of them.
 */
export function stopPendingDeliveries(db: Db, endpointId: string, now: number): Statement {
  return db
    .update(webhookDeliveries)
    .set({ status: "failed", lastError: "endpoint_disabled", nextAttemptAt: null, waitingFor: null, updatedAt: now })
    .where(
      and(
        eq(webhookDeliveries.endpointId, endpointId),
        eq(webhookDeliveries.status, "pending"),
        sql`EXISTS (SELECT 1 FROM ${webhookEndpoints} WHERE ${webhookEndpoints.id} = ${endpointId} AND ${webhookEndpoints.status} = 'disabled')`,
      ),
    );
}

/**
 * `webhook_endpoint.disabled`, written if the endpoint was disabled at `now` (by this batch) and
 * no such event was written for that disabling yet; its data is the endpoint as committed.
 */
export function endpointDisabledEvent(db: Db, endpoint: { id: string } & Tenant, now: number): EmittedEvent {
  const at = isoTime(now);
  const when = sql`EXISTS (SELECT 1 FROM webhook_endpoints AS w WHERE w.id = ${endpoint.id} AND w.status = 'disabled' AND w.disabled_at = ${at})
    AND NOT EXISTS (SELECT 1 FROM events AS x WHERE x.object_id = ${endpoint.id} AND x.type = 'webhook_endpoint.disabled' AND x.created_at >= ${at})`;
  return emitEventWhen(db, endpoint, { type: "webhook_endpoint.disabled", dataSql: webhookJsonSql(endpoint.id), objectId: endpoint.id, except: endpoint.id }, now, when);
}

/**
 * `webhook_delivery.exhausted` for a delivery whose window (its first attempt at `firstAttemptAt`)
 * ended at `now` without a 2xx: written if the delivery is failed at the end of that window (the
 * batch's guarded write ended it; `ended` says how) and no such event was written for this window
 * yet. About the delivery's endpoint, never sent to it. A health event's own delivery emits none,
 * so two failing endpoints cannot feed each other.
 */
export function deliveryExhaustedEvent(
  db: Db,
  delivery: { id: string; endpointId: string; attemptCount: number; eventType: string } & Tenant,
  firstAttemptAt: number,
  now: number,
  ended: SQL,
): EmittedEvent | null {
  if (isWebhookHealthEvent(delivery.eventType)) return null;
  const when = sql`EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.id = ${delivery.id} AND d.status = 'failed'
      AND d.attempt_count = ${delivery.attemptCount} AND d.first_attempt_at = ${firstAttemptAt} AND d.updated_at = ${now} AND ${ended})
    AND NOT EXISTS (SELECT 1 FROM events AS x WHERE x.object_id = ${delivery.endpointId} AND x.type = 'webhook_delivery.exhausted'
      AND x.created_at >= ${isoTime(firstAttemptAt)} AND json_extract(x.payload, '$.data.id') = ${delivery.id})`;
  return emitEventWhen(
    db,
    delivery,
    { type: "webhook_delivery.exhausted", dataSql: exhaustedDeliveryJsonSql(delivery.id), objectId: delivery.endpointId, except: delivery.endpointId },
    now,
    when,
  );
}

/** SQL for `ended`: the attempt that ended the window recorded it (its error, if any, is kept). */
export const endedByAttempt = sql`(d.last_error IS NULL OR d.last_error <> 'endpoint_disabled')`;
/** SQL for `ended`: a message that came after the window recorded its end. */
export const endedLate = sql`d.last_error = 'retry_window_ended'`;
