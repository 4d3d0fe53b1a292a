// What a subscription costs per period, from its plan and quantity. Integer minor units only.
import type { plans } from "../db/schema";
import { MAX_AMOUNT, MIN_AMOUNT } from "../domain/money";
import { priceFor, type Tier } from "../domain/pricing";
import { invalidRequest } from "../lib/errors";

export type PlanRow = typeof plans.$inferSelect;
export type StoredTier = NonNullable<PlanRow["tiers"]>[number];

export const toTiers = (stored: StoredTier[]): Tier[] =>
  stored.map((t) => ({ upTo: t.up_to, unitAmount: t.unit_amount, flatAmount: t.flat_amount }));

/** The period amount in minor units. Throws RangeError when it cannot be represented. */
export function periodAmount(plan: PlanRow, quantity: number): number {
  return priceFor(plan.pricingModel, { unitAmount: plan.unitAmount ?? 0, tiers: plan.tiers ? toTiers(plan.tiers) : null }, quantity);
}

/** The period amount, or a 400 when it is zero or beyond the largest chargeable amount. */
export function chargeableAmount(plan: PlanRow, quantity: number): number {
  let amount: number;
  try {
    amount = periodAmount(plan, quantity);
  } catch {
    amount = Number.POSITIVE_INFINITY;
  }
  if (amount < MIN_AMOUNT) {
    throw invalidRequest("amount_too_small", `Quantity ${quantity} of plan ${plan.id} costs nothing per period; a subscription must charge at least one minor unit.`, "quantity");
  }
  if (amount > MAX_AMOUNT) {
    throw invalidRequest("amount_too_large", `Quantity ${quantity} of plan ${plan.id} costs more per period than the largest chargeable amount (${MAX_AMOUNT} minor units).`, "quantity");
  }
  return amount;
}
