// The body Tender delivers for each event type, as zod: the OpenAPI document's `webhooks` section
// (one entry per type of the catalog, and webhook.test), from the same schemas the API answers
// with. @tender/client's event types are generated from that section.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { ENVELOPE_EVENT_TYPES, type EventType, NOTIFICATION_EVENT_TYPES, TEST_EVENT_TYPE } from "../../webhooks/catalog";
import { CheckoutSessionSchema } from "../checkout-sessions/schema";
import { InvoiceSchema } from "../invoices/schema";
import { CreditNoteSchema } from "../credit-notes/schema";
import { PaymentMethodSchema } from "../payment-methods/schema";
import { PaymentSchema } from "../payments/schema";
import { PayoutSchema } from "../payouts/schema";
import { RefundSchema } from "../refunds/schema";
import { SubscriptionSchema, SubscriptionStatus } from "../subscriptions/schema";
import { UserSchema } from "../users/schema";
import { ExhaustedDeliverySchema, WebhookSchema } from "../webhooks/schema";
import { livemodeField, timestamp } from "../shared";

/** "payment.completed" -> "PaymentCompleted", "subscription_created" -> "SubscriptionCreated". */
const pascal = (type: string) => type.replace(/(^|[._])([a-z])/g, (_, _sep, letter: string) => letter.toUpperCase());

/** The name of a type's payload under components.schemas: PaymentCompletedWebhook, … */
export const payloadSchemaName = (type: string) => `${pascal(type)}Webhook`;

