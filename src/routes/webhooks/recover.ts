// POST /api/webhooks/{id}/recover: every event of a time range the endpoint missed, sent once more by
// a background job (src/webhooks/operations/recovery.ts); GET reads a recovery and lists them.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { and, eq, sql } from "drizzle-orm";
import type { AppEnv } from "../../context";
import { guard, guardExists } from "../../db/batch";
import { webhookEndpoints, webhookRecoveries } from "../../db/schema";
import { owned } from "../../db/scope";
import { newId } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import { conflict, invalidRequest } from "../../lib/errors";
import { recoveryMessage } from "../../webhooks/operations/recovery";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readOne } from "../reads";
import { bodyObject, instantField, livemodeField, timestamp } from "../shared";
import { commit } from "../write-path";
import { ENDPOINT_MISSING, endpointMissing, liveEndpoint, loadEndpoint, tags, webhookId } from "./common";

const DAY_MS = 24 * 60 * 60 * 1000;
const ENDPOINT_DISABLED = "recovery_endpoint_disabled";
const BEFORE_RETENTION = "recovery_before_retention";
const IN_PROGRESS = "recovery_in_progress";

const instant = (field: string, what: string) =>
  z
    .string({ error: `${field} must be a date and time in ISO 8601 with its offset, such as 2026-11-27T09:00:00Z.` })
    .max(40)
    .openapi({ description: what, example: "2026-11-27T09:00:00Z" });

export const RecoverWebhookBody = bodyObject({
  since: instant("since", "The start of the range (included): events created at or after it. Not before the account's event retention (event_retention_days)."),
  until: instant("until", "The end of the range (excluded); now when absent, and never later than now.").optional(),
}).openapi("RecoverWebhookRequest");

