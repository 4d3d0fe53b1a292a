// The dashboard shows tax: a row per rate on an invoice's page (as issued), and a read-only list of
// the account's tax rates (issue 37).
import { describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { dashboardFetch, signIn, textOf } from "./support";

describe("tax in the dashboard", () => {
  it("lists the tax rates, and an invoice's page shows a row per rate", async () => {
    const acct = await signup("Dashboard tax");
    const vat = (await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "20", inclusive: false, country: "GB" } })).body;
    const mwst = (await call("/tax-rates", { key: acct.key, body: { display_name: "MwSt", percentage: "19", inclusive: true, country: "DE" } })).body;
    await call(`/tax-rates/${mwst.id}`, { key: acct.key, method: "PATCH", body: { active: false } });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const invoice = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    const cookie = await signIn(acct.key);

    const home = await dashboardFetch("/dashboard", { cookie });
    expect(home.html).toContain('href="/dashboard/tax-rates"');
    const list = await dashboardFetch("/dashboard/tax-rates", { cookie });
    expect(list.status).toBe(200);
    expect(list.html).toContain(`data-tax-rate="${vat.id}"`);
    const text = textOf(list.html);
    expect(text).toContain("VAT");
    expect(text).toContain("20%");
    expect(text).toContain("MwSt");
    expect(text).toContain("archived");

    const page = await dashboardFetch(`/dashboard/invoices/${invoice.id}`, { cookie });
    expect(page.status).toBe(200);
    expect(page.html).toMatch(/data-total="vat 20%">[^]*?2\.00/);
    expect(page.html).toMatch(/data-total="total">[^]*?12\.00/);
  });
});
