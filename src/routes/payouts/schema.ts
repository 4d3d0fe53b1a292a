import { z } from "@hono/zod-openapi";
import { CardFields, CardSummarySchema } from "../../payments/card-input";
import { AmountField, CurrencyField } from "../../payments/money-input";
import { listQuery } from "../pagination";
import { bodyObject, closedSetFilter, idField, livemodeField, textField, timestamp } from "../shared";

export const PAYOUT_STATUSES = ["pending", "paid", "failed", "canceled"] as const;

export const CreatePayoutBody = bodyObject({
  recipient_id: idField("recipient_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w")
    .optional()
    .openapi({
      description:
        "The user (recipient or vendor) being paid; must be a user of this account. Required since Tender-Version 2026-11-27 (400 parameter_missing without it); under earlier versions only in live mode.",
    }),
  amount: AmountField,
  currency: CurrencyField,
  description: textField("description", 1000).optional().openapi({ description: "The reason for the payout.", example: "Vendor invoice 1042" }),
  ...CardFields,
}).openapi("CreatePayoutRequest");

export const PayoutSchema = z
  .object({
    id: z.string().openapi({ example: "po_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("payout"),
    livemode: livemodeField,
    recipient_id: z.string().nullable(),
    amount: z.number().int().openapi({ description: "In the currency's smallest unit.", example: 1000 }),
    currency: z.string().openapi({ example: "usd" }),
    description: z.string().nullable(),
    status: z.enum(PAYOUT_STATUSES).openapi({
      description: "pending until the processor settles it (paid or failed); a pending payout can be canceled.",
    }),
    date: z.string().openapi({ description: "The payout's date, YYYY-MM-DD (UTC).", example: "2026-11-21" }),
    card: CardSummarySchema,
    failure_code: z.string().nullable().openapi({ description: "Why the payout failed, e.g. card_declined." }),
    failure_message: z.string().nullable(),
    created_at: timestamp("When the payout was created."),
    updated_at: timestamp("When the payout last changed status."),
  })
  .openapi("Payout");

export const PayoutListQuery = listQuery.extend({
  recipient_id: idField("recipient_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only payouts to this recipient." }),
  status: closedSetFilter("status", PAYOUT_STATUSES, "Only payouts in this status."),
});
