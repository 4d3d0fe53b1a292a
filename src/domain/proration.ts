/**
 * Proration of plan and quantity changes within a billing period. Pure: no I/O, no clock.
 *
 * The state a subscription keeps is its OpenCharge: what it was charged (integer minor units, net
 * of a percentage discount; an amount_off one is not prorated) for the rest of its current period,
 * from which time, at which period price. A change at time t:
 *  - credits the unused part of THAT charge: amount × (periodEnd − t) / (periodEnd − coversFrom),
 *    so a second change in the same period credits the previous proration's charge, never the
 *    original price again (what Stripe's "flexible" billing mode does: credits are based on the
 *    amount previously debited);
 *  - charges the new period price for the remaining time: price × (periodEnd − t) / (periodEnd −
 *    periodStart), times (1 − percent off) when a percentage coupon applies to the period;
 *  - and opens the new OpenCharge (that charge, from t).
 * Time fractions count whole seconds. Each line is rounded once, half away from zero (a credit as
 * a magnitude, then negated), so over any sequence of changes the full-period charge plus the
 * credits and charges is within half a minor unit per line of the time-weighted price, and no
 * credit ever exceeds the charge it reverses.
 *
 * Prorations are for licensed (in-advance) prices; a trialing or metered subscription has nothing
 * to prorate (its OpenCharge amount is 0, or it keeps none).
 */
import {
  formatMinorDecimal,
  minorDecimal,
  minorDecimalsEqual,
  roundFractionToMinor,
  roundToMinor,
  type MinorDecimal,
} from "./decimal";
import { addIntervals, type BillingInterval } from "./billing-calendar";
import { toEpochMs, SECOND_MS, type Instant } from "./instants";
import { normalizeCurrency } from "./money";
import { BASIS_POINTS_PER_WHOLE } from "./discounts";

/** How a change of price within a period is billed (PUT /subscriptions/{id} proration_behavior). */
export const PRORATION_BEHAVIORS = ["create_prorations", "always_invoice", "none"] as const;
export type ProrationBehavior = (typeof PRORATION_BEHAVIORS)[number];

/** What a subscription was charged for the rest of its current period. JSON-safe: store it as is. */
export interface OpenCharge {
  /** Lowercase ISO 4217 code. */
  currency: string;
  /** Integer minor units charged for [coversFrom, periodEnd), net of a percentage discount on it (an amount_off discount is not prorated). */
  amount: number;
  /** Epoch ms the charge covers from: the period's start, or the time of the last change. */
  coversFrom: number;
  /** Epoch ms of the current period's start and end, [periodStart, periodEnd). */
  periodStart: number;
  periodEnd: number;
  /** The exact price of one full period in effect since coversFrom (canonical decimal text of minor units). */
  periodPrice: string;
}

/** One proration line: the credit for unused time (negative) or the charge for remaining time. */
export interface ProrationLine {
  kind: "unused_time" | "remaining_time";
  /** Integer minor units: negative for the credit, positive for the charge. */
  amount: number;
  proration: true;
  /** The time it covers, epoch ms: [changeAt, periodEnd). */
  periodStart: number;
  periodEnd: number;
}

export interface ProrationResult {
  /**
   * [the credit for the unused time of the open charge, the charge for the remaining time at the
   * new price], or [] when the change is no change. Lines whose amount rounds to 0 are kept, so
   * every rounding is visible as a line (drop them from display if you like; never from the proof).
   */
  lines: [] | [ProrationLine, ProrationLine];
  /** The OpenCharge to keep from now on. */
  next: OpenCharge;
}

/**
 * A price of one full period: an exact MinorDecimal (see pricing.priceExact for a plan at a
 * quantity), a non-negative integer of minor units, or decimal text of minor units ("0.35").
 */
export type PeriodPrice = MinorDecimal | number | string;

export interface PeriodPriceInput {
  currency: string;
  /** The price of one full period at the new plan and quantity. */
  periodPrice: PeriodPrice;
}

function exactPrice(price: PeriodPrice): MinorDecimal {
  if (typeof price === "number" || typeof price === "string") return minorDecimal(price);
  if (price === null || typeof price !== "object" || typeof price.scaled !== "bigint" || price.scaled < 0n) {
    throw new RangeError("a period price must be a non-negative MinorDecimal, integer of minor units or decimal text");
  }
  return price;
}

function currencyOf(code: string, name: string): string {
  const c = normalizeCurrency(code);
  if (c === undefined) throw new RangeError(`${name} is not a known currency: ${JSON.stringify(code)}`);
  return c;
}

