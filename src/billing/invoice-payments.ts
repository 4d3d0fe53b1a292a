// Paying an open invoice on its hosted page (src/pages/invoice-pay.tsx), 3-D Secure included.
//
// The invoice of a past-due subscription's period is charged exactly as a dunning retry charges it
// (src/billing/periods.ts): the period's next attempt is claimed (`pay` with the subscription's
// card, `card_update` with a card typed on the page and vaulted first, which becomes the
// subscription's card once it pays), the processor is sent that attempt's fixed reference, and the
// settlement records the payment, the period, the invoice and the subscription in one batch. So a
// double click, a second tab and a dunning retry at the same moment never both charge: one claim
// wins, the others charge nothing.
//
// The payer is there, so the charge is on session: a card whose bank asks for 3-D Secure makes a
// payment in requires_action, sent through the challenge page (src/pages/authenticate.tsx) and back
// to the invoice's page. That payment holds the period's claim (periods.ts awaitingPayer: no
// retry, takeover or second page payment charges meanwhile), and the attempt is settled by the
// batch that records how the authentication ended (src/payments/authentication.ts), whoever
// learns it first (the sandbox page, the live page's return, Stripe's payment_intent.* event):
// a success settles the period as a paid retry does (invoice paid, subscription active,
// invoice.paid); a failure, or a cancel (the payment abandoned), counts the attempt as a declined
// Pay now does, and dunning goes on. A success that finds the attempt no longer held (its period
// settled otherwise meanwhile) is refunded in full in the same batch.
import { and, eq, sql } from "drizzle-orm";
import { failureReason, guard, rawStatement, runBatch, type Statement } from "../db/batch";
import { createDb, type Db } from "../db/client";
import { type ClaimCard, invoices, payments, subscriptions, testClocks } from "../db/schema";
import { livesHere, type Tenant } from "../db/scope";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { randomToken } from "../lib/crypto";
import { newPageSecret } from "../pages/links";
import { publicUrl } from "../pages/public-url";
import type { CardInput } from "../payments/card-input";
import { withProcessorRetries } from "../payments/charge";
import { tokenizedCardFingerprint } from "../payments/methods";
import { cardFingerprintSecret } from "../env";
import type { ChargeResult } from "../payments/charge";
import type { PaymentRow } from "../payments/event-data";
import { processorOf } from "../processor";
import { accountLivesHere } from "../processor/in-flight";
import { commitWrites, type EmittedEvent } from "../webhooks/outbox";
import { waitingFirstPaymentOf } from "./incomplete";
import { settleInvoice } from "./invoices";
import {
  type BillableRow,
  PERIOD_ALREADY_SETTLED,
  type PeriodClaim,
  attemptSettlement,
  chargePeriod,
  claimOf,
  claimPeriod,
  hasUnsettledClaim,
  heldClaim,
  ownCardClaim,
  periodAttemptOf,
  periodReference,
  releaseClaim,
  selectBillableRows,
} from "./periods";

/** The subscription row whose open period the invoice bills, with its test clock's time, or null. */
export interface PayableRow extends BillableRow {
  clockTime: number | null;
}

/** How the page's payment went. */
export type PagePayment =
  | { kind: "paid" }
  | { kind: "authenticate"; url: string }
  | { kind: "declined"; message: string }
  /** The card given names none the processor can charge (an unknown PaymentMethod). */
  | { kind: "invalid"; message: string }
  /** Another payment of the invoice is at the processor, or waits for its payer's authentication. */
  | { kind: "in_progress"; authenticateUrl: string | null }
  /** The invoice is an incomplete subscription's first: its first payment waits for its payer's 3-D Secure (`url`, its challenge), and nothing else may charge it. */
  | { kind: "first_charge_waits"; url: string | null }
  | { kind: "not_payable" }
  /** Live mode without a processor connection. */
  | { kind: "unavailable" };

const tenantOf = (row: { accountId: string; livemode: boolean }): Tenant => ({ accountId: row.accountId, livemode: row.livemode });

