import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DECIMAL_PLACES,
  addMinorDecimals,
  compareMinorDecimals,
  formatMinorDecimal,
  fromMinorUnits,
  isWholeMinor,
  minorDecimal,
  minorDecimalsEqual,
  multiplyMinorDecimal,
  parseMinorDecimal,
  roundFractionToMinor,
  roundHalfAwayFromZero,
  roundToMinor,
  sumMinorDecimals,
} from "../../src/domain/decimal";
import { MAX_AMOUNT } from "../../src/domain/money";

const SCALE = 10n ** 12n;

/** Any decimal text of 0..MAX_AMOUNT with 0..12 decimals, and its exact scaled value. */
const decimalTextArb = fc
  .tuple(fc.bigInt({ min: 0n, max: BigInt(MAX_AMOUNT) - 1n }), fc.integer({ min: 0, max: 12 }), fc.bigInt({ min: 0n, max: SCALE - 1n }))
  .map(([int, places, frac]) => {
    const fracDigits = frac.toString().padStart(12, "0").slice(0, places);
    const text = places === 0 ? `${int}` : `${int}.${fracDigits}`;
    const scaled = int * SCALE + BigInt(fracDigits.padEnd(12, "0") || "0");
    return { text, scaled };
  });

/** Reference rounding, written independently: floor(x + 1/2) for x >= 0, mirrored for x < 0. */
function referenceRound(n: bigint, d: bigint): bigint {
  if (n < 0n) return -referenceRound(-n, d);
  return (2n * n + d) / (2n * d);
}

describe("parseMinorDecimal", () => {
  it("reads plain decimals of minor units exactly", () => {
    expect(parseMinorDecimal("0.35")).toEqual({ ok: true, value: { scaled: 350_000_000_000n } });
    expect(parseMinorDecimal("5")).toEqual({ ok: true, value: { scaled: 5n * SCALE } });
    expect(parseMinorDecimal("105.5")).toEqual({ ok: true, value: { scaled: 105_500_000_000_000n } });
    expect(parseMinorDecimal("0.000000000001")).toEqual({ ok: true, value: { scaled: 1n } });
    expect(parseMinorDecimal("007.10")).toEqual({ ok: true, value: { scaled: 7_100_000_000_000n } });
    expect(parseMinorDecimal(String(MAX_AMOUNT))).toEqual({ ok: true, value: { scaled: BigInt(MAX_AMOUNT) * SCALE } });
  });

  it("accepts trailing zeros beyond the 12th decimal, as money.ts does", () => {
    expect(parseMinorDecimal("0.3500000000000000")).toEqual({ ok: true, value: { scaled: 350_000_000_000n } });
  });

  it("gives each bad input its own reason and a sentence naming the field", () => {
    const cases: [unknown, string][] = [
      [0.35, "not_a_string"],
      [null, "not_a_string"],
      ["", "empty"],
      ["-0.35", "negative"],
      ["-0", "negative"],
      ["1e-3", "exponent"],
      ["3.5E2", "exponent"],
      [" 0.35", "format"],
      ["0.35 ", "format"],
      ["+1", "format"],
      [".5", "format"],
      ["5.", "format"],
      ["1,5", "format"],
      ["0x10", "format"],
      ["NaN", "format"],
      ["Infinity", "format"],
      ["0.0000000000001", "too_many_decimals"],
      ["1.1234567890123", "too_many_decimals"],
      [String(MAX_AMOUNT + 1), "too_large"],
      ["99999999999.000000000001", "too_large"],
      ["1".repeat(400), "too_large"],
    ];
    for (const [input, reason] of cases) {
      const r = parseMinorDecimal(input, "tiers[0].unit_amount_decimal");
      expect(r.ok, JSON.stringify(input)).toBe(false);
      if (r.ok) continue;
      expect(r.reason, JSON.stringify(input)).toBe(reason);
      expect(r.message).toMatch(/^tiers\[0\]\.unit_amount_decimal /);
    }
  });

  it("round-trips every valid decimal through formatMinorDecimal (canonical text)", () => {
    fc.assert(
      fc.property(decimalTextArb, ({ text, scaled }) => {
        const parsed = parseMinorDecimal(text);
        expect(parsed).toEqual({ ok: true, value: { scaled } });
        if (!parsed.ok) return;
        const canonical = formatMinorDecimal(parsed.value);
        expect(canonical).not.toMatch(/\.\d*0$|^0\d/);
        expect(parseMinorDecimal(canonical)).toEqual(parsed);
      }),
    );
  });

  it("minorDecimal throws the parse message for code-held values", () => {
    expect(() => minorDecimal("1e3")).toThrow(/exponent notation/);
    expect(() => minorDecimal(-1)).toThrow(RangeError);
    expect(() => minorDecimal(1.5)).toThrow(RangeError);
    expect(minorDecimal(250)).toEqual({ scaled: 250n * SCALE });
  });
});

