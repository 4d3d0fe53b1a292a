/**
 * Exact decimal amounts in minor units, for sub-cent prices (`unit_amount_decimal`: "0.35" is
 * 0.35 cent in USD, 0.35 yen in JPY, 0.35 fils in KWD). Pure: no I/O, no floating point.
 *
 * A MinorDecimal is a BigInt scaled by 10^12 (Stripe's 12 decimal places), so parsing, multiplying
 * by an integer quantity and summing are exact, whatever the size. A scaled BigInt is all the
 * arithmetic billing needs (sums, products by integers, one division when a line is rounded); a
 * decimal library would add a dependency and its own rounding context without making anything
 * more exact.
 *
 * THE ROUNDING RULE, for every kind of line: round half away from zero (ties go to the larger
 * magnitude: 0.5 -> 1, 1.5 -> 2, 2.5 -> 3, -0.5 -> -1), applied ONCE per line, to the exact value
 * of the whole line (`roundHalfAwayFromZero`). This is what Stripe documents for decimal amounts
 * ("0.05 * 30 = 1.5, which is then rounded up to 2 cents"; rounding "occurs on the line item
 * level"). Credits are rounded as magnitudes and then negated, so a credit and the charge it
 * reverses round alike.
 */
import { MAX_AMOUNT } from "./money";

/** Decimal places a MinorDecimal keeps (Stripe's `unit_amount_decimal` allows 12). */
export const DECIMAL_PLACES = 12;

const SCALE = 10n ** BigInt(DECIMAL_PLACES);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MAX_AMOUNT_BIG = BigInt(MAX_AMOUNT);

/**
 * An exact, non-negative amount in minor units with up to 12 decimals: its value is
 * `scaled / 10^12`. Build one with `parseMinorDecimal`, `minorDecimal` or `fromMinorUnits`;
 * never by hand. Not JSON-serializable: store `formatMinorDecimal(d)` (a string) instead.
 */
export interface MinorDecimal {
  readonly scaled: bigint;
}

export type MinorDecimalError =
  | "not_a_string"
  | "empty"
  | "negative"
  | "exponent"
  | "format"
  | "too_many_decimals"
  | "too_large";

export type MinorDecimalParse =
  | { ok: true; value: MinorDecimal }
  | { ok: false; reason: MinorDecimalError; message: string };

const make = (scaled: bigint): MinorDecimal => Object.freeze({ scaled });

const PLAIN = /^([0-9]+)(?:\.([0-9]+))?$/;

/**
 * Parses `unit_amount_decimal` text: digits, optionally a point and more digits ("0.35", "105.5",
 * "5", "0.000000000001"). Refused, each with its own reason and a sentence naming `field`:
 * - not a string (`not_a_string`; a JSON number would already have passed through a float),
 * - empty (`empty`), a sign (`negative`), exponent notation such as "1e-3" (`exponent`),
 * - anything else that is not `digits[.digits]`: spaces, "+1", ".5", "5.", "1,5" (`format`),
 * - a non-zero digit after the 12th decimal (`too_many_decimals`; trailing zeros are fine),
 * - more than MAX_AMOUNT (99,999,999,999) minor units (`too_large`).
 */
export function parseMinorDecimal(input: unknown, field = "unit_amount_decimal"): MinorDecimalParse {
  const fail = (reason: MinorDecimalError, message: string): MinorDecimalParse => ({ ok: false, reason, message });
  const example = `such as "0.35" for 0.35 of the currency's minor unit`;
  if (typeof input !== "string") {
    return fail("not_a_string", `${field} must be a string of digits in minor units, ${example}.`);
  }
  if (input.length === 0) return fail("empty", `${field} must not be empty; give a decimal in minor units, ${example}.`);
  if (input.trimStart().startsWith("-")) return fail("negative", `${field} must not be negative.`);
  if (/^\s*[0-9.]+[eE][+-]?[0-9]+\s*$/.test(input)) {
    return fail("exponent", `${field} must be written out in plain digits, not in exponent notation such as "1e-3".`);
  }
  const m = PLAIN.exec(input);
  if (!m) return fail("format", `${field} must be digits with an optional decimal point, ${example}; "${truncate(input)}" is not.`);
  const intDigits = m[1].replace(/^0+/, "");
  const fracDigits = m[2] ?? "";
  if (/[^0]/.test(fracDigits.slice(DECIMAL_PLACES))) {
    return fail("too_many_decimals", `${field} may have at most ${DECIMAL_PLACES} decimals.`);
  }
  if (intDigits.length > String(MAX_AMOUNT).length || (intDigits !== "" && BigInt(intDigits) > MAX_AMOUNT_BIG)) {
    return fail("too_large", `${field} must be at most ${MAX_AMOUNT} minor units.`);
  }
  const kept = fracDigits.slice(0, DECIMAL_PLACES).padEnd(DECIMAL_PLACES, "0");
  const scaled = BigInt((intDigits || "0") + kept);
  if (scaled > MAX_AMOUNT_BIG * SCALE) return fail("too_large", `${field} must be at most ${MAX_AMOUNT} minor units.`);
  return { ok: true, value: make(scaled) };
}

