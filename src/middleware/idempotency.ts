// One idempotency mechanism for every POST, PUT, PATCH and DELETE. The key is claimed with an
// INSERT guarded by the (account, mode, key) primary key, never read-then-write: the same key used
// in test and in live mode is two keys, and neither mode ever replays the other's answer. The
// route's own write batch completes the record (src/lib/respond.ts), so a committed change and its
// stored answer cannot disagree. Answers that certainly changed nothing (validation, auth,
// conflicts, a refused guard) release the claim, so a corrected retry with the same key can go
// through, as Stripe does.
//
// An unknown outcome never frees the key. When the write batch failed without saying whether it
// committed (the connection dropped after the commit), the record is read again: completed by
// that batch, its answer is replayed; otherwise the key stays claimed, retries answer 409 until
// IDEMPOTENCY_LOCK_MS has passed, and only then may a retry of the same request take it over.
//
// Stored answers keep no secret: fields that show a secret once (`secret`, `api_key`,
// `access_token`) are stored as null, so a replay shows them as null.
import { type Placeholder, SQL, and, eq, sql } from "drizzle-orm";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { Db } from "../db/client";
import { idempotencyKeys } from "../db/schema";
import { BATCH_GUARD_SQL, type Statement } from "../db/batch";
import { prepared, preparedRaw } from "../db/prepared";
import { type Tenant, liveCredential } from "../db/scope";
import { revokedCredential } from "../auth/credentials";
import type { AppEnv, IdempotencyClaim } from "../context";
import { hmacSha256Hex, randomToken, sha256Hex } from "../lib/crypto";
import { ApiError, conflict, invalidRequest } from "../lib/errors";
import { cardFingerprintSecret } from "../env";
import { containsCardNumber } from "../domain/cards";
import { replayText, withoutSecrets } from "./stored-answers";
import { clock } from "../lib/clock";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A claim older than this belongs to a request that died before its batch; it may be taken over. */
export const IDEMPOTENCY_LOCK_MS = 60_000;
export const IDEMPOTENCY_CLAIM_LOST = "idempotency_claim_lost";
/** A value, or a placeholder for it in a prepared statement (src/db/prepared.ts). */
type Slot<T> = T | Placeholder;
const completedAndExpired = (now: Slot<number>) => sql`(${idempotencyKeys.status} = 'completed' AND ${idempotencyKeys.expiresAt} <= ${now})`;
/**
 * A record a new use of its key may replace: completed and expired, or a claim of the same request
 * gone stale (locked at `staleBefore` or earlier).
 */
const replaceable = (now: Slot<number>, staleBefore: Slot<number>, requestHash: Slot<string>) =>
  sql`${completedAndExpired(now)} OR (${idempotencyKeys.status} = 'in_flight' AND ${idempotencyKeys.lockedAt} <= ${staleBefore} AND ${idempotencyKeys.requestHash} = ${requestHash})`;
/**
 * Fields that enter the request's fingerprint only as a keyed hash, never stored: card fields, and
 * a processor connection's secrets (PUT /api/processor).
 */
