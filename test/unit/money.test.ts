import { describe, it, expect } from "vitest";
import fc from "fast-check";
import {
  CURRENCY_EXPONENTS,
  MAX_AMOUNT,
  MIN_AMOUNT,
  currencyExponent,
  formatMinor,
  isValidAmount,
  normalizeCurrency,
  parseDecimalToMinor,
  suggestMinorUnits,
} from "../../src/domain/money";

const EXPONENTS = [...new Set(Object.values(CURRENCY_EXPONENTS))].sort();

/** Reference conversion done independently with BigInt string math. */
function refMinor(intPart: string, frac: string, exponent: number): bigint {
  return BigInt(intPart) * 10n ** BigInt(exponent) + BigInt(frac.padEnd(exponent, "0") || "0");
}

describe("CURRENCY_EXPONENTS", () => {
  it("has the expected exponents for well-known currencies", () => {
    const expected: Record<string, number> = {
      usd: 2, eur: 2, gbp: 2, jpy: 0, krw: 0, vnd: 0, isk: 0, clp: 0, pyg: 0, ugx: 0,
      xaf: 0, xof: 0, xpf: 0, rwf: 0, kmf: 0, djf: 0, gnf: 0, vuv: 0, bif: 0, uyi: 0,
      kwd: 3, bhd: 3, jod: 3, omr: 3, tnd: 3, lyd: 3, iqd: 3,
      clf: 4, uyw: 4,
      usn: 2, che: 2, chw: 2, bov: 2, cou: 2, mxv: 2, xcg: 2, zwg: 2, sle: 2, ves: 2, ved: 2,
    };
    for (const [code, exp] of Object.entries(expected)) {
      expect(CURRENCY_EXPONENTS[code], code).toBe(exp);
    }
  });

  it("contains the full active list with lowercase three-letter keys and exponents 0..4", () => {
    const keys = Object.keys(CURRENCY_EXPONENTS);
    expect(keys.length).toBeGreaterThanOrEqual(155);
    expect(keys.length).toBeLessThanOrEqual(180);
    for (const k of keys) {
      expect(k).toMatch(/^[a-z]{3}$/);
      expect([0, 2, 3, 4]).toContain(CURRENCY_EXPONENTS[k]);
    }
  });

  it("excludes metals, testing and other non-money codes", () => {
    for (const code of ["xau", "xag", "xpt", "xpd", "xts", "xxx", "xdr", "xba", "xbb", "xbc", "xbd", "xsu", "xua"]) {
      expect(Object.hasOwn(CURRENCY_EXPONENTS, code), code).toBe(false);
    }
  });

  it("is frozen", () => {
    expect(Object.isFrozen(CURRENCY_EXPONENTS)).toBe(true);
  });
});