describe("the rounding rule: half away from zero", () => {
  it("rounds ties away from zero and everything else to the nearest", () => {
    const r = (n: bigint, d: bigint) => roundHalfAwayFromZero(n, d);
    expect([r(5n, 10n), r(15n, 10n), r(25n, 10n), r(-5n, 10n), r(-25n, 10n)]).toEqual([1n, 2n, 3n, -1n, -3n]);
    expect([r(4n, 10n), r(6n, 10n), r(-4n, 10n), r(-6n, 10n)]).toEqual([0n, 1n, 0n, -1n]);
    expect(r(7n, -2n)).toBe(-4n);
    expect(() => r(1n, 0n)).toThrow(/divide by zero/);
  });

  it("agrees with an independent reference on any fraction", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.bigInt({ min: 1n, max: 10n ** 20n }), (n, d) => {
        expect(roundHalfAwayFromZero(n, d)).toBe(referenceRound(n, d));
        expect(roundHalfAwayFromZero(-n, d)).toBe(-roundHalfAwayFromZero(n, d));
      }),
    );
  });

  it("is within half a unit of the exact value", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.bigInt({ min: 1n, max: 10n ** 20n }), (n, d) => {
        const q = roundHalfAwayFromZero(n, d);
        const err = q * d - n; // (q - n/d) scaled by d
        expect(2n * (err < 0n ? -err : err) <= d).toBe(true);
      }),
    );
  });
});

describe("exact arithmetic, one rounding per line", () => {
  it("1,000 units at 0.35 is exactly 350; one unit rounds to 0", () => {
    const price = minorDecimal("0.35");
    expect(roundToMinor(multiplyMinorDecimal(price, 1000))).toBe(350);
    expect(roundToMinor(multiplyMinorDecimal(price, 1))).toBe(0);
    expect(roundToMinor(multiplyMinorDecimal(price, 2))).toBe(1); // 0.70 -> 1
    expect(roundToMinor(minorDecimal("0.5"))).toBe(1);
    expect(roundToMinor(minorDecimal("1.5"))).toBe(2); // Stripe's example: 0.05 × 30 = 1.5 -> 2
    expect(roundToMinor(multiplyMinorDecimal(minorDecimal("0.05"), 30))).toBe(2);
  });

  it("rounds a line once, not each unit: n × price rounds the exact product", () => {
    fc.assert(
      fc.property(decimalTextArb, fc.integer({ min: 0, max: 1_000_000 }), ({ text, scaled }, qty) => {
        const expected = referenceRound(scaled * BigInt(qty), SCALE);
        const line = () => roundToMinor(multiplyMinorDecimal(minorDecimal(text), qty));
        if (expected > BigInt(Number.MAX_SAFE_INTEGER)) expect(line).toThrow(/overflows/);
        else expect(BigInt(line())).toBe(expected);
      }),
    );
  });

  it("sums exactly and is order-independent", () => {
    fc.assert(
      fc.property(fc.array(decimalTextArb, { maxLength: 20 }), (items) => {
        const values = items.map((i) => minorDecimal(i.text));
        const sum = sumMinorDecimals(values);
        expect(sum.scaled).toBe(items.reduce((s, i) => s + i.scaled, 0n));
        expect(minorDecimalsEqual(sum, sumMinorDecimals([...values].reverse()))).toBe(true);
        expect(minorDecimalsEqual(sum, values.reduce(addMinorDecimals, fromMinorUnits(0)))).toBe(true);
      }),
    );
  });

  it("roundFractionToMinor rounds price × n / d once", () => {
    expect(roundFractionToMinor(minorDecimal(3000), 15, 30)).toBe(1500);
    expect(roundFractionToMinor(minorDecimal(1), 1, 2)).toBe(1); // 0.5 -> 1
    expect(roundFractionToMinor(minorDecimal(1), 1, 3)).toBe(0);
    expect(roundFractionToMinor(minorDecimal("0.35"), 1000, 1)).toBe(350);
    expect(() => roundFractionToMinor(minorDecimal(1), -1, 2)).toThrow(/numerator/);
    expect(() => roundFractionToMinor(minorDecimal(1), 1, 0)).toThrow(/denominator/);
  });

  it("refuses overflow instead of losing precision", () => {
    const max = minorDecimal(String(MAX_AMOUNT));
    expect(() => roundToMinor(multiplyMinorDecimal(max, Number.MAX_SAFE_INTEGER))).toThrow(/overflows/);
    expect(roundToMinor(multiplyMinorDecimal(max, 90_000))).toBe(MAX_AMOUNT * 90_000); // still a safe integer
    expect(() => multiplyMinorDecimal(max, 1.5)).toThrow(/non-negative safe integer/);
    expect(() => multiplyMinorDecimal(max, -1)).toThrow(/non-negative safe integer/);
    expect(() => fromMinorUnits(Number.MAX_SAFE_INTEGER + 1)).toThrow(RangeError);
  });

  it("compares, tells whole minor units, and keeps 12 decimals", () => {
    expect(DECIMAL_PLACES).toBe(12);
    expect(compareMinorDecimals(minorDecimal("0.35"), minorDecimal("0.350"))).toBe(0);
    expect(compareMinorDecimals(minorDecimal("0.35"), minorDecimal("0.36"))).toBe(-1);
    expect(compareMinorDecimals(minorDecimal("2"), minorDecimal("1.999999999999"))).toBe(1);
    expect(isWholeMinor(minorDecimal("5.000"))).toBe(true);
    expect(isWholeMinor(minorDecimal("5.000000000001"))).toBe(false);
    expect(formatMinorDecimal(minorDecimal("0.000000000001"))).toBe("0.000000000001");
    expect(formatMinorDecimal(fromMinorUnits(0))).toBe("0");
  });
});
