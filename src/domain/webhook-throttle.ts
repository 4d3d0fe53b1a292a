/**
 * Webhook endpoint throttle. Pure: the clock (`now`) is always passed in. The endpoint's Durable
 * Object (src/webhooks/throttle.ts) holds the state and applies these rules, one call at a time.
 *
 * Rule
 * - An endpoint's `rate_limit` is deliveries per second (1-1000). A delivery is given a slot: a
 *   time at which it may be sent. Slots are handed out in order, and the slot for a new delivery
 *   is the earliest time t, no earlier than the previous slot, such that the half-open second
 *   (t - 1 s, t] holds fewer than `rate` earlier slots. So every second holds at most `rate`
 *   slots, and any 10-second window at most 10 x rate: the limit, exactly.
 * - Overload: a receiver's 429, 502, 503 or 504 halves the endpoint's effective rate for
 *   SLOWDOWN_MS (each further overload inside that time halves it again, down to 1 per second),
 *   and a Retry-After (seconds or HTTP date, at most MAX_RETRY_AFTER_MS) pauses every attempt to
 *   the endpoint until then. An endpoint with no rate_limit is slowed from UNLIMITED_BASE_RATE.
 * - Waiting for a slot is not an attempt: the attempt count and the delivery's 24-hour window
 *   are untouched, and the window is judged at the time the attempt fell due (when it first asked
 *   for a slot), not at the time the slot came.
 */
import { MAX_RETRY_AFTER_MS } from "./webhook-retry-schedule";

export const RATE_LIMIT_MIN = 1;
export const RATE_LIMIT_MAX = 1000;
/** The window the rate is held over: a slot's second. */
export const SLOT_WINDOW_MS = 1000;
/** How long an overload answer slows the endpoint (from the last one). */
export const SLOWDOWN_MS = 60_000;
/** The rate an endpoint without a rate_limit is halved from while it is slowed. */
export const UNLIMITED_BASE_RATE = 100;
/** At most this many halvings: 1000 / 2^10 < 1, so every rate reaches its floor of 1. */
const MAX_HALVINGS = 10;

/** The answers that mean "you are sending too fast" (or a gateway in front of the receiver is overloaded). */
export const OVERLOAD_STATUSES: readonly number[] = [429, 502, 503, 504];
export const isOverload = (status: number | null) => status !== null && OVERLOAD_STATUSES.includes(status);

export interface SlowdownState {
  /** Epoch ms before which nothing is sent (a Retry-After). */
  pausedUntil: number;
  /** How many times the rate is halved, while now < slowedUntil. */
  halvings: number;
  /** Epoch ms at which the halvings end. */
  slowedUntil: number;
}

export const NOT_SLOWED: SlowdownState = { pausedUntil: 0, halvings: 0, slowedUntil: 0 };

/** The deliveries per second the endpoint gets now. */
export function effectiveRate(rateLimit: number | null, state: SlowdownState, now: number): number {
  const base = rateLimit ?? UNLIMITED_BASE_RATE;
  if (now >= state.slowedUntil || state.halvings <= 0) return base;
  return Math.max(1, Math.floor(base / 2 ** Math.min(state.halvings, MAX_HALVINGS)));
}

/** The state after an overload answer at `now`, with the receiver's Retry-After (ms) if it sent one. */
export function slowDown(state: SlowdownState, now: number, retryAfterMs: number | null): SlowdownState {
  const halvings = now < state.slowedUntil ? Math.min(state.halvings + 1, MAX_HALVINGS) : 1;
  const pause = retryAfterMs === null ? 0 : Math.ceil(Math.min(Math.max(0, retryAfterMs), MAX_RETRY_AFTER_MS));
  const pausedUntil = Math.max(state.pausedUntil, now + pause);
  return { pausedUntil, halvings, slowedUntil: Math.max(state.slowedUntil, now + SLOWDOWN_MS, pausedUntil) };
}

/** Until when an overload answer at `now` keeps the endpoint on the throttled path (stored on its row). */
export function slowedUntilAfter(now: number, retryAfterMs: number | null): number {
  return slowDown(NOT_SLOWED, now, retryAfterMs).slowedUntil;
}

/**
 * The next slot: no earlier than now, the pause, or the latest slot given (slots go in order),
 * and at least a second after the `rate`-th latest slot (`rateth`, null when fewer were given).
 */
export function nextSlot(args: { now: number; pausedUntil: number; latest: number | null; rateth: number | null }): number {
  const { now, pausedUntil, latest, rateth } = args;
  return Math.max(now, pausedUntil, latest ?? now, rateth === null ? now : rateth + SLOT_WINDOW_MS);
}
