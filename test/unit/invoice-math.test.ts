import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { CouponValue } from "../../src/domain/discounts";
import { allocateDiscount, invoiceTotals, type InvoiceLineInput } from "../../src/domain/invoice-math";
import { MAX_AMOUNT, formatMinor, parseDecimalToMinor } from "../../src/domain/money";

const lineArb: fc.Arbitrary<InvoiceLineInput> = fc.record(
  {
    amount: fc.oneof(fc.integer({ min: -1_000_000, max: 1_000_000 }), fc.integer({ min: 0, max: 100 })),
    proration: fc.boolean(),
    discountable: fc.boolean(),
  },
  { requiredKeys: ["amount", "proration"] },
);

const couponArb = (currency: string): fc.Arbitrary<CouponValue | null> =>
  fc.oneof(
    fc.constant(null),
    fc.integer({ min: 1, max: 10_000 }).map((basisPoints): CouponValue => ({ type: "percent_off", basisPoints })),
    fc.integer({ min: 1, max: 2_000_000 }).map((amountOff): CouponValue => ({ type: "amount_off", amountOff, currency })),
  );

const invoiceArb = fc.constantFrom("jpy", "usd", "kwd").chain((currency) =>
  fc.record({
    currency: fc.constant(currency),
    lines: fc.array(lineArb, { maxLength: 12 }),
    coupon: couponArb(currency),
    startingCreditBalance: fc.integer({ min: 0, max: 5_000_000 }),
  }),
);

const EXPONENT: Record<string, number> = { jpy: 0, usd: 2, kwd: 3 };

describe("invoice totals (properties)", () => {
  it("the total is always the sum of the lines minus the discount", () => {
    fc.assert(
      fc.property(invoiceArb, (input) => {
        const t = invoiceTotals(input);
        expect(t.subtotal).toBe(input.lines.reduce((s, l) => s + l.amount, 0));
        expect(t.total).toBe(t.subtotal - t.discount);
        expect(t.lineDiscounts.reduce((s, d) => s + d, 0)).toBe(t.discount);
        expect(t.lineDiscounts).toHaveLength(input.lines.length);
      }),
      { numRuns: 500 },
    );
  });

  it("a discount never makes a total negative, and never discounts a non-discountable line", () => {
    fc.assert(
      fc.property(invoiceArb, (input) => {
        const t = invoiceTotals(input);
        expect(t.discount).toBeGreaterThanOrEqual(0);
        if (t.subtotal >= 0) expect(t.total).toBeGreaterThanOrEqual(0);
        else expect(t.discount).toBe(0); // a negative total is the credits' doing, never the discount's
        expect(t.discount).toBeLessThanOrEqual(Math.max(0, t.discountableSubtotal));
        input.lines.forEach((l, i) => {
          const discountable = l.discountable ?? !l.proration;
          if (!discountable || l.amount <= 0) expect(t.lineDiscounts[i]).toBe(0);
          else expect(t.lineDiscounts[i]).toBeLessThanOrEqual(l.amount);
        });
      }),
      { numRuns: 500 },
    );
  });

  it("a negative total is never charged nor refunded: it becomes credit, and credit pays later totals (money is conserved)", () => {
    fc.assert(
      fc.property(invoiceArb, (input) => {
        const t = invoiceTotals(input);
        expect(t.amountDue).toBeGreaterThanOrEqual(0);
        expect(t.endingCreditBalance).toBeGreaterThanOrEqual(0);
        expect(t.amountDue - (t.endingCreditBalance - t.startingCreditBalance)).toBe(t.total);
        if (t.total <= 0) {
          expect(t.amountDue).toBe(0);
          expect(t.creditApplied).toBe(0);
        } else {
          expect(t.creditApplied).toBe(Math.min(t.startingCreditBalance, t.total));
        }
      }),
      { numRuns: 500 },
    );
  });

  it("is exact in JPY (0 decimals), USD (2) and KWD (3): the lines in major units add up to the total", () => {
    fc.assert(
      fc.property(invoiceArb, (input) => {
        const t = invoiceTotals(input);
        const exp = EXPONENT[t.currency];
        // format every amount with the currency's exponent, read it back, and add up the texts exactly
        const readBack = (minor: number) => {
          const text = formatMinor(Math.abs(minor), exp);
          const parsed = parseDecimalToMinor(text, exp);
          if (!parsed.ok) throw new Error(text);
          return Math.sign(minor) * parsed.minor;
        };
        const sumOfLines = input.lines.reduce((s, l) => s + readBack(l.amount), 0);
        expect(sumOfLines - readBack(t.discount)).toBe(readBack(t.total));
        expect(formatMinor(t.total, exp)).toMatch(exp === 0 ? /^-?\d+$/ : new RegExp(`^-?\\d+\\.\\d{${exp}}$`));
      }),
    );
  });
});

