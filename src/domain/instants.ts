/**
 * Instants for the billing arithmetic: epoch milliseconds, strict ISO 8601 date-times, or Dates,
 * all read to epoch ms, and whole seconds for time fractions. Pure and UTC-only.
 */

/** A point in time: epoch milliseconds (a safe integer), an ISO 8601 date-time with a zone, or a Date. */
export type Instant = number | string | Date;

export const SECOND_MS = 1000;
export const DAY_MS = 24 * 60 * 60 * SECOND_MS;

// YYYY-MM-DDTHH:MM[:SS[.fff]] then Z or ±HH:MM. A date alone, or no zone, is refused: its
// meaning would depend on where the code runs.
const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:\d{2})$/;

/** Epoch ms of `at`. Throws RangeError, naming `name`, for anything that is not a valid instant. */
export function toEpochMs(at: Instant, name = "instant"): number {
  if (typeof at === "number") {
    if (!Number.isSafeInteger(at)) throw new RangeError(`${name} must be whole epoch milliseconds; got ${String(at)}`);
    return at;
  }
  if (at instanceof Date) {
    const t = at.getTime();
    if (Number.isNaN(t)) throw new RangeError(`${name} must be a valid Date`);
    return t;
  }
  if (typeof at === "string") {
    const m = ISO.exec(at);
    if (m) {
      const [, y, mo, d, h, mi, s] = m;
      const month = Number(mo);
      const day = Number(d);
      const lastDay = new Date(Date.UTC(2000, month, 0)).getUTCDate(); // days in that month of a leap year
      const leapOk = !(month === 2 && day === 29) || isLeapYear(Number(y));
      if (month >= 1 && month <= 12 && day >= 1 && day <= lastDay && leapOk && Number(h) <= 23 && Number(mi) <= 59 && Number(s ?? 0) <= 59) {
        const t = Date.parse(at);
        if (!Number.isNaN(t)) return t;
      }
    }
    throw new RangeError(`${name} must be an ISO 8601 date-time with a zone, such as "2026-01-31T00:00:00Z"; got ${JSON.stringify(at.slice(0, 40))}`);
  }
  throw new RangeError(`${name} must be epoch milliseconds, an ISO 8601 date-time or a Date`);
}

function isLeapYear(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

/** Whole epoch seconds of `at` (floored): time fractions count whole seconds, as Stripe's timestamps do. */
export function toEpochSeconds(at: Instant, name = "instant"): number {
  return Math.floor(toEpochMs(at, name) / SECOND_MS);
}
