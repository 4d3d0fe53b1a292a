// API keys: create a restricted key within the caller's scopes (its secret shown once), list, read,
// and revoke a key whose scopes the caller holds. Keys belong to a mode as every object does: a
// key is created in its creator's mode, and sees, lists and revokes keys of its own mode only;
// only a live secret key creates live keys.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq, sql } from "drizzle-orm";
import { displayPrefix, forgetKey, generateApiKey } from "../../auth/credentials";
import { grantedScopes, scopesWithin } from "../../auth/scopes";
import { apiKeys } from "../../db/schema";
import { owned } from "../../db/scope";
import { insertRow } from "../../db/prepared";
import { listOwned, readById } from "../reads";
import { hasPrefix, newId } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { sha256Hex } from "../../lib/crypto";
import { ApiError, notFound } from "../../lib/errors";
import { guard, guardExists, type Statement } from "../../db/batch";
import { listQuery, listSchema } from "../pagination";
import { commit, commitAndRespond } from "../write-path";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { CreateKeyBody, CreatedKeySchema, KeySchema, keyJsonSql, serializeKey } from "./schema";

const tags = ["API keys"];
const keyId = idParam("API key", "key_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/api/keys",
  tags,
  operationId: "createKey",
  summary: "Create a restricted key",
  description:
    "Creates a restricted key in the caller's mode (rk_test_… with a test key, rk_live_… with a live one) with the given scopes, which must lie within the caller's own. Only a live secret key (sk_live_…) creates live keys: a live restricted key or access token answers 403 live_key_requires_secret_key.",
  scope: "keys:write",
  request: jsonBodyOf(CreateKeyBody),
  responses: { 201: json(CreatedKeySchema, "The key, with its secret shown once.") },
});

const list = apiRoute({
  method: "get",
  path: "/api/keys",
  tags,
  operationId: "listKeys",
  summary: "List API keys",
  description: "The keys of the caller's mode: a test key lists test keys, a live key live keys.",
  scope: "keys:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(KeySchema, "ApiKeyList"), "A page of keys, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/api/keys/{id}",
  tags,
  operationId: "getKey",
  summary: "Read an API key",
  scope: "keys:read",
  request: { params: keyId },
  responses: { 200: json(KeySchema, "The key (never its secret).") },
});

const revoke = apiRoute({
  method: "delete",
  path: "/api/keys/{id}",
  tags,
  operationId: "revokeKey",
  summary: "Revoke an API key",
  description:
    "Revokes the key at once: it and every access token minted from it stop working on the next request. A key may revoke only keys whose scopes it holds itself: a restricted key cannot revoke the secret key or a wider key (403 scope_exceeds_caller).",
  scope: "keys:write",
  request: { params: keyId },
  responses: { 200: json(KeySchema, "The revoked key.") },
});

export function registerKeys(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createKey(c) {
    const { auth, db } = c.var;
    const body = c.req.valid("json");
    if (auth.mode === "live" && auth.credential !== "secret_key") {
      throw new ApiError(
        403,
        "permission_error",
        "live_key_requires_secret_key",
        "Only the live secret key (sk_live_…) creates live keys; use it, not a restricted key or an access token.",
      );
    }
    if (!scopesWithin(auth.scopes, body.scopes)) {
      throw new ApiError(403, "permission_error", "scope_exceeds_caller", "A key cannot be given scopes its creator does not hold.", "scopes");
    }
    const now = clock.now();
    const secret = generateApiKey("restricted", auth.mode, auth.shard);
    const row = {
      id: newId("apiKey", now),
      accountId: auth.accountId,
      name: body.name ?? null,
      kind: "restricted" as const,
      mode: auth.mode,
      prefix: displayPrefix(secret),
      hash: await sha256Hex(secret),
      scopes: [...new Set(body.scopes)],
      createdAt: isoTime(now),
      revokedAt: null,
      pausedAt: null,
    };
    const shown = { ...serializeKey(row), secret };
    return commitAndRespond(c, { statements: [insertRow(db, apiKeys, row)] }, 201, shown, {
      storedBody: { ...shown, secret: null },
    });
  });

  app.openapi(list, async function listKeys(c) {
    const page = await listOwned(c, {
      table: apiKeys,
      query: c.req.valid("query"),
      validCursor: (id) => hasPrefix(id, "apiKey"),
      serialize: serializeKey,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getKey(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, apiKeys, id, "API key");
    return c.json(serializeKey(row), 200);
  });

  app.openapi(revoke, async function revokeKey(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const mine = owned(apiKeys, auth, eq(apiKeys.id, id));
    // One round trip: the batch checks that the key exists and that the caller holds every scope
    // it has, revokes it (a revoked key keeps its first revocation time), and stores the answer.
    const statements: Statement[] = [guardExists(db, KEY_MISSING, apiKeys, mine)];
    const granted = grantedScopes(auth.scopes);
    if (granted !== "all") {
      const held = sql.join(granted.map((scope) => sql`${scope}`), sql`, `);
      statements.push(
        guard(db, SCOPE_EXCEEDS_CALLER, sql`NOT EXISTS (SELECT 1 FROM ${apiKeys}, json_each(${apiKeys.scopes}) AS scope WHERE ${mine} AND scope.value NOT IN (${held}))`),
      );
    }
    const { returned } = await commit(
      c,
      {
        statements,
        returning: db.update(apiKeys).set({ revokedAt: sql`COALESCE(${apiKeys.revokedAt}, ${isoTime(clock.now())})` }).where(mine).returning(),
      },
      200,
      keyJsonSql(id),
      {
        failures: {
          [KEY_MISSING]: () => notFound("API key", id, "id"),
          [SCOPE_EXCEEDS_CALLER]: () =>
            new ApiError(403, "permission_error", "scope_exceeds_caller", "A key can revoke only keys whose scopes it holds itself.", "id"),
        },
      },
    );
    forgetKey(id);
    const [revoked] = returned as (typeof apiKeys.$inferSelect)[];
    return c.json(serializeKey(revoked), 200);
  });
}

const KEY_MISSING = "key_missing";
const SCOPE_EXCEEDS_CALLER = "scope_exceeds_caller";
