// What a processor's own events settle, applied to Tender's objects: the one home of that rule.
// The Stripe webhook route (src/routes/processor-webhooks/stripe.ts) verifies an event and reads it
// as a ProcessorSettlement; this applies it, once per event id, in any order:
//
//  - every event's id is written to processor_events in the same batch as its effect (the primary
//    key refuses a second one: a redelivery, or two deliveries at once, apply once);
//  - a payout: pending -> paid (payout.paid); pending or paid -> failed (payout.failed: a payout
//    can fail after it was paid, which Stripe reports days later), after the money is brought back
//    (reclaimFailedPayout reverses the transfer). Failed is final: a payout.paid that arrives after
//    payout.failed changes nothing, whatever order Stripe sent them in;
//  - a refund: pending -> succeeded (refund.completed); pending or succeeded -> failed (its amount
//    refundable again). Failed is final, likewise;
//  - a dispute: payment.disputed about the payment whose processor reference it names;
//  - the object is found only in the account and mode of the connection the event was signed for;
//    an object Tender does not know there, or an event Tender does not act on, changes nothing.
//
// The transitions are the same ones the settlement jobs make (payoutTransition, refundTransition),
// with their guards: should the object change between the read and the batch (the job settling it
// at that moment), the batch is refused and the event is read against the object again.
import { and, eq } from "drizzle-orm";
import { failureReason } from "../db/batch";
import type { Db } from "../db/client";
import { payments, payouts, processorEvents, refunds, users } from "../db/schema";
import { type Tenant, ownedBy } from "../db/scope";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import type { Processor, ProcessorSettlement } from "../processor/types";
import { commitWrites, type WriteSet } from "../webhooks/outbox";
import { paymentDisputedEvent } from "./disputes";
import { PAYOUT_NOT_IN_STATE, payoutTransition } from "./settle-payout";
import { REFUND_NOT_IN_STATE, refundTransition } from "./settle-refund";

/** What became of an event: it changed an object, found it already so, was not Tender's, or was applied before. */
export type SettlementResult = "applied" | "unchanged" | "ignored" | "duplicate";

export interface SettlementContext {
  env: Bindings;
  db: Db;
  /** The account (and mode) of the connection the event was signed for. */
  tenant: Tenant;
  provider: "stripe";
  /** The account's processor, to bring back the money of a payout that failed after it was sent. */
  processor: () => Promise<Processor>;
  /** The processor account a payout token pays (Stripe: the connected account), checked against the event's. */
  payoutAccountOf?: (token: string) => string | null;
  now: number;
}

/** The unique index of processor_events, as a refused batch names it: the event was applied before. */
const ALREADY_RECORDED = "unique:processor_events.account_id, processor_events.event_id";
/** Reads of the object against a concurrent change before giving up (the processor sends it again). */
const MAX_TRIES = 3;

interface Plan {
  result: Exclude<SettlementResult, "duplicate">;
  objectId: string | null;
  writes: Pick<WriteSet, "statements" | "events">;
}

const nothing = (result: Plan["result"], objectId: string | null = null): Plan => ({ result, objectId, writes: { statements: [], events: [] } });

/** Whether this event was applied (or recorded) before: answered without touching anything. */
export async function alreadyRecorded(db: Db, tenant: Tenant, eventId: string): Promise<boolean> {
  const [row] = await db
    .select({ eventId: processorEvents.eventId })
    .from(processorEvents)
    .where(and(eq(processorEvents.accountId, tenant.accountId), eq(processorEvents.eventId, eventId)))
    .limit(1);
  return row !== undefined;
}

export async function applySettlement(ctx: SettlementContext, settlement: ProcessorSettlement): Promise<SettlementResult> {
  const { db, tenant } = ctx;
  for (let tries = 1; ; tries++) {
    const plan = await planOf(ctx, settlement);
    const record = db.insert(processorEvents).values({
      accountId: tenant.accountId,
      livemode: tenant.livemode,
      provider: ctx.provider,
      eventId: settlement.eventId,
      type: settlement.type,
      outcome: plan.result,
      objectId: plan.objectId,
      receivedAt: isoTime(ctx.now),
    });
    try {
      await commitWrites({ db, queue: ctx.env.DELIVERY_QUEUE }, { statements: [record, ...plan.writes.statements], events: plan.writes.events });
      return plan.result;
    } catch (error) {
      const reason = failureReason(error);
      if (reason === ALREADY_RECORDED) return "duplicate";
      const raced = reason === PAYOUT_NOT_IN_STATE || reason === REFUND_NOT_IN_STATE;
      if (!raced || tries >= MAX_TRIES) throw error;
    }
  }
}

