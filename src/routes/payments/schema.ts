import { z } from "@hono/zod-openapi";
import { listQuery } from "../pagination";
import { CardSummarySchema, OptionalCardFields } from "../../payments/card-input";
import { AmountField, CurrencyField } from "../../payments/money-input";
import { bodyObject, closedSet, idField, livemodeField, textField, timestamp } from "../shared";

/** Every status a payment has, in Tender's words for Stripe's PaymentIntent states (succeeded is completed). */
export const PAYMENT_STATUSES = ["requires_action", "requires_capture", "completed", "failed", "canceled", "refunded", "partially_refunded"] as const;
export const CAPTURE_METHODS = ["automatic", "manual"] as const;
export const CANCELLATION_REASONS = ["requested_by_customer", "duplicate", "fraudulent", "abandoned", "expired"] as const;
/** The reasons a caller may give; `expired` is the cron's alone. */
export const REQUESTED_CANCELLATION_REASONS = ["requested_by_customer", "duplicate", "fraudulent", "abandoned"] as const;

export const METADATA_MAX_KEYS = 50;
const METADATA = `metadata must be an object of at most ${METADATA_MAX_KEYS} keys, each of 1 to 40 characters, with string values of at most 500 characters.`;

export const MetadataField = z
  .record(z.string({ error: METADATA }).min(1, { error: METADATA }).max(40, { error: METADATA }), z.string({ error: METADATA }).max(500, { error: METADATA }), { error: METADATA })
  .refine((m) => Object.keys(m).length <= METADATA_MAX_KEYS, { error: METADATA })
  .openapi({ description: "Your own key-value pairs, as Stripe's metadata: strings only. Never put card numbers here.", example: { order_id: "6735" } });

export const NextActionSchema = z
  .object({
    type: z.literal("redirect_to_url"),
    url: z.string().openapi({ description: "Where the payer authenticates (3-D Secure): a page of Tender's, opened by the unguessable secret in its path, with no API key." }),
  })
  .openapi("PaymentNextAction");

export const PaymentSchema = z
  .object({
    id: z.string().openapi({ example: "pay_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("payment"),
    livemode: livemodeField,
    subscription_id: z.string().nullable().openapi({ description: "The subscription this payment was charged for; null for a one-off payment (POST /payments)." }),
    invoice_id: z.string().nullable().openapi({ description: "The invoice this charge was an attempt to pay: every attempt at one billing period (its dunning retries included) names the same invoice.", example: "in_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    user_id: z.string().nullable(),
    amount: z.number().int().openapi({ description: "What was asked for (authorized, for a manual capture), in the currency's smallest unit.", example: 1999 }),
    currency: z.string().openapi({ example: "usd" }),
    status: z.enum(PAYMENT_STATUSES).openapi({
      description:
        "requires_capture: authorized, waiting for POST /payments/{id}/capture (amount_capturable is held); requires_action: the payer must authenticate (next_action); completed: captured (Stripe's succeeded); failed: declined; canceled: released uncaptured; partially_refunded and refunded follow a completed payment's refunds.",
    }),
    capture_method: z.enum(CAPTURE_METHODS).openapi({ description: "automatic: captured when confirmed (every subscription payment); manual: authorized first, captured later." }),
    amount_capturable: z.number().int().openapi({ description: "What a capture may still take (0 unless requires_capture).", example: 0 }),
    amount_received: z.number().int().openapi({ description: "What was captured: refunds come out of this.", example: 1999 }),
    amount_refunded: z.number().int().openapi({ description: "How much has been refunded so far, in the smallest unit.", example: 0 }),
    next_action: NextActionSchema.nullable().openapi({ description: "What the payer must do when the status is requires_action; null otherwise." }),
    payment_method_id: z.string().nullable().openapi({ description: "The saved payment method (pmt_…) charged; null when the card fields were sent." }),
    capture_before: z.string().nullable().openapi({ description: "An authorization not captured by then is canceled (cancellation_reason expired): 7 days after it was made. Null unless requires_capture.", example: "2026-12-04T10:00:00.000Z" }),
    canceled_at: z.string().nullable().openapi({ description: "When the payment was canceled." }),
    cancellation_reason: z.enum(CANCELLATION_REASONS).nullable().openapi({ description: "Why it was canceled: the reason given to POST /payments/{id}/cancel, expired when the authorization lapsed, or abandoned when the payer did not authenticate (3-D Secure) within 7 days." }),
    description: z.string().nullable(),
    metadata: z.record(z.string(), z.string()).openapi({ description: "Your key-value pairs ({} when none)." }),
    failure_code: z.string().nullable().openapi({ description: "Why the charge failed, e.g. card_declined or insufficient_funds; authentication_failed when the payer failed 3-D Secure." }),
    failure_message: z.string().nullable(),
    card: CardSummarySchema,
    created_at: timestamp("When the payment was made."),
  })
  .openapi("Payment");

export const PaymentListQuery = listQuery.extend({
  subscription_id: idField("subscription_id", "a subscription", "sub_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only payments for this subscription." }),
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only payments by this user." }),
});

export const RETURN_URL = "return_url must be an https URL of at most 2048 characters, with no user name or password (localhost, and http to it, only in development).";

export const CreatePaymentBody = bodyObject({
  amount: AmountField,
  currency: CurrencyField,
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").openapi({ description: "The paying user, of this account and mode." }),
  capture_method: closedSet("capture_method", CAPTURE_METHODS)
    .optional()
    .openapi({ description: "automatic (the default) captures at once; manual only authorizes, for POST /payments/{id}/capture within 7 days.", example: "manual" }),
  description: textField("description", 1000).optional().openapi({ description: "What the payment is for.", example: "Order 6735" }),
  metadata: MetadataField.optional(),
  return_url: z.string({ error: RETURN_URL }).max(2048, { error: RETURN_URL }).optional().openapi({ description: "Where the payer returns after authenticating (3-D Secure), with ?payment_id=….", example: "https://shop.example.com/orders/6735" }),
  ...OptionalCardFields,
  payment_method: OptionalCardFields.payment_method.openapi({
    description: '"card" with the card fields (in live mode only on a connection made with raw_card_data, else 400 raw_card_data_unavailable), or a saved payment method of the user, "pmt_…", sent without the card fields (another user\'s, account\'s or mode\'s answers 404; a detached one 400 payment_method_detached).',
    example: "card",
  }),
}).openapi("CreatePaymentRequest");

export const CapturePaymentBody = bodyObject({
  amount: AmountField.optional().openapi({ description: "How much to capture, at most amount_capturable; the rest is released. Default: all of amount_capturable.", example: 1500 }),
}).openapi("CapturePaymentRequest");

export const CancelPaymentBody = bodyObject({
  cancellation_reason: closedSet("cancellation_reason", REQUESTED_CANCELLATION_REASONS).optional().openapi({ description: "Why, as Stripe's reasons.", example: "requested_by_customer" }),
}).openapi("CancelPaymentRequest");
