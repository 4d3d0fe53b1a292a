import type { WebhookEvent } from "@tender/client";

// One receiver for every event, by `type`: each case knows its `data` (types generated from /openapi.json).
export function describeEvent(event: WebhookEvent): string {
  switch (event.type) {
    case "payment.completed":
    case "payment.failed":
      return `${event.type}: ${event.data.amount} ${event.data.currency} from ${event.data.customer?.email ?? "unknown"} (${event.data.transaction_id})`;
    case "payment.authorized":
    case "payment.canceled":
      return `${event.type}: ${event.data.amount} ${event.data.currency} from ${event.data.user_id} (${event.data.id}, ${event.data.status}, ${event.data.amount_capturable} capturable)`;
    case "payment.requires_action":
      return `payment.requires_action: ${event.data.amount} ${event.data.currency} from ${event.data.user_id} waits for 3-D Secure at ${event.data.next_action?.url}`;
    case "payment.disputed":
      return `payment.disputed: ${event.data.amount} ${event.data.currency} of ${event.data.transaction_id}, ${event.data.dispute.reason} (dispute ${event.data.dispute.id})`;
    case "refund.initiated":
    case "refund.completed":
      return `${event.type}: ${event.data.amount} ${event.data.currency} of payment ${event.data.payment_id} (${event.data.status})`;
    case "customer.created":
    case "customer.updated":
      return `${event.type}: ${event.data.name} <${event.data.email}>`;
    case "payout.created":
    case "payout.paid":
    case "payout.failed":
    case "payout.canceled":
      return `${event.type}: ${event.data.amount} ${event.data.currency} to ${event.data.recipient_id} (${event.data.status})`;
    case "subscription_created":
    case "subscription_renewal":
    case "subscription_updated":
    case "subscription_canceled":
      return `${event.type} (${event.status}): ${event.data.id} is ${event.data.status}, next billing ${event.data.next_billing_date ?? "none"}`;
    case "subscription_trial_will_end":
      return `subscription_trial_will_end: ${event.data.id}'s trial ends ${event.data.trial_end}`;
    case "invoice.created":
    case "invoice.finalized":
    case "invoice.paid":
    case "invoice.payment_failed":
    case "invoice.voided":
      return `${event.type}: ${event.data.number ?? "draft"} for ${event.data.total} ${event.data.currency} (${event.data.status})`;
    case "invoice.payment_action_required":
      return `invoice.payment_action_required: ${event.data.number} needs its payer at ${event.data.hosted_invoice_url}`;
    case "credit_note.created":
    case "credit_note.voided":
      return `${event.type}: ${event.data.number} credits ${event.data.amount} ${event.data.currency} of invoice ${event.data.invoice_id} (${event.data.refund_id ? `refund ${event.data.refund_id}` : "to the balance"})`;
    case "payment_method.attached":
    case "payment_method.detached":
      return `${event.type}: ${event.data.card.brand} ending ${event.data.card.last4} of ${event.data.user_id} (${event.data.id})`;
    case "webhook_endpoint.disabled":
      return `webhook_endpoint.disabled: ${event.data.url} (${event.data.id}) is disabled, ${event.data.disabled_reason} since ${event.data.disabled_at}`;
    case "webhook_delivery.exhausted":
      return `webhook_delivery.exhausted: ${event.data.event_type} ${event.data.event_id} was not delivered to ${event.data.endpoint_id} after ${event.data.attempt_count} attempts`;
    case "checkout.session.completed":
    case "checkout.session.expired":
      return `${event.type}: ${event.data.id} (${event.data.mode}) for ${event.data.user_id} is ${event.data.status}, payment ${event.data.payment_id ?? "none"}`;
    case "webhook.test":
      return `webhook.test: ${event.data.message}`;
    default: {
      const unhandled: never = event; // a new event type fails to compile here until it is handled
      return `unhandled event ${(unhandled as { type: string }).type}`;
    }
  }
}
