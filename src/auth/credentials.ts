// API keys and access tokens: generation, hashing, and lookup with a short per-isolate cache.
// The cache saves the D1 read on hot paths; revocation still takes effect at once because every
// query and every write batch also checks that the credential's key is live (src/db/scope.ts).
// Every credential names the shard its account lives on (src/db/shards.ts), which is where it is
// looked up: no directory is asked.
import { and, eq, isNull, sql } from "drizzle-orm";
import { type Db, createDb } from "../db/client";
import { isShard, shardChar, shardEnv, shardsNamedBy } from "../db/shards";
import type { Bindings, RuntimeBindings } from "../env";
import { keyIsLive } from "../db/scope";
import { prepared } from "../db/prepared";
import { accessTokens, accounts, apiKeys } from "../db/schema";
import type { Auth } from "../context";
import { randomToken, sha256Hex, timingSafeEqual } from "../lib/crypto";
import { ApiError, CredentialNotLive, accountMoving, authenticationError } from "../lib/errors";
import { clock } from "../lib/clock";

export const ACCESS_TOKEN_TTL_SECONDS = 900;
const CACHE_TTL_MS = 30_000;
const CACHE_MAX_ENTRIES = 10_000;

type Kind = "secret" | "restricted";
const KEY_PATTERN = /^(sk|rk)_(test|live)_[0-9A-Za-z]{32}$/;
const TOKEN_PATTERN = /^at_(test|live)_[0-9A-Za-z]{40}$/;

/** A key of an account on `shard`: its first random character names the shard. */
export function generateApiKey(kind: Kind, mode: "test" | "live", shard: number): string {
  return `${kind === "secret" ? "sk" : "rk"}_${mode}_${shardChar(shard)}${randomToken(31)}`;
}

export function generateAccessToken(mode: "test" | "live", shard: number): string {
  return `at_${mode}_${shardChar(shard)}${randomToken(39)}`;
}

/** The character a well-formed key or access token names its shard with: its first after the mode. */
const shardCharOf = (credential: string): string => credential.charAt(credential.indexOf("_", 3) + 1);

/** What may be shown of a key after creation: enough to recognise it, never enough to use it. */
export const displayPrefix = (secret: string) => `${secret.slice(0, 12)}…${secret.slice(-4)}`;

interface CacheEntry {
  hash: string;
  auth: Auth;
  /** Access tokens end; keys do not. Epoch ms. */
  expiresAt: number | null;
  cachedAt: number;
}

const cache = new Map<string, CacheEntry>();

export function forgetKey(keyId: string) {
  for (const [hash, entry] of cache) if (entry.auth.keyId === keyId) cache.delete(hash);
}

/** Drops this isolate's cached credentials of an account (it was paused or moved to another shard). */
export function forgetAccount(accountId: string) {
  for (const [hash, entry] of cache) if (entry.auth.accountId === accountId) cache.delete(hash);
}

function remember(entry: CacheEntry) {
  if (cache.size >= CACHE_MAX_ENTRIES) cache.delete(cache.keys().next().value as string);
  cache.set(entry.hash, entry);
}

// The lookups are prepared once per isolate (src/db/prepared.ts): they run on every cache miss.
const keyByHash = prepared((db) =>
  db
    .select({ key: apiKeys, apiVersion: accounts.apiVersion, movedTo: accounts.movedTo })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.hash, sql.placeholder("hash")), isNull(apiKeys.revokedAt)))
    .limit(1),
);
const tokenByHash = prepared((db) =>
  db
    .select({ token: accessTokens, mode: apiKeys.mode, pausedAt: apiKeys.pausedAt, apiVersion: accounts.apiVersion, movedTo: accounts.movedTo })
    .from(accessTokens)
    .innerJoin(apiKeys, eq(apiKeys.id, accessTokens.keyId))
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(accessTokens.hash, sql.placeholder("hash")), isNull(apiKeys.revokedAt)))
    .limit(1),
);

/**
 * The caller an API key acts as: its account, its mode and its scopes. A dashboard session acts as
 * the key it was opened with through this too (src/dashboard/session.ts).
 */
export function keyAuth(key: typeof apiKeys.$inferSelect, apiVersion: string, shard: number): Auth {
  return {
    shard,
    accountId: key.accountId,
    keyId: key.id,
    mode: key.mode,
    livemode: key.mode === "live",
    scopes: key.scopes,
    credential: key.kind === "secret" ? "secret_key" : "restricted_key",
    apiVersion,
  };
}

/** What a shard knows of a credential: the caller, or the shard its account moved to. */
type Found = CacheEntry | { movedTo: number } | null;

