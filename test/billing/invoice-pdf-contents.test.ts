// The invoice PDF a customer accepts (issue 37): the seller and buyer blocks with addresses and tax
// ids, a unit price column (quantity × unit price = amount; prorations, credits and tiered prices
// say what they are), each tax rate's line, the coupon's name on the discount line, the card that
// paid it, "Page n of N" on every page, the test clock's time on a clocked invoice, the seller's
// footer, and names and addresses in any script with no "?". Read by extracting the PDF's text.
import { extractText, getDocumentProxy } from "unpdf";
import { describe, expect, it } from "vitest";
import { renderInvoicePdf } from "../../src/billing/invoice-pdf";
import type { InvoiceJson } from "../../src/billing/invoices";
import { formatUnitAmount } from "../../src/domain/money";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { call, signup } from "../support/http";
import { invoicePdfText } from "../support/pdf";
import { draftInvoice } from "./invoice-pdf.fixture";

/** The text of each page, its runs joined by single spaces. */
async function pagesOf(bytes: Uint8Array) {
  const doc = await getDocumentProxy(new Uint8Array(bytes));
  const { text } = await extractText(doc, { mergePages: false });
  return (text as string[]).map((page) => page.replace(/\s+/g, " "));
}

describe("the unit price", () => {
  it("is exact in major units, with more decimals only where the price has them", () => {
    expect(formatUnitAmount("1999", "usd")).toBe("19.99 USD");
    expect(formatUnitAmount("123450", "usd")).toBe("1,234.50 USD");
    expect(formatUnitAmount("0.35", "usd")).toBe("0.0035 USD");
    expect(formatUnitAmount("1500", "jpy")).toBe("1,500 JPY");
    expect(formatUnitAmount("0.5", "jpy")).toBe("0.5 JPY");
    expect(formatUnitAmount("12345", "kwd")).toBe("12.345 KWD");
    expect(formatUnitAmount("100", "eur")).toBe("1.00 EUR");
  });
});

describe("the invoice PDF of a paid subscription", () => {
  it("shows quantity × unit price = amount, the coupon's name on the discount, each tax rate, the card that paid it and Page 1 of 1", { timeout: 60_000 }, async () => {
    const acct = await signup("Northwind Traders");
    await call("/api/account", { key: acct.key, method: "PATCH", body: { invoice_footer: "Thank you for your business." } });
    const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
    const vat = (await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "20", inclusive: false } })).body;
    const coupon = await call("/coupons", { key: acct.key, body: { id: "SUMMER20", name: "Summer 20% off", percent_off: 20, duration: "forever" } });
    expect(coupon.status, coupon.text).toBe(201);
    const plan = await createPlan(acct, { name: "Team", price: 1234.5, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { quantity: 3, coupon: "SUMMER20" });
    const [invoice] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    // 3 × 1,234.50 = 3,703.50; 20% off is 740.70; 20% VAT on the 2,962.80 left is 592.56; total 3,555.36.
    expect(invoice).toMatchObject({ status: "paid", subtotal: 370350, discount: 74070, tax: 59256, total: 355536, coupon: { id: "SUMMER20", name: "Summer 20% off" } });
    const text = await invoicePdfText(acct.key, invoice.id);
    const period = `${sub.start_date.slice(0, 10)} to ${sub.next_billing_date.slice(0, 10)}`;
    for (const shown of [
      "Description Period Qty Unit price Amount",
      `3 × Team ${period} 3 1,234.50 USD 3,703.50 USD`,
      "Subtotal 3,703.50 USD",
      "Discount (Summer 20% off) -740.70 USD",
      "VAT 20% 592.56 USD",
      "Total 3,555.36 USD",
      "Paid with Visa ending in 4242",
      "Thank you for your business.",
      "Page 1 of 1",
    ]) {
      expect(text, shown).toContain(shown);
    }
    expect(text).not.toContain("Test clock time");
    expect(text).not.toContain("?");
  });

  it("on a test clock says so, with the clock's time when it was made", { timeout: 60_000 }, async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2031-03-10T09:00:00Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const [first] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(first.test_clock).toBe(clock.id);
    expect(await invoicePdfText(acct.key, first.id)).toContain("Test clock time: 2031-03-10 09:00:00 UTC");
    await advance(acct, clock.id, "2031-04-20T00:00:00Z");
    const [renewal] = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(renewal.id).not.toBe(first.id);
    expect(await invoicePdfText(acct.key, renewal.id)).toContain("Test clock time: 2031-04-10 09:00:00 UTC");
  });
});

