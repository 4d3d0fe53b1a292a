// The one charge function. It asks the processor to charge a card (or a vaulted token), then
// returns the payment row and its payment.completed / payment.failed event as statements, for
// the caller to commit in the same batch as its own state change (a new subscription, a renewal).
import type { Db } from "../db/client";
import type { Statement } from "../db/batch";
import { payments } from "../db/schema";
import type { CardSummary } from "../domain/cards";
import { newId } from "../domain/ids";
import { isoTime } from "../lib/clock";
import type { CardDetails, DeclineCode, Outcome, Processor } from "../processor/types";
import { type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { paymentDisputedEvent } from "./disputes";
import { type PaymentRow, paymentEventData } from "./event-data";
import { authenticationPath } from "./intents";
import { serializePayment } from "./serialize";


export interface ChargeArgs {
  db: Db;
  processor: Processor;
  accountId: string;
  /** The mode of the charge: the caller's (a first charge) or the subscription's (a renewal). */
  livemode: boolean;
  customer: { id: string; email: string } | null;
  subscriptionId: string | null;
  /** The invoice this charge is an attempt to pay (src/billing/invoices.ts). */
  invoiceId: string | null;
  amount: number;
  currency: string;
  /**
   * A new card (first charge) or the token of a vaulted one: renewals, or a first charge of a saved
   * card (`customerPresent`: its holder is paying now, so the charge is on-session).
   */
  source: { card: CardDetails } | { token: string; customerPresent?: boolean };
  summary: CardSummary;
  fingerprint: string;
  at: number;
  /**
   * No later than the first time `processorReference` was sent to the processor (ms): a live
   * processor whose idempotency keys expire (Stripe: 24 hours) looks a late retry's charge up
   * before making one. Default: now (a reference made for this call).
   */
  firstAttemptAt?: number;
  /**
   * The reference the processor dedupes on (a live processor's idempotency key). Renewals pass one
   * fixed per period attempt, so a retried attempt can never charge twice. Defaults to the payment id.
   */
  processorReference?: string;
  /**
   * The payer is there (a subscription's first charge): a charge the card's bank refuses for want
   * of 3-D Secure is made again as an on-session PaymentIntent (reference `<reference>:authenticate`),
   * which answers requires_action: the payment is recorded `requires_action` with next_action's
   * page (src/pages/authenticate.tsx), the card kept for later charges.
   */
  onSession?: { origin: string; pageSecret: string; returnUrl: string | null; paymentMethodId: string | null };
}

/** The processor reference of a first charge's on-session retry, after the card asked for 3-D Secure. */
export const authenticateReference = (reference: string) => `${reference}:authenticate`;

export interface ChargeResult {
  payment: PaymentRow;
  succeeded: boolean;
  /** The card asked for 3-D Secure on session: the payment is requires_action (onSession only). */
  requiresAction: boolean;
  declineCode: DeclineCode | null;
  declineMessage: string | null;
  /** The processor's reusable token for the card (first charges only). */
  token: string | null;
  statements: Statement[];
  events: EmittedEvent[];
}

/** Pauses before the processor call is made again, after a call that threw (ms). */
const PROCESSOR_RETRY_DELAYS_MS = [100, 400];

/**
 * A processor call that threw (a timeout, a dropped connection) may have moved the money. Its
 * reference is fixed, so calling again is the same charge to the processor, which answers with
 * the first outcome: the call is made again a few times, so the charge is known and recorded.
 */
export async function withProcessorRetries<T>(call: () => Promise<T>): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await call();
    } catch (error) {
      if (retry >= PROCESSOR_RETRY_DELAYS_MS.length) throw error;
      await new Promise((resolve) => setTimeout(resolve, PROCESSOR_RETRY_DELAYS_MS[retry]));
    }
  }
}