/** The interface document's payment summary: the data of payment.completed and payment.failed. */
const paymentEventData = (status: "completed" | "failed") =>
  z.object({
    transaction_id: z.string().openapi({ description: "The payment's id.", example: "pay_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    amount: z.number().int().openapi({ description: "In the currency's smallest unit.", example: 1999 }),
    currency: z.string().openapi({ example: "usd" }),
    status: z.literal(status),
    customer: z.object({ id: z.string(), email: z.string() }).nullable().openapi({ description: "The user charged." }),
    subscription_id: z.string().nullable().openapi({ description: "The subscription charged; null for a one-off payment, or a declined first charge (no subscription was created)." }),
  });

/** payment.disputed: the payment summary, and the dispute as the processor opened it. */
const PaymentDisputedData = z.object({
  transaction_id: z.string().openapi({ description: "The disputed payment's id.", example: "pay_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
  amount: z.number().int().openapi({ description: "The payment's amount, in the currency's smallest unit.", example: 1999 }),
  currency: z.string().openapi({ example: "usd" }),
  status: z.literal("disputed"),
  customer: z.object({ id: z.string(), email: z.string() }).nullable().openapi({ description: "The user charged." }),
  subscription_id: z.string().nullable().openapi({ description: "The subscription the payment was for." }),
  dispute: z
    .object({
      id: z.string().openapi({ description: "The processor's dispute id (Stripe's dp_…).", example: "dp_1Nv0FGQ9RKHgCVdK" }),
      amount: z.number().int().openapi({ description: "The disputed amount, in the currency's smallest unit.", example: 1999 }),
      currency: z.string().openapi({ example: "usd" }),
      reason: z.string().openapi({ description: "The processor's reason, e.g. fraudulent, product_not_received.", example: "fraudulent" }),
      status: z.string().openapi({ description: "The processor's status of the dispute, e.g. needs_response.", example: "needs_response" }),
    })
    .openapi({ description: "Answer it in your Stripe dashboard before its deadline." }),
});

const TestEventData = z.object({ endpoint_id: z.string(), message: z.string() });

/** The envelope of event `type` with `data`: what every event is. */
function envelope<T extends string, D extends z.ZodTypeAny>(type: T, data: D, about: "object" | "none" = "object") {
  return envelopeOf(type, data, about).openapi(payloadSchemaName(type));
}

function envelopeOf<T extends string, D extends z.ZodTypeAny>(type: T, data: D, about: "object" | "none") {
  return z.object({
    id: z.string().openapi({ description: "The event id, also sent as webhook-id: use it to drop duplicates.", example: "evt_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    type: z.literal(type),
    data,
    created_at: timestamp("When the event happened."),
    object_id: (about === "object" ? z.string() : z.null()).openapi({ description: "The object the event is about (null for webhook.test)." }),
    sequence: (about === "object" ? z.number().int().min(1) : z.null()).openapi({
      description: "The event's place among its object's events: 1, 2, 3 … in commit order (also in Tender-Sequence).",
    }),
    livemode: livemodeField,
  });
}

/** A subscription notification: the envelope, and the interface document's fields at the top level. */
function notification<T extends keyof typeof NOTIFICATION_EVENT_TYPES, S extends z.ZodTypeAny>(type: T, status: S) {
  return envelopeOf(type, SubscriptionSchema, "object")
    .extend({
      event: z.literal(type).openapi({ description: "The interface document's name of the notification: the same as type." }),
      subscription_id: z.string(),
      status,
      timestamp: timestamp("When the event happened (the same as created_at)."),
    })
    .openapi(payloadSchemaName(type));
}

const RenewalStatus = z.enum(["success", "failed"]).openapi({ description: "Whether the renewal charge succeeded." });

/** The delivered body of every event type. */
export const WEBHOOK_PAYLOADS = {
  "payment.completed": envelope("payment.completed", paymentEventData("completed")),
  "payment.failed": envelope("payment.failed", paymentEventData("failed")),
  "payment.authorized": envelope("payment.authorized", PaymentSchema),
  "payment.requires_action": envelope("payment.requires_action", PaymentSchema),
  "payment.canceled": envelope("payment.canceled", PaymentSchema),
  "payment.disputed": envelope("payment.disputed", PaymentDisputedData),
  "refund.initiated": envelope("refund.initiated", RefundSchema),
  "refund.completed": envelope("refund.completed", RefundSchema),
  "customer.created": envelope("customer.created", UserSchema),
  "customer.updated": envelope("customer.updated", UserSchema),
  "payout.created": envelope("payout.created", PayoutSchema),
  "payout.paid": envelope("payout.paid", PayoutSchema),
  "payout.failed": envelope("payout.failed", PayoutSchema),
  "payout.canceled": envelope("payout.canceled", PayoutSchema),
  "invoice.created": envelope("invoice.created", InvoiceSchema),
  "invoice.finalized": envelope("invoice.finalized", InvoiceSchema),
  "invoice.paid": envelope("invoice.paid", InvoiceSchema),
  "invoice.payment_failed": envelope("invoice.payment_failed", InvoiceSchema),
  "invoice.payment_action_required": envelope("invoice.payment_action_required", InvoiceSchema),
  "invoice.voided": envelope("invoice.voided", InvoiceSchema),
  "credit_note.created": envelope("credit_note.created", CreditNoteSchema),
  "credit_note.voided": envelope("credit_note.voided", CreditNoteSchema),
  "payment_method.attached": envelope("payment_method.attached", PaymentMethodSchema),
  "payment_method.detached": envelope("payment_method.detached", PaymentMethodSchema),
  "webhook_endpoint.disabled": envelope("webhook_endpoint.disabled", WebhookSchema),
  "webhook_delivery.exhausted": envelope("webhook_delivery.exhausted", ExhaustedDeliverySchema),
  "checkout.session.completed": envelope("checkout.session.completed", CheckoutSessionSchema),
  "checkout.session.expired": envelope("checkout.session.expired", CheckoutSessionSchema),
  subscription_created: notification("subscription_created", SubscriptionStatus),
  subscription_renewal: notification("subscription_renewal", RenewalStatus),
  subscription_updated: notification("subscription_updated", SubscriptionStatus),
  subscription_canceled: notification("subscription_canceled", z.literal("canceled")),
  subscription_trial_will_end: notification("subscription_trial_will_end", z.literal("trialing")),
  [TEST_EVENT_TYPE]: envelope(TEST_EVENT_TYPE, TestEventData, "none"),
} satisfies Record<EventType | typeof TEST_EVENT_TYPE, z.ZodTypeAny>;

export type WebhookPayloadType = keyof typeof WEBHOOK_PAYLOADS;

const DeliveryHeaders = z.object({
  "X-Signature": z.string().openapi({ description: "Lowercase hex HMAC-SHA256 of the exact body, keyed with the UTF-8 bytes of the whole secret (whsec_…)." }),
  "webhook-id": z.string().openapi({ description: "The event id (Standard Webhooks): the same on every attempt and redelivery." }),
  "webhook-timestamp": z.string().openapi({ description: "Seconds since the epoch when this attempt was signed (Standard Webhooks)." }),
  "webhook-signature": z.string().openapi({
    description: "v1,<base64 HMAC-SHA256 of id.timestamp.body>, keyed with the base64-decoded secret (Standard Webhooks); two, space-separated, during a secret rotation.",
  }),
  "Tender-Delivery-Attempt": z.string().openapi({ description: "1 for the first attempt, 2, 3 … for retries." }),
  "Tender-Sequence": z.string().optional().openapi({ description: "<object_id>/<sequence>: the event's place among its object's events (absent for webhook.test)." }),
});

const description = (type: WebhookPayloadType) =>
  type === TEST_EVENT_TYPE
    ? "Sent by POST /api/webhooks/{id}/test to that endpoint only."
    : (ENVELOPE_EVENT_TYPES as Record<string, string>)[type] ?? (NOTIFICATION_EVENT_TYPES as Record<string, string>)[type];

/** Documents every event type under the OpenAPI document's `webhooks`, each with its payload. */
export function registerWebhookPayloads(app: OpenAPIHono<AppEnv>) {
  for (const [type, schema] of Object.entries(WEBHOOK_PAYLOADS) as [WebhookPayloadType, z.ZodTypeAny][]) {
    const name = payloadSchemaName(type);
    app.openAPIRegistry.registerWebhook({
      method: "post",
      path: type,
      operationId: `${name[0].toLowerCase()}${name.slice(1)}`,
      tags: ["Webhooks"],
      summary: `${type} event`,
      description: `${description(type)} Delivered by POST to each endpoint subscribed to ${type === TEST_EVENT_TYPE ? "nothing (it is sent on request)" : `\`${type}\` or \`*\``}, signed (see the headers). Answer 2xx to acknowledge; anything else is retried for up to 24 hours.`,
      security: [],
      request: {
        headers: DeliveryHeaders,
        body: { required: true, content: { "application/json": { schema } } },
      },
      responses: {
        200: { description: "Any 2xx acknowledges the delivery." },
        400: { description: "Refused (for instance an invalid signature): the delivery is retried, up to 24 hours after its first attempt." },
      },
    });
  }
}
