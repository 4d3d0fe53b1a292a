// The dashboard's Coupons page: the list (terms, redemptions, status), the create form (checked
// field by field, the API's refusal beside its field), delete through the API's route, the
// discount, a trial and a metered subscription's usage on the Subscriptions page, and a key
// without coupons:read.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createKey, createPlan, createUser, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { dashboardFetch, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;

beforeAll(async () => {
  acct = await signup("Dashboard coupons");
  cookie = await signIn(acct.key);
}, 30_000);

describe("the Coupons page", () => {
  it("creates a percentage coupon and an amount coupon from the form, and lists them with their terms", async () => {
    const home = await dashboardFetch("/dashboard", { cookie });
    expect(home.html).toContain('href="/dashboard/coupons"');
    const made = await submit(cookie, "/dashboard/coupons", "/dashboard/coupons", { id: "DASH20", name: "Dash sale", percent_off: "20", duration: "repeating", duration_in_months: "3" });
    expect(made.status, made.html.slice(0, 300)).toBe(303);
    expect(made.location).toMatch(/done=coupon_created/);
    const amount = await submit(cookie, "/dashboard/coupons", "/dashboard/coupons", { name: "Ten off", amount_off: "10.00", currency: "eur", duration: "once", max_redemptions: "5" });
    expect(amount.status).toBe(303);
    expect((await call("/coupons/DASH20", { key: acct.key })).body).toMatchObject({ percent_off: 20, duration: "repeating", duration_in_months: 3 });

    const list = await dashboardFetch("/dashboard/coupons", { cookie });
    const text = textOf(list.html);
    expect(list.html).toContain('data-coupon="DASH20"');
    expect(text).toContain("20% off for 3 months");
    expect(text).toMatch(/10\.00 EUR off once|€10\.00 off once/);
    expect(text).toContain("0 of 5");
  });

  it("shows each problem beside its field, and the API's refusal too, without creating anything", async () => {
    const before = (await call("/coupons?limit=100", { key: acct.key })).body.data.length;
    const both = await submit(cookie, "/dashboard/coupons", "/dashboard/coupons", { name: "Both", percent_off: "10", amount_off: "5", currency: "usd", duration: "once" });
    expect(both.status).toBe(400);
    expect(textOf(both.html)).toContain("Give a percentage or an amount off, not both.");
    const months = await submit(cookie, "/dashboard/coupons", "/dashboard/coupons", { name: "Months", percent_off: "10", duration: "repeating" });
    expect(months.status).toBe(400);
    expect(textOf(months.html)).toContain("A repeating coupon needs its number of months");
    await call("/coupons", { key: acct.key, body: { id: "TAKEN", name: "Taken", percent_off: 5, duration: "once" } });
    const taken = await submit(cookie, "/dashboard/coupons", "/dashboard/coupons", { id: "TAKEN", name: "Again", percent_off: "10", duration: "once" });
    expect(taken.status).toBe(409);
    expect(textOf(taken.html)).toContain("A coupon with id TAKEN already exists");
    expect((await call("/coupons?limit=100", { key: acct.key })).body.data.length).toBe(before + 1);
  });

  it("deletes a coupon through the API; a subscription keeps its discount, shown on the Subscriptions page", async () => {
    await call("/coupons", { key: acct.key, body: { id: "KEEP", name: "Keep", percent_off: 15, duration: "forever" } });
    const user = await createUser(acct, { name: "Cora Coupon", email: "cora@example.com" });
    const plan = await createPlan(acct, { name: "Coupon plan", price: 40 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "KEEP" });
    const deleted = await submit(cookie, "/dashboard/coupons", "/dashboard/coupons/KEEP/delete");
    expect(deleted.status, deleted.html.slice(0, 300)).toBe(303);
    expect((await call("/coupons/KEEP", { key: acct.key })).body).toMatchObject({ valid: false, deleted_at: expect.any(String) });
    const list = await dashboardFetch("/dashboard/coupons", { cookie });
    expect(list.html).not.toContain('action="/dashboard/coupons/KEEP/delete"');
    const trialing = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 14 });
    const subs = await dashboardFetch("/dashboard/subscriptions", { cookie });
    expect(subs.html).toContain('data-discount="KEEP"');
    expect(subs.html).toContain(`data-trial-end="${trialing.trial_end}"`);
    const filtered = await dashboardFetch("/dashboard/subscriptions?status=trialing", { cookie });
    expect(filtered.html).toContain(`data-subscription="${trialing.id}"`);
    expect(filtered.html).not.toContain(`data-subscription="${sub.id}"`);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.discount.coupon).toBe("KEEP");
  });

  it("a metered subscription shows the usage of its open period on the Subscriptions page", async () => {
    const plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Dash calls", price: 0.01, currency: "usd", interval: "month", usage_type: "metered", aggregate_usage: "sum" } })).body;
    const user = await createUser(acct, { name: "Mia Metered", email: "mia@example.com" });
    const sub = await subscribed(acct, user.id, plan.id);
    for (const quantity of [120, 30]) expect((await call(`/subscriptions/${sub.id}/usage`, { key: acct.key, body: { quantity } })).status).toBe(201);
    const subs = await dashboardFetch("/dashboard/subscriptions", { cookie });
    expect(subs.html).toContain('data-usage="150"');
    expect(textOf(subs.html)).toContain("150 units used this period");
  });

  it("a subscription's scheduled change and its prorations waiting for the next invoice show on the Subscriptions page", async () => {
    const user = await createUser(acct, { name: "Pat Prorated", email: "pat@example.com" });
    const basic = await createPlan(acct, { name: "Dash basic", price: 30 });
    const pro = await createPlan(acct, { name: "Dash pro", price: 60 });
    const scheduled = await subscribed(acct, user.id, basic.id);
    const prorated = await subscribed(acct, user.id, basic.id);
    expect((await call(`/subscriptions/${scheduled.id}`, { key: acct.key, method: "PUT", body: { plan_id: pro.id, quantity: 2, at_period_end: true } })).status).toBe(200);
    expect((await call(`/subscriptions/${prorated.id}`, { key: acct.key, method: "PUT", body: { quantity: 3 } })).status).toBe(200);
    const pending = (await call(`/subscriptions/${prorated.id}`, { key: acct.key })).body;
    const items = await (await import("../support/env")).env.DB.prepare("SELECT SUM(amount) AS s FROM invoice_items WHERE subscription_id = ? AND invoice_id IS NULL").bind(prorated.id).first<{ s: number }>();
    expect(items!.s).toBeGreaterThan(0);
    const subs = await dashboardFetch("/dashboard/subscriptions", { cookie });
    expect(subs.html).toContain(`data-pending-update="${pro.id}"`);
    expect(textOf(subs.html)).toContain("changes to 2 × Dash pro on");
    expect(subs.html).toContain(`data-pending-prorations="${items!.s}"`);
    expect(textOf(subs.html)).toContain("prorations on the next invoice:");
    expect(pending.quantity).toBe(3);
  });

  it("a key without coupons:read has no Coupons in its menu and is refused the page; coupons:read alone gets no forms", async () => {
    const none = await signIn((await createKey(acct, ["users:read"], "no coupons")).secret);
    expect((await dashboardFetch("/dashboard", { cookie: none })).html).not.toContain('href="/dashboard/coupons"');
    const page = await dashboardFetch("/dashboard/coupons", { cookie: none });
    expect(page.status).toBe(403);
    expect(textOf(page.html)).toContain("missing_scope");
    const reader = await signIn((await createKey(acct, ["coupons:read"], "coupon reader")).secret);
    const readOnly = await dashboardFetch("/dashboard/coupons", { cookie: reader });
    expect(readOnly.status).toBe(200);
    expect(readOnly.html).not.toContain('id="create-coupon"');
    expect(readOnly.html).not.toContain("/delete");
  });
});
