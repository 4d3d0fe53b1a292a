// Issue 37, the rest of the customer balance: an invoice voided after it took from the balance gives
// the credit back (once); the balance an invoice used shows on its PDF. Amounts hand-computed: a
// 100.00 plan, a 30.00 credit note to the balance; the renewal takes 30.00 and asks the card 70.00.
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup, BASE } from "../support/http";
import { createPlan, createUser } from "../support/fixtures";
import { CARDS, cardFields } from "../support/cards";
import { env } from "../support/env";
import { exports } from "cloudflare:workers";
import { extractText, getDocumentProxy } from "unpdf";
import { renewChunk } from "../../src/billing/renewals";
import { makeDue } from "../support/clock";
import { dashboardFetch, signIn, textOf } from "../dashboard/support";

async function userOf(acct: Account, id: string) {
  const res = await call(`/api/users/${id}`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body as Record<string, any>;
}

/** A 100.00 subscription whose card declines its renewal, with a 30.00 credit on the balance; renewed: its open invoice. */
async function declinedRenewalWithCredit(acct: Account) {
  const plan = await createPlan(acct, { price: 100 });
  const user = await createUser(acct);
  const res = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.declineAfterFirst, "123") } });
  expect(res.status, res.text).toBe(201);
  const sub = res.body;
  const first = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
  expect(first.status).toBe("paid");
  const note = await call("/credit-notes", { key: acct.key, body: { invoice_id: first.id, amount: 3000, refund: false } });
  expect(note.status, note.text).toBe(201);
  expect(await userOf(acct, user.id)).toMatchObject({ balance: -3000 });
  await makeDue(sub.id);
  await renewChunk(env, [sub.id]);
  const open = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data;
  expect(open).toHaveLength(1);
  return { user, sub, invoice: open[0] as Record<string, any> };
}

describe("voiding an invoice that took from the balance", () => {
  it("gives the credit back, once: 30.00 taken by a declined 100.00 renewal returns when it is voided", async () => {
    const acct = await signup();
    const { user, invoice } = await declinedRenewalWithCredit(acct);
    expect(invoice).toMatchObject({ total: 10000, starting_balance: -3000, ending_balance: 0, amount_due: 7000 });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
    const voided = await call(`/invoices/${invoice.id}/void`, { key: acct.key, method: "POST" });
    expect(voided.status, voided.text).toBe(200);
    expect(voided.body.status).toBe("void");
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -3000, currency: "usd" });
    // A second void is refused and gives nothing back again.
    expectError(await call(`/invoices/${invoice.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error");
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -3000 });
    const ledger = await env.DB.prepare("SELECT type, amount, ending_balance, invoice_id FROM customer_balance_transactions WHERE user_id = ? ORDER BY id").bind(user.id).all();
    expect(ledger.results.map((r: any) => [r.type, r.amount, r.ending_balance])).toEqual([
      ["credit_note", -3000, -3000],
      ["applied_to_invoice", 3000, 0],
      ["unapplied_from_invoice", -3000, -3000],
    ]);
    expect(ledger.results[2]).toMatchObject({ invoice_id: invoice.id });
  });
});

describe("the balance an invoice used is shown", () => {
  it("on its PDF (Applied balance -30.00, Amount due 70.00), its hosted page and the dashboard's page", async () => {
    const acct = await signup("Balance Shown");
    const { invoice } = await declinedRenewalWithCredit(acct);
    const res = await exports.default.fetch(`${BASE}/invoices/${invoice.id}/pdf`, { headers: { authorization: `Bearer ${acct.key}` } });
    expect(res.status).toBe(200);
    const doc = await getDocumentProxy(new Uint8Array(await res.arrayBuffer()));
    const text = (await extractText(doc, { mergePages: true })).text.replace(/\s+/g, " ");
    expect(text).toContain("Total 100.00");
    expect(text).toContain("Applied balance -30.00");
    expect(text).toContain("Amount due 70.00");

    const hosted = await exports.default.fetch(invoice.hosted_invoice_url);
    expect(hosted.status).toBe(200);
    const html = await hosted.text();
    for (const part of ['<tr data-balance="applied"><td>Applied balance</td><td class="num">−30.00 USD</td>', '-30.00 USD', 'data-balance="ending"', '<th>Amount due</th><th class="num">70.00 USD</th>']) expect(html, part).toContain(part);

    const cookie = await signIn(acct.key);
    const page = await dashboardFetch(`/dashboard/invoices/${invoice.id}`, { cookie });
    expect(page.status).toBe(200);
    const shown = textOf(page.html);
    for (const part of ["Applied balance", "Starting balance", "Ending balance"]) expect(shown, part).toContain(part);
    expect(page.html).toContain('data-total="applied balance"');
  });

  it("not when the invoice found no balance", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { price: 100 });
    const user = await createUser(acct);
    const res = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields() } });
    const invoice = (await call(`/invoices?subscription_id=${res.body.id}`, { key: acct.key })).body.data[0];
    const pdf = await exports.default.fetch(`${BASE}/invoices/${invoice.id}/pdf`, { headers: { authorization: `Bearer ${acct.key}` } });
    const text = (await extractText(await getDocumentProxy(new Uint8Array(await pdf.arrayBuffer())), { mergePages: true })).text;
    expect(text).not.toContain("Applied balance");
    const html = await (await exports.default.fetch(invoice.hosted_invoice_url)).text();
    expect(html).not.toContain("data-balance");
  });
});
