// Stripe's webhook events, for the route that receives them (POST /processor-webhooks/stripe/{account}):
// verify the raw body against `Stripe-Signature` with the connection's webhook secret (Stripe's
// 300-second tolerance, Web Crypto), then read the event as a processor-neutral settlement.
//
//   payout.paid                            -> payout paid     (metadata.tender_reference = the Tender payout id)
//   payout.failed, payout.canceled         -> payout failed   (failure_code as a Tender code)
//   refund.updated, charge.refund.updated,
//   refund.failed                          -> refund succeeded | failed (pending changes nothing)
//   charge.dispute.created                 -> dispute opened on the payment whose processor
//                                             reference is the dispute's payment_intent
//   payment_intent.succeeded, .payment_failed,
//   .amount_capturable_updated, .canceled  -> how a payment's 3-D Secure ended (the PaymentIntent's
//                                             state), for the payment whose processor reference it is
//   setup_intent.succeeded                 -> the setup checkout session its metadata names saves the card and
//                                             completes, if the payer never came back to the page
//   anything else, or an object without Tender's reference -> ignore
import Stripe from "stripe";
import { stripeCrypto } from "./stripe-client";
import { paymentStateOfIntent, payoutFailure } from "./stripe-outcomes";
import type { ProcessorSettlement, SettlementEvent } from "./types";

/** Stripe's own tolerance for a signature's timestamp, in seconds. */
export const STRIPE_SIGNATURE_TOLERANCE_S = 300;

export type VerifiedEvent =
  | { verified: true; event: Stripe.Event }
  | { verified: false; reason: "missing_signature" | "malformed_signature" | "signature_mismatch" | "timestamp_outside_tolerance" | "invalid_payload"; message: string };

/** The SDK's webhook helpers (static: no client, no key). */
const webhooks = Stripe.webhooks;

/**
 * Verifies a Stripe webhook request: the raw body exactly as received, the `Stripe-Signature`
 * header, and the connection's webhook secret (`whsec_…`). `receivedAt` is when it arrived, in
 * ms (Tender's clock; the default is Date.now()).
 *
 * Several secrets may be given. Stripe signs the events of connected accounts (payout.paid and
 * payout.failed happen on the recipient's account) only to a Connect endpoint (`connect: true`),
 * whose signing secret differs from the platform endpoint's (refunds, disputes); both may point
 * at the same URL. The body is accepted when one of them verifies it.
 */
export async function verifyStripeEvent(args: {
  rawBody: string;
  signature: string | null;
  webhookSecret: string | readonly string[];
  receivedAt?: number;
}): Promise<VerifiedEvent> {
  if (!args.signature) return { verified: false, reason: "missing_signature", message: "The Stripe-Signature header is missing." };
  const secrets = typeof args.webhookSecret === "string" ? [args.webhookSecret] : args.webhookSecret;
  let refused: VerifiedEvent = { verified: false, reason: "signature_mismatch", message: "No webhook secret is configured." };
  for (const secret of secrets) {
    const verified = await verifyWith(args.rawBody, args.signature, secret, args.receivedAt);
    if (verified.verified) return verified;
    // A stale timestamp says more than a mismatch: the sender had the right secret.
    if (refused.verified === false && (refused.reason === "signature_mismatch" || verified.reason !== "signature_mismatch")) refused = verified;
  }
  return refused;
}

/**
 * What can be told of a `Stripe-Signature` header without the body or any secret: it is there,
 * holds a timestamp `t=<seconds>` and a `v1=<64 hex digits>` signature, and the timestamp is within
 * Stripe's tolerance of `receivedAt` (ms). The route refuses a request that fails this before it
 * reads the body or asks any database. Null when the header may verify.
 */
export function signatureHeaderProblem(
  signature: string | null,
  receivedAt: number,
): Extract<VerifiedEvent, { verified: false }> | null {
  if (!signature) return { verified: false, reason: "missing_signature", message: "The Stripe-Signature header is missing." };
  const malformed = { verified: false as const, reason: "malformed_signature" as const, message: "The Stripe-Signature header is malformed." };
  if (signature.length > 4096) return malformed;
  const pairs = signature.split(",").map((part) => part.trim().split("="));
  const timestamps = pairs.filter(([name]) => name === "t").map(([, value]) => value);
  if (timestamps.length !== 1 || !/^\d{1,12}$/.test(timestamps[0] ?? "")) return malformed;
  if (!pairs.some(([name, value]) => name === "v1" && /^[0-9a-f]{64}$/.test(value ?? ""))) return malformed;
  if (Math.floor(receivedAt / 1000) - Number(timestamps[0]) > STRIPE_SIGNATURE_TOLERANCE_S) {
    return { verified: false, reason: "timestamp_outside_tolerance", message: "The signature's timestamp is more than 300 seconds away." };
  }
  return null;
}