describe("normalizeCurrency / currencyExponent", () => {
  it("is case-insensitive and returns the lowercase code", () => {
    expect(normalizeCurrency("USD")).toBe("usd");
    expect(normalizeCurrency("usd")).toBe("usd");
    expect(normalizeCurrency("Jpy")).toBe("jpy");
    expect(normalizeCurrency("kWd")).toBe("kwd");
    expect(normalizeCurrency("CLF")).toBe("clf");
  });

  it("returns undefined for unknown or malformed codes", () => {
    for (const bad of ["abc", "zzz", "xau", "xts", "us", "usdd", " usd", "usd ", "", "u$d", "__proto__", "constructor", "hrk"]) {
      expect(normalizeCurrency(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it("currencyExponent returns the exponent and throws on unknown codes", () => {
    expect(currencyExponent("usd")).toBe(2);
    expect(currencyExponent("jpy")).toBe(0);
    expect(currencyExponent("kwd")).toBe(3);
    expect(currencyExponent("clf")).toBe(4);
    expect(currencyExponent("EUR")).toBe(2);
    expect(() => currencyExponent("abc")).toThrow(RangeError);
    expect(() => currencyExponent("xau")).toThrow(RangeError);
  });

  it("every key normalizes to itself from any casing", () => {
    fc.assert(
      fc.property(fc.constantFrom(...Object.keys(CURRENCY_EXPONENTS)), fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }), (code, upper) => {
        const mixed = [...code].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join("");
        expect(normalizeCurrency(mixed)).toBe(code);
        expect(currencyExponent(mixed)).toBe(CURRENCY_EXPONENTS[code]);
      }),
    );
  });
});

describe("isValidAmount", () => {
  it("accepts the inclusive bounds and rejects outside them", () => {
    expect(MIN_AMOUNT).toBe(1);
    expect(MAX_AMOUNT).toBe(99_999_999_999);
    expect(isValidAmount(1)).toBe(true);
    expect(isValidAmount(99_999_999_999)).toBe(true);
    expect(isValidAmount(0)).toBe(false);
    expect(isValidAmount(-1)).toBe(false);
    expect(isValidAmount(100_000_000_000)).toBe(false);
  });

  it("rejects non-integers and non-finite numbers", () => {
    for (const n of [1.5, 0.1, NaN, Infinity, -Infinity, Number.MAX_SAFE_INTEGER + 1]) {
      expect(isValidAmount(n), String(n)).toBe(false);
    }
  });

  it("agrees with the range for arbitrary integers", () => {
    fc.assert(
      fc.property(fc.maxSafeInteger(), (n) => {
        expect(isValidAmount(n)).toBe(n >= 1 && n <= 99_999_999_999);
      }),
    );
  });
});

describe("parseDecimalToMinor", () => {
  it("parses usd (2 decimals)", () => {
    expect(parseDecimalToMinor("19.99", 2)).toEqual({ ok: true, minor: 1999 });
    expect(parseDecimalToMinor("20", 2)).toEqual({ ok: true, minor: 2000 });
    expect(parseDecimalToMinor("0.5", 2)).toEqual({ ok: true, minor: 50 });
    expect(parseDecimalToMinor("0.05", 2)).toEqual({ ok: true, minor: 5 });
    expect(parseDecimalToMinor("0", 2)).toEqual({ ok: true, minor: 0 });
    expect(parseDecimalToMinor("19.990", 2)).toEqual({ ok: true, minor: 1999 });
    expect(parseDecimalToMinor("19.99000000", 2)).toEqual({ ok: true, minor: 1999 });
    expect(parseDecimalToMinor("19.991", 2)).toEqual({ ok: false, reason: "too_many_decimals" });
  });

  it("parses jpy (0 decimals)", () => {
    expect(parseDecimalToMinor("100", 0)).toEqual({ ok: true, minor: 100 });
    expect(parseDecimalToMinor("100.00", 0)).toEqual({ ok: true, minor: 100 });
    expect(parseDecimalToMinor("100.5", 0)).toEqual({ ok: false, reason: "too_many_decimals" });
    expect(parseDecimalToMinor("0.01", 0)).toEqual({ ok: false, reason: "too_many_decimals" });
  });

  it("parses kwd (3 decimals) and clf (4 decimals)", () => {
    expect(parseDecimalToMinor("1.234", 3)).toEqual({ ok: true, minor: 1234 });
    expect(parseDecimalToMinor("1.2", 3)).toEqual({ ok: true, minor: 1200 });
    expect(parseDecimalToMinor("1.2345", 3)).toEqual({ ok: false, reason: "too_many_decimals" });
    expect(parseDecimalToMinor("1.2345", 4)).toEqual({ ok: true, minor: 12345 });
    expect(parseDecimalToMinor("0.0001", 4)).toEqual({ ok: true, minor: 1 });
    expect(parseDecimalToMinor("0.00001", 4)).toEqual({ ok: false, reason: "too_many_decimals" });
  });

  it("rejects anything that is not digits[.digits] as format", () => {
    for (const bad of ["", "-1", "-0.5", "+1", "1e2", "1E2", "1.5e1", ".5", "5.", " 5", "5 ", "1,00", "1.2.3", "abc", "0x10", "١٢", "Infinity", "NaN", "1_000"]) {
      expect(parseDecimalToMinor(bad, 2), JSON.stringify(bad)).toEqual({ ok: false, reason: "format" });
    }
  });

  it("enforces MAX_AMOUNT (out_of_range) for each exponent", () => {
    expect(parseDecimalToMinor("999999999.99", 2)).toEqual({ ok: true, minor: 99_999_999_999 });
    expect(parseDecimalToMinor("1000000000.00", 2)).toEqual({ ok: false, reason: "out_of_range" });
    expect(parseDecimalToMinor("99999999999", 0)).toEqual({ ok: true, minor: 99_999_999_999 });
    expect(parseDecimalToMinor("100000000000", 0)).toEqual({ ok: false, reason: "out_of_range" });
    expect(parseDecimalToMinor("99999999.999", 3)).toEqual({ ok: true, minor: 99_999_999_999 });
    expect(parseDecimalToMinor("100000000", 3)).toEqual({ ok: false, reason: "out_of_range" });
    expect(parseDecimalToMinor("9999999.9999", 4)).toEqual({ ok: true, minor: 99_999_999_999 });
    expect(parseDecimalToMinor("10000000", 4)).toEqual({ ok: false, reason: "out_of_range" });
    expect(parseDecimalToMinor("9".repeat(400), 2)).toEqual({ ok: false, reason: "out_of_range" });
  });

  it("accepts leading zeros in the integer part without changing the value", () => {
    expect(parseDecimalToMinor("0000019.99", 2)).toEqual({ ok: true, minor: 1999 });
    expect(parseDecimalToMinor("00000000000000000000000000001", 0)).toEqual({ ok: true, minor: 1 });
  });

  it("throws on an invalid exponent (programming error)", () => {
    expect(() => parseDecimalToMinor("1", -1)).toThrow(RangeError);
    expect(() => parseDecimalToMinor("1", 1.5)).toThrow(RangeError);
  });

  it("matches an independent BigInt reference for random decimals", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...EXPONENTS),
        fc.stringMatching(/^[0-9]{1,14}$/),
        fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
        (exponent, intPart, frac) => {
          const text = frac === undefined ? intPart : `${intPart}.${frac}`;
          const r = parseDecimalToMinor(text, exponent);
          const f = frac ?? "";
          if (/[^0]/.test(f.slice(exponent))) {
            expect(r).toEqual({ ok: false, reason: "too_many_decimals" });
            return;
          }
          const expected = refMinor(intPart, f.slice(0, exponent), exponent);
          if (expected > BigInt(MAX_AMOUNT)) expect(r).toEqual({ ok: false, reason: "out_of_range" });
          else expect(r).toEqual({ ok: true, minor: Number(expected) });
        },
      ),
    );
  });
});

