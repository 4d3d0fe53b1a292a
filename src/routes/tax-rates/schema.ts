import { z } from "@hono/zod-openapi";
import { taxRates } from "../../db/schema";
import { formatPercentage } from "../../domain/tax";
import { rowAnswer } from "../../middleware/stored-answers";
import { bodyObject, booleanField, livemodeField, textField, timestamp } from "../shared";

const displayName = textField("display_name", 50, { min: 1, trim: true }).openapi({ description: "What invoices call the tax (VAT, GST, Sales tax).", example: "VAT" });
const description = textField("description", 500).openapi({ description: "For your own records; invoices do not show it.", example: "UK standard rate" });

export const CreateTaxRateBody = bodyObject({
  display_name: displayName,
  percentage: z
    .string({ error: 'percentage must be a decimal string from 0 to 100 with at most 4 decimals, such as "19.5".' })
    .openapi({ description: 'The rate in percent, a decimal string from 0 to 100 with at most 4 decimals ("20", "8.875"). It never changes.', example: "20" }),
  inclusive: booleanField("inclusive").openapi({ description: "true: the price already holds the tax (19% inclusive in 11.90 is 1.90). false: the tax is added on top (20% exclusive on 10.00 is 2.00, a 12.00 total). It never changes." }),
  country: z
    .string({ error: "country must be a two-letter ISO 3166-1 country code, such as GB." })
    .regex(/^[A-Za-z]{2}$/, { error: "country must be a two-letter ISO 3166-1 country code, such as GB." })
    .optional()
    .openapi({ description: "The ISO 3166-1 alpha-2 country it applies in (returned upper case).", example: "GB" }),
  state: textField("state", 100, { min: 1, trim: true }).optional().openapi({ description: "The state or province it applies in (ISO 3166-2 subdivision code, for example).", example: "CA" }),
  description: description.optional(),
}).openapi("TaxRateRequest");

export const UpdateTaxRateBody = bodyObject({
  active: booleanField("active").optional().openapi({ description: "false archives the rate: new plans and subscriptions refuse it; those holding it keep it." }),
  display_name: displayName.optional(),
  description: description.nullable().optional(),
}).openapi("TaxRateUpdateRequest");

export const TaxRateSchema = z
  .object({
    id: z.string().openapi({ example: "txr_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("tax_rate"),
    active: z.boolean(),
    display_name: z.string(),
    percentage: z.string().openapi({ description: "The rate in percent, exact (a decimal string with at most 4 decimals).", example: "20" }),
    inclusive: z.boolean(),
    country: z.string().nullable(),
    state: z.string().nullable(),
    description: z.string().nullable(),
    livemode: livemodeField,
    created_at: timestamp("When the tax rate was created."),
  })
  .openapi("TaxRate");
export type TaxRateJson = z.infer<typeof TaxRateSchema>;

export function serializeTaxRate(row: typeof taxRates.$inferSelect): TaxRateJson {
  return {
    id: row.id,
    object: "tax_rate",
    active: row.active,
    display_name: row.displayName,
    percentage: formatPercentage(row.percentage),
    inclusive: row.inclusive,
    country: row.country,
    state: row.state,
    description: row.description,
    livemode: row.livemode,
    created_at: row.createdAt,
  };
}

/** A tax rate as a write's answer, stored as the committed row. */
export const taxRateAnswer = rowAnswer("tax_rate", taxRates, serializeTaxRate);
