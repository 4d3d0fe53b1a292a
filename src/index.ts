// The Worker: the API (fetch), the queue consumers, and the cron (renewals and the sweeper).
import { newApp } from "./app";
import { runScheduled } from "./cron";
import type { Bindings, RuntimeBindings } from "./env";
import { handleJobBatch, type JobMessage } from "./jobs";
import { handleDeliveryBatch } from "./webhooks/consumer";
import type { DeliveryMessage } from "./webhooks/outbox";

const app = newApp();

export default {
  // The request works on its account's shard once its credential is known (src/middleware/auth.ts).
  fetch: (request, env, ctx) => app.fetch(request, env as Bindings, ctx),
  async queue(batch, env, ctx) {
    if (batch.queue.startsWith("tender-jobs")) return handleJobBatch(batch as MessageBatch<JobMessage>, env, ctx);
    if (batch.queue.startsWith("tender-webhook-deliveries")) return handleDeliveryBatch(batch as MessageBatch<DeliveryMessage>, env);
    throw new Error(`No consumer for queue ${batch.queue}`);
  },
  async scheduled(controller, env, ctx) {
    await runScheduled(env, controller.scheduledTime, ctx);
  },
} satisfies ExportedHandler<RuntimeBindings>;

export { WebhookRetryScheduler } from "./webhooks/scheduler";