function truncate(s: string): string {
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

/**
 * A MinorDecimal from decimal text or from a non-negative integer of minor units. For values the
 * code itself holds (stored plan prices); throws RangeError with parseMinorDecimal's message.
 */
export function minorDecimal(input: string | number): MinorDecimal {
  if (typeof input === "number") return fromMinorUnits(input);
  const parsed = parseMinorDecimal(input);
  if (!parsed.ok) throw new RangeError(parsed.message);
  return parsed.value;
}

/** An integer amount of minor units as a MinorDecimal. Throws RangeError unless a non-negative safe integer. */
export function fromMinorUnits(minor: number): MinorDecimal {
  if (typeof minor !== "number" || !Number.isSafeInteger(minor) || minor < 0) {
    throw new RangeError(`an amount in minor units must be a non-negative safe integer; got ${String(minor)}`);
  }
  return make(BigInt(minor) * SCALE);
}

/** Canonical text: no trailing zeros, no leading zeros ("0.35", "5", "105.5", "0"). parseMinorDecimal reads it back. */
export function formatMinorDecimal(d: MinorDecimal): string {
  const negative = d.scaled < 0n;
  const abs = negative ? -d.scaled : d.scaled;
  const int = abs / SCALE;
  const frac = (abs % SCALE).toString().padStart(DECIMAL_PLACES, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${int}${frac ? `.${frac}` : ""}`;
}

export function addMinorDecimals(a: MinorDecimal, b: MinorDecimal): MinorDecimal {
  return make(a.scaled + b.scaled);
}

export function sumMinorDecimals(values: readonly MinorDecimal[]): MinorDecimal {
  let total = 0n;
  for (const v of values) total += v.scaled;
  return make(total);
}

/** `d × quantity`, exact. Throws RangeError unless quantity is a non-negative safe integer. */
export function multiplyMinorDecimal(d: MinorDecimal, quantity: number | bigint): MinorDecimal {
  const q = typeof quantity === "bigint" ? quantity : toBigIntQuantity(quantity);
  if (q < 0n) throw new RangeError(`quantity must not be negative; got ${q}`);
  return make(d.scaled * q);
}

function toBigIntQuantity(quantity: number): bigint {
  if (typeof quantity !== "number" || !Number.isSafeInteger(quantity) || quantity < 0) {
    throw new RangeError(`quantity must be a non-negative safe integer; got ${String(quantity)}`);
  }
  return BigInt(quantity);
}

export function compareMinorDecimals(a: MinorDecimal, b: MinorDecimal): -1 | 0 | 1 {
  return a.scaled < b.scaled ? -1 : a.scaled > b.scaled ? 1 : 0;
}

export function minorDecimalsEqual(a: MinorDecimal, b: MinorDecimal): boolean {
  return a.scaled === b.scaled;
}

/** True when the value is a whole number of minor units (it then has an integer `unit_amount` too). */
export function isWholeMinor(d: MinorDecimal): boolean {
  return d.scaled % SCALE === 0n;
}

/**
 * numerator / denominator rounded half away from zero: THE rounding rule of every line.
 * Exact for any BigInt sizes. Throws RangeError for a zero denominator.
 */
export function roundHalfAwayFromZero(numerator: bigint, denominator: bigint): bigint {
  if (denominator === 0n) throw new RangeError("cannot divide by zero");
  const negative = numerator < 0n !== denominator < 0n;
  const n = numerator < 0n ? -numerator : numerator;
  const d = denominator < 0n ? -denominator : denominator;
  let q = n / d;
  if ((n % d) * 2n >= d) q += 1n;
  return negative ? -q : q;
}

/**
 * The integer minor units of a line whose exact value is `d`: rounded once, half away from zero
 * ("0.35" -> 0, "0.5" -> 1, "350" -> 350, "1.5" -> 2). Throws RangeError when the result is beyond
 * Number.MAX_SAFE_INTEGER (overflow).
 */
export function roundToMinor(d: MinorDecimal): number {
  return toSafeMinor(roundHalfAwayFromZero(d.scaled, SCALE));
}

/**
 * `d × numerator / denominator` rounded once to integer minor units (half away from zero): a
 * prorated line is the exact period price times a fraction of time, rounded at the end only.
 * numerator >= 0, denominator > 0 (RangeError otherwise, or when the result overflows).
 */
export function roundFractionToMinor(d: MinorDecimal, numerator: bigint | number, denominator: bigint | number): number {
  const n = BigInt(numerator);
  const den = BigInt(denominator);
  if (n < 0n) throw new RangeError(`the fraction's numerator must not be negative; got ${n}`);
  if (den <= 0n) throw new RangeError(`the fraction's denominator must be positive; got ${den}`);
  return toSafeMinor(roundHalfAwayFromZero(d.scaled * n, SCALE * den));
}

/** An integer of minor units as a number; RangeError when it is not a safe integer. */
export function toSafeMinor(amount: bigint): number {
  if (amount > MAX_SAFE || amount < -MAX_SAFE) {
    throw new RangeError(`amount ${amount} (minor units) overflows: it is beyond Number.MAX_SAFE_INTEGER`);
  }
  return Number(amount);
}