export const RecoverySchema = z
  .object({
    id: z.string().openapi({ example: "rcv_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("webhook_recovery"),
    livemode: livemodeField,
    endpoint_id: z.string(),
    since: timestamp("The start of the range (included)."),
    until: timestamp("The end of the range (excluded)."),
    status: z.enum(["running", "done"]).openapi({ description: "running while the job goes through the range; done when every event of it has been looked at." }),
    total: z.number().int().openapi({ description: "Events of the range the endpoint takes, looked at so far." }),
    sent: z.number().int().openapi({ description: "Of those, the ones with no 2xx to this endpoint: sent once more." }),
    created_at: timestamp("When the recovery was asked for."),
    completed_at: z.string().nullable().openapi({ description: "When it was done; null while running." }),
  })
  .openapi("WebhookRecovery");

export function serializeRecovery(row: typeof webhookRecoveries.$inferSelect) {
  return {
    id: row.id,
    object: "webhook_recovery" as const,
    livemode: row.livemode,
    endpoint_id: row.endpointId,
    since: row.since,
    until: row.until,
    status: row.status,
    total: row.total,
    sent: row.sent,
    created_at: row.createdAt,
    completed_at: row.completedAt,
  };
}

const recoveryParams = webhookId.extend({
  rcv_id: z
    .string({ error: "rcv_id must be a recovery's id, of at most 100 characters." })
    .max(100)
    .openapi({ param: { name: "rcv_id", in: "path" }, description: "The recovery's id.", example: "rcv_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
});

const recover = apiRoute({
  method: "post",
  path: "/api/webhooks/{id}/recover",
  tags,
  operationId: "recoverWebhook",
  summary: "Recover what an endpoint missed",
  description:
    "Sends the endpoint, once more, every event of [since, until) that it takes (its event types, its mode; never the health events about this endpoint itself) and has no 2xx for: events that failed, are still being retried (sent now, with a fresh 24-hour window), or never had a delivery to it. A background job goes through them oldest first, in pages; on a per_object endpoint each object's events go in their order. Poll GET /api/webhooks/{id}/recoveries/{rcv_id} for `status` and the counts. The endpoint must be active (409 endpoint_disabled: enable it first). `since` may not be before the account's event retention (400). A recovery of the endpoint still running over an overlapping range answers 409 recovery_in_progress.",
  scope: "webhooks:write",
  request: { params: webhookId, ...jsonBodyOf(RecoverWebhookBody) },
  responses: { 202: json(RecoverySchema, "The recovery, running.") },
});
const get = apiRoute({
  method: "get",
  path: "/api/webhooks/{id}/recoveries/{rcv_id}",
  tags,
  operationId: "getWebhookRecovery",
  summary: "Read a recovery",
  scope: "webhooks:read",
  request: { params: recoveryParams },
  responses: { 200: json(RecoverySchema, "The recovery, with its status and counts.") },
});
const list = apiRoute({
  method: "get",
  path: "/api/webhooks/{id}/recoveries",
  tags,
  operationId: "listWebhookRecoveries",
  summary: "List an endpoint's recoveries",
  scope: "webhooks:read",
  request: { params: webhookId, query: listQuery },
  responses: { 200: json(listSchema(RecoverySchema, "WebhookRecoveryList"), "A page of recoveries, newest first.") },
});

export function registerRecoverWebhook(app: OpenAPIHono<AppEnv>) {
  app.openapi(recover, async function recoverWebhook(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    const sinceAt = instantField(body.since, "since");
    // A range never ends later than now: events that come after it are delivered as they come.
    const untilAt = Math.min(body.until === undefined ? now : instantField(body.until, "until"), now);
    if (sinceAt >= untilAt) {
      throw invalidRequest("parameter_invalid", `since must be before until${body.until === undefined ? " (now)" : " and before now"}; ${isoTime(sinceAt)} is not before ${isoTime(untilAt)}.`, "since");
    }
    const since = isoTime(sinceAt);
    const until = isoTime(untilAt);
    const row = {
      id: newId("webhookRecovery", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      endpointId: id,
      since,
      until,
      status: "running" as const,
      total: 0,
      sent: 0,
      cursor: 0,
      createdAt: isoTime(now),
      updatedAt: now,
      completedAt: null,
    };
    const answer = serializeRecovery(row);
    const endpoint = owned(webhookEndpoints, auth, liveEndpoint(id));
    await commit(
      c,
      {
        statements: [
          guardExists(db, ENDPOINT_MISSING, webhookEndpoints, endpoint),
          guardExists(db, ENDPOINT_DISABLED, webhookEndpoints, and(endpoint, eq(webhookEndpoints.status, "active"))),
          // Older events are deleted by the retention purge (src/webhooks/retention.ts): a range that
          // starts before it would promise what can no longer be sent.
          guard(db, BEFORE_RETENTION, sql`${sinceAt} >= ${now} - (SELECT event_retention_days FROM accounts WHERE id = ${auth.accountId}) * ${DAY_MS}`),
          // One batch, one writer: of two requests at once, the second sees the first's row.
          guard(
            db,
            IN_PROGRESS,
            sql`NOT EXISTS (SELECT 1 FROM ${webhookRecoveries} AS r WHERE r.endpoint_id = ${id} AND r.status = 'running' AND r.since < ${until} AND ${since} < r.until)`,
          ),
          db.insert(webhookRecoveries).values(row),
        ],
      },
      202,
      answer,
      {
        failures: {
          [ENDPOINT_MISSING]: endpointMissing(id),
          [ENDPOINT_DISABLED]: () => conflict("endpoint_disabled", `Webhook endpoint ${id} is disabled: enable it (PATCH /api/webhooks/${id} with status active) before recovering what it missed.`),
          [BEFORE_RETENTION]: () =>
            invalidRequest(
              "since_before_retention",
              "since is before the account's event retention (event_retention_days, GET /api/account): older events are deleted and cannot be recovered.",
              "since",
            ),
          [IN_PROGRESS]: () =>
            conflict("recovery_in_progress", `A recovery of webhook endpoint ${id} over an overlapping range is still running: wait for it to be done (GET /api/webhooks/${id}/recoveries), or recover a range that does not overlap it.`),
        },
      },
    );
    // A lost message is not lost work: the cron resumes a running recovery that went quiet.
    await c.env.JOB_QUEUE.send(recoveryMessage(row.id)).catch((error) => {
      console.error(JSON.stringify({ request_id: c.var.requestId, message: "recovery enqueue failed; the cron will start it", recovery: row.id, error: String(error) }));
    });
    return c.json(answer, 202);
  });

  app.openapi(get, async function getWebhookRecovery(c) {
    const { id, rcv_id: recoveryId } = c.req.valid("param");
    const row = await readOne(
      c,
      c.var.db
        .select()
        .from(webhookRecoveries)
        .where(owned(webhookRecoveries, c.var.auth, and(eq(webhookRecoveries.id, recoveryId), eq(webhookRecoveries.endpointId, id))))
        .limit(1),
      "webhook recovery",
      recoveryId,
      "rcv_id",
    );
    return c.json(serializeRecovery(row), 200);
  });

  app.openapi(list, async function listWebhookRecoveries(c) {
    const { id } = c.req.valid("param");
    const page = await listOwned(c, {
      table: webhookRecoveries,
      query: c.req.valid("query"),
      filters: [[webhookRecoveries.endpointId, id]],
      validCursor: (cursor) => /^rcv_[0-9a-hjkmnp-tv-z]{26}$/.test(cursor),
      serialize: serializeRecovery,
    });
    // An empty page says nothing of the endpoint: another account's answers 404, as its reads do.
    if (page.data.length === 0) await loadEndpoint(c, id);
    return c.json(page, 200);
  });
}
