// Sending to Cloudflare Queues: in as few sendBatch calls as the per-call limit allows, and, for
// work a request hands off after its answer, together with what other requests of the same
// isolate hand off within a few milliseconds.

import { clock } from "./clock";

/** The most messages one Queue.sendBatch call takes. */
export const MAX_SEND_BATCH = 100;

/** Sends messages in as few sendBatch calls as the queue's per-call limit allows. */
export async function sendInBatches<Body>(queue: Queue, messages: MessageSendRequest<Body>[]): Promise<void> {
  for (let i = 0; i < messages.length; i += MAX_SEND_BATCH) {
    await queue.sendBatch(messages.slice(i, i + MAX_SEND_BATCH));
  }
}

/** How long messages handed to sendSoon wait for others to the same queue. */
export const SEND_SOON_LINGER_MS = 20;
/**
 * A burst not sent this long after it began belongs to a request whose work was cut short (its
 * timer never ran): the next handoff starts a new burst instead of joining it.
 */
export const SEND_SOON_ABANDONED_MS = 5_000;

interface Handoff {
  messages: MessageSendRequest<unknown>[];
  /** Called should the send of these messages fail (each caller logs what its sweep will retry). */
  onFailure: (error: unknown) => void;
}

interface Burst {
  startedAt: number;
  handoffs: Handoff[];
}

/** The burst waiting for each queue's next send. */
const waiting = new Map<Queue, Burst>();

/**
 * Sends `messages` after the answer, with the messages other requests of this isolate hand to the
 * same queue within SEND_SOON_LINGER_MS: one sendBatch for a burst rather than one per request.
 * The first request of a burst sends it, kept alive by its `waitUntil`. For work whose loss a
 * sweep repairs (a payout's or a refund's settlement): a failed send is reported to each caller's
 * `onFailure`, never thrown.
 */
export function sendSoon<Body>(
  queue: Queue,
  messages: MessageSendRequest<Body>[],
  waitUntil: (promise: Promise<unknown>) => void,
  onFailure: (error: unknown) => void,
  now: number = clock.now(),
): void {
  const handoff: Handoff = { messages, onFailure };
  const open = waiting.get(queue);
  if (open && now - open.startedAt < SEND_SOON_ABANDONED_MS) {
    open.handoffs.push(handoff);
    return;
  }
  if (open) console.error(JSON.stringify({ message: "a queue send burst was never sent; its sweeps will retry", handoffs: open.handoffs.length }));
  const burst: Burst = { startedAt: now, handoffs: [handoff] };
  waiting.set(queue, burst);
  waitUntil(
    new Promise((resolve) => setTimeout(resolve, SEND_SOON_LINGER_MS)).then(async () => {
      if (waiting.get(queue) === burst) waiting.delete(queue);
      try {
        await sendInBatches(queue, burst.handoffs.flatMap((h) => h.messages));
      } catch (error) {
        for (const h of burst.handoffs) h.onFailure(error);
      }
    }),
  );
}
