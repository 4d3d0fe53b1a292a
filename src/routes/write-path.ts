// How a mutating route answers: its writes, its events, a check that the caller's key is still
// live, and the completion of its idempotency record, all in one D1 batch; then the answer.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { BATCH_GUARD_SQL, type FailureMap, type Statement, noop, runBatch } from "../db/batch";
import { preparedRaw } from "../db/prepared";
import type { Db } from "../db/client";
import { payments } from "../db/schema";
import { type SQL, eq, sql } from "drizzle-orm";
import type { RowAnswer } from "../middleware/stored-answers";
import { ApiError } from "../lib/errors";
import { CREDENTIAL_REVOKED, credentialGuard } from "../db/scope";
import { revokedCredential } from "../auth/credentials";
import { IDEMPOTENCY_CLAIM_LOST, completeIdempotency, idempotencyClaimLost } from "../middleware/idempotency";
import { type CommittedWrites, commitWrites, type WriteSet } from "../webhooks/outbox";
import type { AppEnv } from "../context";
import { livemodeUnavailable } from "../processor";
import { MONEY_CLAIM_LOST, type MoneyPurpose, accountLivesHere, claimHeld, newMoneyClaim, releaseClaim, takeMoneyClaim } from "../processor/in-flight";
import { clock } from "../lib/clock";

export interface CommitOptions {
  failures?: FailureMap;
  /** What the idempotency record keeps, when the answer is computed differently from `body`. */
  storedBody?: unknown;
  /**
   * The processor already moved money for this batch, recorded as this payment: it must commit
   * whatever happened to the caller's key meanwhile (no credential guard), and is retried when its
   * outcome is unknown. With `claimGuard: false`, it commits even when
   * another request took the Idempotency-Key over (the record is then completed by that one).
   */
  moneyMoved?: { paymentId: string };
  claimGuard?: boolean;
  /**
   * The batch's first statement in place of credentialGuard: the same check of the caller's key
   * (failing with CREDENTIAL_REVOKED first), with the route's own precondition folded in, so that
   * D1 runs one statement fewer (POST /payout's recipient).
   */
  keyGuard?: Statement;
}

/**
 * Runs `work` (a route's write batch). A failure that does not say whether the batch committed
 * (anything but a refused guard or constraint, which roll the batch back) marks the request's
 * idempotency claim `unknown`, so the key is not freed: see src/middleware/idempotency.ts.
 */
export async function outcomeTracked<T>(c: Context<AppEnv>, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const claim = c.var.idempotency;
    if (claim && !(error instanceof ApiError)) claim.state = "unknown";
    throw error;
  }
}

/**
 * For a route that moves money before its batch commits: such a route declares `claimFirst`, so
 * that its Idempotency-Key is held before the processor is called. Fails loudly otherwise.
 */
export function assertKeyClaimedFirst(c: Context<AppEnv>): void {
  const claim = c.var.idempotency;
  if (claim && claim.mode !== "claimed") throw new Error(`${c.req.method} ${c.req.routePath} moves money before its commit and must declare claimFirst`);
}

/**
 * The processor reference of a first charge made under the request's Idempotency-Key. Keys are
 * scoped to the mode, so a live charge's reference names the mode too (a test-mode reference
 * keeps the form it had before modes existed, so a retry of an older claim reaches the same one).
 */
export function firstChargeReference(c: Context<AppEnv>): string | undefined {
  assertKeyClaimedFirst(c);
  return keyedReference(c);
}

/**
 * The same reference for a test-mode charge whose outcome is recorded in the batch that records its
 * key (the sandbox answers in the request and moves no money): unique per use of the key, as the
 * batch that records both is the only one that can commit under it.
 */
export function inBatchChargeReference(c: Context<AppEnv>): string | undefined {
  if (c.var.auth.livemode) throw new Error(`${c.req.method} ${c.req.routePath}: live money is charged under a claimed key only`);
  return keyedReference(c);
}

