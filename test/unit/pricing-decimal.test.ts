import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatMinorDecimal, fromMinorUnits, minorDecimal, type MinorDecimal } from "../../src/domain/decimal";
import {
  decimalTier,
  priceExact,
  priceFor,
  priceGraduatedExact,
  priceLine,
  priceVolumeExact,
  validateDecimalTiers,
  type DecimalTier,
  type Tier,
} from "../../src/domain/pricing";

const SCALE = 10n ** 12n;
const dec = (text: string) => minorDecimal(text);

/** A decimal of minor units with up to 12 decimals below `maxMinor`. */
const decArb = (maxMinor: number) =>
  fc.bigInt({ min: 0n, max: BigInt(maxMinor) * SCALE }).map((scaled): MinorDecimal => ({ scaled }));

const decimalTiersArb = fc
  .tuple(
    fc.uniqueArray(fc.integer({ min: 1, max: 200 }), { minLength: 0, maxLength: 5 }),
    fc.array(fc.record({ unitAmountDecimal: decArb(1000), flatAmountDecimal: decArb(10_000) }), { minLength: 6, maxLength: 6 }),
  )
  .map(([bounds, amounts]): DecimalTier[] => [...[...bounds].sort((a, b) => a - b), null].map((upTo, i) => ({ upTo, ...amounts[i] })));

/** Independent model: price unit by unit (graduated) or by the tier reached (volume), as exact fractions of 10^-12. */
function modelExact(model: "volume" | "graduated", tiers: DecimalTier[], q: number): bigint {
  if (q === 0) return 0n;
  const tierOf = (unit: number) => tiers.findIndex((t) => t.upTo === null || unit <= t.upTo);
  if (model === "volume") {
    const t = tiers[tierOf(q)];
    return t.unitAmountDecimal.scaled * BigInt(q) + t.flatAmountDecimal.scaled;
  }
  let total = 0n;
  const flats = new Set<number>();
  for (let unit = 1; unit <= q; unit++) {
    const i = tierOf(unit);
    total += tiers[i].unitAmountDecimal.scaled;
    flats.add(i);
  }
  for (const i of flats) total += tiers[i].flatAmountDecimal.scaled;
  return total;
}

const roundRef = (n: bigint) => (2n * n + SCALE) / (2n * SCALE);

