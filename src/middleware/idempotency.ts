// One idempotency mechanism for every POST, PUT, PATCH and DELETE. The key is claimed with an
// INSERT guarded by the (account, key) primary key, never read-then-write. The route's own write
// batch completes the record (src/lib/respond.ts), so a committed change and its stored answer
// cannot disagree. Answers that certainly changed nothing (validation, auth, conflicts, a refused
// guard) release the claim, so a corrected retry with the same key can go through, as Stripe does.
//
// An unknown outcome never frees the key. When the write batch failed without saying whether it
// committed (the connection dropped after the commit), the record is read again: completed by
// that batch, its answer is replayed; otherwise the key stays claimed, retries answer 409 until
// IDEMPOTENCY_LOCK_MS has passed, and only then may a retry of the same request take it over.
//
// Stored answers keep no secret: fields that show a secret once (`secret`, `api_key`,
// `access_token`) are stored as null, so a replay shows them as null.
import { SQL, and, eq, sql } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import type { Db } from "../db/client";
import { idempotencyKeys } from "../db/schema";
import { guard, type Statement } from "../db/batch";
import { liveCredential } from "../db/scope";
import { ensureLive } from "../auth/credentials";
import type { AppEnv, IdempotencyClaim } from "../context";
import { hmacSha256Hex, randomToken, sha256Hex } from "../lib/crypto";
import { ApiError, conflict, invalidRequest } from "../lib/errors";
import { cardFingerprintSecret } from "../env";
import { clock } from "../lib/clock";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A claim older than this belongs to a request that died before its batch; it may be taken over. */
export const IDEMPOTENCY_LOCK_MS = 60_000;
export const IDEMPOTENCY_CLAIM_LOST = "idempotency_claim_lost";
const completedAndExpired = (now: number) => sql`(${idempotencyKeys.status} = 'completed' AND ${idempotencyKeys.expiresAt} <= ${now})`;
const CARD_FIELDS = new Set(["card_number", "cvv"]);
const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Canonical JSON (sorted keys) with card fields replaced by their keyed hash. */
async function canonical(value: unknown, secret: string): Promise<string> {
  if (Array.isArray(value)) return `[${(await Promise.all(value.map((v) => canonical(v, secret)))).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.keys(value as object)
      .sort()
      .map(async (key) => {
        const field = (value as Record<string, unknown>)[key];
        // A card field enters only as a keyed hash, whatever JSON type it was sent as.
        const text = CARD_FIELDS.has(key) && (typeof field === "string" || typeof field === "number")
          ? JSON.stringify(`hmac:${await hmacSha256Hex(secret, `${typeof field}:${field}`)}`)
          : await canonical(field, secret);
        return `${JSON.stringify(key)}:${text}`;
      });
    return `{${(await Promise.all(entries)).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** Fields that show a secret once; a stored answer keeps them as null. */
const SECRET_FIELDS = new Set(["secret", "api_key", "access_token"]);

/** The answer as stored for replays: the same JSON with every secret field set to null. */
export function withoutSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSecrets);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, SECRET_FIELDS.has(key) ? null : withoutSecrets(field)]));
}

export function completeIdempotency(
  db: Db,
  accountId: string,
  claim: IdempotencyClaim,
  status: number,
  body: unknown,
  options: { guard: boolean } = { guard: true },
): Statement[] {
  const match = and(
    eq(idempotencyKeys.accountId, accountId),
    eq(idempotencyKeys.key, claim.key),
    eq(idempotencyKeys.claimToken, claim.claimToken),
  );
  const complete = db
    .update(idempotencyKeys)
    // A body computed inside the batch (an SQL expression) is stored as the batch sees it; such
    // a body must hold no secret (see the webhook rotation's storedBody).
    .set({ status: "completed", responseStatus: status, responseBody: body instanceof SQL ? body : JSON.stringify(withoutSecrets(body)) })
    .where(match);
  return options.guard ? [guard(db, IDEMPOTENCY_CLAIM_LOST, sql`EXISTS (SELECT 1 FROM ${idempotencyKeys} WHERE ${match})`), complete] : [complete];
}

export const idempotencyClaimLost = () =>
  conflict(
    "idempotency_key_in_use",
    "Another request with this Idempotency-Key took over while this one was running; retry to see its result.",
  );

function replay(status: number, body: string, requestId: string, replayed = true): Response {
  return new Response(body, {
    status,
    headers: { "Content-Type": "application/json", ...(replayed ? { "Idempotent-Replayed": "true" } : {}), "Request-Id": requestId },
  });
}

