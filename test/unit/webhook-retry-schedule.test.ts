import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DELIVERY_WINDOW_MS,
  FINAL_ATTEMPT_LEAD_MS,
  FINAL_ATTEMPT_MARGIN_MS,
  MAX_DELAY_MS,
  MAX_RETRY_AFTER_MS,
  backoffDelayMs,
  describeSchedule,
  nextAttemptAt,
  nominalDelayMs,
  parseRetryAfter,
} from "../../src/domain/webhook-retry-schedule";

const HOUR = 3_600_000;
const T0 = Date.UTC(2025, 0, 1, 0, 0, 0); // fixed epoch ms; no Date.now()
const half = () => 0.5;
const randomArb = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

/** Walk the schedule as if every attempt failed, using a stream of random values. */
function walk(
  randoms: () => number,
  retryAfter: () => number | null = () => null,
): { attempts: number[]; retryAfters: (number | null)[] } {
  const attempts = [T0];
  const retryAfters: (number | null)[] = [];
  for (let failed = 1; failed < 1000; failed++) {
    const ra = retryAfter();
    retryAfters.push(ra);
    const next = nextAttemptAt({
      firstAttemptAt: T0,
      failedAttempts: failed,
      now: attempts[attempts.length - 1],
      retryAfterMs: ra,
      random: randoms,
    });
    if (next === null) return { attempts, retryAfters };
    attempts.push(next);
  }
  throw new Error("schedule did not terminate");
}

describe("backoffDelayMs", () => {
  it("nominal delays: 5 s x 3^(n-1), capped at 6 h", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(nominalDelayMs)).toEqual([
      5_000, 15_000, 45_000, 135_000, 405_000, 1_215_000, 3_645_000, 10_935_000, MAX_DELAY_MS, MAX_DELAY_MS,
    ]);
    expect(nominalDelayMs(1_000_000)).toBe(6 * HOUR);
  });

  it("random = 0.5 gives exactly the nominal delay; 0 gives 80 %; ~1 gives < 120 %", () => {
    for (let n = 1; n <= 12; n++) {
      expect(backoffDelayMs(n, half)).toBe(nominalDelayMs(n));
      expect(backoffDelayMs(n, () => 0)).toBe((nominalDelayMs(n) * 4) / 5);
      expect(backoffDelayMs(n, () => 0.999999999)).toBeLessThan((nominalDelayMs(n) * 6) / 5);
      // largest double below 1: 4 + 2r rounds to 6 in floating point; still < 1.2 x nominal
      expect(backoffDelayMs(n, () => 1 - 2 ** -53)).toBe((nominalDelayMs(n) * 6) / 5 - 1);
    }
  });

  it("first retry comes within 10 s for any random()", () => {
    fc.assert(
      fc.property(randomArb, (r) => {
        const d = backoffDelayMs(1, () => r);
        expect(d).toBeGreaterThanOrEqual(4_000);
        expect(d).toBeLessThanOrEqual(10_000);
      }),
    );
  });

  it("is an integer within [0.8, 1.2) x nominal", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), randomArb, (n, r) => {
        const d = backoffDelayMs(n, () => r);
        expect(Number.isSafeInteger(d)).toBe(true);
        expect(d * 5).toBeGreaterThanOrEqual(nominalDelayMs(n) * 4);
        expect(d * 5).toBeLessThan(nominalDelayMs(n) * 6);
      }),
    );
  });

  it("delays grow: below the cap, the smallest next delay beats the largest current one", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), randomArb, randomArb, (n, r1, r2) => {
        expect(backoffDelayMs(n + 1, () => r2)).toBeGreaterThan(backoffDelayMs(n, () => r1));
      }),
    );
    // and nominal delays never shrink
    for (let n = 1; n < 30; n++) expect(nominalDelayMs(n + 1)).toBeGreaterThanOrEqual(nominalDelayMs(n));
  });

  it("rejects bad input", () => {
    for (const n of [0, -1, 1.5, Number.NaN]) expect(() => backoffDelayMs(n, half)).toThrow(RangeError);
    for (const r of [1, -0.1, Number.NaN, 2]) expect(() => backoffDelayMs(1, () => r)).toThrow(RangeError);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.UTC(2025, 5, 1, 12, 0, 0);

  it("delta-seconds", () => {
    expect(parseRetryAfter("120", now)).toBe(120_000);
    expect(parseRetryAfter("0", now)).toBe(0);
    expect(parseRetryAfter("  30 ", now)).toBe(30_000);
    // overflowing values are treated as 2^31 seconds (RFC 9110)
    expect(parseRetryAfter("99999999999999999999999999", now)).toBe(2 ** 31 * 1000);
  });

  it("HTTP-date in all three RFC 9110 formats", () => {
    // IMF-fixdate
    expect(parseRetryAfter("Sun, 01 Jun 2025 12:02:00 GMT", now)).toBe(120_000);
    // obsolete RFC 850 (two-digit year)
    expect(parseRetryAfter("Sunday, 01-Jun-25 12:00:30 GMT", now)).toBe(30_000);
    // asctime (day padded with a space)
    expect(parseRetryAfter("Sun Jun  1 13:00:00 2025", now)).toBe(HOUR);
    expect(parseRetryAfter("Tue Jun 10 12:00:00 2025", now)).toBe(9 * 24 * HOUR);
  });

  it("a date in the past gives 0", () => {
    expect(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now)).toBe(0);
    // RFC 850 "94" is 1994, not 2094
    expect(parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now)).toBe(0);
  });

  it("absent or invalid gives null", () => {
    for (const h of [
      null,
      "",
      "   ",
      "garbage",
      "-5",
      "1.5",
      "+10",
      "1e3",
      "10 seconds",
      "Sun, 31 Jun 2025 12:00:00 GMT", // no 31 June
      "Sun, 01 Jun 2025 25:00:00 GMT", // bad hour
      "Sun, 01 Jun 2025 12:00:00 UTC", // must be GMT
      "2025-06-01T12:02:00Z", // ISO 8601 is not an HTTP-date
      "Sun, 1 Jun 2025 12:02:00 GMT", // day must be 2 digits
    ]) {
      expect(parseRetryAfter(h, now), String(h)).toBeNull();
    }
  });

  it("round-trips Date#toUTCString for arbitrary future instants", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 400 * 24 * 3600 }), (secs) => {
        const at = now + secs * 1000;
        expect(parseRetryAfter(new Date(at).toUTCString(), now)).toBe(secs * 1000);
      }),
    );
  });
});

