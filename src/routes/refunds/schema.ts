import { z } from "@hono/zod-openapi";
import { listQuery } from "../pagination";
import { AmountField } from "../../payments/money-input";
import { bodyObject, closedSet, idField, livemodeField, timestamp } from "../shared";

export const REFUND_REASONS = ["duplicate", "fraudulent", "requested_by_customer"] as const;

export const CreateRefundBody = bodyObject({
  payment_id: idField("payment_id", "a payment", "pay_01jd2x4k5m6n7p8q9r0s1t2v3w").openapi({ description: "The payment to refund." }),
  amount: AmountField.optional().openapi({
    description: "How much to refund, in the payment currency's smallest unit. Defaults to everything not yet refunded.",
    example: 500,
  }),
  reason: closedSet("reason", REFUND_REASONS).optional(),
}).openapi("CreateRefundRequest");

export const RefundSchema = z
  .object({
    id: z.string().openapi({ example: "re_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("refund"),
    livemode: livemodeField,
    payment_id: z.string(),
    amount: z.number().int().openapi({ description: "In the currency's smallest unit.", example: 500 }),
    currency: z.string().openapi({ example: "usd" }),
    reason: z.string().nullable().openapi({ description: "duplicate, fraudulent or requested_by_customer, when given." }),
    status: z.enum(["pending", "succeeded", "failed"]).openapi({ description: "pending until the processor settles it." }),
    created_at: timestamp("When the refund was initiated."),
    completed_at: z.string().nullable().openapi({ description: "When the processor completed the refund. ISO 8601 UTC with milliseconds." }),
  })
  .openapi("Refund");

export const RefundListQuery = listQuery.extend({
  payment_id: idField("payment_id", "a payment", "pay_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only refunds of this payment." }),
});
