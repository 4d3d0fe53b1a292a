// Events: the event-type catalog, the catch-up feed (GET /api/events), one event, and a
// redelivery of an event to its endpoints (the delivery rows come from src/webhooks/outbox.ts).
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { and, eq, isNull, sql } from "drizzle-orm";
import { guardExists } from "../../db/batch";
import { events, webhookEndpoints } from "../../db/schema";
import { owned } from "../../db/scope";
import { ensureLive } from "../../auth/credentials";
import { clock } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { notFound } from "../../lib/errors";
import { listQuery, listSchema } from "../pagination";
import { readById } from "../reads";
import { feedPageOf } from "./feed";
import { registerWebhookPayloads } from "./payloads";
import { commit } from "../write-path";
import { EVENT_TYPES, TEST_EVENT_TYPE, describeEventTypes } from "../../webhooks/catalog";
import { redeliveriesFor, redeliveryAnswerSql } from "../../webhooks/outbox";
import { deliveredEvent } from "../../webhooks/payload";
import { apiRoute, idParam, json } from "../openapi";
import { bodyObject, closedSetFilter, idField, livemodeField, timestamp } from "../shared";

const tags = ["Events"];

const EventSchema = z
  .object({
    id: z.string().openapi({ example: "evt_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("event"),
    livemode: livemodeField,
    type: z.string(),
    created_at: timestamp("When the event happened."),
    object_id: z.string().nullable().openapi({ description: "The object the event is about: the user, payout, payment, refund or subscription (the endpoint, for webhook_endpoint.* and webhook_delivery.*).", example: "po_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    sequence: z.number().int().nullable().openapi({ description: "The event's place among its object's events: 1 for the first, +1 for each later one, in commit order and without gaps. Deliveries carry it as Tender-Sequence: <object_id>/<sequence>.", example: 2 }),
    data: z.unknown().openapi({ description: "The event's data, as in the webhook envelope: the resource (as the API returns it, livemode included) for customer.*, payout.*, refund.* and subscription_*; the payment summary for payment.*. See the document's webhooks section for each type's payload." }),
    payload: z.record(z.string(), z.unknown()).openapi({ description: "The exact body delivered to endpoints: the envelope { id, type, data, created_at, object_id, sequence, livemode }, which a subscription notification extends with event, subscription_id, status and timestamp." }),
  })
  .openapi("Event");

const EventTypeSchema = z
  .object({
    type: z.string(),
    description: z.string(),
    shape: z.enum(["envelope", "notification"]).openapi({
      description: "envelope: { id, type, data, created_at, object_id, sequence }; notification: the same envelope, with the interface document's event, subscription_id, status and timestamp at the top level as well.",
    }),
    object: z.enum(["payment", "payment_method", "refund", "user", "payout", "subscription", "invoice", "credit_note", "webhook_endpoint", "checkout_session"]).openapi({ description: "The kind of object the event is about: its events' object_id, and the sequence they count in." }),
  })
  .openapi("EventType");

const RedeliverBody = bodyObject({
  endpoint_id: idField("endpoint_id", "a webhook endpoint", "whk_01jd2x4k5m6n7p8q9r0s1t2v3w")
    .optional()
    .openapi({ description: "Send the event to this endpoint again, whatever the state of its delivery there. Without it, only where the event was not delivered." }),
}).openapi("RedeliverRequest");

/** The feed's types: every type of the catalog, and the test events of POST /api/webhooks/{id}/test. */
const FEED_TYPES: [string, ...string[]] = [EVENT_TYPES[0], ...EVENT_TYPES.slice(1), TEST_EVENT_TYPE];

const RedeliverySchema = z
  .object({
    object: z.literal("redelivery"),
    livemode: livemodeField,
    event_id: z.string(),
    deliveries: z.array(z.string()).openapi({ description: "The deliveries queued by this request (their ids), in id order. Empty when there was nothing to redeliver." }),
    skipped: z
      .array(
        z.object({
          delivery_id: z.string(),
          endpoint_id: z.string(),
          reason: z.enum(["already_delivered", "in_progress", "endpoint_disabled", "endpoint_unsubscribed"]).openapi({
            description:
              "already_delivered: the endpoint answered 2xx; in_progress: the delivery is still being tried (its retries go on); endpoint_disabled: the endpoint is disabled or deleted; endpoint_unsubscribed: it no longer takes this event type. Send endpoint_id to send it there anyway.",
          }),
        }),
      )
      .openapi({ description: "The event's other deliveries, left as they are, and why. Always empty when endpoint_id is sent." }),
  })
  .openapi("Redelivery");

/**
 * An event as the feed shows it: `data` as in the webhook envelope, and `payload`, the exact body
 * delivered. (A subscription notification written before the envelope had no `data`: its fields
 * stand in for it.)
 */
function serializeEvent(row: typeof events.$inferSelect) {
  const payload = deliveredEvent(row.payload);
  const { id: _id, type: _type, event: _event, created_at: _created, livemode: _livemode, ...notification } = payload;
  const data = "data" in payload ? payload.data : notification;
  return { id: row.id, object: "event" as const, livemode: row.livemode, type: row.type, created_at: row.createdAt, object_id: row.objectId, sequence: row.sequence, data, payload };
}

const types = apiRoute({
  method: "get",
  path: "/api/event-types",
  tags,
  operationId: "listEventTypes",
  summary: "List event types",
  description: "Every event type a webhook endpoint can subscribe to, with the shape of its body.",
  scope: "events:read",
  responses: { 200: json(z.object({ object: z.literal("list"), data: z.array(EventTypeSchema), has_more: z.literal(false) }).openapi("EventTypeList"), "The catalog.") },
});
const list = apiRoute({
  method: "get",
  path: "/api/events",
  tags,
  operationId: "listEvents",
  summary: "List events (catch-up feed)",
  description:
    "Every event of the account in the key's mode (test or live), newest first in the order they committed; filter by type or object. Use it to catch up on anything a receiver missed: keep the id of the newest event you have, and page with ending_before=<that id> for what committed after it. An event that commits late (a slow charge) still comes after every event that committed before it, whatever its id, so paging with the cursors the feed gave you never skips one. A cursor must be the id of one of the account's events in that mode (else 400 invalid_cursor).",
  scope: "events:read",
  request: {
    query: listQuery.extend({
      type: closedSetFilter("type", FEED_TYPES, "Only events of this type (GET /api/event-types lists them)."),
      object_id: idField("object_id", "an object", "po_01jd2x4k5m6n7p8q9r0s1t2v3w")
        .optional()
        .openapi({ description: "Only the events about this object, to fill a gap a Tender-Sequence showed. An empty value filters nothing." }),
    }),
  },
  responses: { 200: json(listSchema(EventSchema, "EventList"), "A page of events.") },
});
const get = apiRoute({
  method: "get",
  path: "/api/events/{id}",
  tags,
  operationId: "getEvent",
  summary: "Read an event",
  scope: "events:read",
  request: { params: idParam("event", "evt_01jd2x4k5m6n7p8q9r0s1t2v3w") },
  responses: { 200: json(EventSchema, "The event.") },
});
const redeliver = apiRoute({
  method: "post",
  path: "/api/events/{id}/redeliver",
  tags,
  operationId: "redeliverEvent",
  summary: "Redeliver an event",
  description:
    "Sends the event again, with the same webhook-id, to endpoints of the event's mode only. Without a body (or without endpoint_id), only where it was not delivered: each failed delivery to an active endpoint still subscribed to its type is sent again, and each such endpoint that never had it gets it (never the endpoint a webhook_endpoint.disabled or webhook_delivery.exhausted is about); a delivery that was delivered, or is still being tried, is left as it is, and listed under `skipped` with the reason. With endpoint_id, to that endpoint, whatever the state of its delivery there. A redelivered delivery goes out now, with a fresh 24-hour retry window. Nothing to redeliver answers 202 with `deliveries: []`.",
  scope: "events:write",
  request: {
    params: idParam("event", "evt_01jd2x4k5m6n7p8q9r0s1t2v3w"),
    body: { required: false, content: { "application/json": { schema: RedeliverBody } } },
  },
  responses: { 202: json(RedeliverySchema, "The deliveries queued.") },
});

const EVENT_MISSING = "event_missing";
const ENDPOINT_MISSING = "endpoint_missing";

export function registerEvents(app: OpenAPIHono<AppEnv>) {
  registerWebhookPayloads(app);
  app.openapi(types, async function listEventTypes(c) {
    // The catalog is static, but a key revoked in another isolate (still cached here) must be
    // refused on its next request, as every other route does through its query or batch.
    await ensureLive(c.var.db, c.var.auth);
    return c.json({ object: "list" as const, data: describeEventTypes(), has_more: false as const }, 200);
  });

  app.openapi(list, async function listEvents(c) {
    const page = await feedPageOf(c, c.req.valid("query"), serializeEvent);
    return c.json(page, 200);
  });

  app.openapi(get, async function getEvent(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, events, id, "event");
    return c.json(serializeEvent(row), 200);
  });

  app.openapi(redeliver, async function redeliverEvent(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const endpointId = (c.req.valid("json") as z.infer<typeof RedeliverBody>).endpoint_id;
    const now = clock.now();
    const statements = [
      guardExists(db, EVENT_MISSING, events, owned(events, auth, eq(events.id, id))),
      ...(endpointId
        ? [guardExists(db, ENDPOINT_MISSING, webhookEndpoints, owned(webhookEndpoints, auth, and(eq(webhookEndpoints.id, endpointId), isNull(webhookEndpoints.deletedAt), eq(webhookEndpoints.status, "active"))))]
        : []),
      redeliveriesFor(db, auth, id, now, endpointId),
    ];
    // The answer is read in the batch, after the redelivery: the live answer and the stored one
    // are the same SQL.
    const answer = redeliveryAnswerSql(auth, id, now, endpointId);
    const { answered } = await commit(
      c,
      {
        statements: [],
        events: [{ id, statements, deliveriesAt: statements.length - 1 }],
        answer: db.select({ answer: sql<string>`${answer}` }).from(events).where(eq(events.id, id)),
      },
      202,
      answer,
      {
        failures: {
          [EVENT_MISSING]: () => notFound("event", id, "id"),
          [ENDPOINT_MISSING]: () => notFound("active webhook endpoint", endpointId ?? "", "endpoint_id"),
        },
      },
    );
    const [{ answer: body }] = answered as { answer: string }[];
    return c.json(JSON.parse(body) as z.infer<typeof RedeliverySchema>, 202);
  });
}
