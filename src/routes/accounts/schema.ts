import { z } from "@hono/zod-openapi";
import { AddressSchema, addressField } from "../parties";
import { bodyObject, emailField, nameField, textField, timestamp, wholeNumber } from "../shared";

export const SignupBody = bodyObject({ name: nameField, email: emailField }).openapi("SignupRequest");

/** What every answer about an account says of it (sign-up's adds its keys, once). */
const accountFields = {
  id: z.string().openapi({ example: "acct_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
  object: z.literal("account"),
  name: z.string(),
  email: z.string(),
  created_at: timestamp("When the account was created."),
};

export const AccountSchema = z
  .object({
    ...accountFields,
    api_key: z.string().openapi({ description: "A test-mode secret key, sk_test_…: it sees and touches test-mode objects only. Shown once: store it now.", example: "sk_test_…" }),
    live_api_key: z.string().openapi({
      description: "A live-mode secret key, sk_live_…: it sees and touches live-mode objects only, and alone creates live restricted keys. Shown once: store it now.",
      example: "sk_live_…",
    }),
  })
  .openapi("Account");

export const MoveBody = bodyObject({
  to_shard: wholeNumber("to_shard", 0, 61).openapi({ description: "The shard (DB_<n>) to move the account to. The shard it is on unpauses it (a move that stopped before its switch).", example: 1 }),
  drain_seconds: wholeNumber("drain_seconds", 0, 300)
    .optional()
    .openapi({
      description:
        "How long to wait after pausing the account's keys before copying: a courtesy to requests already under way (default 65). 0 is safe: the move then waits until no request of the account has a charge at Stripe however long that takes (a charge holds a money claim until its commit), and every other write checks its key, which the pause fails.",
      example: 65,
    }),
}).openapi("MoveAccountRequest");

const TableProofSchema = z
  .object({
    table: z.string(),
    rows: z.number().int().openapi({ description: "The account's rows in this table, on both shards." }),
    sha256: z.string().openapi({ description: "SHA-256 of those rows in primary-key order, equal on both shards." }),
  })
  .openapi("AccountMoveTableProof");

export const MoveResultSchema = z
  .object({
    account_id: z.string(),
    from_shard: z.number().int(),
    to_shard: z.number().int(),
    tables: z.array(TableProofSchema).openapi({ description: "The proof of the copy: every table's rows of the account, counted and hashed on both shards before the switch." }),
    rounds: z.number().int().openapi({ description: "Copies made: more than 1 when background work wrote on the source meanwhile." }),
    finished_only: z.boolean().optional().openapi({ description: "The account was already on the target: a move that had stopped after its switch was finished." }),
  })
  .openapi("AccountMove");

const retentionDescription =
  "Days an event, its deliveries and their attempts are kept (1 to 365, default 30). The cron deletes older ones, a page at a time, and their ids then answer 404; an event with a delivery still pending, the newest event of each mode and the newest event of each object are kept whatever their age.";

const businessNameDescription = "The seller's name on invoices (its PDF and hosted page), in place of the account's name: the registered business name. Up to 200 characters.";
const taxIdDescription = "The seller's tax id (a VAT, GST or EIN number), printed on invoices as account_tax_ids. Up to 50 characters: letters, digits, spaces, dots, hyphens and slashes.";
const footerDescription = "Text printed at the foot of every invoice (payment terms, a registration number, a thank-you). Up to 500 characters.";
const sellerNote = "An invoice copies the seller's details when it is finalized: a later change never alters an issued invoice.";

/** The caller's account (GET and PATCH /api/account): never its keys. */
export const AccountSettingsSchema = z
  .object({
    ...accountFields,
    event_retention_days: z.number().int().openapi({ description: retentionDescription, example: 30 }),
    business_name: z.string().nullable().openapi({ description: `${businessNameDescription} null: invoices name the account.`, example: "Northwind Traders Ltd" }),
    address: AddressSchema.nullable().openapi({ description: `The seller's postal address on invoices. ${sellerNote}` }),
    tax_id: z.string().nullable().openapi({ description: taxIdDescription, example: "GB123456789" }),
    invoice_footer: z.string().nullable().openapi({ description: footerDescription, example: "Payment within 30 days. Thank you for your business." }),
  })
  .openapi("AccountSettings");

const TAX_ID = "tax_id must be a tax id of 1 to 50 characters (letters, digits, spaces, dots, hyphens and slashes), such as GB123456789, or null.";

export const UpdateAccountBody = bodyObject({
  event_retention_days: wholeNumber("event_retention_days", 1, 365).optional().openapi({ description: retentionDescription, example: 30 }),
  business_name: textField("business_name", 200, { min: 1, trim: true }).nullable().optional().openapi({ description: `${businessNameDescription} null removes it. ${sellerNote}`, example: "Northwind Traders Ltd" }),
  address: addressField("address", "The seller's").nullable().optional(),
  tax_id: z
    .string({ error: TAX_ID })
    .trim()
    .regex(/^[A-Za-z0-9][A-Za-z0-9 .\-/]{0,49}$/, { error: TAX_ID })
    .nullable()
    .optional()
    .openapi({ description: `${taxIdDescription} null removes it.`, example: "GB123456789" }),
  invoice_footer: textField("invoice_footer", 500, { min: 1, trim: true }).nullable().optional().openapi({ description: `${footerDescription} null removes it.` }),
}).openapi("UpdateAccountRequest");
