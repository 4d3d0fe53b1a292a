// The bodies Tender delivers to webhook endpoints (and keeps as `payload` in GET /api/events).
// Every shape comes from the generated schema's `webhooks` (the OpenAPI document's webhooks
// section, one entry per event type): this file only names them. Types only: nothing here exists
// at run time.
import type { webhooks } from "./schema";

/** Every event type Tender delivers, webhook.test included. */
export type WebhookEventType = keyof webhooks;

/** The body delivered for event type `T`: `{ id, type, data, created_at, object_id, sequence }`. */
export type WebhookEventOf<T extends WebhookEventType> = webhooks[T]["post"]["requestBody"]["content"]["application/json"];

/** What `data` holds for event type `T`. */
export type WebhookEventData<T extends WebhookEventType> = WebhookEventOf<T>["data"];

/** Any body Tender delivers. `switch (event.type)` narrows it, and its `data`, to that type's. */
export type WebhookEvent = { [T in WebhookEventType]: WebhookEventOf<T> }[WebhookEventType];

/**
 * The subscription notifications: the envelope (data is the subscription), with the interface
 * document's fields at the top level too (`event`, `subscription_id`, `status`, `timestamp`).
 */
export type NotificationEvent = Extract<WebhookEvent, { event: string }>;
export type NotificationEventType = NotificationEvent["type"];

/** Every event type a webhook endpoint can subscribe to (webhook.test is sent on request only). */
export type EventType = Exclude<WebhookEventType, "webhook.test">;
