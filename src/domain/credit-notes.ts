/**
 * What a credit note credits each invoice line, and the tax in it: the pure maths (no I/O, integer
 * minor units only). src/billing/credit-notes.ts writes what this plans, with guards that hold it
 * whatever runs concurrently.
 *
 * THE RULE. A line of a finalized invoice cost its customer
 *   gross = amount − its share of the invoice's discount + its exclusive tax
 * (the discount shared as the invoice shared it: src/domain/invoice-math.ts allocateDiscount over
 * the lines it applies to), so the lines' gross sum to the invoice's total. A credit note credits
 * each line an amount, TAX INCLUDED, never more than what is left of its gross (its gross less
 * what earlier notes not void credited it), and never more than the invoice's total in all. The
 * tax in a line's credit is each rate's tax on the line, pro rata over what the line's notes credited
 * so far with this one: rate tax × (credited + credit) / gross, rounded to the minor unit once per
 * line and rate, half away from zero, less the tax earlier notes carried (so many small notes never
 * carry more than the line's tax); a credit of all that is
 * left of a line takes all that is left of each rate's tax, so a line credited in full is credited
 * its tax exactly.
 *
 * Worked example (Stripe's): a 100.00 line with 20% exclusive VAT (tax 20.00, gross 120.00); a
 * credit note of 60.00 on it carries 60.00 × 20.00 / 120.00 = 10.00 of tax: 50.00 + 10.00.
 *
 * A note given as one `amount` (no lines) is spread over the lines in proportion to what is left of
 * each (largest remainder, earlier line first on ties), then taxed line by line as above.
 * Lines that credit (a proration's credit, a carried credit) are never credited.
 */
import { roundHalfAwayFromZero, toSafeMinor } from "./decimal";
import { allocateDiscount } from "./invoice-math";
import type { TaxAmount } from "./tax";

/** An invoice line as a credit note needs it (its JSON as the API answers it). */
export interface InvoiceLineView {
  id: string;
  type: "subscription" | "proration" | "usage" | "credit";
  description: string;
  amount: number;
  proration: boolean;
  tax_amounts: TaxAmount[];
}

/** A finalized invoice as a credit note needs it. */
export interface InvoiceView {
  total: number;
  discount: number;
  lines: InvoiceLineView[];
}

/** What earlier credit notes (not void) of the invoice credited each line, and each rate's tax on it. */
export interface Credited {
  /** invoice line id -> amount credited, tax included. */
  lines: Map<string, number>;
  /** `${invoice line id} ${tax rate id}` -> tax credited. */
  taxes: Map<string, number>;
  /** All the notes' amounts. */
  total: number;
}

export const creditedKey = (lineId: string, taxRate: string) => `${lineId} ${taxRate}`;

/** A line of a planned credit note: the invoice line, what it credits (tax included), and the tax in it. */
export interface PlannedLine {
  invoice_line_id: string;
  description: string;
  amount: number;
  tax_amounts: TaxAmount[];
}

export interface PlannedCreditNote {
  amount: number;
  /** All the tax in it, inclusive and exclusive. */
  tax: number;
  /** The exclusive part of `tax`. */
  exclusiveTax: number;
  /** Each rate's tax over the lines. */
  taxAmounts: TaxAmount[];
  lines: PlannedLine[];
  /** Each credited line's gross (what it cost in all): the cap the batch's guard holds it to. */
  grossOf: Map<string, number>;
  /** Each credited line's tax per rate (`creditedKey`): the cap the batch's guard holds its notes' tax to. */
  taxOf: Map<string, number>;
}

export type CreditNoteRequest = { amount: number } | { lines: { invoice_line_id: string; amount: number }[] };

export type CreditNotePlan =
  | { ok: true; note: PlannedCreditNote }
  /** `param` names the field: amount, lines.<i>.invoice_line_id or lines.<i>.amount. */
  | { ok: false; code: "credit_note_exceeds_invoice" | "invoice_line_not_found" | "invoice_line_not_creditable" | "parameter_invalid"; message: string; param: string; left?: number };

/** Each line's gross: its amount less its share of the discount, plus its exclusive tax. */
export function lineGross(invoice: InvoiceView): Map<string, number> {
  // The invoice shared its discount over the lines it applies to: not prorations, not credits
  // (src/billing/prorations.ts itemLine and carriedCreditLine are not discountable).
  const discountable = invoice.lines.map((l) => (l.type === "subscription" || l.type === "usage") && !l.proration);
  let shares: number[];
  try {
    shares = allocateDiscount(
      invoice.lines.map((l, i) => (discountable[i] ? l.amount : 0)),
      invoice.discount,
    );
  } catch {
    shares = invoice.lines.map(() => 0);
  }
  return new Map(invoice.lines.map((l, i) => [l.id, l.amount - shares[i] + l.tax_amounts.reduce((sum, t) => sum + (t.inclusive ? 0 : t.amount), 0)]));
}

const creditable = (line: InvoiceLineView, gross: number) => line.type !== "credit" && gross > 0;

