// Incomplete subscriptions (Stripe's `incomplete`): POST /subscriptions whose first charge asks for
// 3-D Secure creates the subscription `incomplete`, its first period and invoice `open` (numbered),
// and its payment `requires_action`. How the payment ends decides the subscription:
//
// - it succeeds (the sandbox page's Complete, the live page's return, Stripe's
//   payment_intent.succeeded): `active`, the period and invoice paid, subscription_created then;
// - it fails (Fail, payment_intent.payment_failed), or the payer does not finish within 23 hours
//   (the cron, which cancels the payment at the processor first): `incomplete_expired`, the
//   invoice voided, subscription_updated.
//
// Money safety. These writes ride in the batch that records the payment's outcome (or its cancel),
// which is guarded on the payment still being requires_action: exactly one of them commits, once.
// A success that reaches Tender after the expiry finds the payment canceled, and is given back
// (refunded) by src/payments/authentication.ts, as a late success after any cancel is.
import { and, asc, eq, lte, sql } from "drizzle-orm";
import { failureReason, rawStatement, type Statement } from "../db/batch";
import { createDb, type Db } from "../db/client";
import { invoices, payments, subscriptionPeriods, subscriptions, testClocks, users } from "../db/schema";
import { livesHere } from "../db/scope";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { processorResolver } from "../processor";
import type { PaymentRow } from "../payments/event-data";
import { PAYMENT_STATE_CHANGED, cancelAtProcessor, cancelWrites, releasePaymentStep, takePaymentStep } from "../payments/intents";
import { commitWrites, type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { invoiceVoidedEvent, settleInvoice } from "./invoices";
import { periodAttemptOf } from "./periods";

/** An incomplete subscription whose payment has not succeeded this long after its creation expires (Stripe: 23 hours). */
export const INCOMPLETE_LIFETIME_MS = 23 * 60 * 60 * 1000;
/** Incomplete subscriptions a page of the cron's expiry reads. */
export const INCOMPLETE_EXPIRY_BATCH = 50;
/** Pages one cron run goes through per shard at the most (the rest, in the next run). */
export const INCOMPLETE_EXPIRY_PAGES = 10;

const tenantOf = (payment: PaymentRow) => ({ accountId: payment.accountId, livemode: payment.livemode });

/** Whether a payment is the first charge of an incomplete subscription (its outcome settles the subscription); not a period's attempt paid on its invoice's page (src/billing/invoice-payments.ts). */
export const isFirstChargeOfSubscription = (payment: PaymentRow) =>
  payment.subscriptionId !== null && payment.invoiceId !== null && periodAttemptOf(payment.chargeReference) === null;

/**
 * The waiting first payment of a subscription row: joined on its account, mode and subscription, so
 * that SQLite seeks it in payments_subscription (a join on subscription_id alone cannot use that
 * index, whose leading columns are the account and mode, and scanned it whole: every subscription
 * payment of the shard, once per incomplete subscription).
 */
export const waitingPaymentOfSubscription = () =>
  and(eq(payments.accountId, subscriptions.accountId), eq(payments.livemode, subscriptions.livemode), eq(payments.subscriptionId, subscriptions.id), eq(payments.status, "requires_action"))!;

/**
 * The first payment of the incomplete subscription that the open invoice `invoiceId` is the first
 * invoice of, while it waits for its payer's 3-D Secure (requires_action), or null. The invoice's
 * page sends its payer to this payment's challenge, never to a second charge: its outcome decides
 * the subscription (active, or incomplete_expired with the invoice void).
 */
export async function waitingFirstPaymentOf(db: Db, invoiceId: string): Promise<PaymentRow | null> {
  const rows = await db
    .select({ payment: payments })
    .from(invoices)
    .innerJoin(subscriptions, and(eq(subscriptions.id, invoices.subscriptionId), eq(subscriptions.accountId, invoices.accountId), eq(subscriptions.livemode, invoices.livemode)))
    .innerJoin(payments, and(waitingPaymentOfSubscription(), eq(payments.invoiceId, invoices.id)))
    .where(and(eq(invoices.id, invoiceId), eq(invoices.status, "open"), eq(subscriptions.status, "incomplete"), livesHere(invoices.accountId)))
    .limit(2);
  return rows.map((r) => r.payment).find(isFirstChargeOfSubscription) ?? null;
}

/**
 * The payment succeeded: the subscription (still incomplete) turns active, its renewals scheduled
 * from next_billing_date, its first period and invoice paid; subscription_created and invoice.paid.
 * Nothing when the payment is no first charge of an incomplete subscription.
 */
export function activationWrites(db: Db, payment: PaymentRow, at: number): { statements: Statement[]; events: EmittedEvent[] } {
  if (!isFirstChargeOfSubscription(payment)) return { statements: [], events: [] };
  const subscriptionId = payment.subscriptionId as string;
  const invoiceId = payment.invoiceId as string;
  const updated = isoTime(at);
  const settled = settleInvoice(db, tenantOf(payment), invoiceId, { kind: "paid", paymentId: payment.id }, { at: "clock", realNow: at });
  return {
    statements: [
      rawStatement(
        db,
        sql`UPDATE ${subscriptions} SET status = 'active', periods_billed = 1,
          due_at = CAST(ROUND(unixepoch(next_billing_date, 'subsec') * 1000) AS INTEGER), updated_at = ${updated}
          WHERE id = ${subscriptionId} AND status = 'incomplete'`,
      ),
      db
        .update(subscriptionPeriods)
        .set({ status: "paid", updatedAt: updated })
        .where(and(eq(subscriptionPeriods.subscriptionId, subscriptionId), eq(subscriptionPeriods.periodIndex, 0), eq(subscriptionPeriods.status, "open"))),
      ...settled.statements,
    ],
    events: [emitEvent(db, tenantOf(payment), { type: "subscription_created", subscriptionId, status: "active" }, at), ...settled.events],
  };
}

/**
 * The payment failed or was let go: the subscription (still incomplete) is `incomplete_expired`
 * (or `canceled` for a DELETE), never billed, its first period and invoice voided; invoice.voided
 * and subscription_updated (subscription_canceled for a DELETE).
 */
export function expiryWrites(db: Db, payment: PaymentRow, at: number, status: "incomplete_expired" | "canceled" = "incomplete_expired"): { statements: Statement[]; events: EmittedEvent[] } {
  if (!isFirstChargeOfSubscription(payment)) return { statements: [], events: [] };
  const subscriptionId = payment.subscriptionId as string;
  const invoiceId = payment.invoiceId as string;
  const updated = isoTime(at);
  return {
    statements: [
      db
        .update(subscriptions)
        .set({ status, dueAt: null, canceledAt: updated, updatedAt: updated })
        .where(and(eq(subscriptions.id, subscriptionId), eq(subscriptions.status, "incomplete"))),
      db
        .update(subscriptionPeriods)
        .set({ status: "void", updatedAt: updated })
        .where(and(eq(subscriptionPeriods.subscriptionId, subscriptionId), eq(subscriptionPeriods.periodIndex, 0), eq(subscriptionPeriods.status, "open"))),
      rawStatement(db, sql`UPDATE ${invoices} SET status = 'void', voided_at = ${updated}, updated_at = ${updated} WHERE id = ${invoiceId} AND status = 'open'`),
    ],
    events: [
      invoiceVoidedEvent(db, tenantOf(payment), invoiceId, at),
      emitEvent(db, tenantOf(payment), { type: status === "canceled" ? "subscription_canceled" : "subscription_updated", subscriptionId, status }, at),
    ],
  };
}

/**
 * Lets an incomplete subscription's payment go (the cron after 23 hours, or a DELETE): canceled at
 * the processor (its fixed cancel reference), then recorded with the subscription's expiry in one
 * batch guarded on the payment still waiting. Answers "expired", or "skipped" when the payment was
 * decided meanwhile (its outcome decides the subscription) or the processor could not cancel it.
 */
export async function letGo(env: Bindings, db: Db, payment: PaymentRow, at: number, status: "incomplete_expired" | "canceled", processorOf = processorResolver(env, db)): Promise<"expired" | "skipped"> {
  const processor = await processorOf(tenantOf(payment));
  if (!processor) return "skipped";
  if (!(await takePaymentStep(db, payment.id, at))) return "skipped";
  let held = true;
  try {
    const [current] = await db.select({ status: payments.status }).from(payments).where(and(eq(payments.id, payment.id), livesHere(payments.accountId))).limit(1);
    if (current?.status !== "requires_action") return "skipped";
    const outcome = await cancelAtProcessor(processor, payment);
    // The payer finished at the processor meanwhile: its event, or the page's return, records it.
    if (outcome.status !== "succeeded") {
      console.error(JSON.stringify({ message: "incomplete subscription not expired: the processor did not cancel its payment; looked at again next run", payment: payment.id }));
      return "skipped";
    }
    // The payment canceled, the subscription ended with it (cancelWrites adds expiryWrites).
    const canceled = cancelWrites(db, payment, "abandoned", at, status);
    await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { statements: canceled.statements, events: canceled.events });
    held = false;
    return "expired";
  } catch (error) {
    if (failureReason(error) === PAYMENT_STATE_CHANGED) return "skipped";
    throw error;
  } finally {
    if (held) await releasePaymentStep(db, payment.id);
  }
}

