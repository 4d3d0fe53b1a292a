// How a mutating route answers: its writes, its events, a check that the caller's key is still
// live, and the completion of its idempotency record, all in one D1 batch; then the answer.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { FailureMap } from "../db/batch";
import { CREDENTIAL_REVOKED, credentialGuard } from "../db/scope";
import { revokedCredential, forgetKey } from "../auth/credentials";
import { IDEMPOTENCY_CLAIM_LOST, completeIdempotency, idempotencyClaimLost } from "../middleware/idempotency";
import { commitWrites, type WriteSet } from "../webhooks/outbox";
import type { AppEnv } from "./context";

export interface CommitOptions {
  failures?: FailureMap;
  /** What the idempotency record keeps, when the answer holds a secret that must not be stored. */
  storedBody?: unknown;
}

export async function commit(
  c: Context<AppEnv>,
  writes: WriteSet,
  status: ContentfulStatusCode,
  body: unknown,
  options: CommitOptions = {},
): Promise<unknown[] & { deliveryIds: string[] }> {
  const { db, auth, idempotency } = c.var;
  const { results, deliveryIds } = await commitWrites(
    { db, queue: c.env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) },
    {
      statements: [credentialGuard(db, auth), ...writes.statements],
      events: writes.events,
      trailing: [
        ...(writes.trailing ?? []),
        ...(idempotency ? completeIdempotency(db, auth.accountId, idempotency, status, options.storedBody ?? body) : []),
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
  );
  if (idempotency) idempotency.completed = true;
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
