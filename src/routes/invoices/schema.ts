import { z } from "@hono/zod-openapi";
import { INVOICE_STATUSES } from "../../billing/invoices";
import { listQuery } from "../pagination";
import { AddressSchema, TaxIdSchema } from "../parties";
import { closedSetFilter, idField, livemodeField, timestamp } from "../shared";

const FROZEN = "Copied when the invoice was finalized and never changed after (a draft shows the current value).";

const amount = (description: string, example: number) => z.number().int().openapi({ description: `${description} In the currency's smallest unit.`, example });

export const TaxAmountSchema = z
  .object({
    tax_rate: z.string().openapi({ description: "The tax rate (GET /tax-rates/{id}).", example: "txr_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    amount: amount("This rate's tax, rounded once per line (half away from zero) after the line's discount; negative on a credit.", 200),
    inclusive: z.boolean().openapi({ description: "true: part of the line's amount; false: added to the total." }),
  })
  .openapi("TaxAmount");

export const InvoiceLineSchema = z
  .object({
    id: z.string().openapi({ example: "il_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    type: z
      .enum(["subscription", "proration", "usage", "credit"])
      .openapi({ description: "subscription: a period of the plan; proration: a credit or charge for a change within a period; usage: a metered period; credit: a credit carried from an earlier invoice (negative), or the credit beyond this invoice (positive, bringing a total that credits would take below zero to zero): a credit note of it credits the user's balance (or, when the balance holds another currency, it is carried on to the next invoice)." }),
    description: z.string().openapi({ example: "1 × Pro" }),
    quantity: z.number().int(),
    unit_amount_decimal: z
      .string()
      .nullable()
      .openapi({ description: "The unit price in the currency's smallest unit, exact (up to 12 decimals), when the line has one; null for a tiered price.", example: "1999" }),
    amount: amount("The line's amount, rounded once; negative for a credit.", 1999),
    proration: z.boolean(),
    tax_amounts: z.array(TaxAmountSchema).openapi({ description: "The line's tax, one amount per rate, computed when the invoice was made and never again." }),
    period_start: timestamp("Start of the time this line bills."),
    period_end: timestamp("End of the time this line bills."),
  })
  .openapi("InvoiceLine");

export const InvoiceStatus = z.enum(INVOICE_STATUSES).openapi({
  description: "draft (not yet numbered), open (finalized, awaiting payment), paid, uncollectible (its retries were used up, or its subscription was canceled) or void (it will never be charged).",
});

export const InvoiceSchema = z
  .object({
    id: z.string().openapi({ example: "in_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("invoice"),
    livemode: livemodeField,
    number: z
      .string()
      .nullable()
      .openapi({ description: "Gap-free per account and mode, given when the invoice is finalized: the account's prefix and a sequence. Null for a draft.", example: "9V3K1QZD-0001" }),
    status: InvoiceStatus,
    subscription_id: z.string().nullable().openapi({ description: "The subscription it bills; null for a declined first charge (no subscription was created)." }),
    user_id: z.string().nullable().openapi({ description: "The customer." }),
    customer_name: z
      .string()
      .nullable()
      .openapi({ description: `The customer's name as the invoice shows it. ${FROZEN}`, example: "Ada Lovelace" }),
    customer_email: z.string().nullable().openapi({ description: `The customer's email. ${FROZEN}`, example: "ada@example.com" }),
    customer_address: AddressSchema.nullable().openapi({ description: `The customer's postal address (the user's address). ${FROZEN}` }),
    customer_tax_ids: z.array(TaxIdSchema).openapi({ description: `The customer's tax ids (the user's tax_ids). ${FROZEN}` }),
    account_name: z.string().nullable().openapi({ description: `The seller's name: the account's business_name, else its name. ${FROZEN}`, example: "Northwind Traders" }),
    account_email: z.string().nullable().openapi({ description: `The seller's email (the account's). ${FROZEN}`, example: "billing@northwind.example" }),
    account_address: AddressSchema.nullable().openapi({ description: `The seller's postal address (the account's address). ${FROZEN}` }),
    account_tax_ids: z.array(z.string()).openapi({ description: `The seller's tax ids (the account's tax_id), as printed. ${FROZEN}`, example: ["GB123456789"] }),
    footer: z.string().nullable().openapi({ description: `The text printed at the invoice's foot (the account's invoice_footer). ${FROZEN}` }),
    currency: z.string().openapi({ example: "usd" }),
    period_start: timestamp("Start of the period billed."),
    period_end: timestamp("End of the period billed."),
    lines: z.array(InvoiceLineSchema),
    subtotal: amount("The sum of the lines.", 1999),
    discount: amount("Taken off the subtotal, never below zero.", 0),
    coupon: z
      .object({ id: z.string().openapi({ example: "SUMMER20" }), name: z.string().nullable().openapi({ example: "Summer 20% off" }) })
      .nullable()
      .openapi({ description: "The coupon the discount comes from, named as it was when the invoice was made; null without a discount." }),
    tax: amount("All the tax on it, inclusive and exclusive: the sum of total_tax_amounts.", 0),
    total_tax_amounts: z
      .array(
        TaxAmountSchema.extend({
          display_name: z.string().nullable().openapi({ description: "The rate's display_name when the invoice was made.", example: "VAT" }),
          percentage: z.string().openapi({ description: "The rate's percentage.", example: "20" }),
        }).openapi("InvoiceTaxAmount"),
      )
      .openapi({ description: "Each rate's tax over the lines, with the rate's name and percentage as the invoice was made (what the PDF and the hosted page show)." }),
    total: amount("subtotal - discount + the exclusive tax (inclusive tax is already part of the lines).", 1999),
    amount_paid: amount("What has been paid.", 1999),
    amount_due: amount("What is charged for it: total less what it took from the user's balance.", 1999),
    starting_balance: amount("The user's balance (negative is a credit, as Stripe's) when the invoice was made: a renewal's invoice takes from a credit first.", -500),
    ending_balance: amount("The user's balance after this invoice took from it: amount_due = total − (ending_balance − starting_balance).", 0),
    payment_id: z.string().nullable().openapi({ description: "The last payment attempted for it (the one that paid it, once paid)." }),
    hosted_invoice_url: z
      .string()
      .nullable()
      .openapi({
        description:
          "The payer's page of the invoice, while it is open or paid: no API key, an unguessable secret in the URL. The payer sees the invoice as issued and downloads its PDF; an open invoice of a past-due subscription is paid there (3-D Secure included), and an incomplete subscription's first invoice continues its first payment's 3-D Secure challenge. Null for a draft, a void or uncollectible invoice, and when the deployment sets no PUBLIC_URL.",
        example: "https://pay.example.com/pay/invoices/in_01jd2x4k5m6n7p8q9r0s1t2v3w/3kF9xQ2mZ7pL0aB4cD8eG1hJ5nR6sT9uV2wY3z0A",
      }),
    test_clock: z.string().nullable().openapi({ description: "The test clock whose time dates the invoice (its user's when it was made); null when none." }),
    created_at: timestamp("When the invoice was created: on a test clock, the clock's time."),
    finalized_at: z.string().nullable().openapi({ description: "When it was finalized (numbered); on a test clock, the clock's time. ISO 8601 UTC with milliseconds." }),
    paid_at: z.string().nullable().openapi({ description: "When it was paid; on a test clock, the clock's time. ISO 8601 UTC with milliseconds." }),
  })
  .openapi("Invoice");

export const InvoiceListQuery = listQuery.extend({
  subscription_id: idField("subscription_id", "a subscription", "sub_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only invoices of this subscription." }),
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only this user's invoices." }),
  status: closedSetFilter("status", INVOICE_STATUSES, "Only invoices in this status."),
});