function seconds(ms: number): bigint {
  return BigInt(Math.floor(ms / SECOND_MS));
}

function assertBasisPoints(bp: number): void {
  if (!Number.isSafeInteger(bp) || bp < 0 || bp > BASIS_POINTS_PER_WHOLE) {
    throw new RangeError(`percentOffBasisPoints must be an integer from 0 to ${BASIS_POINTS_PER_WHOLE}; got ${String(bp)}`);
  }
}

function assertOpenCharge(s: OpenCharge): void {
  if (s === null || typeof s !== "object") throw new RangeError("the open charge must be an object");
  for (const k of ["amount", "coversFrom", "periodStart", "periodEnd"] as const) {
    if (!Number.isSafeInteger(s[k])) throw new RangeError(`the open charge's ${k} must be a safe integer; got ${String(s[k])}`);
  }
  if (s.amount < 0) throw new RangeError(`the open charge's amount must not be negative; got ${s.amount}`);
  if (!(seconds(s.periodStart) < seconds(s.periodEnd))) {
    throw new RangeError("the open charge's period must end at least a second after it starts");
  }
  if (s.coversFrom < s.periodStart || s.coversFrom > s.periodEnd) {
    throw new RangeError("the open charge's coversFrom must lie within its period");
  }
}

/**
 * The full-period line at the start of a period: the exact period price rounded once. Returns the
 * line amount; after the invoice's discount is known, keep `openCharge(...)` with the net amount.
 */
export function periodLineAmount(periodPrice: PeriodPrice): number {
  return roundToMinor(exactPrice(periodPrice));
}

/**
 * The OpenCharge of a period just invoiced: `amountCharged` is what the period's line actually
 * cost the customer (its amount less the share of the invoice discount allocated to it, see
 * invoice-math.allocateDiscount); it defaults to the undiscounted line amount.
 */
export function openCharge(input: {
  currency: string;
  periodStart: Instant;
  periodEnd: Instant;
  periodPrice: PeriodPrice;
  amountCharged?: number;
}): OpenCharge {
  const periodStart = toEpochMs(input.periodStart, "periodStart");
  const periodEnd = toEpochMs(input.periodEnd, "periodEnd");
  if (!(seconds(periodStart) < seconds(periodEnd))) throw new RangeError("periodEnd must be at least a second after periodStart");
  const amount = input.amountCharged ?? periodLineAmount(input.periodPrice);
  const state: OpenCharge = {
    currency: currencyOf(input.currency, "currency"),
    amount,
    coversFrom: periodStart,
    periodStart,
    periodEnd,
    periodPrice: formatMinorDecimal(exactPrice(input.periodPrice)),
  };
  assertOpenCharge(state);
  return state;
}

/**
 * Prorates a change of plan and/or quantity at `changeAt` within the open charge's period (same
 * interval; see restartCycle otherwise). `percentOffBasisPoints` is the percentage coupon that
 * applies to the current period (0 by default): it is folded into the charge line's single
 * rounding, and such a line is not discounted again on its invoice.
 *
 * A change to the same period price is no change: no lines, and the open charge is kept.
 * Throws RangeError when the currencies differ, or when changeAt is outside
 * [coversFrom, periodEnd] (changes must come in time order).
 */
export function prorateChange(
  current: OpenCharge,
  change: PeriodPriceInput & { changeAt: Instant; percentOffBasisPoints?: number },
): ProrationResult {
  assertOpenCharge(current);
  const currency = currencyOf(change.currency, "the new price's currency");
  if (currency !== current.currency) {
    throw new RangeError(`currency mismatch: the subscription is charged in ${current.currency}, the new price is in ${currency}`);
  }
  const bp = change.percentOffBasisPoints ?? 0;
  assertBasisPoints(bp);
  const changeAt = toEpochMs(change.changeAt, "changeAt");
  if (changeAt < current.coversFrom) {
    throw new RangeError(`changeAt (${new Date(changeAt).toISOString()}) is before the last change or the period's start (${new Date(current.coversFrom).toISOString()})`);
  }
  if (changeAt > current.periodEnd) {
    throw new RangeError(`changeAt (${new Date(changeAt).toISOString()}) is after the period's end (${new Date(current.periodEnd).toISOString()})`);
  }
  const newPrice = exactPrice(change.periodPrice);
  if (minorDecimalsEqual(minorDecimal(current.periodPrice), newPrice)) {
    return { lines: [], next: current };
  }

  const end = seconds(current.periodEnd);
  const at = seconds(changeAt);
  const remaining = end - at;
  const creditAmount = unusedAmount(current, changeAt);
  const whole = BigInt(BASIS_POINTS_PER_WHOLE);
  const chargeAmount = roundFractionToMinor(
    newPrice,
    remaining * (whole - BigInt(bp)),
    (end - seconds(current.periodStart)) * whole,
  );
  return {
    lines: [
      line("unused_time", -creditAmount, changeAt, current.periodEnd),
      line("remaining_time", chargeAmount, changeAt, current.periodEnd),
    ],
    next: {
      currency,
      amount: chargeAmount,
      coversFrom: changeAt,
      periodStart: current.periodStart,
      periodEnd: current.periodEnd,
      periodPrice: formatMinorDecimal(newPrice),
    },
  };
}

