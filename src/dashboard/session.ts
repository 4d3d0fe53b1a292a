// Dashboard sign-in and the mode switch: an API key is exchanged for a session. The browser holds
// an opaque random token in a cookie (HttpOnly, SameSite=Strict, Secure outside development,
// Path=/dashboard); D1 holds only its SHA-256, the keys the session holds (at most one per mode,
// both of one account: the key it was signed in with, and the other mode's key added from the
// switch), which of them acts, and an expiry (dashboard_sessions). Every request looks the session
// up joined to each key, unrevoked, of the session's account and of the key's column's mode, so
// revoking a key ends its mode in the session at once (the session moves to the other mode, or
// ends when it holds no live key); sign-out deletes the row. The session acts with exactly the
// acting key's account, mode and scopes. The CSRF token of its forms is derived from the token
// (src/dashboard/csrf.ts).
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { type SQL, and, eq, gt, isNull, lte, or, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import { authenticate, keyAuth } from "../auth/credentials";
import { shardChar, shardsNamedBy } from "../db/shards";
import { openShard } from "../middleware/auth";
import type { Auth } from "../context";
import { accounts, apiKeys, dashboardSessions } from "../db/schema";
import { isDevelopment } from "../env";
import { clock, isoTime } from "../lib/clock";
import { randomToken, sha256Hex } from "../lib/crypto";
import { ApiError } from "../lib/errors";
import type { DashboardSession, DashEnv, Mode, SessionKey } from "./context";

export type { DashboardSession, Mode } from "./context";

export const SESSION_COOKIE = "tender_session";
/** A session lasts 8 hours from sign-in (a working day), then the key must be entered again. */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
const COOKIE_PATH = "/dashboard";
const API_KEY = /^(sk|rk)_(test|live)_[0-9A-Za-z]{32}$/;
const SESSION_TOKEN = /^[0-9A-Za-z]{43}$/;

export const MODES: readonly Mode[] = ["test", "live"];
export const otherMode = (mode: Mode): Mode => (mode === "test" ? "live" : "test");
const keyColumn = (mode: Mode) => (mode === "live" ? dashboardSessions.liveKeyId : dashboardSessions.testKeyId);

export class SignInRefused extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 409 | 503,
    message: string,
    readonly code: string,
    readonly requestId?: string,
  ) {
    super(message);
  }
}

export const csrfTokenOf = (sessionToken: string) => sha256Hex(`tender-dashboard-csrf:${sessionToken}`);

function cookieOptions(c: Context<DashEnv>) {
  return { path: COOKIE_PATH, httpOnly: true, sameSite: "Strict" as const, secure: !isDevelopment(c.env) };
}

/** Checks a submitted key as the API would (unknown, malformed, revoked: refused) and resolves it. */
async function checkKey(c: Context<DashEnv>, submittedKey: string, example: string): Promise<Auth> {
  const key = submittedKey.trim();
  if (!key) throw new SignInRefused(400, `Enter an API key: ${example}.`, "parameter_missing");
  if (/^at_/.test(key)) throw new SignInRefused(400, "That is an access token. Enter an API key (sk_… or rk_…) instead: a token would expire within 15 minutes.", "api_key_required");
  if (!API_KEY.test(key)) throw new SignInRefused(401, "That is not an API key: keys look like sk_test_ followed by 32 letters and digits.", "invalid_api_key");
  try {
    return await authenticate(c.env, key, clock.now());
  } catch (error) {
    if (error instanceof ApiError && error.status === 503) throw new SignInRefused(503, "This account is being moved to another database and is paused for a moment. Try again in a few seconds.", error.code, c.var.requestId);
    if (error instanceof ApiError) throw new SignInRefused(401, "This API key is not valid: it is unknown or has been revoked.", error.code, c.var.requestId);
    throw error;
  }
}

