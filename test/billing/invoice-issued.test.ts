// What an issued invoice says never changes (issue 33 item 10): its buyer and seller are copied
// when it is finalized, and its JSON, its PDF and the dashboard show that copy after a rename; a
// clocked invoice is dated by its test clock, not by the wall clock. Migration 0023 backfills the
// copy for invoices finalized before it.
import { applyD1Migrations } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { extractText, getDocumentProxy } from "unpdf";
import { describe, expect, it } from "vitest";
import { env } from "../support/env";
import { BASE, call, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { advance, createClock } from "../support/clock";
import { card, CARDS } from "../support/cards";

async function pdfText(key: string, invoiceId: string) {
  const res = await exports.default.fetch(`${BASE}/invoices/${invoiceId}/pdf`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  const doc = await getDocumentProxy(new Uint8Array(await res.arrayBuffer()));
  return (await extractText(doc, { mergePages: true })).text.replace(/\s+/g, " ");
}

describe("an issued invoice", () => {
  it("keeps the buyer and the seller it was finalized with: a rename changes neither its JSON nor its PDF", { timeout: 30_000 }, async () => {
    const acct = await signup("Northwind Traders");
    const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const [issued] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(issued).toMatchObject({ customer_name: "Ada Lovelace", customer_email: "ada@example.com", account_name: "Northwind Traders", account_email: expect.stringContaining("@") });
    const sellerEmail = issued.account_email;

    // The user and the account are renamed after the invoice was issued.
    const renamed = await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "countess@example.com" } });
    expect(renamed.status).toBe(200);
    await env.DB.prepare("UPDATE accounts SET name = 'Southwind Ltd', email = 'new@southwind.example' WHERE id = ?").bind(acct.id).run();

    const read = (await call(`/invoices/${issued.id}`, { key: acct.key })).body;
    expect(read).toMatchObject({ customer_name: "Ada Lovelace", customer_email: "ada@example.com", account_name: "Northwind Traders", account_email: sellerEmail });
    const listed = (await call(`/invoices?user_id=${user.id}`, { key: acct.key })).body.data[0];
    expect(listed.customer_name).toBe("Ada Lovelace");
    const text = await pdfText(acct.key, issued.id);
    expect(text).toContain("Northwind Traders");
    expect(text).toContain("Ada Lovelace");
    expect(text).toContain("ada@example.com");
    expect(text).not.toContain("Southwind");
    expect(text).not.toContain("Ada King");
    expect(text).not.toContain("countess@example.com");

    // The next invoice is finalized with the new names.
    const second = await subscribed(acct, user.id, plan.id);
    const [next] = (await call(`/invoices?subscription_id=${second.id}`, { key: acct.key })).body.data;
    expect(next).toMatchObject({ customer_name: "Ada King", customer_email: "countess@example.com", account_name: "Southwind Ltd", account_email: "new@southwind.example" });
  });

  it("on a test clock is dated by the clock: created, finalized, paid and the PDF's dates", { timeout: 30_000 }, async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2031-03-10T09:00:00Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const [first] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(first).toMatchObject({ created_at: "2031-03-10T09:00:00.000Z", finalized_at: "2031-03-10T09:00:00.000Z", paid_at: "2031-03-10T09:00:00.000Z" });
    const text = await pdfText(acct.key, first.id);
    expect(text).toContain("Date of issue 2031-03-10");
    expect(text).toContain("Paid 2031-03-10");

    // A renewal run by an advance is dated when it fell due, not when the clock stopped.
    await advance(acct, clock.id, "2031-04-20T00:00:00Z");
    const [renewal] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(renewal.id).not.toBe(first.id);
    expect(renewal).toMatchObject({ created_at: "2031-04-10T09:00:00.000Z", finalized_at: "2031-04-10T09:00:00.000Z", paid_at: "2031-04-10T09:00:00.000Z" });
    expect(await pdfText(acct.key, renewal.id)).toContain("Date of issue 2031-04-10");
  });
});

