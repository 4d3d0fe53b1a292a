import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addIntervals } from "../../src/domain/billing-calendar";
import {
  BASIS_POINTS_PER_WHOLE,
  discountAmount,
  discountAppliesToInvoice,
  discountEnd,
  parseAmountOff,
  parseCouponDuration,
  parsePercentOff,
  percentOffFromBasisPoints,
  type CouponDuration,
} from "../../src/domain/discounts";
import { invoiceTotals } from "../../src/domain/invoice-math";
import { MAX_AMOUNT } from "../../src/domain/money";

const pct = (basisPoints: number) => ({ type: "percent_off" as const, basisPoints });

describe("parsePercentOff", () => {
  it("reads up to two decimals into basis points, without float arithmetic", () => {
    const ok: [unknown, number][] = [
      [12.5, 1250],
      ["12.5", 1250],
      [20, 2000],
      [100, 10_000],
      [0.01, 1],
      [33.33, 3333],
      ["12.500", 1250],
      ["007", 700],
      // floats that are not what they look like are read from their shortest text, so no float
      // arithmetic drifts: 14.35 * 100 is 1434.9999999999998 in floating point, yet this is 1435
      [14.35, 1435],
      [0.29, 29],
    ];
    for (const [input, bp] of ok) expect(parsePercentOff(input), String(input)).toEqual({ ok: true, basisPoints: bp });
  });

  it("reads back every percentage it can answer (basis points -> number -> basis points)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: BASIS_POINTS_PER_WHOLE }), (bp) => {
        expect(parsePercentOff(percentOffFromBasisPoints(bp))).toEqual({ ok: true, basisPoints: bp });
        expect(parsePercentOff(JSON.parse(JSON.stringify(percentOffFromBasisPoints(bp))))).toEqual({ ok: true, basisPoints: bp });
      }),
    );
  });

  it("refuses out-of-range, over-precise and non-numeric values with a reason", () => {
    const bad: [unknown, string][] = [
      [0, "out_of_range"],
      ["0.00", "out_of_range"],
      [100.01, "out_of_range"],
      [1000, "out_of_range"],
      [-5, "out_of_range"],
      [33.333, "too_many_decimals"],
      [0.1 + 0.2, "too_many_decimals"], // 0.30000000000000004
      [1e-7, "format"], // "1e-7"
      ["1e1", "format"],
      ["12,5", "format"],
      ["", "format"],
      [Number.NaN, "not_a_number"],
      [Number.POSITIVE_INFINITY, "not_a_number"],
      [true, "not_a_number"],
      [null, "not_a_number"],
    ];
    for (const [input, reason] of bad) {
      const r = parsePercentOff(input);
      expect(r.ok, String(input)).toBe(false);
      if (!r.ok) {
        expect(r.reason, String(input)).toBe(reason);
        expect(r.message).toMatch(/^percent_off /);
      }
    }
  });
});

describe("parseAmountOff and parseCouponDuration", () => {
  it("takes a whole amount of minor units with its currency", () => {
    expect(parseAmountOff(500, "USD")).toEqual({ ok: true, value: { type: "amount_off", amountOff: 500, currency: "usd" } });
    expect(parseAmountOff(MAX_AMOUNT, "jpy")).toMatchObject({ ok: true });
    for (const bad of [0, -1, 1.5, MAX_AMOUNT + 1, "500", null]) expect(parseAmountOff(bad, "usd")).toMatchObject({ ok: false, reason: "amount_invalid" });
    expect(parseAmountOff(500, undefined)).toMatchObject({ ok: false, reason: "currency_required" });
    expect(parseAmountOff(500, "usdollar")).toMatchObject({ ok: false, reason: "currency_invalid" });
    expect(parseAmountOff(500, 840)).toMatchObject({ ok: false, reason: "currency_invalid" });
  });

  it("requires duration_in_months with, and only with, repeating", () => {
    expect(parseCouponDuration("once", undefined)).toEqual({ ok: true, value: { duration: "once" } });
    expect(parseCouponDuration("forever", null)).toEqual({ ok: true, value: { duration: "forever" } });
    expect(parseCouponDuration("repeating", 2)).toEqual({ ok: true, value: { duration: "repeating", durationInMonths: 2 } });
    expect(parseCouponDuration("repeating", undefined)).toMatchObject({ ok: false, reason: "months_required" });
    for (const m of [0, -1, 1.5, 1201, "2"]) expect(parseCouponDuration("repeating", m)).toMatchObject({ ok: false, reason: "months_invalid" });
    expect(parseCouponDuration("once", 3)).toMatchObject({ ok: false, reason: "months_not_allowed" });
    expect(parseCouponDuration("weekly", undefined)).toMatchObject({ ok: false, reason: "duration_invalid" });
  });
});

