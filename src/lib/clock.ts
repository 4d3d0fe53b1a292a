// The one clock. Everything that reads the time (requests, queue consumers, the retry scheduler,
// cron, token expiry, key caches) reads `clock`; tests replace it with `useClock` to walk a
// 24-hour retry schedule or a renewal without waiting. Production never changes it.
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

let backgroundClock: Clock = systemClock;
export const clock: Clock = { now: () => backgroundClock.now() };
export function useClock(next: Clock = systemClock) {
  backgroundClock = next;
}

export const isoTime = (ms: number) => new Date(ms).toISOString();
export const isoDate = (ms: number) => isoTime(ms).slice(0, 10);
