// The dashboard's Invoices page: the list (status filter), an invoice's lines and totals, its PDF
// (the API's own, passed through), and pay now / void for an open invoice through the API's routes;
// a paid invoice offers neither, and the API's refusal is shown when a form is sent anyway.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createKey, createPlan, createUser, openInvoice, subscribed } from "../support/fixtures";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;
let paid: Record<string, any>;
/** A subscription whose card succeeds (its token pays the open invoices made below). */
let paying: string;

beforeAll(async () => {
  acct = await signup("Dashboard invoices");
  const user = await createUser(acct, { name: "Ivy Invoice", email: "ivy@example.com" });
  const plan = await createPlan(acct, { name: "Team", price: 30 });
  const sub = await subscribed(acct, user.id, plan.id);
  paying = sub.id;
  paid = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
  cookie = await signIn(acct.key);
}, 30_000);

describe("the Invoices page", () => {
  it("lists invoices with the customer's name, filters by status, and shows one with its lines and totals", async () => {
    const home = await dashboardFetch("/dashboard", { cookie });
    expect(home.html).toContain('href="/dashboard/invoices"');
    const list = await dashboardFetch("/dashboard/invoices", { cookie });
    expect(list.status).toBe(200);
    expect(list.html).toContain(`data-invoice="${paid.id}"`);
    expect(textOf(list.html)).toContain("Ivy Invoice");
    expect(textOf(list.html)).toContain(paid.number);
    const open = await dashboardFetch("/dashboard/invoices?status=open", { cookie });
    expect(open.html).not.toContain(`data-invoice="${paid.id}"`);
    const bad = await dashboardFetch("/dashboard/invoices?status=bogus", { cookie });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("parameter_invalid");

    const page = await dashboardFetch(`/dashboard/invoices/${paid.id}`, { cookie });
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain(`Invoice ${paid.number}`);
    expect(text).toContain(paid.lines[0].description);
    expect(page.html).toMatch(/data-total="total">[^]*?30\.00/);
    // Paid: neither pay nor void is offered.
    expect(page.html).not.toContain(`/dashboard/invoices/${paid.id}/pay`);
    expect(page.html).not.toContain(`/dashboard/invoices/${paid.id}/void`);
  });

  it("opens the invoice's PDF, as the API made it", { timeout: 30_000 }, async () => {
    const page = await dashboardFetch(`/dashboard/invoices/${paid.id}`, { cookie });
    expect(page.html).toContain(`href="/dashboard/invoices/${paid.id}/pdf"`);
    const pdf = await dashboardFetch(`/dashboard/invoices/${paid.id}/pdf`, { cookie });
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("content-type")).toBe("application/pdf");
    expect(pdf.headers.get("content-disposition")).toBe(`inline; filename="${paid.number}.pdf"`);
    expect(pdf.html.startsWith("%PDF-")).toBe(true);
    const missing = await dashboardFetch("/dashboard/invoices/in_01jd2x4k5m6n7p8q9r0s1t2v3w/pdf", { cookie });
    expect(missing.status).toBe(404);
  });

  it("pays an open invoice now, and voids another; both through the API", async () => {
    const user = await createUser(acct, { name: "Otto Open", email: "otto@example.com" });
    const plan = await createPlan(acct, { name: "Dunned" });
    const toPay = await openInvoice(acct, user.id, plan.id, paying);
    const toVoid = await openInvoice(acct, user.id, plan.id, paying);
    const payPage = `/dashboard/invoices/${toPay}`;
    const paidNow = await submit(cookie, payPage, `${payPage}/pay`);
    expect(paidNow.status, paidNow.html.slice(0, 400)).toBe(303);
    expect(paidNow.location).toMatch(/done=invoice_paid/);
    expect((await call(`/invoices/${toPay}`, { key: acct.key })).body.status).toBe("paid");

    const voidPage = `/dashboard/invoices/${toVoid}`;
    const loaded = await dashboardFetch(voidPage, { cookie });
    const form = formOf(loaded.html, `${voidPage}/void`);
    const voided = await dashboardFetch(`${voidPage}/void`, { cookie, form });
    expect(voided.status).toBe(303);
    expect((await call(`/invoices/${toVoid}`, { key: acct.key })).body.status).toBe("void");
    // The same form sent again replays the API's answer (one Idempotency-Key per drawn form).
    expect((await dashboardFetch(`${voidPage}/void`, { cookie, form })).status).toBe(303);
    // A new form on the void invoice is refused by the API, and the page says why.
    const payForm = formOf(loaded.html, `${voidPage}/pay`);
    const refused = await dashboardFetch(`${voidPage}/pay`, { cookie, form: { ...payForm, idempotency_key: `dash_${"b".repeat(32)}` } });
    expect(refused.status).toBe(409);
    expect(textOf(refused.html)).toContain("invoice_not_open");
  });

  it("shows the customer the invoice was issued to, not the user renamed since", async () => {
    const renamed = await call(`/api/users/${paid.user_id}`, { key: acct.key, method: "PUT", body: { name: "Ivy Renamed", email: "renamed@example.com" } });
    expect(renamed.status).toBe(200);
    for (const path of ["/dashboard/invoices", `/dashboard/invoices/${paid.id}`]) {
      const text = textOf((await dashboardFetch(path, { cookie })).html);
      expect(text, path).toContain("Ivy Invoice");
      expect(text, path).toContain("ivy@example.com");
      expect(text, path).not.toContain("Ivy Renamed");
    }
  });

  it("a key without invoices:read has no Invoices in its menu and is refused the page", async () => {
    const restricted = await createKey(acct, ["users:read"], "no invoices");
    const other = await signIn(restricted.secret);
    expect((await dashboardFetch("/dashboard", { cookie: other })).html).not.toContain('href="/dashboard/invoices"');
    const page = await dashboardFetch("/dashboard/invoices", { cookie: other });
    expect(page.status).toBe(403);
    expect(textOf(page.html)).toContain("missing_scope");
  });
});
