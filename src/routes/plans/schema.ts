import { z } from "@hono/zod-openapi";
import { plans } from "../../db/schema";
import { CURRENCY_EXPONENTS, formatMinor, MAX_AMOUNT, MIN_AMOUNT } from "../../domain/money";
import { MAX_TIERS } from "../../domain/pricing";
import { CurrencyField } from "../../payments/money-input";
import { bodyObject, booleanField, closedSet, livemodeField, textField, timestamp, wholeNumber } from "../shared";
import { MAX_TRIAL_DAYS } from "../../domain/trials";
import { rowAnswer } from "../../middleware/stored-answers";
import { planUnitAmountDecimal, tierUnitAmountDecimal } from "../../billing/pricing";
import { DefaultTaxRatesField } from "../../billing/tax";

/** A price in major units; its decimals are checked against the currency by the handler. */
const majorUnits = (field: string, description: string, example: number) =>
  z
    .number({ error: `${field} must be a decimal of at least 0 in major units, such as ${example}.` })
    .min(0)
    .openapi({ description: `${description} A decimal in major units, with no more decimals than the currency allows.`, example });

/** A sub-cent unit price: a string of digits in minor units with up to 12 decimals (checked by the handler). */
const unitAmountDecimal = (field: string) =>
  z.string({ error: `${field} must be a string of digits in minor units, such as "0.35" for 0.35 of the currency's minor unit.` }).openapi({
    description:
      'The unit price in the currency\'s minor unit, exact, with up to 12 decimals: "0.35" is 0.35 cent in USD. Instead of a price in major units; a line is rounded to the minor unit once (half away from zero).',
    example: "0.35",
  });

export const TierBody = bodyObject(
  {
    up_to: z
      .number({ error: "up_to must be a whole number of at least 1, or null for the last tier." })
      .int()
      .positive()
      .nullable()
      .openapi({ description: "The last quantity of this tier, inclusive; null for the last, unbounded tier.", example: 5 }),
    unit_price: majorUnits("unit_price", "The price of each unit in this tier (or give unit_amount or unit_amount_decimal).", 7).optional(),
    unit_amount: wholeNumber("tiers.unit_amount", 0, MAX_AMOUNT)
      .optional()
      .openapi({ description: "The price of each unit in this tier in minor units (700 is 7.00 USD): instead of unit_price.", example: 700 }),
    unit_amount_decimal: unitAmountDecimal("tiers.unit_amount_decimal").optional(),
    flat_price: majorUnits("flat_price", "A flat fee added when the quantity reaches this tier.", 0).optional(),
    flat_amount: wholeNumber("tiers.flat_amount", 0, MAX_AMOUNT)
      .optional()
      .openapi({ description: "The flat fee in minor units: instead of flat_price.", example: 0 }),
  },
  "Each item of tiers must be an object with up_to and unit_price (or unit_amount, or unit_amount_decimal), and flat_price (or flat_amount) if any.",
).openapi("PlanTierRequest");

const description = textField("description", 1000).nullable();

export const CreatePlanBody = bodyObject({
  name: textField("name", 200, { min: 1, trim: true }).openapi({ example: "Pro" }),
  price: majorUnits("price", "The charge per interval, for fixed plans.", 19.99).optional(),
  unit_amount: wholeNumber("unit_amount", MIN_AMOUNT, MAX_AMOUNT)
    .optional()
    .openapi({ description: "The charge per interval in minor units (1999 is 19.99 USD), as every other amount: instead of price.", example: 1999 }),
  unit_amount_decimal: unitAmountDecimal("unit_amount_decimal").optional(),
  currency: CurrencyField,
  interval: closedSet("interval", ["month", "year"]).openapi({ description: "The billing interval." }),
  description: description.optional().openapi({ example: "Everything in Pro." }),
  pricing_model: closedSet("pricing_model", ["fixed", "volume", "graduated"])
    .default("fixed")
    .openapi({ description: "fixed: `price` per interval (times quantity). volume: every unit at the rate of the tier the quantity reaches. graduated: each tier's units at that tier's rate." }),
  tiers: z
    .array(TierBody, { error: `tiers must be a list of 1 to ${MAX_TIERS} tiers.` })
    .min(1)
    .max(MAX_TIERS)
    .optional()
    .openapi({ description: "Required for volume and graduated plans, ascending by up_to; only the last tier has up_to null." }),
  trial_period_days: wholeNumber("trial_period_days", 0, MAX_TRIAL_DAYS)
    .optional()
    .openapi({ description: "Days of free trial each new subscription gets (0 for none), unless the subscription gives its own.", example: 14 }),
  usage_type: closedSet("usage_type", ["licensed", "metered"])
    .default("licensed")
    .openapi({ description: "licensed: the price × quantity, charged at each period's start. metered: the usage reported for a period (POST /subscriptions/{id}/usage), priced through the plan's unit price or tiers and invoiced at the period's end." }),
  aggregate_usage: closedSet("aggregate_usage", ["sum", "max", "last_during_period"])
    .optional()
    .openapi({ description: "How a metered period's usage adds up: sum (default), max (the largest usage at one time) or last_during_period. Metered plans only." }),
  default_tax_rates: DefaultTaxRatesField.optional(),
}).openapi("PlanRequest");