/** The past-due subscription whose open period the open invoice `invoiceId` bills (read on the invoice's shard), or null: the invoice is not payable. */
export async function payableRowOf(db: Db, invoiceId: string): Promise<PayableRow | null> {
  const [found] = await db
    .select({ subscriptionId: invoices.subscriptionId, periodIndex: invoices.periodIndex })
    .from(invoices)
    .where(and(eq(invoices.id, invoiceId), eq(invoices.status, "open")))
    .limit(1);
  if (!found?.subscriptionId || found.periodIndex === null) return null;
  const [row] = await selectBillableRows(db).where(and(eq(subscriptions.id, found.subscriptionId), livesHere(subscriptions.accountId))).limit(1);
  if (!row || row.sub.status !== "past_due" || row.sub.periodsBilled !== found.periodIndex) return null;
  const clock = row.user.testClockId
    ? (await db.select({ frozenTime: testClocks.frozenTime }).from(testClocks).where(eq(testClocks.id, row.user.testClockId)).limit(1))[0]
    : undefined;
  return { ...row, clockTime: clock ? Date.parse(clock.frozenTime) : null };
}

/** The payment that holds the period's claim while its payer authenticates, if one does: its 3-D Secure page. */
export async function waitingPaymentOf(db: Db, row: PayableRow): Promise<PaymentRow | null> {
  if (!hasUnsettledClaim(row) || !row.period) return null;
  const [payment] = await db
    .select()
    .from(payments)
    .where(and(eq(payments.chargeReference, periodReference(row.sub.id, row.sub.periodsBilled, row.period.attempts)), eq(payments.status, "requires_action")))
    .limit(1);
  return payment ?? null;
}

/** A card given on the page: typed into Tender's card form (test mode), or a PaymentMethod Stripe.js made in the browser (live mode). */
export type PageCard = { kind: "fields"; card: CardInput } | { kind: "processor_token"; token: string };

/**
 * Pays the open invoice `invoiceId` on its page, on session: with the subscription's card, or with
 * `card` (typed on the page, or Stripe.js's PaymentMethod), made the user's at the processor first. `returnUrl` is where the 3-D Secure page sends its
 * payer back (the invoice's page). Throws when the outcome is unknown (the processor never
 * answered, or the settlement's commit answer was lost): the claim is given back, and the cron
 * sends the same reference again and records what it answers.
 */
