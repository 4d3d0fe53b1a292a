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
/**
 * A burst not sent this long after it began (by the wall clock) belongs to a request whose work
 * was cut short before its timer ran: the next handoff to the queue declares its messages lost
 * (each caller's `onFailure` logs what its sweep will repair) and starts a new burst.
 */
export const SEND_SOON_ABANDONED_MS = 5_000;

interface Handoff {
  messages: MessageSendRequest<unknown>[];
  /** Called should these messages not be sent (each caller logs what its sweep will retry). */
  onFailure: (error: unknown) => void;
}

interface Burst {
  startedAt: number;
  handoffs: Handoff[];
  /** Declared lost by a later handoff: its timer, should it still run, sends nothing. */
  abandoned: boolean;
}

/** The burst waiting for each queue's next send (a queue view no longer used is forgotten with it). */
const waiting = new WeakMap<Queue, Burst>();

const report = (handoffs: Handoff[], error: unknown) => {
  for (const h of handoffs) {
    try {
      h.onFailure(error);
    } catch (thrown) {
      console.error(JSON.stringify({ message: "a queue send's failure handler threw", error: String(thrown) }));
    }
  }
};

/** Sends a burst's handoffs in sendBatch calls of at most MAX_SEND_BATCH messages; a failed call reports only its own handoffs. */
async function sendBurst(queue: Queue, handoffs: Handoff[]): Promise<void> {
  const calls: Handoff[][] = [];
  let size = 0;
  for (const h of handoffs) {
    if (calls.length === 0 || size + h.messages.length > MAX_SEND_BATCH) {
      calls.push([]);
      size = 0;
    }
    calls[calls.length - 1].push(h);
    size += h.messages.length;
  }
  for (const call of calls) {
    try {
      await sendInBatches(queue, call.flatMap((h) => h.messages));
    } catch (error) {
      report(call, error);
    }
  }
}

/**
 * Sends `messages` after the answer, with the messages other requests of this isolate hand to the
 * same queue (the same shard's) within SEND_SOON_LINGER_MS of the first: one sendBatch for a burst
 * rather than one per request. The first request of a burst sends it, kept alive by its
 * `waitUntil`. For work whose loss a sweep repairs (a payout's or a refund's settlement): messages
 * not sent are reported to their caller's `onFailure`, never thrown.
 */
export function sendSoon<Body>(
  queue: Queue,
  messages: MessageSendRequest<Body>[],
  waitUntil: (promise: Promise<unknown>) => void,
  onFailure: (error: unknown) => void,
  now: number = Date.now(),
): void {
  const handoff: Handoff = { messages, onFailure };
  const open = waiting.get(queue);
  if (open && now - open.startedAt < SEND_SOON_ABANDONED_MS) {
    open.handoffs.push(handoff);
    return;
  }
  if (open) {
    open.abandoned = true;
    report(open.handoffs, new Error(`not sent: the request that held the burst stopped before sending it, ${now - open.startedAt} ms ago`));
  }
  const burst: Burst = { startedAt: now, handoffs: [handoff], abandoned: false };
  waiting.set(queue, burst);
  waitUntil(
    new Promise((resolve) => setTimeout(resolve, SEND_SOON_LINGER_MS)).then(async () => {
      if (burst.abandoned) return;
      waiting.delete(queue);
      await sendBurst(queue, burst.handoffs);
    }),
  );
}
