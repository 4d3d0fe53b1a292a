// Issue 37's tax rates attacked by a reviewer who did not write them: a plan re-taxed while a
// renewal's charge is at the processor (the settlement that takes the claim over must invoice what
// was charged), percentages with 4 decimals at half a minor unit, inclusive and exclusive rates on
// one invoice, and rates of another account or mode. What must hold whatever happens: a renewal's
// charge equals its invoice's total, and each line's tax is rounded once, half away from zero.
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, subscribe, subscribed } from "../support/fixtures";
import { makeDue } from "../support/clock";
import { countRows } from "../support/db";
import { env } from "../support/env";
import { readBillableRows, renewRows } from "../support/renewal-rows";
import { CLAIM_STALE_MS, attachPendingPlans, claimOf, claimPeriod } from "../../src/billing/periods";
import { settleStaleClaims } from "../../src/billing/claims";
import { runBatch } from "../../src/db/batch";
import { createDb } from "../../src/db/client";
import { isoTime } from "../../src/lib/clock";

async function createRate(acct: Account, body: Record<string, unknown>, key = acct.key) {
  const res = await call("/tax-rates", { key, body: { display_name: "VAT", inclusive: false, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

/** Every paid invoice was paid by one completed payment of exactly its total, and every payment pays one. */
async function chargesEqualInvoices(acct: Account, subscriptionId: string) {
  const invoices = (await invoicesOf(acct, subscriptionId)).filter((i) => i.status === "paid");
  const payments = (await paymentsOf(acct, subscriptionId)).filter((p) => p.status === "completed");
  expect(payments).toHaveLength(invoices.length);
  for (const invoice of invoices) {
    const payment = payments.find((p) => p.id === invoice.payment_id);
    expect(payment, `invoice ${invoice.id} has its payment`).toBeDefined();
    expect(payment!.amount).toBe(invoice.total);
    expect(invoice.total).toBe(invoice.subtotal - invoice.discount + invoice.total_tax_amounts.filter((t: any) => !t.inclusive).reduce((s: number, t: any) => s + t.amount, 0));
  }
  return { invoices, payments };
}

/** Makes the open claim of the subscription's period stale, as a worker that died after charging leaves it. */
const staleClaim = (subscriptionId: string) =>
  env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ? AND status = 'open'").bind(isoTime(Date.now() - CLAIM_STALE_MS - 60_000), subscriptionId).run();

describe("a plan re-taxed while a renewal is being charged", () => {
  it("is refused (409 charge_in_progress) while a renewal priced with its rates is unsettled; the claim taken over is invoiced as it was charged", async () => {
    const acct = await signup("Retaxed Co");
    const vat = await createRate(acct, { percentage: "20" });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, (await createUser(acct)).id, plan.id);
    await makeDue(sub.id);
    // The renewal run claims period 1 (10.00 + 20% = 12.00) and dies before it settles (its charge
    // may be at the processor).
    const db = createDb(env.DB);
    const [row] = await readBillableRows(sub.id);
    const [claimed] = await runBatch(db, [claimPeriod(db, row, "renewal", Date.now(), Date.now())]);
    expect(claimOf(claimed)).toMatchObject({ amount: 1200, tax: 200 });
    // Re-taxing the plan now would make the claim's invoice disagree with its charge.
    const patched = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { default_tax_rates: [] } });
    expectError(patched, 409, "invalid_request_error", "charge_in_progress");
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key })).body.default_tax_rates).toEqual([vat.id]);
    // A rename is not a change of price: it goes through.
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Pro+" } })).status).toBe(200);
    // The cron takes the claim over: charged 12.00, invoiced 12.00.
    await staleClaim(sub.id);
    expect(await settleStaleClaims(env)).toEqual(["renewed"]);
    const { invoices } = await chargesEqualInvoices(acct, sub.id);
    expect(invoices.map((i) => i.total)).toEqual([1200, 1200]);
    // Settled, the plan can be re-taxed; the next period is priced without tax.
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { default_tax_rates: [] } })).status).toBe(200);
    await makeDue(sub.id);
    await renewRows(await readBillableRows(sub.id), Date.now());
    expect((await chargesEqualInvoices(acct, sub.id)).invoices.map((i) => i.total)).toEqual([1200, 1200, 1000]);
  });

  it("a renewal that read the plan before it was re-taxed claims nothing: the next run prices the new rates, and charge and invoice agree", async () => {
    const acct = await signup("Retaxed Co");
    const vat = await createRate(acct, { percentage: "20" });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, (await createUser(acct)).id, plan.id);
    await makeDue(sub.id);
    const db = createDb(env.DB);
    const [stale] = await readBillableRows(sub.id);
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { default_tax_rates: [] } })).status).toBe(200);
    // The run's claim, priced with 20% from its read, commits after the re-tax.
    const [claimed] = await runBatch(db, [claimPeriod(db, stale, "renewal", Date.now(), Date.now())]);
    // Should it hold, and its worker die, the settlement that takes it over invoices the plan as it
    // now reads (no tax) against a charge of 12.00.
    await staleClaim(sub.id);
    await settleStaleClaims(env);
    await renewRows(await readBillableRows(sub.id), Date.now());
    expect(claimOf(claimed)).toBeNull();
    const { invoices } = await chargesEqualInvoices(acct, sub.id);
    expect(invoices.map((i) => i.total)).toEqual([1200, 1000]);
  });
});

