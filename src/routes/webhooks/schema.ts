import { z } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import { deliveryAttempts, events, webhookDeliveries, webhookEndpoints } from "../../db/schema";
import { ALL_EVENTS, EVENT_TYPES, isEventType } from "../../webhooks/catalog";
import { livemodeJsonSql } from "../../db/scope";
import { isoTime } from "../../lib/clock";
import { bodyObject, closedSet, closedSetFilter, livemodeField, quoted, timestamp, wholeNumber } from "../shared";
import { RATE_LIMIT_MAX, RATE_LIMIT_MIN } from "../../domain/webhook-throttle";

const eventType = z
  .string({ error: 'Each item of events must be an event type, such as "payment.completed".' })
  .refine((t) => t === ALL_EVENTS || isEventType(t), {
    error: (issue) => `events must list event types from GET /api/event-types, or "${ALL_EVENTS}" for all; ${quoted(issue.input)} is not one.`,
  });

const eventList = z
  .array(eventType, { error: `events must be a list of 1 to ${EVENT_TYPES.length + 1} event types, or ["${ALL_EVENTS}"] for all.` })
  .min(1)
  .max(EVENT_TYPES.length + 1)
  .openapi({ description: `Event types to receive, or "${ALL_EVENTS}" for all.`, example: ["customer.created", "payment.completed"] });

const ordering = closedSet("ordering", ["none", "per_object"]).openapi({
  description:
    "none (the default, fastest): deliveries go out as they come. per_object: a delivery about an object is not sent while an earlier delivery about the same object is pending for this endpoint (it shows waiting_for); a failing delivery holds back only that object's later ones, and once it ends failed after its 24-hour window the next goes out.",
  example: "per_object",
});

const rateLimit = wholeNumber("rate_limit", RATE_LIMIT_MIN, RATE_LIMIT_MAX)
  .nullable()
  .openapi({
    description: `Deliveries per second to this endpoint, ${RATE_LIMIT_MIN} to ${RATE_LIMIT_MAX}, or null for no limit. No 10-second window holds more than 10 x rate_limit deliveries; the excess waits for budget, which is not a failed attempt. A 429, 502, 503 or 504 from the receiver slows the endpoint further for a minute, and its Retry-After pauses the endpoint.`,
    example: 50,
  });

const URL_MAX = 2048;
const url = z
  .string({ error: `url must be an HTTPS URL of at most ${URL_MAX} characters, such as "https://example.com/webhooks".` })
  .min(1)
  .max(URL_MAX);

export const ENDPOINT_STATUSES = ["active", "disabled"] as const;
export const DISABLED_REASONS = ["failing", "gone", "manual"] as const;
export const DELIVERY_STATUSES = ["pending", "delivered", "failed"] as const;

export const CreateWebhookBody = bodyObject({
  url: url.openapi({ example: "https://example.com/webhooks/tender" }),
  events: eventList,
  ordering: ordering.default("none"),
  rate_limit: rateLimit.default(null),
}).openapi("CreateWebhookRequest");

export const UpdateWebhookBody = bodyObject({
  url: url.optional(),
  events: eventList.optional(),
  status: closedSet("status", ENDPOINT_STATUSES).optional(),
  ordering: ordering.optional(),
  rate_limit: rateLimit.optional(),
})
  .refine((b) => b.url !== undefined || b.events !== undefined || b.status !== undefined || b.ordering !== undefined || b.rate_limit !== undefined, {
    error: "Send at least one of url, events, status, ordering or rate_limit.",
  })
  .openapi("UpdateWebhookRequest");

export const DeliveryListQuery = {
  status: closedSetFilter("status", DELIVERY_STATUSES, "Only deliveries in this status."),
};

