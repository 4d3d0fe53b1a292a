// Subscription plans: fixed or tiered (volume, graduated), priced in major units and shown in minor
// units too; create, list, read and update (name, description, active).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq, sql } from "drizzle-orm";
import { guard, guardExists } from "../../db/batch";
import { plans } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { CURRENCY_EXPONENTS, MAX_AMOUNT, MIN_AMOUNT, parseDecimalToMinor } from "../../domain/money";
import { readCurrency } from "../../payments/money-input";
import { validateTiers } from "../../domain/pricing";
import { formatMinorDecimal, parseMinorDecimal } from "../../domain/decimal";
import type { StoredTier } from "../../billing/pricing";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { conflict, invalidRequest, notFound } from "../../lib/errors";
import { planTaxChargeInFlight } from "../../billing/periods";
import { numberSource } from "../../lib/json";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commitAndAnswerRow, commitAndRespond } from "../write-path";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { resolveTaxRates } from "../../billing/tax";
import { CreatePlanBody, PlanSchema, planAnswer, serializePlan, UpdatePlanBody } from "./schema";

const tags = ["Subscription plans"];
const planId = idParam("plan", "plan_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/subscription-plans",
  tags,
  operationId: "createPlan",
  summary: "Create a subscription plan",
  description:
    "A fixed plan charges `price` (a decimal in major units) per interval; a volume or graduated plan is priced by `tiers` and the subscription's quantity. A metered plan (usage_type metered) prices the usage reported for each period instead of a quantity, and invoices it at the period's end.",
  scope: "plans:write",
  request: jsonBodyOf(CreatePlanBody),
  responses: { 201: json(PlanSchema, "The new plan.") },
});

const list = apiRoute({
  method: "get",
  path: "/subscription-plans",
  tags,
  operationId: "listPlans",
  summary: "List subscription plans",
  scope: "plans:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(PlanSchema, "PlanList"), "A page of plans, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/subscription-plans/{id}",
  tags,
  operationId: "getPlan",
  summary: "Read a subscription plan",
  scope: "plans:read",
  request: { params: planId },
  responses: { 200: json(PlanSchema, "The plan.") },
});

const update = apiRoute({
  method: "patch",
  path: "/subscription-plans/{id}",
  tags,
  operationId: "updatePlan",
  summary: "Rename, describe, archive or re-tax a plan",
  description:
    "`active: false` archives the plan: it accepts no new subscriptions, and existing ones keep renewing. Prices are immutable. `default_tax_rates` applies to invoices made from now on; while a renewal of a subscription taxed by the plan is being charged, changing it answers 409 charge_in_progress (retry in a few seconds).",
  scope: "plans:write",
  request: { params: planId, ...jsonBodyOf(UpdatePlanBody) },
  responses: { 200: json(PlanSchema, "The updated plan.") },
});

const PLAN_MISSING = "plan_missing";
const PLAN_TAX_CHARGE_IN_FLIGHT = "plan_tax_charge_in_flight";

/** A decimal in major units, read from the exact JSON source text, as integer minor units. */
function minorUnits(holder: unknown, key: string, param: string, currency: string): number {
  const exponent = CURRENCY_EXPONENTS[currency];
  const source = numberSource(holder, key);
  if (source === undefined) {
    throw invalidRequest("amount_too_large", `${param}: the price is larger than the largest chargeable amount.`, param);
  }
  const parsed = parseDecimalToMinor(source, exponent);
  if (parsed.ok) return parsed.minor;
  if (parsed.reason === "too_many_decimals") {
    throw invalidRequest(
      "too_many_decimals",
      `${param}: ${source} has more decimal places than ${currency.toUpperCase()} allows (${exponent}).`,
      param,
    );
  }
  if (parsed.reason === "out_of_range") {
    throw invalidRequest("amount_too_large", `${param}: ${source} is larger than the largest chargeable amount.`, param);
  }
  throw invalidRequest("parameter_invalid", `${param}: write the price as a plain decimal such as 19.99, not ${source}.`, param);
}

/**
 * A sub-cent unit price: parsed exactly (src/domain/decimal.ts: digits, up to 12 decimals, at most
 * the largest amount) and stored in its canonical text ("0.350" -> "0.35"). A fixed plan's must be
 * more than zero; a tier's may be zero (a free tier).
 */
