import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  MAX_TIERS,
  priceFor,
  priceGraduated,
  priceVolume,
  validateTiers,
  type Tier,
} from "../../src/domain/pricing";

// Stripe's documented example: 1–5 at 7.00, 6–10 at 6.50, 11+ at 6.00.
const STRIPE: Tier[] = [
  { upTo: 5, unitAmount: 700, flatAmount: 0 },
  { upTo: 10, unitAmount: 650, flatAmount: 0 },
  { upTo: null, unitAmount: 600, flatAmount: 0 },
];

/** Arbitrary valid tier list (1..6 tiers, modest amounts so nothing overflows). */
const tiersArb = (opts: { unit?: fc.Arbitrary<number>; flat?: fc.Arbitrary<number> } = {}) =>
  fc
    .tuple(
      fc.uniqueArray(fc.integer({ min: 1, max: 1000 }), { minLength: 0, maxLength: 5 }),
      fc.array(
        fc.record({
          unitAmount: opts.unit ?? fc.integer({ min: 0, max: 100_000 }),
          flatAmount: opts.flat ?? fc.integer({ min: 0, max: 100_000 }),
        }),
        { minLength: 6, maxLength: 6 },
      ),
    )
    .map(([bounds, amounts]): Tier[] => {
      const ups = [...bounds].sort((a, b) => a - b);
      return [...ups, null].map((upTo, i) => ({ upTo, ...amounts[i] }));
    });

const qtyArb = fc.integer({ min: 1, max: 5000 });

describe("validateTiers", () => {
  it("accepts valid tier lists", () => {
    expect(validateTiers(STRIPE)).toBeNull();
    expect(validateTiers([{ upTo: null, unitAmount: 0, flatAmount: 0 }])).toBeNull();
    fc.assert(fc.property(tiersArb(), (tiers) => validateTiers(tiers) === null));
  });

  it("rejects an empty list and too many tiers", () => {
    expect(validateTiers([])).toMatch(/at least 1 tier/);
    const many: Tier[] = Array.from({ length: MAX_TIERS + 1 }, (_, i) => ({
      upTo: i === MAX_TIERS ? null : i + 1,
      unitAmount: 1,
      flatAmount: 0,
    }));
    expect(validateTiers(many)).toMatch(/at most 25 tiers/);
    expect(validateTiers(many.slice(1))).toBeNull(); // exactly MAX_TIERS is fine
  });

  it("requires the last tier, and only the last, to be unbounded", () => {
    expect(validateTiers([{ upTo: 5, unitAmount: 1, flatAmount: 0 }])).toMatch(/last tier's upTo must be null/);
    expect(
      validateTiers([
        { upTo: null, unitAmount: 1, flatAmount: 0 },
        { upTo: null, unitAmount: 1, flatAmount: 0 },
      ]),
    ).toMatch(/only the last tier may be unbounded/);
  });

  it("requires strictly ascending positive integer upTo", () => {
    const t = (upTo: number | null): Tier => ({ upTo, unitAmount: 1, flatAmount: 0 });
    expect(validateTiers([t(5), t(5), t(null)])).toMatch(/greater than the previous/);
    expect(validateTiers([t(5), t(3), t(null)])).toMatch(/greater than the previous/);
    expect(validateTiers([t(0), t(null)])).toMatch(/positive integer/);
    expect(validateTiers([t(-1), t(null)])).toMatch(/positive integer/);
    expect(validateTiers([t(2.5), t(null)])).toMatch(/positive integer/);
    expect(validateTiers([t(Number.NaN), t(null)])).toMatch(/positive integer/);
  });

  it("requires non-negative safe integer amounts", () => {
    const bad = [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1];
    for (const v of bad) {
      expect(validateTiers([{ upTo: null, unitAmount: v, flatAmount: 0 }])).toMatch(/unitAmount/);
      expect(validateTiers([{ upTo: null, unitAmount: 0, flatAmount: v }])).toMatch(/flatAmount/);
    }
  });
});

describe("Stripe's example", () => {
  it("volume", () => {
    expect(priceVolume(STRIPE, 1)).toBe(700);
    expect(priceVolume(STRIPE, 5)).toBe(3500);
    expect(priceVolume(STRIPE, 6)).toBe(3900);
    expect(priceVolume(STRIPE, 10)).toBe(6500);
    expect(priceVolume(STRIPE, 11)).toBe(6600);
    expect(priceVolume(STRIPE, 20)).toBe(12000);
  });

  it("graduated", () => {
    expect(priceGraduated(STRIPE, 1)).toBe(700);
    expect(priceGraduated(STRIPE, 5)).toBe(3500);
    expect(priceGraduated(STRIPE, 6)).toBe(4150);
    expect(priceGraduated(STRIPE, 10)).toBe(6750);
    expect(priceGraduated(STRIPE, 11)).toBe(7350);
    expect(priceGraduated(STRIPE, 20)).toBe(12750);
  });

  it("through priceFor", () => {
    expect(priceFor("volume", { unitAmount: 0, tiers: STRIPE }, 6)).toBe(3900);
    expect(priceFor("graduated", { unitAmount: 0, tiers: STRIPE }, 20)).toBe(12750);
    expect(priceFor("fixed", { unitAmount: 700, tiers: null }, 6)).toBe(4200);
  });
});

describe("flat amounts", () => {
  const tiers: Tier[] = [
    { upTo: 10, unitAmount: 100, flatAmount: 1000 },
    { upTo: 20, unitAmount: 50, flatAmount: 500 },
    { upTo: null, unitAmount: 10, flatAmount: 200 },
  ];
  it("volume adds only the flat amount of the tier the quantity falls in", () => {
    expect(priceVolume(tiers, 10)).toBe(10 * 100 + 1000);
    expect(priceVolume(tiers, 11)).toBe(11 * 50 + 500);
    expect(priceVolume(tiers, 25)).toBe(25 * 10 + 200);
  });
  it("graduated adds the flat amount of every tier that has at least one unit", () => {
    expect(priceGraduated(tiers, 10)).toBe(1000 + 1000);
    expect(priceGraduated(tiers, 11)).toBe(1000 + 1000 + 50 + 500);
    expect(priceGraduated(tiers, 20)).toBe(2000 + 500 + 500);
    expect(priceGraduated(tiers, 21)).toBe(2000 + 1000 + 10 + 200);
  });
});

describe("errors", () => {
  it("throws RangeError on invalid quantity", () => {
    for (const q of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1]) {
      expect(() => priceVolume(STRIPE, q)).toThrow(RangeError);
      expect(() => priceGraduated(STRIPE, q)).toThrow(RangeError);
      expect(() => priceFor("fixed", { unitAmount: 1, tiers: null }, q)).toThrow(RangeError);
    }
  });

  it("throws RangeError when the result exceeds MAX_SAFE_INTEGER", () => {
    const big: Tier[] = [{ upTo: null, unitAmount: 2 ** 40, flatAmount: 0 }];
    expect(priceVolume(big, 2 ** 12)).toBe(2 ** 52); // still safe
    expect(() => priceVolume(big, 2 ** 13)).toThrow(RangeError);
    expect(() => priceGraduated(big, 2 ** 13)).toThrow(RangeError);
    expect(() => priceFor("fixed", { unitAmount: 2 ** 40, tiers: null }, 2 ** 13)).toThrow(RangeError);
    // flat fee pushing just over the limit
    const edge: Tier[] = [{ upTo: null, unitAmount: 1, flatAmount: Number.MAX_SAFE_INTEGER - 1 }];
    expect(priceVolume(edge, 1)).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => priceVolume(edge, 2)).toThrow(RangeError);
    // graduated sum over tiers overflowing even though each tier is safe
    const sum: Tier[] = [
      { upTo: 1, unitAmount: 0, flatAmount: Number.MAX_SAFE_INTEGER },
      { upTo: null, unitAmount: 1, flatAmount: 0 },
    ];
    expect(priceGraduated(sum, 1)).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => priceGraduated(sum, 2)).toThrow(RangeError);
  });

  it("throws on invalid tiers or missing tiers", () => {
    expect(() => priceVolume([], 1)).toThrow(/at least 1 tier/);
    expect(() => priceGraduated([{ upTo: 3, unitAmount: 1, flatAmount: 0 }], 1)).toThrow(RangeError);
    expect(() => priceFor("volume", { unitAmount: 1, tiers: null }, 1)).toThrow(/requires tiers/);
    expect(() => priceFor("graduated", { unitAmount: 1, tiers: null }, 1)).toThrow(/requires tiers/);
    expect(() => priceFor("fixed", { unitAmount: -1, tiers: null }, 1)).toThrow(RangeError);
    expect(() => priceFor("fixed", { unitAmount: 1.5, tiers: null }, 1)).toThrow(RangeError);
  });
});