describe("nextAttemptAt", () => {
  it("first retry within 10 s", () => {
    const t = nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 1, now: T0, random: half });
    expect(t).toBe(T0 + 5_000);
  });

  it("honours Retry-After when longer than the backoff", () => {
    const t = nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 1, now: T0, retryAfterMs: 120_000, random: half });
    expect(t).toBe(T0 + 120_000);
  });

  it("keeps the backoff when Retry-After is shorter", () => {
    const t = nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 4, now: T0, retryAfterMs: 1_000, random: half });
    expect(t).toBe(T0 + 135_000);
  });

  it("caps Retry-After at MAX_RETRY_AFTER_MS", () => {
    expect(MAX_RETRY_AFTER_MS).toBe(HOUR);
    const t = nextAttemptAt({
      firstAttemptAt: T0,
      failedAttempts: 1,
      now: T0,
      retryAfterMs: 7 * 24 * HOUR,
      random: half,
    });
    expect(t).toBe(T0 + MAX_RETRY_AFTER_MS);
    // null / undefined Retry-After = backoff only
    expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 2, now: T0, retryAfterMs: null, random: half })).toBe(
      T0 + 15_000,
    );
  });

  it("returns the computed time when it lands exactly on the latest attempt time", () => {
    const now = T0 + DELIVERY_WINDOW_MS - FINAL_ATTEMPT_LEAD_MS - 6 * HOUR;
    expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 20, now, random: half })).toBe(
      T0 + DELIVERY_WINDOW_MS - FINAL_ATTEMPT_LEAD_MS,
    );
  });

  describe("final attempt, FINAL_ATTEMPT_LEAD_MS before the window end", () => {
    const end = T0 + DELIVERY_WINDOW_MS - FINAL_ATTEMPT_LEAD_MS;

    it("is scheduled when the next attempt would overshoot and now <= end - margin", () => {
      const now = end - 2 * HOUR;
      expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 12, now, random: half })).toBe(end);
      const edge = end - FINAL_ATTEMPT_MARGIN_MS;
      expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 12, now: edge, random: half })).toBe(end);
    });

    it("is not scheduled within the margin before the window end", () => {
      const now = end - FINAL_ATTEMPT_MARGIN_MS + 1;
      expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 12, now, random: half })).toBeNull();
    });

    it("is never followed by another attempt", () => {
      expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 13, now: end, random: half })).toBeNull();
      expect(nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 13, now: end + 1, random: half })).toBeNull();
    });

    it("is not scheduled when it would violate the receiver's Retry-After", () => {
      const now = end - 30 * 60_000; // 30 min left, receiver asks for 45 min
      expect(
        nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 12, now, retryAfterMs: 45 * 60_000, random: half }),
      ).toBeNull();
      // 20 min Retry-After still fits: final attempt at the window end
      expect(
        nextAttemptAt({ firstAttemptAt: T0, failedAttempts: 12, now, retryAfterMs: 20 * 60_000, random: half }),
      ).toBe(end);
    });
  });

  it("rejects bad input", () => {
    const base = { firstAttemptAt: T0, failedAttempts: 1, now: T0, random: half };
    expect(() => nextAttemptAt({ ...base, failedAttempts: 0 })).toThrow(RangeError);
    expect(() => nextAttemptAt({ ...base, now: Number.NaN })).toThrow(RangeError);
    expect(() => nextAttemptAt({ ...base, firstAttemptAt: 1.5 })).toThrow(RangeError);
    expect(() => nextAttemptAt({ ...base, retryAfterMs: -1 })).toThrow(RangeError);
    expect(() => nextAttemptAt({ ...base, retryAfterMs: Number.NaN })).toThrow(RangeError);
  });
});

