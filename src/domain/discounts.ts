/**
 * Coupons: their values (percent_off, amount_off + currency), their durations (once, repeating
 * for N months, forever), the discount on an invoice, and whether a discount applies to an
 * invoice. Pure: no I/O, no clock, no floating-point arithmetic on money.
 *
 * A percentage is held as an integer of basis points (hundredths of a percent: 12.5% = 1250), so
 * the discount is `round(base × basisPoints / 10,000)`, rounded once, half away from zero (the
 * rule of every line, ./decimal.ts), and never more than its base.
 */
import { addIntervals } from "./billing-calendar";
import { roundHalfAwayFromZero, toSafeMinor } from "./decimal";
import { toEpochMs, type Instant } from "./instants";
import { MAX_AMOUNT, normalizeCurrency } from "./money";

/** 100% in basis points. */
export const BASIS_POINTS_PER_WHOLE = 10_000;

/** The longest `repeating` duration accepted, in months (100 years). */
export const MAX_DURATION_IN_MONTHS = 1200;

export type CouponValue =
  | { type: "percent_off"; /** 1..10,000 (0.01% .. 100%) */ basisPoints: number }
  | { type: "amount_off"; /** integer minor units of `currency`, 1..MAX_AMOUNT */ amountOff: number; currency: string };

export type CouponDuration =
  | { duration: "once" }
  | { duration: "forever" }
  | { duration: "repeating"; durationInMonths: number };

export type Refusal<R extends string> = { ok: false; reason: R; message: string };

/**
 * Reads `percent_off`: a number or decimal text greater than 0 and at most 100, with at most two
 * decimals (12.5, "12.5", 33.33, 100). A JSON number is read from its shortest decimal text
 * (12.5 -> "12.5"), so no float arithmetic touches it; 33.333 or 1e-7 are refused.
 */
export function parsePercentOff(
  input: unknown,
): { ok: true; basisPoints: number } | Refusal<"not_a_number" | "format" | "too_many_decimals" | "out_of_range"> {
  const refuse = (reason: "not_a_number" | "format" | "too_many_decimals" | "out_of_range", message: string) =>
    ({ ok: false, reason, message }) as const;
  let text: string;
  if (typeof input === "number") {
    if (!Number.isFinite(input)) return refuse("not_a_number", "percent_off must be a number greater than 0 and at most 100, such as 12.5.");
    text = String(input);
  } else if (typeof input === "string") {
    text = input;
  } else {
    return refuse("not_a_number", "percent_off must be a number greater than 0 and at most 100, such as 12.5.");
  }
  if (text.startsWith("-")) return refuse("out_of_range", "percent_off must be greater than 0 and at most 100.");
  const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(text);
  if (!m) return refuse("format", `percent_off must be a plain decimal such as 12.5; "${text.slice(0, 40)}" is not.`);
  const frac = m[2] ?? "";
  if (/[^0]/.test(frac.slice(2))) return refuse("too_many_decimals", "percent_off may have at most 2 decimals, such as 12.75.");
  const intPart = m[1].replace(/^0+/, "");
  if (intPart.length > 3) return refuse("out_of_range", "percent_off must be greater than 0 and at most 100.");
  const basisPoints = Number(intPart || "0") * 100 + Number(frac.slice(0, 2).padEnd(2, "0"));
  if (basisPoints < 1 || basisPoints > BASIS_POINTS_PER_WHOLE) {
    return refuse("out_of_range", "percent_off must be greater than 0 and at most 100.");
  }
  return { ok: true, basisPoints };
}

/** `percent_off` text for an answer: 1250 -> 12.5, 10000 -> 100 (a JSON number with at most 2 decimals). */
export function percentOffFromBasisPoints(basisPoints: number): number {
  return basisPoints / 100;
}

/** Checks `amount_off` (integer minor units, 1..MAX_AMOUNT) and its `currency` (required with it). */
export function parseAmountOff(
  amountOff: unknown,
  currency: unknown,
): { ok: true; value: Extract<CouponValue, { type: "amount_off" }> } | Refusal<"amount_invalid" | "currency_required" | "currency_invalid"> {
  if (typeof amountOff !== "number" || !Number.isSafeInteger(amountOff) || amountOff < 1 || amountOff > MAX_AMOUNT) {
    return { ok: false, reason: "amount_invalid", message: `amount_off must be a whole number of minor units from 1 to ${MAX_AMOUNT}.` };
  }
  if (currency === undefined || currency === null) {
    return { ok: false, reason: "currency_required", message: "currency is required with amount_off." };
  }
  const c = typeof currency === "string" ? normalizeCurrency(currency) : undefined;
  if (c === undefined) {
    return { ok: false, reason: "currency_invalid", message: "currency must be a three-letter ISO 4217 code, such as usd." };
  }
  return { ok: true, value: { type: "amount_off", amountOff, currency: c } };
}

