import { type OpenAPIHono, createRoute, z } from "@hono/zod-openapi";
import type { AppEnv } from "../context";
import { registerCreateAccount } from "./accounts/post";
import { registerMoveAccount } from "./accounts/move";
import { registerAccount } from "./accounts/account";
import { registerKeys } from "./keys";
import { registerOauth } from "./oauth/token";
import { registerRequestIds } from "./request-ids";
import { registerUsers } from "./users";
import { registerBalanceTransactions } from "./users/balance-transactions";
import { registerPaymentMethods } from "./payment-methods";
import { registerPayouts } from "./payouts";
import { registerPayments } from "./payments";
import { registerCheckoutSessions } from "./checkout-sessions";
import { registerPortalSessions } from "./portal-sessions";
import { registerRefunds } from "./refunds";
import { registerWebhooks } from "./webhooks";
import { registerEvents } from "./events";
import { registerPlans } from "./plans";
import { registerSubscriptions } from "./subscriptions";
import { registerUsageEvents } from "./usage-events";
import { registerInvoices } from "./invoices";
import { registerCoupons } from "./coupons";
import { registerTaxRates } from "./tax-rates";
import { registerCreditNotes } from "./credit-notes";
import { registerTestClocks } from "./test-clocks";
import { registerProcessor } from "./processor";
import { registerStripeWebhooks } from "./processor-webhooks/stripe";

const health = createRoute({
  method: "get",
  path: "/health",
  tags: ["Health"],
  operationId: "health",
  summary: "Liveness check",
  description: "Answers without a credential and without touching the database.",
  security: [],
  responses: { 200: { description: "The service is up.", content: { "application/json": { schema: z.object({ status: z.literal("ok") }) } } } },
});

export function registerRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(health, (c) => c.json({ status: "ok" as const }, 200));
  registerCreateAccount(app);
  registerMoveAccount(app);
  registerAccount(app);
  registerOauth(app);
  registerKeys(app);
  registerRequestIds(app);
  registerUsers(app);
  registerBalanceTransactions(app);
  registerPaymentMethods(app);
  registerPayouts(app);
  registerPayments(app);
  registerCheckoutSessions(app);
  registerPortalSessions(app);
  registerRefunds(app);
  registerWebhooks(app);
  registerEvents(app);
  registerPlans(app);
  registerSubscriptions(app);
  registerUsageEvents(app);
  registerInvoices(app);
  registerCoupons(app);
  registerTaxRates(app);
  registerCreditNotes(app);
  registerTestClocks(app);
  registerProcessor(app);
  registerStripeWebhooks(app);
}