/** Opens a session for a key, acting in the key's mode; the other mode's key can be added later. */
export async function signIn(c: Context<DashEnv>, submittedKey: string): Promise<void> {
  const auth = await checkKey(c, submittedKey, "the sk_test_… or sk_live_… key from sign-up, or a restricted rk_… key");
  const now = clock.now();
  // Like a key, the token's first character names the shard the session lives on (src/db/shards.ts).
  const token = `${shardChar(auth.shard)}${randomToken(42)}`;
  const tokenHash = await sha256Hex(token);
  openShard(c as never, auth.shard);
  const { db } = c.var;
  await db.batch([
    // Sessions of this key that have run out go when the key signs in again.
    db.delete(dashboardSessions).where(and(heldBy(auth.keyId), lte(dashboardSessions.expiresAt, now))),
    db.insert(dashboardSessions).values({
      tokenHash,
      accountId: auth.accountId,
      testKeyId: auth.mode === "test" ? auth.keyId : null,
      liveKeyId: auth.mode === "live" ? auth.keyId : null,
      livemode: auth.livemode,
      createdAt: isoTime(now),
      expiresAt: now + SESSION_TTL_MS,
    }),
  ]);
  setCookie(c, SESSION_COOKIE, token, { ...cookieOptions(c), maxAge: SESSION_TTL_MS / 1000 });
}

/** Sessions that hold this key, in either mode. */
const heldBy = (keyId: string) => or(eq(dashboardSessions.testKeyId, keyId), eq(dashboardSessions.liveKeyId, keyId)) as SQL;

const testKey = alias(apiKeys, "test_key");
const liveKey = alias(apiKeys, "live_key");

const sessionKey = (key: typeof apiKeys.$inferSelect): SessionKey => ({ id: key.id, name: key.name, prefix: key.prefix, restricted: key.kind === "restricted" });

/** The session of this request, if its cookie names one that is unexpired and whose key is live. */
export async function loadSession(c: Context<DashEnv>): Promise<DashboardSession | undefined> {
  const token = getCookie(c, SESSION_COOKIE);
  if (!token) return undefined;
  if (!SESSION_TOKEN.test(token)) {
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return undefined;
  }
  const tokenHash = await sha256Hex(token);
  const now = clock.now();
  // Each key counts only when it is unrevoked, of the session's account, and of its column's mode.
  const held = (key: typeof testKey | typeof liveKey, column: typeof dashboardSessions.testKeyId | typeof dashboardSessions.liveKeyId, mode: Mode) =>
    and(eq(key.id, column), isNull(key.revokedAt), eq(key.accountId, dashboardSessions.accountId), eq(key.mode, mode));
  const find = async (shard: number) => {
    openShard(c as never, shard);
    const [found] = await c.var.db
      .select({ session: dashboardSessions, test: testKey, live: liveKey, accountName: accounts.name, apiVersion: accounts.apiVersion })
      .from(dashboardSessions)
      .innerJoin(accounts, eq(accounts.id, dashboardSessions.accountId))
      .leftJoin(testKey, held(testKey, dashboardSessions.testKeyId, "test"))
      .leftJoin(liveKey, held(liveKey, dashboardSessions.liveKeyId, "live"))
      .where(and(eq(dashboardSessions.tokenHash, tokenHash), gt(dashboardSessions.expiresAt, now)))
      .limit(1);
    return found;
  };
  // The token's first character names its shard (or, made before shards existed, a random one).
  let row: Awaited<ReturnType<typeof find>> | undefined;
  for (const shard of shardsNamedBy(c.env, token[0])) if (!row) row = await find(shard);
  const { db } = c.var;
  const keys = { test: row?.test ?? undefined, live: row?.live ?? undefined };
  const chosen: Mode | undefined = row ? (row.session.livemode ? "live" : "test") : undefined;
  // The chosen mode's key was revoked: its mode has ended, and the session acts in the other
  // mode if it still holds that mode's key.
  const acting = chosen && (keys[chosen] ? chosen : keys[otherMode(chosen)] ? otherMode(chosen) : undefined);
  if (!row || !chosen || !acting) {
    // Expired, signed out, or every key it held revoked: the cookie is of no further use.
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return undefined;
  }
  if (acting !== chosen) {
    await db
      .update(dashboardSessions)
      .set({ livemode: acting === "live" })
      .where(and(eq(dashboardSessions.tokenHash, tokenHash), eq(dashboardSessions.livemode, chosen === "live")));
  }
  const key = keys[acting]!;
  return {
    tokenHash,
    // The session acts as its acting key, in that key's mode.
    auth: keyAuth(key, row.apiVersion, c.env.SHARD),
    accountName: row.accountName,
    keyName: key.name,
    keyPrefix: key.prefix,
    keys: Object.fromEntries(MODES.flatMap((mode) => (keys[mode] ? [[mode, sessionKey(keys[mode])]] : []))),
    modeEnded: acting !== chosen ? chosen : undefined,
    expiresAt: row.session.expiresAt,
    csrfToken: await csrfTokenOf(token),
  };
}

