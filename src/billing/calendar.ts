// Billing dates of a subscription, always computed from its anchor (Jan 31 -> Feb 28 -> Mar 31),
// and the dunning schedule that follows a failed renewal.
import { addIntervals, type BillingInterval } from "../domain/billing-calendar";

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