/** A page of the incomplete subscriptions due to expire, with their waiting payment, oldest first, after `after` (the last page's final row). */
export const incompleteDuePage = (db: Db, now: number, after: { createdAt: string; id: string } | null) =>
  db
    .select({ payment: payments, createdAt: subscriptions.createdAt, id: subscriptions.id })
    .from(subscriptions)
    .innerJoin(payments, waitingPaymentOfSubscription())
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
    .where(
      and(
        eq(subscriptions.status, "incomplete"),
        sql`CASE WHEN ${testClocks.id} IS NULL THEN ${lte(subscriptions.createdAt, isoTime(now - INCOMPLETE_LIFETIME_MS))}
            ELSE unixepoch(${subscriptions.startDate}, 'subsec') * 1000 + ${INCOMPLETE_LIFETIME_MS} <= unixepoch(${testClocks.frozenTime}, 'subsec') * 1000 END`,
        livesHere(subscriptions.accountId),
        after ? sql`(${subscriptions.createdAt}, ${subscriptions.id}) > (${after.createdAt}, ${after.id})` : undefined,
      ),
    )
    .orderBy(asc(subscriptions.createdAt), asc(subscriptions.id))
    .limit(INCOMPLETE_EXPIRY_BATCH);

/**
 * The cron: every incomplete subscription of this shard created 23 hours ago or more whose payment
 * still waits is expired (its payment canceled at the processor). At-least-once and safe to
 * overlap: the batch is guarded on the payment still being requires_action, so a second run, or a
 * run racing the payer's success, changes nothing. A subscription of a user on a test clock counts
 * its 23 hours on the clock, from its start_date (as Stripe's test clocks expire it), never on the
 * wall clock.
 */
