import { z } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import { users } from "../../db/schema";
import { livemodeJsonSql } from "../../db/scope";
import { AddressSchema, TAX_IDS_DESCRIPTION, TaxIdSchema, addressField, taxIdsField } from "../parties";
import { bodyObject, emailField, idField, livemodeField, nameField, timestamp } from "../shared";

const STRIPE_ACCOUNT = "stripe_account must be a Stripe connected account id, such as acct_1Nv0FGQ9RKHgCVdK, or null.";

/** Live mode only: the Stripe connected account a user is paid out to (null unlinks it). */
export const stripeAccountField = z
  .string({ error: STRIPE_ACCOUNT })
  .regex(/^acct_[0-9A-Za-z]{1,64}$/, { error: STRIPE_ACCOUNT })
  .nullable()
  .optional()
  .openapi({
    description:
      "Live mode only (a test-mode key gets 400 livemode_required): the Stripe connected account (acct_…) of your Stripe platform that payouts to this user are sent to. Onboard the user with Stripe Connect (Express or Custom) first. null unlinks it; omitted on an update, it is kept.",
    example: "acct_1Nv0FGQ9RKHgCVdK",
  });

const BUYER_NOTE = "An invoice copies them when it is finalized: a later change never alters an issued invoice.";
/** The buyer's address and tax ids: omitted on an update, kept; null removes them. */
const buyerFields = {
  address: addressField("address", "The user's").nullable().optional(),
  tax_ids: taxIdsField.nullable().optional().openapi({ description: `${TAX_IDS_DESCRIPTION} null or [] removes them; omitted on an update, they are kept. ${BUYER_NOTE}` }),
};

export const UserBody = bodyObject({ name: nameField, email: emailField, stripe_account: stripeAccountField, ...buyerFields }).openapi("UserRequest");

// Not UserBody.extend(): the document would say allOf [UserRequest, {test_clock}], and with
// additionalProperties: false on both, no body could match.
export const CreateUserBody = bodyObject({
  name: nameField,
  email: emailField,
  test_clock: idField("test_clock", "a test clock", "clock_01jd2x4k5m6n7p8q9r0s1t2v3w")
    .optional()
    .openapi({ description: "Test mode only: a test clock of this account; the user's subscriptions then bill by the clock's time." }),
  stripe_account: stripeAccountField,
  ...buyerFields,
}).openapi("CreateUserRequest");

export const UserSchema = z
  .object({
    id: z.string().openapi({ example: "usr_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("user"),
    livemode: livemodeField,
    name: z.string(),
    email: z.string(),
    test_clock: z.string().nullable().openapi({ description: "The test clock whose time this user's subscriptions follow, if any." }),
    stripe_account: z
      .string()
      .nullable()
      .openapi({ description: "Live mode: the Stripe connected account (acct_…) payouts to this user are sent to; null when none (always in test mode)." }),
    address: AddressSchema.nullable().openapi({ description: `The user's postal address, printed on their invoices; null when none. ${BUYER_NOTE}` }),
    tax_ids: z.array(TaxIdSchema).openapi({ description: `The user's tax ids, printed on their invoices. ${BUYER_NOTE}` }),
    default_payment_method: z
      .string()
      .nullable()
      .openapi({ description: "The saved card (pmt_…) the user chose as their default (POST /api/users/{id}/payment-methods/{pm_id}/default), as Stripe's invoice_settings.default_payment_method; null when none, and again once that card is detached." }),
    balance: z
      .number()
      .int()
      .openapi({
        description:
          "The customer balance, as Stripe's, in the smallest unit of `currency`: negative is a credit the user holds (a credit note with refund: false), which later invoices consume; 0 when none.",
        example: -6000,
      }),
    currency: z.string().nullable().openapi({ description: "The balance's currency, set by the first credit to it; null until then.", example: "usd" }),
    created_at: timestamp("When the user was created."),
    updated_at: timestamp("When the user was last changed."),
  })
  .openapi("User");
export type UserJson = z.infer<typeof UserSchema>;

export function serializeUser(row: typeof users.$inferSelect): UserJson {
  return {
    id: row.id,
    object: "user",
    livemode: row.livemode,
    name: row.name,
    email: row.email,
    test_clock: row.testClockId ?? null,
    stripe_account: row.stripeAccount ?? null,
    address: row.address ?? null,
    tax_ids: row.taxIds ?? [],
    default_payment_method: row.defaultPaymentMethodId ?? null,
    balance: row.balance,
    currency: row.currency ?? null,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** The same serialization inside SQL, for event data and stored answers built within a batch. */
export const userJsonSql = (id: string) => sql`(SELECT json_object(
  'id', ${users.id}, 'object', 'user', 'livemode', ${livemodeJsonSql(users.livemode)}, 'name', ${users.name}, 'email', ${users.email},
  'test_clock', ${users.testClockId}, 'stripe_account', ${users.stripeAccount}, 'default_payment_method', ${users.defaultPaymentMethodId}, 'balance', ${users.balance}, 'currency', ${users.currency}, 'address', json(${users.address}), 'tax_ids', json(${users.taxIds}), 'created_at', ${users.createdAt}, 'updated_at', ${users.updatedAt}
) FROM ${users} WHERE ${users.id} = ${id})`;
