// Credit notes (issue 37): POST /credit-notes to the card (a refund) or to the user's balance, their
// own gap-free numbers, the tax in them, never more than the invoice in all (however many at once,
// whatever retries), a refund of an invoiced payment issuing one, void, and the PDF. Amounts are
// hand-computed beside Stripe's documented example: a 100.00 line with 20% exclusive tax (a 120.00
// invoice); a 60.00 credit note of the line is 50.00 + 10.00 tax.
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, fetchWith, signup } from "../support/http";
import { createPlan, createUser, openInvoice, subscribed } from "../support/fixtures";
import { countRows } from "../support/db";
import { env } from "../support/env";
import { faultyD1, writesTo } from "../support/faults";
import { waitFor } from "../support/wait";
import { exports } from "cloudflare:workers";
import { extractText, getDocumentProxy } from "unpdf";
import { BASE } from "../support/http";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { renewChunk } from "../../src/billing/renewals";
import { makeDue } from "../support/clock";
import { CARDS } from "../support/cards";

async function createRate(acct: Account, body: Record<string, unknown>) {
  const res = await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", inclusive: false, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

/** A paid 120.00 invoice: one 100.00 line with 20% exclusive VAT (or the plan given). */
async function paidInvoice(acct: Account, plan?: Record<string, unknown>) {
  const vat = await createRate(acct, { percentage: "20" });
  const made = await createPlan(acct, plan ?? { price: 100, default_tax_rates: [vat.id] });
  const user = await createUser(acct);
  const sub = await subscribed(acct, user.id, made.id);
  const list = await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key });
  const invoice = list.body.data[0] as Record<string, any>;
  expect(invoice.status).toBe("paid");
  return { vat, user, sub, invoice };
}

const creditNote = (acct: Account, body: Record<string, unknown>, idempotencyKey?: string) => call("/credit-notes", { key: acct.key, body, idempotencyKey });