export async function payInvoiceOnPage(
  env: Bindings,
  invoiceId: string,
  card: PageCard | null,
  page: { origin: string; returnUrl: string; realNow: number; waitUntil?: (promise: Promise<unknown>) => void },
): Promise<PagePayment> {
  const db = createDb(env.DB);
  const { realNow } = page;
  const row = await payableRowOf(db, invoiceId);
  if (!row) {
    const first = await waitingFirstPaymentOf(db, invoiceId);
    return first ? { kind: "first_charge_waits", url: first.nextAction?.url ?? null } : { kind: "not_payable" };
  }
  if (hasUnsettledClaim(row)) return inProgress(db, row);
  const processor = await processorOf(env, db, tenantOf(row.sub));
  if (!processor) return { kind: "unavailable" };
  let vaulted: ClaimCard | undefined;
  // No money moves: the token is what the charge, a retry of it and later renewals send.
  const customer = { id: row.user.id, email: row.user.email };
  const reference = `${row.sub.id}:card:${randomToken(20)}`;
  if (card?.kind === "fields") {
    const { token, outcome } = await processor.vaultCard({ card: card.card.card, customer, reference, firstAttemptAt: realNow });
    if (outcome.status === "failed") return { kind: "declined", message: outcome.message };
    if (!token) throw new Error(`the processor vaulted the card for invoice ${invoiceId} without a token`);
    const { summary, fingerprint } = card.card;
    vaulted = { token, brand: summary.brand, last4: summary.last4, exp_month: summary.exp_month, exp_year: summary.exp_year, fingerprint };
  } else if (card?.kind === "processor_token") {
    // Stripe.js's PaymentMethod, attached to the user's Customer (its charge sets it up for later ones).
    const attached = await withProcessorRetries(() => processor.attachPaymentMethod({ processorToken: card.token, customer, reference }));
    if (attached.status === "invalid") return { kind: "invalid", message: "The card could not be read. Enter it again." };
    if (attached.status === "failed") return { kind: "declined", message: attached.message };
    if (attached.status === "requires_action") throw new Error(`attaching a card for invoice ${invoiceId} asked for authentication without a setup`);
    const fingerprint = await tokenizedCardFingerprint(attached.card.fingerprintSource, cardFingerprintSecret(env));
    vaulted = { token: attached.token, brand: attached.card.brand, last4: attached.card.last4, exp_month: attached.card.expMonth, exp_year: attached.card.expYear, fingerprint };
  }
  const claim = await claimAttempt(db, row, vaulted, realNow);
  if (!claim) {
    const again = await payableRowOf(db, invoiceId);
    return again ? inProgress(db, again) : { kind: "not_payable" };
  }
  const at = row.clockTime ?? realNow;
  try {
    const settlement = await chargePeriod(db, {
      processor,
      pageBase: publicUrl(env),
      row,
      claim,
      at,
      realNow,
      manual: true,
      onSession: { origin: page.origin, pageSecret: newPageSecret(), returnUrl: page.returnUrl, paymentMethodId: null },
    });
    try {
      await commitWrites({ db, queue: env.DELIVERY_QUEUE, waitUntil: page.waitUntil }, settlement.writes);
    } catch (error) {
      // Recorded by another worker first (a takeover of this claim): the invoice says what happened.
      if (failureReason(error) === PERIOD_ALREADY_SETTLED) return (await payableRowOf(db, invoiceId)) ? { kind: "in_progress", authenticateUrl: null } : { kind: "paid" };
      throw error;
    }
    const charged = settlement.charge;
    if (settlement.outcome === "requires_action" && charged?.payment.nextAction) return { kind: "authenticate", url: charged.payment.nextAction.url };
    if (!charged || charged.succeeded) return { kind: "paid" };
    return { kind: "declined", message: charged.declineMessage ?? "The card was declined." };
  } catch (error) {
    await runBatch(db, [releaseClaim(db, row.sub, claim, realNow)]).catch(() => undefined);
    throw error;
  }
}

/** Claims the period's next attempt (with the vaulted card, if any), or null when another holds it. */
async function claimAttempt(db: Db, row: PayableRow, card: ClaimCard | undefined, realNow: number): Promise<PeriodClaim | null> {
  try {
    const [claimed] = await runBatch(db, [claimPeriod(db, row, card ? "card_update" : "pay", realNow, realNow, card)]);
    return claimOf(claimed);
  } catch (error) {
    // The claim's commit answer was lost: a claim holding the new card's token is this one.
    const own = card ? await ownCardClaim(db, row.sub, card) : null;
    if (own) return own;
    throw error;
  }
}

async function inProgress(db: Db, row: PayableRow): Promise<PagePayment> {
  const waiting = await waitingPaymentOf(db, row);
  return { kind: "in_progress", authenticateUrl: waiting?.nextAction?.url ?? null };
}

/** A period attempt whose payment's authentication succeeded, as it stands: still held by the payment, or `gone`. */
export type HeldAttempt = { row: BillableRow; claim: PeriodClaim; at: number } | "gone";

/**
 * The attempt a payment made on an invoice's page holds (null when the payment is no such
 * attempt): read before its success is recorded, which settles the period with it.
 */
