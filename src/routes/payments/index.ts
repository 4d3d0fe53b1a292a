// Payments: the charges made for subscriptions (by src/payments/charge.ts) and one-off payments
// (create.ts, capture.ts: src/payments/intents.ts); list and read.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { payments } from "../../db/schema";
import { hasPrefix } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { serializePayment } from "../../payments/serialize";
import { apiRoute, idParam, json } from "../openapi";
import { PaymentListQuery, PaymentSchema } from "./schema";
import { registerCreatePayment } from "./create";
import { registerPaymentSteps } from "./capture";

const tags = ["Payments"];

const list = apiRoute({
  method: "get",
  path: "/payments",
  tags,
  operationId: "listPayments",
  summary: "List payments",
  description: "Subscription charges and one-off payments, newest first, optionally for one subscription or one user.",
  scope: "payments:read",
  request: { query: PaymentListQuery },
  responses: { 200: json(listSchema(PaymentSchema, "PaymentList"), "A page of payments, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/payments/{id}",
  tags,
  operationId: "getPayment",
  summary: "Read a payment",
  scope: "payments:read",
  request: { params: idParam("payment", "pay_01jd2x4k5m6n7p8q9r0s1t2v3w") },
  responses: { 200: json(PaymentSchema, "The payment.") },
});

export function registerPayments(app: OpenAPIHono<AppEnv>) {
  registerCreatePayment(app);
  registerPaymentSteps(app);
  app.openapi(list, async function listPayments(c) {
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: payments,
      query,
      filters: [
        [payments.subscriptionId, query.subscription_id],
        [payments.userId, query.user_id],
      ],
      validCursor: (id) => hasPrefix(id, "payment"),
      serialize: serializePayment,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getPayment(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, payments, id, "payment");
    return c.json(serializePayment(row), 200);
  });
}