describe("a scheduled plan re-taxed while the renewal that moves to it is being charged", () => {
  it("the plan the period is priced with (the scheduled one) is held, not the one the subscription leaves", async () => {
    const acct = await signup("Scheduled Co");
    const vat = await createRate(acct, { percentage: "20" });
    const small = await createPlan(acct, { price: 10 });
    const big = await createPlan(acct, { price: 30, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, (await createUser(acct)).id, small.id);
    const scheduled = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: big.id, at_period_end: true } });
    expect(scheduled.status, scheduled.text).toBe(200);
    await makeDue(sub.id);
    const db = createDb(env.DB);
    const rows = await readBillableRows(sub.id);
    await attachPendingPlans(db, rows);
    const [claimed] = await runBatch(db, [claimPeriod(db, rows[0], "renewal", Date.now(), Date.now())]);
    expect(claimOf(claimed)).toMatchObject({ amount: 3600, tax: 600 });
    expectError(await call(`/subscription-plans/${big.id}`, { key: acct.key, method: "PATCH", body: { default_tax_rates: [] } }), 409, "invalid_request_error", "charge_in_progress");
    // The plan it leaves prices nothing of this period: it may be re-taxed.
    expect((await call(`/subscription-plans/${small.id}`, { key: acct.key, method: "PATCH", body: { default_tax_rates: [vat.id] } })).status).toBe(200);
    await staleClaim(sub.id);
    expect(await settleStaleClaims(env)).toEqual(["renewed"]);
    expect((await chargesEqualInvoices(acct, sub.id)).invoices.map((i) => i.total)).toEqual([1000, 3600]);
  });
});

