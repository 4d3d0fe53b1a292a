/**
 * Anchored billing dates with Stripe semantics. Pure and UTC-only.
 *
 * Every billing date is computed from the anchor (never chained from the
 * previous date): the anchor's day of month, clamped to the last day of the
 * target month, at the anchor's UTC time of day. So a Jan 31 anchor renews on
 * Feb 28/29, then Mar 31 (not Mar 28), then Apr 30, ...
 *
 * The dunning schedule that follows a failed renewal lives here too.
 */

export type BillingInterval = "month" | "year";

const MONTHS_PER: Record<BillingInterval, number> = { month: 1, year: 12 };

function assertValidDate(d: Date, name: string): void {
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) {
    throw new RangeError(`${name} must be a valid Date`);
  }
}

function monthsPer(interval: BillingInterval): number {
  const m = MONTHS_PER[interval];
  if (m === undefined) throw new RangeError(`unknown billing interval: ${String(interval)}`);
  return m;
}

/** Number of days in a month (month is 0-based), UTC, proleptic Gregorian. */
export function daysInMonth(year: number, month0: number): number {
  const d = new Date(0);
  // setUTCFullYear avoids Date.UTC's 0..99 => 1900..1999 mapping.
  d.setUTCFullYear(year, month0 + 1, 0);
  return d.getUTCDate();
}

/** Absolute month number (year * 12 + month0) of a Date, UTC. */
function monthNumber(d: Date): number {
  return d.getUTCFullYear() * 12 + d.getUTCMonth();
}

/**
 * The count-th billing date after `anchor` (count = 0 is the anchor itself).
 * Throws RangeError for an invalid anchor, a count that is not a non-negative
 * safe integer, or a result outside the JavaScript Date range.
 */
export function addIntervals(anchor: Date, interval: BillingInterval, count: number): Date {
  assertValidDate(anchor, "anchor");
  if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 0) {
    throw new RangeError(`count must be a non-negative integer; got ${String(count)}`);
  }
  const target = monthNumber(anchor) + count * monthsPer(interval);
  if (!Number.isSafeInteger(target)) throw new RangeError("billing date out of range");
  const year = Math.floor(target / 12);
  const month0 = target - year * 12;
  const day = Math.min(anchor.getUTCDate(), daysInMonth(year, month0));
  const result = new Date(0);
  result.setUTCFullYear(year, month0, day);
  result.setUTCHours(
    anchor.getUTCHours(),
    anchor.getUTCMinutes(),
    anchor.getUTCSeconds(),
    anchor.getUTCMilliseconds(),
  );
  if (Number.isNaN(result.getTime())) throw new RangeError("billing date out of range");
  return result;
}

/**
 * The index of the billing period containing `at`: the largest n >= 0 with
 * addIntervals(anchor, interval, n) <= at. Returns 0 when `at` is before the
 * first renewal (including when `at` is before the anchor).
 */
export function periodIndexAt(anchor: Date, interval: BillingInterval, at: Date): number {
  assertValidDate(anchor, "anchor");
  assertValidDate(at, "at");
  const step = monthsPer(interval);
  const monthsDiff = monthNumber(at) - monthNumber(anchor);
  if (monthsDiff <= 0) return 0;
  // Integer estimate; it is off by at most one period, so correct it exactly.
  let n = Math.floor(monthsDiff / step);
  const t = at.getTime();
  while (n > 0 && timeOf(anchor, interval, n) > t) n--;
  while (timeOf(anchor, interval, n + 1) <= t) n++;
  return n;
}

/** addIntervals as epoch ms, or +Infinity when the date is beyond the Date range. */
function timeOf(anchor: Date, interval: BillingInterval, n: number): number {
  try {
    return addIntervals(anchor, interval, n).getTime();
  } catch (e) {
    if (e instanceof RangeError) return Number.POSITIVE_INFINITY;
    throw e;
  }
}

/** Epoch ms at which period `index` starts (index 0 is the first, paid at creation). */
export function periodStartMs(billingAnchor: string, interval: BillingInterval, index: number): number {
  return addIntervals(new Date(billingAnchor), interval, index).getTime();
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Retries after the first failed renewal of a period: 1, 3 and 5 days after it. Each failed
 * attempt schedules the next one by the gap to the next offset (1, 2 and 2 days), so a retry
 * that runs late does not bunch up the ones after it.
 */
export const DUNNING_RETRY_OFFSETS_MS = [1 * DAY_MS, 3 * DAY_MS, 5 * DAY_MS] as const;

/** The first renewal attempt plus the retries: after this many failures the subscription is canceled. */
export const MAX_FAILED_ATTEMPTS = DUNNING_RETRY_OFFSETS_MS.length + 1;

/** After the `failedAttempts`-th failed attempt of a period, made at `at`: the next retry, or null to give up. */
export function nextRetryAt(failedAttempts: number, at: number): number | null {
  if (failedAttempts >= MAX_FAILED_ATTEMPTS) return null;
  const previousOffset = failedAttempts >= 2 ? DUNNING_RETRY_OFFSETS_MS[failedAttempts - 2] : 0;
  return at + DUNNING_RETRY_OFFSETS_MS[failedAttempts - 1] - previousOffset;
}
