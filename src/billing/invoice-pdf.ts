// An invoice as a PDF, made inside the Worker with pdf-lib (pure JavaScript: no file system, no
// native code). The fonts are the PDF standard Helvetica and Helvetica-Bold, which every reader
// has, so nothing is embedded; they draw WinAnsi (Windows-1252) text only. Text outside it (a
// name in Cyrillic, CJK, an emoji) is never a crash: a letter whose accent WinAnsi lacks is drawn
// without it ("Łódź" -> "Lodz"), anything else as "?".
import { PDFDocument, type PDFFont, type PDFPage, StandardFonts, rgb } from "pdf-lib";
import { formatMoney } from "../domain/money";
import type { InvoiceJson } from "./invoices";

export interface InvoicePdfInput {
  /** The invoice as the API answers it: its parties are the ones it names (frozen when it was finalized). */
  invoice: InvoiceJson;
}

const PAGE = { width: 595.28, height: 841.89 }; // A4, in points
const MARGIN = 48;
const INK = rgb(0.1, 0.1, 0.12);
const MUTED = rgb(0.42, 0.42, 0.46);
const RULE = rgb(0.82, 0.82, 0.85);

/** Letters WinAnsi lacks but whose base letter it has, written out where NFD does not split them. */
const FALLBACKS: Record<string, string> = { "Ł": "L", "ł": "l", "Đ": "D", "đ": "d", "Ø": "O", "ø": "o", "ı": "i", "ß": "ss", "‐": "-", "‑": "-", "−": "-" };

/** `text` as the font can draw it: unknown characters replaced, never thrown on. */
export function drawable(font: PDFFont, text: string): string {
  const known = new Set(font.getCharacterSet());
  let out = "";
  for (const char of text.normalize("NFC")) {
    const code = char.codePointAt(0) as number;
    if (char === "\n" || char === "\r" || char === "\t") out += " ";
    else if (known.has(code)) out += char;
    else {
      const base = FALLBACKS[char] ?? char.normalize("NFD").replace(/\p{M}/gu, "");
      out += base !== char && [...base].every((c) => known.has(c.codePointAt(0) as number)) ? base : "?";
    }
  }
  return out;
}

/** "2026-11-21T12:00:00.000Z" -> "2026-11-21". */
const day = (iso: string | null) => (iso ? iso.slice(0, 10) : "-");

const STATUS_LABEL: Record<InvoiceJson["status"], string> = {
  draft: "DRAFT",
  open: "OPEN",
  paid: "PAID",
  uncollectible: "UNCOLLECTIBLE",
  void: "VOID",
};

