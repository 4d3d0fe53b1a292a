// Time is injected wherever a test must control it: renewals, retries and token expiry.
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export const isoTime = (ms: number) => new Date(ms).toISOString();
export const isoDate = (ms: number) => isoTime(ms).slice(0, 10);
