import { z } from "@hono/zod-openapi";
import { listQuery } from "../pagination";
import { CardSummarySchema } from "../../payments/card-input";
import { idField, livemodeField, timestamp } from "../shared";

export const PaymentSchema = z
  .object({
    id: z.string().openapi({ example: "pay_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("payment"),
    livemode: livemodeField,
    subscription_id: z.string().nullable().openapi({ description: "The subscription this payment was charged for." }),
    invoice_id: z.string().nullable().openapi({ description: "The invoice this charge was an attempt to pay: every attempt at one billing period (its dunning retries included) names the same invoice.", example: "in_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    user_id: z.string().nullable(),
    amount: z.number().int().openapi({ description: "In the currency's smallest unit.", example: 1999 }),
    currency: z.string().openapi({ example: "usd" }),
    status: z.enum(["completed", "failed", "refunded", "partially_refunded"]),
    amount_refunded: z.number().int().openapi({ description: "How much has been refunded so far, in the smallest unit.", example: 0 }),
    failure_code: z.string().nullable().openapi({ description: "Why the charge failed, e.g. card_declined or insufficient_funds." }),
    failure_message: z.string().nullable(),
    card: CardSummarySchema,
    created_at: timestamp("When the payment was made."),
  })
  .openapi("Payment");

export const PaymentListQuery = listQuery.extend({
  subscription_id: idField("subscription_id", "a subscription", "sub_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only payments for this subscription." }),
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only payments by this user." }),
});
