// Webhook endpoints: one file per operation, registered here in the order the reference lists them.
// Delivery itself (outbox, signing, queue consumer, retry scheduler) lives in src/webhooks/.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { registerCreateWebhook } from "./create";
import { registerDeleteWebhook } from "./delete";
import { registerReadWebhooks } from "./read";
import { registerRecoverWebhook } from "./recover";
import { registerRotateWebhookSecret } from "./rotate";
import { registerTestWebhook } from "./send-test";
import { registerUpdateWebhook } from "./update";

export function registerWebhooks(app: OpenAPIHono<AppEnv>) {
  registerCreateWebhook(app);
  registerReadWebhooks(app);
  registerUpdateWebhook(app);
  registerDeleteWebhook(app);
  registerRotateWebhookSecret(app);
  registerTestWebhook(app);
  registerRecoverWebhook(app);
}