export const UpdatePlanBody = bodyObject({
  name: textField("name", 200, { min: 1, trim: true }).optional(),
  description: description.optional(),
  active: booleanField("active").optional().openapi({ description: "false archives the plan: no new subscriptions; existing ones keep renewing." }),
  default_tax_rates: DefaultTaxRatesField.optional().openapi({ description: "Replaces the plan's tax rates (an empty list removes them), for invoices made from now on; issued invoices keep theirs." }),
}).openapi("PlanUpdateRequest");

export const TierSchema = z
  .object({
    up_to: z.number().int().nullable(),
    unit_price: z.number().nullable().openapi({ description: "Per-unit price in major units (null when priced by unit_amount_decimal)." }),
    flat_price: z.number().openapi({ description: "Flat fee in major units." }),
    unit_amount: z.number().int().nullable().openapi({ description: "Per-unit price in minor units (null when priced by unit_amount_decimal)." }),
    unit_amount_decimal: z.string().openapi({ description: "Per-unit price in minor units, exact (up to 12 decimals).", example: "650" }),
    flat_amount: z.number().int().openapi({ description: "Flat fee in minor units." }),
  })
  .openapi("PlanTier");

export const PlanSchema = z
  .object({
    id: z.string().openapi({ example: "plan_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("plan"),
    livemode: livemodeField,
    name: z.string(),
    price: z.number().nullable().openapi({ description: "The charge per interval in major units (null for tiered plans, and for a sub-cent unit_amount_decimal).", example: 19.99 }),
    unit_amount: z.number().int().nullable().openapi({ description: "The charge per interval in minor units (null for tiered plans, and for a sub-cent unit_amount_decimal).", example: 1999 }),
    unit_amount_decimal: z
      .string()
      .nullable()
      .openapi({ description: "A fixed plan's unit price in minor units, exact, with up to 12 decimals (\"1999\", or \"0.35\" for 0.35 cent); null for tiered plans.", example: "1999" }),
    currency: z.string().openapi({ example: "usd" }),
    interval: z.enum(["month", "year"]),
    pricing_model: z.enum(["fixed", "volume", "graduated"]),
    tiers: z.array(TierSchema).nullable(),
    description: z.string().nullable(),
    active: z.boolean(),
    trial_period_days: z.number().int().nullable().openapi({ description: "Days of free trial a new subscription gets, or null for none." }),
    usage_type: z.enum(["licensed", "metered"]),
    aggregate_usage: z.enum(["sum", "max", "last_during_period"]).nullable().openapi({ description: "How a metered period's usage adds up; null for a licensed plan." }),
    default_tax_rates: z.array(z.string()).openapi({ description: "The tax rates (txr_…) its subscriptions' invoices carry, unless a subscription gives its own.", example: [] }),
    created_at: timestamp("When the plan was created."),
    updated_at: timestamp("When the plan was last changed."),
  })
  .openapi("Plan");
export type PlanJson = z.infer<typeof PlanSchema>;

/** A minor-unit integer shown in major units. Display only: the integer is the truth. */
const major = (minor: number, exponent: number) => Number(formatMinor(minor, exponent));

export function serializePlan(row: typeof plans.$inferSelect): PlanJson {
  const exponent = CURRENCY_EXPONENTS[row.currency] ?? 2;
  return {
    id: row.id,
    object: "plan",
    livemode: row.livemode,
    name: row.name,
    price: row.unitAmount === null ? null : major(row.unitAmount, exponent),
    unit_amount: row.unitAmount,
    unit_amount_decimal: planUnitAmountDecimal(row),
    currency: row.currency,
    interval: row.interval,
    pricing_model: row.pricingModel,
    tiers:
      row.tiers?.map((t) => ({
        up_to: t.up_to,
        unit_price: t.unit_amount === null ? null : major(t.unit_amount, exponent),
        flat_price: major(t.flat_amount, exponent),
        unit_amount: t.unit_amount,
        unit_amount_decimal: tierUnitAmountDecimal(t),
        flat_amount: t.flat_amount,
      })) ?? null,
    description: row.description,
    active: row.active,
    trial_period_days: row.trialPeriodDays,
    usage_type: row.usageType,
    aggregate_usage: row.aggregateUsage,
    default_tax_rates: (row.defaultTaxRates ?? []).map((r) => r.id),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** A plan as a write's answer, stored by its idempotency record as the committed row (src/middleware/stored-answers.ts). */
export const planAnswer = rowAnswer("plan", plans, serializePlan);
