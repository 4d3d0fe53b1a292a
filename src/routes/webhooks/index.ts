import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { guard } from "../../db/batch";
import { deliveryAttempts, events, webhookDeliveries, webhookEndpoints } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest, notFound } from "../../lib/errors";
import { listQuery, listSchema } from "../pagination";
import { found, listOwned } from "../reads";
import { commit, commitAndRespond } from "../write-path";
import { TEST_EVENT_TYPE } from "../../webhooks/catalog";
import { deliveriesFor, deliveryIdOf } from "../../webhooks/outbox";
import { generateSecret } from "../../webhooks/signing";
import { checkWebhookUrl } from "../../webhooks/url-policy";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import {
  CreateWebhookBody,
  DeletedWebhookSchema,
  DeliverySchema,
  UpdateWebhookBody,
  WebhookSchema,
  WebhookWithSecretSchema,
  serializeDelivery,
  serializeWebhook,
  webhookJsonSql,
} from "./schema";

const tags = ["Webhooks"];
const webhookId = idParam("webhook endpoint", "whk_01jd2x4k5m6n7p8q9r0s1t2v3w");
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;
const ENDPOINT_MISSING = "endpoint_missing";

const create = apiRoute({
  method: "post",
  path: "/api/webhooks",
  tags,
  operationId: "createWebhook",
  summary: "Register a webhook endpoint",
  description:
    "Registers an https URL to receive the listed event types. The answer carries the signing secret (whsec_…), shown here and on rotation only. In development, http://localhost and http://127.0.0.1 are accepted too; in production, private and loopback targets are refused.",
  scope: "webhooks:write",
  request: jsonBodyOf(CreateWebhookBody),
  responses: { 201: json(WebhookWithSecretSchema, "The endpoint, with its secret.") },
});
const list = apiRoute({
  method: "get",
  path: "/api/webhooks",
  tags,
  operationId: "listWebhooks",
  summary: "List webhook endpoints",
  scope: "webhooks:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(WebhookSchema, "WebhookEndpointList"), "A page of endpoints, newest first.") },
});
const get = apiRoute({
  method: "get",
  path: "/api/webhooks/{id}",
  tags,
  operationId: "getWebhook",
  summary: "Read a webhook endpoint",
  scope: "webhooks:read",
  request: { params: webhookId },
  responses: { 200: json(WebhookSchema, "The endpoint (never its secret).") },
});
const update = apiRoute({
  method: "patch",
  path: "/api/webhooks/{id}",
  tags,
  operationId: "updateWebhook",
  summary: "Update a webhook endpoint",
  description: "Changes the URL, the event types, or the status (active or disabled).",
  scope: "webhooks:write",
  request: { params: webhookId, ...jsonBodyOf(UpdateWebhookBody) },
  responses: { 200: json(WebhookSchema, "The updated endpoint.") },
});
const remove = apiRoute({
  method: "delete",
  path: "/api/webhooks/{id}",
  tags,
  operationId: "deleteWebhook",
  summary: "Delete a webhook endpoint",
  description: "Stops all deliveries to the endpoint. Its delivery history is kept.",
  scope: "webhooks:write",
  request: { params: webhookId },
  responses: { 200: json(DeletedWebhookSchema, "The endpoint is deleted.") },
});
const rotate = apiRoute({
  method: "post",
  path: "/api/webhooks/{id}/rotate-secret",
  tags,
  operationId: "rotateWebhookSecret",
  summary: "Rotate the signing secret",
  description: "Issues a new secret. For 24 hours the old one keeps signing too: webhook-signature then carries both signatures. X-Signature is always made with the new secret.",
  scope: "webhooks:write",
  request: { params: webhookId },
  responses: { 200: json(WebhookWithSecretSchema, "The endpoint, with its new secret.") },
});
const deliveries = apiRoute({
  method: "get",
  path: "/api/webhooks/{id}/deliveries",
  tags,
  operationId: "listWebhookDeliveries",
  summary: "List an endpoint's deliveries",
  description: "Each delivery with its attempts: time, status code, duration and the first 1 KB of the answer.",
  scope: "webhooks:read",
  request: { params: webhookId, query: listQuery.extend({ status: z.enum(["pending", "delivered", "failed"]).optional() }) },
  responses: { 200: json(listSchema(DeliverySchema, "WebhookDeliveryList"), "A page of deliveries, newest first.") },
});
const TestResultSchema = z
  .object({ object: z.literal("webhook_test"), event_id: z.string(), delivery_id: z.string() })
  .openapi("WebhookTest");
