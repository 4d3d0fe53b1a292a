// The hosted invoice page (DESIGN.md "Hosted pages"): the payer of an open or paid invoice opens
// its hosted_invoice_url, with no API key, and sees the invoice as it was issued (seller, buyer,
// lines, totals, status) and downloads its PDF. The URL's secret was made with the invoice
// (src/billing/invoices.ts hostedInvoiceUrl) and is compared in constant time; a wrong one answers
// the same 404 as an unknown invoice. A draft, void or uncollectible invoice's page says so (410).
// An open invoice of a past-due period can be paid there, and an incomplete subscription's first
// invoice continues its first payment's 3-D Secure (src/pages/invoice-pay.tsx).
//
// The page finds the invoice on whichever shard holds it (the URL names no shard, so that an
// account moved to another shard keeps its links): one read by id on each.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../context";
import { sql } from "drizzle-orm";
import { INVOICE_JSON, type InvoiceJson } from "../billing/invoices";
import { renderInvoicePdf, taxLabel } from "../billing/invoice-pdf";
import { createDb } from "../db/client";
import { invoices } from "../db/schema";
import { findOnAnyShard } from "../db/shards";
import { hasPrefix } from "../domain/ids";
import { formatMoney } from "../domain/money";
import type { Bindings } from "../env";
import { HostedLayout, hostedHeaders, messagePage } from "./hosted";
import { InvoiceFooter, InvoiceParties, paidWithOf } from "./invoice-parties";
import { HOSTED_INVOICE_PATH, pageSecretMatches, pageSecretOf } from "./links";
import { InvoicePayment, type PayOffer, offerScripts, payOfferOf, registerInvoicePayment } from "./invoice-pay";
import type { Child } from "hono/jsx";

const SECRET = /^[0-9A-Za-z]{40}$/;

/** The invoice `id` whose page secret is `secret`, from the shard that holds it; null otherwise. */
async function invoiceOf(env: Bindings, id: string, secret: string): Promise<InvoiceJson | null> {
  if (!hasPrefix(id, "invoice") || !SECRET.test(secret)) return null;
  const row = await findOnAnyShard(env, async (view) => {
    const [hit] = await createDb(view.DB).all<{ invoice: string; url: string | null }>(
      // Only where its account lives: a moved account's copy left on its old shard (between the
      // move's switch and its cleanup) is not the invoice.
      sql`SELECT ${INVOICE_JSON} AS invoice, hosted_invoice_url AS url FROM ${invoices}
        WHERE invoices.id = ${id} AND NOT EXISTS (SELECT 1 FROM accounts WHERE accounts.id = invoices.account_id AND accounts.moved_to IS NOT NULL) LIMIT 1`,
    );
    return hit ?? null;
  });
  if (!row) return null;
  return pageSecretMatches(pageSecretOf(row.url), secret) ? (JSON.parse(row.invoice) as InvoiceJson) : null;
}

const SHOWN = new Set(["open", "paid"]);
const date = (iso: string | null) => (iso ? iso.slice(0, 10) : "—");

/** The invoice, or the page that says why it cannot be shown. */
async function load(c: Context<AppEnv>): Promise<InvoiceJson | Response> {
  const invoice = await invoiceOf(c.env, c.req.param("id") ?? "", c.req.param("secret") ?? "");
  if (!invoice) return messagePage(c, 404, "Invoice not found", "This link does not open an invoice. Check that it was copied whole, or ask the seller for a new one.");
  if (!SHOWN.has(invoice.status)) {
    const why = invoice.status === "void" ? "was voided by the seller: nothing is owed on it" : invoice.status === "uncollectible" ? "is no longer collected" : "is not issued yet";
    return messagePage(c, 410, `Invoice ${invoice.number ?? ""}`.trim(), `This invoice ${why}.`, invoice.livemode);
  }
  return invoice;
}