/**
 * The first change of a period, in one call: the period [periodStart, periodEnd) was charged
 * `oldPeriodPrice` in full (or `amountCharged`, net of its discount), and changes to
 * `newPeriodPrice` at `changeAt`. Same as prorateChange(openCharge(...), ...); keep `next` for
 * any later change in the period.
 */
export function prorate(input: {
  currency: string;
  periodStart: Instant;
  periodEnd: Instant;
  changeAt: Instant;
  oldPeriodPrice: PeriodPrice;
  newPeriodPrice: PeriodPrice;
  amountCharged?: number;
  percentOffBasisPoints?: number;
}): ProrationResult {
  const current = openCharge({
    currency: input.currency,
    periodStart: input.periodStart,
    periodEnd: input.periodEnd,
    periodPrice: input.oldPeriodPrice,
    amountCharged: input.amountCharged,
  });
  return prorateChange(current, {
    currency: input.currency,
    periodPrice: input.newPeriodPrice,
    changeAt: input.changeAt,
    percentOffBasisPoints: input.percentOffBasisPoints,
  });
}

/**
 * The unused part of the open charge at `at`: amount × (periodEnd − at) / (periodEnd − coversFrom)
 * in whole seconds, rounded once, half away from zero. Never more than the amount. (When the open
 * charge covers less than a second, all of it is unused.)
 */
export function unusedAmount(current: OpenCharge, at: Instant): number {
  assertOpenCharge(current);
  const atMs = toEpochMs(at, "at");
  if (atMs < current.coversFrom || atMs > current.periodEnd) {
    throw new RangeError("the time must lie within what the open charge covers");
  }
  const end = seconds(current.periodEnd);
  const covered = end - seconds(current.coversFrom);
  if (covered === 0n) return current.amount;
  return roundFractionToMinor(minorDecimal(current.amount), end - seconds(atMs), covered);
}

/**
 * A change of interval (or anything else that restarts the cycle) at `changeAt`: credits the
 * unused part of the open charge and starts a new period [changeAt, changeAt + 1 interval),
 * anchored at changeAt, charged in full at the new price. The full-period line is an ordinary
 * (discountable, non-proration) line; once its invoice is known, keep
 * `openCharge({ ..., periodStart: newPeriod.start, periodEnd: newPeriod.end, amountCharged })`.
 */
export function restartCycle(
  current: OpenCharge,
  change: PeriodPriceInput & { changeAt: Instant; interval: BillingInterval },
): { credit: ProrationLine; newPeriod: { start: number; end: number }; periodAmount: number; billingAnchor: number } {
  assertOpenCharge(current);
  const currency = currencyOf(change.currency, "the new price's currency");
  if (currency !== current.currency) {
    throw new RangeError(`currency mismatch: the subscription is charged in ${current.currency}, the new price is in ${currency}`);
  }
  const changeAt = toEpochMs(change.changeAt, "changeAt");
  const credited = unusedAmount(current, changeAt);
  const end = addIntervals(new Date(changeAt), change.interval, 1).getTime();
  return {
    credit: line("unused_time", -credited, changeAt, current.periodEnd),
    newPeriod: { start: changeAt, end },
    periodAmount: periodLineAmount(change.periodPrice),
    billingAnchor: changeAt,
  };
}

function line(kind: ProrationLine["kind"], amount: number, periodStart: number, periodEnd: number): ProrationLine {
  // -0 would print as 0 but fail Object.is checks downstream.
  return { kind, amount: amount === 0 ? 0 : amount, proration: true, periodStart, periodEnd };
}