describe("discountAmount: the percentage rounds once, half away from zero, and never exceeds its base", () => {
  it("examples", () => {
    expect(discountAmount(pct(2000), 3000, "usd")).toBe(600); // 20% of 30.00
    expect(discountAmount(pct(1500), 3490, "usd")).toBe(524); // 523.5 -> 524
    expect(discountAmount(pct(1250), 1, "usd")).toBe(0); // 0.125 -> 0
    expect(discountAmount(pct(5000), 1, "usd")).toBe(1); // 0.5 -> 1
    expect(discountAmount(pct(10_000), 777, "jpy")).toBe(777);
    expect(discountAmount(pct(2000), 0, "usd")).toBe(0);
    expect(discountAmount(pct(2000), -500, "usd")).toBe(0);
    expect(discountAmount({ type: "amount_off", amountOff: 500, currency: "usd" }, 3000, "USD")).toBe(500);
    expect(discountAmount({ type: "amount_off", amountOff: 5000, currency: "usd" }, 3000, "usd")).toBe(3000);
    expect(discountAmount({ type: "amount_off", amountOff: 5000, currency: "usd" }, -1, "usd")).toBe(0);
  });

  it("is between 0 and the base, and the exact percentage within half a unit (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: -MAX_AMOUNT, max: MAX_AMOUNT }), fc.integer({ min: 1, max: BASIS_POINTS_PER_WHOLE }), (base, bp) => {
        const d = discountAmount(pct(bp), base, "usd");
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(Math.max(0, base));
        if (base > 0) {
          const err = BigInt(d) * 10_000n - BigInt(base) * BigInt(bp);
          expect(2n * (err < 0n ? -err : err) <= 10_000n).toBe(true);
        }
      }),
    );
  });

  it("refuses an amount_off coupon in another currency, and bad inputs", () => {
    expect(() => discountAmount({ type: "amount_off", amountOff: 500, currency: "usd" }, 3000, "eur")).toThrow(/currency mismatch.*usd.*eur/);
    expect(() => discountAmount(pct(2000), 30.5, "usd")).toThrow(/safe integer/);
    expect(() => discountAmount(pct(0), 3000, "usd")).toThrow(/basis points/);
    expect(() => discountAmount(pct(2000), 3000, "zzz")).toThrow(/unknown currency/);
  });
});

