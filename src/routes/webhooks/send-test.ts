// POST /api/webhooks/{id}/test: a webhook.test event to this endpoint only, signed and retried like any other;
// with exhaust (test mode), its delivery's window ends at once, for a receiver of webhook_delivery.exhausted to try.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { and, eq } from "drizzle-orm";
import { guardExists } from "../../db/batch";
import { webhookDeliveries, webhookEndpoints } from "../../db/schema";
import { owned } from "../../db/scope";
import { clock } from "../../lib/clock";
import { invalidRequest, notFound } from "../../lib/errors";
import { deliveryExhaustedEvent, endedLate } from "../../webhooks/health";
import { TEST_EVENT_TYPE } from "../../webhooks/catalog";
import { deliveryIdOf, emitTestEvent } from "../../webhooks/outbox";
import { apiRoute, json } from "../openapi";
import { bodyObject, livemodeField } from "../shared";
import { commit } from "../write-path";
import { ENDPOINT_MISSING, liveEndpoint, tags, webhookId } from "./common";

const TestResultSchema = z
  .object({ object: z.literal("webhook_test"), livemode: livemodeField, event_id: z.string(), delivery_id: z.string() })
  .openapi("WebhookTest");
const TestBody = bodyObject({
  exhaust: z
    .boolean({ error: "exhaust must be true or false." })
    .optional()
    .openapi({
      description:
        "Test mode only: the test event's delivery is not sent, and its 24 hours are taken as run out at once without a 2xx, so webhook_delivery.exhausted goes to the account's other endpoints that take it (how `tender trigger webhook_delivery.exhausted` makes one).",
    }),
}).openapi("WebhookTestRequest");

const sendTest = apiRoute({
  method: "post",
  path: "/api/webhooks/{id}/test",
  tags,
  operationId: "testWebhook",
  summary: "Send a test event",
  description: `Sends an event of type '${TEST_EVENT_TYPE}' to this endpoint only, signed and retried like any other. With exhaust: true (test mode only), it is not sent: its delivery ends failed at once, as if its 24 hours had run out, and webhook_delivery.exhausted goes to the account's other endpoints.`,
  scope: "webhooks:write",
  request: { params: webhookId, body: { required: false, content: { "application/json": { schema: TestBody } } } },
  responses: { 202: json(TestResultSchema, "The test event is on its way.") },
});

export function registerTestWebhook(app: OpenAPIHono<AppEnv>) {
  app.openapi(sendTest, async function testWebhook(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const now = clock.now();
    const { exhaust } = c.req.valid("json") as z.infer<typeof TestBody>;
    if (exhaust && auth.livemode) throw invalidRequest("livemode_not_allowed", "exhaust is for test mode only; use a test-mode key (sk_test_…).", "exhaust");
    const event = emitTestEvent(db, auth, id, now);
    const deliveryId = deliveryIdOf(event.id, id);
    // Its window ends now, unsent: the same end, and the same event, as a delivery's 24 hours give.
    const ended = exhaust
      ? deliveryExhaustedEvent(db, { id: deliveryId, endpointId: id, attemptCount: 0, eventType: TEST_EVENT_TYPE, accountId: auth.accountId, livemode: auth.livemode }, now, now, endedLate)
      : null;
    const end = db
      .update(webhookDeliveries)
      .set({ status: "failed", lastError: "retry_window_ended", firstAttemptAt: now, nextAttemptAt: null, updatedAt: now })
      .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending"), eq(webhookDeliveries.attemptCount, 0)));
    await commit(
      c,
      {
        statements: [guardExists(db, ENDPOINT_MISSING, webhookEndpoints, owned(webhookEndpoints, auth, liveEndpoint(id), eq(webhookEndpoints.status, "active")))],
        events: [event, ...(ended ? [{ id: ended.id, statements: [end, ...ended.statements], deliveriesAt: (ended.deliveriesAt ?? 0) + 1 }] : [])],
      },
      202,
      { object: "webhook_test", livemode: auth.livemode, event_id: event.id, delivery_id: deliveryId },
      { failures: { [ENDPOINT_MISSING]: () => notFound("active webhook endpoint", id, "id") } },
    );
    return c.json({ object: "webhook_test" as const, livemode: auth.livemode, event_id: event.id, delivery_id: deliveryId }, 202);
  });
}