/** Checks `duration` and `duration_in_months` (required with, and only with, repeating: 1..1200). */
export function parseCouponDuration(
  duration: unknown,
  durationInMonths: unknown,
): { ok: true; value: CouponDuration } | Refusal<"duration_invalid" | "months_required" | "months_invalid" | "months_not_allowed"> {
  if (duration === "once" || duration === "forever") {
    if (durationInMonths !== undefined && durationInMonths !== null) {
      return { ok: false, reason: "months_not_allowed", message: `duration_in_months is only for duration repeating, not ${duration}.` };
    }
    return { ok: true, value: { duration } };
  }
  if (duration !== "repeating") {
    return { ok: false, reason: "duration_invalid", message: "duration must be once, repeating or forever." };
  }
  if (durationInMonths === undefined || durationInMonths === null) {
    return { ok: false, reason: "months_required", message: "duration_in_months is required with duration repeating." };
  }
  if (typeof durationInMonths !== "number" || !Number.isSafeInteger(durationInMonths) || durationInMonths < 1 || durationInMonths > MAX_DURATION_IN_MONTHS) {
    return { ok: false, reason: "months_invalid", message: `duration_in_months must be a whole number from 1 to ${MAX_DURATION_IN_MONTHS}.` };
  }
  return { ok: true, value: { duration: "repeating", durationInMonths } };
}

/**
 * The discount a coupon gives on `base` (the invoice's discountable subtotal, integer minor units
 * of `currency`). A base of zero or less gets nothing. percent_off: base × basisPoints / 10,000,
 * rounded once, half away from zero; amount_off: the amount, at most the base. The result is
 * always between 0 and max(0, base).
 * Throws RangeError when an amount_off coupon's currency is not the invoice's (mismatched currencies).
 */
export function discountAmount(value: CouponValue, base: number, currency: string): number {
  if (!Number.isSafeInteger(base)) throw new RangeError(`the discount's base must be a safe integer; got ${String(base)}`);
  const c = normalizeCurrency(currency);
  if (c === undefined) throw new RangeError(`unknown currency: ${JSON.stringify(currency)}`);
  if (value.type === "amount_off") {
    if (value.currency !== c) {
      throw new RangeError(`currency mismatch: the coupon takes ${value.amountOff} off in ${value.currency}, the invoice is in ${c}`);
    }
    return base <= 0 ? 0 : Math.min(value.amountOff, base);
  }
  if (!Number.isSafeInteger(value.basisPoints) || value.basisPoints < 1 || value.basisPoints > BASIS_POINTS_PER_WHOLE) {
    throw new RangeError(`percent_off must be 1..${BASIS_POINTS_PER_WHOLE} basis points; got ${String(value.basisPoints)}`);
  }
  if (base <= 0) return 0;
  return toSafeMinor(roundHalfAwayFromZero(BigInt(base) * BigInt(value.basisPoints), BigInt(BASIS_POINTS_PER_WHOLE)));
}

/**
 * When a discount stops applying, epoch ms: for `repeating`, its start plus N months on the
 * billing calendar (anchored: a Jan 31 start with 1 month ends Feb 28/29); null for once and forever.
 */
export function discountEnd(duration: CouponDuration, start: Instant): number | null {
  const startMs = toEpochMs(start, "the discount's start");
  if (duration.duration !== "repeating") return null;
  return addIntervals(new Date(startMs), "month", duration.durationInMonths).getTime();
}

/**
 * Whether a discount applies to an invoice dated `invoiceDate` (a renewal's period start, a
 * proration invoiced at once at the change, a metered period: its start, as every period invoice is dated):
 * - never before the discount's start;
 * - once: only to the first invoice on or after its start (`invoicesAlreadyDiscounted` = 0);
 * - repeating N months: to every invoice dated before start + N months (so a monthly plan with
 *   a 2-month coupon from its first invoice gets exactly two discounted invoices);
 * - forever: always.
 */
export function discountAppliesToInvoice(input: {
  duration: CouponDuration;
  discountStart: Instant;
  invoiceDate: Instant;
  /** How many invoices this discount has already been applied to. */
  invoicesAlreadyDiscounted: number;
}): boolean {
  const start = toEpochMs(input.discountStart, "discountStart");
  const at = toEpochMs(input.invoiceDate, "invoiceDate");
  const used = input.invoicesAlreadyDiscounted;
  if (!Number.isSafeInteger(used) || used < 0) {
    throw new RangeError(`invoicesAlreadyDiscounted must be a non-negative integer; got ${String(used)}`);
  }
  if (at < start) return false;
  switch (input.duration.duration) {
    case "once":
      return used === 0;
    case "forever":
      return true;
    case "repeating":
      return at < discountEnd(input.duration, start)!;
    default: {
      const never: never = input.duration;
      throw new RangeError(`unknown coupon duration: ${JSON.stringify(never)}`);
    }
  }
}