export const idempotency = createMiddleware<AppEnv>(async (c, next) => {
  const key = c.req.header("idempotency-key");
  if (key === undefined || !MUTATING.has(c.req.method)) return next();
  if (key.length < 1 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw invalidRequest(
      "idempotency_key_invalid",
      "Idempotency-Key must be 1 to 255 visible ASCII characters, without spaces.",
    );
  }
  const db = c.var.db;
  const { accountId } = c.var.auth;
  const now = clock.now();
  const url = new URL(c.req.url);
  const requestHash = await sha256Hex(
    `${c.req.method} ${url.pathname}${url.search}\n${await canonical(c.var.jsonBody ?? null, cardFingerprintSecret(c.env))}`,
  );
  const claimToken = randomToken(24);
  const claimed = await db
    .insert(idempotencyKeys)
    .values({
      accountId,
      key,
      requestHash,
      claimToken,
      status: "in_flight",
      createdAt: new Date(now).toISOString(),
      lockedAt: now,
      expiresAt: now + IDEMPOTENCY_TTL_MS,
    })
    .onConflictDoUpdate({
      target: [idempotencyKeys.accountId, idempotencyKeys.key],
      set: {
        requestHash,
        claimToken,
        status: "in_flight",
        responseStatus: null,
        responseBody: null,
        // A stale claim of the same request keeps its first claim time (the generation a first
        // charge's processor reference is made of); an expired record starts a new one.
        createdAt: sql`CASE WHEN ${completedAndExpired(now)} THEN excluded.created_at ELSE ${idempotencyKeys.createdAt} END`,
        lockedAt: now,
        expiresAt: sql`CASE WHEN ${completedAndExpired(now)} THEN excluded.expires_at ELSE ${idempotencyKeys.expiresAt} END`,
      },
      // Take over only a completed record whose 24 hours are over, or a stale claim of the same
      // request. A claim whose outcome is unknown is never freed, not even by its age.
      setWhere: sql`${completedAndExpired(now)} OR (${idempotencyKeys.status} = 'in_flight' AND ${idempotencyKeys.lockedAt} <= ${now - IDEMPOTENCY_LOCK_MS} AND ${idempotencyKeys.requestHash} = ${requestHash})`,
    })
    .returning({ claimToken: idempotencyKeys.claimToken, createdAt: idempotencyKeys.createdAt });

  if (claimed[0]?.claimToken !== claimToken) {
    // The lookup carries the live-credential check, so a key revoked in another isolate (still
    // cached here) cannot read a stored answer; an empty result is then told apart by ensureLive.
    const existing = await db.query.idempotencyKeys.findFirst({
      where: and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.key, key), liveCredential(c.var.auth)),
    });
    if (!existing) {
      await ensureLive(db, c.var.auth);
      throw idempotencyClaimLost();
    }
    if (existing.requestHash !== requestHash) {
      throw new ApiError(
        422,
        "idempotency_error",
        "idempotency_key_reused",
        "This Idempotency-Key was already used with a different request (method, path or parameters). Use a new key for a new request.",
      );
    }
    if (existing.status === "in_flight" || existing.responseStatus === null || existing.responseBody === null) {
      throw conflict(
        "idempotency_key_in_use",
        "A request with this Idempotency-Key is still being processed. Retry after it finishes.",
      );
    }
    return replay(existing.responseStatus, existing.responseBody, c.var.requestId);
  }

  // A claim that kept an earlier claim time took over a stale claim of this same request.
  const since = claimed[0].createdAt;
  const claim: IdempotencyClaim = { key, claimToken, state: "open", since, takeover: since !== new Date(now).toISOString() };
  c.set("idempotency", claim);
  await next();
  if (claim.state === "completed") return;
  const match = and(
    eq(idempotencyKeys.accountId, accountId),
    eq(idempotencyKeys.key, key),
    eq(idempotencyKeys.claimToken, claimToken),
  );
  if (claim.state === "unknown") {
    c.res = await settleUnknownOutcome(db, match, c.var.requestId);
    return;
  }
  if (c.res.status >= 200 && c.res.status < 300) {
    // A route that answered without a write batch of its own: store its answer now.
    const text = await c.res.clone().text();
    let body = text;
    try {
      body = JSON.stringify(withoutSecrets(JSON.parse(text)));
    } catch {
      // not JSON: stored as it is
    }
    await db.update(idempotencyKeys).set({ status: "completed", responseStatus: c.res.status, responseBody: body }).where(match);
  } else {
    await db.delete(idempotencyKeys).where(match);
  }
});

/**
 * The write batch failed without saying whether it committed. Its own statements complete the
 * record, so the record says: completed by this claim, the batch committed and its answer is
 * replayed; otherwise the claim is kept (never freed), and the caller is told to retry.
 */
async function settleUnknownOutcome(db: Db, match: SQL | undefined, requestId: string): Promise<Response> {
  try {
    const record = await db.query.idempotencyKeys.findFirst({ where: match });
    if (record?.status === "completed" && record.responseStatus !== null && record.responseBody !== null) {
      return replay(record.responseStatus, record.responseBody, requestId, false);
    }
  } catch (error) {
    console.error(JSON.stringify({ request_id: requestId, message: "idempotency record unreadable after an unknown outcome; the key stays claimed", error: String(error) }));
  }
  const error = outcomeUnknown();
  return new Response(JSON.stringify(error.body(requestId)), { status: error.status, headers: { "Content-Type": "application/json", "Request-Id": requestId } });
}

export const outcomeUnknown = () =>
  new ApiError(
    500,
    "api_error",
    "outcome_unknown",
    `The change may or may not have been saved: the database did not confirm it. Retry with the same Idempotency-Key: you get the saved answer, or 409 while the outcome is still unknown (at most ${IDEMPOTENCY_LOCK_MS / 1000} s), after which the retry runs the request.`,
  );
