// Tax per line (src/domain/tax.ts) and on an invoice's totals (src/domain/invoice-math.ts), with
// hand-computed amounts. Stripe's documented cases: a 20% exclusive rate on 10.00 adds 2.00 (the
// total is 12.00); a 19% inclusive rate in 11.90 is 1.90 of it (Stripe's "inclusive vs exclusive
// tax" examples). Rounding: once per line and rate, half away from zero.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { invoiceTotals } from "../../src/domain/invoice-math";
import { type TaxRateValue, formatPercentage, lineTax, parsePercentage } from "../../src/domain/tax";

const pct = (text: string) => {
  const parsed = parsePercentage(text);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.value;
};
const exclusive = (id: string, p: string): TaxRateValue => ({ id, percentage: pct(p), inclusive: false });
const inclusive = (id: string, p: string): TaxRateValue => ({ id, percentage: pct(p), inclusive: true });

describe("percentages", () => {
  it("are decimal strings from 0 to 100 with at most 4 decimals, held exactly", () => {
    expect(pct("20")).toBe(200_000);
    expect(pct("19.5")).toBe(195_000);
    expect(pct("8.875")).toBe(88_750);
    expect(pct("0.0001")).toBe(1);
    expect(pct("100")).toBe(1_000_000);
    expect(pct("0")).toBe(0);
    expect(formatPercentage(88_750)).toBe("8.875");
    expect(formatPercentage(200_000)).toBe("20");
    expect(formatPercentage(1)).toBe("0.0001");
  });

  it("refuses 5 decimals, more than 100, signs, exponents and numbers", () => {
    for (const bad of ["0.00001", "19.12345", "100.0001", "101", "-1", "1e1", "", " 5", "5.", ".5", "abc"]) {
      expect(parsePercentage(bad).ok, bad).toBe(false);
    }
    expect(parsePercentage(20).ok).toBe(false);
    expect(parsePercentage("19.12345")).toMatchObject({ ok: false, message: expect.stringContaining("more than 4 decimals") });
  });
});