async function userOf(acct: Account, id: string) {
  const res = await call(`/api/users/${id}`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body as Record<string, any>;
}

describe("POST /credit-notes", () => {
  it("Stripe's example: 60.00 of a 100.00 line at 20% exclusive is 50.00 + 10.00 tax, credited to the balance; numbers are gap-free in their own sequence", async () => {
    const acct = await signup();
    const { vat, user, invoice } = await paidInvoice(acct);
    expect(invoice).toMatchObject({ subtotal: 10000, tax: 2000, total: 12000 });
    const line = invoice.lines[0];
    const res = await creditNote(acct, { invoice_id: invoice.id, lines: [{ invoice_line_id: line.id, amount: 6000 }], reason: "order_change", refund: false, memo: "Two seats removed" });
    expect(res.status, res.text).toBe(201);
    const prefix = acct.id.slice(-8).toUpperCase();
    expect(res.body).toEqual({
      id: expect.stringMatching(/^cn_[0-9a-z]{26}$/),
      object: "credit_note",
      livemode: false,
      number: `${prefix}-CN-0001`,
      invoice_id: invoice.id,
      user_id: user.id,
      currency: "usd",
      amount: 6000,
      subtotal: 5000,
      tax: 1000,
      tax_amounts: [{ tax_rate: vat.id, amount: 1000, inclusive: false }],
      lines: [{ id: expect.stringMatching(/^cnli_/), invoice_line_id: line.id, description: line.description, amount: 6000, tax_amounts: [{ tax_rate: vat.id, amount: 1000, inclusive: false }] }],
      reason: "order_change",
      memo: "Two seats removed",
      refund_id: null,
      customer_balance_transaction: expect.stringMatching(/^cbtxn_/),
      status: "issued",
      created_at: expect.any(String),
      voided_at: null,
    });
    // The balance holds the credit (negative, as Stripe's); the invoice never changes.
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -6000, currency: "usd" });
    expect((await call(`/invoices/${invoice.id}`, { key: acct.key })).body).toEqual(invoice);

    // The rest (60.00 = 50.00 + 10.00): the line's tax is credited exactly; then nothing is left.
    const rest = await creditNote(acct, { invoice_id: invoice.id, amount: 6000, refund: false });
    expect(rest.status, rest.text).toBe(201);
    expect(rest.body).toMatchObject({ number: `${prefix}-CN-0002`, amount: 6000, tax: 1000, subtotal: 5000 });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -12000 });
    const over = await creditNote(acct, { invoice_id: invoice.id, amount: 1, refund: false });
    expect(expectError(over, 400, "invalid_request_error", "credit_note_exceeds_invoice").param).toBe("amount");

    // Listed newest first, by invoice; read by id; the event carries the note as the API answers it.
    const list = await call(`/credit-notes?invoice_id=${invoice.id}`, { key: acct.key });
    expect(list.body.data.map((n: any) => n.id)).toEqual([rest.body.id, res.body.id]);
    expect((await call(`/credit-notes/${res.body.id}`, { key: acct.key })).body).toEqual(res.body);
    const events = await call(`/api/events?type=credit_note.created`, { key: acct.key });
    expect(events.body.data.map((e: any) => e.data)).toEqual([rest.body, res.body]);
  });

  it("19% inclusive: a credit of 5.95 of an 11.90 line carries 0.95 of tax (1.90 × 5.95 / 11.90)", async () => {
    const acct = await signup();
    const de = await createRate(acct, { display_name: "MwSt", percentage: "19", inclusive: true });
    const { invoice } = await paidInvoice(acct, { price: 11.9, currency: "eur", default_tax_rates: [de.id] });
    expect(invoice).toMatchObject({ total: 1190, tax: 190 });
    const res = await creditNote(acct, { invoice_id: invoice.id, amount: 595, refund: false });
    expect(res.status, res.text).toBe(201);
    // Inclusive tax is inside the amount: the subtotal is the amount.
    expect(res.body).toMatchObject({ amount: 595, tax: 95, subtotal: 595, tax_amounts: [{ tax_rate: de.id, amount: 95, inclusive: true }] });
  });

  it("refund: true refunds the invoice's payment for the note's amount: one refund, named on the note", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct);
    const res = await creditNote(acct, { invoice_id: invoice.id, amount: 3000, reason: "duplicate", refund: true });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ amount: 3000, tax: 500, refund_id: expect.stringMatching(/^re_/), customer_balance_transaction: null });
    const refund = await call(`/refunds/${res.body.refund_id}`, { key: acct.key });
    expect(refund.body).toMatchObject({ payment_id: invoice.payment_id, amount: 3000, reason: "duplicate" });
    await waitFor(async () => expect((await call(`/refunds/${res.body.refund_id}`, { key: acct.key })).body.status).toBe("succeeded"));
    expect((await call(`/payments/${invoice.payment_id}`, { key: acct.key })).body).toMatchObject({ status: "partially_refunded", amount_refunded: 3000 });
    expect((await userOf(acct, invoice.user_id)).balance).toBe(0);
  });

  it("refuses bad input with a clear 4xx and writes nothing", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct);
    const other = await signup("Other");
    const { invoice: foreign } = await paidInvoice(other);
    const line = invoice.lines[0].id;
    const cases: [Record<string, unknown>, number, string, string][] = [
      [{ invoice_id: invoice.id, amount: 12001, refund: false }, 400, "credit_note_exceeds_invoice", "amount"],
      [{ invoice_id: invoice.id, lines: [{ invoice_line_id: line, amount: 12001 }], refund: false }, 400, "credit_note_exceeds_invoice", "lines.0.amount"],
      [{ invoice_id: invoice.id, amount: 0, refund: false }, 400, "parameter_invalid", "amount"],
      [{ invoice_id: invoice.id, amount: -100, refund: false }, 400, "parameter_invalid", "amount"],
      [{ invoice_id: invoice.id, amount: 100, lines: [{ invoice_line_id: line, amount: 100 }], refund: false }, 400, "parameter_invalid", "lines"],
      [{ invoice_id: invoice.id, refund: false }, 400, "parameter_missing", "amount"],
      [{ invoice_id: invoice.id, lines: [{ invoice_line_id: foreign.lines[0].id, amount: 100 }], refund: false }, 400, "invoice_line_not_found", "lines.0.invoice_line_id"],
      [{ invoice_id: invoice.id, amount: 100, refund: false, reason: "requested_by_customer" }, 400, "parameter_invalid", "reason"],
      [{ invoice_id: invoice.id, amount: 100 }, 400, "parameter_missing", "refund"],
      [{ invoice_id: foreign.id, amount: 100, refund: false }, 404, "resource_missing", "invoice_id"],
    ];
    for (const [body, status, code, param] of cases) {
      const res = await creditNote(acct, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(status);
      if (status === 400) expect(res.body.error.code, JSON.stringify(body)).toBe(code);
      expect(res.body.error.param, JSON.stringify(body)).toBe(param);
    }
    // The other mode's invoice is another account's as far as this key knows.
    expectError(await call("/credit-notes", { key: acct.liveKey, body: { invoice_id: invoice.id, amount: 100, refund: false } }), 404, "not_found_error");
    expect(await countRows("credit_notes", "account_id = ?", acct.id)).toBe(0);
    expect(await countRows("customer_balance_transactions", "account_id = ?", acct.id)).toBe(0);
    expect(await countRows("refunds", "account_id = ?", acct.id)).toBe(0);
  });

  it("a void invoice, or an open one to refund, answers 409 and writes nothing", async () => {
    const acct = await signup();
    const { user, sub, invoice: paid } = await paidInvoice(acct);
    const plan = await createPlan(acct, { price: 10 });
    const open = await openInvoice(acct, user.id, plan.id, sub.id);
    expectError(await creditNote(acct, { invoice_id: open, amount: 100, refund: true }), 409, "invalid_request_error", "invoice_not_paid");
    expect((await call(`/invoices/${open}/void`, { key: acct.key, method: "POST" })).status).toBe(200);
    expectError(await creditNote(acct, { invoice_id: open, amount: 100, refund: false }), 409, "invalid_request_error", "invoice_not_creditable");
    expect(await countRows("credit_notes", "account_id = ?", acct.id)).toBe(0);
    expect(paid.status).toBe("paid");
  });

  it("a balance holds one currency: a credit in another answers 400 balance_currency_mismatch", async () => {
    const acct = await signup();
    const { user, invoice } = await paidInvoice(acct);
    expect((await creditNote(acct, { invoice_id: invoice.id, amount: 1000, refund: false })).status).toBe(201);
    const eur = await createPlan(acct, { price: 10, currency: "eur" });
    const euroSub = await subscribed(acct, user.id, eur.id);
    const euroInvoice = (await call(`/invoices?subscription_id=${euroSub.id}`, { key: acct.key })).body.data[0];
    const refused = await creditNote(acct, { invoice_id: euroInvoice.id, amount: 500, refund: false });
    expect(expectError(refused, 400, "invalid_request_error", "balance_currency_mismatch").param).toBe("refund");
    // To the card, it is fine.
    expect((await creditNote(acct, { invoice_id: euroInvoice.id, amount: 500, refund: true })).status).toBe(201);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -1000, currency: "usd" });
  });

  it("five notes at once on a 120.00 invoice, 30.00 each: four are issued, numbered 1 to 4, and never more than the invoice", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct);
    const answers = await Promise.all(Array.from({ length: 5 }, () => creditNote(acct, { invoice_id: invoice.id, amount: 3000, refund: false })));
    const issued = answers.filter((a) => a.status === 201);
    expect(issued).toHaveLength(4);
    for (const refused of answers.filter((a) => a.status !== 201)) expectError(refused, 400, "invalid_request_error", "credit_note_exceeds_invoice");
    const prefix = acct.id.slice(-8).toUpperCase();
    expect(issued.map((a) => a.body.number).sort()).toEqual([1, 2, 3, 4].map((n) => `${prefix}-CN-000${n}`));
    const sum = await env.DB.prepare("SELECT SUM(amount) AS s FROM credit_notes WHERE invoice_id = ? AND status = 'issued'").bind(invoice.id).first<{ s: number }>();
    expect(sum!.s).toBe(12000);
    expect((await userOf(acct, invoice.user_id)).balance).toBe(-12000);
  });

  it("a lost reply, retried with the same Idempotency-Key, makes one credit note and one refund", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct);
    const DB = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => writesTo(op, "credit_notes") });
    const key = "lost-credit-note";
    const body = { invoice_id: invoice.id, amount: 2400, refund: true };
    const first = await fetchWith({ DB }, "/credit-notes", { key: acct.key, json: body, headers: { "idempotency-key": key } });
    expect(DB.fired, first.text).toHaveLength(1);
    // The batch committed and its answer was lost: the request finds its own committed answer (201), or leaves the key unknown (500).
    expect([201, 500]).toContain(first.status);
    expect(first.text).not.toMatch(/D1_ERROR|Network connection lost/);
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
    const again = await creditNote(acct, body, key);
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    if (first.status === 201) expect(again.body).toEqual(first.body);
    expect(await countRows("credit_notes", "account_id = ?", acct.id)).toBe(1);
    expect(await countRows("refunds", "account_id = ?", acct.id)).toBe(1);
    expect(again.body).toMatchObject({ amount: 2400, refund_id: expect.stringMatching(/^re_/) });
  });
});