function exactUnitAmount(text: string, param: string, zeroAllowed = false): string {
  const parsed = parseMinorDecimal(text, param);
  if (!parsed.ok) throw invalidRequest(parsed.reason === "too_large" ? "amount_too_large" : "parameter_invalid", parsed.message, param);
  if (!zeroAllowed && parsed.value.scaled === 0n) throw invalidRequest("amount_too_small", `${param}: a fixed plan must charge more than zero.`, param);
  return formatMinorDecimal(parsed.value);
}

/**
 * The one of `fields` the request gives (each is the same price in another unit), or undefined for
 * none; two of them is the 400 `parameter_unexpected`, naming both.
 */
function onlyOne<T extends object, K extends keyof T & string>(body: T, fields: readonly K[], prefix: string): K | undefined {
  const given = fields.filter((field) => body[field] !== undefined);
  if (given.length > 1) {
    throw invalidRequest("parameter_unexpected", `${prefix}${given[1]}: give one of ${fields.join(", ")}, not both ${given[0]} and ${given[1]}.`, `${prefix}${given[1]}`);
  }
  return given[0];
}

/** validateTiers speaks in domain names; the API's are the request's. */
const apiTierMessage = (message: string) =>
  message
    .replaceAll("unitAmount", "unit_price")
    .replaceAll("flatAmount", "flat_price")
    .replaceAll("upTo", "up_to")
    .replaceAll(" in minor units", "");