describe("properties", () => {
  it("graduated is monotonic non-decreasing in quantity", () => {
    fc.assert(
      fc.property(tiersArb(), qtyArb, (tiers, q) => priceGraduated(tiers, q + 1) >= priceGraduated(tiers, q)),
    );
  });

  it("volume with a single tier equals fixed (+ that tier's flat amount)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 1, max: 1_000_000 }), (unit, q) => {
        const single: Tier[] = [{ upTo: null, unitAmount: unit, flatAmount: 0 }];
        const fixed = priceFor("fixed", { unitAmount: unit, tiers: null }, q);
        expect(fixed).toBe(unit * q);
        expect(priceVolume(single, q)).toBe(fixed);
        expect(priceGraduated(single, q)).toBe(fixed);
      }),
    );
  });

  it("graduated equals volume when all tiers share the unit amount and have no flat fees", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100_000 }).chain((u) => tiersArb({ unit: fc.constant(u), flat: fc.constant(0) })),
        qtyArb,
        (tiers, q) => {
          expect(priceGraduated(tiers, q)).toBe(priceVolume(tiers, q));
          expect(priceVolume(tiers, q)).toBe(tiers[0].unitAmount * q);
        },
      ),
    );
  });

  it("results are always non-negative safe integers", () => {
    fc.assert(
      fc.property(tiersArb(), qtyArb, (tiers, q) => {
        for (const v of [priceVolume(tiers, q), priceGraduated(tiers, q)]) {
          expect(Number.isSafeInteger(v)).toBe(true);
          expect(v).toBeGreaterThanOrEqual(0);
        }
      }),
    );
  });

  it("graduated equals an independent per-unit reference sum", () => {
    fc.assert(
      fc.property(tiersArb(), fc.integer({ min: 1, max: 1500 }), (tiers, q) => {
        let expected = 0;
        const touched = new Set<number>();
        for (let unit = 1; unit <= q; unit++) {
          const idx = tiers.findIndex((t) => t.upTo === null || unit <= t.upTo);
          expected += tiers[idx].unitAmount;
          touched.add(idx);
        }
        for (const idx of touched) expected += tiers[idx].flatAmount;
        expect(priceGraduated(tiers, q)).toBe(expected);
      }),
    );
  });

  it("volume uses the tier containing the quantity", () => {
    fc.assert(
      fc.property(tiersArb(), qtyArb, (tiers, q) => {
        // index = number of bounded tiers that end before q
        const idx = tiers.filter((t) => t.upTo !== null && t.upTo < q).length;
        expect(priceVolume(tiers, q)).toBe(tiers[idx].unitAmount * q + tiers[idx].flatAmount);
      }),
    );
  });
});