/** Plans a credit note of `request` on `invoice`, given what earlier notes credited. */
export function planCreditNote(invoice: InvoiceView, credited: Credited, request: CreditNoteRequest): CreditNotePlan {
  const gross = lineGross(invoice);
  const leftOf = (line: InvoiceLineView) => Math.max(0, (gross.get(line.id) ?? 0) - (credited.lines.get(line.id) ?? 0));
  const invoiceLeft = Math.max(0, invoice.total - credited.total);
  const exceeds = (amount: number, param: string): CreditNotePlan => ({
    ok: false,
    code: "credit_note_exceeds_invoice",
    message: `A credit note of ${amount} is more than the invoice has left to credit: ${invoiceLeft} of its total ${invoice.total} (earlier credit notes not void took ${credited.total}).`,
    param,
    left: invoiceLeft,
  });

  let wanted: { line: InvoiceLineView; amount: number }[];
  if ("amount" in request) {
    if (request.amount > invoiceLeft) return exceeds(request.amount, "amount");
    const candidates = invoice.lines.filter((l) => creditable(l, gross.get(l.id) ?? 0));
    const lefts = candidates.map(leftOf);
    let shares: number[];
    try {
      shares = allocateDiscount(lefts, request.amount);
    } catch {
      return exceeds(request.amount, "amount");
    }
    wanted = candidates.map((line, i) => ({ line, amount: shares[i] })).filter((w) => w.amount > 0);
  } else {
    wanted = [];
    const seen = new Set<string>();
    for (const [i, asked] of request.lines.entries()) {
      const line = invoice.lines.find((l) => l.id === asked.invoice_line_id);
      if (!line) {
        return { ok: false, code: "invoice_line_not_found", message: `lines.${i}.invoice_line_id: ${asked.invoice_line_id} is not a line of this invoice.`, param: `lines.${i}.invoice_line_id` };
      }
      if (seen.has(line.id)) return { ok: false, code: "parameter_invalid", message: `lines.${i}.invoice_line_id: line ${line.id} is given twice; give each line once.`, param: `lines.${i}.invoice_line_id` };
      seen.add(line.id);
      if (!creditable(line, gross.get(line.id) ?? 0)) {
        return { ok: false, code: "invoice_line_not_creditable", message: `lines.${i}.invoice_line_id: line ${line.id} is a credit (${line.amount}), so there is nothing on it to credit.`, param: `lines.${i}.invoice_line_id` };
      }
      const left = leftOf(line);
      if (asked.amount > left) {
        return {
          ok: false,
          code: "credit_note_exceeds_invoice",
          message: `lines.${i}.amount: ${asked.amount} is more than line ${line.id} has left to credit: ${left} of the ${gross.get(line.id)} it cost, tax included.`,
          param: `lines.${i}.amount`,
          left,
        };
      }
      wanted.push({ line, amount: asked.amount });
    }
    const sum = wanted.reduce((s, w) => s + w.amount, 0);
    if (sum > invoiceLeft) return exceeds(sum, "lines");
  }

  const lines: PlannedLine[] = wanted.map(({ line, amount }) => {
    const lineGrossAmount = gross.get(line.id)!;
    const all = amount === leftOf(line);
    return {
      invoice_line_id: line.id,
      description: line.description,
      amount,
      tax_amounts: line.tax_amounts.map((t) => {
        const taxBefore = credited.taxes.get(creditedKey(line.id, t.tax_rate)) ?? 0;
        const taxLeft = Math.max(0, t.amount - taxBefore);
        // Pro rata of all the line's notes so far with this one, rounded once, less what earlier
        // notes carried: rounding each note alone would let many small notes carry more than the
        // line's tax (3 of a 120 gross with 20 of tax is 0.5, so 1 each). Never past what is left;
        // all that is left of the line takes all that is left of its tax.
        const cumulative = toSafeMinor(roundHalfAwayFromZero(BigInt(t.amount) * BigInt((credited.lines.get(line.id) ?? 0) + amount), BigInt(lineGrossAmount)));
        return { tax_rate: t.tax_rate, amount: all ? taxLeft : Math.min(taxLeft, Math.max(0, cumulative - taxBefore)), inclusive: t.inclusive };
      }),
    };
  });
  const byRate = new Map<string, TaxAmount>();
  for (const l of lines) {
    for (const t of l.tax_amounts) {
      const seen = byRate.get(t.tax_rate);
      if (seen) seen.amount += t.amount;
      else byRate.set(t.tax_rate, { ...t });
    }
  }
  const taxAmounts = [...byRate.values()];
  return {
    ok: true,
    note: {
      amount: lines.reduce((s, l) => s + l.amount, 0),
      tax: taxAmounts.reduce((s, t) => s + t.amount, 0),
      exclusiveTax: taxAmounts.reduce((s, t) => s + (t.inclusive ? 0 : t.amount), 0),
      taxAmounts,
      lines,
      grossOf: new Map(lines.map((l) => [l.invoice_line_id, gross.get(l.invoice_line_id)!])),
      taxOf: new Map(wanted.flatMap(({ line }) => line.tax_amounts.map((t) => [creditedKey(line.id, t.tax_rate), t.amount] as const))),
    },
  };
}

/** What earlier notes credited, from their lines (each note's `lines` as stored). */
export function creditedFrom(notes: { amount: number; lines: { invoice_line_id: string; amount: number; tax_amounts: TaxAmount[] }[] }[]): Credited {
  const credited: Credited = { lines: new Map(), taxes: new Map(), total: 0 };
  for (const note of notes) {
    credited.total += note.amount;
    for (const line of note.lines) {
      credited.lines.set(line.invoice_line_id, (credited.lines.get(line.invoice_line_id) ?? 0) + line.amount);
      for (const t of line.tax_amounts) {
        const key = creditedKey(line.invoice_line_id, t.tax_rate);
        credited.taxes.set(key, (credited.taxes.get(key) ?? 0) + t.amount);
      }
    }
  }
  return credited;
}
