import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addIntervals, daysInMonth, periodIndexAt, type BillingInterval } from "../../src/domain/billing-calendar";

const iso = (d: Date) => d.toISOString();
const utc = (s: string) => new Date(s);

const anchorArb = fc.date({
  min: new Date("1970-01-01T00:00:00.000Z"),
  max: new Date("2200-12-31T23:59:59.999Z"),
  noInvalidDate: true,
});
const intervalArb = fc.constantFrom<BillingInterval>("month", "year");
const countArb = fc.integer({ min: 0, max: 600 });

describe("addIntervals examples", () => {
  it("count 0 is the anchor", () => {
    const a = utc("2025-03-15T10:20:30.456Z");
    expect(iso(addIntervals(a, "month", 0))).toBe(iso(a));
    expect(iso(addIntervals(a, "year", 0))).toBe(iso(a));
  });

  it("Jan 31 monthly clamps and recovers (computed from the anchor, not chained)", () => {
    const a = utc("2025-01-31T12:00:00.000Z");
    expect(iso(addIntervals(a, "month", 1))).toBe("2025-02-28T12:00:00.000Z");
    expect(iso(addIntervals(a, "month", 2))).toBe("2025-03-31T12:00:00.000Z");
    expect(iso(addIntervals(a, "month", 3))).toBe("2025-04-30T12:00:00.000Z");
    const leap = utc("2024-01-31T00:00:00.000Z");
    expect(iso(addIntervals(leap, "month", 1))).toBe("2024-02-29T00:00:00.000Z");
    expect(iso(addIntervals(leap, "month", 2))).toBe("2024-03-31T00:00:00.000Z");
  });

  it("13 monthly dates from 2025-01-31", () => {
    const a = utc("2025-01-31T08:30:00.000Z");
    const dates = Array.from({ length: 13 }, (_, n) => addIntervals(a, "month", n).toISOString().slice(0, 10));
    expect(dates).toEqual([
      "2025-01-31",
      "2025-02-28",
      "2025-03-31",
      "2025-04-30",
      "2025-05-31",
      "2025-06-30",
      "2025-07-31",
      "2025-08-31",
      "2025-09-30",
      "2025-10-31",
      "2025-11-30",
      "2025-12-31",
      "2026-01-31",
    ]);
  });

  it("Feb 29 yearly", () => {
    const a = utc("2024-02-29T23:59:59.999Z");
    expect(iso(addIntervals(a, "year", 1))).toBe("2025-02-28T23:59:59.999Z");
    expect(iso(addIntervals(a, "year", 3))).toBe("2027-02-28T23:59:59.999Z");
    expect(iso(addIntervals(a, "year", 4))).toBe("2028-02-29T23:59:59.999Z");
    expect(iso(addIntervals(a, "year", 100))).toBe("2124-02-29T23:59:59.999Z");
    expect(iso(addIntervals(a, "month", 12))).toBe("2025-02-28T23:59:59.999Z");
    // 2100 is not a leap year
    expect(iso(addIntervals(a, "year", 76))).toBe("2100-02-28T23:59:59.999Z");
  });

  it("crosses year boundaries and keeps the UTC time of day", () => {
    const a = utc("2025-11-30T23:00:00.000Z");
    expect(iso(addIntervals(a, "month", 1))).toBe("2025-12-30T23:00:00.000Z");
    expect(iso(addIntervals(a, "month", 2))).toBe("2026-01-30T23:00:00.000Z");
    expect(iso(addIntervals(a, "month", 3))).toBe("2026-02-28T23:00:00.000Z");
    expect(iso(addIntervals(a, "month", 25))).toBe("2027-12-30T23:00:00.000Z");
    // two-digit years are real years, not 19xx
    const early = utc("0099-12-31T05:00:00.000Z");
    expect(iso(addIntervals(early, "month", 2))).toBe("0100-02-28T05:00:00.000Z");
  });

  it("rejects invalid input", () => {
    const a = utc("2025-01-01T00:00:00Z");
    for (const c of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => addIntervals(a, "month", c)).toThrow(RangeError);
    }
    expect(() => addIntervals(new Date(Number.NaN), "month", 1)).toThrow(RangeError);
    expect(() => addIntervals(a, "week" as BillingInterval, 1)).toThrow(RangeError);
    expect(() => addIntervals(a, "year", 1_000_000)).toThrow(RangeError); // beyond the Date range
  });
});

