/** The most messages one Queue.sendBatch call takes. */
export const MAX_SEND_BATCH = 100;

/** Sends messages in as few sendBatch calls as the queue's per-call limit allows. */
export async function sendInBatches<Body>(queue: Queue, messages: MessageSendRequest<Body>[]): Promise<void> {
  for (let i = 0; i < messages.length; i += MAX_SEND_BATCH) {
    await queue.sendBatch(messages.slice(i, i + MAX_SEND_BATCH));
  }
}