export function registerPlans(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createPlan(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const raw = c.var.jsonBody as { tiers?: unknown[] };
    const now = clock.now();
    const currency = readCurrency(body.currency);

    let unitAmount: number | null = null;
    let unitAmountDecimal: string | null = null;
    let tiers: StoredTier[] | null = null;
    if (body.pricing_model === "fixed") {
      if (body.tiers !== undefined) throw invalidRequest("parameter_unexpected", "tiers: only volume and graduated plans have tiers.", "tiers");
      const given = onlyOne(body, ["price", "unit_amount", "unit_amount_decimal"], "");
      if (given === "unit_amount_decimal") {
        unitAmountDecimal = exactUnitAmount(body.unit_amount_decimal!, "unit_amount_decimal");
      } else if (given === "unit_amount") {
        unitAmount = body.unit_amount!;
      } else {
        if (body.price === undefined) throw invalidRequest("parameter_missing", "price: this parameter (or unit_amount in minor units, or unit_amount_decimal) is required for a fixed plan.", "price");
        unitAmount = minorUnits(raw, "price", "price", currency);
        if (unitAmount < MIN_AMOUNT) throw invalidRequest("amount_too_small", "price: a fixed plan must charge more than zero.", "price");
      }
    } else {
      const param = (["price", "unit_amount", "unit_amount_decimal"] as const).find((field) => body[field] !== undefined);
      if (param) {
        throw invalidRequest("parameter_unexpected", `${param}: a ${body.pricing_model} plan is priced by its tiers, not by ${param}.`, param);
      }
      if (body.tiers === undefined) throw invalidRequest("parameter_missing", `tiers: this parameter is required for a ${body.pricing_model} plan.`, "tiers");
      tiers = body.tiers.map((tier, i): StoredTier => {
        const holder = raw.tiers?.[i];
        const flat = onlyOne(tier, ["flat_price", "flat_amount"], `tiers.${i}.`);
        const flat_amount = flat === "flat_amount" ? tier.flat_amount! : flat === "flat_price" ? minorUnits(holder, "flat_price", `tiers.${i}.flat_price`, currency) : 0;
        const unit = onlyOne(tier, ["unit_price", "unit_amount", "unit_amount_decimal"], `tiers.${i}.`);
        if (unit === "unit_amount_decimal") {
          return { up_to: tier.up_to, unit_amount: null, flat_amount, unit_amount_decimal: exactUnitAmount(tier.unit_amount_decimal!, `tiers.${i}.unit_amount_decimal`, true) };
        }
        if (unit === "unit_amount") return { up_to: tier.up_to, unit_amount: tier.unit_amount!, flat_amount };
        if (unit === undefined) throw invalidRequest("parameter_missing", `tiers.${i}.unit_price: each tier needs unit_price (or unit_amount in minor units, or unit_amount_decimal).`, `tiers.${i}.unit_price`);
        return { up_to: tier.up_to, unit_amount: minorUnits(holder, "unit_price", `tiers.${i}.unit_price`, currency), flat_amount };
      });
      // The tiers' order and bounds; a sub-cent unit price is checked above (its value does not change the rules).
      const problem = validateTiers(tiers.map((t) => ({ upTo: t.up_to, unitAmount: t.unit_amount ?? 0, flatAmount: t.flat_amount })));
      if (problem) throw invalidRequest("tiers_invalid", `tiers: ${apiTierMessage(problem)}`, "tiers");
      for (const [i, t] of tiers.entries()) {
        if ((t.unit_amount ?? 0) > MAX_AMOUNT || t.flat_amount > MAX_AMOUNT) {
          throw invalidRequest("amount_too_large", `tiers.${i}: the price is larger than the largest chargeable amount.`, `tiers.${i}`);
        }
      }
    }

    if (body.usage_type === "licensed" && body.aggregate_usage !== undefined) {
      throw invalidRequest("parameter_unexpected", "aggregate_usage: only a metered plan aggregates usage.", "aggregate_usage");
    }
    if (body.usage_type === "metered" && body.trial_period_days) {
      throw invalidRequest("parameter_unexpected", "trial_period_days: a metered plan is billed in arrears for its usage, and has no trial.", "trial_period_days");
    }
    const row: typeof plans.$inferInsert & typeof plans.$inferSelect = {
      id: newId("plan", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      name: body.name,
      description: body.description ?? null,
      currency,
      interval: body.interval,
      pricingModel: body.pricing_model,
      unitAmount,
      unitAmountDecimal,
      tiers,
      active: true,
      trialPeriodDays: body.trial_period_days ? body.trial_period_days : null,
      usageType: body.usage_type,
      aggregateUsage: body.usage_type === "metered" ? (body.aggregate_usage ?? "sum") : null,
      defaultTaxRates: await resolveTaxRates(c, body.default_tax_rates ?? []),
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
    };
    return commitAndRespond(c, { statements: [db.insert(plans).values(row)] }, 201, serializePlan(row));
  });

  app.openapi(list, async function listPlans(c) {
    const page = await listOwned(c, {
      table: plans,
      query: c.req.valid("query"),
      validCursor: (id) => hasPrefix(id, "plan"),
      serialize: serializePlan,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getPlan(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, plans, id, "plan");
    return c.json(serializePlan(row), 200);
  });

  app.openapi(update, async function updatePlan(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    // One round trip: the plan is not read first. The batch refuses a plan that is not there, and
    // returns the plan as it commits; the record stores that row as the answer (planAnswer).
    const changes: Partial<typeof plans.$inferInsert> = { updatedAt: isoTime(now) };
    if (body.name !== undefined) changes.name = body.name;
    if (body.description !== undefined) changes.description = body.description;
    if (body.active !== undefined) changes.active = body.active;
    if (body.default_tax_rates !== undefined) changes.defaultTaxRates = await resolveTaxRates(c, body.default_tax_rates);
    const match = owned(plans, auth, eq(plans.id, id));
    return commitAndAnswerRow(
      c,
      {
        statements: [
          guardExists(db, PLAN_MISSING, plans, match),
          // A renewal claimed with the plan's rates is invoiced with them when it settles.
          ...(body.default_tax_rates !== undefined ? [guard(db, PLAN_TAX_CHARGE_IN_FLIGHT, sql`NOT ${planTaxChargeInFlight(id)}`)] : []),
        ],
        returning: db.update(plans).set(changes).where(match).returning(),
      },
      planAnswer,
      eq(plans.id, id),
      {
        failures: {
          [PLAN_MISSING]: () => notFound("plan", id, "id"),
          [PLAN_TAX_CHARGE_IN_FLIGHT]: () =>
            conflict(
              "charge_in_progress",
              `A renewal of a subscription on plan ${id} is being charged with its current tax rates (one whose outcome is unknown is settled within 10 minutes); default_tax_rates can change once it settles. Retry in a few seconds.`,
            ),
        },
      },
    );
  });
}
