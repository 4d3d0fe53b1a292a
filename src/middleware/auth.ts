// Bearer authentication for every /api route, then the per-key rate limit. An in-process request
// from the dashboard carries its session's key as a principal instead (src/auth/principal.ts).
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { createDb } from "../db/client";
import { shardEnv } from "../db/shards";
import { authenticate } from "../auth/credentials";
import { principalOf } from "../auth/principal";
import { hasScope, type Scope } from "../auth/scopes";
import type { AppEnv } from "../context";
import { ApiError, authenticationError, permissionError } from "../lib/errors";
import { clock } from "../lib/clock";
import { rateLimiterOf } from "../lib/rate-limiter";

export function bearerCredential(header: string | undefined): string {
  if (!header) {
    throw authenticationError(
      "missing_credential",
      "No credential was sent. Send your API key or access token as 'Authorization: Bearer <credential>'.",
    );
  }
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  if (!match) {
    throw authenticationError("malformed_credential", "The Authorization header must be 'Bearer <credential>'.");
  }
  return match[1];
}

/**
 * The request works on `shard` from here on: its environment becomes that shard's (src/db/shards.ts)
 * and `db` its database. An environment already of that shard is kept as it is.
 */
export function openShard(c: Context<AppEnv>, shard: number): void {
  if (c.env.SHARD !== shard) c.env = shardEnv(c.env, shard);
  c.set("db", createDb(c.env.DB));
}

export const authenticated = createMiddleware<AppEnv>(async (c, next) => {
  const auth = principalOf(c.env) ?? (await authenticate(c.env, bearerCredential(c.req.header("authorization")), clock.now()));
  c.set("auth", auth);
  openShard(c, auth.shard);
  const { success } = await rateLimiterOf(c.env).limit({ key: auth.keyId });
  if (!success) {
    throw new ApiError(429, "rate_limit_error", "rate_limited", "Too many requests with this key. Slow down and retry after the delay in Retry-After.", undefined, {
      "Retry-After": "10",
    });
  }
  return next();
});

/** Route middleware: the credential must hold `scope`. */
export const requireScope = (scope: Scope) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (!hasScope(c.var.auth.scopes, scope)) throw permissionError(scope);
    return next();
  });
