// POST /api/webhooks/{id}/test: a webhook.test event to this endpoint only, signed and retried like any other.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { eq } from "drizzle-orm";
import { guardExists } from "../../db/batch";
import { webhookEndpoints } from "../../db/schema";
import { owned } from "../../db/scope";
import { clock } from "../../lib/clock";
import { notFound } from "../../lib/errors";
import { TEST_EVENT_TYPE } from "../../webhooks/catalog";
import { deliveryIdOf, emitTestEvent } from "../../webhooks/outbox";
import { apiRoute, json } from "../openapi";
import { livemodeField } from "../shared";
import { commit } from "../write-path";
import { ENDPOINT_MISSING, liveEndpoint, tags, webhookId } from "./common";

const TestResultSchema = z
  .object({ object: z.literal("webhook_test"), livemode: livemodeField, event_id: z.string(), delivery_id: z.string() })
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

export function registerTestWebhook(app: OpenAPIHono<AppEnv>) {
  app.openapi(sendTest, async function testWebhook(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const now = clock.now();
    const event = emitTestEvent(db, auth, id, now);
    const deliveryId = deliveryIdOf(event.id, id);
    await commit(
      c,
      {
        statements: [guardExists(db, ENDPOINT_MISSING, webhookEndpoints, owned(webhookEndpoints, auth, liveEndpoint(id), eq(webhookEndpoints.status, "active")))],
        events: [event],
      },
      202,
      { object: "webhook_test", livemode: auth.livemode, event_id: event.id, delivery_id: deliveryId },
      { failures: { [ENDPOINT_MISSING]: () => notFound("active webhook endpoint", id, "id") } },
    );
    return c.json({ object: "webhook_test" as const, livemode: auth.livemode, event_id: event.id, delivery_id: deliveryId }, 202);
  });
}
