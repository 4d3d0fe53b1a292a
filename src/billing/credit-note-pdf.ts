// A credit note as a PDF, made as the invoice's is (src/billing/invoice-pdf.ts: pdf-lib, the
// embedded Noto fonts of src/billing/pdf-fonts.ts, so a name in any script prints as written). It
// says what the note says: its number, the invoice it corrects (its number and parties as the
// invoice was issued), each line credited with the tax in it, the tax per rate (named as on the
// invoice), the total, how it was paid out, the reason and the memo.
import { PDFDocument, type PDFPage, rgb } from "pdf-lib";
import { formatMoney } from "../domain/money";
import type { CreditNoteJson } from "./credit-notes";
import { taxLabel } from "./invoice-pdf";
import type { InvoiceJson } from "./invoices";
import { PdfText, type Weight } from "./pdf-fonts";

const PAGE = { width: 595.28, height: 841.89 }; // A4, in points
const MARGIN = 48;
const INK = rgb(0.1, 0.1, 0.12);
const MUTED = rgb(0.42, 0.42, 0.46);
const RULE = rgb(0.82, 0.82, 0.85);

const REASON_LABEL: Record<NonNullable<CreditNoteJson["reason"]>, string> = {
  duplicate: "Duplicate",
  fraudulent: "Fraudulent",
  order_change: "Order change",
  product_unsatisfactory: "Product unsatisfactory",
};

/** The credit note's PDF bytes; `invoice` is the invoice it corrects (null only if it is gone). */
export async function renderCreditNotePdf({ note, invoice }: { note: CreditNoteJson; invoice: InvoiceJson | null }): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const title = `Credit note ${note.number}`;
  doc.setTitle(title);
  doc.setCreator("Tender");
  doc.setProducer("Tender (pdf-lib)");
  const created = new Date(note.created_at);
  doc.setCreationDate(created);
  doc.setModificationDate(created);
  const fonts = await PdfText.for(doc);
  const money = (minor: number) => formatMoney(minor, note.currency);
  let page = doc.addPage([PAGE.width, PAGE.height]);
  const right = PAGE.width - MARGIN;
  let y = PAGE.height - MARGIN;

  const text = async (p: PDFPage, value: string, x: number, at: number, options: { size?: number; weight?: Weight; color?: typeof INK; alignRight?: boolean } = {}) => {
    const size = options.size ?? 10;
    const weight = options.weight ?? "regular";
    const width = options.alignRight ? await fonts.width(value, size, weight) : 0;
    await fonts.draw(p, value, x - width, at, { size, weight, color: options.color ?? INK });
  };
  const block = async (p: PDFPage, value: string, x: number, at: number, maxWidth: number, leading: number, options: { size?: number; weight?: Weight; color?: typeof INK } = {}) => {
    const lines = await fonts.wrap(value, options.size ?? 10, maxWidth, options.weight);
    for (const [i, line] of lines.entries()) await text(p, line, x, at - i * leading, options);
    return lines.length;
  };

  // The seller (as the invoice names it), the title, the status.
  const sellerLines = await block(page, invoice?.account_name ?? "", MARGIN, y - 18, right - MARGIN - 200, 20, { size: 18, weight: "bold" });
  await text(page, title, right, y - 18, { size: 14, weight: "bold", alignRight: true });
  await text(page, note.status === "void" ? "VOID" : "ISSUED", right, y - 34, { size: 10, weight: "bold", color: MUTED, alignRight: true });
  if (!note.livemode) await text(page, "Test mode", right, y - 48, { size: 9, color: MUTED, alignRight: true });
  y = Math.min(y - 18 - (sellerLines - 1) * 20, y - 48) - 30;

  const paidOut = note.refund_id ? `Refunded to the card (${note.refund_id})` : "Credited to the customer's balance";
  const facts: [string, string][] = [
    ["Credit note", note.number],
    ["Invoice", invoice?.number ?? note.invoice_id],
    ["Date of issue", note.created_at.slice(0, 10)],
    ["Reason", note.reason ? REASON_LABEL[note.reason] : "-"],
    ["Paid out", paidOut],
  ];
  let factsY = y;
  for (const [label, value] of facts) {
    await text(page, label, MARGIN, factsY, { size: 9, color: MUTED });
    await text(page, value, MARGIN + 90, factsY);
    factsY -= 15;
  }
  const creditTo = PAGE.width / 2 + 40;
  await text(page, "Credit to", creditTo, y, { size: 9, color: MUTED });
  let buyerY = y - 15;
  buyerY -= (await block(page, invoice?.customer_name || "-", creditTo, buyerY, right - creditTo, 14, { weight: "bold" })) * 14;
  if (invoice?.customer_email) buyerY -= (await block(page, invoice.customer_email, creditTo, buyerY, right - creditTo, 14)) * 14;
  y = Math.min(factsY, buyerY) - 20;

  // The lines credited.
  const columns = { description: MARGIN, tax: right - 110, amount: right };
  const header = async (p: PDFPage, at: number) => {
    await text(p, "Description", columns.description, at, { size: 9, weight: "bold", color: MUTED });
    await text(p, "Tax", columns.tax, at, { size: 9, weight: "bold", color: MUTED, alignRight: true });
    await text(p, "Amount", columns.amount, at, { size: 9, weight: "bold", color: MUTED, alignRight: true });
    p.drawLine({ start: { x: MARGIN, y: at - 6 }, end: { x: right, y: at - 6 }, thickness: 0.5, color: RULE });
    return at - 22;
  };
  y = await header(page, y);
  for (const line of note.lines) {
    const wrapped = await fonts.wrap(line.description, 10, columns.tax - columns.description - 80);
    const height = (wrapped.length - 1) * 13 + 18;
    if (y - height < MARGIN + 160) {
      page = doc.addPage([PAGE.width, PAGE.height]);
      y = await header(page, PAGE.height - MARGIN);
    }
    for (const [i, part] of wrapped.entries()) await text(page, part, columns.description, y - i * 13);
    await text(page, money(line.tax_amounts.reduce((s, t) => s + t.amount, 0)), columns.tax, y, { alignRight: true });
    await text(page, money(line.amount), columns.amount, y, { alignRight: true });
    y -= height;
  }
  page.drawLine({ start: { x: MARGIN, y: y + 8 }, end: { x: right, y: y + 8 }, thickness: 0.5, color: RULE });
  y -= 8;

  // The totals: the subtotal, each rate's tax (named as on the invoice), the total credited.
  const rateOf = (rate: string) => invoice?.total_tax_amounts.find((t) => t.tax_rate === rate);
  const totals: [string, string, boolean][] = [
    ["Subtotal", money(note.subtotal), false],
    ...note.tax_amounts.map((t): [string, string, boolean] => {
      const named = rateOf(t.tax_rate);
      return [named ? taxLabel(named) : `Tax${t.inclusive ? " (included)" : ""}`, money(t.amount), false];
    }),
    ["Total credited", money(note.amount), true],
  ];
  for (const [label, value, strong] of totals) {
    const weight: Weight = strong ? "bold" : "regular";
    await text(page, label, right - 220, y, { weight });
    await text(page, value, right, y, { weight, alignRight: true });
    y -= 16;
  }
  if (note.memo) {
    y -= 14;
    await text(page, "Memo", MARGIN, y, { size: 9, color: MUTED });
    await block(page, note.memo, MARGIN, y - 15, right - MARGIN, 14);
  }
  for (const p of doc.getPages()) await text(p, `${note.id}  ·  ${note.currency.toUpperCase()}`, MARGIN, MARGIN - 20, { size: 8, color: MUTED });
  return doc.save({ useObjectStreams: false });
}
