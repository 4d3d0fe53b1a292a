import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addIntervals } from "../../src/domain/billing-calendar";
import { formatMinorDecimal, fromMinorUnits, minorDecimal } from "../../src/domain/decimal";
import { invoiceTotals } from "../../src/domain/invoice-math";
import { formatMinor, MAX_AMOUNT } from "../../src/domain/money";
import { type DecimalTier, type ExactPriceInput, type PricingModel, priceLine } from "../../src/domain/pricing";
import { aggregateUsage, largestBillableUsage, meteredLine, usagePeriodAt, type UsageRecord } from "../../src/domain/usage";

const START = Date.UTC(2026, 2, 1);
const END = Date.UTC(2026, 3, 1);
const period = { start: START, end: END };
const at = (seconds: number) => START + seconds * 1000;
const inc = (quantity: number, s: number): UsageRecord => ({ quantity, timestamp: at(s), action: "increment" });
const set = (quantity: number, s: number): UsageRecord => ({ quantity, timestamp: at(s), action: "set" });

describe("aggregateUsage", () => {
  it("sum adds the usage at each timestamp; set replaces the usage at its own timestamp", () => {
    expect(aggregateUsage([inc(5, 1), inc(7, 2), inc(3, 2)], "sum", period)).toBe(15);
    expect(aggregateUsage([inc(5, 1), inc(7, 2), set(4, 2)], "sum", period)).toBe(9); // the set replaced 7 at second 2
    expect(aggregateUsage([inc(5, 1), set(4, 2), inc(1, 2)], "sum", period)).toBe(10); // 5 + (4 + 1)
  });

  it("max takes the largest usage at any timestamp; last_during_period the usage at the latest", () => {
    const records = [inc(5, 10), inc(9, 20), set(2, 30), inc(1, 30)];
    expect(aggregateUsage(records, "max", period)).toBe(9);
    expect(aggregateUsage(records, "last_during_period", period)).toBe(3);
    // order given is the order recorded: the latest timestamp wins, not the last record
    expect(aggregateUsage([inc(4, 50), inc(8, 40)], "last_during_period", period)).toBe(4);
  });

  it("counts whole seconds: records in the same second share one timestamp", () => {
    const r: UsageRecord[] = [
      { quantity: 5, timestamp: START + 100, action: "increment" },
      { quantity: 2, timestamp: START + 900, action: "set" },
    ];
    expect(aggregateUsage(r, "sum", period)).toBe(2);
  });

  it("keeps to [start, end): a record at the end belongs to the next period", () => {
    const records = [inc(1, -1), inc(2, 0), { quantity: 4, timestamp: END - 1, action: "increment" as const }, { quantity: 8, timestamp: END, action: "increment" as const }];
    expect(aggregateUsage(records, "sum", period)).toBe(6);
    expect(aggregateUsage(records, "sum", { start: END, end: addIntervals(new Date(END), "month", 1).getTime() })).toBe(8);
  });

  it("a period without usage aggregates to 0 under every rule", () => {
    for (const agg of ["sum", "max", "last_during_period"] as const) expect(aggregateUsage([inc(3, -5)], agg, period)).toBe(0);
  });

  it("only increments: sum is the total, max and last are per-second values (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 0, max: 2_000_000 })), { maxLength: 40 }), (raw) => {
        const records = raw.map(([q, s]) => inc(q, s));
        const perSecond = new Map<number, number>();
        for (const [q, s] of raw) perSecond.set(s, (perSecond.get(s) ?? 0) + q);
        expect(aggregateUsage(records, "sum", period)).toBe(raw.reduce((t, [q]) => t + q, 0));
        expect(aggregateUsage(records, "max", period)).toBe(Math.max(0, ...perSecond.values()));
        const last = raw.length ? Math.max(...raw.map(([, s]) => s)) : undefined;
        expect(aggregateUsage(records, "last_during_period", period)).toBe(last === undefined ? 0 : perSecond.get(last));
      }),
    );
  });

  it("refuses bad records, aggregates, periods and overflow", () => {
    expect(() => aggregateUsage([{ quantity: -1, timestamp: START, action: "increment" }], "sum", period)).toThrow(/records\[0\]\.quantity/);
    expect(() => aggregateUsage([{ quantity: 1.5, timestamp: START, action: "increment" }], "sum", period)).toThrow(/quantity/);
    expect(() => aggregateUsage([{ quantity: 1, timestamp: START, action: "decrement" as "set" }], "sum", period)).toThrow(/increment or set/);
    expect(() => aggregateUsage([{ quantity: 1, timestamp: "tomorrow", action: "set" }], "sum", period)).toThrow(/records\[0\]\.timestamp/);
    expect(() => aggregateUsage([], "average" as "sum", period)).toThrow(/aggregate_usage/);
    expect(() => aggregateUsage([], "sum", { start: END, end: START })).toThrow(/end after it starts/);
    const big = Number.MAX_SAFE_INTEGER;
    expect(() => aggregateUsage([inc(big, 1), inc(1, 1)], "sum", period)).toThrow(/overflows/);
    expect(() => aggregateUsage([inc(big, 1), inc(1, 2)], "sum", period)).toThrow(/overflows/);
    expect(aggregateUsage([inc(big, 1), inc(1, 2)], "max", period)).toBe(big);
  });
});

