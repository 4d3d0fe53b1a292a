// Every event type Tender emits, with the body shape it is delivered in.
export const ENVELOPE_EVENT_TYPES = {
  "payment.completed": "A payment was successfully completed.",
  "payment.failed": "A payment attempt failed.",
  "payment.authorized": "A one-off payment was authorized (capture_method manual): amount_capturable is held until it is captured or canceled.",
  "payment.requires_action": "A one-off payment asks its payer to authenticate (3-D Secure): send the payer to next_action.url; payment.completed, payment.authorized or payment.failed follows (or payment.canceled).",
  "payment.canceled": "An uncaptured or unauthenticated payment was canceled (by POST /payments/{id}/cancel, or expired after 7 days): nothing is held any more.",
  "payment.disputed": "The card holder disputed a payment (a chargeback was opened at the processor).",
  "refund.initiated": "A refund was initiated.",
  "refund.completed": "A refund was successfully processed.",
  "customer.created": "A new customer (user) was created.",
  "customer.updated": "A customer's (user's) information was updated.",
  "payout.created": "A payout was created and is pending.",
  "payout.paid": "A payout was paid to its destination.",
  "payout.failed": "A payout failed.",
  "payout.canceled": "A pending payout was canceled.",
  "invoice.created": "An invoice was created (its data is the draft).",
  "invoice.finalized": "An invoice was finalized: numbered and open for payment.",
  "invoice.paid": "An invoice was paid.",
  "invoice.payment_failed": "A charge for an invoice was declined.",
  "invoice.payment_action_required": "An invoice's off-session charge needs its payer to authenticate (3-D Secure): the invoice stays open (its hosted_invoice_url shows it to the payer) and dunning goes on.",
  "invoice.voided": "An invoice was voided: it will never be charged.",
  "credit_note.created": "A credit note was issued for a finalized invoice: refunded to the card (refund_id) or credited to the user's balance (customer_balance_transaction).",
  "credit_note.voided": "A credit note that credited the user's balance was voided: the credit was taken back from the balance.",
  "payment_method.attached": "A card was saved as a user's payment method (from a processor token or the card fields).",
  "payment_method.detached": "A user's payment method was detached: it can be charged no more.",
  "webhook_endpoint.disabled":
    "A webhook endpoint was disabled: every attempt failed for 5 days (disabled_reason failing), it answered 410 (gone), or a person disabled it (manual). Sent to the account's other endpoints that take it, never to the disabled one.",
  "webhook_delivery.exhausted":
    "A delivery's 24-hour retry window ended without a 2xx: data is the delivery, with its event's id and type. Sent to the account's other endpoints that take it, never to the failing one.",
  "checkout.session.completed": "A hosted checkout session was paid (or, in setup mode, its card saved): its payment_id, subscription_id and payment_method_id name what it made.",
  "checkout.session.expired": "A hosted checkout session was not completed by its expires_at: its page takes no card any more.",
} as const;

export const NOTIFICATION_EVENT_TYPES = {
  subscription_created: "A subscription was created: its first period paid, or its trial begun (status trialing).",
  subscription_renewal: "A renewal charge was attempted (status success or failed).",
  subscription_updated: "A subscription's payment details, plan or quantity changed.",
  subscription_canceled: "A subscription was canceled.",
  subscription_trial_will_end: "A subscription's trial ends in three days (or sooner, for a shorter trial): its first period is charged then.",
} as const;

export type EnvelopeEventType = keyof typeof ENVELOPE_EVENT_TYPES;
export type NotificationEventType = keyof typeof NOTIFICATION_EVENT_TYPES;
export type EventType = EnvelopeEventType | NotificationEventType;

/** Subscribing to "*" receives every type, including ones added later. */
export const ALL_EVENTS = "*";
/** Events about endpoints and deliveries themselves: never sent to the endpoint they are about. */
export const isWebhookHealthEvent = (type: string) => type.startsWith("webhook_");

/** Sent by POST /api/webhooks/{id}/test only, to that endpoint only. */
export const TEST_EVENT_TYPE = "webhook.test";

export const EVENT_TYPES = [
  ...Object.keys(ENVELOPE_EVENT_TYPES),
  ...Object.keys(NOTIFICATION_EVENT_TYPES),
] as EventType[];

export function isEventType(value: string): value is EventType {
  // Own keys only: `in` would also accept inherited names such as "constructor" or "__proto__".
  return Object.hasOwn(ENVELOPE_EVENT_TYPES, value) || Object.hasOwn(NOTIFICATION_EVENT_TYPES, value);
}


/** The kind of object each event type is about: its `object_id` and the sequence it counts in. */
export function aboutObject(type: EventType): "payment" | "payment_method" | "refund" | "user" | "payout" | "subscription" | "invoice" | "credit_note" | "webhook_endpoint" | "checkout_session" {
  // An endpoint's health events are about the endpoint (an exhausted delivery's too): its
  // events count in one sequence, and the retention purge keeps only its newest.
  if (type.startsWith("webhook_")) return "webhook_endpoint";
  if (type.startsWith("checkout.session.")) return "checkout_session";
  if (type.startsWith("payment_method.")) return "payment_method";
  if (type.startsWith("payment.")) return "payment";
  if (type.startsWith("invoice.")) return "invoice";
  if (type.startsWith("credit_note.")) return "credit_note";
  if (type.startsWith("refund.")) return "refund";
  if (type.startsWith("customer.")) return "user";
  if (type.startsWith("payout.")) return "payout";
  return "subscription";
}

export function describeEventTypes() {
  return [
    ...Object.entries(ENVELOPE_EVENT_TYPES).map(([type, description]) => ({ type, description, shape: "envelope" as const, object: aboutObject(type as EventType) })),
    ...Object.entries(NOTIFICATION_EVENT_TYPES).map(([type, description]) => ({ type, description, shape: "notification" as const, object: aboutObject(type as EventType) })),
  ];
}
