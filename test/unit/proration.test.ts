import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addIntervals } from "../../src/domain/billing-calendar";
import { formatMinorDecimal, fromMinorUnits, minorDecimal, type MinorDecimal } from "../../src/domain/decimal";
import { DAY_MS } from "../../src/domain/instants";
import { invoiceTotals } from "../../src/domain/invoice-math";
import { formatMinor } from "../../src/domain/money";
import { priceExact, type DecimalTier } from "../../src/domain/pricing";
import {
  openCharge,
  periodLineAmount,
  prorate,
  prorateChange,
  restartCycle,
  unusedAmount,
  type OpenCharge,
} from "../../src/domain/proration";

const SCALE = 10n ** 12n;
const T0 = Date.UTC(2026, 0, 1);
const abs = (x: bigint) => (x < 0n ? -x : x);
const sec = (ms: number) => BigInt(Math.floor(ms / 1000));

/** A 30-day period from T0 at `amount` minor units. */
const thirtyDays = (amount: number, currency = "usd", amountCharged?: number) =>
  openCharge({ currency, periodStart: T0, periodEnd: T0 + 30 * DAY_MS, periodPrice: fromMinorUnits(amount), amountCharged });

// ---- arbitraries ----

const graduated: DecimalTier[] = [
  { upTo: 3, unitAmountDecimal: minorDecimal("999.5"), flatAmountDecimal: minorDecimal("10") },
  { upTo: 10, unitAmountDecimal: minorDecimal("700.35"), flatAmountDecimal: fromMinorUnits(0) },
  { upTo: null, unitAmountDecimal: minorDecimal("650.000000000001"), flatAmountDecimal: minorDecimal("0.5") },
];

/** A period price: an integer, a sub-cent decimal, or a plan at a quantity (fixed decimal, volume, graduated). */
const priceArb: fc.Arbitrary<MinorDecimal> = fc.oneof(
  fc.integer({ min: 0, max: 10_000_000 }).map(fromMinorUnits),
  fc.bigInt({ min: 0n, max: 10_000_000n * SCALE }).map((scaled) => ({ scaled })),
  fc.tuple(fc.constantFrom("fixed", "volume", "graduated") as fc.Arbitrary<"fixed" | "volume" | "graduated">, fc.integer({ min: 0, max: 50 })).map(
    ([model, q]) => priceExact(model, { unitAmountDecimal: minorDecimal("1999.99"), tiers: graduated }, q),
  ),
);

/** A period: either an anchored calendar month/year, or any length of at least one second. */
const periodArb = fc.oneof(
  fc.record({ start: fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) }), interval: fc.constantFrom("month", "year") as fc.Arbitrary<"month" | "year"> }).map(
    ({ start, interval }) => ({ start, end: addIntervals(new Date(start), interval, 1).getTime() }),
  ),
  fc.record({ start: fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) }), seconds: fc.integer({ min: 1, max: 400 * 86_400 }) }).map(
    ({ start, seconds }) => {
      const s = Math.ceil(start / 1000) * 1000;
      return { start: s, end: s + seconds * 1000 };
    },
  ),
);

type Step = { at: number; price: MinorDecimal | "same" | "original" };

/** A period, its first price, and 0..12 changes in time order (same instants, repeats and returns included). */
const scenarioArb = fc
  .tuple(
    periodArb,
    priceArb,
    fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.oneof({ weight: 3, arbitrary: priceArb }, fc.constant("same" as const), fc.constant("original" as const))), { maxLength: 12 }),
  )
  .map(([period, first, raw]) => {
    const span = period.end - period.start;
    const steps: Step[] = raw
      .map(([f, price]) => ({ at: period.start + Math.floor(f * span), price }))
      .sort((a, b) => a.at - b.at);
    return { period, first, steps };
  });

interface Run {
  billed: bigint; // sum of every line
  lines: number; // how many lines were rounded
  weightedNumerator: bigint; // time-weighted price × (10^12 × period seconds)
  denominator: bigint;
  credited: bigint;
  charged: bigint;
}

