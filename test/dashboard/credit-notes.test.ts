// The dashboard shows credit notes (issue 37): a read-only list of the account's, each with its PDF,
// and an invoice's page lists its own.
import { describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { dashboardFetch, signIn, textOf } from "./support";

describe("credit notes in the dashboard", () => {
  it("lists the credit notes, links each PDF, and an invoice's page shows its own", async () => {
    const acct = await signup("Dashboard credit notes");
    const plan = await createPlan(acct, { price: 100 });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const invoice = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    const toBalance = await call("/credit-notes", { key: acct.key, body: { invoice_id: invoice.id, amount: 2500, reason: "order_change", refund: false } });
    expect(toBalance.status, toBalance.text).toBe(201);
    const refunded = await call("/credit-notes", { key: acct.key, body: { invoice_id: invoice.id, amount: 1000, refund: true } });
    expect(refunded.status, refunded.text).toBe(201);
    const cookie = await signIn(acct.key);

    const home = await dashboardFetch("/dashboard", { cookie });
    expect(home.html).toContain('href="/dashboard/credit-notes"');
    const list = await dashboardFetch("/dashboard/credit-notes", { cookie });
    expect(list.status).toBe(200);
    expect(list.html).toContain(`data-credit-note="${toBalance.body.id}"`);
    expect(list.html).toContain(`data-credit-note="${refunded.body.id}"`);
    const text = textOf(list.html);
    expect(text).toContain(toBalance.body.number);
    expect(text).toContain("25.00");
    expect(text).toContain("customer balance");
    expect(text).toContain("order_change");

    const pdf = await dashboardFetch(`/dashboard/credit-notes/${toBalance.body.id}/pdf`, { cookie });
    expect(pdf.status).toBe(200);

    const page = await dashboardFetch(`/dashboard/invoices/${invoice.id}`, { cookie });
    expect(page.status).toBe(200);
    expect(page.html).toContain(`data-credit-notes="${invoice.id}"`);
    expect(page.html).toContain(`data-credit-note="${refunded.body.id}"`);
    expect(textOf(page.html)).toContain(refunded.body.number);
  });
});
