// The per-key rate limit: 1,000 requests per 10 seconds (wrangler.toml [[ratelimits]] RATE_LIMITER).
// Deployed, the Rate Limiting binding counts, in process, for the Cloudflare location. In development
// the binding's local emulation is a Durable Object that writes a SQLite row on every call, which
// cost 1.3 ms of CPU per request (as much as the rest of a read by id, bench/RESULTS.md, issue 23).
// There, one isolate serves every request, and a counter in it with the binding's own rule (windows
// of RATE_PERIOD_SECONDS aligned to the clock, RATE_LIMIT requests each per key) stands in for it.
// It reads Tender's one clock (src/lib/clock.ts): the wall clock, unless a test replaces it.
import type { Bindings } from "../env";
import { isDevelopment } from "../env";
import { clock } from "./clock";

/** wrangler.toml's `simple = { limit = 1000, period = 10 }`. */
export const RATE_LIMIT = 1000;
export const RATE_PERIOD_SECONDS = 10;

/** Counts of the current window, by key; cleared when the window rolls over, so it holds one window's keys at most. */
let window = { epoch: -1, counts: new Map<string, number>() };

export const developmentRateLimiter: RateLimit = {
  async limit({ key }) {
    const epoch = Math.floor(clock.now() / (RATE_PERIOD_SECONDS * 1000));
    if (epoch !== window.epoch) window = { epoch, counts: new Map() };
    const count = window.counts.get(key) ?? 0;
    if (count >= RATE_LIMIT) return { success: false };
    window.counts.set(key, count + 1);
    return { success: true };
  },
};

/** The limiter of this environment: the binding when deployed, the in-isolate counter in development. */
export const rateLimiterOf = (env: Bindings): RateLimit => (isDevelopment(env) ? developmentRateLimiter : env.RATE_LIMITER);
