// Refund settlement, on the job queue: the processor refunds the charge, then the refund moves
// pending -> succeeded (refund.completed) in one batch whose conditional UPDATE and guard make a
// duplicate message change and emit nothing. The refund id is the processor call's reference,
// so a real processor sees a retried call as the same refund. As with payouts, a worker calls the
// processor only while it holds the refund's send lease (job_runs `refund_send:<id>`), so two
// messages for one refund at once make one processor call.
import { and, eq, sql } from "drizzle-orm";
import { failureReason, guardExists, runBatch } from "../db/batch";
import { createDb } from "../db/client";
import { claimLease, leaseTaken, releaseLease } from "../db/leases";
import { stalePendingIds } from "./stale-sweep";
import { payments, refunds } from "../db/schema";
import type { Bindings } from "../env";
import { clock, isoTime } from "../lib/clock";
import type { Processor } from "../processor/types";
import { commitWrites, emitEvent } from "../webhooks/outbox";
import { processorOfReference } from "../processor";
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

const REFUND_NOT_PENDING = "refund_not_pending";
const refundSendKey = (refundId: string) => `refund_send:${refundId}`;

export async function enqueueRefundSettlements(queue: Queue, refundIds: string[]): Promise<void> {
  await sendInBatches(queue, refundIds.map((refundId) => ({ body: { kind: "settleRefund", refundId } satisfies SettleRefundJob })));
}

export async function settleRefund(job: SettleRefundJob, env: Bindings, processor?: Processor): Promise<"succeeded" | "failed" | "skipped"> {
  const db = createDb(env.DB);
  const [found] = await db
    .select({ refund: refunds, chargeReference: payments.processorReference })
    .from(refunds)
    .innerJoin(payments, eq(payments.id, refunds.paymentId))
    .where(eq(refunds.id, job.refundId))
    .limit(1);
  if (!found || found.refund.status !== "pending" || !found.chargeReference) return "skipped";
  const { refund, chargeReference } = found;
  const pending = and(eq(refunds.id, refund.id), eq(refunds.status, "pending"));
  const stillPending = guardExists(db, REFUND_NOT_PENDING, refunds, pending);
  try {
    const [, lease] = await runBatch(db, [stillPending, claimLease(db, refundSendKey(refund.id), clock.now(), REFUND_SEND_LEASE_MS)]);
    if (!leaseTaken(lease)) return "skipped";
  } catch (error) {
    if (failureReason(error) === REFUND_NOT_PENDING) return "skipped";
    throw error;
  }

  const outcome = await (processor ?? processorOfReference(env, chargeReference))
    .refund({ chargeReference, amount: refund.amount, currency: refund.currency, reference: refund.id })
    .catch(async (error) => {
      await releaseLease(db, refundSendKey(refund.id)).catch(() => {});
      throw error;
    });

  const now = clock.now();
  try {
    if (outcome.status === "succeeded") {
      await commitWrites(
        { db, queue: env.DELIVERY_QUEUE },
        {
          statements: [stillPending, db.update(refunds).set({ status: "succeeded", completedAt: isoTime(now) }).where(pending)],
          events: [emitEvent(db, refund, { type: "refund.completed", dataSql: refundJsonSql(refund.id), objectId: refund.id }, now)],
        },
      );
      return "succeeded";
    }
    // The processor refused: the amount becomes refundable again. (The catalog has no
    // refund.failed event; the refund shows status failed.)
    await commitWrites(
      { db, queue: env.DELIVERY_QUEUE },
      {
        statements: [
          stillPending,
          db.update(refunds).set({ status: "failed" }).where(pending),
          db
            .update(payments)
            .set({
              amountRefunded: sql`${payments.amountRefunded} - ${refund.amount}`,
              status: sql`CASE WHEN ${payments.amountRefunded} - ${refund.amount} = 0 THEN 'completed' ELSE 'partially_refunded' END`,
            })
            .where(eq(payments.id, refund.paymentId)),
        ],
      },
    );
    return "failed";
  } catch (error) {
    if (failureReason(error) === REFUND_NOT_PENDING) return "skipped";
    throw error;
  }
}

/** Cron: re-enqueue refunds whose settlement message was lost, or whose worker died holding the lease. */
export async function sweepStaleRefunds(env: Bindings, scheduledTime: number): Promise<number> {
  const ids = await stalePendingIds(createDb(env.DB), refunds, { leasePrefix: "refund_send:", staleAfterMs: REFUND_STALE_MS, now: scheduledTime });
  await enqueueRefundSettlements(env.JOB_QUEUE, ids);
  return ids.length;
}
