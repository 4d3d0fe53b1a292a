// Subscriptions: one file per operation (create, read, update, cancel), registered here. Plan and
// quantity changes take effect from the next period, without proration: the open period keeps the
// amount fixed when it was first billed. Charging a period lives in src/billing/periods.ts.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { registerCancelSubscription } from "./cancel";
import { registerCreateSubscription } from "./create";
import { registerReadSubscriptions } from "./read";
import { registerUpdateSubscription } from "./update";
import { registerUsage } from "./usage";

export function registerSubscriptions(app: OpenAPIHono<AppEnv>) {
  registerCreateSubscription(app);
  registerReadSubscriptions(app);
  registerUpdateSubscription(app);
  registerCancelSubscription(app);
  registerUsage(app);
}
