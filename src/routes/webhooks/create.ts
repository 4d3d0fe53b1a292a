// POST /api/webhooks: registers an endpoint; the answer shows its signing secret once.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { webhookEndpoints } from "../../db/schema";
import { newId } from "../../domain/ids";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { generateSecret } from "../../webhooks/signing";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { commitAndRespond } from "../write-path";
import { checkUrl, tags } from "./common";
import { CreateWebhookBody, WebhookWithSecretSchema, serializeWebhook } from "./schema";

const create = apiRoute({
  method: "post",
  path: "/api/webhooks",
  tags,
  operationId: "createWebhook",
  summary: "Register a webhook endpoint",
  description:
    "Registers an https URL to receive the listed event types of the key's mode: an endpoint registered with a test key receives test events only, one registered with a live key live events only. The answer carries the signing secret (whsec_…), shown here and on rotation only. In development, http://localhost and http://127.0.0.1 are accepted too; in production, private and loopback targets are refused.",
  scope: "webhooks:write",
  request: jsonBodyOf(CreateWebhookBody),
  responses: { 201: json(WebhookWithSecretSchema, "The endpoint, with its secret.") },
});

export function registerCreateWebhook(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createWebhook(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const row = {
      id: newId("webhookEndpoint", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      url: checkUrl(body.url, isDevelopment(c.env)),
      events: [...new Set(body.events)],
      status: "active" as const,
      ordering: body.ordering,
      rateLimit: body.rate_limit,
      slowedUntil: null,
      disabledReason: null,
      disabledAt: null,
      failingSince: null,
      secret: generateSecret(),
      previousSecret: null,
      previousSecretExpiresAt: null,
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
      deletedAt: null,
    };
    return commitAndRespond(c, { statements: [db.insert(webhookEndpoints).values(row)] }, 201, { ...serializeWebhook(row), secret: row.secret });
  });
}