describe("POST /refunds of a payment that paid an invoice", () => {
  it("issues a credit note for it (order_change), once, however many retries; a refund above what credit notes leave is refused", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct);
    const body = { payment_id: invoice.payment_id, amount: 6000, reason: "requested_by_customer" };
    const refund = await call("/refunds", { key: acct.key, body, idempotencyKey: "refund-once" });
    expect(refund.status, refund.text).toBe(201);
    const again = await call("/refunds", { key: acct.key, body, idempotencyKey: "refund-once" });
    expect(again.body).toEqual(refund.body);
    const notes = (await call(`/credit-notes?invoice_id=${invoice.id}`, { key: acct.key })).body.data;
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ amount: 6000, tax: 1000, subtotal: 5000, refund_id: refund.body.id, reason: "order_change", customer_balance_transaction: null });
    // 60.00 more to the balance leaves nothing: a refund of 1.00 is refused, and nothing is written.
    expect((await creditNote(acct, { invoice_id: invoice.id, amount: 6000, refund: false })).status).toBe(201);
    const over = await call("/refunds", { key: acct.key, body: { payment_id: invoice.payment_id, amount: 100 } });
    expect(expectError(over, 400, "invalid_request_error", "credit_note_exceeds_invoice").param).toBe("amount");
    expect(await countRows("refunds", "account_id = ?", acct.id)).toBe(1);
    expect(await countRows("credit_notes", "account_id = ?", acct.id)).toBe(2);
  });

  it("a full refund (no amount) issues a note of the whole invoice, with its whole tax", async () => {
    const acct = await signup();
    const { vat, invoice } = await paidInvoice(acct);
    const refund = await call("/refunds", { key: acct.key, body: { payment_id: invoice.payment_id, reason: "fraudulent" } });
    expect(refund.status, refund.text).toBe(201);
    expect(refund.body.amount).toBe(12000);
    const [note] = (await call(`/credit-notes?invoice_id=${invoice.id}`, { key: acct.key })).body.data;
    expect(note).toMatchObject({ amount: 12000, tax: 2000, tax_amounts: [{ tax_rate: vat.id, amount: 2000, inclusive: false }], reason: "fraudulent" });
  });
});

