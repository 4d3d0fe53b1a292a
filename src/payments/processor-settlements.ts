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
//  - a PaymentIntent's payment_intent.succeeded / .amount_capturable_updated / .payment_failed /
//    .canceled: how the 3-D Secure of the payment whose processor reference it is ended, recorded
//    as the payer's return to the page records it (src/payments/authentication.ts), whichever comes
//    first; a success that finds the payment canceled is given back (refunded, or released);
//  - the object is found only in the account and mode of the connection the event was signed for;
//    an object Tender does not know there, or an event Tender does not act on, changes nothing;
//  - and an event settles an object only if it comes from where Tender made that object
//    (madeThere: the Stripe account it was made through, and the connected account it lives on,
//    or none for the platform's own), in the mode of the key that made it, and names the Stripe
//    object id Tender recorded (recorded from the event when Tender did not know it yet). Every
//    kind of event that settles a Tender object goes through that one check.
//
// The transitions are the same ones the settlement jobs make (payoutTransition, refundTransition),
// with their guards: should the object change between the read and the batch (the job settling it
// at that moment), the batch is refused and the event is read against the object again.
import { and, eq, isNull } from "drizzle-orm";
import { failureReason, guard } from "../db/batch";
import type { Db } from "../db/client";
import { payments, payouts, processorEvents, refunds, users } from "../db/schema";
import { type Tenant, ownedBy } from "../db/scope";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { accountLivesHere } from "../processor/in-flight";
import type { Processor, ProcessorSettlement } from "../processor/types";
import { commitWrites, type WriteSet } from "../webhooks/outbox";
import { type AuthenticationResult, authenticationWrites, giveBack } from "./authentication";
import { heldAttemptOf } from "../billing/invoice-payments";
import { paymentDisputedEvent } from "./disputes";
import { PAYMENT_STATE_CHANGED } from "./intents";
import { PAYOUT_NOT_IN_STATE, payoutTransition } from "./settle-payout";
import { REFUND_NOT_IN_STATE, refundTransition } from "./settle-refund";

/** What became of an event: it changed an object, found it already so, was not Tender's, or was applied before. */
export type SettlementResult = "applied" | "unchanged" | "ignored" | "duplicate";

/** The connection whose webhook secret verified the event (the live one, or a retired one). */
export interface EventSource {
  /** Its processor account (Stripe's platform `acct_…`). */
  processorAccount: string;
  /** Whether its secret key is a live one: the mode its events must be of. */
  livemode: boolean;
}

export interface SettlementContext {
  env: Bindings;
  db: Db;
  /** The account (and mode) of the connection the event was signed for. */
  tenant: Tenant;
  provider: "stripe";
  /** Where the event was verified: only objects made through that connection are settled by it. */
  source: EventSource;
  /**
   * The processor of the Stripe account an object was made through (the live connection, or a
   * retired one), only to bring back the money of a payout that failed after it was sent.
   */
  processorThrough: (processorAccount: string) => Promise<Processor | null>;
  /** The processor account a payout token pays (Stripe: the connected account), checked against the event's. */
  payoutAccountOf: (token: string) => string | null;
  /** The card a payout token pays (Stripe: `card_…`), checked against the event's while Tender has not recorded the payout's id. */
  payoutCardOf: (token: string) => string | null;
  now: number;
}

/** Where Tender made a processor object, as its row records it. */
export interface MadeAt {
  /** The Stripe account (the connection's) it was made through; null or empty: not known. */
  processorAccount: string | null;
  /** The connected account the object lives on (a payout's recipient), or null: the platform's own. */
  connectedAccount: string | null;
  /** The processor's id of the object as Tender recorded it, or null: not recorded yet. */
  processorObject: string | null;
}

/**
 * The one check every Stripe event that settles a Tender object passes (payouts, refunds,
 * disputes, and any later kind): null when the event comes from where Tender made the object, or
 * why not. It must be verified with a secret of the connection the object was made through, come
 * from the account the object lives on (a platform event, without `account`, never settles a
 * connected account's payout; a connected account's event never settles the platform's refund),
 * be of that connection's mode, and name the object id Tender recorded.
 */
export function madeThere(ctx: Pick<SettlementContext, "source">, event: { account: string | null; livemode: boolean; processorObject: string }, made: MadeAt): string | null {
  if (!made.processorAccount) return "the object was made through no Stripe account Tender knows";
  if (made.processorAccount !== ctx.source.processorAccount) return `the object was made through Stripe account ${made.processorAccount}, the event was signed for ${ctx.source.processorAccount}`;
  if (event.account !== made.connectedAccount) return `the event comes from ${event.account ?? "the platform"}, the object lives on ${made.connectedAccount ?? "the platform"}`;
  if (event.livemode !== ctx.source.livemode) return `a ${event.livemode ? "live" : "test"}-mode event, the object was made with a ${ctx.source.livemode ? "live" : "test"}-mode key`;
  if (made.processorObject !== null && made.processorObject !== event.processorObject) return `the event names ${event.processorObject}, Tender recorded ${made.processorObject}`;
  return null;
}

