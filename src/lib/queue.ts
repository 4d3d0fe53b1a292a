// Sending to Cloudflare Queues: in as few sendBatch calls as the per-call limit allows, and, for
// work a request hands off after its answer, together with what other requests of the same
// isolate hand off within a few milliseconds.

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

interface Handoff {
  messages: MessageSendRequest<unknown>[];
  /** Called should the send of these messages fail (each caller logs what its sweep will retry). */
  onFailure: (error: unknown) => void;
}

/** The handoffs waiting for each queue's next send. */
const waiting = new Map<Queue, Handoff[]>();

/**
 * Sends `messages` after the answer, with the messages other requests of this isolate hand to the
 * same queue within SEND_SOON_LINGER_MS: one sendBatch for a burst rather than one per request.
 * The first request of a burst sends it, kept alive by its `waitUntil`. For work whose loss a
 * sweep repairs (a payout's or a refund's settlement, a delivery): a failed send is reported to
 * each caller's `onFailure`, never thrown.
 */
export function sendSoon<Body>(
  queue: Queue,
  messages: MessageSendRequest<Body>[],
  waitUntil: (promise: Promise<unknown>) => void,
  onFailure: (error: unknown) => void,
): void {
  const handoff: Handoff = { messages, onFailure };
  const burst = waiting.get(queue);
  if (burst) {
    burst.push(handoff);
    return;
  }
  const handoffs = [handoff];
  waiting.set(queue, handoffs);
  waitUntil(
    new Promise((resolve) => setTimeout(resolve, SEND_SOON_LINGER_MS)).then(async () => {
      waiting.delete(queue);
      try {
        await sendInBatches(queue, handoffs.flatMap((h) => h.messages));
      } catch (error) {
        for (const h of handoffs) h.onFailure(error);
      }
    }),
  );
}
