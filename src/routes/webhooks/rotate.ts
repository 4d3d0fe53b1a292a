// POST /api/webhooks/{id}/rotate-secret: a new signing secret; the old one keeps signing for 24 hours.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { sql } from "drizzle-orm";
import { webhookEndpoints } from "../../db/schema";
import { owned } from "../../db/scope";
import { clock, isoTime } from "../../lib/clock";
import { generateSecret } from "../../webhooks/signing";
import { apiRoute, json } from "../openapi";
import { commit } from "../write-path";
import { ENDPOINT_MISSING, endpointMissing, liveEndpoint, stillLive, tags, webhookId } from "./common";
import { WebhookWithSecretSchema, serializeWebhook, webhookJsonSql } from "./schema";

/** How long the replaced secret keeps signing, beside the new one. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

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

export function registerRotateWebhookSecret(app: OpenAPIHono<AppEnv>) {
  app.openapi(rotate, async function rotateWebhookSecret(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    // No read first: the batch's guard answers 404 for a missing or deleted endpoint (one round trip).
    const now = clock.now();
    const secret = generateSecret();
    // The secret being replaced is read by the UPDATE itself, so concurrent rotations chain
    // (each answer's secret stays valid for the overlap) instead of all naming the same old one.
    const { returned } = await commit(
      c,
      {
        statements: [stillLive(db, auth, id)],
        returning: db
          .update(webhookEndpoints)
          .set({
            secret,
            previousSecret: sql`${webhookEndpoints.secret}`,
            previousSecretExpiresAt: isoTime(now + ROTATION_OVERLAP_MS),
            updatedAt: isoTime(now),
          })
          .where(owned(webhookEndpoints, auth, liveEndpoint(id)))
          .returning(),
      },
      200,
      // Stored answers keep no secret: a replay shows `secret: null` (see the idempotency rule).
      sql`json_set(${webhookJsonSql(id)}, '$.secret', json('null'))`,
      { failures: { [ENDPOINT_MISSING]: endpointMissing(id) } },
    );
    const [rotated] = returned as (typeof webhookEndpoints.$inferSelect)[];
    return c.json({ ...serializeWebhook(rotated), secret }, 200);
  });
}
