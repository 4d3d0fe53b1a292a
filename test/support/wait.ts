// Waiting for background work (queue consumers, deliveries, clock advances) in real time.
// Two kinds: waitFor retries a check that throws (an expect), waitUntil polls a probe until it
// returns something truthy.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `check` until it stops throwing (an `expect` inside it passes) and returns its value; after
 * `timeoutMs` the last error is thrown.
 */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 15_000, intervalMs = 100): Promise<T> {
  const start = Date.now();
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() - start > timeoutMs) throw error;
      await sleep(intervalMs);
    }
  }
}

/** Runs `probe` until it returns a truthy value, and returns that value; after `timeoutMs` throws "timed out waiting". */
export async function waitUntil<T>(probe: () => Promise<T | undefined | null | false>, timeoutMs = 8000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await sleep(intervalMs);
  }
}