describe("formatMinor", () => {
  it("formats the documented examples", () => {
    expect(formatMinor(3900, 2)).toBe("39.00");
    expect(formatMinor(100, 0)).toBe("100");
    expect(formatMinor(1234, 3)).toBe("1.234");
    expect(formatMinor(5, 2)).toBe("0.05");
  });

  it("pads small amounts and handles zero, clf and the maximum", () => {
    expect(formatMinor(0, 2)).toBe("0.00");
    expect(formatMinor(0, 0)).toBe("0");
    expect(formatMinor(1, 4)).toBe("0.0001");
    expect(formatMinor(12345, 4)).toBe("1.2345");
    expect(formatMinor(1, 3)).toBe("0.001");
    expect(formatMinor(99_999_999_999, 2)).toBe("999999999.99");
    expect(formatMinor(-150, 2)).toBe("-1.50");
  });

  it("throws on non-integer amounts", () => {
    expect(() => formatMinor(1.5, 2)).toThrow(RangeError);
    expect(() => formatMinor(NaN, 2)).toThrow(RangeError);
    expect(() => formatMinor(2 ** 53, 2)).toThrow(RangeError);
  });

  it("round-trips with parseDecimalToMinor for every currency exponent", () => {
    fc.assert(
      fc.property(fc.constantFrom(...Object.keys(CURRENCY_EXPONENTS)), fc.integer({ min: 0, max: MAX_AMOUNT }), (code, minor) => {
        const exponent = currencyExponent(code);
        const text = formatMinor(minor, exponent);
        const fraction = text.split(".")[1] ?? "";
        expect(fraction.length).toBe(exponent);
        expect(parseDecimalToMinor(text, exponent)).toEqual({ ok: true, minor });
      }),
      { numRuns: 500 },
    );
  });
});