describe("a clocked change invoiced at once (always_invoice)", () => {
  it("is created, finalized and paid at the clock's time", { timeout: 30_000 }, async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2031-03-10T09:00:00Z");
    const user = await createUser(acct, { testClock: clock.id });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const sub = await subscribed(acct, user.id, basic.id);
    await advance(acct, clock.id, "2031-03-25T12:00:00Z");
    const changed = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: pro.id, proration_behavior: "always_invoice" } });
    expect(changed.status, changed.text).toBe(200);
    const [now] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(now.lines.every((l: { proration: boolean }) => l.proration)).toBe(true);
    expect(now).toMatchObject({ status: "paid", created_at: "2031-03-25T12:00:00.000Z", finalized_at: "2031-03-25T12:00:00.000Z", paid_at: "2031-03-25T12:00:00.000Z" });
    expect(await pdfText(acct.key, now.id)).toContain("Date of issue 2031-03-25");
  });
});

describe("a clocked past-due invoice paid by a card update", () => {
  it("is paid at the clock's time", { timeout: 30_000 }, async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2028-03-02T00:00:00.000Z");
    const [due] = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data;
    expect(due.created_at).toBe("2028-02-29T12:00:00.000Z");
    const updated = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.visa) });
    expect(updated.body.status, updated.text).toBe("active");
    const paid = (await call(`/invoices/${due.id}`, { key: acct.key })).body;
    expect(paid).toMatchObject({ status: "paid", paid_at: "2028-03-02T00:00:00.000Z" });
    expect(await pdfText(acct.key, due.id)).toContain("Paid 2028-03-02");
  });
});

describe("migration 0023_invoice_parties", () => {
  type Migrations = Parameters<typeof applyD1Migrations>[1];
  const scratch = () => (env as unknown as { MIGRATION_SCRATCH: D1Database }).MIGRATION_SCRATCH;
  const migrations = () => (env as unknown as { TEST_MIGRATIONS: Migrations }).TEST_MIGRATIONS;

  it("copies the current names onto invoices finalized before it, and leaves drafts live", { timeout: 30_000 }, async () => {
    const db = scratch();
    await applyD1Migrations(db, migrations().filter((m) => m.name < "0023"));
    await db.batch([
      db.prepare("INSERT INTO accounts (id, name, email, created_at) VALUES ('acct_m20', 'Old Books', 'books@example.com', '2026-01-01T00:00:00.000Z')"),
      db.prepare("INSERT INTO users (id, account_id, livemode, name, email, created_at, updated_at) VALUES ('usr_m20', 'acct_m20', 0, 'Grace Hopper', 'grace@example.com', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"),
      ...[
        ["in_m20_paid", 1, "paid", "2026-01-02T00:00:00.000Z"],
        ["in_m20_draft", null, "draft", null],
      ].map(([id, seq, status, finalized]) =>
        db
          .prepare(
            `INSERT INTO invoices (id, account_id, livemode, number_sequence, status, user_id, currency, period_start, period_end, subtotal, discount, total, amount_paid, amount_due, created_at, finalized_at, updated_at)
             VALUES (?, 'acct_m20', 0, ?, ?, 'usr_m20', 'usd', '2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z', 100, 0, 100, 0, 100, '2026-01-01T00:00:00.000Z', ?, '2026-01-01T00:00:00.000Z')`,
          )
          .bind(id, seq, status, finalized),
      ),
    ]);
    await applyD1Migrations(db, migrations().filter((m) => m.name.startsWith("0023")));
    const { results } = await db.prepare("SELECT id, customer_name, customer_email, account_name, account_email FROM invoices ORDER BY id").all();
    expect(results).toEqual([
      { id: "in_m20_draft", customer_name: null, customer_email: null, account_name: null, account_email: null },
      { id: "in_m20_paid", customer_name: "Grace Hopper", customer_email: "grace@example.com", account_name: "Old Books", account_email: "books@example.com" },
    ]);
  });
});