describe("exact tiered pricing with decimal amounts", () => {
  it("prices the DESIGN.md example exactly as the integer functions do", () => {
    const tiers: Tier[] = [
      { upTo: 5, unitAmount: 700, flatAmount: 0 },
      { upTo: 10, unitAmount: 650, flatAmount: 0 },
      { upTo: null, unitAmount: 600, flatAmount: 0 },
    ];
    const d = tiers.map(decimalTier);
    expect(priceLine("volume", { unitAmountDecimal: null, tiers: d }, 6)).toBe(3900);
    expect(priceLine("graduated", { unitAmountDecimal: null, tiers: d }, 6)).toBe(4150);
    expect(priceLine("volume", { unitAmountDecimal: null, tiers: d }, 20)).toBe(12000);
    expect(priceLine("graduated", { unitAmountDecimal: null, tiers: d }, 20)).toBe(12750);
  });

  it("agrees with priceFor on integer amounts for every quantity >= 1", () => {
    const intTiersArb = fc
      .tuple(
        fc.uniqueArray(fc.integer({ min: 1, max: 1000 }), { maxLength: 5 }),
        fc.array(fc.record({ unitAmount: fc.nat(100_000), flatAmount: fc.nat(100_000) }), { minLength: 6, maxLength: 6 }),
      )
      .map(([b, a]): Tier[] => [...[...b].sort((x, y) => x - y), null].map((upTo, i) => ({ upTo, ...a[i] })));
    fc.assert(
      fc.property(intTiersArb, fc.integer({ min: 1, max: 5000 }), (tiers, q) => {
        const d = tiers.map(decimalTier);
        for (const model of ["volume", "graduated"] as const) {
          expect(priceLine(model, { unitAmountDecimal: null, tiers: d }, q)).toBe(priceFor(model, { unitAmount: 0, tiers }, q));
        }
      }),
    );
  });

  it("matches an independent unit-by-unit model, rounded once per line", () => {
    fc.assert(
      fc.property(decimalTiersArb, fc.integer({ min: 0, max: 400 }), (tiers, q) => {
        for (const model of ["volume", "graduated"] as const) {
          const exact = priceExact(model, { unitAmountDecimal: null, tiers }, q);
          expect(exact.scaled).toBe(modelExact(model, tiers, q));
          expect(BigInt(priceLine(model, { unitAmountDecimal: null, tiers }, q))).toBe(roundRef(exact.scaled));
        }
      }),
    );
  });

  it("rounds the line once, not each tier: two tiers of 0.4 make 1, not 0", () => {
    const tiers: DecimalTier[] = [
      { upTo: 1, unitAmountDecimal: dec("0.4"), flatAmountDecimal: fromMinorUnits(0) },
      { upTo: null, unitAmountDecimal: dec("0.4"), flatAmountDecimal: fromMinorUnits(0) },
    ];
    expect(formatMinorDecimal(priceGraduatedExact(tiers, 2))).toBe("0.8");
    expect(priceLine("graduated", { unitAmountDecimal: null, tiers }, 2)).toBe(1);
  });

  it("accepts sub-cent unit amounts and decimal flat amounts per tier", () => {
    const tiers: DecimalTier[] = [
      { upTo: 1000, unitAmountDecimal: dec("0.5"), flatAmountDecimal: dec("100.25") },
      { upTo: null, unitAmountDecimal: dec("0.35"), flatAmountDecimal: dec("0.5") },
    ];
    // graduated 1,500: 1,000 × 0.5 + 100.25 + 500 × 0.35 + 0.5 = 775.75 -> 776
    expect(formatMinorDecimal(priceGraduatedExact(tiers, 1500))).toBe("775.75");
    expect(priceLine("graduated", { unitAmountDecimal: null, tiers }, 1500)).toBe(776);
    // volume 1,500: 1,500 × 0.35 + 0.5 = 525.5 -> 526 (half away from zero)
    expect(formatMinorDecimal(priceVolumeExact(tiers, 1500))).toBe("525.5");
    expect(priceLine("volume", { unitAmountDecimal: null, tiers }, 1500)).toBe(526);
  });

  it("prices fixed plans at unit_amount_decimal × quantity: 1,000 at 0.35 is 350, 1 is 0", () => {
    const input = { unitAmountDecimal: dec("0.35"), tiers: null };
    expect(priceLine("fixed", input, 1000)).toBe(350);
    expect(priceLine("fixed", input, 1)).toBe(0);
    expect(priceLine("fixed", input, 0)).toBe(0);
  });

  it("costs nothing at quantity 0 under every model (a metered period without usage)", () => {
    fc.assert(
      fc.property(decimalTiersArb, (tiers) => {
        expect(priceLine("volume", { unitAmountDecimal: null, tiers }, 0)).toBe(0);
        expect(priceLine("graduated", { unitAmountDecimal: null, tiers }, 0)).toBe(0);
      }),
    );
  });

  it("refuses invalid tiers, quantities, missing inputs and overflow", () => {
    const ok: DecimalTier = { upTo: null, unitAmountDecimal: dec("1"), flatAmountDecimal: dec("0") };
    expect(validateDecimalTiers([ok])).toBeNull();
    expect(validateDecimalTiers([])).toMatch(/at least 1 tier/);
    expect(validateDecimalTiers([{ ...ok, unitAmountDecimal: { scaled: -1n } }])).toMatch(/unitAmountDecimal must be a non-negative decimal/);
    expect(validateDecimalTiers([{ ...ok, flatAmountDecimal: 5 as unknown as MinorDecimal }])).toMatch(/flatAmountDecimal/);
    expect(validateDecimalTiers([{ ...ok, upTo: 5 }])).toMatch(/last tier's upTo must be null/);
    expect(() => priceLine("volume", { unitAmountDecimal: null, tiers: [] }, 1)).toThrow(/invalid tiers/);
    expect(() => priceLine("graduated", { unitAmountDecimal: null, tiers: null }, 1)).toThrow(/requires tiers/);
    expect(() => priceLine("fixed", { unitAmountDecimal: null, tiers: null }, 1)).toThrow(/requires a non-negative unitAmountDecimal/);
    expect(() => priceLine("fixed", { unitAmountDecimal: dec("1"), tiers: null }, -1)).toThrow(/non-negative safe integer/);
    expect(() => priceLine("volume", { unitAmountDecimal: null, tiers: [ok] }, 1.5)).toThrow(/non-negative safe integer/);
    expect(() => priceLine("bogus" as "fixed", { unitAmountDecimal: null, tiers: null }, 1)).toThrow(/unknown pricing model/);
    const huge = { unitAmountDecimal: dec("99999999999"), tiers: null };
    expect(() => priceLine("fixed", huge, Number.MAX_SAFE_INTEGER)).toThrow(/overflows/);
    // exact value still available for a caller that wants to report it
    expect(priceExact("fixed", huge, Number.MAX_SAFE_INTEGER).scaled).toBe(99999999999n * SCALE * BigInt(Number.MAX_SAFE_INTEGER));
  });
});
