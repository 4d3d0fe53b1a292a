import { describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { RATE_LIMIT, RATE_PERIOD_SECONDS, developmentRateLimiter } from "../../src/lib/rate-limiter";
import { useClock } from "../../src/lib/clock";

const WINDOW_MS = 10_000;

describe("429 rate limit (wrangler.toml: 1000 requests per 10 s per key)", () => {
  it("the 1001st request within the window answers 429 with Retry-After; another key is unaffected", async () => {
    const hot = await signup();
    const other = await signup();
    // The local limiter counts in windows aligned to the wall clock: start early in a window, so
    // that the whole burst falls inside one.
    if (Date.now() % WINDOW_MS > 4_000) await new Promise((resolve) => setTimeout(resolve, WINDOW_MS - (Date.now() % WINDOW_MS) + 50));
    // Cheap requests: authenticated, then refused by validation (no D1 round trip).
    const statuses: number[] = [];
    for (let sent = 0; sent < 1050; sent += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => call("/api/users?limit=0", { key: hot.key })));
      statuses.push(...batch.map((r) => r.status));
    }
    expect(statuses.filter((s) => s === 400)).toHaveLength(1000);
    expect(statuses.filter((s) => s === 429)).toHaveLength(50);

    const limited = await call("/api/users", { key: hot.key });
    expectError(limited, 429, "rate_limit_error", "rate_limited");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);

    expect((await call("/api/users", { key: other.key })).status).toBe(200);
  }, 30_000);
});

describe("the development limiter (src/lib/rate-limiter.ts; deployed, the binding counts: test/production)", () => {
  it("allows RATE_LIMIT per key in each window aligned to the wall clock, and starts afresh in the next", async () => {
    const start = Math.ceil(Date.now() / 10_000) * 10_000 + 1_000_000_000;
    let now = start;
    useClock({ now: () => now });
    try {
      const key = `key_${crypto.randomUUID()}`;
      for (let i = 0; i < RATE_LIMIT; i++) expect(await developmentRateLimiter.limit({ key })).toEqual({ success: true });
      expect(await developmentRateLimiter.limit({ key })).toEqual({ success: false });
      expect(await developmentRateLimiter.limit({ key: `${key}_other` })).toEqual({ success: true });
      now = start + RATE_PERIOD_SECONDS * 1000 - 1;
      expect(await developmentRateLimiter.limit({ key })).toEqual({ success: false });
      now = start + RATE_PERIOD_SECONDS * 1000;
      expect(await developmentRateLimiter.limit({ key })).toEqual({ success: true });
    } finally {
      useClock();
    }
  });
});
