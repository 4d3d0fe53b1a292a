// The dashboard's money and time formatting: major units with each currency's exponent.
import { describe, expect, it } from "vitest";
import { formatMoney, formatUtc, majorToMinor } from "../../src/dashboard/format";
import { utcInput } from "../../src/dashboard/pages/test-clocks";

describe("formatMoney", () => {
  it("uses the currency's exponent: JPY 0, USD 2, KWD 3", () => {
    expect(formatMoney(1000, "jpy")).toBe("1,000 JPY");
    expect(formatMoney(1000, "usd")).toBe("10.00 USD");
    expect(formatMoney(1000, "kwd")).toBe("1.000 KWD");
    expect(formatMoney(1234, "KWD")).toBe("1.234 KWD");
    expect(formatMoney(5, "usd")).toBe("0.05 USD");
    expect(formatMoney(0, "jpy")).toBe("0 JPY");
    expect(formatMoney(99_999_999_999, "usd")).toBe("999,999,999.99 USD");
    expect(formatMoney(-250, "eur")).toBe("-2.50 EUR");
  });

  it("says so when the currency is unknown rather than guessing", () => {
    expect(formatMoney(1000, "zzz")).toBe("1000 ZZZ (minor units)");
  });
});

describe("majorToMinor", () => {
  it("reads major units exactly, per currency", () => {
    expect(majorToMinor("5.25", "usd")).toEqual({ ok: true, minor: 525 });
    expect(majorToMinor("5", "usd")).toEqual({ ok: true, minor: 500 });
    expect(majorToMinor("1,000", "jpy")).toEqual({ ok: true, minor: 1000 });
    expect(majorToMinor("1.234", "kwd")).toEqual({ ok: true, minor: 1234 });
    expect(majorToMinor("0.1", "usd")).toEqual({ ok: true, minor: 10 });
  });

  it("refuses too many decimals and text, naming the rule", () => {
    expect(majorToMinor("1.5", "jpy")).toEqual({ ok: false, message: "JPY has 0 decimals: '1.5' has more." });
    expect(majorToMinor("1.234", "usd")).toEqual({ ok: false, message: "USD has 2 decimals: '1.234' has more." });
    const text = majorToMinor("ten", "usd");
    expect(text.ok).toBe(false);
  });
});

describe("times", () => {
  it("shows UTC, and reads a UTC form field", () => {
    expect(formatUtc("2026-11-21T12:00:00.000Z")).toBe("2026-11-21 12:00:00 UTC");
    expect(utcInput("2026-01-31T12:00")).toBe("2026-01-31T12:00:00.000Z");
    expect(utcInput("2026-01-31 12:00:30")).toBe("2026-01-31T12:00:30.000Z");
    expect(utcInput("2026-02-30T12:00")).toBeUndefined();
    expect(utcInput("tomorrow")).toBeUndefined();
  });
});
