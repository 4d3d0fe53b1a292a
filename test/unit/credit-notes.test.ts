// What a credit note credits each invoice line, and the tax in it (src/domain/credit-notes.ts), with
// hand-computed amounts and properties: never more than a line cost or the invoice's total, and a
// line credited in full, in any number of notes, gives back exactly its tax.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type InvoiceView, creditedFrom, lineGross, planCreditNote } from "../../src/domain/credit-notes";
import { invoiceTotals } from "../../src/domain/invoice-math";
import { lineTax } from "../../src/domain/tax";

const VAT = { id: "txr_vat", percentage: 200_000, inclusive: false };
const none = creditedFrom([]);

/** An invoice as issueInvoice makes it: its lines' tax after the discount, and its total. */
function invoiceOf(amounts: number[], discount = 0, rates = [VAT]): InvoiceView {
  const totals = invoiceTotals({ currency: "usd", lines: amounts.map((amount) => ({ amount, proration: false, taxRates: rates })), coupon: discount > 0 ? { type: "amount_off", amountOff: discount, currency: "usd" } : null });
  return {
    total: totals.total,
    discount: totals.discount,
    lines: amounts.map((amount, i) => ({ id: `il_${i}`, type: "subscription", description: `line ${i}`, amount, proration: false, tax_amounts: totals.lineTaxes[i] })),
  };
}

describe("planCreditNote", () => {
  it("Stripe's example: 60.00 of a 100.00 line at 20% exclusive is 50.00 + 10.00 tax", () => {
    const invoice = invoiceOf([10_000]);
    expect(invoice.total).toBe(12_000);
    const plan = planCreditNote(invoice, none, { lines: [{ invoice_line_id: "il_0", amount: 6_000 }] });
    expect(plan).toMatchObject({ ok: true, note: { amount: 6_000, tax: 1_000, exclusiveTax: 1_000, lines: [{ amount: 6_000, tax_amounts: [{ tax_rate: "txr_vat", amount: 1_000 }] }] } });
  });

  it("an amount is spread over the lines in proportion to what is left of each: 36.00 of 60.00 + 120.00 (tax included) is 12.00 + 24.00", () => {
    const invoice = invoiceOf([5_000, 10_000]);
    const plan = planCreditNote(invoice, none, { amount: 3_600 });
    expect(plan.ok && plan.note.lines.map((l) => [l.amount, l.tax_amounts[0].amount])).toEqual([[1_200, 200], [2_400, 400]]);
  });

  it("refuses more than a line has left, more than the invoice has left, another invoice's line", () => {
    const invoice = invoiceOf([10_000]);
    expect(planCreditNote(invoice, none, { lines: [{ invoice_line_id: "il_0", amount: 12_001 }] })).toMatchObject({ ok: false, code: "credit_note_exceeds_invoice", param: "lines.0.amount", left: 12_000 });
    const credited = creditedFrom([{ amount: 10_000, lines: [{ invoice_line_id: "il_0", amount: 10_000, tax_amounts: [] }] }]);
    expect(planCreditNote(invoice, credited, { amount: 2_001 })).toMatchObject({ ok: false, code: "credit_note_exceeds_invoice", param: "amount", left: 2_000 });
    expect(planCreditNote(invoice, none, { lines: [{ invoice_line_id: "il_other", amount: 1 }] })).toMatchObject({ ok: false, code: "invoice_line_not_found" });
  });

  it("each line's cost is its amount less its share of the discount plus its tax: the costs sum to the total", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 1_000_000 }), { minLength: 1, maxLength: 6 }), fc.integer({ min: 0, max: 100 }), (amounts, percentOff) => {
        const subtotal = amounts.reduce((a, b) => a + b, 0);
        const invoice = invoiceOf(amounts, Math.floor((subtotal * percentOff) / 100));
        const gross = [...lineGross(invoice).values()];
        expect(gross.reduce((a, b) => a + b, 0)).toBe(invoice.total);
      }),
    );
  });

  it("notes of any sizes never credit more than the invoice, and crediting all of it gives back exactly its tax", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 100_000 }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 50_000 }), { minLength: 1, maxLength: 12 }),
        (amounts, asks) => {
          const invoice = invoiceOf(amounts);
          const notes: { amount: number; lines: { invoice_line_id: string; amount: number; tax_amounts: { tax_rate: string; amount: number; inclusive: boolean }[] }[] }[] = [];
          for (const ask of [...asks, Number.MAX_SAFE_INTEGER]) {
            const credited = creditedFrom(notes);
            const left = invoice.total - credited.total;
            if (left === 0) break;
            const plan = planCreditNote(invoice, credited, { amount: Math.min(ask, left) });
            expect(plan.ok).toBe(true);
            if (plan.ok) notes.push({ amount: plan.note.amount, lines: plan.note.lines });
          }
          const credited = creditedFrom(notes);
          expect(credited.total).toBe(invoice.total);
          for (const line of invoice.lines) {
            expect(credited.lines.get(line.id) ?? 0).toBe(lineGross(invoice).get(line.id));
            expect(credited.taxes.get(`${line.id} txr_vat`) ?? 0).toBe(lineTax(line.amount, [VAT])[0].amount);
          }
        },
      ),
    );
  });

  it("review (r3): many small notes never carry more than a line's tax, nor a negative tax", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 500 }), fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 60 }), (amount, asks) => {
        const invoice = invoiceOf([amount]);
        const tax = invoice.lines[0].tax_amounts[0].amount;
        const notes: { amount: number; lines: { invoice_line_id: string; amount: number; tax_amounts: { tax_rate: string; amount: number; inclusive: boolean }[] }[] }[] = [];
        for (const ask of [...asks, Number.MAX_SAFE_INTEGER]) {
          const credited = creditedFrom(notes);
          const left = invoice.total - credited.total;
          if (left === 0) break;
          const plan = planCreditNote(invoice, credited, { lines: [{ invoice_line_id: "il_0", amount: Math.min(ask, left) }] });
          expect(plan.ok).toBe(true);
          if (!plan.ok) return;
          expect(plan.note.tax).toBeGreaterThanOrEqual(0);
          notes.push({ amount: plan.note.amount, lines: plan.note.lines });
          expect(creditedFrom(notes).taxes.get("il_0 txr_vat") ?? 0).toBeLessThanOrEqual(tax);
        }
        expect(creditedFrom(notes).taxes.get("il_0 txr_vat") ?? 0).toBe(tax);
      }),
    );
  });
});
