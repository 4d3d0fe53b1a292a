import { z } from "@hono/zod-openapi";
import { CREDIT_NOTE_REASONS } from "../../billing/credit-notes";
import { AmountField } from "../../payments/money-input";
import { TaxAmountSchema } from "../invoices/schema";
import { listQuery } from "../pagination";
import { bodyObject, booleanField, closedSet, idField, livemodeField, textField, timestamp } from "../shared";

const amount = (description: string, example: number) => z.number().int().openapi({ description: `${description} In the currency's smallest unit.`, example });

const LINES = "lines must be a list of 1 to 50 invoice lines to credit, each { invoice_line_id, amount }.";

export const CreateCreditNoteBody = bodyObject({
  invoice_id: idField("invoice_id", "an invoice", "in_01jd2x4k5m6n7p8q9r0s1t2v3w").openapi({ description: "The finalized invoice to credit (open, paid or uncollectible; not a draft, not void)." }),
  amount: AmountField.optional().openapi({
    description:
      "What to credit in all, tax included, spread over the invoice's lines in proportion to what is left of each. Give amount or lines, not both.",
    example: 6000,
  }),
  lines: z
    .array(
      bodyObject(
        {
          invoice_line_id: idField("invoice_line_id", "a line of the invoice", "il_01jd2x4k5m6n7p8q9r0s1t2v3w").openapi({ description: "A line of the invoice (its lines[].id)." }),
          amount: AmountField.openapi({ description: "What to credit this line, tax included: at most what is left of what it cost.", example: 6000 }),
        },
        "Each entry of lines must be an object { invoice_line_id, amount }.",
      ),
      { error: LINES },
    )
    .min(1, { error: LINES })
    .max(50, { error: LINES })
    .optional()
    .openapi({ description: "What to credit each line, tax included. Give amount or lines, not both." }),
  reason: closedSet("reason", CREDIT_NOTE_REASONS).optional().openapi({ description: "Why (Stripe's reasons): duplicate, fraudulent, order_change or product_unsatisfactory." }),
  refund: booleanField("refund").openapi({
    description:
      "true: refund the invoice's card payment for the note's amount (one refund, refund_id; refund.initiated, then refund.completed). false: credit the user's balance, which later invoices consume.",
  }),
  memo: textField("memo", 500).optional().openapi({ description: "A note shown on the credit note and its PDF.", example: "Two seats were removed on 3 March." }),
}).openapi("CreateCreditNoteRequest");

export const CreditNoteLineSchema = z
  .object({
    id: z.string().openapi({ example: "cnli_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    invoice_line_id: z.string().openapi({ example: "il_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    description: z.string().openapi({ description: "The invoice line's description.", example: "1 × Pro" }),
    amount: amount("What this line is credited, tax included.", 6000),
    tax_amounts: z.array(TaxAmountSchema).openapi({ description: "The tax in it per rate: the line's tax pro rata, rounded once per line." }),
  })
  .openapi("CreditNoteLine");

export const CreditNoteSchema = z
  .object({
    id: z.string().openapi({ example: "cn_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("credit_note"),
    livemode: livemodeField,
    number: z.string().openapi({ description: "Gap-free per account and mode, in its own sequence: the account's prefix, CN and a sequence.", example: "9V3K1QZD-CN-0001" }),
    invoice_id: z.string(),
    user_id: z.string().nullable().openapi({ description: "The invoice's customer." }),
    currency: z.string().openapi({ example: "usd" }),
    amount: amount("What it credits in all, tax included.", 6000),
    subtotal: amount("amount less its exclusive tax.", 5000),
    tax: amount("The tax in it, inclusive and exclusive.", 1000),
    tax_amounts: z.array(TaxAmountSchema).openapi({ description: "The tax in it per rate." }),
    lines: z.array(CreditNoteLineSchema),
    reason: z.enum(CREDIT_NOTE_REASONS).nullable(),
    memo: z.string().nullable(),
    refund_id: z.string().nullable().openapi({ description: "The refund of the invoice's payment it made (refund: true); null when it credited the balance." }),
    customer_balance_transaction: z.string().nullable().openapi({ description: "The balance transaction that credited the user's balance (refund: false); null for a refund." }),
    status: z.enum(["issued", "void"]).openapi({ description: "issued, or void (a balance credit taken back: it no longer counts against the invoice)." }),
    created_at: timestamp("When it was issued."),
    voided_at: z.string().nullable().openapi({ description: "When it was voided. ISO 8601 UTC with milliseconds." }),
  })
  .openapi("CreditNote");

export const CreditNoteListQuery = listQuery.extend({
  invoice_id: idField("invoice_id", "an invoice", "in_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only the credit notes of this invoice." }),
});
