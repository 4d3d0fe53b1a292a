// POST /api/accounts: sign-up. Open in development, behind ADMIN_TOKEN elsewhere; the answer shows
// the account's two secret keys once: the test-mode one and the live-mode one.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { generateApiKey, displayPrefix } from "../../auth/credentials";
import { ALL_SCOPES } from "../../auth/scopes";
import { runBatch } from "../../db/batch";
import { accounts, apiKeys } from "../../db/schema";
import { newId } from "../../domain/ids";
import { CURRENT_API_VERSION } from "../../domain/api-versions";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { sha256Hex, timingSafeEqual } from "../../lib/crypto";
import { authenticationError } from "../../lib/errors";
import { bearerCredential, openShard } from "../../middleware/auth";
import { SHARD_HEADER } from "../../middleware/request";
import { signupShard } from "../../db/shards";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { AccountSchema, SignupBody } from "./schema";

const route = apiRoute({
  method: "post",
  path: "/api/accounts",
  tags: ["Accounts"],
  operationId: "createAccount",
  summary: "Sign up",
  description:
    "Creates an account and returns its two secret keys, each shown once: `api_key` (test mode, sk_test_…) and `live_api_key` (live mode, sk_live_…). Each mode sees only its own objects. Open in development; elsewhere it needs 'Authorization: Bearer <ADMIN_TOKEN>'. Idempotency-Key does not apply: there is no account to scope it to yet. The account is placed on one of the shards open to sign-up, at random; in development a `Tender-Shard: <n>` request header chooses it.",
  public: true,
  request: jsonBodyOf(SignupBody),
  responses: { 201: json(AccountSchema, "The account, with its test and live secret keys.") },
});

/** Sign-up and account moves are open in development, and need the ADMIN_TOKEN elsewhere. */
export function requireAdmin(c: Context<AppEnv>, what: string) {
  if (isDevelopment(c.env)) return;
  const token = bearerCredential(c.req.header("authorization"));
  if (!c.env.ADMIN_TOKEN || !timingSafeEqual(token, c.env.ADMIN_TOKEN)) {
    throw authenticationError("invalid_admin_token", `${what} needs the ADMIN_TOKEN outside development.`);
  }
}

export function registerCreateAccount(app: OpenAPIHono<AppEnv>) {
  app.openapi(route, async function createAccount(c) {
    requireAdmin(c, "Sign-up");
    const body = c.req.valid("json");
    const shard = signupShard(c.env, isDevelopment(c.env) ? c.req.header(SHARD_HEADER) : undefined);
    openShard(c, shard);
    const now = clock.now();
    const accountId = newId("account", now);
    const apiKey = generateApiKey("secret", "test", shard);
    const liveApiKey = generateApiKey("secret", "live", shard);
    const secretKey = (secret: string, hash: string, mode: "test" | "live", name: string) =>
      c.var.db.insert(apiKeys).values({
        id: newId("apiKey", now),
        accountId,
        name,
        kind: "secret",
        mode,
        prefix: displayPrefix(secret),
        hash,
        scopes: [ALL_SCOPES],
        createdAt: isoTime(now),
      });
    const [testHash, liveHash] = await Promise.all([sha256Hex(apiKey), sha256Hex(liveApiKey)]);
    await runBatch(c.var.db, [
      c.var.db.insert(accounts).values({ id: accountId, name: body.name, email: body.email, apiVersion: CURRENT_API_VERSION, createdAt: isoTime(now) }),
      secretKey(apiKey, testHash, "test", "Default secret key"),
      secretKey(liveApiKey, liveHash, "live", "Default live secret key"),
    ]);
    return c.json(
      { id: accountId, object: "account" as const, name: body.name, email: body.email, created_at: isoTime(now), api_key: apiKey, live_api_key: liveApiKey },
      201,
    );
  });
}
