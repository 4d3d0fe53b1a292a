// What a subscription costs per period, from its plan and quantity. Integer minor units only.
import type { plans } from "../db/schema";
import { MAX_AMOUNT, MIN_AMOUNT } from "../domain/money";
import { minorDecimal, fromMinorUnits } from "../domain/decimal";
import { type ExactPriceInput, priceFor, priceLine, type Tier } from "../domain/pricing";
import { invalidRequest } from "../lib/errors";

export type PlanRow = typeof plans.$inferSelect;
export type StoredTier = NonNullable<PlanRow["tiers"]>[number];

export const toTiers = (stored: StoredTier[]): Tier[] =>
  stored.map((t) => ({ upTo: t.up_to, unitAmount: t.unit_amount ?? 0, flatAmount: t.flat_amount }));

/** Whether the plan has a sub-cent price anywhere (its unit price, or a tier's). */
export const hasDecimalPrice = (plan: Pick<PlanRow, "unitAmountDecimal" | "tiers">) =>
  plan.unitAmountDecimal !== null || (plan.tiers ?? []).some((t) => t.unit_amount_decimal !== undefined);

/**
 * A fixed plan's exact unit price in minor units ("1999", or "0.35" for a sub-cent price); null
 * for a tiered plan. What the plan answers as `unit_amount_decimal` and an invoice line shows.
 */
export const planUnitAmountDecimal = (plan: Pick<PlanRow, "pricingModel" | "unitAmount" | "unitAmountDecimal">): string | null =>
  plan.pricingModel !== "fixed" ? null : (plan.unitAmountDecimal ?? (plan.unitAmount === null ? null : String(plan.unitAmount)));

/** A tier's exact unit price in minor units: its sub-cent `unit_amount_decimal`, or its integer `unit_amount`. */
export const tierUnitAmountDecimal = (tier: StoredTier): string => tier.unit_amount_decimal ?? String(tier.unit_amount ?? 0);

/**
 * The period amount in minor units. Throws RangeError when it cannot be represented. A plan with a
 * sub-cent price is priced exactly (decimals of the minor unit) and rounded once, half away from
 * zero (src/domain/pricing.ts priceLine): 1,000 units at "0.35" is 350.
 */
export function periodAmount(plan: PlanRow, quantity: number): number {
  if (!hasDecimalPrice(plan)) {
    return priceFor(plan.pricingModel, { unitAmount: plan.unitAmount ?? 0, tiers: plan.tiers ? toTiers(plan.tiers) : null }, quantity);
  }
  return priceLine(plan.pricingModel, exactPriceOf(plan), quantity);
}

/** The plan's prices as exact decimals of the minor unit (its unit price, or its tiers'). */
export function exactPriceOf(plan: PlanRow): ExactPriceInput {
  const unit = planUnitAmountDecimal(plan);
  return {
    unitAmountDecimal: unit === null ? null : minorDecimal(unit),
    tiers: plan.tiers?.map((t) => ({ upTo: t.up_to, unitAmountDecimal: minorDecimal(tierUnitAmountDecimal(t)), flatAmountDecimal: fromMinorUnits(t.flat_amount) })) ?? null,
  };
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
