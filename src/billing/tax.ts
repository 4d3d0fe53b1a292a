// Tax rates on plans and subscriptions: the ids a request gives in `default_tax_rates`, looked up
// (the caller's own, in its mode, active) and copied as what their tax needs (src/domain/tax.ts
// TaxRateValue: a rate's percentage and inclusive never change, so the copy stays true), and the
// rates an invoice of a subscription carries: the subscription's when it has its own, else its
// plan's (Stripe's rule: the subscription's win).
import { z } from "@hono/zod-openapi";
import { inArray } from "drizzle-orm";
import type { Context } from "hono";
import type { AppEnv } from "../context";
import { taxRates } from "../db/schema";
import { owned } from "../db/scope";
import { hasPrefix } from "../domain/ids";
import type { TaxRateValue } from "../domain/tax";
import { invalidRequest, notFound } from "../lib/errors";

/** How many rates a plan or subscription may carry (Stripe's limit on default_tax_rates). */
export const MAX_TAX_RATES = 5;

/** The request field: a list of tax rate ids. */
export const DefaultTaxRatesField = z
  .array(z.string({ error: "default_tax_rates must be a list of tax rate ids, such as [\"txr_01jd2x4k5m6n7p8q9r0s1t2v3w\"]." }).max(100), {
    error: "default_tax_rates must be a list of tax rate ids, such as [\"txr_01jd2x4k5m6n7p8q9r0s1t2v3w\"].",
  })
  .max(MAX_TAX_RATES, { error: `default_tax_rates takes at most ${MAX_TAX_RATES} tax rates.` })
  .openapi({ description: "Tax rates (txr_…) every invoice line carries, each taken on the line after its discount and rounded once.", example: ["txr_01jd2x4k5m6n7p8q9r0s1t2v3w"] });

/**
 * The rates `ids` names, as their values, in the order given. An id that is not the caller's (in
 * its mode) answers 404, an inactive rate or one given twice 400, all naming default_tax_rates.
 */
export async function resolveTaxRates(c: Context<AppEnv>, ids: readonly string[]): Promise<TaxRateValue[]> {
  const param = "default_tax_rates";
  ids.forEach((id, i) => {
    if (ids.indexOf(id) !== i) throw invalidRequest("parameter_invalid", `default_tax_rates: ${id} is given twice.`, `${param}.${i}`);
  });
  if (ids.length === 0) return [];
  const wellFormed = ids.filter((id) => hasPrefix(id, "taxRate"));
  const rows = wellFormed.length === 0 ? [] : await c.var.db.select().from(taxRates).where(owned(taxRates, c.var.auth, inArray(taxRates.id, wellFormed)));
  return ids.map((id, i) => {
    const row = rows.find((r) => r.id === id);
    if (!row) throw notFound("tax_rate", id, `${param}.${i}`);
    if (!row.active) throw invalidRequest("tax_rate_inactive", `default_tax_rates: tax rate ${id} is archived (active false) and cannot be put on new plans or subscriptions.`, `${param}.${i}`);
    return { id: row.id, percentage: row.percentage, inclusive: row.inclusive };
  });
}

/** The rates an invoice of a subscription carries: its own when it has them, else its plan's. */
export const taxRatesOf = (sub: { defaultTaxRates: TaxRateValue[] | null }, plan: { defaultTaxRates: TaxRateValue[] }): TaxRateValue[] =>
  sub.defaultTaxRates ?? plan.defaultTaxRates;

/** The ids of some rates, as the API shows default_tax_rates. */
export const taxRateIds = (rates: readonly TaxRateValue[] | null): string[] | null => (rates === null ? null : rates.map((r) => r.id));