/**
 * An event that is not from where the object was made: acknowledged, said in the log, nothing
 * changed, and not recorded. The same event id may still come from there: Stripe sends a connected
 * account's event to the Connect endpoint of every platform it is connected to, so a payee
 * connected to a retired platform and to the live one sends one event through both. Recorded, the
 * first delivery would answer the one that counts `duplicate`.
 */
function notFromThere(s: ProcessorSettlement, objectId: string, why: string): Plan {
  console.error(JSON.stringify({ message: "processor event not from where the object was made: ignored", event: s.eventId, type: s.type, object: objectId, why }));
  return { ...nothing("ignored", objectId), unrecorded: true };
}

/** The unique index of processor_events, as a refused batch names it: the event was applied before. */
const ALREADY_RECORDED = "unique:processor_events.account_id, processor_events.event_id";
/** The account moved to another shard while its event was being applied here. */
export const SETTLED_ON_A_SHARD_LEFT = "settlement_account_moved";
/** Reads of the object against a concurrent change before giving up (the processor sends it again). */
const MAX_TRIES = 3;

interface Plan {
  result: Exclude<SettlementResult, "duplicate">;
  objectId: string | null;
  writes: Pick<WriteSet, "statements" | "events">;
  /** Not recorded as applied: a later delivery of the same event id is read again (notFromThere). */
  unrecorded?: true;
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
    if (plan.unrecorded) return plan.result;
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
      // Only where the account lives: a move that switched while the plan was made (or its
      // processor call ran) has copied this shard already, and what it writes here would be left
      // behind (the caller answers so that the processor sends the event again, to the new shard).
      const here = guard(db, SETTLED_ON_A_SHARD_LEFT, accountLivesHere(tenant.accountId));
      await commitWrites({ db, queue: ctx.env.DELIVERY_QUEUE }, { statements: [here, record, ...plan.writes.statements], events: plan.writes.events });
      return plan.result;
    } catch (error) {
      const reason = failureReason(error);
      if (reason === ALREADY_RECORDED) return "duplicate";
      const raced = reason === PAYOUT_NOT_IN_STATE || reason === REFUND_NOT_IN_STATE || reason === PAYMENT_STATE_CHANGED;
      if (!raced || tries >= MAX_TRIES) throw error;
    }
  }
}

/**
 * The processor's id of the object, recorded from the event when Tender did not know it yet (a
 * reply lost after Stripe made it): written only while still unknown, in the effect's batch.
 */
function recordProcessorObject(db: Db, table: typeof payouts | typeof refunds, id: string, recorded: string | null, named: string) {
  if (recorded !== null) return [];
  return [db.update(table).set({ processorObject: named }).where(and(eq(table.id, id), isNull(table.processorObject)))];
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
    case "payment_intent":
      return planPaymentIntent(ctx, settlement);
    case "setup_intent":
      // Applied by the webhook route through the checkout page (settleSetupIntentEvent), never here.
      return nothing("ignored");
  }
}

async function planPaymentIntent(ctx: SettlementContext, s: Extract<ProcessorSettlement, { kind: "payment_intent" }>): Promise<Plan> {
  const { db, tenant, now } = ctx;
  const [found] = await db
    .select({ payment: payments, user: { id: users.id, email: users.email } })
    .from(payments)
    .leftJoin(users, eq(users.id, payments.userId))
    .where(and(ownedBy(payments, tenant), eq(payments.processorReference, s.chargeReference)))
    .limit(1);
  if (!found) return nothing("ignored");
  // A PaymentIntent is the platform's: the object Tender recorded is the intent itself.
  const why = madeThere(ctx, s, { processorAccount: found.payment.processorAccount, connectedAccount: null, processorObject: found.payment.processorReference });
  if (why) return notFromThere(s, found.payment.id, why);
  const { payment } = found;
  const state = s.state as AuthenticationResult;
  if (payment.status === "requires_action") {
    const customer = found.user?.id ? { id: found.user.id, email: found.user.email } : null;
    // An invoice page's payment settles the period attempt it holds with its success.
    const held = state.status === "succeeded" ? await heldAttemptOf(db, payment, now) : null;
    const writes = authenticationWrites(db, payment, customer, state, now, held);
    return { result: "applied", objectId: payment.id, writes: { statements: writes.statements, events: writes.events } };
  }
  // Stripe took money Tender had let go of (canceled while the payer was authenticating, or
  // recorded failed: Stripe keeps a PaymentIntent whose authentication failed confirmable): given back now.
  if ((payment.status === "canceled" || payment.status === "failed") && state.status === "succeeded") {
    await giveBack(ctx.env, db, payment, state, now, {});
    return nothing("applied", payment.id);
  }
  // Every other PaymentIntent event (a payment that never asked, or whose outcome was recorded by the page first).
  return nothing("unchanged", payment.id);
}