function InvoiceView({ invoice, pdf, payment, scripts, chargedAgain = true }: { invoice: InvoiceJson; pdf: string; payment?: Child; scripts?: string[]; chargedAgain?: boolean }) {
  const money = (minor: number) => formatMoney(minor, invoice.currency);
  const paid = invoice.status === "paid";
  return (
    <HostedLayout title={`Invoice ${invoice.number} from ${invoice.account_name ?? "the seller"}`} livemode={invoice.livemode} scripts={scripts}>
      <p class="muted">{invoice.account_name}</p>
      <h1>Invoice {invoice.number}</h1>
      <p class="amount" data-amount-due>
        {paid ? `${money(invoice.amount_paid)} paid` : `${money(invoice.amount_due)} due`}
      </p>
      <p class="muted" data-status={invoice.status}>
        {paid ? `Paid ${date(invoice.paid_at)}` : `Issued ${date(invoice.finalized_at)}`}
        {invoice.customer_name || invoice.customer_email ? ` · To ${[invoice.customer_name, invoice.customer_email].filter(Boolean).join(", ")}` : ""}
      </p>
      <InvoiceParties invoice={invoice} />
      <table>
        <thead>
          <tr>
            <th>Description</th>
            <th class="num">Amount</th>
          </tr>
        </thead>
        <tbody>
          {invoice.lines.map((line) => (
            <tr>
              <td>
                {line.description}
                <div class="muted">
                  {date(line.period_start)} – {date(line.period_end)}
                </div>
              </td>
              <td class="num">{money(line.amount)}</td>
            </tr>
          ))}
          <tr>
            <td>Subtotal</td>
            <td class="num">{money(invoice.subtotal)}</td>
          </tr>
          {invoice.discount > 0 ? (
            <tr>
              <td>Discount</td>
              <td class="num">−{money(invoice.discount)}</td>
            </tr>
          ) : null}
          {invoice.total_tax_amounts.map((t) => (
            <tr data-tax-rate={t.tax_rate}>
              <td>{taxLabel(t)}</td>
              <td class="num">{money(t.amount)}</td>
            </tr>
          ))}
          <tr>
            <th>Total</th>
            <th class="num">{money(invoice.total)}</th>
          </tr>
          {invoice.starting_balance !== 0 || invoice.ending_balance !== 0 ? (
            <>
              <tr data-balance="applied">
                <td>Applied balance</td>
                <td class="num">−{money(invoice.ending_balance - invoice.starting_balance)}</td>
              </tr>
              <tr data-balance="starting">
                <td class="muted">Starting balance</td>
                <td class="num muted">{money(invoice.starting_balance)}</td>
              </tr>
              <tr data-balance="ending">
                <td class="muted">Ending balance</td>
                <td class="num muted">{money(invoice.ending_balance)}</td>
              </tr>
              <tr>
                <th>Amount due</th>
                <th class="num">{money(invoice.amount_due)}</th>
              </tr>
            </>
          ) : null}
        </tbody>
      </table>
      <InvoiceFooter invoice={invoice} />
      <a class="button secondary" href={pdf} download={`${invoice.number}.pdf`}>
        Download PDF
      </a>
      {payment}
      {paid ? null : chargedAgain ? (
        <p class="muted">
          {invoice.account_name ?? "The seller"} will charge the card on file again; questions about this invoice go to {invoice.account_email ?? "the seller"}.
        </p>
      ) : (
        <p class="muted">Questions about this invoice go to {invoice.account_email ?? "the seller"}.</p>
      )}
    </HostedLayout>
  );
}

export function registerInvoicePage(app: OpenAPIHono<AppEnv>) {
  const path = `${HOSTED_INVOICE_PATH}/:id/:secret`;
  // The page, with the Pay part of an open invoice (src/pages/invoice-pay.tsx).
  const render = (c: Context<AppEnv>, invoice: InvoiceJson, offer: PayOffer, status: 200 | 400 | 402 | 409) => {
    const page = `${HOSTED_INVOICE_PATH}/${invoice.id}/${c.req.param("secret")}`;
    const { scripts, stripeJs } = offerScripts(offer);
    return c.html(
      <InvoiceView invoice={invoice} pdf={`${page}/pdf`} scripts={scripts} chargedAgain={offer.kind !== "authenticate"} payment={<InvoicePayment invoice={invoice} offer={offer} action={page} />} />,
      status,
      hostedHeaders(stripeJs),
    );
  };
  app.get(path, async (c) => {
    const invoice = await load(c);
    if (invoice instanceof Response) return invoice;
    return render(c, invoice, await payOfferOf(c.env, invoice, c.req.query("payment_id")), 200);
  });
  registerInvoicePayment(app, path, { load, render, message: (c, status, title, text, livemode) => messagePage(c, status, title, text, livemode) });
  app.get(`${path}/pdf`, async (c) => {
    const invoice = await load(c);
    if (invoice instanceof Response) return invoice;
    const bytes = await renderInvoicePdf({ invoice, paidWith: await paidWithOf(c.env, invoice.id) });
    return c.body(bytes as unknown as ArrayBuffer, 200, {
      ...hostedHeaders(null),
      "Content-Type": "application/pdf",
      "Content-Disposition": `inline; filename="${invoice.number ?? invoice.id}.pdf"`,
    });
  });
}
