/**
 * Tiered pricing with Stripe semantics. Pure: no I/O, no clock, no randomness.
 *
 * All amounts are integers in minor units (e.g. cents). Arithmetic that could
 * exceed Number.MAX_SAFE_INTEGER is done in BigInt and checked before being
 * converted back, so a result is either exact or a RangeError is thrown.
 *
 * The exact variants at the end (`priceExact`, `priceLine`) take decimal unit
 * and flat amounts (`unit_amount_decimal`, sub-cent prices) and give the line's
 * exact value, which is rounded once per line (see ./decimal.ts).
 */
import {
  fromMinorUnits,
  multiplyMinorDecimal,
  roundToMinor,
  sumMinorDecimals,
  type MinorDecimal,
} from "./decimal";

export interface Tier {
  /** Inclusive last quantity of this tier; null = infinity (only the last tier). */
  upTo: number | null;
  /** Price per unit in minor units (non-negative safe integer). */
  unitAmount: number;
  /** Flat fee for the tier in minor units (non-negative safe integer). */
  flatAmount: number;
}

export type PricingModel = "fixed" | "volume" | "graduated";

/** Upper bound on the number of tiers of one price. */
export const MAX_TIERS = 25;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function isNonNegativeSafeInteger(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/** Returns null when `tiers` is a valid tier list, otherwise a human-readable reason. */
export function validateTiers(tiers: Tier[]): string | null {
  return validateTierList(tiers, (t, i) => {
    if (!isNonNegativeSafeInteger(t.unitAmount)) {
      return `tiers[${i}].unitAmount must be a non-negative integer in minor units`;
    }
    if (!isNonNegativeSafeInteger(t.flatAmount)) {
      return `tiers[${i}].flatAmount must be a non-negative integer in minor units`;
    }
    return null;
  });
}

/** The checks every tier list shares (length, objects, ascending bounds, unbounded last); `amounts` checks one tier's prices. */
function validateTierList<T extends { upTo: number | null }>(
  tiers: T[],
  amounts: (tier: T, index: number) => string | null,
): string | null {
  if (!Array.isArray(tiers)) return "tiers must be an array";
  if (tiers.length === 0) return "at least 1 tier is required";
  if (tiers.length > MAX_TIERS) return `at most ${MAX_TIERS} tiers are allowed (got ${tiers.length})`;
  let previousUpTo = 0;
  for (let i = 0; i < tiers.length; i++) {
    const t = tiers[i];
    const isLast = i === tiers.length - 1;
    if (t === null || typeof t !== "object") return `tiers[${i}] must be an object`;
    const amountProblem = amounts(t, i);
    if (amountProblem !== null) return amountProblem;
    if (t.upTo === null) {
      if (!isLast) return `tiers[${i}].upTo is null but only the last tier may be unbounded`;
      continue;
    }
    if (isLast) return `the last tier's upTo must be null (unbounded); got ${String(t.upTo)}`;
    if (typeof t.upTo !== "number" || !Number.isSafeInteger(t.upTo) || t.upTo < 1) {
      return `tiers[${i}].upTo must be a positive integer or null`;
    }
    if (t.upTo <= previousUpTo) {
      return `tiers[${i}].upTo (${t.upTo}) must be greater than the previous tier's upTo (${previousUpTo})`;
    }
    previousUpTo = t.upTo;
  }
  return null;
}

function assertQuantity(quantity: number): void {
  if (typeof quantity !== "number" || !Number.isSafeInteger(quantity) || quantity < 1) {
    throw new RangeError(`quantity must be a positive safe integer; got ${String(quantity)}`);
  }
}

function assertTiers(tiers: Tier[]): void {
  const problem = validateTiers(tiers);
  if (problem !== null) throw new RangeError(`invalid tiers: ${problem}`);
}

function toSafeNumber(amount: bigint): number {
  if (amount > MAX_SAFE) {
    throw new RangeError(`amount ${amount} exceeds Number.MAX_SAFE_INTEGER`);
  }
  return Number(amount);
}

/**
 * Volume pricing: every unit is charged at the rate of the tier the total
 * quantity falls in, plus that tier's flat amount.
 */
export function priceVolume(tiers: Tier[], quantity: number): number {
  assertTiers(tiers);
  assertQuantity(quantity);
  // validateTiers guarantees the last tier is unbounded, so a tier is always found.
  const tier = tiers.find((t) => t.upTo === null || quantity <= t.upTo)!;
  return toSafeNumber(BigInt(tier.unitAmount) * BigInt(quantity) + BigInt(tier.flatAmount));
}

/**
 * Graduated pricing: the units inside each tier are charged at that tier's
 * rate, plus the flat amount of every tier that has at least one unit.
 */
export function priceGraduated(tiers: Tier[], quantity: number): number {
  assertTiers(tiers);
  assertQuantity(quantity);
  let total = 0n;
  let previousUpTo = 0;
  for (const tier of tiers) {
    const last = tier.upTo === null ? quantity : Math.min(quantity, tier.upTo);
    const units = last - previousUpTo; // >= 1: we stop as soon as the quantity is covered
    total += BigInt(tier.unitAmount) * BigInt(units) + BigInt(tier.flatAmount);
    if (tier.upTo === null || quantity <= tier.upTo) break;
    previousUpTo = tier.upTo;
  }
  return toSafeNumber(total);
}

/**
 * Price for `quantity` units under `model`. "fixed" charges unitAmount per unit
 * (tiers ignored); "volume" and "graduated" require a valid tier list.
 */
export function priceFor(
  model: PricingModel,
  input: { unitAmount: number; tiers: Tier[] | null },
  quantity: number,
): number {
  switch (model) {
    case "fixed": {
      assertQuantity(quantity);
      if (!isNonNegativeSafeInteger(input.unitAmount)) {
        throw new RangeError("unitAmount must be a non-negative integer in minor units");
      }
      return toSafeNumber(BigInt(input.unitAmount) * BigInt(quantity));
    }
    case "volume":
    case "graduated": {
      if (input.tiers === null) throw new RangeError(`pricing model "${model}" requires tiers`);
      return model === "volume" ? priceVolume(input.tiers, quantity) : priceGraduated(input.tiers, quantity);
    }
    default: {
      const never: never = model;
      throw new RangeError(`unknown pricing model: ${String(never)}`);
    }
  }
}

// ---- Exact pricing: decimal unit and flat amounts, one rounding per line ----

/** A tier whose amounts are exact decimals of minor units (Stripe's `unit_amount_decimal` / `flat_amount_decimal`). */
export interface DecimalTier {
  /** Inclusive last quantity of this tier; null = infinity (only the last tier). */
  upTo: number | null;
  /** Price per unit, in minor units with up to 12 decimals. */
  unitAmountDecimal: MinorDecimal;
  /** Flat fee for the tier, in minor units with up to 12 decimals (an integer is fine). */
  flatAmountDecimal: MinorDecimal;
}

/** What priceExact needs: the unit price for "fixed", the tiers for "volume" and "graduated". */
export interface ExactPriceInput {
  unitAmountDecimal: MinorDecimal | null;
  tiers: DecimalTier[] | null;
}

function isMinorDecimalValue(v: unknown): v is MinorDecimal {
  return typeof v === "object" && v !== null && typeof (v as MinorDecimal).scaled === "bigint" && (v as MinorDecimal).scaled >= 0n;
}

/** An integer tier as a decimal tier (same values). */
export function decimalTier(tier: Tier): DecimalTier {
  return {
    upTo: tier.upTo,
    unitAmountDecimal: fromMinorUnits(tier.unitAmount),
    flatAmountDecimal: fromMinorUnits(tier.flatAmount),
  };
}

/** Returns null when `tiers` is a valid decimal tier list, otherwise a human-readable reason (same rules as validateTiers). */
export function validateDecimalTiers(tiers: DecimalTier[]): string | null {
  return validateTierList(tiers, (t, i) => {
    if (!isMinorDecimalValue(t.unitAmountDecimal)) return `tiers[${i}].unitAmountDecimal must be a non-negative decimal of minor units`;
    if (!isMinorDecimalValue(t.flatAmountDecimal)) return `tiers[${i}].flatAmountDecimal must be a non-negative decimal of minor units`;
    return null;
  });
}

function assertUsageQuantity(quantity: number): void {
  if (typeof quantity !== "number" || !Number.isSafeInteger(quantity) || quantity < 0) {
    throw new RangeError(`quantity must be a non-negative safe integer; got ${String(quantity)}`);
  }
}

function assertDecimalTiers(tiers: DecimalTier[]): void {
  const problem = validateDecimalTiers(tiers);
  if (problem !== null) throw new RangeError(`invalid tiers: ${problem}`);
}

/**
 * Volume pricing, exact: every unit at the unit amount of the tier the quantity falls in, plus
 * that tier's flat amount. Quantity 0 reaches no tier and costs 0.
 */
export function priceVolumeExact(tiers: DecimalTier[], quantity: number): MinorDecimal {
  assertDecimalTiers(tiers);
  assertUsageQuantity(quantity);
  if (quantity === 0) return fromMinorUnits(0);
  const tier = tiers.find((t) => t.upTo === null || quantity <= t.upTo)!;
  return sumMinorDecimals([multiplyMinorDecimal(tier.unitAmountDecimal, quantity), tier.flatAmountDecimal]);
}

/**
 * Graduated pricing, exact: each tier's units at that tier's unit amount, plus the flat amount of
 * every tier that has at least one unit. Quantity 0 costs 0.
 */
export function priceGraduatedExact(tiers: DecimalTier[], quantity: number): MinorDecimal {
  assertDecimalTiers(tiers);
  assertUsageQuantity(quantity);
  const parts: MinorDecimal[] = [];
  let previousUpTo = 0;
  for (const tier of tiers) {
    if (quantity <= previousUpTo) break;
    const last = tier.upTo === null ? quantity : Math.min(quantity, tier.upTo);
    parts.push(multiplyMinorDecimal(tier.unitAmountDecimal, last - previousUpTo), tier.flatAmountDecimal);
    if (tier.upTo === null) break;
    previousUpTo = tier.upTo;
  }
  return sumMinorDecimals(parts);
}

/**
 * The exact (unrounded) price of `quantity` units under `model`, in minor units: "fixed" is
 * unitAmountDecimal × quantity; "volume" and "graduated" price through the tiers. Quantity 0 (a
 * metered period without usage) costs 0 under every model. Throws RangeError on invalid input.
 */
export function priceExact(model: PricingModel, input: ExactPriceInput, quantity: number): MinorDecimal {
  switch (model) {
    case "fixed": {
      assertUsageQuantity(quantity);
      if (!isMinorDecimalValue(input.unitAmountDecimal)) {
        throw new RangeError('pricing model "fixed" requires a non-negative unitAmountDecimal');
      }
      return multiplyMinorDecimal(input.unitAmountDecimal, quantity);
    }
    case "volume":
    case "graduated": {
      if (input.tiers === null) throw new RangeError(`pricing model "${model}" requires tiers`);
      return model === "volume" ? priceVolumeExact(input.tiers, quantity) : priceGraduatedExact(input.tiers, quantity);
    }
    default: {
      const never: never = model;
      throw new RangeError(`unknown pricing model: ${String(never)}`);
    }
  }
}

/**
 * The integer amount of a line of `quantity` units: priceExact rounded ONCE, half away from zero
 * (1,000 units at "0.35" = 350; 1 unit at "0.35" = 0; tier amounts are summed exactly first).
 * Throws RangeError on invalid input or when the amount overflows a safe integer.
 */
export function priceLine(model: PricingModel, input: ExactPriceInput, quantity: number): number {
  return roundToMinor(priceExact(model, input, quantity));
}
