// The job queue (tender-jobs): background work other than webhook delivery. Each kind of
// message has one handler; every handler is idempotent, because delivery is at-least-once.
import type { Bindings, RuntimeBindings } from "../env";
import { messageEnv } from "../db/shards";
import { type BillingJobMessage, billingJobHandlers } from "../billing/jobs";
import { type SettlePayoutJob, settlePayout } from "../payments/settle-payout";
import { type SettleRefundJob, settleRefund } from "../payments/settle-refund";
import { sendInBatches } from "../lib/queue";
import { type RecoveryJobMessage, runRecovery } from "../webhooks/operations/recovery";

export type JobMessage = { kind: "noop" } | SettlePayoutJob | SettleRefundJob | BillingJobMessage | RecoveryJobMessage;

type Handler<K extends JobMessage["kind"]> = (message: Extract<JobMessage, { kind: K }>, env: Bindings, ctx: ExecutionContext) => Promise<void>;

const handlers: { [K in JobMessage["kind"]]: Handler<K> } = {
  noop: async () => {},
  ...billingJobHandlers,
  settlePayout: async (message, env) => void (await settlePayout(message, env)),
  settleRefund: async (message, env) => void (await settleRefund(message, env)),
  "webhooks.recover": async (message, env) => runRecovery(env, message),
};

export async function handleJob(message: JobMessage, env: Bindings, ctx: ExecutionContext): Promise<void> {
  const handler = handlers[message.kind] as Handler<JobMessage["kind"]> | undefined;
  if (!handler) throw new Error(`Unknown job kind: ${String((message as { kind?: unknown }).kind)}`);
  await handler(message as never, env, ctx);
}

export async function handleJobBatch(batch: MessageBatch<JobMessage>, env: RuntimeBindings, ctx: ExecutionContext): Promise<void> {
  for (const message of batch.messages) {
    try {
      // A message names its shard (src/db/shards.ts); an unbound shard throws, and the queue retries.
      await handleJob(message.body, messageEnv(env, message.body), ctx);
      message.ack();
    } catch (error) {
      console.error(JSON.stringify({ message: "job failed; will retry", kind: message.body?.kind, attempts: message.attempts, error: String(error) }));
      message.retry({ delaySeconds: Math.min(60, 2 ** message.attempts) });
    }
  }
}

export async function enqueueJobs(queue: Queue, jobs: JobMessage[]): Promise<void> {
  await sendInBatches(queue, jobs.map((body) => ({ body })));
}
