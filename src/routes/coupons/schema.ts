import { z } from "@hono/zod-openapi";
import { MAX_DURATION_IN_MONTHS } from "../../domain/discounts";
import { MAX_AMOUNT } from "../../domain/money";
import { CurrencyField } from "../../payments/money-input";
import { bodyObject, closedSet, livemodeField, textField, timestamp, wholeNumber } from "../shared";

export const COUPON_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export const CreateCouponBody = bodyObject({
  id: z
    .string({ error: "id must be 1 to 64 letters, digits, - or _, such as SUMMER20." })
    .regex(COUPON_ID_PATTERN, { error: "id must be 1 to 64 letters, digits, - or _, such as SUMMER20." })
    .optional()
    .openapi({ description: "The code customers redeem, unique in the account and mode. Generated (co_…) when absent.", example: "SUMMER20" }),
  name: textField("name", 200, { min: 1, trim: true }).openapi({ description: "What invoices and the dashboard call the discount.", example: "Summer sale" }),
  percent_off: z
    .union([z.number(), z.string()], { error: "percent_off must be a number greater than 0 and at most 100, such as 12.5." })
    .optional()
    .openapi({ type: "number", description: "A percentage greater than 0 and at most 100, with at most 2 decimals. Give it or amount_off.", example: 20 }),
  amount_off: z
    .number({ error: `amount_off must be a whole number of minor units from 1 to ${MAX_AMOUNT}.` })
    .optional()
    .openapi({ description: "An amount off each discounted invoice, in minor units of currency (1000 is 10.00 USD). Give it or percent_off.", example: 1000 }),
  currency: CurrencyField.optional().openapi({ description: "The currency of amount_off (required with it, and only with it)." }),
  duration: closedSet("duration", ["once", "repeating", "forever"]).openapi({
    description: "once: the first invoice after redemption. repeating: every invoice dated within duration_in_months of the redemption. forever: every invoice.",
  }),
  duration_in_months: wholeNumber("duration_in_months", 1, MAX_DURATION_IN_MONTHS).optional().openapi({ description: "For duration repeating only.", example: 2 }),
  max_redemptions: wholeNumber("max_redemptions", 1, 1_000_000_000).optional().openapi({ description: "How many subscriptions may ever redeem it.", example: 100 }),
  redeem_by: z
    .string({ error: "redeem_by must be a future date and time in ISO 8601, such as 2027-01-31T23:59:59Z." })
    .max(40)
    .optional()
    .openapi({ description: "The last moment it can be redeemed (ISO 8601). Subscriptions that redeemed it keep their discount after.", example: "2027-01-31T23:59:59Z" }),
}).openapi("CouponRequest");

export const CouponSchema = z
  .object({
    id: z.string().openapi({ example: "SUMMER20" }),
    object: z.literal("coupon"),
    livemode: livemodeField,
    name: z.string(),
    percent_off: z.number().nullable().openapi({ description: "The percentage off, or null for an amount_off coupon.", example: 20 }),
    amount_off: z.number().int().nullable().openapi({ description: "Minor units off, or null for a percent_off coupon." }),
    currency: z.string().nullable().openapi({ description: "amount_off's currency." }),
    duration: z.enum(["once", "repeating", "forever"]),
    duration_in_months: z.number().int().nullable(),
    max_redemptions: z.number().int().nullable(),
    redeem_by: z.string().nullable(),
    times_redeemed: z.number().int().openapi({ description: "How many subscriptions have redeemed it." }),
    valid: z.boolean().openapi({ description: "Whether it can be redeemed now: not deleted, not past redeem_by, not used up." }),
    created_at: timestamp("When the coupon was created."),
    deleted_at: z.string().nullable().openapi({ description: "When DELETE stopped its new redemptions." }),
  })
  .openapi("Coupon");