describe("POST /credit-notes/{id}/void", () => {
  it("takes a balance credit back; a refunded note cannot be voided; a void note no longer counts", async () => {
    const acct = await signup();
    const { user, invoice } = await paidInvoice(acct);
    const note = (await creditNote(acct, { invoice_id: invoice.id, amount: 12000, refund: false })).body;
    const voided = await call(`/credit-notes/${note.id}/void`, { key: acct.key, method: "POST" });
    expect(voided.status, voided.text).toBe(200);
    expect(voided.body).toMatchObject({ id: note.id, number: note.number, status: "void", voided_at: expect.any(String) });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
    expectError(await call(`/credit-notes/${note.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "credit_note_void");
    const refunded = await creditNote(acct, { invoice_id: invoice.id, amount: 12000, refund: true });
    expect(refunded.status, refunded.text).toBe(201);
    expectError(await call(`/credit-notes/${refunded.body.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "credit_note_refunded");
    const events = await call(`/api/events?type=credit_note.voided`, { key: acct.key });
    expect(events.body.data.map((e: any) => e.data)).toEqual([voided.body]);
    const other = await signup("Other");
    expectError(await call(`/credit-notes/${note.id}`, { key: other.key }), 404, "not_found_error");
    expectError(await call(`/credit-notes/${note.id}/void`, { key: other.key, method: "POST" }), 404, "not_found_error");
  });
});

describe("GET /credit-notes/{id}/pdf", () => {
  it("shows the number, the invoice's number, the lines, the tax, the total, the reason and the memo", async () => {
    const acct = await signup("Northwind Traders");
    const { invoice } = await paidInvoice(acct);
    const note = (await creditNote(acct, { invoice_id: invoice.id, lines: [{ invoice_line_id: invoice.lines[0].id, amount: 6000 }], reason: "product_unsatisfactory", refund: false, memo: "Λάθος χρέωση — 返金" })).body;
    const res = await exports.default.fetch(`${BASE}/credit-notes/${note.id}/pdf`, { headers: { authorization: `Bearer ${acct.key}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/pdf");
    const doc = await getDocumentProxy(new Uint8Array(await res.arrayBuffer()));
    const text = (await extractText(doc, { mergePages: true })).text.replace(/\s+/g, " ");
    for (const expected of [`Credit note ${note.number}`, invoice.number, "Northwind Traders", invoice.lines[0].description, "VAT 20%", "10.00", "50.00", "60.00", "Product unsatisfactory", "Λάθος χρέωση", "返金", "Credited to the customer's balance"]) {
      expect(text, expected).toContain(expected);
    }
    expect(text).not.toContain("?");
  });
});

describe("the balance is consumed by later invoices", () => {
  it("a renewal takes its invoice from the credit first: 120.00 less a 50.00 credit charges 70.00 (starting_balance -50.00, ending_balance 0)", async () => {
    const acct = await signup();
    const { user, sub, invoice } = await paidInvoice(acct);
    expect((await creditNote(acct, { invoice_id: invoice.id, amount: 5000, refund: false })).status).toBe(201);
    await makeDue(sub.id);
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    const renewal = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect(renewal).toMatchObject({ total: 12000, starting_balance: -5000, ending_balance: 0, amount_due: 7000, amount_paid: 7000, status: "paid" });
    expect((await call(`/payments/${renewal.payment_id}`, { key: acct.key })).body.amount).toBe(7000);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
    // A credit larger than the invoice leaves the rest on the balance, and charges nothing.
    const big = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect((await creditNote(acct, { invoice_id: big.id, amount: 12000, refund: false })).status).toBe(201);
    expect((await creditNote(acct, { invoice_id: invoice.id, amount: 7000, refund: false })).status).toBe(201);
    await makeDue(sub.id);
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    const free = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect(free).toMatchObject({ total: 12000, starting_balance: -19000, ending_balance: -7000, amount_due: 0, status: "paid", payment_id: null });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -7000 });
    const ledger = await env.DB.prepare("SELECT type, amount, ending_balance FROM customer_balance_transactions WHERE user_id = ? ORDER BY id").bind(user.id).all();
    expect(ledger.results.map((r: any) => [r.type, r.amount, r.ending_balance])).toEqual([
      ["credit_note", -5000, -5000],
      ["applied_to_invoice", 5000, 0],
      ["credit_note", -12000, -12000],
      ["credit_note", -7000, -19000],
      ["applied_to_invoice", 12000, -7000],
    ]);
  });

  it("two renewals of one user at once (two subscriptions, two workers) never take the same credit twice", async () => {
    const acct = await signup();
    const { user, sub, invoice } = await paidInvoice(acct);
    const plan = await createPlan(acct, { price: 100 });
    const second = await subscribed(acct, user.id, plan.id);
    expect((await creditNote(acct, { invoice_id: invoice.id, amount: 6000, refund: false })).status).toBe(201);
    await makeDue(sub.id);
    await makeDue(second.id);
    const outcomes = await Promise.all([renewChunk(env, [sub.id]), renewChunk(env, [second.id])]);
    expect(outcomes.flat()).toEqual(["renewed", "renewed"]);
    const renewals = await Promise.all([sub.id, second.id].map(async (id) => (await call(`/invoices?subscription_id=${id}`, { key: acct.key })).body.data[0]));
    const taken = renewals.map((r) => r.ending_balance - r.starting_balance);
    expect(taken.reduce((a, b) => a + b, 0)).toBe(6000);
    // 120.00 + 100.00 invoiced; 60.00 of it came from the credit, once.
    expect(renewals.reduce((sum, r) => sum + r.amount_paid, 0)).toBe(22000 - 6000);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
  });
});

describe("review (r3): the tax of many small notes", () => {
  it("many 3-unit notes on a 1.00 + 20% line (gross 120, tax 20) never credit more tax than the line's 20, and the last note's tax is never negative", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct, { price: 1, default_tax_rates: [(await createRate(acct, { percentage: "20" })).id] });
    expect(invoice).toMatchObject({ subtotal: 100, tax: 20, total: 120 });
    const line = invoice.lines[0];
    // 3 × 20 / 120 = 0.5: rounded alone, each note would carry 1 of tax (twice its share).
    let taxed = 0;
    for (let i = 0; i < 21; i++) {
      const res = await creditNote(acct, { invoice_id: invoice.id, lines: [{ invoice_line_id: line.id, amount: 3 }], refund: false });
      expect(res.status, res.text).toBe(201);
      expect(res.body.tax).toBeGreaterThanOrEqual(0);
      taxed += res.body.tax;
      // What the notes credited so far carries the tax of that much of the line, rounded once: never more.
      expect(taxed).toBe(Math.round((20 * 3 * (i + 1)) / 120));
    }
    const rest = await creditNote(acct, { invoice_id: invoice.id, amount: 120 - 63, refund: false });
    expect(rest.status, rest.text).toBe(201);
    expect(rest.body.tax).toBeGreaterThanOrEqual(0);
    expect(taxed + rest.body.tax).toBe(20);
  });
});

describe("review (r3): two small notes at once on the last of a line's tax", () => {
  it("with 6 of the line and 1 of its tax left, two 3-unit notes at once never credit 2 of tax", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct, { price: 1, default_tax_rates: [(await createRate(acct, { percentage: "20" })).id] });
    const line = invoice.lines[0];
    const first = await creditNote(acct, { invoice_id: invoice.id, lines: [{ invoice_line_id: line.id, amount: 114 }], refund: false });
    expect(first.status, first.text).toBe(201);
    expect(first.body.tax).toBe(19); // 20 × 114 / 120 = 19
    // Each reads 6 and 1 left: 20 × 117 / 120 = 19.5, so each would carry the last 1 of tax.
    const both = await Promise.all([0, 1].map(() => creditNote(acct, { invoice_id: invoice.id, lines: [{ invoice_line_id: line.id, amount: 3 }], refund: false })));
    for (const res of both) {
      if (res.status !== 201) expectError(res, 400, "invalid_request_error", "credit_note_exceeds_invoice");
    }
    const notes = (await call(`/credit-notes?invoice_id=${invoice.id}`, { key: acct.key })).body.data as { amount: number; tax: number }[];
    expect(notes.reduce((s, n) => s + n.tax, 0)).toBeLessThanOrEqual(20);
    expect(notes.reduce((s, n) => s + n.amount, 0)).toBeLessThanOrEqual(120);
    // What is left is still creditable, its tax exactly what the line has left.
    const left = 120 - notes.reduce((s, n) => s + n.amount, 0);
    if (left > 0) {
      const rest = await creditNote(acct, { invoice_id: invoice.id, amount: left, refund: false });
      expect(rest.status, rest.text).toBe(201);
      expect(notes.reduce((s, n) => s + n.tax, 0) + rest.body.tax).toBe(20);
    }
  });
});

describe("review (r3): an invoice voided after it took from the balance", () => {
  it("gives the credit back, once (Stripe's unapplied_from_invoice): a declined renewal took 50.00 of credit, its void returns it", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { price: 120 });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    const first = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect((await creditNote(acct, { invoice_id: first.id, amount: 5000, refund: false })).status).toBe(201);
    await makeDue(sub.id);
    await renewChunk(env, [sub.id]);
    const open = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data[0];
    expect(open).toMatchObject({ total: 12000, starting_balance: -5000, ending_balance: 0, amount_due: 7000 });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
    const voided = await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" });
    expect(voided.status, voided.text).toBe(200);
    // The invoice will never be paid: the 50.00 it took is the customer's again, no more, no less.
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -5000, currency: "usd" });
    expectError(await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error");
    const ledger = await env.DB.prepare("SELECT type, amount, ending_balance FROM customer_balance_transactions WHERE user_id = ? ORDER BY id").bind(user.id).all();
    expect(ledger.results.map((r: any) => [r.type, r.amount, r.ending_balance])).toEqual([
      ["credit_note", -5000, -5000],
      ["applied_to_invoice", 5000, 0],
      ["unapplied_from_invoice", -5000, -5000],
    ]);
  });
});

describe("review (r3): an open invoice credited to the balance, then voided", () => {
  it("is refused (409 invoice_has_credit_notes) while its notes stand: a void invoice would leave a credit for a charge never made", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { price: 120 });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    await makeDue(sub.id);
    await renewChunk(env, [sub.id]);
    const open = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data[0];
    expect(open).toMatchObject({ total: 12000, amount_due: 12000 });
    const note = await creditNote(acct, { invoice_id: open.id, amount: 12000, refund: false });
    expect(note.status, note.text).toBe(201);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -12000 });
    const refused = await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" });
    expectError(refused, 409, "invalid_request_error", "invoice_has_credit_notes");
    expect((await call(`/invoices/${open.id}`, { key: acct.key })).body.status).toBe("open");
    // Void the note first (its credit comes back off the balance), then the invoice.
    expect((await call(`/credit-notes/${note.body.id}/void`, { key: acct.key, method: "POST" })).status).toBe(200);
    const voided = await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" });
    expect(voided.status, voided.text).toBe(200);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: 0 });
  });
});

describe("review (r3): attacks that held", () => {
  it("a void note gives its room back exactly once; another account's note PDF is 404", async () => {
    const acct = await signup();
    const { user, invoice } = await paidInvoice(acct);
    const note = (await creditNote(acct, { invoice_id: invoice.id, amount: 12000, refund: false })).body;
    expect((await call(`/credit-notes/${note.id}/void`, { key: acct.key, method: "POST" })).status).toBe(200);
    const both = await Promise.all([0, 1].map(() => creditNote(acct, { invoice_id: invoice.id, amount: 12000, refund: false })));
    expect(both.map((r) => r.status).sort()).toEqual([201, 400]);
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -12000 });
    const other = await signup("Other");
    const pdf = await exports.default.fetch(`${BASE}/credit-notes/${note.id}/pdf`, { headers: { authorization: `Bearer ${other.key}` } });
    expect(pdf.status).toBe(404);
  });

  it("a balance in another currency is not taken by a renewal: a usd credit leaves a eur renewal charged in full", async () => {
    const acct = await signup();
    const { user, invoice } = await paidInvoice(acct);
    expect((await creditNote(acct, { invoice_id: invoice.id, amount: 5000, refund: false })).status).toBe(201);
    const eur = await createPlan(acct, { price: 10, currency: "eur" });
    const euroSub = await subscribed(acct, user.id, eur.id);
    await makeDue(euroSub.id);
    expect(await renewChunk(env, [euroSub.id])).toEqual(["renewed"]);
    const renewal = (await call(`/invoices?subscription_id=${euroSub.id}`, { key: acct.key })).body.data[0];
    expect(renewal).toMatchObject({ currency: "eur", total: 1000, starting_balance: 0, ending_balance: 0, amount_paid: 1000 });
    expect(await userOf(acct, user.id)).toMatchObject({ balance: -5000, currency: "usd" });
  });
});

describe("review (r3): a credit note racing POST /refunds of the same payment", () => {
  it("a full refund and a full refund: true note at once: one wins, one refund, one note, never more than the invoice", async () => {
    const acct = await signup();
    const { invoice } = await paidInvoice(acct);
    const [refund, note] = await Promise.all([
      call("/refunds", { key: acct.key, body: { payment_id: invoice.payment_id } }),
      creditNote(acct, { invoice_id: invoice.id, amount: 12000, refund: true }),
    ]);
    // One wins; the other is a clear 4xx (the note's guard, or the payment's CHECK), nothing half-written.
    const statuses = [refund.status, note.status];
    expect(statuses.filter((s) => s === 201).length, `${refund.text} ${note.text}`).toBe(1);
    expect(statuses.find((s) => s !== 201), `${refund.text} ${note.text}`).toBeOneOf([400, 409]);
    expect(await countRows("refunds", "account_id = ?", acct.id)).toBe(1);
    const notes = (await call(`/credit-notes?invoice_id=${invoice.id}`, { key: acct.key })).body.data;
    expect(notes.length).toBe(1);
    expect(notes[0]).toMatchObject({ amount: 12000, tax: 2000 });
  });
});