export async function expireIncompleteSubscriptions(env: Bindings, now: number): Promise<{ expired: number; skipped: number }> {
  const db = createDb(env.DB);
  const processorOf = processorResolver(env, db);
  let expired = 0;
  let skipped = 0;
  // Page by page, oldest first, each page after the last one's final row: one that is skipped (its
  // payment held by a capture or cancel, or a live one whose processor cannot cancel it now) stays
  // incomplete, and must not hold back the ones behind it run after run.
  let after: { createdAt: string; id: string } | null = null;
  for (let page = 0; page < INCOMPLETE_EXPIRY_PAGES; page++) {
    const due: { payment: PaymentRow; createdAt: string; id: string }[] = await incompleteDuePage(db, now, after);
    for (const { payment } of due) {
      try {
        if ((await letGo(env, db, payment, now, "incomplete_expired", processorOf)) === "expired") expired++;
        else skipped++;
      } catch (error) {
        console.error(JSON.stringify({ message: "incomplete subscription expiry failed; retried next run", payment: payment.id, error: String(error) }));
        skipped++;
      }
    }
    if (due.length < INCOMPLETE_EXPIRY_BATCH) break;
    const last = due[due.length - 1];
    after = { createdAt: last.createdAt, id: last.id };
  }
  return { expired, skipped };
}