/** The invoice's PDF bytes. */
export async function renderInvoicePdf({ invoice }: InvoicePdfInput): Promise<Uint8Array> {
  const accountName = invoice.account_name ?? "";
  const customer = invoice.customer_name === null && invoice.customer_email === null ? null : { name: invoice.customer_name ?? "", email: invoice.customer_email ?? "" };
  const doc = await PDFDocument.create();
  const title = `Invoice ${invoice.number ?? "(draft)"}`;
  doc.setTitle(drawableTitle(title));
  doc.setAuthor(drawableTitle(accountName));
  doc.setCreator("Tender");
  doc.setProducer("Tender (pdf-lib)");
  // A fixed date, so the same invoice always makes the same bytes.
  const created = new Date(invoice.finalized_at ?? invoice.created_at);
  doc.setCreationDate(created);
  doc.setModificationDate(created);
  const regular = await doc.embedFont(StandardFonts.Helvetica);
  const bold = await doc.embedFont(StandardFonts.HelveticaBold);
  const money = (minor: number) => formatMoney(minor, invoice.currency);

  let page = doc.addPage([PAGE.width, PAGE.height]);
  let y = PAGE.height - MARGIN;
  const right = PAGE.width - MARGIN;

  const text = (p: PDFPage, value: string, x: number, at: number, options: { size?: number; font?: PDFFont; color?: typeof INK; maxWidth?: number; alignRight?: boolean } = {}) => {
    const font = options.font ?? regular;
    const size = options.size ?? 10;
    let shown = drawable(font, value);
    if (options.maxWidth !== undefined) shown = fit(font, shown, size, options.maxWidth);
    const width = font.widthOfTextAtSize(shown, size);
    p.drawText(shown, { x: options.alignRight ? x - width : x, y: at, size, font, color: options.color ?? INK });
  };

  // The seller, the title, the status.
  text(page, accountName, MARGIN, y - 18, { size: 18, font: bold, maxWidth: right - MARGIN - 160 });
  text(page, title, right, y - 18, { size: 14, font: bold, alignRight: true });
  text(page, STATUS_LABEL[invoice.status], right, y - 34, { size: 10, font: bold, color: MUTED, alignRight: true });
  if (!invoice.livemode) text(page, "Test mode", MARGIN, y - 34, { size: 9, color: MUTED });
  y -= 64;

  // Dates, and the customer.
  const facts: [string, string][] = [
    ["Invoice number", invoice.number ?? "(draft)"],
    ["Date of issue", day(invoice.finalized_at ?? invoice.created_at)],
    ["Period", `${day(invoice.period_start)} to ${day(invoice.period_end)}`],
    ["Paid", invoice.paid_at ? day(invoice.paid_at) : "-"],
  ];
  let factsY = y;
  for (const [label, value] of facts) {
    text(page, label, MARGIN, factsY, { size: 9, color: MUTED });
    text(page, value, MARGIN + 90, factsY, { size: 10, maxWidth: 180 });
    factsY -= 15;
  }
  const billTo = PAGE.width / 2 + 20;
  text(page, "Bill to", billTo, y, { size: 9, color: MUTED });
  text(page, customer?.name ?? "-", billTo, y - 15, { size: 10, font: bold, maxWidth: right - billTo });
  if (customer) text(page, customer.email, billTo, y - 30, { size: 10, maxWidth: right - billTo });
  y = Math.min(factsY, y - 45) - 20;

  // The lines.
  const columns = { description: MARGIN, period: MARGIN + 230, quantity: MARGIN + 375, amount: right };
  const header = (p: PDFPage, at: number) => {
    text(p, "Description", columns.description, at, { size: 9, font: bold, color: MUTED });
    text(p, "Period", columns.period, at, { size: 9, font: bold, color: MUTED });
    text(p, "Qty", columns.quantity, at, { size: 9, font: bold, color: MUTED, alignRight: true });
    text(p, "Amount", columns.amount, at, { size: 9, font: bold, color: MUTED, alignRight: true });
    p.drawLine({ start: { x: MARGIN, y: at - 6 }, end: { x: right, y: at - 6 }, thickness: 0.5, color: RULE });
    return at - 22;
  };
  y = header(page, y);
  for (const line of invoice.lines) {
    if (y < MARGIN + 140) {
      page = doc.addPage([PAGE.width, PAGE.height]);
      y = header(page, PAGE.height - MARGIN);
    }
    text(page, line.proration ? `${line.description} (proration)` : line.description, columns.description, y, { maxWidth: columns.period - columns.description - 10 });
    text(page, `${day(line.period_start)} to ${day(line.period_end)}`, columns.period, y, { size: 9 });
    text(page, String(line.quantity), columns.quantity, y, { alignRight: true });
    text(page, money(line.amount), columns.amount, y, { alignRight: true });
    y -= 18;
  }
  page.drawLine({ start: { x: MARGIN, y: y + 8 }, end: { x: right, y: y + 8 }, thickness: 0.5, color: RULE });
  y -= 8;

  // The totals, in major units with the currency's exponent.
  const totals: [string, string, boolean][] = [
    ["Subtotal", money(invoice.subtotal), false],
    ["Discount", invoice.discount === 0 ? money(0) : `-${money(invoice.discount)}`, false],
    ["Total", money(invoice.total), true],
    ["Amount due", money(invoice.amount_due), false],
    ["Amount paid", money(invoice.amount_paid), false],
    ["Remaining", money(invoice.status === "open" ? invoice.amount_due - invoice.amount_paid : 0), false],
  ];
  for (const [label, value, strong] of totals) {
    text(page, label, right - 200, y, { size: 10, font: strong ? bold : regular });
    text(page, value, right, y, { size: 10, font: strong ? bold : regular, alignRight: true });
    y -= 16;
  }

  // The invoice's id, on every page.
  for (const p of doc.getPages()) text(p, `${invoice.id}  ·  ${invoice.currency.toUpperCase()}`, MARGIN, MARGIN - 20, { size: 8, color: MUTED });
  return doc.save({ useObjectStreams: false });
}

/** Shortens `value` with an ellipsis until it fits `maxWidth`. */
function fit(font: PDFFont, value: string, size: number, maxWidth: number): string {
  if (font.widthOfTextAtSize(value, size) <= maxWidth) return value;
  let shown = value;
  while (shown.length > 1 && font.widthOfTextAtSize(`${shown}...`, size) > maxWidth) shown = shown.slice(0, -1);
  return `${shown}...`;
}

/** Document metadata is stored as PDF text strings (UTF-16 capable): only control characters go. */
const drawableTitle = (value: string) => value.replace(/[\u0000-\u001f]/g, " ");
