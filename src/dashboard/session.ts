// Dashboard sign-in: an API key is exchanged for a session. The browser holds an opaque random
// token in a cookie (HttpOnly, SameSite=Strict, Secure outside development, Path=/dashboard); D1
// holds only its SHA-256, the key it was opened with, and an expiry (dashboard_sessions). Every
// request looks the session up joined to its key, unrevoked, so revoking the key ends the session
// at once; sign-out deletes the row. The session acts with exactly the key's account, mode and
// scopes. The CSRF token of its forms is derived from the token (src/dashboard/csrf.ts).
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { and, eq, gt, isNull, lte, or } from "drizzle-orm";
import { authenticate, keyAuth } from "../auth/credentials";
import type { Auth } from "../context";
import { accounts, apiKeys, dashboardSessions } from "../db/schema";
import { isDevelopment } from "../env";
import { clock, isoTime } from "../lib/clock";
import { randomToken, sha256Hex } from "../lib/crypto";
import { ApiError } from "../lib/errors";
import type { DashboardSession, DashEnv } from "./context";

export type { DashboardSession } from "./context";

export const SESSION_COOKIE = "tender_session";
/** A session lasts 8 hours from sign-in (a working day), then the key must be entered again. */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
const COOKIE_PATH = "/dashboard";
const API_KEY = /^(sk|rk)_(test|live)_[0-9A-Za-z]{32}$/;
const SESSION_TOKEN = /^[0-9A-Za-z]{43}$/;


export class SignInRefused extends Error {
  constructor(
    readonly status: 400 | 401,
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

/** Checks the key as the API would (unknown, malformed, revoked: refused), and opens a session for it. */
export async function signIn(c: Context<DashEnv>, submittedKey: string): Promise<void> {
  const key = submittedKey.trim();
  if (!key) throw new SignInRefused(400, "Enter an API key: the sk_test_… key from sign-up, or a restricted rk_… key.", "parameter_missing");
  if (/^at_/.test(key)) throw new SignInRefused(400, "That is an access token. Sign in with an API key (sk_… or rk_…) instead.", "api_key_required");
  if (!API_KEY.test(key)) throw new SignInRefused(401, "That is not an API key: keys look like sk_test_ followed by 32 letters and digits.", "invalid_api_key");
  const now = clock.now();
  let auth: Auth;
  try {
    auth = await authenticate(c.var.db, key, now);
  } catch (error) {
    if (error instanceof ApiError) throw new SignInRefused(401, "This API key is not valid: it is unknown or has been revoked.", error.code, c.var.requestId);
    throw error;
  }
  const token = randomToken(43);
  const tokenHash = await sha256Hex(token);
  const { db } = c.var;
  await db.batch([
    // Sessions of this key that have run out go when the key signs in again.
    db.delete(dashboardSessions).where(and(eq(dashboardSessions.keyId, auth.keyId), lte(dashboardSessions.expiresAt, now))),
    db.insert(dashboardSessions).values({ tokenHash, accountId: auth.accountId, keyId: auth.keyId, createdAt: isoTime(now), expiresAt: now + SESSION_TTL_MS }),
  ]);
  setCookie(c, SESSION_COOKIE, token, { ...cookieOptions(c), maxAge: SESSION_TTL_MS / 1000 });
}

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
  const [row] = await c.var.db
    .select({ session: dashboardSessions, key: apiKeys, accountName: accounts.name, apiVersion: accounts.apiVersion })
    .from(dashboardSessions)
    .innerJoin(apiKeys, and(eq(apiKeys.id, dashboardSessions.keyId), isNull(apiKeys.revokedAt)))
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(dashboardSessions.tokenHash, tokenHash), gt(dashboardSessions.expiresAt, now)))
    .limit(1);
  if (!row || row.key.accountId !== row.session.accountId) {
    // Expired, signed out, or its key revoked: the cookie is of no further use.
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return undefined;
  }
  return {
    tokenHash,
    // The session acts as its key, in the key's mode.
    auth: keyAuth(row.key, row.apiVersion),
    accountName: row.accountName,
    keyName: row.key.name,
    keyPrefix: row.key.prefix,
    expiresAt: row.session.expiresAt,
    csrfToken: await csrfTokenOf(token),
  };
}

/** Sign-out: the session row is deleted (with any other expired one of the key) and the cookie cleared. */
export async function signOut(c: Context<DashEnv>, session: DashboardSession): Promise<void> {
  await c.var.db
    .delete(dashboardSessions)
    .where(or(eq(dashboardSessions.tokenHash, session.tokenHash), and(eq(dashboardSessions.keyId, session.auth.keyId), lte(dashboardSessions.expiresAt, clock.now()))));
  deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
}