describe("the invoice PDF, drawn from an invoice", () => {
  const line = draftInvoice.lines[0];
  it("says what a line is where quantity × unit price is not its amount: proration, credit, tiered, usage", { timeout: 30_000 }, async () => {
    const invoice: InvoiceJson = {
      ...draftInvoice,
      lines: [
        { ...line, id: "il_1", description: "2 × Pro", quantity: 2, unit_amount_decimal: "1999", amount: 3998 },
        { ...line, id: "il_2", type: "proration", proration: true, description: "Unused time on 2 × Pro after 14 Jan 2026", quantity: 2, unit_amount_decimal: null, amount: -1234 },
        { ...line, id: "il_3", type: "credit", description: "Credit carried from the invoice of 2025-12-01", quantity: 1, unit_amount_decimal: null, amount: -500 },
        { ...line, id: "il_4", type: "subscription", description: "20 × Seats", quantity: 20, unit_amount_decimal: null, amount: 12750 },
        { ...line, id: "il_5", type: "usage", description: "1000 × API calls (usage)", quantity: 1000, unit_amount_decimal: "0.35", amount: 350 },
      ],
    };
    const [text] = await pagesOf(await renderInvoicePdf({ invoice }));
    expect(text).toContain("2 × Pro 2026-01-01 to 2026-02-01 2 19.99 EUR 39.98 EUR");
    expect(text).toContain("Unused time on 2 × Pro after 14 Jan 2026 (proration)");
    expect(text).toMatch(/2 Proration -12\.34 EUR/);
    expect(text).toMatch(/1 Credit -5\.00 EUR/);
    expect(text).toMatch(/20 Tiered 127\.50 EUR/);
    expect(text).toContain("1000 × API calls (usage) 2026-01-01 to 2026-02-01 1000 0.0035 EUR 3.50 EUR");
  });

  it("a long invoice spans pages, each headed and each saying Page n of N; the totals and footer end the last", { timeout: 30_000 }, async () => {
    const lines = Array.from({ length: 90 }, (_, i) => ({ ...line, id: `il_${i}`, description: `${i + 1} × Seat ${i + 1}`, quantity: i + 1, unit_amount_decimal: "100", amount: (i + 1) * 100 }));
    const subtotal = lines.reduce((sum, l) => sum + l.amount, 0);
    const invoice: InvoiceJson = { ...draftInvoice, lines, subtotal, total: subtotal, amount_due: subtotal, footer: "Bank: IBAN DE89 3704 0044 0532 0130 00" };
    const pages = await pagesOf(await renderInvoicePdf({ invoice }));
    expect(pages.length).toBeGreaterThanOrEqual(3);
    pages.forEach((page, i) => {
      expect(page, `page ${i + 1}`).toContain(`Page ${i + 1} of ${pages.length}`);
      expect(page, `page ${i + 1}`).toContain("Description Period Qty Unit price Amount");
      expect(page, `page ${i + 1}`).toContain(draftInvoice.id);
    });
    const all = pages.join(" ");
    for (let i = 1; i <= 90; i++) expect(all).toContain(`${i} × Seat ${i} `);
    expect(all).toContain("90 × Seat 90 2026-01-01 to 2026-02-01 90 1.00 EUR 90.00 EUR");
    expect(pages.at(-1)).toContain("Total 4,095.00 EUR");
    expect(pages.at(-1)).toContain("Bank: IBAN DE89 3704 0044 0532 0130 00");
  });

  it("prints the seller's and the buyer's names, addresses and tax ids in any script, never as \"?\"", { timeout: 30_000 }, async () => {
    const invoice: InvoiceJson = {
      ...draftInvoice,
      account_name: "Ωmega 株式会社",
      account_address: { line1: "東京都千代田区丸の内1-1", line2: null, city: "東京", postal_code: "100-0005", state: null, country: "JP" },
      account_tax_ids: ["T1234567891234"],
      customer_name: "Пётр Чайковский",
      customer_address: { line1: "Λεωφόρος Αλεξάνδρας 5", line2: "שדרות רוטשילד", city: "القاهرة", postal_code: null, state: null, country: "EG" },
      customer_tax_ids: [{ type: "eu_vat", value: "EL123456789" }, { type: "jp_cn", value: "1234567891234" }],
      footer: "Спасибо · ευχαριστώ · شكرا · תודה · ありがとう",
    };
    const text = (await pagesOf(await renderInvoicePdf({ invoice }))).join(" ");
    for (const shown of [
      "Ωmega 株式会社",
      "東京都千代田区丸の内1-1",
      "100-0005 東京",
      "Tax ID T1234567891234",
      "Пётр Чайковский",
      "Λεωφόρος Αλεξάνδρας 5",
      "שדרות רוטשילד",
      "القاهرة",
      "EU VAT EL123456789",
      "JP CN 1234567891234",
      "Спасибо",
      "ευχαριστώ",
      "شكرا",
      "תודה",
      "ありがとう",
    ]) {
      expect(text, shown).toContain(shown);
    }
    expect(text).not.toContain("?");
  });
});
