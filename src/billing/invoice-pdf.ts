// An invoice as a PDF, made inside the Worker with pdf-lib (pure JavaScript: no file system, no
// native code). It says what the invoice says: the seller and the buyer it names (copied when it
// was finalized), its own dates (a test clock's for a clocked invoice). Text is drawn with Noto
// fonts embedded as subsets (src/billing/pdf-fonts.ts), so a name in Latin, Greek, Cyrillic,
// Arabic, Hebrew or CJK prints as written, never as "?". A line's description wraps over as many
// lines as it needs, so nothing (a "(proration)") is cut off.
import { PDFDocument, type PDFPage, rgb } from "pdf-lib";
import { formatMoney } from "../domain/money";
import type { InvoiceJson } from "./invoices";
import { PdfText, type Weight } from "./pdf-fonts";

export interface InvoicePdfInput {
  /** The invoice as the API answers it: its parties are the ones it names (frozen when it was finalized). */
  invoice: InvoiceJson;
}

const PAGE = { width: 595.28, height: 841.89 }; // A4, in points
const MARGIN = 48;
const INK = rgb(0.1, 0.1, 0.12);
const MUTED = rgb(0.42, 0.42, 0.46);
const RULE = rgb(0.82, 0.82, 0.85);

/** "2026-11-21T12:00:00.000Z" -> "2026-11-21". */
const day = (iso: string | null) => (iso ? iso.slice(0, 10) : "-");

const STATUS_LABEL: Record<InvoiceJson["status"], string> = {
  draft: "DRAFT",
  open: "OPEN",
  paid: "PAID",
  uncollectible: "UNCOLLECTIBLE",
  void: "VOID",
};

interface TextOptions {
  size?: number;
  weight?: Weight;
  color?: typeof INK;
  alignRight?: boolean;
}

/** The invoice's PDF bytes. */
export async function renderInvoicePdf({ invoice }: InvoicePdfInput): Promise<Uint8Array> {
  const seller = { name: invoice.account_name ?? "", email: invoice.account_email };
  const buyer = invoice.customer_name === null && invoice.customer_email === null ? null : { name: invoice.customer_name ?? "", email: invoice.customer_email };
  const doc = await PDFDocument.create();
  const title = `Invoice ${invoice.number ?? "(draft)"}`;
  doc.setTitle(drawableTitle(title));
  doc.setAuthor(drawableTitle(seller.name));
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

  // The seller, the title, the status.
  const sellerLines = await block(page, seller.name, MARGIN, y - 18, right - MARGIN - 170, 20, { size: 18, weight: "bold" });
  let sellerY = y - 18 - (sellerLines - 1) * 20;
  if (seller.email) {
    sellerY -= 15;
    await text(page, seller.email, MARGIN, sellerY, { size: 9, color: MUTED });
  }
  await text(page, title, right, y - 18, { size: 14, weight: "bold", alignRight: true });
  await text(page, STATUS_LABEL[invoice.status], right, y - 34, { size: 10, weight: "bold", color: MUTED, alignRight: true });
  if (!invoice.livemode) await text(page, "Test mode", right, y - 48, { size: 9, color: MUTED, alignRight: true });
  y = Math.min(sellerY, y - 48) - 30;

  // Dates, and the customer.
  const facts: [string, string][] = [
    ["Invoice number", invoice.number ?? "(draft)"],
    ["Date of issue", day(invoice.finalized_at ?? invoice.created_at)],
    ["Period", `${day(invoice.period_start)} to ${day(invoice.period_end)}`],
    ["Paid", invoice.paid_at ? day(invoice.paid_at) : "-"],
  ];
  let factsY = y;
  for (const [label, value] of facts) {
    await text(page, label, MARGIN, factsY, { size: 9, color: MUTED });
    await text(page, value, MARGIN + 90, factsY, { size: 10 });
    factsY -= 15;
  }
  const billTo = PAGE.width / 2 + 20;
  await text(page, "Bill to", billTo, y, { size: 9, color: MUTED });
  let buyerY = y - 15;
  const buyerLines = await block(page, buyer?.name || "-", billTo, buyerY, right - billTo, 14, { size: 10, weight: "bold" });
  buyerY -= buyerLines * 14;
  if (buyer?.email) {
    buyerY -= (await block(page, buyer.email, billTo, buyerY, right - billTo, 14)) * 14;
  }
  y = Math.min(factsY, buyerY) - 20;

  // The lines: a description wraps over as many lines as it needs.
  const columns = { description: MARGIN, period: MARGIN + 230, quantity: MARGIN + 375, amount: right };
  const header = async (p: PDFPage, at: number) => {
    await text(p, "Description", columns.description, at, { size: 9, weight: "bold", color: MUTED });
    await text(p, "Period", columns.period, at, { size: 9, weight: "bold", color: MUTED });
    await text(p, "Qty", columns.quantity, at, { size: 9, weight: "bold", color: MUTED, alignRight: true });
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
    if (y - height < MARGIN + 140) {
      page = doc.addPage([PAGE.width, PAGE.height]);
      y = await header(page, PAGE.height - MARGIN);
    }
    for (const [i, part] of wrapped.entries()) await text(page, part, columns.description, y - i * LEADING);
    await text(page, `${day(line.period_start)} to ${day(line.period_end)}`, columns.period, y, { size: 9 });
    await text(page, String(line.quantity), columns.quantity, y, { alignRight: true });
    await text(page, money(line.amount), columns.amount, y, { alignRight: true });
    y -= height;
  }
  page.drawLine({ start: { x: MARGIN, y: y + 8 }, end: { x: right, y: y + 8 }, thickness: 0.5, color: RULE });
  y -= 8;

  // The totals, in major units with the currency's exponent.
  const totals: [string, string, boolean][] = [
    ["Subtotal", money(invoice.subtotal), false],
    ["Discount", invoice.discount === 0 ? money(0) : `-${money(invoice.discount)}`, false],
    // A row per tax rate: an exclusive rate's is added to the total, an inclusive rate's is part of the lines.
    ...invoice.total_tax_amounts.map((t): [string, string, boolean] => [taxLabel(t), money(t.amount), false]),
    ["Total", money(invoice.total), true],
    ["Amount due", money(invoice.amount_due), false],
    ["Amount paid", money(invoice.amount_paid), false],
    ["Remaining", money(invoice.status === "open" ? invoice.amount_due - invoice.amount_paid : 0), false],
  ];
  for (const [label, value, strong] of totals) {
    const weight: Weight = strong ? "bold" : "regular";
    await text(page, label, right - 200, y, { size: 10, weight });
    await text(page, value, right, y, { size: 10, weight, alignRight: true });
    y -= 16;
  }

  // The invoice's id, on every page.
  for (const p of doc.getPages()) await text(p, `${invoice.id}  ·  ${invoice.currency.toUpperCase()}`, MARGIN, MARGIN - 20, { size: 8, color: MUTED });
  return doc.save({ useObjectStreams: false });
}

/** A tax row's label: "VAT 20%", "MwSt 19% (included)". */
export const taxLabel = (t: InvoiceJson["total_tax_amounts"][number]) => `${t.display_name ?? "Tax"} ${t.percentage}%${t.inclusive ? " (included)" : ""}`;

/** Document metadata is stored as PDF text strings (UTF-16 capable): only control characters go. */
const drawableTitle = (value: string) => value.replace(/[\u0000-\u001f]/g, " ");
