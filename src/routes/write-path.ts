// How a mutating route answers: its writes, its events, a check that the caller's key is still
// live, and the completion of its idempotency record, all in one D1 batch; then the answer.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { type FailureMap, noop } from "../db/batch";
import { ApiError } from "../lib/errors";
import { CREDENTIAL_REVOKED, credentialGuard } from "../db/scope";
import { revokedCredential, forgetKey } from "../auth/credentials";
import { IDEMPOTENCY_CLAIM_LOST, completeIdempotency, idempotencyClaimLost } from "../middleware/idempotency";
import { commitWrites, type WriteSet } from "../webhooks/outbox";
import type { AppEnv } from "../context";

export interface CommitOptions {
  failures?: FailureMap;
  /** What the idempotency record keeps, when the answer is computed differently from `body`. */
  storedBody?: unknown;
  /**
   * The processor already moved money for this batch: it must commit whatever happened to the
   * caller's key meanwhile (no credential guard). With `claimGuard: false`, it commits even when
   * another request took the Idempotency-Key over (the record is then completed by that one).
   */
  moneyMoved?: boolean;
  claimGuard?: boolean;
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

export async function commit(
  c: Context<AppEnv>,
  writes: WriteSet,
  status: ContentfulStatusCode,
  body: unknown,
  options: CommitOptions = {},
): Promise<unknown[] & { deliveryIds: string[] }> {
  const { db, auth, idempotency } = c.var;
  const guarded = !options.moneyMoved;
  const { results, deliveryIds } = await outcomeTracked(c, () =>
    commitWrites(
    { db, queue: c.env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) },
    {
      statements: [guarded ? credentialGuard(db, auth) : noop(db), ...writes.statements],
      events: writes.events,
      trailing: [
        ...(writes.trailing ?? []),
        ...(idempotency
          ? completeIdempotency(db, auth.accountId, idempotency, status, options.storedBody ?? body, { guard: options.claimGuard ?? true })
          : []),
      ],
    },
    {
      [CREDENTIAL_REVOKED]: () => {
        forgetKey(auth.keyId);
        return revokedCredential();
      },
      [IDEMPOTENCY_CLAIM_LOST]: idempotencyClaimLost,
      ...options.failures,
    },
    ),
  );
  if (idempotency) idempotency.state = "completed";
  return Object.assign(results.slice(1), { deliveryIds });
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
