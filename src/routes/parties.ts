// The fields that describe an invoice's parties (src/domain/parties.ts): a postal address (the
// account's and a user's) and a user's tax ids, as request fields and as answers.
import { z } from "@hono/zod-openapi";
import { MAX_TAX_IDS, TAX_ID_TYPE_NAMES, TAX_ID_TYPES, type TaxIdType, isCountry, taxIdFormOk } from "../domain/parties";
import { bodyObject, closedSet, listOf, quoted, textField } from "./shared";

const part = (field: string, max: number) =>
  textField(field, max, { min: 1, trim: true }).nullable().optional();

/** `address { line1, line2, city, postal_code, state, country }` of a request; `field` names it in messages. */
export const addressField = (field: string, whose: string) => {
  const country = `${field}.country must be a two-letter ISO 3166-1 country code, such as GB or DE.`;
  return bodyObject(
    {
      line1: part(`${field}.line1`, 200).openapi({ example: "1 Main Street" }),
      line2: part(`${field}.line2`, 200).openapi({ example: "Suite 4" }),
      city: part(`${field}.city`, 100).openapi({ example: "London" }),
      postal_code: part(`${field}.postal_code`, 20).openapi({ example: "EC1A 1BB" }),
      state: part(`${field}.state`, 100).openapi({ description: "State, county, province or region.", example: "Greater London" }),
      country: z
        .string({ error: country })
        .regex(/^[A-Za-z]{2}$/, { error: country })
        .refine(isCountry, { error: (issue) => `${country.slice(0, -1)}; ${quoted(issue.input)} is not one.` })
        .nullable()
        .optional()
        .openapi({ description: "ISO 3166-1 alpha-2, any case (answered upper case).", example: "GB" }),
    },
    `${field} must be an object with line1, line2, city, postal_code, state and country, or null.`,
  ).openapi({
    description: `${whose} postal address, printed on invoices. Every part is optional; each is text (line1 and line2 up to 200 characters, city and state 100, postal_code 20), country an ISO 3166-1 alpha-2 code. The whole address is replaced; null removes it.`,
  });
};

const TAX_ID_VALUE = "tax_ids value must be a tax id of the form its type takes, such as";

export const TAX_IDS_DESCRIPTION = `The buyer's tax ids, printed on invoices (at most ${MAX_TAX_IDS}; the whole list is replaced). type is ${listOf(TAX_ID_TYPE_NAMES, "or")}.`;

/** `tax_ids: [{ type, value }]`, at most MAX_TAX_IDS, each value of its type's form. */
export const taxIdsField = z
  .array(
    bodyObject(
      {
        type: closedSet("tax_ids type", TAX_ID_TYPE_NAMES).openapi({ description: "What kind of tax id it is (Stripe's names).", example: "eu_vat" }),
        value: textField("tax_ids value", 50, { min: 1, trim: true }).openapi({ description: "The id as registered; its form is checked loosely for its type (spaces, dots and hyphens are ignored).", example: "DE123456789" }),
      },
      "Each of tax_ids must be an object with type and value.",
    ).superRefine((taxId, ctx) => {
      const type = taxId.type as TaxIdType;
      if (!taxIdFormOk(type, taxId.value)) {
        ctx.addIssue({ code: "custom", path: ["value"], input: taxId.value, message: `${TAX_ID_VALUE} ${TAX_ID_TYPES[type].example} for ${type}; ${quoted(taxId.value)} is not one.` });
      }
    }),
    { error: `tax_ids must be a list of at most ${MAX_TAX_IDS} objects { type, value }.` },
  )
  .max(MAX_TAX_IDS, { error: `tax_ids must be a list of at most ${MAX_TAX_IDS} objects { type, value }.` })
  .openapi({
    description: TAX_IDS_DESCRIPTION,
    example: [{ type: "eu_vat", value: "DE123456789" }],
  });

/** An address in an answer. */
export const AddressSchema = z
  .object({
    line1: z.string().nullable(),
    line2: z.string().nullable(),
    city: z.string().nullable(),
    postal_code: z.string().nullable(),
    state: z.string().nullable(),
    country: z.string().nullable().openapi({ description: "ISO 3166-1 alpha-2, upper case.", example: "GB" }),
  })
  .openapi("Address");

/** A tax id in an answer. */
export const TaxIdSchema = z.object({ type: z.enum(TAX_ID_TYPE_NAMES), value: z.string() }).openapi("TaxId");
