// A payment's 3-D Secure ending, in one place: whoever learns how it ended (the sandbox challenge
// page's Complete or Fail, the live page's return after Stripe.js, Stripe's payment_intent.* event,
// and later checkout sessions) records it through recordAuthentication, and sends the payer on
// with afterAuthentication.
//
// Money safety. The outcome is recorded by one batch conditional on the payment still being
// requires_action (a guard aborts it otherwise): the first to arrive records the outcome and its
// events, every later one (a double click, two tabs, a retried POST, the page's return and Stripe's
// event in either order) records nothing and is answered the payment as it is now. In live mode
// the outcome is always read from Stripe (paymentStateOf), never taken from the browser. A success
// that arrives after Tender canceled the payment (Stripe moved money Tender let go of) is given
// back at once: a captured one is refunded in full (refund.initiated; the refund settles as every
// refund does), an authorization is released at the processor.
import { and, eq, inArray, sql } from "drizzle-orm";
import { failureReason, guard, type Statement } from "../db/batch";
import { createDb, type Db } from "../db/client";
import { accounts, payments, users } from "../db/schema";
import { livesHere } from "../db/scope";
import { findOnAnyShard } from "../db/shards";
import { hasPrefix } from "../domain/ids";
import type { Bindings, RuntimeBindings } from "../env";
import { isoTime } from "../lib/clock";
import { processorOf } from "../processor";
import { activationWrites, expiryWrites } from "../billing/incomplete";
import { type HeldAttempt, authenticatedAttemptWrites, endedAttemptWrites, heldAttemptOf } from "../billing/invoice-payments";
import { periodAttemptOf } from "../billing/periods";
import type { PaymentState } from "../processor/types";
import { commitWrites, type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { type PaymentRow, paymentEventData } from "./event-data";
import { AUTHORIZATION_LIFETIME_MS, PAYMENT_STATE_CHANGED, authenticationPath, cancelAtProcessor } from "./intents";
import { refundWrites } from "./refund-writes";
import { serializePayment } from "./serialize";
import { enqueueRefundSettlements } from "./settle-refund";

/** How a payer's authentication ended, as recorded: what the processor (or the sandbox page) says. */
export type AuthenticationResult = Extract<PaymentState, { status: "succeeded" | "failed" | "canceled" }>;

/** Guard reason: the payment's account is being moved to another shard (or has moved): nothing recorded, try again. */
export const ACCOUNT_MOVING = "authentication_account_moving";

/** failure_code of a payment whose payer failed the challenge (Stripe: payment_intent_authentication_failure). */
export const AUTHENTICATION_FAILED = "authentication_failed";
export const AUTHENTICATION_FAILED_MESSAGE = "The card holder did not complete 3-D Secure authentication; nothing was charged.";

/** The sandbox page's buttons as results: Complete authorizes (manual) or captures; Fail fails. */
export function sandboxResult(payment: PaymentRow, button: "complete" | "fail"): AuthenticationResult {
  if (button === "fail") return { status: "failed", code: AUTHENTICATION_FAILED, message: AUTHENTICATION_FAILED_MESSAGE };
  const authorized = payment.captureMethod === "manual";
  return { status: "succeeded", authorized, amount: payment.amount, amountReceived: authorized ? 0 : payment.amount, currency: payment.currency };
}

type Customer = { id: string; email: string } | null;

/** The payment row and events an outcome makes of a payment in requires_action. */
function outcomeWrites(db: Db, payment: PaymentRow, customer: Customer, result: AuthenticationResult, at: number): { row: PaymentRow; events: EmittedEvent[] } {
  const cleared = { ...payment, nextAction: null };
  if (result.status === "canceled") {
    const row: PaymentRow = { ...cleared, status: "canceled", canceledAt: isoTime(at), cancellationReason: "abandoned" };
    return { row, events: [emitEvent(db, payment, { type: "payment.canceled", data: serializePayment(row) }, at)] };
  }
  if (result.status === "failed") {
    const row: PaymentRow = { ...cleared, status: "failed", failureCode: result.code, failureMessage: result.message };
    return { row, events: [emitEvent(db, payment, { type: "payment.failed", data: paymentEventData(row, customer) }, at)] };
  }
  if (result.authorized) {
    const row: PaymentRow = { ...cleared, status: "requires_capture", amountCapturable: payment.amount, captureBefore: isoTime(at + AUTHORIZATION_LIFETIME_MS) };
    return { row, events: [emitEvent(db, payment, { type: "payment.authorized", data: serializePayment(row) }, at)] };
  }
  const row: PaymentRow = { ...cleared, status: "completed", amountReceived: Math.min(result.amountReceived || payment.amount, payment.amount) };
  return { row, events: [emitEvent(db, payment, { type: "payment.completed", data: paymentEventData(row, customer) }, at)] };
}

/**
 * The writes that record how a payment's authentication ended: guarded on the payment still being
 * requires_action (PAYMENT_STATE_CHANGED otherwise), with its event. Stripe's events put these in
 * the batch that records the event (src/payments/processor-settlements.ts).
 */
export function authenticationWrites(
  db: Db,
  payment: PaymentRow,
  customer: Customer,
  result: AuthenticationResult,
  at: number,
  /** A payment made on an invoice's page: the period attempt it holds (heldAttemptOf), read before a success is recorded. */
  held: HeldAttempt | null = null,
): { row: PaymentRow; statements: Statement[]; events: EmittedEvent[] } {
  const { row, events: paymentEvents } = outcomeWrites(db, payment, customer, result, at);
  const subscription = periodAttemptOf(payment.chargeReference) !== null && payment.invoiceId !== null
    ? pagePaymentWrites(db, row, held, at)
    : // The first charge of an incomplete subscription settles it in the same batch (src/billing/incomplete.ts).
      row.status === "completed" ? activationWrites(db, row, at) : row.status === "failed" || row.status === "canceled" ? expiryWrites(db, row, at) : { statements: [], events: [] };
  const events = [...paymentEvents, ...subscription.events];
  const statements: Statement[] = [
    // Not while the account is being moved to another shard (its copy would miss this change), nor
    // once it has moved: the page answers "try again", Stripe's event is sent again.
    guard(
      db,
      ACCOUNT_MOVING,
      sql`NOT EXISTS (SELECT 1 FROM ${accounts} WHERE ${accounts.id} = ${payment.accountId} AND (${accounts.movedTo} IS NOT NULL OR (${accounts.moveToken} IS NOT NULL AND ${accounts.moveUntil} > ${at})))`,
    ),
    guard(db, PAYMENT_STATE_CHANGED, sql`EXISTS (SELECT 1 FROM ${payments} WHERE ${payments.id} = ${payment.id} AND ${payments.status} = 'requires_action' AND ${livesHere(payments.accountId)})`),
    db
      .update(payments)
      .set({
        status: row.status,
        nextAction: null,
        amountCapturable: row.amountCapturable,
        amountReceived: row.amountReceived,
        captureBefore: row.captureBefore,
        canceledAt: row.canceledAt,
        cancellationReason: row.cancellationReason,
        failureCode: row.failureCode,
        failureMessage: row.failureMessage,
      })
      .where(and(eq(payments.id, payment.id), eq(payments.status, "requires_action"))),
    ...subscription.statements,
  ];
  return { row, statements, events };
}

/**
 * An invoice page's payment (src/billing/invoice-payments.ts) settles its period attempt with its
 * outcome: a success the period (or, when the attempt is no longer held, a refund in full: the
 * period was settled otherwise); a failure or cancel counts the attempt.
 */
function pagePaymentWrites(db: Db, row: PaymentRow, held: HeldAttempt | null, at: number): { statements: Statement[]; events: EmittedEvent[] } {
  if (row.status !== "completed") return endedAttemptWrites(db, row, at);
  if (held === null) throw new Error(`payment ${row.id} pays a period: its success is recorded with the attempt it holds`);
  if (held !== "gone") return authenticatedAttemptWrites(db, row, held, at);
  const refund = refundWrites(db, { accountId: row.accountId, livemode: row.livemode, paymentId: row.id, refundId: lateRefundId(row.id), amount: row.amountReceived, reason: null, at });
  return { statements: [...refund.statements, refund.returning], events: refund.events };
}

export interface Recorded {
  /** The payment as it is now. */
  payment: PaymentRow;
  /** Whether this call recorded the outcome (false: it was recorded before, or the payment had moved on). */
  recorded: boolean;
  /** A success that found the payment canceled or failed was given back: the refund's id, or "released" for an authorization. */
  givenBack?: string;
}

/**
 * Records how a payment's authentication ended, once: one batch conditional on the payment still
 * being requires_action, with its event. Called again (or after the payment moved on), it records
 * nothing and answers the payment as it is; a success that finds it canceled is given back.
 */
export async function recordAuthentication(
  env: Bindings,
  payment: PaymentRow,
  result: AuthenticationResult,
  at: number,
  deps: {
    waitUntil?: (promise: Promise<unknown>) => void;
    /**
     * The result was read at the processor (live mode), so a success is money the processor holds:
     * one that finds the payment canceled or failed is given back. The sandbox page's buttons are not: a
     * canceled sandbox payment has nothing to give back.
     */
    fromProcessor?: boolean;
  } = {},
): Promise<Recorded> {
  const db = createDb(env.DB);
  const customer = await customerOf(db, payment);
  if (payment.status === "requires_action") {
    const held = result.status === "succeeded" ? await heldAttemptOf(db, payment, at) : null;
    const { row, statements, events } = authenticationWrites(db, payment, customer, result, at, held);
    try {
      await commitWrites({ db, queue: env.DELIVERY_QUEUE, waitUntil: deps.waitUntil }, { statements, events });
      if (held === "gone") {
        // The period was settled otherwise meanwhile: the payment was refunded in the same batch.
        await enqueueRefundSettlements(env.JOB_QUEUE, [lateRefundId(row.id)]).catch((error) => {
          console.error(JSON.stringify({ message: "page payment refund not enqueued; the sweep sends it", payment: row.id, error: String(error) }));
        });
        return { payment: (await reload(db, payment.id)) ?? row, recorded: true, givenBack: lateRefundId(row.id) };
      }
      return { payment: row, recorded: true };
    } catch (error) {
      if (failureReason(error) !== PAYMENT_STATE_CHANGED) throw error;
    }
  }
  const now = await reload(db, payment.id);
  if (!now) throw new Error(`payment ${payment.id} vanished while its authentication was recorded`);
  if (deps.fromProcessor && (now.status === "canceled" || now.status === "failed") && result.status === "succeeded") return giveBack(env, db, now, result, at, deps);
  return { payment: now, recorded: false };
}

/**
 * Stripe took the money of a payment Tender had canceled (the payer finished 3-D Secure as the
 * payment was being canceled) or recorded failed (a PaymentIntent whose authentication failed is
 * requires_payment_method at Stripe, and its client secret can confirm it again): an
 * authorization is released, a capture refunded in full, with its
 * events. The refund's id is fixed by the payment, so a second call (the page and the event) makes
 * no second refund: the insert's primary key refuses it.
 */
export async function giveBack(env: Bindings, db: Db, payment: PaymentRow, result: Extract<AuthenticationResult, { status: "succeeded" }>, at: number, deps: { waitUntil?: (promise: Promise<unknown>) => void }): Promise<Recorded> {
  const tenant = { accountId: payment.accountId, livemode: payment.livemode };
  const processor = await processorOf(env, db, tenant);
  if (!processor) throw new Error(`payment ${payment.id}: a late success cannot be given back without the account's processor connection`);
  if (result.authorized) {
    const outcome = await cancelAtProcessor(processor, payment);
    if (outcome.status === "failed") throw new Error(`payment ${payment.id}: the late authorization was not released: ${outcome.message}`);
    return { payment, recorded: false, givenBack: "released" };
  }
  const refundId = lateRefundId(payment.id);
  const received = Math.min(result.amountReceived || payment.amount, payment.amount);
  // The money came in: the payment says so (completed, then refunded by the refund below), in one batch.
  const captured = db
    .update(payments)
    .set({ status: "completed", amountReceived: received })
    .where(and(eq(payments.id, payment.id), inArray(payments.status, ["canceled", "failed"]), eq(payments.amountReceived, 0)));
  const refund = refundWrites(db, { accountId: payment.accountId, livemode: payment.livemode, paymentId: payment.id, refundId, amount: received, reason: null, at });
  try {
    await commitWrites({ db, queue: env.DELIVERY_QUEUE, waitUntil: deps.waitUntil }, { statements: [captured, ...refund.statements], returning: refund.returning, events: refund.events });
  } catch (error) {
    // Given back already (the other of the page's return and Stripe's event).
    if (String(error).includes("UNIQUE") || failureReason(error) !== undefined) return { payment: (await reload(db, payment.id)) ?? payment, recorded: false, givenBack: refundId };
    throw error;
  }
  // Best effort: the stale-refund sweep sends it otherwise.
  await enqueueRefundSettlements(env.JOB_QUEUE, [refundId]).catch((error) => {
    console.error(JSON.stringify({ message: "late success refund not enqueued; the sweep sends it", payment: payment.id, error: String(error) }));
  });
  return { payment: (await reload(db, payment.id)) ?? payment, recorded: false, givenBack: refundId };
}

/** The refund that gives back a success that came after the payment was canceled: one per payment. */
export const lateRefundId = (paymentId: string) => `re_${paymentId.slice(paymentId.indexOf("_") + 1)}`;

/** Where the payer goes once the authentication has ended: the merchant's return_url with ?payment_id=…, or the page's result. */
export function afterAuthentication(payment: PaymentRow): string {
  if (payment.returnUrl) {
    const url = new URL(payment.returnUrl);
    url.searchParams.set("payment_id", payment.id);
    return url.toString();
  }
  return authenticationPath(payment.id, payment.pageSecret ?? "");
}

async function reload(db: Db, id: string): Promise<PaymentRow | null> {
  const [row] = await db.select().from(payments).where(and(eq(payments.id, id), livesHere(payments.accountId))).limit(1);
  return row ?? null;
}

async function customerOf(db: Db, payment: PaymentRow): Promise<Customer> {
  if (!payment.userId) return null;
  const [user] = await db.select({ id: users.id, email: users.email }).from(users).where(eq(users.id, payment.userId)).limit(1);
  return user ?? null;
}

export interface PagePayment {
  /** The environment of the payment's shard. */
  env: Bindings;
  payment: PaymentRow;
  merchantName: string;
}

/**
 * The payment a 3-D Secure page opens, by its id and page secret: looked for on every shard (a page
 * carries no key naming one), on the shard where its account lives (not one it moved away from);
 * null when unknown or when the secret is not the payment's (compared in constant time by `matches`).
 */
export async function paymentOfPage(env: RuntimeBindings | Bindings, id: string, secret: string, matches: (stored: string | null, given: string) => boolean): Promise<PagePayment | null> {
  if (!hasPrefix(id, "payment")) return null;
  const hit = await findOnAnyShard(env, async (view) => {
    const [row] = await createDb(view.DB)
      .select({ payment: payments, merchantName: accounts.name })
      .from(payments)
      .innerJoin(accounts, eq(accounts.id, payments.accountId))
      .where(and(eq(payments.id, id), sql`${accounts.movedTo} IS NULL`))
      .limit(1);
    return row ? { env: view, ...row } : null;
  });
  if (!hit || !matches(hit.payment.pageSecret, secret)) return null;
  return hit;
}