describe("tax arithmetic on issued invoices", () => {
  it("8.875% of 10.00 is 88.75 cents: 89 (half away from zero), once per line; 0.0001% of 19.99 is 0", async () => {
    const acct = await signup();
    const ny = await createRate(acct, { display_name: "NY", percentage: "8.875" });
    const tiny = await createRate(acct, { display_name: "Tiny", percentage: "0.0001" });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [ny.id, tiny.id] });
    const sub = await subscribed(acct, (await createUser(acct)).id, plan.id);
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice.lines[0].tax_amounts).toEqual([
      { tax_rate: ny.id, amount: 89, inclusive: false },
      { tax_rate: tiny.id, amount: 0, inclusive: false },
    ]);
    expect(invoice).toMatchObject({ subtotal: 1000, tax: 89, total: 1089, amount_paid: 1089 });
    expect(invoice.total_tax_amounts.map((t: any) => t.percentage)).toEqual(["8.875", "0.0001"]);
    await chargesEqualInvoices(acct, sub.id);
    // The invoice's check constraint holds the total to subtotal − discount + exclusive tax: a
    // write that moves the tax alone is refused by the database.
    await expect(env.DB.prepare("UPDATE invoices SET exclusive_tax = exclusive_tax + 1, tax = tax + 1 WHERE id = ?").bind(invoice.id).run()).rejects.toThrow(/CHECK/);
  });

  it("inclusive and exclusive rates on one invoice: 19% inclusive in 11.90 is 1.90, 10% exclusive on the 10.00 net of it is 1.00; total 12.90", async () => {
    const acct = await signup();
    const mwst = await createRate(acct, { display_name: "MwSt", percentage: "19", inclusive: true });
    const levy = await createRate(acct, { display_name: "Levy", percentage: "10", inclusive: false });
    const plan = await createPlan(acct, { price: 11.9, currency: "eur", default_tax_rates: [mwst.id, levy.id] });
    const sub = await subscribed(acct, (await createUser(acct)).id, plan.id);
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice.lines[0].tax_amounts).toEqual([
      { tax_rate: mwst.id, amount: 190, inclusive: true },
      { tax_rate: levy.id, amount: 100, inclusive: false },
    ]);
    expect(invoice).toMatchObject({ subtotal: 1190, tax: 290, total: 1290, amount_paid: 1290 });
    await chargesEqualInvoices(acct, sub.id);
    // A renewal charges the same, and its invoice says so.
    await makeDue(sub.id);
    await renewRows(await readBillableRows(sub.id), Date.now());
    expect((await chargesEqualInvoices(acct, sub.id)).invoices.map((i) => i.total)).toEqual([1290, 1290]);
  });

  it("a coupon then tax in JPY: ¥999 less 10% (¥100) is ¥899, 8% of it ¥71.92 -> ¥72; total ¥971", async () => {
    const acct = await signup();
    const jct = await createRate(acct, { display_name: "JCT", percentage: "8" });
    const coupon = await call("/coupons", { key: acct.key, body: { name: "Ten", percent_off: 10, duration: "forever" } });
    expect(coupon.status, coupon.text).toBe(201);
    const plan = await createPlan(acct, { price: 999, currency: "jpy", default_tax_rates: [jct.id] });
    const sub = await subscribed(acct, (await createUser(acct)).id, plan.id, undefined, { coupon: coupon.body.id });
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ subtotal: 999, discount: 100, tax: 72, total: 971, amount_paid: 971 });
    await makeDue(sub.id);
    await renewRows(await readBillableRows(sub.id), Date.now());
    expect((await chargesEqualInvoices(acct, sub.id)).invoices.map((i) => i.total)).toEqual([971, 971]);
  });
});

describe("rates that are not the caller's to use", () => {
  it("the other mode's rate on a new subscription, an archived one, or a PATCH of the percentage: refused, nothing written", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { price: 10 });
    const user = await createUser(acct);
    const live = await call("/tax-rates", { key: acct.liveKey, body: { display_name: "Live VAT", percentage: "20", inclusive: false } });
    expect(live.status, live.text).toBe(201);
    expect(expectError(await subscribe(acct, user.id, plan.id, undefined, { default_tax_rates: [live.body.id] }), 404, "not_found_error").param).toBe("default_tax_rates.0");
    const archived = await createRate(acct, { percentage: "5" });
    expect((await call(`/tax-rates/${archived.id}`, { key: acct.key, method: "PATCH", body: { active: false } })).status).toBe(200);
    expect(expectError(await subscribe(acct, user.id, plan.id, undefined, { default_tax_rates: [archived.id] }), 400, "invalid_request_error", "tax_rate_inactive").param).toBe("default_tax_rates.0");
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(0);
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(0);
    expect(await countRows("invoices", "account_id = ?", acct.id)).toBe(0);
    const vat = await createRate(acct, { percentage: "20" });
    for (const body of [{ percentage: "21" }, { inclusive: true }]) {
      expectError(await call(`/tax-rates/${vat.id}`, { key: acct.key, method: "PATCH", body }), 400, "invalid_request_error");
    }
    expect((await call(`/tax-rates/${vat.id}`, { key: acct.key })).body).toMatchObject({ percentage: "20", inclusive: false });
  });
});
