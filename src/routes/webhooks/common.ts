// What the webhook endpoint operations share: the tag and id parameter, the URL check, the load of
// a live endpoint, and the guard that a write's endpoint is still live when its batch runs.
import type { Context } from "hono";
import { and, eq, isNull } from "drizzle-orm";
import type { Db } from "../../db/client";
import { guardExists } from "../../db/batch";
import { webhookEndpoints } from "../../db/schema";
import { type Caller, owned } from "../../db/scope";
import type { AppEnv } from "../../context";
import { invalidRequest, notFound } from "../../lib/errors";
import { checkWebhookUrl } from "../../webhooks/url-policy";
import { readOne } from "../reads";
import { idParam } from "../openapi";

export const tags = ["Webhooks"];
export const webhookId = idParam("webhook endpoint", "whk_01jd2x4k5m6n7p8q9r0s1t2v3w");
export const ENDPOINT_MISSING = "endpoint_missing";

export const liveEndpoint = (id: string) => and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.deletedAt));

/** The URL as stored, or a 400 naming `url` (see src/webhooks/url-policy.ts). */
export function checkUrl(url: string, development: boolean): string {
  const result = checkWebhookUrl(url, development);
  if (!result.ok) throw invalidRequest("url_invalid", result.message, "url");
  return result.url;
}

/** A live endpoint of the caller's account, or 404. */
export async function loadEndpoint(c: Context<AppEnv>, id: string) {
  return readOne(c, c.var.db.select().from(webhookEndpoints).where(owned(webhookEndpoints, c.var.auth, liveEndpoint(id))).limit(1), "webhook endpoint", id);
}

/**
 * The endpoint must still be live when the batch runs: a DELETE that commits first wins, and the
 * racing write answers 404 instead of 200 for a change it never made.
 */
export const stillLive = (db: Db, auth: Caller, id: string) =>
  guardExists(db, ENDPOINT_MISSING, webhookEndpoints, owned(webhookEndpoints, auth, liveEndpoint(id)));

export const endpointMissing = (id: string) => () => notFound("webhook endpoint", id, "id");
