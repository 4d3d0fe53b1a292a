/**
 * Webhook delivery retry schedule. Pure: the clock (`now`) and the random
 * source (`random`) are always passed in.
 *
 * Policy
 * - Exponential backoff: nominal delay = min(5 s * 3^(failedAttempts-1), 6 h),
 *   multiplied by a jitter factor in [0.8, 1.2) and floored to whole ms.
 * - A receiver's Retry-After is honoured (we never retry sooner than it asks),
 *   but capped at MAX_RETRY_AFTER_MS so a receiver cannot park a delivery.
 * - No attempt is ever made later than DELIVERY_WINDOW_MS after the first one.
 *   Every attempt is scheduled at least FINAL_ATTEMPT_LEAD_MS before the window
 *   ends, so an alarm or a queue that runs a little late still sends it inside
 *   the window (the consumer refuses only an attempt starting after the window).
 * - Final attempt: when the next computed attempt would fall after the latest
 *   attempt time (window end - FINAL_ATTEMPT_LEAD_MS), we schedule ONE last
 *   attempt exactly at that time, provided
 *   (a) `now` is at least FINAL_ATTEMPT_MARGIN_MS before it (so we don't hammer
 *   a receiver right after a failure, and so the final attempt is never
 *   followed by another), and
 *   (b) it still honours the (capped) Retry-After.
 *   Otherwise the delivery ends "failed" (null).
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** No attempt later than this after the FIRST attempt. */
export const DELIVERY_WINDOW_MS = 24 * HOUR;
/** Cap applied to a receiver's Retry-After. */
export const MAX_RETRY_AFTER_MS = 1 * HOUR;
/** Backoff parameters. */
export const BASE_DELAY_MS = 5 * SECOND;
export const BACKOFF_FACTOR = 3;
export const MAX_DELAY_MS = 6 * HOUR;
/** The last attempt is scheduled this long before the window ends: the slack for a late alarm or queue. */
export const FINAL_ATTEMPT_LEAD_MS = 10 * MINUTE;
/** A final attempt is only scheduled when now <= (its time) - this. */
export const FINAL_ATTEMPT_MARGIN_MS = 5 * MINUTE;

/** RFC 9110 §10.2.3 / §5.6.7: overflowing delta-seconds are treated as 2^31 s. */
const MAX_DELTA_SECONDS = 2 ** 31;

function assertFailedAttempts(n: number): void {
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 1) {
    throw new RangeError(`failedAttempts must be a positive integer; got ${String(n)}`);
  }
}

/** Nominal (un-jittered) delay after `failedAttempts` failed attempts. */
export function nominalDelayMs(failedAttempts: number): number {
  assertFailedAttempts(failedAttempts);
  let delay = BASE_DELAY_MS;
  for (let i = 1; i < failedAttempts && delay < MAX_DELAY_MS; i++) delay *= BACKOFF_FACTOR;
  return Math.min(delay, MAX_DELAY_MS);
}

/**
 * Delay before the next attempt, in whole ms: nominalDelayMs * jitter, jitter
 * in [0.8, 1.2) derived from random() in [0, 1). random() = 0.5 gives exactly
 * the nominal delay. The first retry is at most 6 s after the first attempt.
 */
