// DELETE /api/webhooks/{id}: stops all deliveries to the endpoint; its history is kept.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { webhookEndpoints } from "../../db/schema";
import { owned } from "../../db/scope";
import { clock, isoTime } from "../../lib/clock";
import { apiRoute, json } from "../openapi";
import { commitAndRespond } from "../write-path";
import { ENDPOINT_MISSING, endpointMissing, liveEndpoint, stillLive, tags, webhookId } from "./common";
import { DeletedWebhookSchema } from "./schema";

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

export function registerDeleteWebhook(app: OpenAPIHono<AppEnv>) {
  app.openapi(remove, async function deleteWebhook(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    // No read first: the batch's guard answers 404 for a missing or deleted endpoint (one round trip).
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
      { id, object: "webhook_endpoint" as const, livemode: auth.livemode, deleted: true as const },
      { failures: { [ENDPOINT_MISSING]: endpointMissing(id) } },
    );
  });
}