export async function heldAttemptOf(db: Db, payment: PaymentRow, realNow: number): Promise<HeldAttempt | null> {
  const attempt = periodAttemptOf(payment.chargeReference);
  if (!attempt || payment.invoiceId === null) return null;
  const row = await payableRowOf(db, payment.invoiceId);
  if (!row || row.sub.id !== attempt.subscriptionId || row.sub.periodsBilled !== attempt.periodIndex || row.sub.dunningAttempts !== attempt.attempt - 1) return "gone";
  const claim = await heldClaim(db, row.sub, attempt.attempt);
  if (!claim || claim.invoiceId !== payment.invoiceId) return "gone";
  return { row, claim, at: row.clockTime ?? realNow };
}

/**
 * The writes that settle a page payment's attempt once its authentication succeeded (`payment` as
 * the outcome leaves it, completed), in the batch that records the outcome: the period paid, the
 * subscription active again, the invoice paid, as a paid retry. Guarded on the attempt still
 * being the open period's claim.
 */
export function authenticatedAttemptWrites(db: Db, payment: PaymentRow, held: Exclude<HeldAttempt, "gone">, realNow: number): { statements: Statement[]; events: EmittedEvent[] } {
  const { row, claim, at } = held;
  const { sub } = row;
  const result: ChargeResult = { payment, succeeded: true, requiresAction: false, declineCode: null, declineMessage: null, token: null, statements: [], events: [] };
  const stillHeld = guard(
    db,
    PERIOD_ALREADY_SETTLED,
    sql`EXISTS (SELECT 1 FROM subscription_periods AS held JOIN subscriptions AS s ON s.id = held.subscription_id
      WHERE held.subscription_id = ${sub.id} AND held.period_index = ${sub.periodsBilled} AND held.status = 'open' AND held.attempts = ${claim.attempts}
        AND s.periods_billed = ${sub.periodsBilled} AND s.dunning_attempts = ${claim.attempts - 1}) AND ${accountLivesHere(sub.accountId)}`,
  );
  const settled = attemptSettlement(db, { pageBase: null, row, claim, at, realNow, manual: true }, result, claim.invoiceId as string, { statements: [stillHeld], events: [] }, null);
  return settled.writes;
}

/**
 * The writes that end a page payment's attempt without money (its payer failed 3-D Secure, or the
 * payment was canceled: abandoned, or by the merchant), in the batch that records it: the attempt
 * counts, as a declined Pay now's does (the scheduled retry stands, dunning goes on), and the
 * invoice stays open (invoice.payment_failed). Nothing for a payment that is no such attempt.
 */
export function endedAttemptWrites(db: Db, payment: PaymentRow, at: number): { statements: Statement[]; events: EmittedEvent[] } {
  const attempt = periodAttemptOf(payment.chargeReference);
  if (!attempt || payment.invoiceId === null) return { statements: [], events: [] };
  const updated = isoTime(at);
  const invoice = settleInvoice(db, tenantOf(payment), payment.invoiceId, { kind: "failed", paymentId: payment.id, status: "open" }, { at: "clock", realNow: at });
  const held = sql`subscription_id = ${attempt.subscriptionId} AND period_index = ${attempt.periodIndex} AND status = 'open' AND attempts = ${attempt.attempt}`;
  return {
    statements: [
      // The invoice first, while the period is still held (the claim is what says the invoice is this attempt's).
      rawStatement(
        db,
        sql`UPDATE invoices SET status = 'open', payment_id = ${payment.id}, updated_at = ${updated}
          WHERE id = ${payment.invoiceId} AND status = 'open' AND EXISTS (SELECT 1 FROM subscription_periods WHERE ${held})`,
      ),
      rawStatement(
        db,
        sql`UPDATE subscriptions SET dunning_attempts = ${attempt.attempt}, updated_at = ${updated}
          WHERE id = ${attempt.subscriptionId} AND periods_billed = ${attempt.periodIndex} AND dunning_attempts = ${attempt.attempt - 1} AND status = 'past_due'`,
      ),
      rawStatement(db, sql`UPDATE subscription_periods SET updated_at = ${updated} WHERE ${held}`),
    ],
    events: invoice.events,
  };
}
