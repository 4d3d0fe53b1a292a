// The dashboard's Settings page (a secret key's session): the seller's details invoices print,
// saved through PATCH /api/account, a bad value shown beside its field; and an invoice's page
// showing the seller and the buyer as the invoice names them.
import { describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createKey, createPlan, subscribed } from "../support/fixtures";
import { dashboardFetch, signIn, submit, textOf } from "./support";

describe("the Settings page", () => {
  it("saves the seller's details; an empty field removes one; a bad country is shown beside its field", { timeout: 30_000 }, async () => {
    const acct = await signup("Settings Co");
    const cookie = await signIn(acct.key);
    const home = await dashboardFetch("/dashboard", { cookie });
    expect(home.html).toContain('href="/dashboard/settings"');

    const saved = await submit(cookie, "/dashboard/settings", "/dashboard/settings", {
      business_name: "Settings Company Ltd",
      address_line1: "1 Main Street",
      address_city: "London",
      address_postal_code: "EC1A 1BB",
      address_country: "gb",
      tax_id: "GB123456789",
      invoice_footer: "Thank you.",
    });
    expect(saved.status, saved.html.slice(0, 300)).toBe(303);
    expect((await call("/api/account", { key: acct.key })).body).toMatchObject({
      business_name: "Settings Company Ltd",
      address: { line1: "1 Main Street", line2: null, city: "London", postal_code: "EC1A 1BB", state: null, country: "GB" },
      tax_id: "GB123456789",
      invoice_footer: "Thank you.",
      event_retention_days: 30,
    });
    const page = await dashboardFetch("/dashboard/settings", { cookie });
    expect(page.html).toContain('value="Settings Company Ltd"');
    expect(page.html).toContain('value="GB"');

    const refused = await submit(cookie, "/dashboard/settings", "/dashboard/settings", { address_country: "ZZ", invoice_footer: "Thank you." });
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('data-problem="address_country"');
    expect(textOf(refused.html)).toContain("address.country must be a two-letter ISO 3166-1 country code");
    expect((await call("/api/account", { key: acct.key })).body.address.country).toBe("GB");

    const cleared = await submit(cookie, "/dashboard/settings", "/dashboard/settings", { tax_id: "", invoice_footer: "" });
    expect(cleared.status).toBe(303);
    expect((await call("/api/account", { key: acct.key })).body).toMatchObject({ tax_id: null, invoice_footer: null, business_name: "Settings Company Ltd" });
  });

  it("is left out of a restricted key's menu", async () => {
    const acct = await signup();
    const restricted = await createKey(acct, ["invoices:read"]);
    const cookie = await signIn(restricted.secret);
    expect((await dashboardFetch("/dashboard", { cookie })).html).not.toContain('href="/dashboard/settings"');
  });
});

describe("an invoice's page and a user's", () => {
  it("show the seller and the buyer (the invoice as it names them, with the coupon's name on the discount; the user as now)", { timeout: 30_000 }, async () => {
    const acct = await signup("Parties Co");
    await call("/api/account", { key: acct.key, method: "PATCH", body: { address: { line1: "1 Main Street", city: "London", country: "GB" }, tax_id: "GB123456789", invoice_footer: "Thank you." } });
    const user = (await call("/api/users", { key: acct.key, body: { name: "Ivy Invoice", email: "ivy@example.com", address: { city: "Berlin", country: "DE" }, tax_ids: [{ type: "eu_vat", value: "DE123456789" }] } })).body;
    await call("/coupons", { key: acct.key, body: { id: "TEN", name: "Ten off", percent_off: 10, duration: "forever" } });
    const plan = await createPlan(acct, { price: 30 });
    const sub = await subscribed(acct, user.id, plan.id, undefined, { coupon: "TEN" });
    const [invoice] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    const cookie = await signIn(acct.key);
    const page = await dashboardFetch(`/dashboard/invoices/${invoice.id}`, { cookie });
    const text = textOf(page.html);
    for (const shown of ["From Parties Co 1 Main Street London GB Tax ID GB123456789", "Bill to Ivy Invoice ivy@example.com Berlin DE EU VAT DE123456789", "Thank you.", "Discount (Ten off)"]) {
      expect(text, shown).toContain(shown);
    }
    // The user's page shows the buyer's details as they are now.
    const userPage = textOf((await dashboardFetch(`/dashboard/users/${user.id}`, { cookie })).html);
    expect(userPage).toContain("Address Berlin, DE");
    expect(userPage).toContain("Tax ids EU VAT DE123456789");
  });
});
