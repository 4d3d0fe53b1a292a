import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addIntervals } from "../../src/domain/billing-calendar";
import { DAY_MS, toEpochMs, toEpochSeconds } from "../../src/domain/instants";
import {
  MAX_TRIAL_DAYS,
  TRIAL_WILL_END_NOTICE_MS,
  firstPeriodAfterTrial,
  parseTrialPeriodDays,
  resolveTrialEnd,
  trialWillEndAt,
} from "../../src/domain/trials";

const START = Date.UTC(2026, 0, 17, 8, 45, 12, 345);

describe("resolveTrialEnd", () => {
  it("the issue's example: a 14-day trial ends 14 × 24 h after the start, and bills from there", () => {
    const r = resolveTrialEnd({ start: START, trialPeriodDays: 14 });
    expect(r).toEqual({ ok: true, trialEnd: START + 14 * DAY_MS });
    if (!r.ok || r.trialEnd === null) return;
    expect(new Date(r.trialEnd).toISOString()).toBe("2026-01-31T08:45:12.345Z");
    expect(trialWillEndAt(START, r.trialEnd)).toBe(START + 11 * DAY_MS);
    const first = firstPeriodAfterTrial(r.trialEnd, "month");
    expect(first).toEqual({ billingAnchor: r.trialEnd, start: r.trialEnd, end: Date.UTC(2026, 1, 28, 8, 45, 12, 345) });
    // anchored at the trial's end: Jan 31 -> Feb 28 -> Mar 31
    expect(addIntervals(new Date(first.billingAnchor), "month", 2).toISOString()).toBe("2026-03-31T08:45:12.345Z");
  });

  it("takes the subscription's trial_end over its trial_period_days over the plan's", () => {
    const trialEnd = "2026-02-01T00:00:00Z";
    expect(resolveTrialEnd({ start: START, trialEnd, trialPeriodDays: 3, planTrialPeriodDays: 30 })).toEqual({ ok: true, trialEnd: Date.parse(trialEnd) });
    expect(resolveTrialEnd({ start: START, trialPeriodDays: 3, planTrialPeriodDays: 30 })).toEqual({ ok: true, trialEnd: START + 3 * DAY_MS });
    expect(resolveTrialEnd({ start: START, planTrialPeriodDays: 30 })).toEqual({ ok: true, trialEnd: START + 30 * DAY_MS });
    expect(resolveTrialEnd({ start: START, trialPeriodDays: 0, planTrialPeriodDays: 30 })).toEqual({ ok: true, trialEnd: null }); // 0 turns the plan's trial off
    expect(resolveTrialEnd({ start: START })).toEqual({ ok: true, trialEnd: null });
    expect(resolveTrialEnd({ start: START, trialEnd: null, trialPeriodDays: null, planTrialPeriodDays: 7 })).toEqual({ ok: true, trialEnd: START + 7 * DAY_MS });
  });

  it("allows 0 to 730 days, and a trial_end up to 730 days ahead", () => {
    expect(resolveTrialEnd({ start: START, trialPeriodDays: MAX_TRIAL_DAYS })).toEqual({ ok: true, trialEnd: START + 730 * DAY_MS });
    expect(resolveTrialEnd({ start: START, trialEnd: START + 730 * DAY_MS })).toEqual({ ok: true, trialEnd: START + 730 * DAY_MS });
    expect(resolveTrialEnd({ start: START, trialEnd: START + 730 * DAY_MS + 1 })).toMatchObject({ ok: false, reason: "trial_too_long" });
    expect(resolveTrialEnd({ start: START, trialEnd: START })).toMatchObject({ ok: false, reason: "trial_end_not_in_future" });
    expect(resolveTrialEnd({ start: START, trialEnd: START - DAY_MS })).toMatchObject({ ok: false, reason: "trial_end_not_in_future" });
    for (const days of [-1, 731, 1.5, Number.NaN]) {
      expect(resolveTrialEnd({ start: START, trialPeriodDays: days })).toMatchObject({ ok: false, reason: "trial_period_days_invalid" });
    }
    expect(() => resolveTrialEnd({ start: START, trialEnd: "next week" })).toThrow(/trial_end must be an ISO 8601/);
  });
});

describe("parseTrialPeriodDays", () => {
  it("accepts whole days 0..730 and explains anything else", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: MAX_TRIAL_DAYS }), (d) => {
      expect(parseTrialPeriodDays(d)).toEqual({ ok: true, days: d });
    }));
    for (const bad of [-1, 731, 2.5, "14", null, undefined]) {
      const r = parseTrialPeriodDays(bad);
      expect(r).toMatchObject({ ok: false, reason: "trial_period_days_invalid" });
      if (!r.ok) expect(r.message).toBe("trial_period_days must be a whole number of days from 0 to 730.");
    }
  });
});

describe("trialWillEndAt", () => {
  it("is three days before the end, or at once for a trial of three days or less (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) }), fc.integer({ min: 1, max: MAX_TRIAL_DAYS * DAY_MS }), (start, length) => {
        const at = trialWillEndAt(start, start + length);
        expect(at).toBe(length > TRIAL_WILL_END_NOTICE_MS ? start + length - 3 * DAY_MS : start);
        expect(at).toBeGreaterThanOrEqual(start);
        expect(at).toBeLessThan(start + length);
      }),
    );
    expect(trialWillEndAt(START, START + 2 * DAY_MS)).toBe(START);
    expect(trialWillEndAt(START, START + 3 * DAY_MS)).toBe(START);
    expect(trialWillEndAt(START, START + 4 * DAY_MS)).toBe(START + DAY_MS);
    expect(() => trialWillEndAt(START, START)).toThrow(/end after it starts/);
  });
});

describe("instants", () => {
  it("reads epoch ms, Dates and strict ISO 8601 date-times with a zone", () => {
    expect(toEpochMs(START)).toBe(START);
    expect(toEpochMs(new Date(START))).toBe(START);
    expect(toEpochMs("2026-01-17T08:45:12.345Z")).toBe(START);
    expect(toEpochMs("2026-01-17T09:45:12.345+01:00")).toBe(START);
    expect(toEpochMs("2024-02-29T00:00Z")).toBe(Date.UTC(2024, 1, 29));
    expect(toEpochSeconds(START)).toBe(Math.floor(START / 1000));
    expect(toEpochSeconds(-1)).toBe(-1);
  });

  it("refuses what is not an instant, naming the field", () => {
    for (const bad of ["2026-01-17", "2026-01-17T08:45:12", "2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "1700000000", ""]) {
      expect(() => toEpochMs(bad, "period_end"), bad).toThrow(/^period_end must be an ISO 8601 date-time/);
    }
    expect(() => toEpochMs(1.5, "at")).toThrow(/at must be whole epoch milliseconds/);
    expect(() => toEpochMs(new Date(Number.NaN), "at")).toThrow(/valid Date/);
    expect(() => toEpochMs({} as unknown as number, "at")).toThrow(/epoch milliseconds, an ISO 8601 date-time or a Date/);
  });
});
