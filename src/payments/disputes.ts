// A payment disputed by its card holder (a chargeback opened at the processor): the
// payment.disputed event, about the payment, with the document's payment summary and the dispute.
// Emitted by the processor's own event (Stripe's charge.dispute.created), or at once by the
// sandbox's dispute card in test mode.
import type { Db } from "../db/client";
import { type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { type PaymentRow, paymentEventData } from "./event-data";

export interface DisputeDetails {
  /** The processor's dispute id (Stripe's `dp_…`). */
  id: string;
  /** Disputed amount, in the currency's smallest unit. */
  amount: number;
  currency: string;
  /** The processor's reason, e.g. `fraudulent`. */
  reason: string;
  /** The processor's dispute status, e.g. `needs_response`. */
  status: string;
}

export function paymentDisputedEvent(db: Db, payment: PaymentRow, customer: { id: string; email: string } | null, dispute: DisputeDetails, at: number): EmittedEvent {
  return emitEvent(
    db,
    payment,
    { type: "payment.disputed", data: { ...paymentEventData(payment, customer), status: "disputed", dispute }, objectId: payment.id },
    at,
  );
}