async function planPayout(ctx: SettlementContext, s: Extract<ProcessorSettlement, { kind: "payout" }>): Promise<Plan> {
  const { db, tenant, now } = ctx;
  const [payout] = await db.select().from(payouts).where(and(ownedBy(payouts, tenant), eq(payouts.id, s.reference))).limit(1);
  if (!payout) return nothing("ignored");
  // The event must come from the account the payout was sent to (Stripe: the connected account).
  // A payout always lives on its recipient's connected account: one whose token names none is settled by no event.
  const recipient = ctx.payoutAccountOf(payout.processorToken);
  const why = recipient === null ? "the payout names no connected account" : madeThere(ctx, s, { processorAccount: payout.processorAccount, connectedAccount: recipient, processorObject: payout.processorObject });
  if (why) return notFromThere(s, payout.id, why);
  // Unlike a refund (made on the platform, where only Tender makes refunds), a payout lives on the
  // recipient's connected account, whose owner can make payouts of its own carrying Tender's
  // reference. Until Tender has recorded its payout's Stripe id, an event settles it only if its
  // payout is Tender's to the cent: same amount, currency and card.
  if (payout.processorObject === null) {
    const card = ctx.payoutCardOf(payout.processorToken);
    if (s.amount !== payout.amount || s.currency !== payout.currency || card === null || s.destination !== card) {
      return notFromThere(s, payout.id, `Tender has not recorded its Stripe payout id, and ${s.processorObject} is not its payout (${s.amount} ${s.currency} to ${s.destination})`);
    }
  }
  const recordId = recordProcessorObject(db, payouts, payout.id, payout.processorObject, s.processorObject);
  if (s.outcome === "paid") {
    if (payout.status !== "pending") return nothing("unchanged", payout.id);
    const writes = payoutTransition(db, payout, { to: "paid" }, ["pending"], now);
    return { result: "applied", objectId: payout.id, writes: { ...writes, statements: [...writes.statements, ...recordId] } };
  }
  if (payout.status !== "pending" && payout.status !== "paid") return nothing("unchanged", payout.id);
  // The payout failed after it was sent: the transfer to the recipient's account is reversed
  // first, so the money is back before Tender says the payout failed. A reversal that throws
  // leaves everything as it is (the processor sends the event again). It goes through the Stripe
  // account that sent the payout, even when that connection was retired since.
  const through = await ctx.processorThrough(payout.processorAccount!);
  if (!through) throw new Error(`No connection, live or retired, of Stripe account ${payout.processorAccount} to reverse payout ${payout.id}'s transfer with`);
  const reclaimed = await through.reclaimFailedPayout({ token: payout.processorToken, reference: payout.id });
  const message =
    reclaimed.status === "succeeded" ? s.message : `${s.message} The money could not be brought back from the recipient's account: ${reclaimed.message}`;
  if (reclaimed.status !== "succeeded") {
    console.error(JSON.stringify({ message: "failed payout's transfer not reversed", payout: payout.id, reason: reclaimed.message }));
  }
  const writes = payoutTransition(db, payout, { to: "failed", code: s.code, message }, [payout.status], now);
  return { result: "applied", objectId: payout.id, writes: { ...writes, statements: [...writes.statements, ...recordId] } };
}

async function planRefund(ctx: SettlementContext, s: Extract<ProcessorSettlement, { kind: "refund" }>): Promise<Plan> {
  const { db, tenant, now } = ctx;
  const [refund] = await db.select().from(refunds).where(and(ownedBy(refunds, tenant), eq(refunds.id, s.reference))).limit(1);
  if (!refund) return nothing("ignored");
  // A refund is made on the platform (never on a connected account), through its payment's Stripe account.
  const why = madeThere(ctx, s, { processorAccount: refund.processorAccount, connectedAccount: null, processorObject: refund.processorObject });
  if (why) return notFromThere(s, refund.id, why);
  const recordId = recordProcessorObject(db, refunds, refund.id, refund.processorObject, s.processorObject);
  const withId = (writes: Plan["writes"]) => ({ ...writes, statements: [...writes.statements, ...recordId] });
  if (s.outcome === "succeeded") {
    if (refund.status !== "pending") return nothing("unchanged", refund.id);
    return { result: "applied", objectId: refund.id, writes: withId(refundTransition(db, refund, "succeeded", ["pending"], now)) };
  }
  if (refund.status === "failed") return nothing("unchanged", refund.id);
  return { result: "applied", objectId: refund.id, writes: withId(refundTransition(db, refund, "failed", [refund.status], now)) };
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
  // Disputes are on the platform's charges: the PaymentIntent is the object Tender recorded.
  const why = madeThere(ctx, { ...s, processorObject: s.chargeReference }, { processorAccount: found.payment.processorAccount, connectedAccount: null, processorObject: found.payment.processorReference });
  if (why) return notFromThere(s, found.payment.id, why);
  const dispute = { id: s.processorObject, amount: s.amount, currency: s.currency, reason: s.reason, status: s.status };
  return {
    result: "applied",
    objectId: found.payment.id,
    writes: { statements: [], events: [paymentDisputedEvent(db, found.payment, found.user, dispute, now)] },
  };
}