export function backoffDelayMs(failedAttempts: number, random: () => number): number {
  const nominal = nominalDelayMs(failedAttempts);
  const r = random();
  if (typeof r !== "number" || !(r >= 0 && r < 1)) {
    throw new RangeError(`random() must return a number in [0, 1); got ${String(r)}`);
  }
  // nominal * (0.8 + 0.4 r) written as nominal * (4 + 2r) / 5 so that r = 0 and
  // r = 0.5 are exact in binary floating point. Nominal delays are multiples of
  // 5 ms, so the bounds are exact integers; for r just below 1, 4 + 2r rounds
  // to 6, hence the clamp to keep the factor strictly below 1.2.
  const upperExclusive = (nominal * 6) / 5;
  return Math.min(Math.floor((nominal * (4 + 2 * r)) / 5), upperExclusive - 1);
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const MONTH_RE = MONTHS.join("|");
const IMF_FIXDATE = new RegExp(
  `^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) (${MONTH_RE}) (\\d{4}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`,
);
const RFC850_DATE = new RegExp(
  `^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-(${MONTH_RE})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`,
);
const ASCTIME_DATE = new RegExp(
  `^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (${MONTH_RE}) ([ \\d]\\d) (\\d{2}):(\\d{2}):(\\d{2}) (\\d{4})$`,
);

function utcMs(year: number, month0: number, day: number, h: number, m: number, s: number): number | null {
  if (h > 23 || m > 59 || s > 60 || day < 1) return null; // s = 60: leap second
  const d = new Date(0);
  d.setUTCFullYear(year, month0, 1);
  d.setUTCHours(h, m, Math.min(s, 59), 0);
  const lastDay = new Date(0);
  lastDay.setUTCFullYear(year, month0 + 1, 0);
  if (day > lastDay.getUTCDate()) return null;
  d.setUTCDate(day);
  return d.getTime();
}

/** Parses the three HTTP-date formats of RFC 9110 §5.6.7 to epoch ms, or null. */
export function parseHttpDate(value: string, now: number): number | null {
  let m = IMF_FIXDATE.exec(value);
  if (m) {
    return utcMs(Number(m[3]), MONTHS.indexOf(m[2]), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  }
  m = RFC850_DATE.exec(value);
  if (m) {
    // Two-digit year: RFC 9110 says a year that appears to be more than 50
    // years in the future is the most recent past year with those digits.
    const yy = Number(m[3]);
    const nowYear = new Date(now).getUTCFullYear();
    let year = nowYear - (nowYear % 100) + yy;
    if (year > nowYear + 50) year -= 100;
    return utcMs(year, MONTHS.indexOf(m[2]), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  }
  m = ASCTIME_DATE.exec(value);
  if (m) {
    return utcMs(Number(m[6]), MONTHS.indexOf(m[1]), Number(m[2].trim()), Number(m[3]), Number(m[4]), Number(m[5]));
  }
  return null;
}

/**
 * RFC 9110 §10.2.3 Retry-After: delta-seconds or HTTP-date, converted to a
 * delay in ms from `now` (>= 0; a date in the past gives 0). Returns null when
 * the header is absent, empty or not in one of those forms.
 */
export function parseRetryAfter(header: string | null, now: number): number | null {
  if (header === null || header === undefined) return null;
  const value = header.trim();
  if (value === "") return null;
  if (/^\d+$/.test(value)) {
    const seconds = Math.min(Number(value), MAX_DELTA_SECONDS);
    return seconds * SECOND;
  }
  if (!Number.isFinite(now)) return null;
  const at = parseHttpDate(value, now);
  if (at === null) return null;
  return Math.max(0, at - now);
}

/**
 * When to make the next attempt (epoch ms), or null when the delivery should
 * end "failed". See the policy at the top of this file for the final-attempt rule.
 */
export function nextAttemptAt(args: {
  firstAttemptAt: number;
  failedAttempts: number;
  now: number;
  retryAfterMs?: number | null;
  random: () => number;
}): number | null {
  const { firstAttemptAt, failedAttempts, now, random } = args;
  const retryAfterMs = args.retryAfterMs ?? null;
  if (!Number.isSafeInteger(firstAttemptAt)) throw new RangeError("firstAttemptAt must be an integer epoch ms");
  if (!Number.isSafeInteger(now)) throw new RangeError("now must be an integer epoch ms");
  if (retryAfterMs !== null && !(typeof retryAfterMs === "number" && retryAfterMs >= 0)) {
    throw new RangeError(`retryAfterMs must be a non-negative number or null; got ${String(retryAfterMs)}`);
  }
  const backoff = backoffDelayMs(failedAttempts, random);
  const retryAfter = retryAfterMs === null ? 0 : Math.ceil(Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
  const candidate = now + Math.max(backoff, retryAfter);
  const latest = firstAttemptAt + DELIVERY_WINDOW_MS - FINAL_ATTEMPT_LEAD_MS;
  if (candidate <= latest) return candidate;
  // One final attempt at the latest attempt time (see policy above).
  if (now <= latest - FINAL_ATTEMPT_MARGIN_MS && now + retryAfter <= latest) return latest;
  return null;
}

/**
 * Offsets (ms after the first attempt, starting with 0 for the first attempt
 * itself) of every attempt in the window, assuming every attempt fails
 * immediately and no Retry-After. With the default random = () => 0.5 these
 * are the nominal offsets.
 */
export function describeSchedule(random: () => number = () => 0.5): number[] {
  const offsets = [0];
  let now = 0;
  for (let failedAttempts = 1; ; failedAttempts++) {
    const next = nextAttemptAt({ firstAttemptAt: 0, failedAttempts, now, random });
    if (next === null) return offsets;
    offsets.push(next);
    now = next;
  }
}
