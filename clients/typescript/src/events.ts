// The bodies Tender delivers to webhook endpoints (and keeps as `payload` in GET /api/events),
// typed from the generated schema's resources. Types only: nothing here exists at run time.
//
// The OpenAPI document's `webhooks` section is empty today; when it documents each event type,
// these types should come from it (`webhooks` in schema.d.ts) instead of being written here.
import type { components } from "./schema";

type Schemas = components["schemas"];

/** The document's payment summary, the data of payment.completed and payment.failed. */
export interface PaymentEventData {
  /** The payment's id (pay_…). */
  transaction_id: string;
  /** In the currency's smallest unit. */
  amount: number;
  currency: string;
  status: "completed" | "failed";
  customer: { id: string; email: string } | null;
  subscription_id: string | null;
}

/** What `data` holds for each event type of the standard envelope. */
export interface EnvelopeEventData {
  "payment.completed": PaymentEventData;
  "payment.failed": PaymentEventData;
  "refund.initiated": Schemas["Refund"];
  "refund.completed": Schemas["Refund"];
  "customer.created": Schemas["User"];
  "customer.updated": Schemas["User"];
  "payout.created": Schemas["Payout"];
  "payout.paid": Schemas["Payout"];
  "payout.failed": Schemas["Payout"];
  "payout.canceled": Schemas["Payout"];
  /** Sent by POST /api/webhooks/{id}/test only. */
  "webhook.test": { endpoint_id: string; message: string };
}

export type EnvelopeEventType = keyof EnvelopeEventData;

/** The standard envelope: `{ id, type, data, created_at, sequence, livemode }`. */
export type EnvelopeEvent = {
  [T in EnvelopeEventType]: {
    /** The event id (evt_…), also sent as `webhook-id`: use it to drop duplicates. */
    id: string;
    type: T;
    data: EnvelopeEventData[T];
    created_at: string;
    /** The event's place among its object's events (null for webhook.test). */
    sequence?: number | null;
    /** The event's mode: true for live-mode objects, false for test mode. */
    livemode: boolean;
  };
}[EnvelopeEventType];

/** The interface document's subscription notifications, and the status each one carries. */
export interface NotificationStatus {
  subscription_created: string;
  subscription_renewal: "success" | "failed";
  subscription_updated: string;
  subscription_canceled: string;
}

export type NotificationEventType = keyof NotificationStatus;

/** A subscription notification: `{ id, event, subscription_id, status, timestamp, livemode }`. */
export type NotificationEvent = {
  [T in NotificationEventType]: {
    id: string;
    event: T;
    subscription_id: string;
    status: NotificationStatus[T];
    timestamp: string;
    /** The event's mode: true for live-mode objects, false for test mode. */
    livemode: boolean;
  };
}[NotificationEventType];

/** Any body Tender delivers. Tell the two shapes apart with `"type" in event`. */
export type WebhookEvent = EnvelopeEvent | NotificationEvent;

/** Every event type a webhook endpoint can subscribe to (GET /api/event-types). */
export type EventType = Exclude<EnvelopeEventType, "webhook.test"> | NotificationEventType;