/** Runs a scenario through the proration functions and the exact time-weighted model side by side. */
function run(period: { start: number; end: number }, first: MinorDecimal, steps: Step[], check: (before: OpenCharge, credit: number) => void = () => {}): Run {
  let state = openCharge({ currency: "usd", periodStart: period.start, periodEnd: period.end, periodPrice: first });
  let billed = BigInt(state.amount);
  let charged = BigInt(state.amount);
  let credited = 0n;
  let lines = 1;
  const L = sec(period.end) - sec(period.start);
  let current = first;
  let from = sec(period.start);
  let weighted = 0n;
  for (const step of steps) {
    const next = step.price === "same" ? current : step.price === "original" ? first : step.price;
    const r = prorateChange(state, { currency: "usd", periodPrice: next, changeAt: step.at });
    if (r.lines.length === 2) {
      const [credit, charge] = r.lines;
      expect(credit.kind).toBe("unused_time");
      expect(charge.kind).toBe("remaining_time");
      expect(credit.amount).toBeLessThanOrEqual(0);
      expect(charge.amount).toBeGreaterThanOrEqual(0);
      check(state, -credit.amount);
      billed += BigInt(credit.amount + charge.amount);
      credited += BigInt(-credit.amount);
      charged += BigInt(charge.amount);
      lines += 2;
    } else {
      expect(formatMinorDecimal(next)).toBe(state.periodPrice); // only a same-price change is no change
      expect(r.next).toBe(state);
    }
    weighted += current.scaled * (sec(step.at) - from);
    from = sec(step.at);
    current = next;
    state = r.next;
  }
  weighted += current.scaled * (sec(period.end) - from);
  return { billed, lines, weightedNumerator: weighted, denominator: SCALE * L, credited, charged };
}

