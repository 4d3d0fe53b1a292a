// Payout settlement, on the job queue. A new payout is held for PAYOUT_HOLD_SECONDS (its cancel
// window), then sent to the processor and moved pending -> paid | failed. Delivery is
// at-least-once, and two messages for one payout can run at once, so:
//  1. One batch: abort unless pending; take the send lease (job_runs `payout_send:<id>`, held for
//     PAYOUT_SEND_LEASE_MS), after which a cancel is refused; read the payout. A worker that did
//     not take the lease stops there: one payout reaches the processor once per lease, whatever
//     the queue repeats. A canceled payout is never sent.
//  2. The processor call (the processor of the payout's own account and mode), with the payout id
//     as its reference (a real processor's idempotency key). A call that throws has ended: the
//     lease is given back, and the queue's retry calls again with the same reference, which the
//     processor answers as the same payout.
//  3. One batch: abort unless still pending; the conditional UPDATE; payout.paid or payout.failed.
//     A duplicate message finds the payout settled and changes and emits nothing.
//     A processor that accepted the payout without settling it yet (a Stripe payout is `pending`
//     until its bank answers) leaves it pending: the processor's own event settles it
//     (src/payments/processor-settlements.ts), and the lease is kept for PAYOUT_RECHECK_MS, after
//     which the sweep asks the processor again (same reference: it looks the payout up).
// A worker that died holding the lease leaves the payout pending; once the lease has run out and
// the payout is PAYOUT_STALE_MS old, the cron sweep sends it again (same reference).
import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { failureReason, guard, runBatch, type Statement } from "../db/batch";
import { createDb, type Db } from "../db/client";
import { claimLease, leaseTaken, releaseLease } from "../db/leases";
import { stalePendingIds } from "./stale-sweep";
import { jobRuns, payouts } from "../db/schema";
import type { Bindings } from "../env";
import { clock, isoTime } from "../lib/clock";
import type { Processor } from "../processor/types";
import { commitWrites, type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { processorFor } from "../processor";
import { type Tenant, livesHere } from "../db/scope";
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
/**
 * A payout the processor accepted but has not settled (its event settles it) is asked about again
 * after this long, in case the event never comes.
 */
export const PAYOUT_RECHECK_MS = 6 * 60 * 60_000;

const PAYOUT_NOT_PENDING = "payout_not_pending";

/** The job_runs key that marks a payout as handed to the processor. */
export const payoutSendKey = (payoutId: string) => `payout_send:${payoutId}`;

/** SQL: the payout has been handed to the processor, so it can no longer be canceled. */
export const payoutSendClaimed = (payoutId: string) =>
  sql`EXISTS (SELECT 1 FROM ${jobRuns} WHERE ${jobRuns.key} = ${payoutSendKey(payoutId)})`;

/** The job messages that settle payouts, after `delaySeconds` (the cancel window, by default). */
export const payoutSettlementMessages = (payoutIds: string[], delaySeconds = PAYOUT_HOLD_SECONDS): MessageSendRequest<SettlePayoutJob>[] =>
  payoutIds.map((payoutId) => ({ body: { kind: "settlePayout", payoutId }, delaySeconds }));

export async function enqueuePayoutSettlements(queue: Queue, payoutIds: string[], delaySeconds = PAYOUT_HOLD_SECONDS): Promise<void> {
  await sendInBatches(queue, payoutSettlementMessages(payoutIds, delaySeconds));
}

// ...and its account still lives on this shard: once moved away (src/accounts/move.ts), the payout
// is sent from the shard it lives on now, where its send marker must be.
const stillPending = (payoutId: string) =>
  sql`EXISTS (SELECT 1 FROM ${payouts} WHERE ${payouts.id} = ${payoutId} AND ${payouts.status} = 'pending' AND ${livesHere(payouts.accountId)})`;

export async function settlePayout(job: SettlePayoutJob, env: Bindings, processor?: Processor): Promise<"paid" | "failed" | "pending" | "skipped"> {
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

  const sent = payout;
  const outcome = await (async () => (processor ?? (await processorFor(env, db, sent))).sendPayout({
    token: sent.processorToken,
    amount: sent.amount,
    currency: sent.currency,
    reference: sent.id,
    // Sent at the earliest after its hold: a retry of a later day looks the payout up first.
    firstAttemptAt: Date.parse(sent.createdAt),
  }))().catch(async (error) => {
    await releaseLease(db, payoutSendKey(sent.id)).catch(() => {});
    throw error;
  });

  const now = clock.now();
  // The processor's payout id, recorded once known: its events must name it (processor-settlements.ts).
  const recordId =
    sent.livemode && outcome.status !== "failed" && sent.processorObject === null
      ? [db.update(payouts).set({ processorObject: outcome.reference }).where(and(eq(payouts.id, sent.id), isNull(payouts.processorObject)))]
      : [];
  if (outcome.status === "pending") {
    for (const statement of recordId) await statement;
    // Accepted, not settled: the processor's event settles it. The lease keeps the sweep away
    // until the recheck (released early only by a settlement, which ends the pending state).
    await db
      .update(jobRuns)
      .set({ leaseUntil: now + PAYOUT_RECHECK_MS })
      .where(and(eq(jobRuns.key, payoutSendKey(sent.id)), stillPending(sent.id)));
    return "pending";
  }
  try {
    const writes = payoutTransition(db, sent, outcome.status === "succeeded" ? { to: "paid" } : { to: "failed", code: outcome.code, message: outcome.message }, ["pending"], now);
    await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { ...writes, statements: [...writes.statements, ...recordId] });
  } catch (error) {
    if (failureReason(error) === PAYOUT_NOT_IN_STATE) return "skipped";
    throw error;
  }
  return outcome.status === "succeeded" ? "paid" : "failed";
}