describe("a line's tax", () => {
  it("20% exclusive on 10.00 is 2.00, on a 12.00 total", () => {
    expect(lineTax(1000, [exclusive("txr_vat", "20")])).toEqual([{ tax_rate: "txr_vat", amount: 200, inclusive: false }]);
    const t = invoiceTotals({ currency: "usd", lines: [{ amount: 1000, proration: false, taxRates: [exclusive("txr_vat", "20")] }] });
    expect(t).toMatchObject({ subtotal: 1000, tax: 200, total: 1200, amountDue: 1200 });
  });

  it("19% inclusive in 11.90 is 1.90, and the total stays 11.90", () => {
    expect(lineTax(1190, [inclusive("txr_de", "19")])).toEqual([{ tax_rate: "txr_de", amount: 190, inclusive: true }]);
    const t = invoiceTotals({ currency: "eur", lines: [{ amount: 1190, proration: false, taxRates: [inclusive("txr_de", "19")] }] });
    expect(t).toMatchObject({ subtotal: 1190, tax: 190, total: 1190, amountDue: 1190 });
  });

  it("rounds once, half away from zero, at the boundary", () => {
    // 10% of 0.25 is 2.5 cents -> 3; of 0.24 is 2.4 -> 2; a credit of 0.25 -> -3.
    expect(lineTax(25, [exclusive("a", "10")])[0].amount).toBe(3);
    expect(lineTax(24, [exclusive("a", "10")])[0].amount).toBe(2);
    expect(lineTax(-25, [exclusive("a", "10")])[0].amount).toBe(-3);
    // 10% inclusive in 0.55: 55 × 10 / 110 = 5 exactly; in 0.33: 3.0 -> 3; in 0.385 cannot be. 7% inclusive in 1.07 is 0.07.
    expect(lineTax(55, [inclusive("a", "10")])[0].amount).toBe(5);
    expect(lineTax(107, [inclusive("a", "7")])[0].amount).toBe(7);
    // 4 decimals count: 8.8755% of 100.00 = 887.55 cents -> 888; 8.8754% -> 887.54 -> 888; 8.8745% -> 887.45 -> 887.
    expect(lineTax(10_000, [exclusive("a", "8.8755")])[0].amount).toBe(888);
    expect(lineTax(10_000, [exclusive("a", "8.8745")])[0].amount).toBe(887);
  });

  it("two rates on one line are each rounded once on the same net", () => {
    // 5% GST + 9.975% QST on 19.99: 99.95 -> 100 and 199.40 -> 199 (not 14.975% of it: 299.35 -> 299).
    const t = invoiceTotals({ currency: "cad", lines: [{ amount: 1999, proration: false, taxRates: [exclusive("gst", "5"), exclusive("qst", "9.975")] }] });
    expect(t.lineTaxes[0]).toEqual([
      { tax_rate: "gst", amount: 100, inclusive: false },
      { tax_rate: "qst", amount: 199, inclusive: false },
    ]);
    expect(t).toMatchObject({ tax: 299, total: 2298 });
    // Two inclusive rates share the price: 10% and 5% in 11.50 are 1.00 and 0.50.
    expect(lineTax(1150, [inclusive("a", "10"), inclusive("b", "5")]).map((a) => a.amount)).toEqual([100, 50]);
  });

  it("is taken after the discount", () => {
    // 20.00 less a 25% coupon (5.00) is 15.00; 20% of it is 3.00; the total 18.00.
    const t = invoiceTotals({ currency: "usd", lines: [{ amount: 2000, proration: false, taxRates: [exclusive("vat", "20")] }], coupon: { type: "percent_off", basisPoints: 2500 } });
    expect(t).toMatchObject({ subtotal: 2000, discount: 500, tax: 300, total: 1800, amountDue: 1800 });
    // Inclusive: 11.90 less 1.19 off is 10.71, of which 19/119 is 1.71 (1.71 exactly); the total 10.71.
    const inc = invoiceTotals({ currency: "eur", lines: [{ amount: 1190, proration: false, taxRates: [inclusive("de", "19")] }], coupon: { type: "amount_off", amountOff: 119, currency: "eur" } });
    expect(inc).toMatchObject({ discount: 119, tax: 171, total: 1071 });
  });

  it("a proration credit carries negative tax", () => {
    // Unused time credited -5.00 and the new price charged 15.00 at 20%: -1.00 and 3.00, 2.00 in all on a 12.00 total.
    const rates = [exclusive("vat", "20")];
    const t = invoiceTotals({
      currency: "usd",
      lines: [
        { amount: -500, proration: true, taxRates: rates },
        { amount: 1500, proration: true, taxRates: rates },
      ],
    });
    expect(t.lineTaxes.map((l) => l[0].amount)).toEqual([-100, 300]);
    expect(t.totalTaxAmounts).toEqual([{ tax_rate: "vat", amount: 200, inclusive: false }]);
    expect(t).toMatchObject({ subtotal: 1000, tax: 200, total: 1200 });
  });

  it("zero-decimal JPY and three-decimal KWD round to their own minor unit", () => {
    // JPY: 10% exclusive on ¥1,005 is ¥100.5 -> ¥101; 8% inclusive in ¥1,080 is ¥80.
    expect(lineTax(1005, [exclusive("jp", "10")])[0].amount).toBe(101);
    expect(invoiceTotals({ currency: "jpy", lines: [{ amount: 1005, proration: false, taxRates: [exclusive("jp", "10")] }] })).toMatchObject({ total: 1106 });
    expect(lineTax(1080, [inclusive("jp8", "8")])[0].amount).toBe(80);
    // KWD (fils): 5% on 1.005 KWD is 50.25 fils -> 50; on 1.010 KWD is 50.5 fils -> 51.
    expect(lineTax(1005, [exclusive("kw", "5")])[0].amount).toBe(50);
    expect(invoiceTotals({ currency: "kwd", lines: [{ amount: 1010, proration: false, taxRates: [exclusive("kw", "5")] }] })).toMatchObject({ tax: 51, total: 1061 });
  });

  it("a line without rates has no tax, and the total is the lines less the discount", () => {
    const t = invoiceTotals({ currency: "usd", lines: [{ amount: 1000, proration: false }] });
    expect(t).toMatchObject({ tax: 0, total: 1000, totalTaxAmounts: [] });
    expect(t.lineTaxes).toEqual([[]]);
  });

  it("an exclusive rate's tax is never more than its percentage of the net, and a credit mirrors a charge", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000_000 }), fc.integer({ min: 0, max: 1_000_000 }), fc.boolean(), (net, percentage, inc) => {
        const rate = [{ id: "r", percentage, inclusive: inc }];
        const [charge] = lineTax(net, rate);
        const [credit] = lineTax(-net, rate);
        expect(credit.amount + charge.amount).toBe(0);
        // |tax − exact| <= 0.5 minor unit, in integers: |2·tax·den − 2·net·p| <= den.
        const den = BigInt(1_000_000 + (inc ? percentage : 0));
        const diff = 2n * BigInt(charge.amount) * den - 2n * BigInt(net) * BigInt(percentage);
        expect(diff <= den && -diff <= den).toBe(true);
      }),
    );
  });
});
