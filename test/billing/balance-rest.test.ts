// Issue 37, the rest of the customer balance: an invoice voided after it took from the balance gives
// the credit back (once); the balance an invoice used shows on its PDF. Amounts hand-computed: a
// 100.00 plan, a 30.00 credit note to the balance; the renewal takes 30.00 and asks the card 70.00.
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, fetchWith, signup, BASE } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { CARDS, cardFields } from "../support/cards";
import { env } from "../support/env";
import { exports } from "cloudflare:workers";
import { extractText, getDocumentProxy } from "unpdf";
import { renewChunk } from "../../src/billing/renewals";
import { makeDue } from "../support/clock";
import { newId } from "../../src/domain/ids";
import { dashboardFetch, signIn, textOf } from "../dashboard/support";
import { advance, createClock } from "../support/clock";
import { readBillableRows, renewRows } from "../support/renewal-rows";
import { faultyD1, writesTo } from "../support/faults";


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

// Stripe's documented proration example: a 100.00 plan downgraded to 20.00 halfway through its
// period credits the unused half, 50.00, and charges the half left at the new price, 10.00. April
// has 30 days: the 16th at midnight is exactly halfway.
async function downgradedHalfway(behavior?: "always_invoice") {
  const acct = await signup("Downgrade Co");
  const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
  const user = await createUser(acct, { testClock: clock.id });
  const pro = await createPlan(acct, { name: "Pro", price: 100 });
  const lite = await createPlan(acct, { name: "Lite", price: 20 });
  const sub = await subscribed(acct, user.id, pro.id);
  await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
  const down = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: lite.id, ...(behavior ? { proration_behavior: behavior } : {}) } });
  expect(down.status, down.text).toBe(200);
  return { acct, clock, user, sub };
}

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}
const linesOf = (invoice: Record<string, any>) => (invoice.lines as Record<string, any>[]).map((l) => [l.type, l.amount]);
const notesOf = async (acct: Account, invoiceId: string) => (await call(`/credit-notes?invoice_id=${invoiceId}`, { key: acct.key })).body.data as Record<string, any>[];
const paymentsOf = async (acct: Account, subscriptionId: string) =>
  ((await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key })).body.data as Record<string, any>[]).reverse().map((p) => p.amount as number);

