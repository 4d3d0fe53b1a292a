// Stripe's answers in Tender's terms. Pure: each function reads a Stripe object or error and
// says what Tender records. Stripe's own codes stay in the message, so nothing is lost.
//
//   card errors (402) and a PaymentIntent's last_payment_error:
//     decline_code insufficient_funds                   -> insufficient_funds
//     code or decline_code expired_card                 -> expired_card
//     code or decline_code processing_error             -> processing_error
//     code or decline_code authentication_required      -> authentication_required
//     anything else (generic_decline, incorrect_cvc, lost_card, fraudulent, ...) -> card_declined
//   PaymentIntent / SetupIntent status:
//     succeeded, requires_capture (authorized) -> succeeded; requires_action -> authentication_required (Tender cannot ask the
//     holder to authenticate); requires_payment_method / canceled -> failed (its last error);
//     processing -> not settled yet (the caller reads it again)
//   Payout status: paid -> succeeded; pending, in_transit -> pending; failed, canceled -> failed
//   Refund status: succeeded -> succeeded; pending, requires_action -> pending; failed, canceled -> failed
import type { DeclineCode, Outcome, PaymentState, SettlementOutcome } from "./types";

/** The fields of a Stripe error (or a last_payment_error) that say why. */
export interface StripeDecline {
  code?: string | null;
  decline_code?: string | null;
  message?: string | null;
}

const TENDER_MESSAGES: Record<DeclineCode, string> = {
  card_declined: "The card was declined.",
  insufficient_funds: "The card has insufficient funds.",
  expired_card: "The card has expired.",
  processing_error: "An error occurred while processing the card. Try again.",
  authentication_required: "The card needs its holder to authenticate the payment (3D Secure), which Tender cannot ask for.",
};

export function declineCode(error: StripeDecline): DeclineCode {
  const codes = [error.decline_code, error.code];
  if (codes.includes("insufficient_funds")) return "insufficient_funds";
  if (codes.includes("expired_card")) return "expired_card";
  if (codes.includes("processing_error")) return "processing_error";
  if (codes.includes("authentication_required")) return "authentication_required";
  return "card_declined";
}

/** A failed outcome that keeps Stripe's codes in its message. */
export function declined(error: StripeDecline): Outcome & { status: "failed" } {
  const code = declineCode(error);
  const stripe = [error.code && `code ${error.code}`, error.decline_code && `decline_code ${error.decline_code}`].filter(Boolean).join(", ");
  return { status: "failed", code, message: stripe ? `${TENDER_MESSAGES[code]} (Stripe ${stripe})` : TENDER_MESSAGES[code] };
}

export const authenticationRequired = (intent: string): Outcome & { status: "failed" } => ({
  status: "failed",
  code: "authentication_required",
  message: `${TENDER_MESSAGES.authentication_required} (Stripe ${intent} requires_action)`,
});

interface IntentLike {
  id: string;
  status: string;
  last_payment_error?: StripeDecline | null;
  last_setup_error?: StripeDecline | null;
}

/** A PaymentIntent's or SetupIntent's outcome, or "processing" when Stripe has not settled it. */
export function intentOutcome(intent: IntentLike): Outcome | "processing" {
  switch (intent.status) {
    case "succeeded":
    // Authorized, held for a manual capture (a one-off payment's requires_capture).
    case "requires_capture":
      return { status: "succeeded", reference: intent.id };
    case "processing":
      return "processing";
    case "requires_action":
    case "requires_confirmation":
      return authenticationRequired(intent.id);
    default: {
      const last = intent.last_payment_error ?? intent.last_setup_error;
      if (last) return declined(last);
      return { status: "failed", code: "processing_error", message: `${TENDER_MESSAGES.processing_error} (Stripe ${intent.id} ${intent.status})` };
    }
  }
}

const PAYOUT_FAILURES: Record<string, DeclineCode> = {
  insufficient_funds: "insufficient_funds",
  could_not_process: "processing_error",
  expired_card: "expired_card",
};

/** A Stripe payout's failure_code as a Tender code (card_declined for the account/card refusals). */
export function payoutFailure(payout: { id: string; failure_code?: string | null; failure_message?: string | null; status: string }): Outcome & { status: "failed" } {
  const code = (payout.failure_code && PAYOUT_FAILURES[payout.failure_code]) || (payout.status === "canceled" ? "processing_error" : "card_declined");
  const why = payout.failure_code ? `failure_code ${payout.failure_code}` : payout.status;
  return { status: "failed", code, message: `${payout.failure_message ?? "The payout failed."} (Stripe ${payout.id} ${why})` };
}

export function payoutOutcome(payout: { id: string; status: string; failure_code?: string | null; failure_message?: string | null }): SettlementOutcome {
  switch (payout.status) {
    case "paid":
      return { status: "succeeded", reference: payout.id };
    case "pending":
    case "in_transit":
      return { status: "pending", reference: payout.id };
    default:
      return payoutFailure(payout);
  }
}

export function refundOutcome(refund: { id: string; status: string | null; failure_reason?: string | null }): SettlementOutcome {
  switch (refund.status) {
    case "succeeded":
      return { status: "succeeded", reference: refund.id };
    case "pending":
    case "requires_action":
      return { status: "pending", reference: refund.id };
    default:
      return {
        status: "failed",
        code: "processing_error",
        message: `The refund failed at Stripe (${refund.id} ${refund.status}${refund.failure_reason ? `, failure_reason ${refund.failure_reason}` : ""}).`,
      };
  }
}

/** A request Stripe refused outright (400/404), as a failed outcome keeping Stripe's code. */
export const refused = (what: string, error: { code?: string | null; message?: string | null }, code: DeclineCode = "processing_error"): Outcome & { status: "failed" } => ({
  status: "failed",
  code,
  message: `Stripe refused the ${what}${error.code ? ` (${error.code})` : ""}: ${error.message ?? "no reason given"}`,
});

/**
 * A PaymentIntent that asked for authentication, as Tender's PaymentState: Stripe answers a failed
 * challenge with requires_payment_method and last_payment_error code
 * payment_intent_authentication_failure, which Tender records as failure_code authentication_failed.
 */
export function paymentStateOfIntent(intent: IntentLike & { amount: number; amount_received: number; currency: string; client_secret?: string | null }): PaymentState {
  switch (intent.status) {
    case "requires_action":
    case "requires_confirmation":
      return { status: "requires_action", clientSecret: intent.client_secret ?? null };
    case "succeeded":
      return { status: "succeeded", authorized: false, amount: intent.amount, amountReceived: intent.amount_received, currency: intent.currency };
    case "requires_capture":
      return { status: "succeeded", authorized: true, amount: intent.amount, amountReceived: 0, currency: intent.currency };
    case "processing":
      return { status: "processing" };
    case "canceled":
      return { status: "canceled" };
    default: {
      const last = intent.last_payment_error;
      if (last?.code === "payment_intent_authentication_failure") {
        return { status: "failed", code: "authentication_failed", message: `${AUTHENTICATION_FAILED_MESSAGE} (Stripe code payment_intent_authentication_failure)` };
      }
      const outcome = last ? declined(last) : { code: "processing_error" as const, message: `${TENDER_MESSAGES.processing_error} (Stripe ${intent.id} ${intent.status})` };
      return { status: "failed", code: outcome.code, message: outcome.message };
    }
  }
}

/** failure_message of a payment whose payer failed (or abandoned) the 3-D Secure challenge. */
export const AUTHENTICATION_FAILED_MESSAGE = "The card holder did not complete 3-D Secure authentication; nothing was charged.";
