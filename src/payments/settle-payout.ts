// Payout settlement, on the job queue. A new payout is held for PAYOUT_HOLD_SECONDS (its cancel
// window), then sent to the processor and moved pending -> paid | failed. Delivery is
// at-least-once, and two messages for one payout can run at once, so:
//  1. One batch: abort unless pending; take the send lease (job_runs `payout_send:<id>`, held for
//     PAYOUT_SEND_LEASE_MS), after which a cancel is refused; read the payout. A worker that did
//     not take the lease stops there: one payout reaches the processor once per lease, whatever
//     the queue repeats. A canceled payout is never sent.
//  2. The processor call, with the payout id as its reference (a real processor's idempotency key).
//     A call that throws has ended: the lease is given back, and the queue's retry calls again
//     with the same reference, which the processor answers as the same payout.
//  3. One batch: abort unless still pending; the conditional UPDATE; payout.paid or payout.failed.
//     A duplicate message finds the payout settled and changes and emits nothing.
// A worker that died holding the lease leaves the payout pending; once the lease has run out and
// the payout is PAYOUT_STALE_MS old, the cron sweep sends it again (same reference).
import { and, eq, sql } from "drizzle-orm";
import { failureReason, guard, runBatch } from "../db/batch";
import { createDb } from "../db/client";
import { claimLease, leaseTaken, releaseLease } from "../db/leases";
import { stalePendingIds } from "./stale-sweep";
import { jobRuns, payouts } from "../db/schema";
import type { Bindings } from "../env";
import { clock, isoTime } from "../lib/clock";
import type { Processor } from "../processor/types";
import { commitWrites, emitEvent } from "../webhooks/outbox";
import { processorOfReference } from "../processor";
import { type PayoutRow, payoutJsonSql } from "./serialize";
import { sendInBatches } from "../lib/queue";

export interface SettlePayoutJob {
  kind: "settlePayout";
  payoutId: string;
}

/** How long a new payout waits before it is sent: the window in which it can be canceled. */
export const PAYOUT_HOLD_SECONDS = 5;
/** A payout pending this long has lost its settlement message; the sweep sends it again. */
export const PAYOUT_STALE_MS = 5 * 60_000;
/** How long a worker holds a payout once it takes it to the processor. */
export const PAYOUT_SEND_LEASE_MS = 2 * 60_000;

const PAYOUT_NOT_PENDING = "payout_not_pending";

/** The job_runs key that marks a payout as handed to the processor. */
export const payoutSendKey = (payoutId: string) => `payout_send:${payoutId}`;

/** SQL: the payout has been handed to the processor, so it can no longer be canceled. */
export const payoutSendClaimed = (payoutId: string) =>
  sql`EXISTS (SELECT 1 FROM ${jobRuns} WHERE ${jobRuns.key} = ${payoutSendKey(payoutId)})`;

export async function enqueuePayoutSettlements(queue: Queue, payoutIds: string[], delaySeconds = PAYOUT_HOLD_SECONDS): Promise<void> {
  await sendInBatches(queue, payoutIds.map((payoutId) => ({ body: { kind: "settlePayout", payoutId } satisfies SettlePayoutJob, delaySeconds })));
}

const stillPending = (payoutId: string) =>
  sql`EXISTS (SELECT 1 FROM ${payouts} WHERE ${payouts.id} = ${payoutId} AND ${payouts.status} = 'pending')`;

export async function settlePayout(job: SettlePayoutJob, env: Bindings, processor?: Processor): Promise<"paid" | "failed" | "skipped"> {
  const db = createDb(env.DB);
  let payout: PayoutRow | undefined;
  try {
    const [, lease, rows] = await runBatch(db, [
      guard(db, PAYOUT_NOT_PENDING, stillPending(job.payoutId)),
      claimLease(db, payoutSendKey(job.payoutId), clock.now(), PAYOUT_SEND_LEASE_MS),
      db.select().from(payouts).where(eq(payouts.id, job.payoutId)),
    ]);
    // Another worker holds the payout: it sends it, or the sweep does once its lease runs out.
    if (!leaseTaken(lease)) return "skipped";
    payout = (rows as PayoutRow[])[0];
  } catch (error) {
    if (failureReason(error) === PAYOUT_NOT_PENDING) return "skipped";
    throw error;
  }
  if (!payout) return "skipped";

  const outcome = await (processor ?? processorOfReference(env, payout.processorToken))
    .sendPayout({ token: payout.processorToken, amount: payout.amount, currency: payout.currency, reference: payout.id })
    .catch(async (error) => {
      await releaseLease(db, payoutSendKey(payout.id)).catch(() => {});
      throw error;
    });

  const now = clock.now();
  const status = outcome.status === "succeeded" ? "paid" : "failed";
  try {
    await commitWrites(
      { db, queue: env.DELIVERY_QUEUE },
      {
        statements: [
          guard(db, PAYOUT_NOT_PENDING, stillPending(payout.id)),
          db
            .update(payouts)
            .set({
              status,
              failureCode: outcome.status === "failed" ? outcome.code : null,
              failureMessage: outcome.status === "failed" ? outcome.message : null,
              updatedAt: isoTime(now),
            })
            .where(and(eq(payouts.id, payout.id), eq(payouts.status, "pending"))),
        ],
        events: [
          emitEvent(db, payout, { type: status === "paid" ? "payout.paid" : "payout.failed", dataSql: payoutJsonSql(payout.id), objectId: payout.id }, now),
        ],
      },
    );
  } catch (error) {
    if (failureReason(error) === PAYOUT_NOT_PENDING) return "skipped";
    throw error;
  }
  return status;
}

/** Cron: re-enqueue payouts whose settlement message was lost, or whose worker died holding the lease. */
export async function sweepStalePayouts(env: Bindings, scheduledTime: number): Promise<number> {
  const ids = await stalePendingIds(createDb(env.DB), payouts, { leasePrefix: "payout_send:", staleAfterMs: PAYOUT_STALE_MS, now: scheduledTime });
  await enqueuePayoutSettlements(env.JOB_QUEUE, ids, 0);
  return ids.length;
}