describe("a downgrade credit that exceeds the invoice is a credit note to the balance", () => {
  it("invoiced at once: −50.00 + 10.00 is a 40.00 credit note (order_change) to the balance, which the next two 20.00 invoices consume", async () => {
    const { acct, clock, user, sub } = await downgradedHalfway("always_invoice");
    const [, now] = await invoicesOf(acct, sub.id);
    expect(linesOf(now)).toEqual([
      ["proration", -5000],
      ["proration", 1000],
      ["credit", 4000],
    ]);
    expect(now).toMatchObject({ total: 0, amount_due: 0, status: "paid", payment_id: null });
    expect(now.lines[2].description).toBe("Credit to the customer's balance");
    const notes = await notesOf(acct, now.id);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ amount: 4000, tax: 0, reason: "order_change", refund_id: null, customer_balance_transaction: expect.stringMatching(/^cbtxn_/), status: "issued" });
    expect(notes[0].lines).toMatchObject([{ invoice_line_id: now.lines[2].id, amount: 4000 }]);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -4000, currency: "usd" });
    // Nothing is carried as an item any more: the balance holds the credit.
    expect(await env.DB.prepare("SELECT pending_items, pending_items_amount FROM subscriptions WHERE id = ?").bind(sub.id).first()).toEqual({ pending_items: 0, pending_items_amount: 0 });
    // The invoice can be credited no further.
    expect((await call("/credit-notes", { key: acct.key, body: { invoice_id: now.id, amount: 1, refund: false } })).status).toBe(400);
    const events = await call(`/api/events?type=credit_note.created`, { key: acct.key });
    expect(events.body.data.map((e: any) => e.data.id)).toEqual([notes[0].id]);

    // May and June: 20.00 each, taken from the 40.00 credit; July is charged.
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-07-01T00:01:00.000Z");
    const [, , may, june, july] = await invoicesOf(acct, sub.id);
    expect(linesOf(may)).toEqual([["subscription", 2000]]);
    expect(may).toMatchObject({ total: 2000, starting_balance: -4000, ending_balance: -2000, amount_due: 0, status: "paid" });
    expect(june).toMatchObject({ total: 2000, starting_balance: -2000, ending_balance: 0, amount_due: 0, status: "paid" });
    expect(july).toMatchObject({ total: 2000, starting_balance: 0, ending_balance: 0, amount_due: 2000, amount_paid: 2000 });
    expect(await paymentsOf(acct, sub.id)).toEqual([10000, 2000]);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
  });

  it("invoiced at once, while a credit in another currency lands on the balance: 409 subscription_changed (not a 500), nothing written; the retry carries the credit as an item", async () => {
    const acct = await signup("Downgrade race Co");
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const pro = await createPlan(acct, { name: "Pro", price: 100 });
    const lite = await createPlan(acct, { name: "Lite", price: 20 });
    const sub = await subscribed(acct, user.id, pro.id);
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    // Between the change's read of the user and its batch, a euro credit lands on the balance.
    let landed: Promise<unknown> | null = null;
    const DB = faultyD1(env.DB, {
      kind: "slow",
      delayMs: 300,
      when: (op) => {
        const hit = writesTo(op, "credit_notes");
        if (hit && !landed) landed = env.DB.prepare("UPDATE users SET balance = -100, currency = 'eur' WHERE id = ?").bind(user.id).run();
        return hit;
      },
    });
    const body = { plan_id: lite.id, proration_behavior: "always_invoice" };
    const raced = await fetchWith({ DB }, `/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", json: body });
    expect(landed).not.toBeNull();
    expectError(raced, 409, "invalid_request_error", "subscription_changed");
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM credit_notes WHERE account_id = ?").bind(acct.id).first("n")).toBe(0);
    expect((await invoicesOf(acct, sub.id)).length).toBe(1);
    // Read again and retried: the balance holds euros, so the dollar credit is carried as an item.
    const again = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body });
    expect(again.status, again.text).toBe(200);
    expect(await env.DB.prepare("SELECT pending_items_amount AS a FROM subscriptions WHERE id = ?").bind(sub.id).first("a")).toBe(-4000);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -100, currency: "eur" });
  });

  it("at the renewal: 20.00 − 50.00 + 10.00 issues a 20.00 credit note, once however often the renewal runs; June takes it", async () => {
    const { acct, clock, user, sub } = await downgradedHalfway();
    // The renewal of May run three times, two at once, from the same read.
    const rows = await readBillableRows(sub.id);
    const at = Date.parse("2026-05-01T00:01:00.000Z");
    await Promise.all([renewRows(rows, at), renewRows(rows, at)]);
    await renewRows(await readBillableRows(sub.id), at);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [, may] = await invoicesOf(acct, sub.id);
    expect(linesOf(may)).toEqual([
      ["subscription", 2000],
      ["proration", -5000],
      ["proration", 1000],
      ["credit", 2000],
    ]);
    expect(may).toMatchObject({ total: 0, amount_due: 0, status: "paid" });
    const notes = await notesOf(acct, may.id);
    expect(notes.map((n) => [n.amount, n.reason, n.refund_id])).toEqual([[2000, "order_change", null]]);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -2000 });
    expect(await countLedger(user.id)).toBe(1);
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const june = (await invoicesOf(acct, sub.id))[2];
    expect(linesOf(june)).toEqual([["subscription", 2000]]);
    expect(june).toMatchObject({ starting_balance: -2000, ending_balance: 0, amount_due: 0, status: "paid" });
    expect(await paymentsOf(acct, sub.id)).toEqual([10000]);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
  });
});

const countLedger = async (userId: string) =>
  ((await env.DB.prepare("SELECT COUNT(*) AS n FROM customer_balance_transactions WHERE user_id = ?").bind(userId).first()) as { n: number }).n;

describe("a credit carried as an item before credit notes", () => {
  it("is still taken by the next invoice; beyond it, the rest goes to the balance as a credit note", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const lite = await createPlan(acct, { name: "Lite", price: 20 });
    const sub = await subscribed(acct, user.id, lite.id);
    // A 30.00 credit carried from an earlier invoice, as the code before issue 37's balance wrote it.
    await env.DB.batch([
      env.DB.prepare(
        `INSERT INTO invoice_items (id, account_id, livemode, subscription_id, type, description, quantity, amount, currency, period_start, period_end, invoice_id, created_at)
         SELECT ?, account_id, livemode, id, 'credit', 'Credit carried from the invoice of 2026-04-01', 1, -3000, 'usd', '2026-04-01T00:00:00.000Z', '2026-05-01T00:00:00.000Z', NULL, '2026-04-01T00:00:00.000Z' FROM subscriptions WHERE id = ?`,
      ).bind(newId("invoiceItem", Date.now()), sub.id),
      env.DB.prepare("UPDATE subscriptions SET pending_items = pending_items + 1, pending_items_amount = pending_items_amount - 3000 WHERE id = ?").bind(sub.id),
    ]);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const may = (await invoicesOf(acct, sub.id))[1];
    expect(linesOf(may)).toEqual([
      ["subscription", 2000],
      ["credit", -3000],
      ["credit", 1000],
    ]);
    expect(may).toMatchObject({ total: 0, amount_due: 0, status: "paid" });
    expect((await notesOf(acct, may.id)).map((n) => n.amount)).toEqual([1000]);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -1000 });
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    expect((await invoicesOf(acct, sub.id))[2]).toMatchObject({ total: 2000, starting_balance: -1000, ending_balance: 0, amount_due: 1000, amount_paid: 1000 });
    expect(await paymentsOf(acct, sub.id)).toEqual([2000, 1000]);
  });
});

describe("GET /api/users/{id}/balance-transactions", () => {
  it("lists the ledger newest first, paginated; another account's user answers 404", async () => {
    const acct = await signup();
    const { user, invoice } = await declinedRenewalWithCredit(acct);
    expect((await call(`/invoices/${invoice.id}/void`, { key: acct.key, method: "POST" })).status).toBe(200);
    const res = await call(`/api/users/${user.id}/balance-transactions`, { key: acct.key });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ object: "list", has_more: false });
    expect(res.body.data.map((t: any) => [t.type, t.amount, t.ending_balance])).toEqual([
      ["unapplied_from_invoice", -3000, -3000],
      ["applied_to_invoice", 3000, 0],
      ["credit_note", -3000, -3000],
    ]);
    expect(res.body.data[0]).toMatchObject({ object: "customer_balance_transaction", livemode: false, user_id: user.id, currency: "usd", invoice_id: invoice.id, credit_note_id: null, id: expect.stringMatching(/^cbtxn_/) });
    expect(res.body.data[2].credit_note_id).toMatch(/^cn_/);
    const first = await call(`/api/users/${user.id}/balance-transactions?limit=2`, { key: acct.key });
    expect(first.body).toMatchObject({ has_more: true });
    expect(first.body.data.map((t: any) => t.id)).toEqual(res.body.data.slice(0, 2).map((t: any) => t.id));
    const next = await call(`/api/users/${user.id}/balance-transactions?limit=2&starting_after=${first.body.data[1].id}`, { key: acct.key });
    expect(next.body.data.map((t: any) => t.id)).toEqual([res.body.data[2].id]);
    const other = await signup("Other");
    expectError(await call(`/api/users/${user.id}/balance-transactions`, { key: other.key }), 404, "not_found_error");
  });
});

describe("a credit note on an invoice paid partly from the balance", () => {
  it("refunds at most what the card paid (70.00 of 100.00: 400 refund_exceeds_payment for 100.00, nothing written); the other 30.00 goes back to the balance as its own note", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { price: 100 });
    const user = await createUser(acct);
    const res = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa, "123") } });
    expect(res.status, res.text).toBe(201);
    const sub = res.body;
    const first = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect((await call("/credit-notes", { key: acct.key, body: { invoice_id: first.id, amount: 3000, refund: false } })).status).toBe(201);
    await makeDue(sub.id);
    await renewChunk(env, [sub.id]);
    const renewed = (await call(`/invoices?subscription_id=${sub.id}&status=paid`, { key: acct.key })).body.data.find((i: any) => i.id !== first.id);
    expect(renewed).toMatchObject({ total: 10000, starting_balance: -3000, ending_balance: 0, amount_due: 7000, status: "paid" });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
    const notesBefore = await env.DB.prepare("SELECT COUNT(*) AS n FROM credit_notes WHERE invoice_id = ?").bind(renewed.id).first<{ n: number }>();

    // The whole 100.00 to the card: the card paid 70.00.
    const tooMuch = await call("/credit-notes", { key: acct.key, body: { invoice_id: renewed.id, amount: 10000, refund: true } });
    expectError(tooMuch, 400, "invalid_request_error", "refund_exceeds_payment");
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM credit_notes WHERE invoice_id = ?").bind(renewed.id).first<{ n: number }>()).toEqual(notesBefore);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });

    // 70.00 to the card, then 30.00 to the balance: the invoice is credited in full, no more.
    const toCard = await call("/credit-notes", { key: acct.key, body: { invoice_id: renewed.id, amount: 7000, refund: true } });
    expect(toCard.status, toCard.text).toBe(201);
    expect(toCard.body.refund_id).toBeTruthy();
    const toBalance = await call("/credit-notes", { key: acct.key, body: { invoice_id: renewed.id, amount: 3000, refund: false } });
    expect(toBalance.status, toBalance.text).toBe(201);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -3000 });
    expectError(await call("/credit-notes", { key: acct.key, body: { invoice_id: renewed.id, amount: 1, refund: false } }), 400, "invalid_request_error", "credit_note_exceeds_invoice");
  });
});