async function planOf(ctx: SettlementContext, settlement: ProcessorSettlement): Promise<Plan> {
  switch (settlement.kind) {
    case "ignore":
      return nothing("ignored");
    case "payout":
      return planPayout(ctx, settlement);
    case "refund":
      return planRefund(ctx, settlement);
    case "dispute":
      return planDispute(ctx, settlement);
  }
}

async function planPayout(ctx: SettlementContext, s: Extract<ProcessorSettlement, { kind: "payout" }>): Promise<Plan> {
  const { db, tenant, now } = ctx;
  const [payout] = await db.select().from(payouts).where(and(ownedBy(payouts, tenant), eq(payouts.id, s.reference))).limit(1);
  if (!payout) return nothing("ignored");
  // The event must come from the account the payout was sent to (Stripe: the connected account).
  if (s.account && ctx.payoutAccountOf && ctx.payoutAccountOf(payout.processorToken) !== s.account) {
    console.error(JSON.stringify({ message: "processor event about a payout sent elsewhere: ignored", event: s.eventId, payout: payout.id }));
    return nothing("ignored", payout.id);
  }
  if (s.outcome === "paid") {
    if (payout.status !== "pending") return nothing("unchanged", payout.id);
    return { result: "applied", objectId: payout.id, writes: payoutTransition(db, payout, { to: "paid" }, ["pending"], now) };
  }
  if (payout.status !== "pending" && payout.status !== "paid") return nothing("unchanged", payout.id);
  // The payout failed after it was sent: the transfer to the recipient's account is reversed
  // first, so the money is back before Tender says the payout failed. A reversal that throws
  // leaves everything as it is (the processor sends the event again).
  const reclaimed = await (await ctx.processor()).reclaimFailedPayout({ token: payout.processorToken, reference: payout.id });
  const message =
    reclaimed.status === "succeeded" ? s.message : `${s.message} The money could not be brought back from the recipient's account: ${reclaimed.message}`;
  if (reclaimed.status !== "succeeded") {
    console.error(JSON.stringify({ message: "failed payout's transfer not reversed", payout: payout.id, reason: reclaimed.message }));
  }
  return { result: "applied", objectId: payout.id, writes: payoutTransition(db, payout, { to: "failed", code: s.code, message }, [payout.status], now) };
}

async function planRefund(ctx: SettlementContext, s: Extract<ProcessorSettlement, { kind: "refund" }>): Promise<Plan> {
  const { db, tenant, now } = ctx;
  const [refund] = await db.select().from(refunds).where(and(ownedBy(refunds, tenant), eq(refunds.id, s.reference))).limit(1);
  if (!refund) return nothing("ignored");
  if (s.outcome === "succeeded") {
    if (refund.status !== "pending") return nothing("unchanged", refund.id);
    return { result: "applied", objectId: refund.id, writes: refundTransition(db, refund, "succeeded", ["pending"], now) };
  }
  if (refund.status === "failed") return nothing("unchanged", refund.id);
  return { result: "applied", objectId: refund.id, writes: refundTransition(db, refund, "failed", [refund.status], now) };
}

async function planDispute(ctx: SettlementContext, s: Extract<ProcessorSettlement, { kind: "dispute" }>): Promise<Plan> {
  const { db, tenant, now } = ctx;
  const [found] = await db
    .select({ payment: payments, user: { id: users.id, email: users.email } })
    .from(payments)
    .leftJoin(users, eq(users.id, payments.userId))
    .where(and(ownedBy(payments, tenant), eq(payments.processorReference, s.chargeReference)))
    .limit(1);
  if (!found) return nothing("ignored");
  const dispute = { id: s.processorObject, amount: s.amount, currency: s.currency, reason: s.reason, status: s.status };
  return {
    result: "applied",
    objectId: found.payment.id,
    writes: { statements: [], events: [paymentDisputedEvent(db, found.payment, found.user, dispute, now)] },
  };
}