/** The switch: the session acts in `mode` from now on. False when it holds no key of that mode. */
export async function switchMode(c: Context<DashEnv>, session: DashboardSession, mode: Mode): Promise<boolean> {
  if (!session.keys[mode]) return false;
  const changed = await c.var.db
    .update(dashboardSessions)
    .set({ livemode: mode === "live" })
    .where(and(eq(dashboardSessions.tokenHash, session.tokenHash), sql`${keyColumn(mode)} IS NOT NULL`))
    .returning({ tokenHash: dashboardSessions.tokenHash });
  return changed.length === 1;
}

/**
 * Adds the other mode's key to the session (from the switch: "View live data" asks for a live key
 * when the session holds none) and acts in its mode. The key must be valid, of that mode, and of
 * the session's account; a mode whose key the session still holds is not replaced. The update
 * checks the key again, unrevoked and of this account and mode, in the same statement.
 */
export async function addKey(c: Context<DashEnv>, session: DashboardSession, mode: Mode, submittedKey: string): Promise<SessionKey> {
  const prefixes = mode === "live" ? "sk_live_… or rk_live_…" : "sk_test_… or rk_test_…";
  const auth = await checkKey(c, submittedKey, `a ${mode} key of this account (${prefixes})`);
  if (auth.mode !== mode) {
    throw new SignInRefused(400, `That is a ${auth.mode} key. To view ${mode} data, enter a ${mode} key of this account (${prefixes}).`, "key_mode_mismatch");
  }
  if (auth.accountId !== session.auth.accountId) {
    throw new SignInRefused(403, "That key belongs to another account. Both keys of a session must belong to the account it was signed in to: sign out, then sign in with that key.", "key_account_mismatch");
  }
  const held = session.keys[mode];
  if (held) throw new SignInRefused(409, `This session already holds a ${mode} key (${held.prefix}). Sign out to use another one.`, "mode_key_held");
  const column = keyColumn(mode);
  const added = await c.var.db
    .update(dashboardSessions)
    .set(mode === "live" ? { liveKeyId: auth.keyId, livemode: true } : { testKeyId: auth.keyId, livemode: false })
    .where(
      and(
        eq(dashboardSessions.tokenHash, session.tokenHash),
        eq(dashboardSessions.accountId, auth.accountId),
        gt(dashboardSessions.expiresAt, clock.now()),
        sql`EXISTS (SELECT 1 FROM api_keys AS added WHERE added.id = ${auth.keyId} AND added.account_id = ${auth.accountId} AND added.mode = ${mode} AND added.revoked_at IS NULL)`,
        sql`NOT EXISTS (SELECT 1 FROM api_keys AS held WHERE held.id = ${column} AND held.revoked_at IS NULL)`,
      ),
    )
    .returning({ tokenHash: dashboardSessions.tokenHash });
  if (added.length !== 1) throw new SignInRefused(409, "The session or the key changed meanwhile (signed out, expired, revoked, or a key added in another tab). Reload the page and try again.", "session_changed");
  const [key] = await c.var.db.select().from(apiKeys).where(eq(apiKeys.id, auth.keyId)).limit(1);
  return sessionKey(key);
}

/** Sign-out: the session row is deleted (with any other expired one of its keys) and the cookie cleared. */
export async function signOut(c: Context<DashEnv>, session: DashboardSession): Promise<void> {
  const expiredOfItsKeys = Object.values(session.keys).map((key) => and(heldBy(key.id), lte(dashboardSessions.expiresAt, clock.now())));
  await c.var.db.delete(dashboardSessions).where(or(eq(dashboardSessions.tokenHash, session.tokenHash), ...expiredOfItsKeys));
  deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
}
