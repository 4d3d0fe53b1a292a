// Time is injected wherever a test must control it: webhook retries, renewals, token expiry.
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * The clock background work reads (queue consumers, the retry scheduler, cron). Tests replace it
 * with `useClock` to walk a 24-hour retry schedule without waiting; production never changes it.
 */
let backgroundClock: Clock = systemClock;
export const clock: Clock = { now: () => backgroundClock.now() };
export function useClock(next: Clock = systemClock) {
  backgroundClock = next;
}

export const isoTime = (ms: number) => new Date(ms).toISOString();
export const isoDate = (ms: number) => isoTime(ms).slice(0, 10);
