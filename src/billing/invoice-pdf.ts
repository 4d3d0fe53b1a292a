// An invoice as a PDF, made inside the Worker with pdf-lib (pure JavaScript: no file system, no
// native code). It says what the invoice says: the seller and the buyer it names with their
// addresses and tax ids (copied when it was finalized), its own dates (a test clock's for a
// clocked invoice, which says so with the clock's time), the card that paid it, each line with its
// quantity, unit price and amount, the coupon's name on the discount, each tax rate, the seller's
// footer, and "Page n of N" on every page. Text is drawn with Noto
// fonts embedded as subsets (src/billing/pdf-fonts.ts), so a name in Latin, Greek, Cyrillic,
// Arabic, Hebrew or CJK prints as written, never as "?". A line's description wraps over as many
// lines as it needs, so nothing (a "(proration)") is cut off.
import { PDFDocument, type PDFPage, rgb } from "pdf-lib";
import { formatMoney, formatUnitAmount } from "../domain/money";
import { addressLines, taxIdLabel } from "../domain/parties";
import type { InvoiceJson } from "./invoices";
import { PdfText, type Weight } from "./pdf-fonts";

export interface InvoicePdfInput {
  /** The invoice as the API answers it: its parties are the ones it names (frozen when it was finalized). */
  invoice: InvoiceJson;
  /** The card of the payment that paid it (read with it: INVOICE_PAID_WITH), or null. */
  paidWith?: PaidWith | null;
}

/** The card a paid invoice was paid with, as its payment keeps it. */
export interface PaidWith {
  brand: string;
  last4: string;
}

const PAGE = { width: 595.28, height: 841.89 }; // A4, in points
const MARGIN = 48;
/** Where the page's foot line (the invoice id, "Page n of N") is drawn; nothing else goes below FLOOR. */
const FOOT = MARGIN - 20;
const FLOOR = MARGIN;
const INK = rgb(0.1, 0.1, 0.12);
const MUTED = rgb(0.42, 0.42, 0.46);
const RULE = rgb(0.82, 0.82, 0.85);
/** The totals block's width, from the right margin: labels on its left, amounts on its right. */
const TOTALS_WIDTH = 250;

/** "2026-11-21T12:00:00.000Z" -> "2026-11-21". */
const day = (iso: string | null) => (iso ? iso.slice(0, 10) : "-");
/** "2026-11-21T12:00:00.000Z" -> "2026-11-21 12:00:00 UTC". */
const instant = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;

const STATUS_LABEL: Record<InvoiceJson["status"], string> = {
  draft: "DRAFT",
  open: "OPEN",
  paid: "PAID",
  uncollectible: "UNCOLLECTIBLE",
  void: "VOID",
};

/** "visa" -> "Visa", "amex" -> "American Express". */
const BRAND_NAMES: Record<string, string> = { visa: "Visa", mastercard: "Mastercard", amex: "American Express", discover: "Discover", diners: "Diners Club", jcb: "JCB", unionpay: "UnionPay" };
export const paidWithLabel = (card: PaidWith) => `${BRAND_NAMES[card.brand] ?? card.brand} ending in ${card.last4}`;

/**
 * What a line's unit price column says: the exact unit price, or what the line is when quantity ×
 * unit price is not its amount (a proration's share of a period, a credit, a tiered price).
 */
export function unitPriceLabel(line: InvoiceJson["lines"][number], currency: string): string {
  if (line.type === "proration" || line.proration) return "Proration";
  if (line.type === "credit") return "Credit";
  return line.unit_amount_decimal === null ? "Tiered" : formatUnitAmount(line.unit_amount_decimal, currency);
}

/** The lines that say who a party is: its address, then each tax id. */
export const sellerLines = (invoice: InvoiceJson) => [...addressLines(invoice.account_address), ...invoice.account_tax_ids.map((id) => `Tax ID ${id}`)];
export const buyerLines = (invoice: InvoiceJson) => [...addressLines(invoice.customer_address), ...invoice.customer_tax_ids.map(taxIdLabel)];

interface TextOptions {
  size?: number;
  weight?: Weight;
  color?: typeof INK;
  alignRight?: boolean;
}