describe("usagePeriodAt", () => {
  it("finds the anchored period holding a timestamp, [start, end)", () => {
    const anchor = Date.UTC(2026, 0, 31, 12);
    expect(usagePeriodAt(anchor, "month", anchor)).toEqual({ index: 0, start: anchor, end: Date.UTC(2026, 1, 28, 12) });
    expect(usagePeriodAt(anchor, "month", Date.UTC(2026, 1, 28, 12))).toEqual({ index: 1, start: Date.UTC(2026, 1, 28, 12), end: Date.UTC(2026, 2, 31, 12) });
    expect(usagePeriodAt(anchor, "month", Date.UTC(2026, 1, 28, 11, 59, 59, 999)).index).toBe(0);
    expect(() => usagePeriodAt(anchor, "month", anchor - 1)).toThrow(/before the subscription's first period/);
  });

  it("every timestamp lies in the period it is given (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) }), fc.integer({ min: 0, max: 5 * 365 * 86_400_000 }), fc.constantFrom("month", "year") as fc.Arbitrary<"month" | "year">, (anchor, offset, interval) => {
        const p = usagePeriodAt(anchor, interval, anchor + offset);
        expect(p.start).toBeLessThanOrEqual(anchor + offset);
        expect(anchor + offset).toBeLessThan(p.end);
        expect(p.start).toBe(addIntervals(new Date(anchor), interval, p.index).getTime());
      }),
    );
  });
});

describe("meteredLine", () => {
  it("the issue's example: 1,000 units at 0.35 cent invoice 3.50 at the period's end", () => {
    const line = meteredLine({
      records: Array.from({ length: 10 }, (_, i) => inc(100, i * 3600)),
      aggregate: "sum",
      period,
      pricingModel: "fixed",
      price: { unitAmountDecimal: minorDecimal("0.35"), tiers: null },
    });
    expect(line).toEqual({ quantity: 1000, exactAmount: minorDecimal("350"), amount: 350 });
    expect(formatMinor(invoiceTotals({ currency: "usd", lines: [{ amount: line.amount, proration: false }] }).amountDue, 2)).toBe("3.50");
  });

  it("one unit at 0.35 rounds to 0; 2 units (0.70) to 1", () => {
    const price = { unitAmountDecimal: minorDecimal("0.35"), tiers: null };
    expect(meteredLine({ records: [inc(1, 1)], aggregate: "sum", period, pricingModel: "fixed", price }).amount).toBe(0);
    expect(meteredLine({ records: [inc(2, 1)], aggregate: "sum", period, pricingModel: "fixed", price }).amount).toBe(1);
    expect(meteredLine({ records: [], aggregate: "sum", period, pricingModel: "fixed", price })).toEqual({ quantity: 0, exactAmount: fromMinorUnits(0), amount: 0 });
  });

  it("prices the period's usage through graduated decimal tiers, rounding the line once", () => {
    const tiers: DecimalTier[] = [
      { upTo: 1000, unitAmountDecimal: minorDecimal("0"), flatAmountDecimal: minorDecimal("0") },
      { upTo: 10_000, unitAmountDecimal: minorDecimal("0.35"), flatAmountDecimal: minorDecimal("0") },
      { upTo: null, unitAmountDecimal: minorDecimal("0.125"), flatAmountDecimal: minorDecimal("0") },
    ];
    const line = meteredLine({ records: [inc(12_345, 1)], aggregate: "sum", period, pricingModel: "graduated", price: { unitAmountDecimal: null, tiers } });
    // 1,000 free + 9,000 × 0.35 + 2,345 × 0.125 = 3150 + 293.125
    expect(formatMinorDecimal(line.exactAmount)).toBe("3443.125");
    expect(line.amount).toBe(3443);
  });

  it("is exact in JPY, USD and KWD: 1,000 units at 0.35 of the minor unit is 350 minor units in each", () => {
    for (const [currency, exponent, shown] of [["jpy", 0, "350"], ["usd", 2, "3.50"], ["kwd", 3, "0.350"]] as const) {
      const line = meteredLine({ records: [inc(1000, 5)], aggregate: "max", period, pricingModel: "fixed", price: { unitAmountDecimal: minorDecimal("0.35"), tiers: null } });
      expect(formatMinor(invoiceTotals({ currency, lines: [{ amount: line.amount, proration: false }] }).total, exponent)).toBe(shown);
    }
  });
});

