/**
 * An invoice's totals from its lines: subtotal, discount, total, and what is due after the
 * customer's carried credit balance. Pure: no I/O; integer minor units only.
 *
 * - subtotal = the sum of the lines; total = subtotal − discount + exclusive tax, always.
 * - Each line's tax (src/domain/tax.ts) is taken on the line less its share of the discount, per
 *   rate, rounded once; inclusive tax is part of the line's amount, exclusive tax is added.
 * - The discount is taken on the discountable lines (by default every line that is not a
 *   proration: a proration already carries the discount of its period, see proration.ts), never
 *   more than the subtotal, so a discount never takes a total below zero.
 * - A negative total is neither charged nor refunded: it becomes credit balance. A positive total
 *   first uses the credit balance; the rest is `amountDue`. Money is conserved:
 *   amountDue − (endingCreditBalance − startingCreditBalance) = total.
 */
import { discountAmount, type CouponValue } from "./discounts";
import { MAX_AMOUNT, normalizeCurrency } from "./money";
import { type TaxAmount, type TaxRateValue, allTax, exclusiveTax, lineTax, totalTaxAmounts } from "./tax";

export interface InvoiceLineInput {
  /** Integer minor units; negative for a credit. */
  amount: number;
  proration: boolean;
  /** Whether the invoice's discount applies to this line; defaults to !proration (Stripe's rule). */
  discountable?: boolean;
  /** When given, must be the invoice's currency. */
  currency?: string;
  /** The tax rates on this line (none by default). */
  taxRates?: readonly TaxRateValue[];
}

export interface InvoiceTotalsInput {
  currency: string;
  lines: readonly InvoiceLineInput[];
  /** The coupon that applies to this invoice (see discounts.discountAppliesToInvoice), or none. */
  coupon?: CouponValue | null;
  /** The customer's credit balance in this currency before this invoice (integer minor units, >= 0). */
  startingCreditBalance?: number;
}

export interface InvoiceTotals {
  currency: string;
  /** Sum of all lines. */
  subtotal: number;
  /** Sum of the discountable lines. */
  discountableSubtotal: number;
  /** 0 <= discount <= max(0, min(subtotal, discountableSubtotal)). */
  discount: number;
  /** Each line's share of the discount (same order as the lines; sums to `discount`). */
  lineDiscounts: number[];
  /** Each line's tax, one amount per rate (same order as the lines). */
  lineTaxes: TaxAmount[][];
  /** Every line's tax summed per rate. */
  totalTaxAmounts: TaxAmount[];
  /** All the tax, inclusive and exclusive. */
  tax: number;
  /** The tax added on top of the lines (the exclusive rates'). */
  exclusiveTax: number;
  /** subtotal − discount + exclusiveTax; negative when credits exceed charges. */
  total: number;
  startingCreditBalance: number;
  /** Credit balance used to pay this invoice (0 when the total is not positive). */
  creditApplied: number;
  /** What is charged: max(0, total − creditApplied). Never negative. */
  amountDue: number;
  /** Credit balance carried to the next invoice: starting − applied + max(0, −total). */
  endingCreditBalance: number;
}

function assertAmount(value: number, name: string): void {
  if (!Number.isSafeInteger(value)) throw new RangeError(`${name} must be an integer of minor units; got ${String(value)}`);
  if (Math.abs(value) > MAX_AMOUNT) throw new RangeError(`${name} (${value}) is beyond the largest amount (${MAX_AMOUNT} minor units)`);
}

/**
 * The totals of an invoice. Throws RangeError for a line or coupon in another currency, a line
 * that is not an integer within ±MAX_AMOUNT, a subtotal beyond it, or a negative credit balance.
 */