describe("invoice totals (examples)", () => {
  it("a renewal with a 20% coupon", () => {
    const t = invoiceTotals({ currency: "usd", lines: [{ amount: 3000, proration: false }], coupon: { type: "percent_off", basisPoints: 2000 } });
    expect(t).toMatchObject({ subtotal: 3000, discount: 600, total: 2400, amountDue: 2400, endingCreditBalance: 0, lineDiscounts: [600] });
  });

  it("prorations are not discounted again (they carry their period's discount already)", () => {
    const t = invoiceTotals({
      currency: "usd",
      lines: [
        { amount: 3000, proration: false },
        { amount: -1200, proration: true },
        { amount: 2400, proration: true },
      ],
      coupon: { type: "percent_off", basisPoints: 2000 },
    });
    expect(t).toMatchObject({ subtotal: 4200, discountableSubtotal: 3000, discount: 600, total: 3600, lineDiscounts: [600, 0, 0] });
  });

  it("a downgrade's credit carries to the next invoice, which it pays first", () => {
    const downgrade = invoiceTotals({ currency: "usd", lines: [{ amount: -1500, proration: true }, { amount: 500, proration: true }] });
    expect(downgrade).toMatchObject({ total: -1000, amountDue: 0, creditApplied: 0, endingCreditBalance: 1000 });
    const renewal = invoiceTotals({ currency: "usd", lines: [{ amount: 1000, proration: false }, { amount: 300, proration: false }], startingCreditBalance: downgrade.endingCreditBalance });
    expect(renewal).toMatchObject({ total: 1300, creditApplied: 1000, amountDue: 300, endingCreditBalance: 0 });
    const small = invoiceTotals({ currency: "usd", lines: [{ amount: 400, proration: false }], startingCreditBalance: 1000 });
    expect(small).toMatchObject({ total: 400, creditApplied: 400, amountDue: 0, endingCreditBalance: 600 });
  });

  it("caps an amount_off coupon at the subtotal, even when credits leave less than the discountable lines", () => {
    const t = invoiceTotals({
      currency: "jpy",
      lines: [{ amount: 1000, proration: false }, { amount: -800, proration: true }],
      coupon: { type: "amount_off", amountOff: 500, currency: "jpy" },
    });
    expect(t).toMatchObject({ subtotal: 200, discount: 200, total: 0, amountDue: 0 });
  });

  it("an empty invoice totals zero", () => {
    expect(invoiceTotals({ currency: "kwd", lines: [] })).toMatchObject({ subtotal: 0, discount: 0, total: 0, amountDue: 0, lineDiscounts: [] });
  });

  it("refuses mismatched currencies, non-integer or oversized amounts and a negative balance", () => {
    expect(() => invoiceTotals({ currency: "usd", lines: [{ amount: 1, proration: false, currency: "eur" }] })).toThrow(/currency mismatch: lines\[0\]/);
    expect(() => invoiceTotals({ currency: "usd", lines: [{ amount: 100, proration: false }], coupon: { type: "amount_off", amountOff: 5, currency: "jpy" } })).toThrow(/currency mismatch/);
    expect(() => invoiceTotals({ currency: "usd", lines: [{ amount: 1.5, proration: false }] })).toThrow(/lines\[0\]\.amount must be an integer/);
    expect(() => invoiceTotals({ currency: "usd", lines: [{ amount: MAX_AMOUNT + 1, proration: false }] })).toThrow(/beyond the largest amount/);
    expect(() => invoiceTotals({ currency: "usd", lines: [{ amount: MAX_AMOUNT, proration: false }, { amount: 1, proration: false }] })).toThrow(/subtotal/);
    expect(() => invoiceTotals({ currency: "usd", lines: [], startingCreditBalance: -1 })).toThrow(/must not be negative/);
    expect(() => invoiceTotals({ currency: "usd", lines: [{ amount: -MAX_AMOUNT, proration: true }], startingCreditBalance: 1 })).toThrow(/ending credit balance/);
    expect(() => invoiceTotals({ currency: "abc", lines: [] })).toThrow(/unknown currency/);
    expect(invoiceTotals({ currency: "USD", lines: [{ amount: 1, proration: false, currency: "USD" }] }).currency).toBe("usd");
  });
});

describe("allocateDiscount", () => {
  it("splits in proportion, largest remainder first, earlier line on ties", () => {
    expect(allocateDiscount([3000, 1000], 600)).toEqual([450, 150]);
    expect(allocateDiscount([1, 1, 1], 2)).toEqual([1, 1, 0]);
    expect(allocateDiscount([100, -50, 0, 100], 101)).toEqual([51, 0, 0, 50]);
    expect(allocateDiscount([5], 0)).toEqual([0]);
  });

  it("shares sum to the discount and none exceeds its line (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -1000, max: 1_000_000 }), { minLength: 1, maxLength: 15 }), fc.double({ min: 0, max: 1, noNaN: true }), (amounts, f) => {
        const positive = amounts.reduce((s, a) => s + Math.max(0, a), 0);
        const discount = Math.floor(positive * f);
        const shares = allocateDiscount(amounts, discount);
        expect(shares.reduce((s, x) => s + x, 0)).toBe(discount);
        shares.forEach((s, i) => {
          expect(s).toBeGreaterThanOrEqual(0);
          expect(s).toBeLessThanOrEqual(Math.max(0, amounts[i]));
        });
      }),
    );
  });

  it("refuses a discount larger than the lines, or negative", () => {
    expect(() => allocateDiscount([100], 101)).toThrow(/more than the lines/);
    expect(() => allocateDiscount([100], -1)).toThrow(/non-negative integer/);
    expect(() => allocateDiscount([1.5], 1)).toThrow(/safe integer/);
  });
});