describe("largestBillableUsage", () => {
  // Independent of the implementation's own test: the line's amount as an invoice rounds it.
  const rounded = (model: PricingModel, price: ExactPriceInput, q: number) => {
    try {
      return priceLine(model, price, q) <= MAX_AMOUNT;
    } catch {
      return false; // beyond a safe integer
    }
  };
  const tier = (upTo: number | null, unit: string, flat = 0): DecimalTier => ({ upTo, unitAmountDecimal: minorDecimal(unit), flatAmountDecimal: fromMinorUnits(flat) });

  it("is the last usage a fixed unit price can charge, to the unit", () => {
    expect(largestBillableUsage("fixed", { unitAmountDecimal: minorDecimal("1"), tiers: null })).toBe(MAX_AMOUNT);
    expect(largestBillableUsage("fixed", { unitAmountDecimal: minorDecimal("1000"), tiers: null })).toBe(Math.floor(MAX_AMOUNT / 1000));
    // 0.35 of a minor unit: the rounded price of Q units stays within MAX_AMOUNT, Q + 1 does not.
    const q = largestBillableUsage("fixed", { unitAmountDecimal: minorDecimal("0.35"), tiers: null });
    expect(priceLine("fixed", { unitAmountDecimal: minorDecimal("0.35"), tiers: null }, q)).toBeLessThanOrEqual(MAX_AMOUNT);
    expect(priceLine("fixed", { unitAmountDecimal: minorDecimal("0.35"), tiers: null }, q + 1)).toBeGreaterThan(MAX_AMOUNT);
    // A price so small that no safe usage reaches the limit.
    expect(largestBillableUsage("fixed", { unitAmountDecimal: minorDecimal("0.000000000001"), tiers: null })).toBe(Number.MAX_SAFE_INTEGER);
    // A free plan: any usage is chargeable (at 0).
    expect(largestBillableUsage("fixed", { unitAmountDecimal: minorDecimal("0"), tiers: null })).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("stops a volume plan at the first usage past the limit, though a later tier would price it lower again", () => {
    // 10 units at the limit's tenth each reach MAX_AMOUNT exactly; the 11th unit is past it,
    // though from 1,000 units on the price falls to 1 per unit.
    const tenth = String(Math.floor(MAX_AMOUNT / 10));
    const price = { unitAmountDecimal: null, tiers: [tier(999, tenth), tier(null, "1")] };
    expect(largestBillableUsage("volume", price)).toBe(10);
    expect(rounded("volume", price, 1_000)).toBe(true); // cheaper again, but not reachable through 11..999
  });

  it("bounds a flat fee alone: a tier whose flat fee is past the limit ends the usage before it", () => {
    const price = { unitAmountDecimal: null, tiers: [tier(5, "1"), tier(null, "0", MAX_AMOUNT + 1)] };
    expect(largestBillableUsage("graduated", price)).toBe(5);
    expect(largestBillableUsage("volume", price)).toBe(5);
  });

  it("every usage up to it is chargeable and the next one is not (graduated, volume, fixed)", () => {
    const amount = fc.oneof(fc.constantFrom("0", "1", "0.35", "7", "123456.5"), fc.integer({ min: 1, max: 10_000_000_000 }).map(String));
    const tiers = fc
      .uniqueArray(fc.integer({ min: 1, max: 1_000_000_000 }), { minLength: 0, maxLength: 4 })
      .chain((bounds) => fc.tuple(fc.constant([...bounds].sort((a, b) => a - b)), fc.array(fc.tuple(amount, fc.integer({ min: 0, max: 1_000_000 })), { minLength: bounds.length + 1, maxLength: bounds.length + 1 })))
      .map(([bounds, prices]) => prices.map(([unit, flat], i) => tier(i < bounds.length ? bounds[i] : null, unit, flat)));
    const plan = fc.oneof(
      amount.map((unit) => ({ model: "fixed" as const, price: { unitAmountDecimal: minorDecimal(unit), tiers: null } })),
      tiers.map((t) => ({ model: "graduated" as const, price: { unitAmountDecimal: null, tiers: t } })),
      tiers.map((t) => ({ model: "volume" as const, price: { unitAmountDecimal: null, tiers: t } })),
    );
    fc.assert(
      fc.property(plan, fc.double({ min: 0, max: 1, noNaN: true }), ({ model, price }, fraction) => {
        const q = largestBillableUsage(model, price);
        if (q < Number.MAX_SAFE_INTEGER) expect(rounded(model, price, q + 1)).toBe(false);
        // Any usage from 0 to Q, and the tier bounds within it, are chargeable.
        const probes = [0, q, Math.floor(q * fraction), ...(price.tiers ?? []).flatMap((t) => (t.upTo !== null && t.upTo <= q ? [t.upTo] : []))];
        for (const p of probes) expect(rounded(model, price, p)).toBe(true);
      }),
    );
  });
});