describe("suggestMinorUnits", () => {
  it("converts decimal major units to minor units for the currency", () => {
    expect(suggestMinorUnits("100.00", 2)).toBe(10000);
    expect(suggestMinorUnits("12.5", 2)).toBe(1250);
    expect(suggestMinorUnits("19.99", 2)).toBe(1999);
    expect(suggestMinorUnits("100.00", 0)).toBe(100);
    expect(suggestMinorUnits("1.234", 3)).toBe(1234);
    expect(suggestMinorUnits("1.5", 4)).toBe(15000);
    expect(suggestMinorUnits("0.10", 2)).toBe(10);
  });

  it("returns undefined when the decimal cannot be expressed", () => {
    expect(suggestMinorUnits("19.999", 2)).toBeUndefined();
    expect(suggestMinorUnits("100.5", 0)).toBeUndefined();
    expect(suggestMinorUnits("1.23456", 4)).toBeUndefined();
    expect(suggestMinorUnits("1000000000.00", 2)).toBeUndefined();
    expect(suggestMinorUnits("-100.00", 2)).toBeUndefined();
    expect(suggestMinorUnits("abc", 2)).toBeUndefined();
    expect(suggestMinorUnits("", 2)).toBeUndefined();
    expect(suggestMinorUnits("1.", 2)).toBeUndefined();
  });

  it("computes the exact integer value of exponent notation", () => {
    expect(suggestMinorUnits("1e3", 2)).toBe(1000);
    expect(suggestMinorUnits("1E3", 0)).toBe(1000);
    expect(suggestMinorUnits("1.5e2", 2)).toBe(150);
    expect(suggestMinorUnits("2500e-1", 2)).toBe(250);
    expect(suggestMinorUnits("1e+2", 2)).toBe(100);
    expect(suggestMinorUnits("0e5", 2)).toBe(0);
    expect(suggestMinorUnits("99999999999e0", 2)).toBe(99_999_999_999);
  });

  it("returns undefined for exponent notation that is not a representable integer", () => {
    expect(suggestMinorUnits("1e-2", 2)).toBeUndefined();
    expect(suggestMinorUnits("1.25e1", 2)).toBeUndefined();
    expect(suggestMinorUnits("1e11", 2)).toBeUndefined(); // > MAX_AMOUNT
    expect(suggestMinorUnits("1e999999999", 2)).toBeUndefined();
    expect(suggestMinorUnits("1e-999999999", 2)).toBeUndefined();
    expect(suggestMinorUnits("-1e3", 2)).toBeUndefined();
  });

  it("returns the integer itself for a plain integer literal", () => {
    expect(suggestMinorUnits("100", 2)).toBe(100);
    expect(suggestMinorUnits("100", 0)).toBe(100);
  });

  it("agrees with parseDecimalToMinor for decimals with a fraction", () => {
    fc.assert(
      fc.property(fc.constantFrom(...EXPONENTS), fc.stringMatching(/^(0|[1-9][0-9]{0,12})\.[0-9]{1,5}$/), (exponent, text) => {
        const parsed = parseDecimalToMinor(text, exponent);
        expect(suggestMinorUnits(text, exponent)).toBe(parsed.ok ? parsed.minor : undefined);
      }),
    );
  });

  it("exponent notation equals the exact integer value computed with BigInt", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 99_999 }), fc.integer({ min: -4, max: 6 }), (mantissa, e) => {
        const text = `${mantissa}e${e}`;
        const scaled = e >= 0 ? BigInt(mantissa) * 10n ** BigInt(e) : undefined;
        const divisor = e < 0 ? 10n ** BigInt(-e) : 1n;
        const exact = scaled ?? (BigInt(mantissa) % divisor === 0n ? BigInt(mantissa) / divisor : undefined);
        const expected = exact !== undefined && exact <= BigInt(MAX_AMOUNT) ? Number(exact) : undefined;
        expect(suggestMinorUnits(text, 2)).toBe(expected);
      }),
    );
  });
});
