// A one-off payment's states in one place (POST /payments, capture, cancel, and the cron's expiry),
// as Stripe's PaymentIntent has them, in Tender's words: an automatic payment is completed or
// failed when it is confirmed; a manual one is requires_capture (authorized, amount_capturable
// held) until it is captured (completed, the rest released) or canceled (by the merchant, or by the
// cron 7 days on, cancellation_reason expired). requires_action (3-D Secure) slots in before them.
//
// Money safety. The processor is called before the batch that records its outcome, with a
// reference fixed for the operation: the payment's own charge reference for the authorization (the
// request's Idempotency-Key, src/routes/write-path.ts firstChargeReference), and `<payment id>:capture`
// or `<payment id>:cancel` after it. A capture or cancel first takes the payment's step lease
// (job_runs `payment_step:<id>`, src/db/leases.ts): while one is at the processor, another (two
// captures at once, a capture and a cancel, the cron's expiry) answers 409 payment_in_progress and
// calls nothing. The batch that records the change is conditional on the state it was read in (a
// guard aborts it otherwise), so exactly one change, with its events, is recorded; a retry after
// an unknown outcome reaches the processor with the same reference, which answers it as the first.
import { type SQL, and, asc, eq, like, lte, or, sql } from "drizzle-orm";
import { type FailureMap, failureReason, guard, runBatch, type Statement } from "../db/batch";
import { claimLease, leaseTaken, releaseLease } from "../db/leases";
import { createDb, type Db } from "../db/client";
import { jobRuns, payments, users } from "../db/schema";
import { type Tenant, livesHere, ownedBy } from "../db/scope";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { processorResolver } from "../processor";
import type { AuthorizationOutcome, CancelOutcome, CaptureOutcome } from "../processor/types";
import { commitWrites, type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { withProcessorRetries } from "./charge";
import { type PaymentRow, paymentEventData } from "./event-data";
import { serializePayment } from "./serialize";
import { expiryWrites } from "../billing/incomplete";
import { endedAttemptWrites } from "../billing/invoice-payments";

const joinWrites = (a: { statements: Statement[]; events: EmittedEvent[] }, b: { statements: Statement[]; events: EmittedEvent[] }) => ({ statements: [...a.statements, ...b.statements], events: [...a.events, ...b.events] });

/** An authorization not captured this long after it was made is canceled (Stripe's card authorizations last 7 days). */
export const AUTHORIZATION_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;
/**
 * A payment made on an invoice's hosted page whose payer has not authenticated this long after it
 * was made is canceled as abandoned: it holds its period's claim, so dunning waits for it.
 */
export const PAGE_PAYMENT_LIFETIME_MS = 60 * 60 * 1000;
/** Authorizations one cron run cancels per shard at the most; the rest go in the next run. */
export const EXPIRY_BATCH = 50;
/** Pages of EXPIRY_BATCH one expiry run looks through, past the payments it must skip. */
export const EXPIRY_PAGES = 10;

/** Guard reason: the payment is no longer in the state the change was computed from. */
export const PAYMENT_STATE_CHANGED = "payment_state_changed";

export type CancellationReason = NonNullable<PaymentRow["cancellationReason"]>;

/** How long a capture or cancel holds the payment while it is at the processor (the connector's retries fit well inside). */
export const PAYMENT_STEP_LEASE_MS = 2 * 60_000;
export const paymentStepKey = (paymentId: string) => `payment_step:${paymentId}`;

/**
 * Takes the payment's step lease; false while another capture or cancel holds it. A request
 * passes its credential's guard (`first`), so a key revoked meanwhile takes nothing.
 */
export async function takePaymentStep(db: Db, paymentId: string, now: number, first: { statement: Statement; failures: FailureMap } | null = null): Promise<boolean> {
  const results = await runBatch(db, [...(first ? [first.statement] : []), claimLease(db, paymentStepKey(paymentId), now, PAYMENT_STEP_LEASE_MS)], first?.failures ?? {});
  return leaseTaken(results[results.length - 1]);
}

/** The statement that gives the step lease back, in the batch that records the step. */
const releaseStep = (db: Db, paymentId: string): Statement => db.update(jobRuns).set({ leaseUntil: 0 }).where(eq(jobRuns.key, paymentStepKey(paymentId)));

/** Gives the step lease back (the step was refused, or its call ended unanswered); best effort: it runs out anyway. */
export async function releasePaymentStep(db: Db, paymentId: string): Promise<void> {
  await releaseLease(db, paymentStepKey(paymentId)).catch((error) => {
    console.error(JSON.stringify({ message: "payment step lease not released; it runs out by itself", payment: paymentId, error: String(error) }));
  });
}

/** The processor references of the operations after an authorization: one each per payment. */
export const captureReference = (paymentId: string) => `${paymentId}:capture`;
export const cancelReference = (paymentId: string) => `${paymentId}:cancel`;

export interface NewPayment {
  id: string;
  tenant: Tenant;
  userId: string;
  amount: number;
  currency: string;
  captureMethod: PaymentRow["captureMethod"];
  description: string | null;
  metadata: Record<string, string> | null;
  card: { summary: { brand: string; last4: string; exp_month: number; exp_year: number }; fingerprint: string };
  /** The saved card (pmt_…) charged, when it was one. */
  paymentMethodId: string | null;
  chargeReference: string;
  at: number;
  /**
   * Where a payment that asks for authentication sends its payer: the page's secret (newPageSecret)
   * and this origin, which next_action.url is made of, and the merchant's return_url (or null).
   */
  authentication: { origin: string; pageSecret: string; returnUrl: string | null };
}

/** The 3-D Secure page's path (src/pages/authenticate.tsx): the payment's id and its page secret. */
export const authenticationPath = (paymentId: string, pageSecret: string) => `/pay/authenticate/${paymentId}/${pageSecret}`;

/** The payment row an authorization's (or a charge's) outcome makes. */
export function paymentOfOutcome(args: NewPayment, outcome: AuthorizationOutcome): PaymentRow {
  const succeeded = outcome.status === "succeeded";
  const authorized = outcome.status === "succeeded" && outcome.authorized;
  const asked = outcome.status === "requires_action";
  return {
    id: args.id,
    accountId: args.tenant.accountId,
    livemode: args.tenant.livemode,
    userId: args.userId,
    subscriptionId: null,
    // A live row's Stripe account is recorded by its insert trigger (migration 0020).
    processorAccount: null,
    amount: args.amount,
    currency: args.currency,
    status: asked ? "requires_action" : !succeeded ? "failed" : authorized ? "requires_capture" : "completed",
    amountRefunded: 0,
    captureMethod: args.captureMethod,
    amountCapturable: authorized ? args.amount : 0,
    amountReceived: succeeded && !authorized ? args.amount : 0,
    nextAction: asked ? { type: "redirect_to_url", url: `${args.authentication.origin}${authenticationPath(args.id, args.authentication.pageSecret)}` } : null,
    pageSecret: asked ? args.authentication.pageSecret : null,
    returnUrl: args.authentication.returnUrl,
    paymentMethodId: args.paymentMethodId,
    description: args.description,
    metadata: args.metadata,
    captureBefore: authorized ? isoTime(args.at + AUTHORIZATION_LIFETIME_MS) : null,
    canceledAt: null,
    cancellationReason: null,
    failureCode: outcome.status === "failed" ? outcome.code : null,
    failureMessage: outcome.status === "failed" ? outcome.message : null,
    cardBrand: args.card.summary.brand,
    cardLast4: args.card.summary.last4,
    cardExpMonth: args.card.summary.exp_month,
    cardExpYear: args.card.summary.exp_year,
    cardFingerprint: args.card.fingerprint,
    processorReference: outcome.status === "failed" ? null : outcome.reference,
    chargeReference: args.chargeReference,
    invoiceId: null,
    createdAt: isoTime(args.at),
  };
}

/** The event a new payment emits: payment.completed or payment.failed (the document's shape), or payment.authorized (the payment). */
export function newPaymentEvent(db: Db, payment: PaymentRow, customer: { id: string; email: string }, at: number): EmittedEvent {
  const tenant = { accountId: payment.accountId, livemode: payment.livemode };
  if (payment.status === "requires_capture") return emitEvent(db, tenant, { type: "payment.authorized", data: serializePayment(payment) }, at);
  if (payment.status === "requires_action") return emitEvent(db, tenant, { type: "payment.requires_action", data: serializePayment(payment) }, at);
  return emitEvent(db, tenant, { type: payment.status === "failed" ? "payment.failed" : "payment.completed", data: paymentEventData(payment, customer) }, at);
}

/** SQL: the payment is still as it was read (status and what it holds). */
function stillAsRead(payment: PaymentRow) {
  return sql`EXISTS (SELECT 1 FROM ${payments} WHERE ${payments.id} = ${payment.id} AND ${payments.status} = ${payment.status}
    AND ${payments.amountCapturable} = ${payment.amountCapturable} AND ${payments.amountReceived} = ${payment.amountReceived} AND ${livesHere(payments.accountId)})`;
}

/** The writes of a capture the processor made: completed, `amount` received, the rest released; payment.completed. */
export function captureWrites(db: Db, payment: PaymentRow, amount: number, customer: { id: string; email: string } | null, at: number): { row: PaymentRow; statements: Statement[]; events: EmittedEvent[] } {
  const row: PaymentRow = { ...payment, status: "completed", amountReceived: amount, amountCapturable: 0, captureBefore: null };
  return {
    row,
    statements: [
      guard(db, PAYMENT_STATE_CHANGED, stillAsRead(payment)),
      db
        .update(payments)
        .set({ status: "completed", amountReceived: amount, amountCapturable: 0, captureBefore: null })
        .where(and(eq(payments.id, payment.id), eq(payments.status, "requires_capture"))),
      releaseStep(db, payment.id),
    ],
    events: [emitEvent(db, payment, { type: "payment.completed", data: paymentEventData(row, customer) }, at)],
  };
}

/** The writes of a cancel the processor made: canceled, nothing held; payment.canceled. */
export function cancelWrites(
  db: Db,
  payment: PaymentRow,
  reason: CancellationReason | null,
  at: number,
  subscriptionEnd: "incomplete_expired" | "canceled" = "incomplete_expired",
): { row: PaymentRow; statements: Statement[]; events: EmittedEvent[] } {
  const row: PaymentRow = { ...payment, status: "canceled", amountCapturable: 0, captureBefore: null, nextAction: null, canceledAt: isoTime(at), cancellationReason: reason };
  // A waiting first charge of an incomplete subscription (while it waits, the subscription is
  // incomplete: both change in one batch): canceled, the subscription ends with it.
  // A payment made on an invoice's page that waited for its payer: its period attempt counts (src/billing/invoice-payments.ts).
  const ended = payment.status === "requires_action" ? joinWrites(expiryWrites(db, payment, at, subscriptionEnd), endedAttemptWrites(db, row, at)) : { statements: [], events: [] };
  return {
    row,
    statements: [
      guard(db, PAYMENT_STATE_CHANGED, stillAsRead(payment)),
      db
        .update(payments)
        .set({ status: "canceled", amountCapturable: 0, captureBefore: null, nextAction: null, canceledAt: isoTime(at), cancellationReason: reason })
        .where(and(eq(payments.id, payment.id), eq(payments.status, payment.status))),
      releaseStep(db, payment.id),
      ...ended.statements,
    ],
    events: [emitEvent(db, payment, { type: "payment.canceled", data: serializePayment(row) }, at), ...ended.events],
  };
}

/**
 * Captures at the processor (fixed reference per payment); a call that still throws after its
 * retries has an unknown outcome. A success carries what the processor captured, which is what is
 * recorded: a capture whose answer was lost, then another of another amount, reaches the processor
 * under the same reference and is answered with the first one's amount.
 */
export function captureAtProcessor(processor: { capturePayment: (args: { chargeReference: string; amount: number; reference: string; firstAttemptAt?: number }) => Promise<CaptureOutcome> }, payment: PaymentRow, amount: number): Promise<CaptureOutcome> {
  return withProcessorRetries(() =>
    processor.capturePayment({ chargeReference: payment.processorReference ?? "", amount, reference: captureReference(payment.id), firstAttemptAt: Date.parse(payment.createdAt) }),
  );
}

export function cancelAtProcessor(processor: { cancelPayment: (args: { chargeReference: string; reference: string; firstAttemptAt?: number }) => Promise<CancelOutcome> }, payment: PaymentRow): Promise<CancelOutcome> {
  return withProcessorRetries(() => processor.cancelPayment({ chargeReference: payment.processorReference ?? "", reference: cancelReference(payment.id), firstAttemptAt: Date.parse(payment.createdAt) }));
}

/**
 * The cron: cancels every authorization of this shard whose 7 days are over (cancellation_reason
 * expired, payment.canceled). At-least-once and safe to overlap: the processor sees one cancel per
 * payment (its fixed reference), and the batch is conditional on the payment still being
 * requires_capture, so a payment captured or canceled meanwhile, or expired by another run, is left
 * as it is and emits nothing. Returns how many this run canceled.
 */
export async function expireAuthorizations(env: Bindings, now: number): Promise<{ canceled: number; skipped: number }> {
  const db = createDb(env.DB);
  const processorOf = processorResolver(env, db);
  const lapsedRun = await cancelInPages(env, db, processorOf, now, lapsedAuthorizations(now), payments.captureBefore);
  // Then the payments whose payer never finished 3-D Secure in as long: canceled as abandoned (Stripe's word).
  const abandonedRun = await cancelInPages(env, db, processorOf, now, abandonedAuthentications(now), payments.createdAt);
  return { canceled: lapsedRun.canceled + abandonedRun.canceled, skipped: lapsedRun.skipped + abandonedRun.skipped };
}

// The statuses are literals, not bound values: SQLite uses a partial index only where the query's
// own terms prove its condition (payments_capture_due and payments_action_waiting, src/db/schema.ts);
// a bound value does so only when SQLite happens to plan again with it.

/** Authorizations (requires_capture) whose 7 days are over. */
export const lapsedAuthorizations = (now: number): SQL =>
  and(sql`${payments.status} = 'requires_capture'`, lte(payments.captureBefore, isoTime(now)), livesHere(payments.accountId))!;

/** Payments still asking for 3-D Secure 7 days on (one made on an invoice's page: sooner, as it holds its period's dunning). */
export const abandonedAuthentications = (now: number): SQL =>
  and(
    sql`${payments.status} = 'requires_action'`,
    // The shorter lifetime bounds both: the index is sought up to it, not walked whole.
    lte(payments.createdAt, isoTime(now - Math.min(PAGE_PAYMENT_LIFETIME_MS, AUTHORIZATION_LIFETIME_MS))),
    or(lte(payments.createdAt, isoTime(now - AUTHORIZATION_LIFETIME_MS)), and(like(payments.chargeReference, "sub_%:period:%:attempt:%"), lte(payments.createdAt, isoTime(now - PAGE_PAYMENT_LIFETIME_MS)))),
    livesHere(payments.accountId),
  )!;

/** A page of the payments `due` selects, oldest by `order` first, after `after` (the last page's final row). */
export const duePage = (db: Db, due: SQL, order: typeof payments.captureBefore | typeof payments.createdAt, after: { at: string | null; id: string } | null) =>
  db
    .select()
    .from(payments)
    .where(and(due, after ? sql`(${order}, ${payments.id}) > (${after.at}, ${after.id})` : undefined))
    .orderBy(asc(order), asc(payments.id))
    .limit(EXPIRY_BATCH);

/**
 * The payments `due` selects, oldest (by `order`) first, a page at a time, each page after the last
 * one's final row (at most EXPIRY_PAGES pages a run): one that is skipped (its step held by a capture
 * or cancel at the processor, or a live one whose connection is gone) stays as it is, and must not
 * hold back the ones behind it run after run.
 */
async function cancelInPages(env: Bindings, db: Db, processorOf: ReturnType<typeof processorResolver>, now: number, due: SQL, order: typeof payments.captureBefore | typeof payments.createdAt): Promise<{ canceled: number; skipped: number }> {
  let canceled = 0;
  let skipped = 0;
  let after: { at: string | null; id: string } | null = null;
  for (let page = 0; page < EXPIRY_PAGES; page++) {
    const rows: PaymentRow[] = await duePage(db, due, order, after);
    const run = await cancelDue(env, db, processorOf, rows, now);
    canceled += run.canceled;
    skipped += run.skipped;
    if (rows.length < EXPIRY_BATCH) break;
    const last: PaymentRow = rows[rows.length - 1];
    after = { at: order === payments.captureBefore ? last.captureBefore : last.createdAt, id: last.id };
  }
  return { canceled, skipped };
}

async function cancelDue(env: Bindings, db: Db, processorOf: ReturnType<typeof processorResolver>, due: PaymentRow[], now: number): Promise<{ canceled: number; skipped: number }> {
  let canceled = 0;
  let skipped = 0;
  for (const payment of due) {
    const tenant: Tenant = { accountId: payment.accountId, livemode: payment.livemode };
    let held = false;
    try {
      const processor = await processorOf(tenant);
      if (!processor) {
        skipped++;
        continue;
      }
      // A capture or cancel of this payment is at the processor: it decides, and the next run looks again.
      held = await takePaymentStep(db, payment.id, now);
      if (!held) {
        skipped++;
        continue;
      }
      // Read again under the lease: a capture or cancel that held it before this run took it has
      // recorded its step, and the processor must not be asked to cancel what was captured.
      const [current] = await db.select({ status: payments.status }).from(payments).where(and(eq(payments.id, payment.id), livesHere(payments.accountId))).limit(1);
      if (current?.status !== payment.status) {
        skipped++;
        continue;
      }
      const outcome = await cancelAtProcessor(processor, payment);
      // The processor had captured it (a capture whose answer was lost, never retried): record that
      // capture, as a retried capture would have, rather than leave it requires_capture for ever.
      // A payment waiting for its payer that the processor will not cancel: the payer finished
      // meanwhile (Stripe took the money); Stripe's event, or the payer's return, records it.
      if (outcome.status === "failed" && payment.status === "requires_action") {
        console.error(JSON.stringify({ message: "abandoned payment not canceled: its payer finished at the processor; its event records it", payment: payment.id }));
        skipped++;
        continue;
      }
      if (outcome.status === "failed" && outcome.capturedAmount !== undefined) {
        const writes = captureWrites(db, payment, outcome.capturedAmount, await customerOf(db, payment), now);
        await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { statements: writes.statements, events: writes.events });
        held = false;
        skipped++;
        continue;
      }
      if (outcome.status !== "succeeded") {
        console.error(JSON.stringify({ message: "authorization expiry: the processor refused the cancel; retried next run", payment: payment.id, code: outcome.code }));
        skipped++;
        continue;
      }
      const writes = cancelWrites(db, payment, payment.status === "requires_action" ? "abandoned" : "expired", now);
      await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { statements: writes.statements, events: writes.events });
      held = false;
      canceled++;
    } catch (error) {
      // Captured or canceled meanwhile (or by an overlapping run): nothing to do.
      if (failureReason(error) === PAYMENT_STATE_CHANGED) {
        skipped++;
        continue;
      }
      console.error(JSON.stringify({ message: "authorization expiry failed; retried next run", payment: payment.id, error: String(error) }));
      skipped++;
    } finally {
      if (held) await releasePaymentStep(db, payment.id);
    }
  }
  return { canceled, skipped };
}

/** The payment's user's id and email (for payment.completed), or null. */
async function customerOf(db: Db, payment: PaymentRow): Promise<{ id: string; email: string } | null> {
  if (!payment.userId) return null;
  const [user] = await db.select({ id: users.id, email: users.email }).from(users).where(eq(users.id, payment.userId)).limit(1);
  return user ?? null;
}

/** A payment of the caller's account and mode with its user's id and email (for payment.completed). */
export async function loadPayment(db: Db, tenant: Tenant, id: string): Promise<{ payment: PaymentRow; customer: { id: string; email: string } | null } | null> {
  const [row] = await db
    .select({ payment: payments, user: { id: users.id, email: users.email } })
    .from(payments)
    .leftJoin(users, eq(users.id, payments.userId))
    .where(and(ownedBy(payments, tenant), eq(payments.id, id)))
    .limit(1);
  if (!row) return null;
  return { payment: row.payment, customer: row.user?.id ? { id: row.user.id, email: row.user.email } : null };
}