describe("periodIndexAt examples", () => {
  const a = utc("2025-01-31T12:00:00.000Z");
  it("is 0 before the first renewal, including before the anchor", () => {
    expect(periodIndexAt(a, "month", utc("2024-06-01T00:00:00Z"))).toBe(0);
    expect(periodIndexAt(a, "month", a)).toBe(0);
    expect(periodIndexAt(a, "month", utc("2025-02-28T11:59:59.999Z"))).toBe(0);
  });
  it("flips exactly at each billing date", () => {
    expect(periodIndexAt(a, "month", utc("2025-02-28T12:00:00.000Z"))).toBe(1);
    expect(periodIndexAt(a, "month", utc("2025-03-31T11:59:59.999Z"))).toBe(1);
    expect(periodIndexAt(a, "month", utc("2025-03-31T12:00:00.000Z"))).toBe(2);
    expect(periodIndexAt(a, "month", utc("2026-01-31T12:00:00.000Z"))).toBe(12);
    expect(periodIndexAt(a, "year", utc("2026-01-31T11:59:59.999Z"))).toBe(0);
    expect(periodIndexAt(a, "year", utc("2026-01-31T12:00:00.000Z"))).toBe(1);
  });
  it("rejects invalid dates", () => {
    expect(() => periodIndexAt(a, "month", new Date(Number.NaN))).toThrow(RangeError);
    expect(() => periodIndexAt(new Date(Number.NaN), "month", a)).toThrow(RangeError);
  });
});

describe("properties", () => {
  it("billing dates strictly increase with count", () => {
    fc.assert(
      fc.property(anchorArb, intervalArb, countArb, (a, i, n) => {
        expect(addIntervals(a, i, n + 1).getTime()).toBeGreaterThan(addIntervals(a, i, n).getTime());
      }),
    );
  });

  it("day of month = min(anchor day, days in target month); time of day preserved; month advances", () => {
    fc.assert(
      fc.property(anchorArb, intervalArb, countArb, (a, i, n) => {
        const d = addIntervals(a, i, n);
        const months = n * (i === "month" ? 1 : 12);
        const expectedMonthIndex = a.getUTCFullYear() * 12 + a.getUTCMonth() + months;
        expect(d.getUTCFullYear() * 12 + d.getUTCMonth()).toBe(expectedMonthIndex);
        expect(d.getUTCDate()).toBe(Math.min(a.getUTCDate(), daysInMonth(d.getUTCFullYear(), d.getUTCMonth())));
        expect(d.getTime() % 86_400_000).toBe(a.getTime() % 86_400_000);
      }),
    );
  });

  it("periodIndexAt inverts addIntervals", () => {
    fc.assert(
      fc.property(anchorArb, intervalArb, countArb, (a, i, n) => {
        const d = addIntervals(a, i, n);
        expect(periodIndexAt(a, i, d)).toBe(n);
        expect(periodIndexAt(a, i, new Date(d.getTime() - 1))).toBe(Math.max(0, n - 1));
      }),
    );
  });

  it("periodIndexAt brackets any instant", () => {
    fc.assert(
      fc.property(anchorArb, intervalArb, anchorArb, (a, i, at) => {
        const n = periodIndexAt(a, i, at);
        expect(Number.isSafeInteger(n) && n >= 0).toBe(true);
        if (at.getTime() >= a.getTime()) expect(addIntervals(a, i, n).getTime()).toBeLessThanOrEqual(at.getTime());
        expect(addIntervals(a, i, n + 1).getTime()).toBeGreaterThan(at.getTime());
      }),
    );
  });

  it("daysInMonth matches a known table", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map((m) => daysInMonth(2023, m))).toEqual([
      31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31,
    ]);
    expect(daysInMonth(2024, 1)).toBe(29);
    expect(daysInMonth(2000, 1)).toBe(29);
    expect(daysInMonth(1900, 1)).toBe(28);
  });
});
