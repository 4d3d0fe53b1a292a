// The hosted invoice page (src/pages/invoice.tsx) and hosted_invoice_url: an open or paid invoice
// has one (PUBLIC_URL, its id, an unguessable secret); the page shows the invoice as it was issued
// and its PDF with no API key; a wrong secret is a 404 like an unknown invoice; a void invoice's
// page says so (410). An off-session renewal the bank refuses for want of 3-D Secure keeps its
// invoice open and emits invoice.payment_action_required with that URL, and dunning goes on.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribe, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { eventsOf } from "../support/db";

const BASE = "http://127.0.0.1:8787";
const URL_SHAPE = /^http:\/\/127\.0\.0\.1:8787\/pay\/invoices\/(in_[0-9a-z]+)\/([0-9A-Za-z]{40})$/;
const pathOf = (url: string) => url.slice(BASE.length);

async function paidInvoice(name = "Hosted Co") {
  const acct = await signup(name);
  const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  const plan = await createPlan(acct, { price: 30, name: "Pro" });
  const sub = await subscribed(acct, user.id, plan.id);
  const list = await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key });
  return { acct, invoice: list.body.data[0] as Record<string, any> };
}

describe("hosted_invoice_url", () => {
  it("is on a paid invoice, under PUBLIC_URL, with its own id and a 40-character secret, in answers and events alike", async () => {
    const { acct, invoice } = await paidInvoice();
    expect(invoice.status).toBe("paid");
    const match = URL_SHAPE.exec(invoice.hosted_invoice_url);
    expect(match, invoice.hosted_invoice_url).not.toBeNull();
    expect(match![1]).toBe(invoice.id);
    expect((await call(`/invoices/${invoice.id}`, { key: acct.key })).body.hosted_invoice_url).toBe(invoice.hosted_invoice_url);
    const events = (await eventsOf(acct.id)).filter((e) => e.body.data?.id === invoice.id);
    const byType = Object.fromEntries(events.map((e) => [e.type, e.body.data.hosted_invoice_url]));
    // The draft has none; the finalized and paid invoice has the page.
    expect(byType).toEqual({ "invoice.created": null, "invoice.finalized": invoice.hosted_invoice_url, "invoice.paid": invoice.hosted_invoice_url });
  });

  it("differs from invoice to invoice", async () => {
    const a = await paidInvoice("Hosted A");
    const b = await paidInvoice("Hosted B");
    expect(URL_SHAPE.exec(a.invoice.hosted_invoice_url)![2]).not.toBe(URL_SHAPE.exec(b.invoice.hosted_invoice_url)![2]);
  });
});