async function verifyWith(rawBody: string, signature: string, secret: string, receivedAt: number | undefined): Promise<VerifiedEvent> {
  try {
    const event = await webhooks.constructEventAsync(rawBody, signature, secret, STRIPE_SIGNATURE_TOLERANCE_S, stripeCrypto, receivedAt);
    return { verified: true, event };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (!(error instanceof Stripe.errors.StripeSignatureVerificationError)) {
      return { verified: false, reason: "invalid_payload", message: "The body is not a Stripe event." };
    }
    if (/tolerance/i.test(message)) return { verified: false, reason: "timestamp_outside_tolerance", message: "The signature's timestamp is more than 300 seconds away." };
    if (/Unable to extract|expected scheme/i.test(message)) return { verified: false, reason: "malformed_signature", message: "The Stripe-Signature header is malformed." };
    return { verified: false, reason: "signature_mismatch", message: "No signature matches the body and the webhook secret." };
  }
}

interface StripeObjectLike {
  id?: string;
  object?: string;
  metadata?: Record<string, string> | null;
  [field: string]: unknown;
}

/** What a verified Stripe event settles in Tender, or `ignore`. */
export function settlementOf(event: Stripe.Event): ProcessorSettlement {
  const base: SettlementEvent = { eventId: event.id, type: event.type, occurredAt: event.created * 1000, account: event.account ?? null, livemode: event.livemode === true };
  const object = event.data.object as unknown as StripeObjectLike;
  const ignore = (reason: string): ProcessorSettlement => ({ ...base, kind: "ignore", reason });
  const reference = object.metadata?.tender_reference;
  const id = object.id ?? "";

  switch (event.type) {
    case "payout.paid":
    case "payout.failed":
    case "payout.canceled": {
      if (object.object !== "payout") return ignore(`${event.type} about a ${object.object ?? "nothing"}, not a payout`);
      if (!reference) return ignore(`payout ${id} was not made by Tender (no tender_reference)`);
      const destination = object.destination as string | { id?: string } | null | undefined;
      const named = {
        amount: typeof object.amount === "number" ? object.amount : null,
        currency: typeof object.currency === "string" ? object.currency : null,
        destination: typeof destination === "string" ? destination : (destination?.id ?? null),
      };
      if (event.type === "payout.paid") return { ...base, ...named, kind: "payout", reference, processorObject: id, outcome: "paid" };
      const failure = payoutFailure(object as unknown as Stripe.Payout);
      return { ...base, ...named, kind: "payout", reference, processorObject: id, outcome: "failed", code: failure.code, message: failure.message };
    }
    case "refund.updated":
    case "refund.failed":
    case "charge.refund.updated": {
      if (object.object !== "refund") return ignore(`${event.type} about a ${object.object ?? "nothing"}, not a refund`);
      if (!reference) return ignore(`refund ${id} was not made by Tender (no tender_reference)`);
      const status = object.status as string | null;
      if (status === "succeeded") return { ...base, kind: "refund", reference, processorObject: id, outcome: "succeeded" };
      if (status === "failed" || status === "canceled") {
        const why = object.failure_reason ? `failure_reason ${String(object.failure_reason)}` : status;
        return { ...base, kind: "refund", reference, processorObject: id, outcome: "failed", message: `The refund failed at Stripe (${id} ${why}).` };
      }
      return ignore(`refund ${id} is ${status ?? "without a status"}: nothing settled yet`);
    }
    case "charge.dispute.created": {
      if (object.object !== "dispute") return ignore(`${event.type} about a ${object.object ?? "nothing"}, not a dispute`);
      const paymentIntent = typeof object.payment_intent === "string" ? object.payment_intent : null;
      if (!paymentIntent) return ignore(`dispute ${id} is on charge ${String(object.charge)} without a PaymentIntent, which Tender never makes`);
      return {
        ...base,
        kind: "dispute",
        chargeReference: paymentIntent,
        processorObject: id,
        amount: Number(object.amount),
        currency: String(object.currency),
        reason: String(object.reason ?? "general"),
        status: String(object.status ?? "needs_response"),
      };
    }
    case "payment_intent.succeeded":
    case "payment_intent.payment_failed":
    case "payment_intent.amount_capturable_updated":
    case "payment_intent.canceled": {
      if (object.object !== "payment_intent") return ignore(`${event.type} about a ${object.object ?? "nothing"}, not a PaymentIntent`);
      const state = paymentStateOfIntent(object as unknown as Stripe.PaymentIntent);
      if (state.status === "requires_action" || state.status === "processing") return ignore(`PaymentIntent ${id} is ${state.status}: nothing decided yet`);
      // The event's copy of the intent carries its client secret: never kept, never logged.
      return { ...base, kind: "payment_intent", chargeReference: id, processorObject: id, state };
    }
    case "setup_intent.succeeded": {
      if (object.object !== "setup_intent") return ignore(`${event.type} about a ${object.object ?? "nothing"}, not a SetupIntent`);
      const session = object.metadata?.tender_checkout_session;
      const user = object.metadata?.tender_user;
      // Only a setup checkout session's SetupIntent waits for this event: an API save answered already.
      if (!session || !user) return ignore(`SetupIntent ${id} is for no setup checkout session`);
      return { ...base, kind: "setup_intent", processorObject: id, checkoutSession: session, user };
    }
    default:
      return ignore(`Tender does not act on ${event.type}`);
  }
}
