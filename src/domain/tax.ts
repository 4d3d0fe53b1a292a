/**
 * Tax per invoice line: the pure maths of tax rates (src/billing/tax.ts is the I/O). No floats:
 * a percentage is parsed into an integer of ten-thousandths of a percent (`"19.5"` -> 195000,
 * 100% = 1,000,000), and a line's tax is one BigInt division, rounded once.
 *
 * THE RULE, for every line and every rate on it: the tax is computed on what the line costs after
 * its share of the discount (`net`, integer minor units, negative for a credit), and rounded to the
 * minor unit ONCE, half away from zero (src/domain/decimal.ts roundHalfAwayFromZero: 2.5 -> 3,
 * -2.5 -> -3, so a credit's tax is the mirror of the charge's).
 *
 * - exclusive rate p: tax = net × p / 100, added on top of the line (20% of 10.00 is 2.00; the
 *   total is 12.00).
 * - inclusive rates p1..pk (P their sum): the part of the price that is tax, each rate's
 *   tax = net × pi / (100 + P) (19% inclusive in 11.90 is 1.90: 11.90 = 10.00 + 1.90).
 * - An exclusive rate beside inclusive ones is taken on the price net of the inclusive tax, exactly:
 *   net × p / (100 + P), still one division.
 */
import { roundHalfAwayFromZero, toSafeMinor } from "./decimal";

/** 100% in the units a percentage is held in (ten-thousandths of a percent). */
export const HUNDRED_PERCENT = 1_000_000;
/** The most decimals a percentage may carry. */
export const PERCENTAGE_DECIMALS = 4;

/** What a line's tax needs of a rate: its id, its percentage (ten-thousandths of a percent) and whether it is inclusive. */
export interface TaxRateValue {
  id: string;
  /** Ten-thousandths of a percent: 20% = 200000, 8.875% = 88750. 0 to 1,000,000. */
  percentage: number;
  inclusive: boolean;
}

/** One rate's tax on a line or an invoice, as the API answers it. */
export interface TaxAmount {
  tax_rate: string;
  /** Integer minor units; negative on a credit. */
  amount: number;
  inclusive: boolean;
}

export type PercentageParse = { ok: true; value: number } | { ok: false; message: string };

/**
 * A percentage as the API takes it: a decimal string from 0 to 100 with at most 4 decimals
 * ("20", "19.5", "8.875", "0.0001"). Anything else (a number, an exponent, a sign, 5 decimals,
 * more than 100) is refused with a sentence naming the field.
 */
export function parsePercentage(input: unknown): PercentageParse {
  const wrong = { ok: false as const, message: 'percentage must be a decimal string from 0 to 100 with at most 4 decimals, such as "19.5".' };
  if (typeof input !== "string") return wrong;
  const match = /^(\d{1,3})(?:\.(\d+))?$/.exec(input);
  if (!match) return wrong;
  const decimals = match[2] ?? "";
  if (decimals.length > PERCENTAGE_DECIMALS) {
    return { ok: false, message: `percentage: ${input} has more than ${PERCENTAGE_DECIMALS} decimals; a rate is exact to 0.0001%.` };
  }
  const value = Number(match[1]) * 10 ** PERCENTAGE_DECIMALS + Number(decimals.padEnd(PERCENTAGE_DECIMALS, "0"));
  if (value > HUNDRED_PERCENT) return { ok: false, message: `percentage: ${input} is more than 100.` };
  return { ok: true, value };
}

/** A held percentage as the API shows it: the shortest decimal string ("20", "19.5", "8.875"). */
export function formatPercentage(value: number): string {
  const whole = Math.trunc(value / 10 ** PERCENTAGE_DECIMALS);
  const fraction = String(value % 10 ** PERCENTAGE_DECIMALS).padStart(PERCENTAGE_DECIMALS, "0").replace(/0+$/, "");
  return fraction === "" ? String(whole) : `${whole}.${fraction}`;
}

/**
 * The tax of one line costing `net` (integer minor units, after its discount; negative for a
 * credit) under `rates`, one amount per rate in the rates' order, each rounded once.
 */
export function lineTax(net: number, rates: readonly TaxRateValue[]): TaxAmount[] {
  if (!Number.isSafeInteger(net)) throw new RangeError(`a line's net amount must be an integer of minor units; got ${String(net)}`);
  const inclusiveSum = rates.reduce((sum, r) => sum + (r.inclusive ? r.percentage : 0), 0);
  const denominator = BigInt(HUNDRED_PERCENT + inclusiveSum);
  return rates.map((rate) => {
    if (!Number.isSafeInteger(rate.percentage) || rate.percentage < 0 || rate.percentage > HUNDRED_PERCENT) {
      throw new RangeError(`tax rate ${rate.id} has a percentage out of range: ${String(rate.percentage)}`);
    }
    return {
      tax_rate: rate.id,
      amount: toSafeMinor(roundHalfAwayFromZero(BigInt(net) * BigInt(rate.percentage), denominator)),
      inclusive: rate.inclusive,
    };
  });
}

/** The exclusive part of some tax amounts: what they add on top of the lines. */
export const exclusiveTax = (amounts: readonly TaxAmount[]): number => amounts.reduce((sum, a) => sum + (a.inclusive ? 0 : a.amount), 0);

/** The sum of some tax amounts, inclusive and exclusive (the invoice's `tax`). */
export const allTax = (amounts: readonly TaxAmount[]): number => amounts.reduce((sum, a) => sum + a.amount, 0);

/** Lines' tax amounts summed per rate, in the order each rate first appears (the invoice's total_tax_amounts). */
export function totalTaxAmounts(lines: readonly (readonly TaxAmount[])[]): TaxAmount[] {
  const byRate = new Map<string, TaxAmount>();
  for (const amounts of lines) {
    for (const a of amounts) {
      const seen = byRate.get(a.tax_rate);
      if (seen) seen.amount += a.amount;
      else byRate.set(a.tax_rate, { ...a });
    }
  }
  return [...byRate.values()];
}
