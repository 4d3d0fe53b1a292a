import { z } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import { paymentMethods } from "../../db/schema";
import { livemodeJsonSql } from "../../db/scope";
import { CardSummarySchema, OptionalCardFields } from "../../payments/card-input";
import type { PaymentMethodRow } from "../../payments/methods";
import { bodyObject, livemodeField, timestamp } from "../shared";

const PROCESSOR_TOKEN =
  "processor_token must be a token for a card: in test mode one of Stripe's test PaymentMethods (pm_card_visa, …), in live mode the id of a PaymentMethod made by Stripe.js (pm_…).";

export const CreatePaymentMethodBody = bodyObject({
  processor_token: z
    .string({ error: PROCESSOR_TOKEN })
    .min(1, { error: PROCESSOR_TOKEN })
    .max(255, { error: PROCESSOR_TOKEN })
    .optional()
    .openapi({
      description:
        "The card as the processor tokenized it, so its number never reaches Tender. Live mode: the id of a PaymentMethod made by Stripe.js (or the Payment Element) with the connection's publishable key; it is attached to the user's Stripe Customer. Test mode: Stripe's test PaymentMethods, each behaving as its test card: pm_card_visa, pm_card_mastercard, pm_card_chargeDeclined, pm_card_chargeDeclinedInsufficientFunds, pm_card_authenticationRequired (3-D Secure on every charge), pm_card_threeDSecure2Required. Send it, or the card fields, not both.",
      example: "pm_card_visa",
    }),
  ...OptionalCardFields,
}).openapi("PaymentMethodRequest");

export const PaymentMethodSchema = z
  .object({
    id: z.string().openapi({ example: "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("payment_method"),
    livemode: livemodeField,
    user_id: z.string().openapi({ description: "The user whose card it is." }),
    type: z.literal("card"),
    card: CardSummarySchema,
    created_at: timestamp("When the card was saved."),
    detached_at: z
      .string()
      .nullable()
      .openapi({ description: "When it was detached (DELETE): it can be charged no more, and leaves the user's list. null while attached." }),
  })
  .openapi("PaymentMethod");
export type PaymentMethodJson = z.infer<typeof PaymentMethodSchema>;

export function serializePaymentMethod(row: PaymentMethodRow): PaymentMethodJson {
  return {
    id: row.id,
    object: "payment_method",
    livemode: row.livemode,
    user_id: row.userId,
    type: row.type,
    card: { brand: row.cardBrand, last4: row.cardLast4, exp_month: row.cardExpMonth, exp_year: row.cardExpYear },
    created_at: row.createdAt,
    detached_at: row.detachedAt ?? null,
  };
}

/** The same serialization inside SQL, for event data and stored answers built within a batch. */
export const paymentMethodJsonSql = (id: string) => sql`(SELECT json_object(
  'id', ${paymentMethods.id}, 'object', 'payment_method', 'livemode', ${livemodeJsonSql(paymentMethods.livemode)}, 'user_id', ${paymentMethods.userId},
  'type', ${paymentMethods.type}, 'card', json_object('brand', ${paymentMethods.cardBrand}, 'last4', ${paymentMethods.cardLast4},
  'exp_month', ${paymentMethods.cardExpMonth}, 'exp_year', ${paymentMethods.cardExpYear}),
  'created_at', ${paymentMethods.createdAt}, 'detached_at', ${paymentMethods.detachedAt}
) FROM ${paymentMethods} WHERE ${paymentMethods.id} = ${id})`;