/** The invoice's PDF bytes. */
export async function renderInvoicePdf({ invoice, paidWith = null }: InvoicePdfInput): Promise<Uint8Array> {
  const sellerName = invoice.account_name ?? "";
  const buyer = invoice.customer_name === null && invoice.customer_email === null ? null : { name: invoice.customer_name ?? "", email: invoice.customer_email };
  const doc = await PDFDocument.create();
  const title = `Invoice ${invoice.number ?? "(draft)"}`;
  doc.setTitle(drawableTitle(title));
  doc.setAuthor(drawableTitle(sellerName));
  doc.setCreator("Tender");
  doc.setProducer("Tender (pdf-lib)");
  // A fixed date, so the same invoice always makes the same bytes.
  const created = new Date(invoice.finalized_at ?? invoice.created_at);
  doc.setCreationDate(created);
  doc.setModificationDate(created);
  const fonts = await PdfText.for(doc);
  const money = (minor: number) => formatMoney(minor, invoice.currency);

  let page = doc.addPage([PAGE.width, PAGE.height]);
  let y = PAGE.height - MARGIN;
  const right = PAGE.width - MARGIN;

  /** Draws one line of text. */
  const text = async (p: PDFPage, value: string, x: number, at: number, options: TextOptions = {}) => {
    const size = options.size ?? 10;
    const weight = options.weight ?? "regular";
    const width = options.alignRight ? await fonts.width(value, size, weight) : 0;
    await fonts.draw(p, value, x - width, at, { size, weight, color: options.color ?? INK });
  };
  /** Draws `value` wrapped to `maxWidth`, one line every `leading` points down; returns the lines drawn. */
  const block = async (p: PDFPage, value: string, x: number, at: number, maxWidth: number, leading: number, options: TextOptions = {}) => {
    const lines = await fonts.wrap(value, options.size ?? 10, maxWidth, options.weight);
    for (const [i, line] of lines.entries()) await text(p, line, x, at - i * leading, options);
    return lines.length;
  };
  /** Moves to a new page when `height` more points do not fit above the floor; `onNewPage` heads it. */
  const room = async (height: number, onNewPage: (p: PDFPage, at: number) => Promise<number>) => {
    if (y - height >= FLOOR) return;
    page = doc.addPage([PAGE.width, PAGE.height]);
    y = await onNewPage(page, PAGE.height - MARGIN);
  };

  // The seller (name, address, tax ids, email), the title, the status.
  const sellerWidth = right - MARGIN - 170;
  const sellerNameLines = await block(page, sellerName, MARGIN, y - 18, sellerWidth, 20, { size: 18, weight: "bold" });
  let sellerY = y - 18 - (sellerNameLines - 1) * 20 - 4;
  for (const line of [...sellerLines(invoice), ...(invoice.account_email ? [invoice.account_email] : [])]) {
    sellerY -= 13;
    sellerY -= ((await block(page, line, MARGIN, sellerY, sellerWidth, 13, { size: 9, color: MUTED })) - 1) * 13;
  }
  await text(page, title, right, y - 18, { size: 14, weight: "bold", alignRight: true });
  await text(page, STATUS_LABEL[invoice.status], right, y - 34, { size: 10, weight: "bold", color: MUTED, alignRight: true });
  if (!invoice.livemode) await text(page, "Test mode", right, y - 48, { size: 9, color: MUTED, alignRight: true });
  y = Math.min(sellerY, y - 48) - 30;

  // Dates, the payment, and the customer (name, email, address, tax ids).
  const facts: [string, string][] = [
    ["Invoice number", invoice.number ?? "(draft)"],
    ["Date of issue", day(invoice.finalized_at ?? invoice.created_at)],
    ["Period", `${day(invoice.period_start)} to ${day(invoice.period_end)}`],
    ["Paid", invoice.paid_at ? day(invoice.paid_at) : "-"],
    ...(paidWith ? [["Paid with", paidWithLabel(paidWith)] as [string, string]] : []),
  ];
  let factsY = y;
  for (const [label, value] of facts) {
    await text(page, label, MARGIN, factsY, { size: 9, color: MUTED });
    await text(page, value, MARGIN + 90, factsY, { size: 10 });
    factsY -= 15;
  }
  // A clocked invoice is dated by its test clock: say so, with the clock's time when it was made.
  if (invoice.test_clock) {
    await text(page, `Test clock time: ${instant(invoice.finalized_at ?? invoice.created_at)}`, MARGIN, factsY, { size: 9, color: MUTED });
    factsY -= 15;
  }
  const billTo = PAGE.width / 2 + 20;
  await text(page, "Bill to", billTo, y, { size: 9, color: MUTED });
  let buyerY = y - 15;
  buyerY -= (await block(page, buyer?.name || "-", billTo, buyerY, right - billTo, 14, { size: 10, weight: "bold" })) * 14;
  for (const line of [...(buyer?.email ? [buyer.email] : []), ...buyerLines(invoice)]) {
    buyerY -= (await block(page, line, billTo, buyerY, right - billTo, 13, { size: 9 })) * 13;
  }
  y = Math.min(factsY, buyerY) - 20;

  // The lines: a description wraps over as many lines as it needs; quantity × unit price = amount.
  const columns = { description: MARGIN, period: MARGIN + 185, quantity: MARGIN + 330, unit: MARGIN + 415, amount: right };
  const header = async (p: PDFPage, at: number) => {
    await text(p, "Description", columns.description, at, { size: 9, weight: "bold", color: MUTED });
    await text(p, "Period", columns.period, at, { size: 9, weight: "bold", color: MUTED });
    await text(p, "Qty", columns.quantity, at, { size: 9, weight: "bold", color: MUTED, alignRight: true });
    await text(p, "Unit price", columns.unit, at, { size: 9, weight: "bold", color: MUTED, alignRight: true });
    await text(p, "Amount", columns.amount, at, { size: 9, weight: "bold", color: MUTED, alignRight: true });
    p.drawLine({ start: { x: MARGIN, y: at - 6 }, end: { x: right, y: at - 6 }, thickness: 0.5, color: RULE });
    return at - 22;
  };
  y = await header(page, y);
  const LEADING = 13;
  for (const line of invoice.lines) {
    const description = line.proration ? `${line.description} (proration)` : line.description;
    const wrapped = await fonts.wrap(description, 10, columns.period - columns.description - 10);
    const height = (wrapped.length - 1) * LEADING + 18;
    await room(height, header);
    for (const [i, part] of wrapped.entries()) await text(page, part, columns.description, y - i * LEADING);
    await text(page, `${day(line.period_start)} to ${day(line.period_end)}`, columns.period, y, { size: 9 });
    await text(page, String(line.quantity), columns.quantity, y, { alignRight: true });
    await text(page, unitPriceLabel(line, invoice.currency), columns.unit, y, { size: 9, alignRight: true });
    await text(page, money(line.amount), columns.amount, y, { alignRight: true });
    y -= height;
  }
  page.drawLine({ start: { x: MARGIN, y: y + 8 }, end: { x: right, y: y + 8 }, thickness: 0.5, color: RULE });
  y -= 8;

  // The totals, in major units with the currency's exponent.
  const discountLabel = invoice.coupon ? `Discount (${invoice.coupon.name ?? invoice.coupon.id})` : "Discount";
  const totals: [string, string, boolean][] = [
    ["Subtotal", money(invoice.subtotal), false],
    [discountLabel, invoice.discount === 0 ? money(0) : `-${money(invoice.discount)}`, false],
    // A row per tax rate: an exclusive rate's is added to the total, an inclusive rate's is part of the lines.
    ...invoice.total_tax_amounts.map((t): [string, string, boolean] => [taxLabel(t), money(t.amount), false]),
    ["Total", money(invoice.total), true],
    // What the invoice took from the customer's balance (a credit), when it took any.
    ...(invoice.ending_balance !== invoice.starting_balance ? [["Applied balance", `-${money(invoice.ending_balance - invoice.starting_balance)}`, false] as [string, string, boolean]] : []),
    ["Amount due", money(invoice.amount_due), false],
    ["Amount paid", money(invoice.amount_paid), false],
    ["Remaining", money(invoice.status === "open" ? invoice.amount_due - invoice.amount_paid : 0), false],
  ];
  // The totals stay together, on the last page of lines or on a new one (headed as every page is).
  await room(totals.length * 16 + 13, header);
  for (const [label, value, strong] of totals) {
    const weight: Weight = strong ? "bold" : "regular";
    const labelLines = await fonts.wrap(label, 10, TOTALS_WIDTH - 80, weight);
    for (const [i, part] of labelLines.entries()) await text(page, part, right - TOTALS_WIDTH, y - i * 13, { size: 10, weight });
    await text(page, value, right, y, { size: 10, weight, alignRight: true });
    y -= 16 + (labelLines.length - 1) * 13;
  }

  // The seller's footer, wrapped, after the totals.
  if (invoice.footer) {
    y -= 14;
    for (const part of await fonts.wrap(invoice.footer, 9, right - MARGIN)) {
      await room(13, header);
      await text(page, part, MARGIN, y, { size: 9, color: MUTED });
      y -= 13;
    }
  }

  // The invoice's id and "Page n of N", on every page.
  const pages = doc.getPages();
  for (const [i, p] of pages.entries()) {
    await text(p, `${invoice.id}  ·  ${invoice.currency.toUpperCase()}`, MARGIN, FOOT, { size: 8, color: MUTED });
    await text(p, `Page ${i + 1} of ${pages.length}`, right, FOOT, { size: 8, color: MUTED, alignRight: true });
  }
  return doc.save({ useObjectStreams: false });
}

/** A tax row's label: "VAT 20%", "MwSt 19% (included)". */
export const taxLabel = (t: InvoiceJson["total_tax_amounts"][number]) => `${t.display_name ?? "Tax"} ${t.percentage}%${t.inclusive ? " (included)" : ""}`;

/** Document metadata is stored as PDF text strings (UTF-16 capable): only control characters go. */
const drawableTitle = (value: string) => value.replace(/[\u0000-\u001f]/g, " ");