export function invoiceTotals(input: InvoiceTotalsInput): InvoiceTotals {
  const currency = normalizeCurrency(input.currency);
  if (currency === undefined) throw new RangeError(`unknown currency: ${JSON.stringify(input.currency)}`);
  if (!Array.isArray(input.lines)) throw new RangeError("lines must be an array");
  const starting = input.startingCreditBalance ?? 0;
  assertAmount(starting, "startingCreditBalance");
  if (starting < 0) throw new RangeError(`startingCreditBalance must not be negative; got ${starting}`);

  let subtotal = 0;
  let discountableSubtotal = 0;
  const discountable: boolean[] = [];
  input.lines.forEach((line, i) => {
    assertAmount(line.amount, `lines[${i}].amount`);
    if (line.currency !== undefined && normalizeCurrency(line.currency) !== currency) {
      throw new RangeError(`currency mismatch: lines[${i}] is in ${JSON.stringify(line.currency)}, the invoice is in ${currency}`);
    }
    const d = line.discountable ?? !line.proration;
    discountable.push(d);
    subtotal += line.amount;
    if (d) discountableSubtotal += line.amount;
  });
  assertAmount(subtotal, "the subtotal");

  const coupon = input.coupon ?? null;
  const discount = coupon === null ? 0 : Math.min(discountAmount(coupon, discountableSubtotal, currency), Math.max(0, subtotal));
  const lineDiscounts = allocateDiscount(
    input.lines.map((l, i) => (discountable[i] ? l.amount : 0)),
    discount,
  );
  const lineTaxes = input.lines.map((line, i) => lineTax(line.amount - lineDiscounts[i], line.taxRates ?? []));
  const totalTax = totalTaxAmounts(lineTaxes);
  const added = exclusiveTax(totalTax);
  const total = subtotal - discount + added;
  assertAmount(total, "the total");
  const creditApplied = total > 0 ? Math.min(starting, total) : 0;
  const amountDue = total > 0 ? total - creditApplied : 0;
  const endingCreditBalance = starting - creditApplied + (total < 0 ? -total : 0);
  assertAmount(endingCreditBalance, "the ending credit balance");
  return {
    currency,
    subtotal,
    discountableSubtotal,
    discount,
    lineDiscounts,
    lineTaxes,
    totalTaxAmounts: totalTax,
    tax: allTax(totalTax),
    exclusiveTax: added,
    total,
    startingCreditBalance: starting,
    creditApplied,
    amountDue,
    endingCreditBalance,
  };
}

/**
 * Splits `discount` across lines in proportion to their positive amounts (largest remainder,
 * earlier line first on ties), so the shares sum to the discount exactly and none exceeds its
 * line. Lines of zero or less get 0. What a line actually cost is its amount less its share (the
 * amount an OpenCharge keeps, see proration.openCharge).
 * Throws RangeError when the discount is negative or more than the positive amounts.
 */
export function allocateDiscount(amounts: readonly number[], discount: number): number[] {
  if (!Number.isSafeInteger(discount) || discount < 0) throw new RangeError(`discount must be a non-negative integer; got ${String(discount)}`);
  const weights = amounts.map((a, i) => {
    if (!Number.isSafeInteger(a)) throw new RangeError(`amounts[${i}] must be a safe integer; got ${String(a)}`);
    return a > 0 ? BigInt(a) : 0n;
  });
  const total = weights.reduce((s, w) => s + w, 0n);
  const d = BigInt(discount);
  if (d > total) throw new RangeError(`discount ${discount} is more than the lines it applies to (${total})`);
  if (d === 0n) return amounts.map(() => 0);
  const shares = weights.map((w) => (d * w) / total);
  const remainders = weights.map((w, i) => ({ i, r: (d * w) % total }));
  let left = d - shares.reduce((s, x) => s + x, 0n);
  remainders.sort((a, b) => (a.r === b.r ? a.i - b.i : a.r > b.r ? -1 : 1));
  for (const { i } of remainders) {
    if (left === 0n) break;
    if (weights[i] === 0n) continue;
    shares[i] += 1n;
    left -= 1n;
  }
  return shares.map(Number);
}