const SECRET_FIELDS = new Set(["card_number", "cvv", "secret_key", "webhook_secret", "connect_webhook_secret"]);
const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Canonical JSON (sorted keys) with card fields and processor secrets replaced by their keyed hash. */
async function canonical(value: unknown, secret: string): Promise<string> {
  if (Array.isArray(value)) return `[${(await Promise.all(value.map((v) => canonical(v, secret)))).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.keys(value as object)
      .sort()
      .map(async (key) => {
        const field = (value as Record<string, unknown>)[key];
        // A card field or secret enters only as a keyed hash, whatever JSON type it was sent as.
        const text = SECRET_FIELDS.has(key) && (typeof field === "string" || typeof field === "number")
          ? JSON.stringify(`hmac:${await hmacSha256Hex(secret, `${typeof field}:${field}`)}`)
          : await canonical(field, secret);
        return `${JSON.stringify(key)}:${text}`;
      });
    return `{${(await Promise.all(entries)).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** What the record stores: the answer as JSON with every secret field set to null, or an SQL expression. */
const storedAnswer = (body: unknown) => (body instanceof SQL ? body : JSON.stringify(withoutSecrets(body)));

/** The record as this request holds it: the account's key in the caller's mode, with this request's claim token. */
const heldBy = (tenant: { accountId: Slot<string>; livemode: Slot<boolean> }, claim: { key: Slot<string>; claimToken: Slot<string> }) =>
  and(
    eq(idempotencyKeys.accountId, tenant.accountId),
    eq(idempotencyKeys.livemode, tenant.livemode),
    eq(idempotencyKeys.key, claim.key),
    eq(idempotencyKeys.claimToken, claim.claimToken),
  );

/** What a completed record is written with. */
type CompletedRecord = {
  accountId: string;
  livemode: boolean;
  key: string;
  requestHash: string;
  claimToken: string;
  responseStatus: number;
  responseBody: string | SQL;
  createdAt: string;
  now: number;
  staleBefore: number;
  expiresAt: number;
};

function completedRecord(tenant: Tenant, claim: IdempotencyClaim, responseStatus: number, responseBody: string | SQL): CompletedRecord {
  const now = Date.parse(claim.since);
  const { key, requestHash, claimToken } = claim;
  return { accountId: tenant.accountId, livemode: tenant.livemode, key, requestHash, claimToken, responseStatus, responseBody, createdAt: claim.since, now, staleBefore: now - IDEMPOTENCY_LOCK_MS, expiresAt: now + IDEMPOTENCY_TTL_MS };
}

/**
 * Writes a request's record, completed with its answer. Only a completed record whose 24 hours
 * are over, or a stale claim of this same request (left by a claim-first run that died before its
 * batch), is replaced; any other holder keeps the key, and the record is then not this request's
 * (see heldBy).
 */
function upsertCompletedRecord(db: Db, v: { [K in keyof CompletedRecord]: Slot<CompletedRecord[K]> }) {
  return db
    .insert(idempotencyKeys)
    .values({
      accountId: v.accountId,
      livemode: v.livemode,
      key: v.key,
      requestHash: v.requestHash,
      claimToken: v.claimToken,
      status: "completed",
      responseStatus: v.responseStatus,
      responseBody: v.responseBody,
      createdAt: v.createdAt,
      lockedAt: v.now,
      expiresAt: v.expiresAt,
    })
    .onConflictDoUpdate({
      target: [idempotencyKeys.accountId, idempotencyKeys.livemode, idempotencyKeys.key],
      // The replacing record is the one just offered.
      set: {
        requestHash: sql`excluded.request_hash`,
        claimToken: sql`excluded.claim_token`,
        status: sql`excluded.status`,
        responseStatus: sql`excluded.response_status`,
        responseBody: sql`excluded.response_body`,
        createdAt: sql`excluded.created_at`,
        lockedAt: sql`excluded.locked_at`,
        expiresAt: sql`excluded.expires_at`,
      },
      setWhere: replaceable(v.now, v.staleBefore, v.requestHash),
    });
}

// The statements every idempotent write's batch carries, prepared once per isolate.
const slot = sql.placeholder;
const preparedCompletedRecord = prepared((db) =>
  upsertCompletedRecord(db, {
    accountId: slot("accountId"),
    livemode: slot("livemode"),
    key: slot("key"),
    requestHash: slot("requestHash"),
    claimToken: slot("claimToken"),
    responseStatus: slot("responseStatus"),
    responseBody: slot("responseBody"),
    createdAt: slot("createdAt"),
    now: slot("now"),
    staleBefore: slot("staleBefore"),
    expiresAt: slot("expiresAt"),
  }),
);
const preparedHeldGuard = preparedRaw(() =>
  BATCH_GUARD_SQL(
    IDEMPOTENCY_CLAIM_LOST,
    sql`EXISTS (SELECT 1 FROM ${idempotencyKeys} WHERE ${heldBy({ accountId: slot("accountId"), livemode: slot("livemode") }, { key: slot("key"), claimToken: slot("claimToken") })})`,
  ),
);

/** A claimed record completed with its answer, if this request still holds it. */
const preparedClaimCompletion = prepared((db) =>
  db
    .update(idempotencyKeys)
    .set({ status: "completed", responseStatus: sql`${slot("responseStatus")}`, responseBody: sql`${slot("responseBody")}` })
    .where(heldBy({ accountId: slot("accountId"), livemode: slot("livemode") }, { key: slot("key"), claimToken: slot("claimToken") })),
);

/** heldBy's values for a prepared statement: a placeholder compared with eq() is bound as given, so the mode as SQLite stores it. */
const heldValues = (tenant: Tenant, claim: IdempotencyClaim) => ({ accountId: tenant.accountId, livemode: tenant.livemode ? 1 : 0, key: claim.key, claimToken: claim.claimToken });

/**
 * The statements that complete this request's idempotency record inside its write batch. A
 * `claimed` record (inserted before the route ran) is completed if this request still holds it;
 * an `in_batch` record is inserted here, completed, and the batch is refused (IDEMPOTENCY_CLAIM_LOST)
 * when another request already holds the key, so two requests with one key never both commit.
 */
export function completeIdempotency(
  db: Db,
  tenant: Tenant,
  claim: IdempotencyClaim,
  status: number,
  body: unknown,
  options: { guard: boolean } = { guard: true },
): Statement[] {
  const held = preparedHeldGuard(db).with(heldValues(tenant, claim));
  if (claim.mode === "in_batch" && claim.state === "open") {
    const answer = storedAnswer(body);
    const record = completedRecord(tenant, claim, status, answer);
    return [typeof answer === "string" ? preparedCompletedRecord(db).with(record) : upsertCompletedRecord(db, record), held];
  }
  const answer = storedAnswer(body);
  const complete =
    typeof answer === "string"
      ? preparedClaimCompletion(db).with({ ...heldValues(tenant, claim), responseStatus: status, responseBody: answer })
      : db
          .update(idempotencyKeys)
          // A body computed inside the batch (an SQL expression) is stored as the batch sees it; such
          // a body must hold no secret (see the webhook rotation's storedBody).
          .set({ status: "completed", responseStatus: status, responseBody: answer })
          .where(heldBy(tenant, claim));
  return options.guard ? [held, complete] : [complete];
}

export const idempotencyClaimLost = () =>
  conflict(
    "idempotency_key_in_use",
    "Another request with this Idempotency-Key took over while this one was running; retry to see its result.",
  );

function replay(status: number, body: string, requestId: string, replayed = true): Response {
  return new Response(replayText(body), {
    status,
    headers: { "Content-Type": "application/json", ...(replayed ? { "Idempotent-Replayed": "true" } : {}), "Request-Id": requestId },
  });
}

/**
 * The idempotency middleware of a mutating route. `claimFirst` routes (money moves at the
 * processor before their batch commits: a first charge, a past-due card update, a test clock's
 * advance) claim the key with an INSERT before they run. Every other route writes its record in
 * its own batch: one round trip, and a duplicate meets the key there (see completeIdempotency).
 */
export const idempotency = (options: { claimFirst: boolean; claimReads?: ClaimReads }) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const key = c.req.header("idempotency-key");
    if (key === undefined || !MUTATING.has(c.req.method)) return next();
    if (key.length < 1 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
      throw invalidRequest(
        "idempotency_key_invalid",
        "Idempotency-Key must be 1 to 255 visible ASCII characters, without spaces.",
      );
    }
    // The key is stored, and a first charge's processor reference is made of it: never a PAN.
    if (containsCardNumber(key)) {
      throw invalidRequest(
        "card_number_in_text",
        "Idempotency-Key looks like a card number. Card numbers are accepted only in card_number; use a random key (a UUID).",
        "Idempotency-Key",
      );
    }
    const now = clock.now();
    const url = new URL(c.req.url);
    const requestHash = await sha256Hex(
      `${c.req.method} ${url.pathname}${url.search}\n${await canonical(c.var.jsonBody ?? null, cardFingerprintSecret(c.env))}`,
    );
    return options.claimFirst ? claimFirst(c, next, key, requestHash, now, options.claimReads) : recordInBatch(c, next, key, requestHash, now);
  });

type Next = () => Promise<void>;

/**
 * Reads a claim-first route makes in the same batch as its key's claim (one round trip for both),
 * built from the request's JSON body as sent (not yet validated: it must build nothing from a value
 * of the wrong type, answering undefined then). Reads change nothing, so they are sound whether the
 * claim is won or not, and they run after the claim's INSERT in the batch. The route finds them as
 * `c.var.idempotency.preread` ({ ids, rows }), and must use them only for the same `ids`.
 */
export type ClaimReads = (c: Context<AppEnv>, body: unknown) => { ids: unknown; statement: Statement } | undefined;

/** The record is written by the route's own batch; nothing is read or written before the route runs. */
async function recordInBatch(c: Context<AppEnv>, next: Next, key: string, requestHash: string, now: number) {
  const { db, auth } = c.var;
  const claimToken = randomToken(24);
  const claim: IdempotencyClaim = { key, claimToken, mode: "in_batch", requestHash, state: "open", since: new Date(now).toISOString(), takeover: false };
  c.set("idempotency", claim);
  await next();
  if (claim.state === "completed") return;
  const match = heldBy(auth, claim);
  if (claim.state === "unknown") {
    // The record and the change share one batch: either both committed or neither did, so the
    // record says which, and a retry is safe either way.
    c.res = await settleUnknownOutcome(db, match, c.var.requestId, "in_batch");
    return;
  }
  if (c.res.status >= 200 && c.res.status < 300) {
    // A route that answered without a write batch of its own: store its answer now, unless an
    // earlier request holds the key (then that request's answer is the one to give).
    const stored = await upsertCompletedRecord(db, completedRecord(auth, claim, c.res.status, await storableText(c.res))).returning({
      claimToken: idempotencyKeys.claimToken,
    });
    if (stored[0]?.claimToken === claimToken) return;
  }
  // The request changed nothing. An earlier request with this key decides the answer: its stored
  // answer (a retry after the first one succeeded), 422 for other parameters, 409 while it runs.
  const earlier = await earlierUse(c, key, requestHash, now);
  if (earlier) c.res = earlier;
}

/** The answer's text as stored: JSON with every secret field set to null, other text as it is. */
async function storableText(res: Response): Promise<string> {
  const text = await res.clone().text();
  try {
    return JSON.stringify(withoutSecrets(JSON.parse(text)));
  } catch {
    return text;
  }
}

/**
 * The answer owed to a request whose key an earlier request holds: that request's stored answer,
 * 422 if its parameters differ, 409 while it runs; undefined when no record holds the key. A
 * completed record whose 24 hours are over (not yet swept by the cron) holds it no more.
 */
async function earlierUse(c: Context<AppEnv>, key: string, requestHash: string, now: number): Promise<Response | undefined> {
  const { db, auth } = c.var;
  // One round trip: the record, and whether the caller's key is still live, so that a key
  // revoked in another isolate (still cached here) cannot read a stored answer.
  const [row] = await db
    .select({
      live: sql<number>`${liveCredential(auth)}`,
      requestHash: idempotencyKeys.requestHash,
      status: idempotencyKeys.status,
      responseStatus: idempotencyKeys.responseStatus,
      responseBody: idempotencyKeys.responseBody,
    })
    .from(sql`(SELECT 1) AS one`)
    .leftJoin(
      idempotencyKeys,
      and(eq(idempotencyKeys.accountId, auth.accountId), eq(idempotencyKeys.livemode, auth.livemode), eq(idempotencyKeys.key, key), sql`NOT ${completedAndExpired(now)}`),
    );
  if (!row?.live) throw revokedCredential(auth.keyId);
  if (row.requestHash === null) return undefined;
  if (row.requestHash !== requestHash) {
    throw new ApiError(
      422,
      "idempotency_error",
      "idempotency_key_reused",
      "This Idempotency-Key was already used with a different request (method, path or parameters). Use a new key for a new request.",
    );
  }
  if (row.status === "in_flight" || row.responseStatus === null || row.responseBody === null) {
    throw conflict(
      "idempotency_key_in_use",
      "A request with this Idempotency-Key is still being processed. Retry after it finishes.",
    );
  }
  return replay(row.responseStatus, row.responseBody, c.var.requestId);
}

/**
 * A claim-first request's claim: its record inserted `in_flight`, or taken over (a completed record
 * whose 24 hours are over, or a stale claim of the same request); it answers the record's claim
 * token (this request's when it won) and claim time. Prepared once per isolate.
 */
const preparedClaim = prepared((db) =>
  db
    .insert(idempotencyKeys)
    .values({
      accountId: slot("accountId"),
      livemode: slot("livemode"),
      key: slot("key"),
      requestHash: slot("requestHash"),
      claimToken: slot("claimToken"),
      status: "in_flight",
      createdAt: slot("createdAt"),
      lockedAt: slot("now"),
      expiresAt: slot("expiresAt"),
    })
    .onConflictDoUpdate({
      target: [idempotencyKeys.accountId, idempotencyKeys.livemode, idempotencyKeys.key],
      set: {
        requestHash: sql`excluded.request_hash`,
        claimToken: sql`excluded.claim_token`,
        status: "in_flight",
        responseStatus: null,
        responseBody: null,
        // A stale claim of the same request keeps its first claim time (the generation a first
        // charge's processor reference is made of); an expired record starts a new one.
        createdAt: sql`CASE WHEN ${completedAndExpired(slot("now"))} THEN excluded.created_at ELSE ${idempotencyKeys.createdAt} END`,
        lockedAt: sql`excluded.locked_at`,
        expiresAt: sql`CASE WHEN ${completedAndExpired(slot("now"))} THEN excluded.expires_at ELSE ${idempotencyKeys.expiresAt} END`,
      },
      // Take over only a completed record whose 24 hours are over, or a stale claim of the same
      // request. A claim whose outcome is unknown is never freed, not even by its age.
      setWhere: replaceable(slot("now"), slot("staleBefore"), slot("requestHash")),
    })
    .returning({ claimToken: idempotencyKeys.claimToken, createdAt: idempotencyKeys.createdAt }),
);

/** The key is claimed (`in_flight`) before the route runs, and the route's batch completes it. */
async function claimFirst(c: Context<AppEnv>, next: Next, key: string, requestHash: string, now: number, claimReads?: ClaimReads) {
  const { db, auth } = c.var;
  const claimToken = randomToken(24);
  const claimValues = {
    accountId: auth.accountId,
    livemode: auth.livemode,
    key,
    requestHash,
    claimToken,
    createdAt: new Date(now).toISOString(),
    now,
    staleBefore: now - IDEMPOTENCY_LOCK_MS,
    expiresAt: now + IDEMPOTENCY_TTL_MS,
  };
  const reads = claimReads?.(c, c.var.jsonBody);
  let preread: IdempotencyClaim["preread"];
  let claimed: { claimToken: string; createdAt: string }[];
  if (reads) {
    const [inserted, rows] = (await db.batch([preparedClaim(db).with(claimValues), reads.statement] as unknown as [Statement, Statement])) as unknown as [typeof claimed, unknown];
    claimed = inserted;
    preread = { ids: reads.ids, rows };
  } else {
    claimed = await preparedClaim(db).execute(claimValues);
  }

  if (claimed[0]?.claimToken !== claimToken) {
    const earlier = await earlierUse(c, key, requestHash, now);
    if (!earlier) throw idempotencyClaimLost();
    return earlier;
  }

  // A claim that kept an earlier claim time took over a stale claim of this same request.
  const since = claimed[0].createdAt;
  const claim: IdempotencyClaim = { key, claimToken, mode: "claimed", requestHash, state: "open", since, takeover: since !== new Date(now).toISOString(), preread };
  c.set("idempotency", claim);
  await next();
  if (claim.state === "completed") return;
  const match = heldBy(auth, claim);
  if (claim.state === "unknown") {
    c.res = await settleUnknownOutcome(db, match, c.var.requestId, "claimed");
    return;
  }
  if (c.res.status >= 200 && c.res.status < 300) {
    // A route that answered without a write batch of its own: store its answer now.
    await db.update(idempotencyKeys).set({ status: "completed", responseStatus: c.res.status, responseBody: await storableText(c.res) }).where(match);
  } else {
    // Answers that certainly changed nothing release the claim, so a corrected retry goes through.
    await db.delete(idempotencyKeys).where(match);
  }
}

/**
 * The write batch failed without saying whether it committed. Its own statements complete the
 * record, so the record says: completed by this claim, the batch committed and its answer is
 * replayed; otherwise the claim is kept (never freed), and the caller is told to retry.
 */
async function settleUnknownOutcome(db: Db, match: SQL | undefined, requestId: string, mode: IdempotencyClaim["mode"]): Promise<Response> {
  try {
    const record = await db.query.idempotencyKeys.findFirst({ where: match });
    if (record?.status === "completed" && record.responseStatus !== null && record.responseBody !== null) {
      return replay(record.responseStatus, record.responseBody, requestId, false);
    }
  } catch (error) {
    console.error(JSON.stringify({ request_id: requestId, message: "idempotency record unreadable after an unknown outcome; the key stays claimed", error: String(error) }));
  }
  const error = mode === "claimed" ? outcomeUnknown() : outcomeUnknownInBatch();
  return new Response(JSON.stringify(error.body(requestId)), { status: error.status, headers: { "Content-Type": "application/json", "Request-Id": requestId } });
}

export const outcomeUnknown = () =>
  new ApiError(
    500,
    "api_error",
    "outcome_unknown",
    `The change may or may not have been saved: the database did not confirm it. Retry with the same Idempotency-Key: you get the saved answer, or 409 while the outcome is still unknown (at most ${IDEMPOTENCY_LOCK_MS / 1000} s), after which the retry runs the request.`,
  );

export const outcomeUnknownInBatch = () =>
  new ApiError(
    500,
    "api_error",
    "outcome_unknown",
    "The change may or may not have been saved: the database did not confirm it. Retry with the same Idempotency-Key: you get the saved answer if it was saved, and otherwise the request runs once.",
  );
