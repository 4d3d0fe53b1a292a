// Tax rates: create, list, read and update (names and active only: a rate's percentage and
// whether it is inclusive never change, so plans, subscriptions and issued invoices that carry it
// stay true). The maths is src/domain/tax.ts; plans and subscriptions take them through
// src/billing/tax.ts.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { guardExists } from "../../db/batch";
import { taxRates } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { parsePercentage } from "../../domain/tax";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest, notFound } from "../../lib/errors";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commitAndAnswerRow, commitAndRespond } from "../write-path";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { CreateTaxRateBody, TaxRateSchema, UpdateTaxRateBody, serializeTaxRate, taxRateAnswer } from "./schema";

const tags = ["Tax rates"];
const taxRateId = idParam("tax rate", "txr_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/tax-rates",
  tags,
  operationId: "createTaxRate",
  summary: "Create a tax rate",
  description:
    "A percentage (a decimal string, 0 to 100, at most 4 decimals), exclusive (added on top of a line) or inclusive (the part of the price that is tax). Plans and subscriptions carry rates in default_tax_rates; each invoice line's tax is taken after its discount and rounded to the minor unit once, half away from zero. The percentage and inclusive never change.",
  scope: "tax_rates:write",
  request: jsonBodyOf(CreateTaxRateBody),
  responses: { 201: json(TaxRateSchema, "The new tax rate.") },
});

const list = apiRoute({
  method: "get",
  path: "/tax-rates",
  tags,
  operationId: "listTaxRates",
  summary: "List tax rates",
  description: "Tax rates, newest first, inactive ones included.",
  scope: "tax_rates:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(TaxRateSchema, "TaxRateList"), "A page of tax rates, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/tax-rates/{id}",
  tags,
  operationId: "getTaxRate",
  summary: "Read a tax rate",
  scope: "tax_rates:read",
  request: { params: taxRateId },
  responses: { 200: json(TaxRateSchema, "The tax rate.") },
});

const update = apiRoute({
  method: "patch",
  path: "/tax-rates/{id}",
  tags,
  operationId: "updateTaxRate",
  summary: "Rename, describe or archive a tax rate",
  description: "`active: false` archives the rate: new plans and subscriptions refuse it, those holding it keep it. The percentage and inclusive never change (sending one is 400 parameter_unknown naming it): create a new rate instead.",
  scope: "tax_rates:write",
  request: { params: taxRateId, ...jsonBodyOf(UpdateTaxRateBody) },
  responses: { 200: json(TaxRateSchema, "The updated tax rate.") },
});

const TAX_RATE_MISSING = "tax_rate_missing";

export function registerTaxRates(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createTaxRate(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const percentage = parsePercentage(body.percentage);
    if (!percentage.ok) throw invalidRequest("parameter_invalid", percentage.message, "percentage");
    const row: typeof taxRates.$inferSelect = {
      id: newId("taxRate", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      displayName: body.display_name,
      percentage: percentage.value,
      inclusive: body.inclusive,
      country: body.country?.toUpperCase() ?? null,
      state: body.state ?? null,
      description: body.description ?? null,
      active: true,
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
    };
    return commitAndRespond(c, { statements: [db.insert(taxRates).values(row)] }, 201, serializeTaxRate(row));
  });

  app.openapi(list, async function listTaxRates(c) {
    const page = await listOwned(c, { table: taxRates, query: c.req.valid("query"), validCursor: (id) => hasPrefix(id, "taxRate"), serialize: serializeTaxRate });
    return c.json(page, 200);
  });

  app.openapi(get, async function getTaxRate(c) {
    const { id } = c.req.valid("param");
    return c.json(serializeTaxRate(await readById(c, taxRates, id, "tax_rate")), 200);
  });

  app.openapi(update, async function updateTaxRate(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const changes: Partial<typeof taxRates.$inferInsert> = { updatedAt: isoTime(clock.now()) };
    if (body.display_name !== undefined) changes.displayName = body.display_name;
    if (body.description !== undefined) changes.description = body.description;
    if (body.active !== undefined) changes.active = body.active;
    const match = owned(taxRates, auth, eq(taxRates.id, id));
    return commitAndAnswerRow(
      c,
      { statements: [guardExists(db, TAX_RATE_MISSING, taxRates, match)], returning: db.update(taxRates).set(changes).where(match).returning() },
      taxRateAnswer,
      eq(taxRates.id, id),
      { failures: { [TAX_RATE_MISSING]: () => notFound("tax_rate", id, "id") } },
    );
  });
}