async function load(db: Db, credential: string, hash: string, shard: number): Promise<Found> {
  if (KEY_PATTERN.test(credential)) {
    const [found] = await keyByHash(db).execute({ hash });
    if (!found || !timingSafeEqual(found.key.hash, hash)) return null;
    if (found.movedTo !== null) return { movedTo: found.movedTo };
    if (found.key.pausedAt !== null) throw accountMoving();
    return {
      hash,
      auth: keyAuth(found.key, found.apiVersion, shard),
      expiresAt: null,
      cachedAt: clock.now(),
    };
  }
  if (TOKEN_PATTERN.test(credential)) {
    const [row] = await tokenByHash(db).execute({ hash });
    if (!row || !timingSafeEqual(row.token.hash, hash)) return null;
    if (row.movedTo !== null) return { movedTo: row.movedTo };
    if (row.pausedAt !== null) throw accountMoving();
    return {
      hash,
      auth: {
        shard,
        accountId: row.token.accountId,
        keyId: row.token.keyId,
        // An access token acts in its key's mode.
        mode: row.mode,
        livemode: row.mode === "live",
        scopes: row.token.scopes,
        credential: "access_token",
        apiVersion: row.apiVersion,
      },
      expiresAt: Date.parse(row.token.expiresAt),
      cachedAt: clock.now(),
    };
  }
  return null;
}

/**
 * Looks the credential up on the shard it names. One made before shards existed names a random
 * shard: when it is not found there, it is looked for on DB_0, where every account then lived.
 */
async function loadFromItsShard(env: RuntimeBindings | Bindings, credential: string, hash: string): Promise<CacheEntry | null> {
  const on = (shard: number) => load(createDb(shardEnv(env, shard).DB), credential, hash, shard);
  let found: Found = null;
  for (const shard of shardsNamedBy(env, shardCharOf(credential))) if (!found) found = await on(shard);
  // The account was moved (src/accounts/move.ts): its keys and tokens were copied with it. A shard
  // seen twice is a move stopped between the two halves of its switch: paused until it is run again.
  const seen = new Set<number>();
  while (found && "movedTo" in found) {
    if (seen.has(found.movedTo) || !isShard(env, found.movedTo)) throw accountMoving();
    seen.add(found.movedTo);
    found = await on(found.movedTo);
  }
  return found;
}

/** Resolves a bearer credential to the caller (with its account's shard), or throws the 401 to answer. */
export async function authenticate(env: RuntimeBindings | Bindings, credential: string, now: number): Promise<Auth> {
  const hash = await sha256Hex(credential);
  let entry = cache.get(hash);
  if (!entry || now - entry.cachedAt > CACHE_TTL_MS) {
    cache.delete(hash);
    entry = KEY_PATTERN.test(credential) || TOKEN_PATTERN.test(credential) ? ((await loadFromItsShard(env, credential, hash)) ?? undefined) : undefined;
    if (!entry) {
      throw authenticationError(
        "invalid_api_key",
        "The credential is not valid: it is unknown, malformed or revoked. Check the Authorization header.",
      );
    }
    remember(entry);
  }
  if (entry.expiresAt !== null && now >= entry.expiresAt) {
    throw authenticationError("token_expired", "The access token has expired. Request a new one from POST /oauth/token.");
  }
  return entry.auth;
}

/**
 * The key behind the credential failed a query's check: it leaves this isolate's cache at once, and
 * the error handler says why (explainDeadCredential).
 */
export function revokedCredential(keyId: string): CredentialNotLive {
  forgetKey(keyId);
  return new CredentialNotLive(keyId);
}

/** Called when a scoped read came back empty: was it revocation (401), or really nothing there? */
export async function ensureLive(db: Db, auth: Auth): Promise<void> {
  if (await keyIsLive(db, auth.keyId)) return;
  throw revokedCredential(auth.keyId);
}

const keyState = prepared((db) =>
  db
    .select({ revokedAt: apiKeys.revokedAt, pausedAt: apiKeys.pausedAt, movedTo: accounts.movedTo })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(eq(apiKeys.id, sql.placeholder("keyId"))),
);

/**
 * Why a key failed a check: revoked (the 401 as thrown), or paused because its account is moving
 * between shards, or has moved (503 with Retry-After: the retry finds the account where it is now).
 */
export async function explainDeadCredential(db: Db, error: CredentialNotLive): Promise<ApiError> {
  forgetKey(error.keyId);
  const [state] = await keyState(db).execute({ keyId: error.keyId });
  return state && state.revokedAt === null && (state.pausedAt !== null || state.movedTo !== null) ? accountMoving() : error;
}
