// sendSoon (src/lib/queue.ts): what requests of one isolate hand to a queue after their answers
// within a few milliseconds goes out in one sendBatch, sent by the first of them.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { MAX_SEND_BATCH, SEND_SOON_ABANDONED_MS, sendSoon } from "../../src/lib/queue";
import { throwingQueue } from "../support/faults";

/** A queue that records each sendBatch call's bodies, then hands them to the real job queue. */
function countingQueue() {
  const calls: unknown[][] = [];
  const queue = {
    async sendBatch(messages: Iterable<MessageSendRequest>) {
      const list = [...messages];
      calls.push(list.map((m) => m.body));
      await env.JOB_QUEUE.sendBatch(list.map((m) => ({ ...m, delaySeconds: 3600 })));
    },
  } as unknown as Queue;
  return { queue, calls };
}

/** A stand-in for executionCtx.waitUntil that keeps what it is given. */
function keptAlive() {
  const promises: Promise<unknown>[] = [];
  return { waitUntil: (p: Promise<unknown>) => void promises.push(p), promises, settled: () => Promise.all(promises) };
}

const job = (id: string) => ({ body: { kind: "test", id } });

describe("sendSoon", () => {
  it("sends what several requests hand off within the linger in one sendBatch, from the first request, in order", async () => {
    const { queue, calls } = countingQueue();
    const first = keptAlive();
    const second = keptAlive();
    const failures: unknown[] = [];
    sendSoon(queue, [job("a"), job("b")], first.waitUntil, (e) => failures.push(e));
    sendSoon(queue, [job("c")], second.waitUntil, (e) => failures.push(e));
    // Nothing is sent before the linger; the first request alone is kept alive for the send.
    expect(calls).toEqual([]);
    expect(first.promises).toHaveLength(1);
    expect(second.promises).toHaveLength(0);
    await first.settled();
    expect(calls).toEqual([[{ kind: "test", id: "a" }, { kind: "test", id: "b" }, { kind: "test", id: "c" }]]);
    expect(failures).toEqual([]);

    // After the send, the next handoff starts a burst of its own.
    const third = keptAlive();
    sendSoon(queue, [job("d")], third.waitUntil, (e) => failures.push(e));
    expect(third.promises).toHaveLength(1);
    await third.settled();
    expect(calls).toEqual([[{ kind: "test", id: "a" }, { kind: "test", id: "b" }, { kind: "test", id: "c" }], [{ kind: "test", id: "d" }]]);
  });

  it("keeps each queue's burst apart", async () => {
    const one = countingQueue();
    const two = countingQueue();
    const alive = keptAlive();
    sendSoon(one.queue, [job("x")], alive.waitUntil, () => {});
    sendSoon(two.queue, [job("y")], alive.waitUntil, () => {});
    expect(alive.promises).toHaveLength(2);
    await alive.settled();
    expect(one.calls).toEqual([[{ kind: "test", id: "x" }]]);
    expect(two.calls).toEqual([[{ kind: "test", id: "y" }]]);
  });

  it("splits a burst beyond the per-call limit", async () => {
    const { queue, calls } = countingQueue();
    const alive = keptAlive();
    for (let i = 0; i < MAX_SEND_BATCH + 5; i++) sendSoon(queue, [job(`m${i}`)], alive.waitUntil, () => {});
    await alive.settled();
    expect(calls.map((c) => c.length)).toEqual([MAX_SEND_BATCH, 5]);
    expect(calls.flat()).toEqual(Array.from({ length: MAX_SEND_BATCH + 5 }, (_, i) => ({ kind: "test", id: `m${i}` })));
  });

  it("reports a failed send to every request of the burst, and throws to none", async () => {
    const queue = throwingQueue("queue down");
    const alive = keptAlive();
    const failures: string[] = [];
    sendSoon(queue, [job("p")], alive.waitUntil, (e) => failures.push(`first: ${String(e)}`));
    sendSoon(queue, [job("q")], alive.waitUntil, (e) => failures.push(`second: ${String(e)}`));
    await expect(alive.settled()).resolves.toBeDefined();
    expect(failures).toEqual(["first: Error: queue down", "second: Error: queue down"]);
    expect(queue.sent).toEqual([{ kind: "test", id: "p" }, { kind: "test", id: "q" }]);
  });

  it("declares a burst not sent long after it began lost (its request was cut short): each of its callers hears, and the next handoff starts a new one", async () => {
    const { queue, calls } = countingQueue();
    const failures: string[] = [];
    // The wall clock says 5 s passed without a send, as when the request that began the burst was
    // cut short (here its timer still runs, later: it must then send nothing).
    const cutShort = keptAlive();
    sendSoon(queue, [job("first")], cutShort.waitUntil, (e) => failures.push(`first: ${String(e)}`), 1_000_000);
    const joined = keptAlive();
    sendSoon(queue, [job("joins")], joined.waitUntil, (e) => failures.push(`joins: ${String(e)}`), 1_000_000 + SEND_SOON_ABANDONED_MS - 1);
    expect(joined.promises).toHaveLength(0);
    const later = keptAlive();
    sendSoon(queue, [job("later")], later.waitUntil, (e) => failures.push(`later: ${String(e)}`), 1_000_000 + SEND_SOON_ABANDONED_MS);
    expect(later.promises).toHaveLength(1);
    expect(failures).toEqual([
      expect.stringMatching(/^first: Error: not sent: the request that held the burst stopped before sending it/),
      expect.stringMatching(/^joins: Error: not sent/),
    ]);
    await Promise.all([later.settled(), cutShort.settled()]);
    expect(calls).toEqual([[{ kind: "test", id: "later" }]]);
    expect(failures).toHaveLength(2);

    // The new burst is done: the next handoff starts another.
    const next = keptAlive();
    sendSoon(queue, [job("next")], next.waitUntil, () => {});
    expect(next.promises).toHaveLength(1);
    await next.settled();
    expect(calls).toHaveLength(2);
  });

  it("reports a failed sendBatch call to its own handoffs only, and goes on with the next call", async () => {
    let call = 0;
    const sent: unknown[][] = [];
    const queue = {
      async sendBatch(messages: Iterable<MessageSendRequest>) {
        const list = [...messages].map((m) => m.body);
        if (call++ === 0) throw new Error("first call refused");
        sent.push(list);
      },
    } as unknown as Queue;
    const alive = keptAlive();
    const failed: string[] = [];
    for (let i = 0; i < MAX_SEND_BATCH + 5; i++) {
      sendSoon(queue, [job(`m${i}`)], alive.waitUntil, () => {
        failed.push(`m${i}`);
        // A handler that throws does not stop the others.
        if (i === 0) throw new Error("handler broke");
      });
    }
    await alive.settled();
    expect(failed).toEqual(Array.from({ length: MAX_SEND_BATCH }, (_, i) => `m${i}`));
    expect(sent).toEqual([Array.from({ length: 5 }, (_, i) => ({ kind: "test", id: `m${MAX_SEND_BATCH + i}` }))]);
  });
});
