// A payment as stored, and the data the interface document gives its events (payment.completed,
// payment.failed, and payment.disputed, which adds the dispute): one home for both, below the
// charge and dispute code that emit them.
import type { payments } from "../db/schema";

export type PaymentRow = typeof payments.$inferSelect;

/** The document's payment event data: transaction_id, amount, currency, status, customer. */
export function paymentEventData(payment: PaymentRow, customer: { id: string; email: string } | null) {
  return {
    transaction_id: payment.id,
    amount: payment.amount,
    currency: payment.currency,
    status: payment.status === "failed" ? "failed" : "completed",
    customer: customer ? { id: customer.id, email: customer.email } : null,
    subscription_id: payment.subscriptionId,
  };
}
