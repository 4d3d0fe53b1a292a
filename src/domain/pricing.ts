/**
 * Tiered pricing with Stripe semantics. Pure: no I/O, no clock, no randomness.
 *
 * All amounts are integers in minor units (e.g. cents). Arithmetic that could
 * exceed Number.MAX_SAFE_INTEGER is done in BigInt and checked before being
 * converted back, so a result is either exact or a RangeError is thrown.
 */

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
  if (!Array.isArray(tiers)) return "tiers must be an array";
  if (tiers.length === 0) return "at least 1 tier is required";
  if (tiers.length > MAX_TIERS) return `at most ${MAX_TIERS} tiers are allowed (got ${tiers.length})`;
  let previousUpTo = 0;
  for (let i = 0; i < tiers.length; i++) {
    const t = tiers[i];
    const isLast = i === tiers.length - 1;
    if (t === null || typeof t !== "object") return `tiers[${i}] must be an object`;
    if (!isNonNegativeSafeInteger(t.unitAmount)) {
      return `tiers[${i}].unitAmount must be a non-negative integer in minor units`;
    }
    if (!isNonNegativeSafeInteger(t.flatAmount)) {
      return `tiers[${i}].flatAmount must be a non-negative integer in minor units`;
    }
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
