import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_RETRY_AFTER_MS } from "../../src/domain/webhook-retry-schedule";
import { NOT_SLOWED, SLOWDOWN_MS, UNLIMITED_BASE_RATE, effectiveRate, isOverload, nextSlot, slowDown } from "../../src/domain/webhook-throttle";

const T = 1_800_000_000_000;

describe("webhook throttle rules", () => {
  it("overload answers are 429, 502, 503 and 504 only", () => {
    expect([429, 502, 503, 504].every(isOverload)).toBe(true);
    expect([200, 400, 404, 410, 500, 501, 505, null].some((s) => isOverload(s))).toBe(false);
  });

  it("each overload inside the slowdown halves the rate again, down to 1; after it, the full rate", () => {
    let state = slowDown(NOT_SLOWED, T, null);
    expect(effectiveRate(100, state, T)).toBe(50);
    state = slowDown(state, T + 1000, null);
    expect(effectiveRate(100, state, T + 1000)).toBe(25);
    for (let i = 0; i < 20; i++) state = slowDown(state, T + 2000, null);
    expect(effectiveRate(1000, state, T + 2000)).toBe(1);
    expect(effectiveRate(1000, state, T + 2000 + SLOWDOWN_MS)).toBe(1000);
    expect(effectiveRate(null, slowDown(NOT_SLOWED, T, null), T)).toBe(UNLIMITED_BASE_RATE / 2);
    // A later overload after the slowdown ended starts again at one halving.
    expect(effectiveRate(100, slowDown(state, T + 2000 + SLOWDOWN_MS, null), T + 2000 + SLOWDOWN_MS)).toBe(50);
  });

  it("a Retry-After pauses until then, capped at an hour, and never shortens an earlier pause", () => {
    const paused = slowDown(NOT_SLOWED, T, 30_000);
    expect(paused.pausedUntil).toBe(T + 30_000);
    expect(slowDown(paused, T + 1, 1000).pausedUntil).toBe(T + 30_000);
    expect(slowDown(NOT_SLOWED, T, 10 * MAX_RETRY_AFTER_MS).pausedUntil).toBe(T + MAX_RETRY_AFTER_MS);
    expect(nextSlot({ now: T, pausedUntil: paused.pausedUntil, latest: null, rateth: null })).toBe(T + 30_000);
  });

  it("slots given one after another never put more than the rate in any second, whatever the rates and arrival times", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 1, max: 8 })), { minLength: 1, maxLength: 120 }),
        (calls) => {
          const slots: number[] = [];
          let now = T;
          let most = 8;
          for (const [gap, rate] of calls) {
            now += gap;
            most = Math.max(most, rate);
            const latest = slots.length ? slots[slots.length - 1] : null;
            const rateth = slots.length >= rate ? slots[slots.length - rate] : null;
            const at = nextSlot({ now, pausedUntil: 0, latest, rateth });
            expect(at).toBeGreaterThanOrEqual(now);
            // This slot's second holds at most `rate` slots, itself included.
            expect(slots.filter((s) => s > at - 1000).length + 1).toBeLessThanOrEqual(rate);
            slots.push(at);
          }
        },
      ),
    );
  });
});