describe("the hosted invoice page", () => {
  it("shows the invoice as issued, with no key and no secret beyond its own URL, framed by no one", async () => {
    const { acct, invoice } = await paidInvoice();
    const page = await call(pathOf(invoice.hosted_invoice_url));
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.text).toContain(`Invoice ${invoice.number}`);
    expect(page.text).toContain("30.00 USD paid");
    expect(page.text).toContain("Ada Lovelace");
    expect(page.text).toContain("Hosted Co");
    expect(page.text).toContain("1 × Pro");
    expect(page.text).not.toContain(acct.key);
    expect(page.text).not.toMatch(/sk_(test|live)_|whsec_/);
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("cache-control")).toBe("no-store");
  });

  it("serves the invoice's PDF behind the same secret", async () => {
    const { invoice } = await paidInvoice();
    const pdf = await call(`${pathOf(invoice.hosted_invoice_url)}/pdf`);
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("content-type")).toBe("application/pdf");
    expect(pdf.text.startsWith("%PDF-")).toBe(true);
    expect(pdf.headers.get("content-disposition")).toBe(`inline; filename="${invoice.number}.pdf"`);
  });

  it("answers 404 for a wrong secret, another invoice's secret, an unknown invoice or a malformed one", async () => {
    const { invoice } = await paidInvoice();
    const other = (await paidInvoice("Hosted Other")).invoice;
    const [, id, secret] = URL_SHAPE.exec(invoice.hosted_invoice_url)!;
    const [, otherId, otherSecret] = URL_SHAPE.exec(other.hosted_invoice_url)!;
    const wrong = `${secret.slice(0, 39)}${secret.endsWith("a") ? "b" : "a"}`;
    for (const path of [
      `/pay/invoices/${id}/${wrong}`,
      `/pay/invoices/${id}/${otherSecret}`,
      `/pay/invoices/${otherId}/${secret}`,
      `/pay/invoices/in_00000000000000000000000000/${secret}`,
      `/pay/invoices/${id}/short`,
      `/pay/invoices/usr_nothing/${secret}`,
      `/pay/invoices/${id}/${wrong}/pdf`,
    ]) {
      const res = await call(path);
      expect(res.status, path).toBe(404);
      expect(res.text, path).toContain("Invoice not found");
      expect(res.text, path).not.toContain(invoice.number);
    }
  });

  it("never shows the copy a moved account left on its old shard (404 there, as the page of an unknown invoice)", async () => {
    const { acct, invoice } = await paidInvoice("Hosted Moved");
    const path = pathOf(invoice.hosted_invoice_url);
    expect((await call(path)).status).toBe(200);
    // The account's row on this shard says it lives elsewhere now (a move's switch, before its
    // cleanup deleted what it left here): this shard's copy of the invoice is no longer the invoice.
    await env.DB.prepare("UPDATE accounts SET moved_to = 1 WHERE id = ?").bind(acct.id).run();
    try {
      for (const p of [path, `${path}/pdf`]) {
        const res = await call(p);
        expect(res.status, p).toBe(404);
        expect(res.text, p).not.toContain(invoice.number);
      }
    } finally {
      await env.DB.prepare("UPDATE accounts SET moved_to = NULL WHERE id = ?").bind(acct.id).run();
    }
  });

  it("says a void invoice is void (410), and the API shows no URL for it", async () => {
    const acct = await signup("Hosted Void");
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    // A declined first charge: no subscription, its invoice voided there and then.
    const declined = await subscribe(acct, user.id, plan.id, CARDS.declined);
    expect(declined.status).toBe(402);
    const [invoice] = (await call(`/invoices?user_id=${user.id}`, { key: acct.key })).body.data;
    expect(invoice.status).toBe("void");
    expect(invoice.hosted_invoice_url).toBeNull();
    const stored = await env.DB.prepare("SELECT hosted_invoice_url AS url FROM invoices WHERE id = ?").bind(invoice.id).first<{ url: string }>();
    const page = await call(pathOf(stored!.url));
    expect(page.status).toBe(410);
    expect(page.text).toContain("voided");
    expect(page.text).not.toContain("Download PDF");
    expect((await call(`${pathOf(stored!.url)}/pdf`)).status).toBe(410);
  });
});

describe("an off-session renewal that asks for 3-D Secure", () => {
  const START = "2026-03-01T09:00:00.000Z";
  it("leaves the invoice open with its hosted page, emits invoice.payment_action_required, and dunning goes on", async () => {
    const acct = await signup("Hosted 3DS");
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { price: 30 });
    // A trial saves the card (Stripe's 4000 0027 6000 3184: 3-D Secure on every charge) without charging it.
    const sub = await subscribed(acct, user.id, plan.id, "4000002760003184", { trial_period_days: 7 });
    await advance(acct, clock.id, "2026-03-08T09:01:00.000Z");
    const after = await getSubscription(acct, sub.id);
    expect(after.status).toBe("past_due");
    const [invoice] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(invoice.status).toBe("open");
    expect(invoice.hosted_invoice_url).toMatch(URL_SHAPE);
    const payment = (await call(`/payments/${invoice.payment_id}`, { key: acct.key })).body;
    expect(payment).toMatchObject({ status: "failed", failure_code: "authentication_required" });
    const events = (await eventsOf(acct.id)).filter((e) => e.body.data?.id === invoice.id).map((e) => e.type);
    expect(events).toEqual(["invoice.created", "invoice.finalized", "invoice.payment_failed", "invoice.payment_action_required"]);
    const [required] = await eventsOf(acct.id, "invoice.payment_action_required");
    expect(required.body.data).toMatchObject({ id: invoice.id, status: "open", hosted_invoice_url: invoice.hosted_invoice_url, amount_due: 3000 });
    // The page shows what is due.
    const page = await call(pathOf(invoice.hosted_invoice_url));
    expect(page.status).toBe(200);
    expect(page.text).toContain("30.00 USD due");
    // Dunning goes on: the next attempt fails the same way and says so again, on the same invoice.
    await advance(acct, clock.id, "2026-03-10T09:02:00.000Z");
    expect((await eventsOf(acct.id, "invoice.payment_action_required")).length).toBe(2);
    expect((await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data).toHaveLength(1);
  });

  it("a decline for another reason emits no invoice.payment_action_required", async () => {
    const acct = await signup("Hosted decline");
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { price: 30 });
    await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst, { trial_period_days: 7 });
    await advance(acct, clock.id, "2026-03-08T09:01:00.000Z");
    expect(await eventsOf(acct.id, "invoice.payment_failed")).toHaveLength(1);
    expect(await eventsOf(acct.id, "invoice.payment_action_required")).toHaveLength(0);
  });
});