describe("durations: which invoices a discount applies to", () => {
  const monthly = (anchor: number, n: number) => addIntervals(new Date(anchor), "month", n).getTime();

  it("the issue's example: 20% off for 2 months discounts exactly the first two invoices", () => {
    const start = Date.UTC(2026, 0, 31, 9, 30); // a Jan 31 anchor: Feb 28, Mar 31, Apr 30 follow
    const duration: CouponDuration = { duration: "repeating", durationInMonths: 2 };
    const coupon = pct(2000);
    let discounted = 0;
    const totals: number[] = [];
    for (let n = 0; n < 5; n++) {
      const applies = discountAppliesToInvoice({ duration, discountStart: start, invoiceDate: monthly(start, n), invoicesAlreadyDiscounted: discounted });
      const t = invoiceTotals({ currency: "usd", lines: [{ amount: 3000, proration: false }], coupon: applies ? coupon : null });
      if (t.discount > 0) discounted++;
      totals.push(t.total);
    }
    expect(totals).toEqual([2400, 2400, 3000, 3000, 3000]);
    expect(discountEnd(duration, start)).toBe(Date.UTC(2026, 2, 31, 9, 30));
  });

  it("repeating N months on a monthly plan discounts exactly N invoices, from any anchor (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) }), fc.integer({ min: 1, max: 36 }), (start, months) => {
        const duration: CouponDuration = { duration: "repeating", durationInMonths: months };
        let count = 0;
        for (let n = 0; n < months + 3; n++) {
          if (discountAppliesToInvoice({ duration, discountStart: start, invoiceDate: monthly(start, n), invoicesAlreadyDiscounted: count })) count++;
        }
        expect(count).toBe(months);
      }),
      { numRuns: 200 },
    );
  });

  it("a discount added mid-period covers the renewals before its end", () => {
    const anchor = Date.UTC(2026, 0, 1);
    const start = Date.UTC(2026, 0, 16); // coupon added on Jan 16, 2 months: ends Mar 16
    const duration: CouponDuration = { duration: "repeating", durationInMonths: 2 };
    const applies = (n: number) => discountAppliesToInvoice({ duration, discountStart: start, invoiceDate: monthly(anchor, n), invoicesAlreadyDiscounted: 0 });
    expect([0, 1, 2, 3].map(applies)).toEqual([false, true, true, false]); // Jan 1 (before), Feb 1, Mar 1, Apr 1 (after)
  });

  it("repeating counts calendar months, whatever the interval: a yearly plan gets one invoice of a 3-month coupon", () => {
    const start = Date.UTC(2026, 4, 1);
    const duration: CouponDuration = { duration: "repeating", durationInMonths: 3 };
    const yearly = (n: number) => addIntervals(new Date(start), "year", n).getTime();
    expect([0, 1].map((n) => discountAppliesToInvoice({ duration, discountStart: start, invoiceDate: yearly(n), invoicesAlreadyDiscounted: n }))).toEqual([true, false]);
  });

  it("once applies to one invoice; forever to every one; none before the start", () => {
    const start = Date.UTC(2026, 0, 1);
    const at = (n: number) => monthly(start, n);
    const once: CouponDuration = { duration: "once" };
    const forever: CouponDuration = { duration: "forever" };
    expect(discountAppliesToInvoice({ duration: once, discountStart: start, invoiceDate: at(0), invoicesAlreadyDiscounted: 0 })).toBe(true);
    expect(discountAppliesToInvoice({ duration: once, discountStart: start, invoiceDate: at(1), invoicesAlreadyDiscounted: 1 })).toBe(false);
    expect(discountAppliesToInvoice({ duration: forever, discountStart: start, invoiceDate: at(600), invoicesAlreadyDiscounted: 600 })).toBe(true);
    for (const duration of [once, forever, { duration: "repeating", durationInMonths: 12 } as const]) {
      expect(discountAppliesToInvoice({ duration, discountStart: start, invoiceDate: start - 1, invoicesAlreadyDiscounted: 0 })).toBe(false);
    }
    expect(discountEnd(once, start)).toBeNull();
    expect(discountEnd(forever, start)).toBeNull();
  });

  it("refuses bad inputs", () => {
    const base = { duration: { duration: "forever" } as CouponDuration, discountStart: 0, invoiceDate: 0 };
    expect(() => discountAppliesToInvoice({ ...base, invoicesAlreadyDiscounted: -1 })).toThrow(/invoicesAlreadyDiscounted/);
    expect(() => discountAppliesToInvoice({ ...base, invoiceDate: "soon", invoicesAlreadyDiscounted: 0 })).toThrow(/invoiceDate must be an ISO 8601/);
    expect(() => discountAppliesToInvoice({ ...base, duration: { duration: "weekly" } as unknown as CouponDuration, invoicesAlreadyDiscounted: 0 })).toThrow(/unknown coupon duration/);
  });
});