const sendTest = apiRoute({
  method: "post",
  path: "/api/webhooks/{id}/test",
  tags,
  operationId: "testWebhook",
  summary: "Send a test event",
  description: `Sends an event of type '${TEST_EVENT_TYPE}' to this endpoint only, signed and retried like any other.`,
  scope: "webhooks:write",
  request: { params: webhookId },
  responses: { 202: json(TestResultSchema, "The test event is on its way.") },
});

export function registerWebhooks(app: OpenAPIHono<AppEnv>) {
  const liveEndpoint = (id: string) => and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.deletedAt));
  const checkUrl = (url: string, development: boolean) => {
    const result = checkWebhookUrl(url, development);
    if (!result.ok) throw invalidRequest("url_invalid", result.message, "url");
    return result.url;
  };

  app.openapi(create, async (c) => {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const row = {
      id: newId("webhookEndpoint", now),
      accountId: auth.accountId,
      url: checkUrl(body.url, isDevelopment(c.env)),
      events: [...new Set(body.events)],
      status: "active" as const,
      disabledReason: null,
      secret: generateSecret(),
      previousSecret: null,
      previousSecretExpiresAt: null,
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
      deletedAt: null,
    };
    return commitAndRespond(c, { statements: [db.insert(webhookEndpoints).values(row)] }, 201, { ...serializeWebhook(row), secret: row.secret });
  });

  app.openapi(list, async (c) => {
    const page = await listOwned(c, {
      table: webhookEndpoints,
      id: webhookEndpoints.id,
      query: c.req.valid("query"),
      filters: [isNull(webhookEndpoints.deletedAt)],
      validCursor: (id) => hasPrefix(id, "webhookEndpoint"),
      serialize: serializeWebhook,
    });
    return c.json(page, 200);
  });

  const load = async (c: Parameters<Parameters<typeof app.openapi>[1]>[0], id: string) =>
    found(c, await c.var.db.query.webhookEndpoints.findFirst({ where: owned(webhookEndpoints, c.var.auth, liveEndpoint(id)) }), "webhook endpoint", id);

  app.openapi(get, async (c) => {
    const { id } = c.req.valid("param");
    return c.json(serializeWebhook(await load(c, id)), 200);
  });

  // The endpoint must still be live when the batch runs: a DELETE that commits first wins, and
  // the racing write answers 404 instead of 200 for a change it never made.
  const stillLive = (db: Parameters<typeof guard>[0], auth: Parameters<typeof owned>[1], id: string) =>
    guard(db, ENDPOINT_MISSING, sql`EXISTS (SELECT 1 FROM ${webhookEndpoints} WHERE ${owned(webhookEndpoints, auth, liveEndpoint(id))})`);
  const endpointMissing = (id: string) => () => notFound("webhook endpoint", id, "id");

  app.openapi(update, async (c) => {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    // Only the fields sent are written, so two PATCHes of different fields both take effect
    // (writing back a whole row read earlier lost the other's change). The answer is the row as
    // the batch committed it.
    const changes: Partial<typeof webhookEndpoints.$inferInsert> = { updatedAt: isoTime(now) };
    if (body.url !== undefined) changes.url = checkUrl(body.url, isDevelopment(c.env));
    if (body.events !== undefined) changes.events = [...new Set(body.events)];
    if (body.status !== undefined) {
      changes.status = body.status;
      changes.disabledReason = body.status === "active" ? null : "Disabled through the API.";
    }
    const [, updated] = (await commit(
      c,
      {
        statements: [
          stillLive(db, auth, id),
          db.update(webhookEndpoints).set(changes).where(owned(webhookEndpoints, auth, liveEndpoint(id))).returning(),
        ],
      },
      200,
      webhookJsonSql(id),
      { failures: { [ENDPOINT_MISSING]: endpointMissing(id) } },
    )) as unknown as [unknown, (typeof webhookEndpoints.$inferSelect)[]];
    return c.json(serializeWebhook(updated[0]), 200);
  });

  app.openapi(remove, async (c) => {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    await load(c, id);
    const now = isoTime(clock.now());
    return commitAndRespond(
      c,
      {
        statements: [
          stillLive(db, auth, id),
          db.update(webhookEndpoints).set({ status: "disabled", deletedAt: now, updatedAt: now }).where(owned(webhookEndpoints, auth, liveEndpoint(id))),
        ],
      },
      200,
      { id, object: "webhook_endpoint" as const, deleted: true as const },
      { failures: { [ENDPOINT_MISSING]: endpointMissing(id) } },
    );
  });

  app.openapi(rotate, async (c) => {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    await load(c, id);
    const now = clock.now();
    const secret = generateSecret();
    // The secret being replaced is read by the UPDATE itself, so concurrent rotations chain
    // (each answer's secret stays valid for the overlap) instead of all naming the same old one.
    const [, rotated] = (await commit(
      c,
      {
        statements: [
          stillLive(db, auth, id),
          db
            .update(webhookEndpoints)
            .set({
              secret,
              previousSecret: sql`${webhookEndpoints.secret}`,
              previousSecretExpiresAt: isoTime(now + ROTATION_OVERLAP_MS),
              updatedAt: isoTime(now),
            })
            .where(owned(webhookEndpoints, auth, liveEndpoint(id)))
            .returning(),
        ],
      },
      200,
      // Stored answers keep no secret: a replay shows `secret: null` (see the idempotency rule).
      sql`json_set(${webhookJsonSql(id)}, '$.secret', json('null'))`,
      { failures: { [ENDPOINT_MISSING]: endpointMissing(id) } },
    )) as unknown as [unknown, (typeof webhookEndpoints.$inferSelect)[]];
    return c.json({ ...serializeWebhook(rotated[0]), secret }, 200);
  });

  app.openapi(deliveries, async (c) => {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: webhookDeliveries,
      id: webhookDeliveries.id,
      query,
      filters: [eq(webhookDeliveries.endpointId, id), query.status ? eq(webhookDeliveries.status, query.status) : undefined],
      validCursor: (cursor) => /^dlv_[0-9a-hjkmnp-tv-z]{52}$/.test(cursor),
      serialize: (row: typeof webhookDeliveries.$inferSelect) => row,
    });
    if (page.data.length === 0) await load(c, id);
    const attempts = page.data.length
      ? await db.select().from(deliveryAttempts).where(inArray(deliveryAttempts.deliveryId, page.data.map((d) => d.id)))
      : [];
    return c.json({ ...page, data: page.data.map((d) => serializeDelivery(d, attempts.filter((a) => a.deliveryId === d.id))) }, 200);
  });

  app.openapi(sendTest, async (c) => {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const now = clock.now();
    const eventId = newId("event", now);
    const payload = JSON.stringify({
      id: eventId,
      type: TEST_EVENT_TYPE,
      data: { endpoint_id: id, message: "A test event from Tender." },
      created_at: isoTime(now),
    });
    const deliveryId = deliveryIdOf(eventId, id);
    await commit(
      c,
      {
        statements: [
          guard(db, ENDPOINT_MISSING, sql`EXISTS (SELECT 1 FROM ${webhookEndpoints} WHERE ${owned(webhookEndpoints, auth, liveEndpoint(id), eq(webhookEndpoints.status, "active"))})`),
          db.insert(events).values({ id: eventId, accountId: auth.accountId, type: TEST_EVENT_TYPE, payload, createdAt: isoTime(now) }),
        ],
        events: [{ id: eventId, statements: [deliveriesFor(db, auth.accountId, eventId, TEST_EVENT_TYPE, now, id)], deliveriesAt: 0 }],
      },
      202,
      { object: "webhook_test", event_id: eventId, delivery_id: deliveryId },
      { failures: { [ENDPOINT_MISSING]: () => notFound("active webhook endpoint", id, "id") } },
    );
    return c.json({ object: "webhook_test" as const, event_id: eventId, delivery_id: deliveryId }, 202);
  });
}

