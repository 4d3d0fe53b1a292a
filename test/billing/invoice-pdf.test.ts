// GET /invoices/{id}/pdf: a real PDF, opened here with a PDF parser (unpdf: PDF.js's serverless
// build, run in workerd like the Worker), whose text shows the invoice: the account's name, the
// number, the dates, the customer, each line with its period and amount, the totals in major
// units with the currency's exponent. Names that WinAnsi cannot draw never break it.
import { exports } from "cloudflare:workers";
import { env } from "../support/env";
import { extractText, getDocumentProxy } from "unpdf";
import { describe, expect, it } from "vitest";
import { BASE, call, expectError, signup } from "../support/http";
import { createPlan, createUser, subscribe, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { renderInvoicePdf } from "../../src/billing/invoice-pdf";
import type { InvoiceJson } from "../../src/billing/invoices";
import { draftInvoice } from "./invoice-pdf.fixture";

async function pdfOf(key: string, invoiceId: string) {
  const res = await exports.default.fetch(`${BASE}/invoices/${invoiceId}/pdf`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/pdf");
  const bytes = new Uint8Array(await res.arrayBuffer());
  expect(new TextDecoder().decode(bytes.slice(0, 5))).toBe("%PDF-");
  return { bytes, res };
}

/** The PDF's text, page after page, its runs joined by single spaces. */
async function textOf(bytes: Uint8Array) {
  const doc = await getDocumentProxy(new Uint8Array(bytes));
  const { text, totalPages } = await extractText(doc, { mergePages: true });
  return { text: text.replace(/\s+/g, " "), totalPages };
}

describe("the invoice PDF", () => {
  it("shows the account, the number, the dates, the customer, each line with its period, and the totals", { timeout: 30_000 }, async () => {
    const acct = await signup("Northwind Traders");
    const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
    const plan = await createPlan(acct, { name: "Team", price: 1234.5, currency: "usd" });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { quantity: 3 });
    const [invoice] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    const { bytes, res } = await pdfOf(acct.key, invoice.id);
    expect(res.headers.get("content-disposition")).toBe(`inline; filename="${invoice.number}.pdf"`);
    const { text, totalPages } = await textOf(bytes);
    expect(totalPages).toBe(1);
    for (const shown of [
      "Northwind Traders",
      `Invoice ${invoice.number}`,
      "PAID",
      "Ada Lovelace",
      "ada@example.com",
      `Date of issue ${invoice.finalized_at.slice(0, 10)}`,
      `Period ${sub.start_date.slice(0, 10)} to ${sub.next_billing_date.slice(0, 10)}`,
      `Paid ${invoice.paid_at.slice(0, 10)}`,
      // The line: its description, its period, quantity, unit price and amount.
      `3 × Team ${sub.start_date.slice(0, 10)} to ${sub.next_billing_date.slice(0, 10)} 3 1,234.50 USD 3,703.50 USD`,
      "Subtotal 3,703.50 USD",
      "Discount 0.00 USD",
      "Total 3,703.50 USD",
      "Amount paid 3,703.50 USD",
      invoice.id,
    ]) {
      expect(text, shown).toContain(shown);
    }
    // The same invoice always makes the same document.
    expect((await pdfOf(acct.key, invoice.id)).bytes).toEqual(bytes);
  });

  it("amounts use each currency's exponent: JPY has none, KWD three", { timeout: 30_000 }, async () => {
    const acct = await signup();
    const user = await createUser(acct);
    for (const [currency, price, shown] of [
      ["jpy", 1500, "Total 1,500 JPY"],
      ["kwd", 12.345, "Total 12.345 KWD"],
    ] as const) {
      const plan = await createPlan(acct, { currency, price });
      const sub = await subscribed(acct, user.id, plan.id);
      const [invoice] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
      const { text } = await textOf((await pdfOf(acct.key, invoice.id)).bytes);
      expect(text).toContain(shown);
    }
  });

  it("names in Latin, Greek, Cyrillic, Arabic, Hebrew and CJK print as written, never as \"?\"; a void invoice says so", { timeout: 30_000 }, async () => {
    const acct = await signup("Ωmega 株式会社 Łódź");
    const names = [
      ["Zoë Ünal Łukasz Đorđević", "zoe@example.com"],
      ["Αλέξανδρος Παπαδόπουλος", "alex@example.gr"],
      ["Пётр Ильич Чайковский", "petr@example.ru"],
      ["محمد علي", "mohamed@example.eg"],
      ["דוד לוי", "david@example.il"],
      ["李小龍", "bruce@example.cn"],
      ["山田 さくら カタカナ", "sakura@example.jp"],
      ["김민준", "minjun@example.kr"],
    ];
    const plan = await createPlan(acct, { name: "Плюс Café" });
    for (const [name, email] of names) {
      const user = await createUser(acct, { name, email });
      expectError(await subscribe(acct, user.id, plan.id, CARDS.declined), 402, "card_error");
      const [invoice] = (await call(`/invoices?user_id=${user.id}`, { key: acct.key })).body.data;
      expect(invoice.status).toBe("void");
      const { text } = await textOf((await pdfOf(acct.key, invoice.id)).bytes);
      expect(text, name).toContain("Ωmega 株式会社 Łódź");
      expect(text, name).toContain(name);
      expect(text, name).toContain("1 × Плюс Café");
      expect(text, name).not.toContain("?");
      expect(text, name).toContain("VOID");
      expect(text, name).toContain("Amount paid 0.00 USD");
    }
  });

  it("draws Arabic joined and right to left, and a character no font has as U+FFFD", { timeout: 30_000 }, async () => {
    const invoice = { ...draftInvoice, customer_name: "شركة الأمل Zeta 🚀", customer_email: "amal@example.com" };
    const bytes = await renderInvoicePdf({ invoice });
    const { text } = await textOf(bytes);
    // Each letter, in its joining form, extracts as the letter it is; and PDF.js reads the words in
    // their logical order only because they were drawn in visual order (right to left).
    expect(text).toContain("شركة الأمل Zeta \uFFFD");
    expect(text).not.toContain("?");
    // The line is left to right: the Arabic run, then the Latin word.
    const doc = await getDocumentProxy(new Uint8Array(bytes));
    const items = (await (await doc.getPage(1)).getTextContent()).items as { str: string; transform: number[] }[];
    const arabic = items.find((i) => i.str.includes("شركة"));
    const latin = items.find((i) => i.str.includes("Zeta"));
    expect(arabic?.transform[4]).toBeLessThan(latin?.transform[4] as number);
  });

  it("wraps a long line description over lines instead of cutting it: the (proration) mark stays", { timeout: 30_000 }, async () => {
    const base = draftInvoice;
    const description = "Unused time on 250 × Enterprise Platinum Annual Plan with priority support and dedicated account manager after 14 Nov 2026";
    const invoice = { ...base, lines: [{ ...base.lines[0], description, proration: true, amount: -12345, type: "proration" as const }] };
    const { text } = await textOf(await renderInvoicePdf({ invoice }));
    expect(text).toContain(`${description} (proration)`);
    expect(text).not.toContain("...");
    expect(text).toContain("-123.45 EUR");
  });

  it("a draft has no number and many lines run over pages, each page headed", { timeout: 30_000 }, async () => {
    const lines = Array.from({ length: 60 }, (_, i) => ({
      id: `il_${String(i).padStart(26, "0")}`,
      type: i % 2 ? ("proration" as const) : ("subscription" as const),
      description: `Line ${i + 1} ${"with a very long description ".repeat(i === 0 ? 6 : 0)}`.trim(),
      quantity: 1,
      unit_amount_decimal: null,
      amount: i % 2 ? -100 : 250,
      proration: i % 2 === 1,
      tax_amounts: [],
      period_start: "2026-01-01T00:00:00.000Z",
      period_end: "2026-02-01T00:00:00.000Z",
    }));
    const invoice: InvoiceJson = {
      id: "in_0000000000000000000000draft",
      object: "invoice",
      livemode: true,
      number: null,
      status: "draft",
      subscription_id: null,
      user_id: null,
      customer_name: null,
      customer_email: null,
      customer_address: null,
      customer_tax_ids: [],
      account_name: "Acme",
      account_email: "billing@acme.example",
      account_address: null,
      account_tax_ids: [],
      footer: null,
      currency: "eur",
      period_start: "2026-01-01T00:00:00.000Z",
      period_end: "2026-02-01T00:00:00.000Z",
      lines,
      subtotal: 4500,
      discount: 0,
      coupon: null,
      tax: 0,
      total_tax_amounts: [],
      total: 4500,
      amount_paid: 0,
      amount_due: 4500,
      starting_balance: 0,
      ending_balance: 0,
      payment_id: null,
      hosted_invoice_url: null,
      test_clock: null,
      created_at: "2026-01-01T00:00:00.000Z",
      finalized_at: null,
      paid_at: null,
    };
    const { text, totalPages } = await textOf(await renderInvoicePdf({ invoice }));
    expect(totalPages).toBeGreaterThan(1);
    expect(text).toContain("Invoice (draft)");
    expect(text).toContain("DRAFT");
    expect(text).not.toContain("Test mode");
    // A long description wraps: every word of it is there.
    expect(text).toContain(`Line 1 ${"with a very long description ".repeat(6).trim()}`);
    expect(text).toContain("Line 60 (proration)");
    expect(text.match(/Description Period Qty Unit price Amount/g)).toHaveLength(totalPages);
    expect(text).toContain("-1.00 EUR");
    expect(text).toContain("Total 45.00 EUR");
  });

  it("answers 404 for another account's invoice, and needs a credential", { timeout: 30_000 }, async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    await subscribed(acct, user.id, plan.id);
    const [invoice] = (await call("/invoices", { key: acct.key })).body.data;
    const stranger = await signup();
    expectError(await call(`/invoices/${invoice.id}/pdf`, { key: stranger.key }), 404, "not_found_error");
    expectError(await call(`/invoices/${invoice.id}/pdf`), 401, "authentication_error");
    expect(env.ENVIRONMENT).toBe("development");
  });
});
