// GET /api/webhooks, GET /api/webhooks/{id}, and an endpoint's deliveries with their attempts.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { inArray } from "drizzle-orm";
import { deliveryAttempts, webhookDeliveries, webhookEndpoints } from "../../db/schema";
import { hasPrefix } from "../../domain/ids";
import { apiRoute, json } from "../openapi";
import { listQuery, listSchema } from "../pagination";
import { listOwned } from "../reads";
import { loadEndpoint, tags, webhookId } from "./common";
import { DeliveryListQuery, DeliverySchema, WebhookSchema, serializeDelivery, serializeWebhook } from "./schema";

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
const deliveries = apiRoute({
  method: "get",
  path: "/api/webhooks/{id}/deliveries",
  tags,
  operationId: "listWebhookDeliveries",
  summary: "List an endpoint's deliveries",
  description: "Each delivery with its attempts: time, status code, duration and the first 1 KB of the answer.",
  scope: "webhooks:read",
  request: { params: webhookId, query: listQuery.extend(DeliveryListQuery) },
  responses: { 200: json(listSchema(DeliverySchema, "WebhookDeliveryList"), "A page of deliveries, newest first.") },
});

export function registerReadWebhooks(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async function listWebhooks(c) {
    const page = await listOwned(c, {
      table: webhookEndpoints,
      query: c.req.valid("query"),
      filters: [[webhookEndpoints.deletedAt, null]],
      validCursor: (id) => hasPrefix(id, "webhookEndpoint"),
      serialize: serializeWebhook,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getWebhook(c) {
    const { id } = c.req.valid("param");
    return c.json(serializeWebhook(await loadEndpoint(c, id)), 200);
  });

  app.openapi(deliveries, async function listWebhookDeliveries(c) {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: webhookDeliveries,
      query,
      filters: [[webhookDeliveries.endpointId, id], [webhookDeliveries.status, query.status || undefined]],
      validCursor: (cursor) => /^dlv_[0-9a-hjkmnp-tv-z]{52}$/.test(cursor),
      serialize: (row: typeof webhookDeliveries.$inferSelect) => row,
    });
    if (page.data.length === 0) await loadEndpoint(c, id);
    const attempts = page.data.length
      ? await db.select().from(deliveryAttempts).where(inArray(deliveryAttempts.deliveryId, page.data.map((d) => d.id)))
      : [];
    return c.json({ ...page, data: page.data.map((d) => serializeDelivery(d, attempts.filter((a) => a.deliveryId === d.id))) }, 200);
  });
}