/** Batch guard reason: the payout is no longer in a state the transition starts from. */
export const PAYOUT_NOT_IN_STATE = "payout_not_in_state";

export type PayoutStatus = PayoutRow["status"];

/**
 * The one home of a payout's settlement: the guarded, conditional move from one of `from` to
 * paid or failed, with its event (payout.paid / payout.failed, the payout as committed). Used by
 * the settlement job and by the processor's own events (a late failure moves paid -> failed).
 */
export function payoutTransition(
  db: Db,
  payout: Tenant & { id: string },
  change: { to: "paid" } | { to: "failed"; code: string; message: string },
  from: PayoutStatus[],
  now: number,
): { statements: Statement[]; events: EmittedEvent[] } {
  const inState = and(eq(payouts.id, payout.id), inArray(payouts.status, from));
  return {
    statements: [
      guard(db, PAYOUT_NOT_IN_STATE, sql`EXISTS (SELECT 1 FROM ${payouts} WHERE ${inState})`),
      db
        .update(payouts)
        .set({
          status: change.to,
          failureCode: change.to === "failed" ? change.code : null,
          failureMessage: change.to === "failed" ? change.message : null,
          updatedAt: isoTime(now),
        })
        .where(inState),
    ],
    events: [emitEvent(db, payout, { type: change.to === "paid" ? "payout.paid" : "payout.failed", dataSql: payoutJsonSql(payout.id), objectId: payout.id }, now)],
  };
}

/** Cron: re-enqueue payouts whose settlement message was lost, or whose worker died holding the lease. */
export async function sweepStalePayouts(env: Bindings, scheduledTime: number): Promise<number> {
  const ids = await stalePendingIds(createDb(env.DB), payouts, { leasePrefix: "payout_send:", staleAfterMs: PAYOUT_STALE_MS, now: scheduledTime });
  await enqueuePayoutSettlements(env.JOB_QUEUE, ids, 0);
  return ids.length;
}
