// A subscription as the API answers it (GET /subscriptions/{id}, every write's answer, and the
// subscription notifications' data), and a write's stored answer of it: below the routes and the
// event outbox, which both write it.
import { subscriptions } from "../db/schema";
import { rowAnswer } from "../middleware/stored-answers";
import { cardOf } from "../payments/serialize";
import { discountOf } from "./coupons";

export function serializeSubscription(row: typeof subscriptions.$inferSelect) {
  return {
    id: row.id,
    object: "subscription" as const,
    livemode: row.livemode,
    user_id: row.userId,
    plan_id: row.planId,
    status: row.status,
    quantity: row.quantity,
    card: cardOf(row),
    payment_method: row.paymentMethodId ?? null,
    start_date: row.startDate,
    current_period_start: row.currentPeriodStart,
    trial_start: row.trialStart,
    trial_end: row.trialEnd,
    next_billing_date: row.status === "canceled" ? null : row.nextBillingDate,
    discount: discountOf(row),
    default_tax_rates: row.defaultTaxRates === null || row.defaultTaxRates === undefined ? null : row.defaultTaxRates.map((r) => r.id),
    pending_update:
      // (none once canceled, or while set to cancel at period end: no next period takes it)
      row.pendingPlanId === null || row.status === "canceled" || row.cancelAtPeriodEnd
        ? null
        : { plan_id: row.pendingPlanId, quantity: row.pendingQuantity ?? row.quantity, effective_at: row.nextBillingDate },
    // Once canceled, nothing is left to cancel at the period's end (rows canceled before this rule included).
    cancel_at_period_end: row.status !== "canceled" && row.cancelAtPeriodEnd,
    canceled_at: row.canceledAt,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/**
 * A subscription as a write's answer, stored by its idempotency record as the committed row
 * (src/middleware/stored-answers.ts), without the processor's token and the card's fingerprint.
 */
export const subscriptionAnswer = rowAnswer("subscription", subscriptions, serializeSubscription, ["processorToken", "cardFingerprint"]);
