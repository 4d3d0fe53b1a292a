// A change with proration_behavior always_invoice (DESIGN.md "Billing depth"): its prorations, with
// any items already pending, are invoiced at once and the invoice charged. As Stripe's
// `pending_if_incomplete`, the change is made only once it is paid: a decline voids the invoice,
// puts the pending items back and changes nothing.
//
//   1. One batch writes the change's items, issues the invoice (open) with them and the pending
//      ones, and claims its charge (a proration_charges row holding the change, unique per
//      subscription while claimed and unique by its processor reference), guarded by the
//      subscription as read and no other charge in flight. An invoice that comes to nothing or
//      less is paid there and then, with nothing charged, and the change made in the same batch.
//   2. The charge is sent, with a reference fixed for the claim.
//   3. One batch settles it: the payment (once: unique by its reference), then the invoice and the
//      claim paid and the change made; or the decline, the invoice void and the items as before.
//
// While a charge is claimed the subscription takes no other change and is not renewed
// (periods.chargeInFlight, periods' first claim). A claim left unsettled (the request died, the
// processor never answered, the settlement's answer was lost) is taken over by the cron once its
// lease ran out: the same reference is sent again (the processor answers the first call's outcome)
// and its settlement recorded.
import { and, asc, eq, inArray, isNull, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { createDb } from "../db/client";
import { failureReason, guard, rawStatement, type Statement } from "../db/batch";
import { type ProrationChange, invoiceItems, prorationCharges, subscriptions, users } from "../db/schema";
import { newId } from "../domain/ids";
import type { OpenCharge } from "../domain/proration";
import type { Bindings } from "../env";
import { clock as wallClock, isoTime } from "../lib/clock";
import { charge, type ChargeResult } from "../payments/charge";
import { cardOf } from "../payments/serialize";
import { processorResolver } from "../processor";
import type { Processor } from "../processor/types";
import { commitWrites, type EmittedEvent } from "../webhooks/outbox";
import { taxRatesOf } from "./tax";
import { invoiceVoidedEvent, issueInvoice, settleInvoice, totalsOf } from "./invoices";
import { CLAIM_STALE_MS, subscriptionUpdatedEvent } from "./periods";
import { type InvoiceItemRow, carriedCreditItem, carriedCreditLine, itemLine } from "./prorations";
import { balanceCreditLine, balanceTakes, excessCreditNoteWrites } from "./balance-credits";
import type { PlanRow } from "./pricing";
import { livesHere } from "../db/scope";

type SubscriptionRow = typeof subscriptions.$inferSelect;
type UserRow = typeof users.$inferSelect;
export type ProrationChargeRow = typeof prorationCharges.$inferSelect;

/** Batch guard reason: this claim's charge is already recorded (another worker settled it). */
export const PRORATION_ALREADY_SETTLED = "proration_already_settled";
/** Claims the cron settles per run. */
export const STALE_PRORATION_CHARGES_PER_RUN = 25;

/**
 * What invoicing a change at once writes, the change its payment makes (`makeChange`), and the
 * claim of its charge, which holds that change (null: nothing to charge, the change is made now).
 */
export interface InvoicedChange {
  statements: Statement[];
  events: EmittedEvent[];
  change: ProrationChange;
  claim: ProrationChargeRow | null;
  invoiceId: string;
}

/**
 * The first batch of an always_invoice change: the change's items and the pending ones on a new
 * invoice, and either the claim of its charge (holding `change`) or, for an invoice of nothing or a
 * credit, the invoice paid and the credit carried on (the caller then makes the change in the same
 * batch).
 */
export function invoiceChangeNow(
  db: Db,
  input: {
    sub: SubscriptionRow;
    plan: PlanRow;
    newItems: InvoiceItemRow[];
    pending: InvoiceItemRow[];
    next: OpenCharge;
    change: Pick<ProrationChange, "planId" | "quantity">;
    reference: string;
    at: number;
    realNow: number;
    /** PUBLIC_URL, for the new invoice's hosted page. */
    pageBase: string | null;
    /** The subscription's user as read: whether its balance takes a credit beyond the invoice. */
    user?: { balance: number; currency: string | null } | null;
  },
): InvoicedChange {
  const { sub, plan, newItems, pending, at, realNow, pageBase } = input;
  const invoiceId = newId("invoice", realNow);
  const items = [...pending, ...newItems];
  const periodStart = isoTime(input.next.coversFrom);
  const periodEnd = isoTime(input.next.periodEnd);
  // The items and their tax (a credit's is negative); a total below zero is carried on as a credit.
  const taxRates = taxRatesOf(sub, plan);
  const total = totalsOf({ currency: plan.currency, lines: items.map(itemLine), taxRates }).total;
  const carried = Math.max(0, -total);
  // A credit beyond the invoice goes to the user's balance as a credit note of the line that brings
  // the invoice to zero (src/billing/balance-credits.ts); to a balance in another currency, it is
  // carried on to the next invoice as an item, as before.
  const toBalance = carried > 0 && sub.userId !== null && balanceTakes(input.user, plan.currency);
  const excessLineId = toBalance ? newId("invoiceLine", realNow) : null;
  const invoice = {
    id: invoiceId,
    tenant: sub,
    subscriptionId: sub.id,
    periodIndex: null,
    userId: sub.userId,
    currency: plan.currency,
    periodStart,
    periodEnd,
    lines: [
      ...items.map(itemLine),
      ...(carried > 0 ? [excessLineId ? balanceCreditLine(excessLineId, carried, periodStart, periodEnd) : carriedCreditLine(carried, periodStart, periodEnd)] : []),
    ],
    taxRates,
  };
  const due = totalsOf(invoice).amountDue;
  const issued = issueInvoice(db, invoice, due > 0 ? { kind: "open" } : { kind: "paid", paymentId: null }, { at, realNow, pageBase });
  const excess = excessLineId
    ? excessCreditNoteWrites(db, { tenant: sub, invoice: { id: invoiceId, userId: sub.userId!, currency: plan.currency }, lineId: excessLineId, amount: carried, at: realNow })
    : null;
  const carry = carried > 0 && !excess ? carriedCreditItem(sub, carried, plan.currency, periodStart, periodEnd, at) : null;
  // Afterwards the subscription has no pending items, or the one credit carried on.
  const change: ProrationChange = {
    ...input.change,
    openCharge: input.next,
    pendingItems: carry ? 1 : 0,
    pendingItemsAmount: carry ? carry.amount : 0,
    newItemIds: newItems.map((i) => i.id),
  };
  const claim: ProrationChargeRow | null =
    due > 0
      ? {
          id: newId("prorationCharge", realNow),
          accountId: sub.accountId,
          livemode: sub.livemode,
          subscriptionId: sub.id,
          invoiceId,
          reference: input.reference,
          amount: due,
          currency: plan.currency,
          status: "claimed",
          change,
          paymentId: null,
          createdAt: isoTime(realNow),
          updatedAt: isoTime(realNow),
        }
      : null;
  return {
    statements: [
      ...issued.statements,
      db.insert(invoiceItems).values(newItems.map((item) => ({ ...item, invoiceId }))),
      // Every pending item (the batch is guarded by their count as read), named by the subscription: D1 binds at most 100 values.
      ...(pending.length > 0 ? [db.update(invoiceItems).set({ invoiceId }).where(and(eq(invoiceItems.subscriptionId, sub.id), isNull(invoiceItems.invoiceId)))] : []),
      ...(carry ? [db.insert(invoiceItems).values(carry)] : []),
      ...(excess?.statements ?? []),
      ...(claim ? [db.insert(prorationCharges).values(claim)] : []),
    ],
    events: [...issued.events, ...(excess?.events ?? [])],
    change,
    claim,
    invoiceId,
  };
}

/** Sends a claimed change's charge: the subscription's card, the claim's reference. */
export function chargeClaimed(db: Db, processor: Processor, sub: SubscriptionRow, user: Pick<UserRow, "id" | "email">, claim: ProrationChargeRow, realNow: number) {
  return charge({
    db,
    processor,
    accountId: sub.accountId,
    livemode: sub.livemode,
    customer: { id: user.id, email: user.email },
    subscriptionId: sub.id,
    invoiceId: claim.invoiceId,
    amount: claim.amount,
    currency: claim.currency,
    source: { token: sub.processorToken },
    summary: cardOf(sub),
    fingerprint: sub.cardFingerprint,
    at: realNow,
    processorReference: claim.reference,
    firstAttemptAt: Date.parse(claim.createdAt),
  });
}

/**
 * The batch that settles a claimed change's charge: the payment once, then the invoice and the
 * claim paid and the change made; or, declined, the invoice void, the change's own items deleted
 * and the older ones pending again (the subscription as it was).
 */
export function settleProrationCharge(db: Db, sub: SubscriptionRow, claim: ProrationChargeRow, result: ChargeResult, realNow: number): { statements: Statement[]; events: EmittedEvent[] } {
  const now = isoTime(realNow);
  const statements: Statement[] = [
    guard(db, PRORATION_ALREADY_SETTLED, sql`NOT EXISTS (SELECT 1 FROM payments WHERE charge_reference = ${claim.reference})`),
    ...result.statements,
    db.update(prorationCharges).set({ status: result.succeeded ? "paid" : "declined", paymentId: result.payment.id, updatedAt: now }).where(eq(prorationCharges.id, claim.id)),
  ];
  const events: EmittedEvent[] = [...result.events];
  if (result.succeeded) {
    const settled = settleInvoice(db, sub, claim.invoiceId, { kind: "paid", paymentId: result.payment.id }, { at: "clock", realNow });
    statements.push(...settled.statements, makeChange(db, sub.id, claim.change, now));
    events.push(...settled.events, subscriptionUpdatedEvent(db, sub, sub.id, realNow));
    return { statements, events };
  }
  const voided = settleInvoice(db, sub, claim.invoiceId, { kind: "failed", paymentId: result.payment.id, status: "void" }, { at: "clock", realNow });
  voided.events.push(invoiceVoidedEvent(db, sub, claim.invoiceId, realNow));
  statements.push(
    ...voided.statements,
    ...(claim.change.newItemIds.length > 0 ? [db.delete(invoiceItems).where(inArray(invoiceItems.id, claim.change.newItemIds))] : []),
    db.update(invoiceItems).set({ invoiceId: null }).where(eq(invoiceItems.invoiceId, claim.invoiceId)),
  );
  events.push(...voided.events);
  return { statements, events };
}

/** The change a paid invoice makes: its plan, quantity, open charge and pending items. */
export const makeChange = (db: Db, subscriptionId: string, change: Omit<ProrationChange, "newItemIds">, now: string): Statement =>
  rawStatement(
    db,
    sql`UPDATE subscriptions SET plan_id = ${change.planId}, quantity = ${change.quantity}, open_charge = ${JSON.stringify(change.openCharge)},
      pending_items = ${change.pendingItems}, pending_items_amount = ${change.pendingItemsAmount}, pending_plan_id = NULL, pending_quantity = NULL,
      updated_at = ${now} WHERE id = ${subscriptionId}`,
  );

/**
 * The cron task: settles the claimed change charges whose lease ran out. Each is taken over by one
 * conditional UPDATE (one worker wins), sent again with its reference, and settled. Throws the
 * first failure after trying every one.
 */
export async function settleStaleProrationCharges(env: Bindings, realNow: number = wallClock.now()): Promise<number> {
  const db = createDb(env.DB);
  const staleIso = isoTime(realNow - CLAIM_STALE_MS);
  const found = await db
    .select({ claim: prorationCharges, sub: subscriptions, user: users })
    .from(prorationCharges)
    .innerJoin(subscriptions, eq(subscriptions.id, prorationCharges.subscriptionId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .where(and(eq(prorationCharges.status, "claimed"), lt(prorationCharges.updatedAt, staleIso), livesHere(prorationCharges.accountId)))
    .orderBy(asc(prorationCharges.updatedAt))
    .limit(STALE_PRORATION_CHARGES_PER_RUN);
  const resolve = processorResolver(env, db);
  let settled = 0;
  let failure: unknown = null;
  for (const { claim, sub, user } of found) {
    try {
      const processor = await resolve(sub);
      // A live account without a connection keeps its claim until it connects one: the charge may have moved money.
      if (!processor) continue;
      const [taken] = await db
        .update(prorationCharges)
        .set({ updatedAt: isoTime(realNow) })
        .where(and(eq(prorationCharges.id, claim.id), eq(prorationCharges.status, "claimed"), lt(prorationCharges.updatedAt, staleIso)))
        .returning({ id: prorationCharges.id });
      if (!taken) continue;
      const result = await chargeClaimed(db, processor, sub, user, claim, realNow);
      try {
        await commitWrites({ db, queue: env.DELIVERY_QUEUE }, settleProrationCharge(db, sub, claim, result, realNow));
      } catch (error) {
        // Recorded meanwhile by the request that claimed it: nothing left to do.
        if (failureReason(error) !== PRORATION_ALREADY_SETTLED) throw error;
      }
      settled++;
    } catch (error) {
      failure ??= error;
    }
  }
  if (failure) throw failure;
  return settled;
}