function keyedReference(c: Context<AppEnv>): string | undefined {
  const claim = c.var.idempotency;
  const { accountId, livemode } = c.var.auth;
  return claim ? `${accountId}${livemode ? ":live" : ""}:idempotency:${claim.key}:${claim.since}` : undefined;
}

/**
 * Claims the money this request is about to move at the processor (src/processor/in-flight.ts):
 * in live mode only while the account has a connection, and never once its key is paused by a
 * move. The claim is ended by the request's commit, which it guards, or at the end of the request
 * (releaseMoneyClaim). Test mode's sandbox moves no real money and takes none: its commit is still
 * guarded by the account living on this shard (commit()).
 */
export async function holdMoney(c: Context<AppEnv>, purpose: MoneyPurpose): Promise<void> {
  assertKeyClaimedFirst(c);
  const { db, auth } = c.var;
  if (!auth.livemode || c.var.moneyClaim?.held) return;
  // Set first: a claim batch whose answer is lost (it may have committed) is dropped with the request.
  const { idempotency } = c.var;
  const claim = newMoneyClaim(auth, idempotency ? `${auth.accountId}:${auth.livemode ? "live" : "test"}:${idempotency.key}:${idempotency.since}` : undefined);
  c.set("moneyClaim", claim);
  await takeMoneyClaim(db, claim, auth, purpose, clock.now(), { credential: () => revokedCredential(auth.keyId), noConnection: livemodeUnavailable });
}

/** The money a batch records could not be recorded here: the claim was lost, or the account moved. Its outcome is left unknown. */
class MoneyRecordRefused extends Error {}

const ACCOUNT_MOVED = "account_moved_away";
/** The guard of a batch that records moved money: the account still lives on this shard. */
const accountMovedGuard = preparedRaw(() => BATCH_GUARD_SQL(ACCOUNT_MOVED, accountLivesHere(sql.placeholder("accountId"))));

/** Tries of a batch that records money the processor already moved, before the outcome is left unknown. */
const MONEY_RECORD_TRIES = 3;

/**
 * The processor already moved money, so its record must not be lost to a dropped connection: a
 * batch whose outcome is unknown is sent again. After a failed retry, the request's own payment
 * row says whether an earlier try committed (then the request succeeded), and a retry refused by
 * a guard or constraint while that row is absent is a certain refusal. What is still unknown
 * after the last try is logged with the payment id.
 */
async function recordMovedMoney(
  db: Db,
  paymentId: string,
  attempt: () => Promise<CommittedWrites>,
): Promise<CommittedWrites> {
  let lastError: unknown;
  for (let tries = 0; tries < MONEY_RECORD_TRIES; tries++) {
    try {
      return await attempt();
    } catch (error) {
      lastError = error;
      // Refused because the account moved or its claim was lost: a retry here cannot record it. (A
      // retry is refused so too when an earlier try committed and ended the claim: the row says.)
      if (tries === 0 && error instanceof MoneyRecordRefused) break;
      // The first try refused by a guard or constraint was rolled back: a certain failure.
      if (tries === 0 && error instanceof ApiError) throw error;
      if (tries > 0) {
        const recorded = await db
          .select({ id: payments.id })
          .from(payments)
          .where(eq(payments.id, paymentId))
          .then((rows) => rows.length > 0, () => null);
        // An earlier try committed (the sweeper enqueues its deliveries).
        if (recorded) return { returned: [], answered: [], deliveryIds: [] };
        if (recorded === false && error instanceof MoneyRecordRefused) break;
        if (recorded === false && error instanceof ApiError) throw error;
      }
    }
  }
  console.error(JSON.stringify({ message: "money moved, and its record's outcome is unknown after retries", payment: paymentId, error: String(lastError) }));
  throw lastError;
}

