/**
 * Trials: when a trial ends (from `trial_period_days` or an explicit `trial_end`), when
 * `subscription_trial_will_end` is due, and the first billing period, anchored at the trial's end.
 * Pure and UTC-only: a trial day is 24 hours.
 */
import { addIntervals, type BillingInterval } from "./billing-calendar";
import { DAY_MS, toEpochMs, type Instant } from "./instants";

/** Longest trial, in days (Stripe's limit too). */
export const MAX_TRIAL_DAYS = 730;

/** `subscription_trial_will_end` is due this long before the trial ends. */
export const TRIAL_WILL_END_NOTICE_MS = 3 * DAY_MS;

type Refusal<R extends string> = { ok: false; reason: R; message: string };

/** Reads `trial_period_days`: a whole number from 0 to 730 (0 = no trial). */
export function parseTrialPeriodDays(input: unknown): { ok: true; days: number } | Refusal<"trial_period_days_invalid"> {
  if (typeof input !== "number" || !Number.isSafeInteger(input) || input < 0 || input > MAX_TRIAL_DAYS) {
    return {
      ok: false,
      reason: "trial_period_days_invalid",
      message: `trial_period_days must be a whole number of days from 0 to ${MAX_TRIAL_DAYS}.`,
    };
  }
  return { ok: true, days: input };
}

/**
 * When the trial of a subscription created at `start` ends, epoch ms, or null for no trial.
 * The subscription's `trialEnd` wins over its `trialPeriodDays`, which wins over the plan's
 * `planTrialPeriodDays`. Days count 24 hours each from `start`; 0 days is no trial. An explicit
 * trial_end must be after `start` and at most 730 days after it.
 */
export function resolveTrialEnd(input: {
  start: Instant;
  trialEnd?: Instant | null;
  trialPeriodDays?: number | null;
  planTrialPeriodDays?: number | null;
}): { ok: true; trialEnd: number | null } | Refusal<"trial_end_not_in_future" | "trial_too_long" | "trial_period_days_invalid"> {
  const start = toEpochMs(input.start, "start");
  const latest = start + MAX_TRIAL_DAYS * DAY_MS;
  if (input.trialEnd !== undefined && input.trialEnd !== null) {
    const end = toEpochMs(input.trialEnd, "trial_end");
    if (end <= start) return { ok: false, reason: "trial_end_not_in_future", message: "trial_end must be in the future." };
    if (end > latest) {
      return { ok: false, reason: "trial_too_long", message: `trial_end must be at most ${MAX_TRIAL_DAYS} days from now.` };
    }
    return { ok: true, trialEnd: end };
  }
  const daysInput = input.trialPeriodDays ?? input.planTrialPeriodDays ?? 0;
  const days = parseTrialPeriodDays(daysInput);
  if (!days.ok) return days;
  return { ok: true, trialEnd: days.days === 0 ? null : start + days.days * DAY_MS };
}

/**
 * When `subscription_trial_will_end` is due: three days before the trial ends, or at the trial's
 * start when the trial is three days or shorter.
 */
export function trialWillEndAt(trialStart: Instant, trialEnd: Instant): number {
  const start = toEpochMs(trialStart, "trialStart");
  const end = toEpochMs(trialEnd, "trialEnd");
  if (end <= start) throw new RangeError("a trial must end after it starts");
  return Math.max(start, end - TRIAL_WILL_END_NOTICE_MS);
}

/**
 * The first billing period after a trial: it starts at the trial's end, which is the billing
 * anchor of every later period (so a trial ending on the 31st renews on the last day of shorter months).
 */
export function firstPeriodAfterTrial(
  trialEnd: Instant,
  interval: BillingInterval,
): { billingAnchor: number; start: number; end: number } {
  const anchor = toEpochMs(trialEnd, "trialEnd");
  return { billingAnchor: anchor, start: anchor, end: addIntervals(new Date(anchor), interval, 1).getTime() };
}