export const WebhookSchema = z
  .object({
    id: z.string().openapi({ example: "whk_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("webhook_endpoint"),
    livemode: livemodeField,
    url: z.string(),
    events: z.array(z.string()),
    status: z.enum(ENDPOINT_STATUSES).openapi({
      description: "active, or disabled: it gets no events, and its pending deliveries ended failed when it was disabled (see disabled_reason).",
    }),
    disabled_reason: z.enum(DISABLED_REASONS).nullable().openapi({
      description:
        "Why the endpoint is disabled (null while active): failing (every attempt failed for 5 days), gone (it answered 410), manual (disabled through the API or the dashboard). PATCH status active enables it again and clears it.",
      example: "failing",
    }),
    disabled_at: z.string().nullable().openapi({ description: "When it was disabled (null while active).", example: "2026-11-21T12:00:00.000Z" }),
    ordering,
    rate_limit: rateLimit,
    created_at: timestamp("When the endpoint was registered."),
    updated_at: timestamp("When the endpoint last changed."),
  })
  .openapi("WebhookEndpoint");

export const WebhookWithSecretSchema = WebhookSchema.extend({
  secret: z.string().openapi({ description: "The signing secret, whsec_…: shown on creation and rotation only.", example: "whsec_…" }),
}).openapi("WebhookEndpointWithSecret");

export const DeletedWebhookSchema = z
  .object({ id: z.string(), object: z.literal("webhook_endpoint"), livemode: livemodeField, deleted: z.literal(true) })
  .openapi("DeletedWebhookEndpoint");

export const AttemptSchema = z
  .object({
    attempt_number: z.number().int(),
    attempted_at: z.string(),
    status_code: z.number().int().nullable(),
    duration_ms: z.number().int(),
    response_excerpt: z.string().nullable().openapi({ description: "The first 1 KB of the receiver's answer." }),
    error: z.string().nullable(),
  })
  .openapi("DeliveryAttempt");

export const DeliverySchema = z
  .object({
    id: z.string(),
    object: z.literal("webhook_delivery"),
    livemode: livemodeField,
    event_id: z.string(),
    endpoint_id: z.string(),
    status: z.enum(DELIVERY_STATUSES),
    attempt_count: z.number().int(),
    next_attempt_at: z.string().nullable(),
    last_status_code: z.number().int().nullable(),
    waiting_for: z.string().nullable().openapi({ description: "On a per_object endpoint: the earlier delivery about the same object that this one waits for." }),
    created_at: z.string(),
    delivered_at: z.string().nullable(),
    attempts: z.array(AttemptSchema),
  })
  .openapi("WebhookDelivery");

export function serializeWebhook(row: typeof webhookEndpoints.$inferSelect) {
  return {
    id: row.id,
    object: "webhook_endpoint" as const,
    livemode: row.livemode,
    url: row.url,
    events: row.events,
    status: row.status,
    disabled_reason: row.disabledReason,
    disabled_at: row.disabledAt,
    ordering: row.ordering,
    rate_limit: row.rateLimit,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** serializeWebhook inside SQL, for stored answers built within a batch (the row as committed). */
export const webhookJsonSql = (id: string) => sql`(SELECT json_object(
  'id', ${webhookEndpoints.id}, 'object', 'webhook_endpoint', 'livemode', ${livemodeJsonSql(webhookEndpoints.livemode)}, 'url', ${webhookEndpoints.url}, 'events', json(${webhookEndpoints.events}),
  'status', ${webhookEndpoints.status}, 'disabled_reason', ${webhookEndpoints.disabledReason}, 'disabled_at', ${webhookEndpoints.disabledAt}, 'ordering', ${webhookEndpoints.ordering}, 'rate_limit', ${webhookEndpoints.rateLimit},
  'created_at', ${webhookEndpoints.createdAt}, 'updated_at', ${webhookEndpoints.updatedAt}
) FROM ${webhookEndpoints} WHERE ${webhookEndpoints.id} = ${id})`;

/** The data of webhook_delivery.exhausted: the delivery as the API shows it, with its event's type. */
export const ExhaustedDeliverySchema = DeliverySchema.extend({
  event_type: z.string().openapi({ description: "The type of the event that was not delivered.", example: "payment.completed" }),
}).openapi("ExhaustedWebhookDelivery");

/** serializeDelivery inside SQL, with the event's type: the delivery as its batch committed it. */
export const exhaustedDeliveryJsonSql = (id: string) => sql`(SELECT json_object(
  'id', d.id, 'object', 'webhook_delivery', 'livemode', ${livemodeJsonSql(sql.raw("d.livemode"))}, 'event_id', d.event_id, 'endpoint_id', d.endpoint_id,
  'status', d.status, 'attempt_count', d.attempt_count,
  'next_attempt_at', CASE WHEN d.next_attempt_at IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', d.next_attempt_at / 1000.0, 'unixepoch') END,
  'last_status_code', d.last_status_code, 'waiting_for', d.waiting_for, 'created_at', d.created_at, 'delivered_at', d.delivered_at,
  'attempts', (SELECT json_group_array(json(item)) FROM (SELECT json_object('attempt_number', a.attempt_number, 'attempted_at', a.attempted_at, 'status_code', a.status_code,
      'duration_ms', a.duration_ms, 'response_excerpt', a.response_excerpt, 'error', a.error) AS item
    FROM ${deliveryAttempts} AS a WHERE a.delivery_id = d.id ORDER BY a.attempt_number)),
  'event_type', ev.type
) FROM ${webhookDeliveries} AS d JOIN ${events} AS ev ON ev.id = d.event_id WHERE d.id = ${id})`;

export function serializeDelivery(row: typeof webhookDeliveries.$inferSelect, attempts: (typeof deliveryAttempts.$inferSelect)[]) {
  return {
    id: row.id,
    object: "webhook_delivery" as const,
    livemode: row.livemode,
    event_id: row.eventId,
    endpoint_id: row.endpointId,
    status: row.status,
    attempt_count: row.attemptCount,
    next_attempt_at: row.nextAttemptAt === null ? null : isoTime(row.nextAttemptAt),
    last_status_code: row.lastStatusCode,
    waiting_for: row.waitingFor,
    created_at: row.createdAt,
    delivered_at: row.deliveredAt,
    attempts: attempts
      .sort((a, b) => a.attemptNumber - b.attemptNumber)
      .map((a) => ({
        attempt_number: a.attemptNumber,
        attempted_at: a.attemptedAt,
        status_code: a.statusCode,
        duration_ms: a.durationMs,
        response_excerpt: a.responseExcerpt,
        error: a.error,
      })),
  };
}