export async function commit(
  c: Context<AppEnv>,
  writes: WriteSet,
  status: ContentfulStatusCode,
  body: unknown,
  options: CommitOptions = {},
): Promise<CommittedWrites> {
  const { db, auth, idempotency, moneyClaim } = c.var;
  const claimed = moneyClaim?.held ? moneyClaim : undefined;
  // Under a claim the processor has been called (a capture, a cancel): what it did is recorded
  // whatever became of the key meanwhile (a move pauses it and waits for the claim), as moved money is.
  const guarded = !options.moneyMoved && !claimed;
  // A keyGuard carries the route's own precondition: a batch that skips the key's check must not drop it.
  if (options.keyGuard && !guarded) throw new Error("commit(): keyGuard is for a batch that checks the caller's key");
  // Money the processor moved is recorded whatever happened to the key meanwhile, but only where
  // the account lives (a move may have switched it away while the processor answered) and, under
  // a claim, only against the connection it went through; the claim ends in the same batch.
  const moneyGuards = [
    ...(options.moneyMoved ? [accountMovedGuard(db).with({ accountId: auth.accountId })] : []),
    ...(claimed ? [claimHeld(db, claimed)] : []),
  ];
  const refused = () => {
    const error = new MoneyRecordRefused(`${options.moneyMoved ? "money moved at the processor, and " : ""}its record cannot be written on this shard: the account moved, or its processor connection changed`);
    console.error(JSON.stringify({ request_id: c.var.requestId, message: error.message, payment: options.moneyMoved?.paymentId ?? null }));
    return error as unknown as ApiError;
  };
  const attempt = () =>
    commitWrites(
    { db, queue: c.env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) },
    {
      statements: [guarded ? (options.keyGuard ?? credentialGuard(db, auth)) : noop(db), ...moneyGuards, ...writes.statements, ...(claimed ? [releaseClaim(db, claimed)] : [])],
      returning: writes.returning,
      events: writes.events,
      answer: writes.answer,
      trailing: [
        ...(writes.trailing ?? []),
        ...(idempotency
          ? completeIdempotency(db, auth, idempotency, status, options.storedBody ?? body, { guard: options.claimGuard ?? true })
          : []),
      ],
    },
    {
      [CREDENTIAL_REVOKED]: () => revokedCredential(auth.keyId),
      [IDEMPOTENCY_CLAIM_LOST]: idempotencyClaimLost,
      [ACCOUNT_MOVED]: refused,
      [MONEY_CLAIM_LOST]: refused,
      ...options.failures,
    },
    );
  const committed = await outcomeTracked(c, () => (options.moneyMoved ? recordMovedMoney(db, options.moneyMoved.paymentId, attempt) : attempt()));
  if (claimed) claimed.held = false;
  if (idempotency) idempotency.state = "completed";
  return committed;
}

/** Commits, then answers with `body` as JSON. */
export async function commitAndRespond<T extends object, S extends ContentfulStatusCode, C extends Context<AppEnv>>(
  c: C,
  writes: WriteSet,
  status: S,
  body: T,
  options: CommitOptions = {},
) {
  await commit(c, writes, status, body, options);
  return c.json(body, status);
}

/**
 * Commits, then answers the row `writes.returning` gave back, serialized by `answer`; the
 * idempotency record stores that row as the batch committed it (src/middleware/stored-answers.ts),
 * found by `where`. For a write that answers an object it does not read before its batch.
 */
export async function commitAndAnswerRow<Row, Json extends object, C extends Context<AppEnv>>(
  c: C,
  writes: WriteSet,
  answer: RowAnswer<Row, Json>,
  where: SQL,
  options: Omit<CommitOptions, "storedBody"> = {},
) {
  const { returned } = await commit(c, writes, 200, null, { ...options, storedBody: answer.stored(where) });
  return c.json(answer.serialize(returned[0] as Row), 200);
}

/**
 * Replaces the stored answer of a request that already committed, when work done after its batch
 * changed what it answers (a test clock's renewals). Best effort: a failure leaves the answer the
 * batch stored, which was true when it committed.
 */
export async function restoreAnswer(c: Context<AppEnv>, status: number, body: unknown): Promise<void> {
  const { db, auth, idempotency } = c.var;
  if (!idempotency) return;
  await runBatch(db, completeIdempotency(db, auth, idempotency, status, body, { guard: false })).catch((error) => {
    console.error(JSON.stringify({ request_id: c.var.requestId, message: "stored answer not updated", error: String(error) }));
  });
}
