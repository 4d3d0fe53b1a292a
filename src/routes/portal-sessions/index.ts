// Customer portal sessions (DESIGN.md "Books that close"; the page is src/pages/portal.tsx):
// POST /portal/sessions makes a one-hour link to the hosted page where a user sees their
// subscriptions, invoices and cards, and acts on them through this API's own routes.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import type { AppEnv } from "../../context";
import { guardExists } from "../../db/batch";
import { portalSessions, users } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { invalidRequest, notFound } from "../../lib/errors";
import { checkRedirectUrl } from "../../payments/checkout";
import { PORTAL_SESSION_LIFETIME_MS, type PortalSessionRow, serializePortalSession } from "../../pages/portal-links";
import { newPageSecret } from "../../pages/hosted";
import { publicUrl } from "../../pages/public-url";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commitAndRespond } from "../write-path";
import { CreatePortalSessionBody, PortalSessionListQuery, PortalSessionSchema } from "./schema";

const tags = ["Customer portal"];
const USER_MISSING = "user_missing";

const create = apiRoute({
  method: "post",
  path: "/portal/sessions",
  tags,
  operationId: "createPortalSession",
  summary: "Create a customer portal session",
  description:
    "A one-hour link to a page Tender hosts where the user sees their subscriptions, invoices (PDFs; an open one links to its hosted page to pay it) and saved cards, adds a card, makes one the default, removes one and cancels a subscription at the end of its period. Send the user to the answer's url: it carries its own secret, no API key; after expires_at it answers 410. " +
    "Everything the page does is this API's ordinary action, as the key that created the session, with its ordinary events (payment_method.attached, payment_method.detached, customer.updated, subscription_updated). return_url must be https (http://localhost and http://127.0.0.1 in development only). A user of another account or mode answers 404.",
  scope: "portal_sessions:write",
  request: jsonBodyOf(CreatePortalSessionBody),
  responses: { 201: json(PortalSessionSchema, "The session, with its url.") },
});

const list = apiRoute({
  method: "get",
  path: "/portal/sessions",
  tags,
  operationId: "listPortalSessions",
  summary: "List customer portal sessions",
  description: "Portal sessions, newest first, optionally one user's (expired ones included: their url answers 410).",
  scope: "portal_sessions:read",
  request: { query: PortalSessionListQuery },
  responses: { 200: json(listSchema(PortalSessionSchema, "PortalSessionList"), "A page of portal sessions, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/portal/sessions/{id}",
  tags,
  operationId: "getPortalSession",
  summary: "Read a customer portal session",
  scope: "portal_sessions:read",
  request: { params: idParam("portal session", "bps_01jd2x4k5m6n7p8q9r0s1t2v3w") },
  responses: { 200: json(PortalSessionSchema, "The portal session.") },
});

/** Where a session's url points: PUBLIC_URL, else the origin of the request that asks. */
const originOf = (c: { env: AppEnv["Bindings"]; req: { url: string } }) => publicUrl(c.env) ?? new URL(c.req.url).origin;

export function registerPortalSessions(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createPortalSession(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const checked = checkRedirectUrl(body.return_url, isDevelopment(c.env));
    if (!checked.ok) throw invalidRequest("url_invalid", `return_url ${checked.message}.`, "return_url");
    const missingUser = () => notFound("user", body.user_id, "user_id");
    if (!hasPrefix(body.user_id, "user")) throw missingUser();
    const row: PortalSessionRow = {
      id: newId("portalSession", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      keyId: auth.keyId,
      pageSecret: newPageSecret(),
      userId: body.user_id,
      returnUrl: checked.url,
      expiresAt: isoTime(now + PORTAL_SESSION_LIFETIME_MS),
      createdAt: isoTime(now),
    };
    // One round trip: the user is checked (of this account and mode) in the batch that writes the session.
    return commitAndRespond(
      c,
      { statements: [guardExists(db, USER_MISSING, users, owned(users, auth, eq(users.id, body.user_id))), db.insert(portalSessions).values(row)] },
      201,
      serializePortalSession(row, originOf(c)),
      { failures: { [USER_MISSING]: missingUser } },
    );
  });

  app.openapi(list, async function listPortalSessions(c) {
    const query = c.req.valid("query");
    const origin = originOf(c);
    const page = await listOwned(c, {
      table: portalSessions,
      query,
      filters: [[portalSessions.userId, query.user_id]],
      validCursor: (id) => hasPrefix(id, "portalSession"),
      serialize: (row) => serializePortalSession(row, origin),
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getPortalSession(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, portalSessions, id, "portal session");
    return c.json(serializePortalSession(row, originOf(c)), 200);
  });
}
