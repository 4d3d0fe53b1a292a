// The Worker: the API (fetch), the queue consumers, and the cron (renewals and the sweeper).
import { newApp } from "./app";
import type { Bindings } from "./env";

const app = newApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Bindings>;

export { WebhookRetryScheduler } from "./webhooks/scheduler";
