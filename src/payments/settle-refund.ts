// Refund settlement, on the job queue: the processor refunds the charge, then the refund moves
// pending -> succeeded (refund.completed) in one batch whose conditional UPDATE and guard make a
// duplicate message change and emit nothing. The refund id is the processor call's reference,
// so a real processor sees a retried call as the same refund. As with payouts, a worker calls the
// processor only while it holds the refund's send lease (job_runs `refund_send:<id>`), so two
// messages for one refund at once make one processor call.
import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { failureReason, guard, guardExists, runBatch, type Statement } from "../db/batch";
import { createDb, type Db } from "../db/client";
import { claimLease, leaseTaken, releaseLease } from "../db/leases";
import { stalePendingIds } from "./stale-sweep";
import { jobRuns, payments, refunds } from "../db/schema";
import { type Tenant, livesHere } from "../db/scope";
import type { Bindings } from "../env";
import { clock, isoTime } from "../lib/clock";
import type { Processor } from "../processor/types";
import { commitWrites, type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { processorFor } from "../processor";
import { refundJsonSql } from "./serialize";
import { sendInBatches } from "../lib/queue";

export interface SettleRefundJob {
  kind: "settleRefund";
  refundId: string;
}

/** A refund pending this long has lost its settlement message; the sweep sends it again. */
export const REFUND_STALE_MS = 5 * 60_000;

/** How long a worker holds a refund once it takes it to the processor. */
export const REFUND_SEND_LEASE_MS = 2 * 60_000;
/** A refund the processor accepted but has not settled is asked about again after this long. */
export const REFUND_RECHECK_MS = 6 * 60 * 60_000;

const REFUND_NOT_PENDING = "refund_not_pending";
const refundSendKey = (refundId: string) => `refund_send:${refundId}`;

/** The job messages that settle refunds. */
export const refundSettlementMessages = (refundIds: string[]): MessageSendRequest<SettleRefundJob>[] =>
  refundIds.map((refundId) => ({ body: { kind: "settleRefund", refundId } }));

export async function enqueueRefundSettlements(queue: Queue, refundIds: string[]): Promise<void> {
  await sendInBatches(queue, refundSettlementMessages(refundIds));
}

export async function settleRefund(job: SettleRefundJob, env: Bindings, processor?: Processor): Promise<"succeeded" | "failed" | "pending" | "skipped"> {
  const db = createDb(env.DB);
  const [found] = await db
    .select({ refund: refunds, chargeReference: payments.processorReference })
    .from(refunds)
    .innerJoin(payments, eq(payments.id, refunds.paymentId))
    .where(eq(refunds.id, job.refundId))
    .limit(1);
  if (!found || found.refund.status !== "pending" || !found.chargeReference) return "skipped";
  const { refund, chargeReference } = found;
  // ...and its account still lives on this shard (src/accounts/move.ts): its send lease must be where the refund lives.
  const pending = and(eq(refunds.id, refund.id), eq(refunds.status, "pending"), livesHere(refunds.accountId));
  const stillPending = guardExists(db, REFUND_NOT_PENDING, refunds, pending);
  try {
    const [, lease] = await runBatch(db, [stillPending, claimLease(db, refundSendKey(refund.id), clock.now(), REFUND_SEND_LEASE_MS)]);
    if (!leaseTaken(lease)) return "skipped";
  } catch (error) {
    if (failureReason(error) === REFUND_NOT_PENDING) return "skipped";
    throw error;
  }

  const outcome = await (async () => (processor ?? (await processorFor(env, db, refund))).refund({
    chargeReference,
    amount: refund.amount,
    currency: refund.currency,
    reference: refund.id,
    firstAttemptAt: Date.parse(refund.createdAt),
  }))().catch(async (error) => {
    await releaseLease(db, refundSendKey(refund.id)).catch(() => {});
    throw error;
  });

  const now = clock.now();
  // Stripe's refund id, recorded once known: its events must name it (processor-settlements.ts).
  const recordId =
    refund.livemode && outcome.status !== "failed" && refund.processorObject === null
      ? [db.update(refunds).set({ processorObject: outcome.reference }).where(and(eq(refunds.id, refund.id), isNull(refunds.processorObject)))]
      : [];
  if (outcome.status === "pending") {
    for (const statement of recordId) await statement;
    // Accepted, not settled: the processor's event settles it; the sweep asks again after the recheck.
    await db
      .update(jobRuns)
      .set({ leaseUntil: now + REFUND_RECHECK_MS })
      .where(and(eq(jobRuns.key, refundSendKey(refund.id)), sql`EXISTS (SELECT 1 FROM ${refunds} WHERE ${pending})`));
    return "pending";
  }
  try {
    const writes = refundTransition(db, refund, outcome.status === "succeeded" ? "succeeded" : "failed", ["pending"], now);
    await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { ...writes, statements: [...writes.statements, ...recordId] });
    return outcome.status === "succeeded" ? "succeeded" : "failed";
  } catch (error) {
    if (failureReason(error) === REFUND_NOT_IN_STATE) return "skipped";
    throw error;
  }
}

/** Batch guard reason: the refund is no longer in a state the transition starts from. */
export const REFUND_NOT_IN_STATE = "refund_not_in_state";

export type RefundStatus = (typeof refunds.$inferSelect)["status"];

/**
 * The one home of a refund's settlement: the guarded, conditional move from one of `from` to
 * succeeded (refund.completed, the refund as committed) or failed. A failed refund gives its
 * amount back to the payment (refundable again). (The catalog has no refund.failed event; the
 * refund shows status failed.) Used by the settlement job and the processor's own events.
 */
export function refundTransition(
  db: Db,
  refund: Tenant & { id: string; paymentId: string; amount: number },
  to: "succeeded" | "failed",
  from: RefundStatus[],
  now: number,
): { statements: Statement[]; events: EmittedEvent[] } {
  const inState = and(eq(refunds.id, refund.id), inArray(refunds.status, from));
  const stillInState = guard(db, REFUND_NOT_IN_STATE, sql`EXISTS (SELECT 1 FROM ${refunds} WHERE ${inState})`);
  if (to === "succeeded") {
    return {
      statements: [stillInState, db.update(refunds).set({ status: "succeeded", completedAt: isoTime(now) }).where(inState)],
      events: [emitEvent(db, refund, { type: "refund.completed", dataSql: refundJsonSql(refund.id), objectId: refund.id }, now)],
    };
  }
  return {
    statements: [
      stillInState,
      db.update(refunds).set({ status: "failed" }).where(inState),
      db
        .update(payments)
        .set({
          amountRefunded: sql`${payments.amountRefunded} - ${refund.amount}`,
          status: sql`CASE WHEN ${payments.amountRefunded} - ${refund.amount} = 0 THEN 'completed' ELSE 'partially_refunded' END`,
        })
        .where(eq(payments.id, refund.paymentId)),
    ],
    events: [],
  };
}

/** Cron: re-enqueue refunds whose settlement message was lost, or whose worker died holding the lease. */
export async function sweepStaleRefunds(env: Bindings, scheduledTime: number): Promise<number> {
  const ids = await stalePendingIds(createDb(env.DB), refunds, { leasePrefix: "refund_send:", staleAfterMs: REFUND_STALE_MS, now: scheduledTime });
  await enqueueRefundSettlements(env.JOB_QUEUE, ids);
  return ids.length;
}