describe("prorations over any sequence of changes within a period (property)", () => {
  it("full period + credits + charges are within half a minor unit per line of the time-weighted price", () => {
    fc.assert(
      fc.property(scenarioArb, ({ period, first, steps }) => {
        const r = run(period, first, steps);
        // |billed − W| ≤ lines / 2, compared exactly: |billed × den − num| × 2 ≤ lines × den
        expect(2n * abs(r.billed * r.denominator - r.weightedNumerator) <= BigInt(r.lines) * r.denominator).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("across renewals of an anchored monthly or yearly subscription, all its lines stay within half a unit each of the time-weighted price", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) }),
        fc.constantFrom("month", "year") as fc.Arbitrary<"month" | "year">,
        fc.integer({ min: 1, max: 4 }),
        priceArb,
        fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), priceArb), { maxLength: 15 }),
        (anchor, interval, periods, first, raw) => {
          const bound = (n: number) => addIntervals(new Date(anchor), interval, n).getTime();
          const total = bound(periods) - anchor;
          const changes = raw.map(([f, price]) => ({ at: anchor + Math.floor(f * total), price })).sort((a, b) => a.at - b.at);
          let price = first;
          for (let p = 0; p < periods; p++) {
            const [start, end] = [bound(p), bound(p + 1)];
            let state = openCharge({ currency: "usd", periodStart: start, periodEnd: end, periodPrice: price }); // the renewal
            let periodBilled = BigInt(state.amount);
            let periodLines = 1;
            let from = sec(start);
            let weighted = 0n;
            for (const c of changes.filter((c) => c.at >= start && c.at < end)) {
              const r = prorateChange(state, { currency: "usd", periodPrice: c.price, changeAt: c.at });
              for (const l of r.lines) periodBilled += BigInt(l.amount);
              periodLines += r.lines.length;
              weighted += price.scaled * (sec(c.at) - from);
              from = sec(c.at);
              price = c.price;
              state = r.next;
            }
            weighted += price.scaled * (sec(end) - from);
            // each period on its own: its renewal line plus its prorations against its time-weighted price
            const den = SCALE * (sec(end) - sec(start));
            expect(2n * abs(periodBilled * den - weighted) <= BigInt(periodLines) * den).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("never credits more than the open charge it reverses, nor more than was charged in all", () => {
    fc.assert(
      fc.property(scenarioArb, ({ period, first, steps }) => {
        const r = run(period, first, steps, (before, credit) => {
          expect(credit).toBeGreaterThanOrEqual(0);
          expect(credit).toBeLessThanOrEqual(before.amount);
        });
        expect(r.credited <= r.charged).toBe(true);
        expect(r.billed >= 0n).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("an upgrade then a downgrade back charges only the time used at the higher price", () => {
    fc.assert(
      fc.property(
        periodArb,
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (period, a, b, f1, f2) => {
          fc.pre(a !== b);
          const span = period.end - period.start;
          const [t1, t2] = [period.start + Math.floor(Math.min(f1, f2) * span), period.start + Math.floor(Math.max(f1, f2) * span)];
          const s0 = openCharge({ currency: "usd", periodStart: period.start, periodEnd: period.end, periodPrice: fromMinorUnits(a) });
          const up = prorateChange(s0, { currency: "usd", periodPrice: fromMinorUnits(b), changeAt: t1 });
          const down = prorateChange(up.next, { currency: "usd", periodPrice: fromMinorUnits(a), changeAt: t2 });
          const net = [...up.lines, ...down.lines].reduce((s, l) => s + l.amount, 0);
          // exact extra value of the time at b: (b − a) × (t2 − t1) / L; four lines, half a unit each
          const L = sec(period.end) - sec(period.start);
          const extra = BigInt(b - a) * (sec(t2) - sec(t1));
          expect(2n * abs(BigInt(net) * L - extra) <= 4n * L).toBe(true);
          if (sec(t1) === sec(t2)) expect(net).toBe(0); // nothing used at b: nothing charged, nothing credited
          // and the net never exceeds what the whole remaining time at b would have cost
          expect(Math.abs(net)).toBeLessThanOrEqual(Math.abs(b - a) + 2);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("the same change made twice prorates once: the second is no change", () => {
    fc.assert(
      fc.property(periodArb, priceArb, priceArb, fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }), (period, p0, p1, f1, f2) => {
        const span = period.end - period.start;
        const s0 = openCharge({ currency: "usd", periodStart: period.start, periodEnd: period.end, periodPrice: p0 });
        const once = prorateChange(s0, { currency: "usd", periodPrice: p1, changeAt: period.start + Math.floor(Math.min(f1, f2) * span) });
        const twice = prorateChange(once.next, { currency: "usd", periodPrice: p1, changeAt: period.start + Math.floor(Math.max(f1, f2) * span) });
        expect(twice.lines).toEqual([]);
        expect(twice.next).toEqual(once.next);
      }),
    );
  });

  it("with a percentage coupon on the period, stays within half a unit per line of the discounted time-weighted price", () => {
    fc.assert(
      fc.property(scenarioArb, fc.integer({ min: 1, max: 10_000 }), ({ period, first, steps }, bp) => {
        // the full period is invoiced with the coupon: its line, then the invoice discount (two roundings)
        const full = periodLineAmount(first);
        const totals = invoiceTotals({ currency: "usd", lines: [{ amount: full, proration: false }], coupon: { type: "percent_off", basisPoints: bp } });
        let state = openCharge({ currency: "usd", periodStart: period.start, periodEnd: period.end, periodPrice: first, amountCharged: totals.total });
        let billed = BigInt(totals.total);
        let lines = 2;
        let current = first;
        let from = sec(period.start);
        let weighted = 0n;
        for (const step of steps) {
          const next = step.price === "same" ? current : step.price === "original" ? first : step.price;
          const r = prorateChange(state, { currency: "usd", periodPrice: next, changeAt: step.at, percentOffBasisPoints: bp });
          for (const l of r.lines) billed += BigInt(l.amount);
          lines += r.lines.length;
          weighted += current.scaled * (sec(step.at) - from);
          from = sec(step.at);
          current = next;
          state = r.next;
        }
        weighted += current.scaled * (sec(period.end) - from);
        const den = SCALE * (sec(period.end) - sec(period.start)) * 10_000n;
        const num = weighted * BigInt(10_000 - bp);
        expect(2n * abs(billed * den - num) <= BigInt(lines) * den).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe("proration examples", () => {
  it("the issue's example: 30.00 -> 60.00 halfway through a 30-day period invoices 15.00 at once", () => {
    const r = prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(6000), changeAt: T0 + 15 * DAY_MS });
    expect(r.lines.map((l) => l.amount)).toEqual([-1500, 3000]);
    expect(r.lines.every((l) => l.proration && l.periodStart === T0 + 15 * DAY_MS && l.periodEnd === T0 + 30 * DAY_MS)).toBe(true);
    // always_invoice: the two lines are an invoice of their own
    const invoice = invoiceTotals({ currency: "usd", lines: r.lines });
    expect(invoice.amountDue).toBe(1500);
    expect(formatMinor(invoice.amountDue, 2)).toBe("15.00");
    expect(r.next).toEqual({ currency: "usd", amount: 3000, coversFrom: T0 + 15 * DAY_MS, periodStart: T0, periodEnd: T0 + 30 * DAY_MS, periodPrice: "6000" });
  });

  it("is exact in JPY (0 decimals), USD (2) and KWD (3)", () => {
    const cases: [string, number, number, string][] = [
      ["jpy", 3000, 6000, "1500"], // ¥3,000 -> ¥6,000: ¥1,500
      ["usd", 3000, 6000, "15.00"],
      ["kwd", 30_000, 60_000, "15.000"], // 30.000 KWD -> 60.000 KWD: 15.000 KWD
    ];
    const exponents: Record<string, number> = { jpy: 0, usd: 2, kwd: 3 };
    for (const [currency, from, to, due] of cases) {
      const r = prorateChange(thirtyDays(from, currency), { currency, periodPrice: fromMinorUnits(to), changeAt: T0 + 15 * DAY_MS });
      expect(formatMinor(invoiceTotals({ currency, lines: r.lines }).amountDue, exponents[currency])).toBe(due);
    }
  });

  it("Stripe's documented example: 10 USD -> 20 USD halfway is −5 USD and +10 USD", () => {
    const s = openCharge({ currency: "usd", periodStart: T0, periodEnd: T0 + 30 * DAY_MS, periodPrice: fromMinorUnits(1000) });
    expect(prorateChange(s, { currency: "usd", periodPrice: fromMinorUnits(2000), changeAt: T0 + 15 * DAY_MS }).lines.map((l) => l.amount)).toEqual([-500, 1000]);
  });

  it("a second change credits the previous proration's charge, not the price", () => {
    // day 10: 0 -> 1.00 for 20 of 30 days = 0.6667 -> charged 67
    const first = prorateChange(thirtyDays(0), { currency: "usd", periodPrice: fromMinorUnits(100), changeAt: T0 + 10 * DAY_MS });
    expect(first.lines.map((l) => l.amount)).toEqual([0, 67]);
    // day 20: back to 0. Half of what was charged (67) is unused: 33.5 -> 34 (the price would say 33.33 -> 33)
    const second = prorateChange(first.next, { currency: "usd", periodPrice: fromMinorUnits(0), changeAt: T0 + 20 * DAY_MS });
    expect(second.lines.map((l) => l.amount)).toEqual([-34, 0]);
  });

  it("credits what a discounted period actually cost, never the undiscounted price", () => {
    // 30.00 with 20% off: the line is 3000, the invoice discount 600, the customer paid 2400
    const s = thirtyDays(3000, "usd", 2400);
    const r = prorateChange(s, { currency: "usd", periodPrice: fromMinorUnits(1000), changeAt: T0 + 15 * DAY_MS });
    expect(r.lines.map((l) => l.amount)).toEqual([-1200, 500]); // 1200 is half of 2400, not half of 3000
    // with the coupon still applying to the period, the charge carries it too: 500 × 0.8
    const withCoupon = prorateChange(s, { currency: "usd", periodPrice: fromMinorUnits(1000), changeAt: T0 + 15 * DAY_MS, percentOffBasisPoints: 2000 });
    expect(withCoupon.lines.map((l) => l.amount)).toEqual([-1200, 400]);
  });

  it("rounds each line once, half away from zero, on whole seconds", () => {
    const s = openCharge({ currency: "usd", periodStart: T0, periodEnd: T0 + 4000, periodPrice: fromMinorUnits(3) }); // 4 seconds
    // at +2.999 s (2 whole seconds): credit 3 × 2/4 = 1.5 -> 2; charge 5 × 2/4 = 2.5 -> 3
    const r = prorateChange(s, { currency: "usd", periodPrice: fromMinorUnits(5), changeAt: T0 + 2999 });
    expect(r.lines.map((l) => l.amount)).toEqual([-2, 3]);
    // a sub-cent price: 1,000 units at 0.35 for half the period = 175
    const d = openCharge({ currency: "usd", periodStart: T0, periodEnd: T0 + 30 * DAY_MS, periodPrice: fromMinorUnits(0) });
    const p = prorateChange(d, { currency: "usd", periodPrice: priceExact("fixed", { unitAmountDecimal: minorDecimal("0.35"), tiers: null }, 1000), changeAt: T0 + 15 * DAY_MS });
    expect(p.lines.map((l) => l.amount)).toEqual([0, 175]);
  });

  it("a quantity change prorates the tiered price of the new quantity", () => {
    const tiers: DecimalTier[] = [
      { upTo: 5, unitAmountDecimal: fromMinorUnits(700), flatAmountDecimal: fromMinorUnits(0) },
      { upTo: 10, unitAmountDecimal: fromMinorUnits(650), flatAmountDecimal: fromMinorUnits(0) },
      { upTo: null, unitAmountDecimal: fromMinorUnits(600), flatAmountDecimal: fromMinorUnits(0) },
    ];
    const price = (q: number) => priceExact("graduated", { unitAmountDecimal: null, tiers }, q);
    const s = openCharge({ currency: "usd", periodStart: T0, periodEnd: T0 + 30 * DAY_MS, periodPrice: price(5) }); // 3500
    const r = prorateChange(s, { currency: "usd", periodPrice: price(6), changeAt: T0 + 15 * DAY_MS }); // 4150
    expect(r.lines.map((l) => l.amount)).toEqual([-1750, 2075]);
  });

  it("a change at the period's start replaces the charge; at its end it costs nothing", () => {
    const atStart = prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(6000), changeAt: T0 });
    expect(atStart.lines.map((l) => l.amount)).toEqual([-3000, 6000]);
    const atEnd = prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(6000), changeAt: T0 + 30 * DAY_MS });
    expect(atEnd.lines.map((l) => l.amount)).toEqual([0, 0]);
  });

  it("prorates the first change in one call, with prices as integers or decimal text", () => {
    const r = prorate({
      currency: "usd",
      periodStart: "2026-01-01T00:00:00Z",
      periodEnd: "2026-01-31T00:00:00Z",
      changeAt: "2026-01-16T00:00:00Z",
      oldPeriodPrice: 3000,
      newPeriodPrice: "6000.000",
    });
    expect(r.lines.map((l) => l.amount)).toEqual([-1500, 3000]);
    expect(r.next.periodPrice).toBe("6000");
    // sub-cent period prices: 100.5 for the whole period, 0.35 × 1,000 = 350 from halfway
    const d = prorate({ currency: "usd", periodStart: T0, periodEnd: T0 + 30 * DAY_MS, changeAt: T0 + 15 * DAY_MS, oldPeriodPrice: "100.5", newPeriodPrice: "350" });
    expect(periodLineAmount("100.5")).toBe(101);
    expect(d.lines.map((l) => l.amount)).toEqual([-51, 175]); // 101 × 1/2 = 50.5 -> 51
    expect(() => prorate({ currency: "usd", periodStart: T0, periodEnd: T0 + DAY_MS, changeAt: T0, oldPeriodPrice: -1, newPeriodPrice: 1 })).toThrow(RangeError);
    expect(() => prorate({ currency: "usd", periodStart: T0, periodEnd: T0 + DAY_MS, changeAt: T0, oldPeriodPrice: 1, newPeriodPrice: "1e3" })).toThrow(/exponent/);
    expect(() => prorate({ currency: "usd", periodStart: T0, periodEnd: T0 + DAY_MS, changeAt: T0, oldPeriodPrice: 1, newPeriodPrice: { scaled: -1n } })).toThrow(/non-negative MinorDecimal/);
  });

  it("takes ISO 8601 instants as well as epoch ms", () => {
    const s = openCharge({ currency: "USD", periodStart: "2026-01-01T00:00:00Z", periodEnd: "2026-01-31T00:00:00Z", periodPrice: fromMinorUnits(3000) });
    expect(s.currency).toBe("usd");
    const r = prorateChange(s, { currency: "usd", periodPrice: fromMinorUnits(6000), changeAt: "2026-01-16T00:00:00.000Z" });
    expect(r.lines.map((l) => l.amount)).toEqual([-1500, 3000]);
  });
});

describe("a changed interval restarts the cycle", () => {
  it("credits the unused time and starts a new anchored period charged in full", () => {
    const s = thirtyDays(3000);
    const at = T0 + 10 * DAY_MS;
    const r = restartCycle(s, { currency: "usd", periodPrice: fromMinorUnits(30_000), changeAt: at, interval: "year" });
    expect(r.credit.amount).toBe(-2000); // 20 of 30 days unused
    expect(r.credit.proration).toBe(true);
    expect(r.newPeriod).toEqual({ start: at, end: Date.UTC(2027, 0, 11) });
    expect(r.billingAnchor).toBe(at);
    expect(r.periodAmount).toBe(30_000);
    expect(unusedAmount(s, at)).toBe(2000);
  });

  it("credits the last proration's charge after a change within the period", () => {
    const up = prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(6000), changeAt: T0 + 15 * DAY_MS });
    const r = restartCycle(up.next, { currency: "usd", periodPrice: fromMinorUnits(100), changeAt: T0 + 20 * DAY_MS, interval: "month" });
    expect(r.credit.amount).toBe(-2000); // 10 of the 15 days the 3000 charge covered
    expect(r.newPeriod.end).toBe(Date.UTC(2026, 1, 21));
  });
});

describe("proration errors", () => {
  it("refuses a price in another currency", () => {
    expect(() => prorateChange(thirtyDays(3000), { currency: "eur", periodPrice: fromMinorUnits(6000), changeAt: T0 + DAY_MS })).toThrow(/currency mismatch.*usd.*eur/);
    expect(() => restartCycle(thirtyDays(3000), { currency: "jpy", periodPrice: fromMinorUnits(1), changeAt: T0, interval: "month" })).toThrow(/currency mismatch/);
    expect(() => prorateChange(thirtyDays(3000), { currency: "xxx", periodPrice: fromMinorUnits(6000), changeAt: T0 })).toThrow(/not a known currency/);
    expect(() => openCharge({ currency: "dollars", periodStart: T0, periodEnd: T0 + DAY_MS, periodPrice: fromMinorUnits(1) })).toThrow(/not a known currency/);
  });

  it("refuses changes out of time order or outside the period", () => {
    const up = prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(6000), changeAt: T0 + 15 * DAY_MS });
    expect(() => prorateChange(up.next, { currency: "usd", periodPrice: fromMinorUnits(1), changeAt: T0 + 14 * DAY_MS })).toThrow(/before the last change/);
    expect(() => prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(1), changeAt: T0 + 31 * DAY_MS })).toThrow(/after the period's end/);
    expect(() => unusedAmount(thirtyDays(3000), T0 - 1)).toThrow(/within what the open charge covers/);
    expect(() => prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: fromMinorUnits(1), changeAt: "yesterday" })).toThrow(/ISO 8601/);
  });

  it("refuses a bad coupon percentage, a bad period and a broken open charge", () => {
    const change = { currency: "usd", periodPrice: fromMinorUnits(1), changeAt: T0 };
    expect(() => prorateChange(thirtyDays(3000), { ...change, percentOffBasisPoints: 10_001 })).toThrow(/percentOffBasisPoints/);
    expect(() => prorateChange(thirtyDays(3000), { ...change, percentOffBasisPoints: 12.5 })).toThrow(/percentOffBasisPoints/);
    expect(() => openCharge({ currency: "usd", periodStart: T0, periodEnd: T0 + 999, periodPrice: fromMinorUnits(1) })).toThrow(/at least a second/);
    expect(() => openCharge({ currency: "usd", periodStart: T0, periodEnd: T0 + DAY_MS, periodPrice: fromMinorUnits(1), amountCharged: -1 })).toThrow(/must not be negative/);
    const broken: OpenCharge = { ...thirtyDays(3000), coversFrom: T0 + 31 * DAY_MS };
    expect(() => prorateChange(broken, change)).toThrow(/coversFrom must lie within its period/);
    expect(() => prorateChange({ ...thirtyDays(3000), amount: 1.5 }, change)).toThrow(/amount must be a safe integer/);
  });

  it("refuses an overflowing line", () => {
    const huge = { scaled: BigInt(Number.MAX_SAFE_INTEGER) * 2n * SCALE };
    expect(() => prorateChange(thirtyDays(3000), { currency: "usd", periodPrice: huge, changeAt: T0 })).toThrow(/overflows/);
  });
});