describe("describeSchedule", () => {
  it("lists the nominal offsets, ending with a final attempt at 23 h 50 min", () => {
    expect(describeSchedule()).toEqual([
      0, 5_000, 20_000, 65_000, 200_000, 605_000, 1_820_000, 5_465_000, 16_400_000, 38_000_000, 59_600_000,
      81_200_000, DELIVERY_WINDOW_MS - 10 * 60_000,
    ]);
  });

  it("with random = 0 (all delays at 80 %) still stays within the window", () => {
    const s = describeSchedule(() => 0);
    expect(s[0]).toBe(0);
    expect(s[1]).toBe(4_000);
    expect(s[s.length - 1]).toBeLessThanOrEqual(DELIVERY_WINDOW_MS);
    for (let i = 1; i < s.length; i++) expect(s[i]).toBeGreaterThan(s[i - 1]);
  });
});

describe("walking the whole schedule (property)", () => {
  it("terminates within the window for any random() stream", () => {
    fc.assert(
      fc.property(fc.infiniteStream(randomArb), (stream) => {
        const it = stream[Symbol.iterator]();
        const { attempts } = walk(() => it.next().value as number);
        const end = T0 + DELIVERY_WINDOW_MS;
        expect(attempts.length).toBeGreaterThanOrEqual(10);
        expect(attempts.length).toBeLessThanOrEqual(16);
        expect(attempts[1] - T0).toBeLessThanOrEqual(10_000);
        for (let i = 1; i < attempts.length; i++) {
          expect(attempts[i]).toBeGreaterThan(attempts[i - 1]);
          expect(attempts[i]).toBeLessThanOrEqual(end);
          expect(Number.isSafeInteger(attempts[i])).toBe(true);
        }
        // and after the last attempt there is nothing more
        expect(
          nextAttemptAt({
            firstAttemptAt: T0,
            failedAttempts: attempts.length,
            now: attempts[attempts.length - 1],
            random: half,
          }),
        ).toBeNull();
      }),
    );
  });

  it("with random Retry-After values: within the window and every gap honours the capped Retry-After", () => {
    fc.assert(
      fc.property(
        fc.infiniteStream(randomArb),
        fc.infiniteStream(fc.option(fc.integer({ min: 0, max: 3 * HOUR }), { nil: null })),
        (rs, ras) => {
          const ri = rs[Symbol.iterator]();
          const rai = ras[Symbol.iterator]();
          const { attempts, retryAfters } = walk(
            () => ri.next().value as number,
            () => rai.next().value as number | null,
          );
          for (let i = 1; i < attempts.length; i++) {
            expect(attempts[i]).toBeLessThanOrEqual(T0 + DELIVERY_WINDOW_MS);
            const ra = retryAfters[i - 1];
            const gap = attempts[i] - attempts[i - 1];
            if (ra !== null) expect(gap).toBeGreaterThanOrEqual(Math.min(ra, MAX_RETRY_AFTER_MS));
            expect(gap).toBeGreaterThan(0);
          }
        },
      ),
    );
  });
});