export async function charge(args: ChargeArgs): Promise<ChargeResult> {
  const id = newId("payment", args.at);
  const reference = args.processorReference ?? id;
  let token: string | null = null;
  let outcome: Outcome;
  const source = args.source;
  const firstAttemptAt = args.processorReference === undefined ? args.at : args.firstAttemptAt;
  if ("card" in source) {
    // The card is kept on the user's customer at a live processor, so renewals can charge it.
    const customer = args.customer ? { id: args.customer.id, email: args.customer.email } : null;
    const result = await withProcessorRetries(() =>
      args.processor.chargeCard({ card: source.card, amount: args.amount, currency: args.currency, reference, customer, firstAttemptAt }),
    );
    token = result.token;
    outcome = result.outcome;
  } else {
    outcome = await withProcessorRetries(() =>
      args.processor.chargeToken({
        token: source.token,
        amount: args.amount,
        currency: args.currency,
        reference,
        firstAttemptAt,
        ...(source.customerPresent ? { customerPresent: true } : {}),
      }),
    );
  }
  // The card asks its holder to authenticate, and the holder is there: the on-session PaymentIntent.
  let asked: { reference: string } | null = null;
  if (args.onSession && outcome.status === "failed" && outcome.code === "authentication_required") {
    const onSession = await withProcessorRetries(() =>
      args.processor.authorizeCard({
        ...("card" in source ? { card: source.card } : { token: source.token }),
        amount: args.amount,
        currency: args.currency,
        reference: authenticateReference(reference),
        capture: "automatic",
        customer: args.customer ? { id: args.customer.id, email: args.customer.email } : null,
        onSession: true,
        keepCard: true,
        firstAttemptAt,
      }),
    );
    if (onSession.status === "failed") outcome = onSession;
    else {
      token = onSession.token ?? ("token" in source ? source.token : token);
      if (onSession.status === "requires_action") asked = { reference: onSession.reference };
      else outcome = { status: "succeeded" as const, reference: onSession.reference };
    }
  }
  const succeeded = !asked && outcome.status === "succeeded";
  const payment: PaymentRow = {
    id,
    accountId: args.accountId,
    livemode: args.livemode,
    userId: args.customer?.id ?? null,
    subscriptionId: args.subscriptionId,
    amount: args.amount,
    currency: args.currency,
    status: asked ? "requires_action" : succeeded ? "completed" : "failed",
    amountRefunded: 0,
    captureMethod: "automatic",
    amountCapturable: 0,
    amountReceived: succeeded ? args.amount : 0,
    nextAction: asked && args.onSession ? { type: "redirect_to_url", url: `${args.onSession.origin}${authenticationPath(id, args.onSession.pageSecret)}` } : null,
    pageSecret: asked && args.onSession ? args.onSession.pageSecret : null,
    returnUrl: asked && args.onSession ? args.onSession.returnUrl : null,
    paymentMethodId: asked && args.onSession ? args.onSession.paymentMethodId : null,
    description: null,
    metadata: null,
    captureBefore: null,
    canceledAt: null,
    cancellationReason: null,
    failureCode: !asked && outcome.status === "failed" ? outcome.code : null,
    failureMessage: !asked && outcome.status === "failed" ? outcome.message : null,
    cardBrand: args.summary.brand,
    cardLast4: args.summary.last4,
    cardExpMonth: args.summary.exp_month,
    cardExpYear: args.summary.exp_year,
    cardFingerprint: args.fingerprint,
    // Live mode: the connection's Stripe account, filled in at insert (migrations/0020's trigger).
    processorAccount: null,
    processorReference: asked ? asked.reference : outcome.status === "succeeded" ? outcome.reference : null,
    chargeReference: reference,
    invoiceId: args.invoiceId,
    createdAt: isoTime(args.at),
  };
  const events = [
    asked
      ? emitEvent(args.db, { accountId: args.accountId, livemode: args.livemode }, { type: "payment.requires_action", data: serializePayment(payment) }, args.at)
      : emitEvent(
          args.db,
          { accountId: args.accountId, livemode: args.livemode },
          { type: succeeded ? "payment.completed" : "payment.failed", data: paymentEventData(payment, args.customer) },
          args.at,
        ),
  ];
  // The sandbox's dispute card: disputed at once (live mode hears of a dispute by the processor's event).
  if (!asked && outcome.status === "succeeded" && outcome.disputed) {
    const { id, reason } = outcome.disputed;
    events.push(paymentDisputedEvent(args.db, payment, args.customer, { id, amount: payment.amount, currency: payment.currency, reason, status: "needs_response" }, args.at));
  }
  return {
    payment,
    succeeded,
    requiresAction: asked !== null,
    declineCode: !asked && outcome.status === "failed" ? outcome.code : null,
    declineMessage: !asked && outcome.status === "failed" ? outcome.message : null,
    token,
    statements: [args.db.insert(payments).values(payment)],
    events,
  };
}
