// PATCH /api/webhooks/{id}: URL, event types, ordering, rate_limit or status; only the fields sent are written.
// Turning ordering off releases the deliveries it held back; a new rate_limit gives the deliveries
// waiting for budget their slots again at the new rate.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { webhookEndpoints } from "../../db/schema";
import { sql } from "drizzle-orm";
import { releaseHeldDeliveries } from "../../webhooks/outbox";
import { endpointDisabledEvent, stopPendingDeliveries } from "../../webhooks/health";
import { releaseSlots, rethrottle } from "../../webhooks/throttle";
import { owned } from "../../db/scope";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { commit } from "../write-path";
import { ENDPOINT_MISSING, checkUrl, endpointMissing, liveEndpoint, stillLive, tags, webhookId } from "./common";
import { UpdateWebhookBody, WebhookSchema, serializeWebhook, webhookJsonSql } from "./schema";

const update = apiRoute({
  method: "patch",
  path: "/api/webhooks/{id}",
  tags,
  operationId: "updateWebhook",
  summary: "Update a webhook endpoint",
  description:
    "Changes the URL, the event types, the ordering, the rate_limit (null removes it), or the status. status disabled disables it by hand (disabled_reason manual; one already disabled keeps its reason): its pending deliveries end failed, unattempted, and webhook_endpoint.disabled goes to the account's other endpoints. status active enables it again and clears disabled_reason and disabled_at; the deliveries that ended while it was disabled stay failed (send them again with POST /api/events/{id}/redeliver, or POST /api/webhooks/{id}/recover over a time range).",
  scope: "webhooks:write",
  request: { params: webhookId, ...jsonBodyOf(UpdateWebhookBody) },
  responses: { 200: json(WebhookSchema, "The updated endpoint.") },
});

export function registerUpdateWebhook(app: OpenAPIHono<AppEnv>) {
  app.openapi(update, async function updateWebhook(c) {
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
    if (body.ordering !== undefined) changes.ordering = body.ordering;
    if (body.rate_limit !== undefined) changes.rateLimit = body.rate_limit;
    const disabling = body.status === "disabled";
    if (body.status === "active") {
      // Enabled again: healthy from now on. Deliveries its disabling ended stay failed (a
      // redelivery or a recovery sends them).
      Object.assign(changes, { status: "active", disabledReason: null, disabledAt: null, failingSince: null });
    } else if (disabling) {
      // Disabled by a person; one already disabled keeps its reason and time (src/webhooks/health.ts).
      const wasActive = sql`${webhookEndpoints.status} = 'active'`;
      Object.assign(changes, {
        status: "disabled",
        disabledReason: sql`CASE WHEN ${wasActive} THEN 'manual' ELSE ${webhookEndpoints.disabledReason} END`,
        disabledAt: sql`CASE WHEN ${wasActive} THEN ${isoTime(now)} ELSE ${webhookEndpoints.disabledAt} END`,
      });
    }
    const { returned } = await commit(
      c,
      {
        statements: [stillLive(db, auth, id)],
        returning: db.update(webhookEndpoints).set(changes).where(owned(webhookEndpoints, auth, liveEndpoint(id))).returning(),
        // Its pending deliveries end, and the account's other endpoints hear of it.
        events: disabling ? [endpointDisabledEvent(db, { id, accountId: auth.accountId, livemode: auth.livemode }, now)] : [],
        trailing: disabling ? [stopPendingDeliveries(db, id, now)] : [],
      },
      200,
      webhookJsonSql(id),
      { failures: { [ENDPOINT_MISSING]: endpointMissing(id) } },
    );
    const [updated] = returned as (typeof webhookEndpoints.$inferSelect)[];
    if (body.ordering === "none") await releaseHeldDeliveries(db, c.env.DELIVERY_QUEUE, auth, id);
    // Enabled again: the throttle slots of the deliveries its disabling ended are given up.
    if (body.status === "active") await releaseSlots(c.env, id);
    if (body.rate_limit !== undefined) await rethrottle(c.env, id, updated.rateLimit);
    return c.json(serializeWebhook(updated), 200);
  });
}
