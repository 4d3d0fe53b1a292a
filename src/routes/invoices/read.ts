// GET /invoices, GET /invoices/{id} and GET /invoices/{id}/pdf. An invoice is read with its lines
// in one statement (src/billing/invoices.ts INVOICE_JSON), with the key check: one round trip.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { type SQL, asc, desc, eq, gt, lt, sql } from "drizzle-orm";
import { INVOICE_JSON, INVOICE_PAID_WITH, type InvoiceJson } from "../../billing/invoices";
import { type PaidWith, renderInvoicePdf } from "../../billing/invoice-pdf";
import { rawStatement, type Statement } from "../../db/batch";
import { invoices } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { notFound } from "../../lib/errors";
import { listSchema, paginate } from "../pagination";
import { withLiveKey } from "../reads";
import { apiRoute, json } from "../openapi";
import { invoiceId, invoiceRows, readInvoice, rowsOf, tags } from "./common";
import { InvoiceListQuery, InvoiceSchema } from "./schema";

const list = apiRoute({
  method: "get",
  path: "/invoices",
  tags,
  operationId: "listInvoices",
  summary: "List invoices",
  description: "Invoices, newest first, optionally of one subscription, one user or in one status. Each carries its lines.",
  scope: "invoices:read",
  request: { query: InvoiceListQuery },
  responses: { 200: json(listSchema(InvoiceSchema, "InvoiceList"), "A page of invoices, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/invoices/{id}",
  tags,
  operationId: "getInvoice",
  summary: "Read an invoice",
  scope: "invoices:read",
  request: { params: invoiceId },
  responses: { 200: json(InvoiceSchema, "The invoice, with its lines.") },
});

const pdf = apiRoute({
  method: "get",
  path: "/invoices/{id}/pdf",
  tags,
  operationId: "getInvoicePdf",
  summary: "Download an invoice as a PDF",
  description:
    "The invoice as a PDF document (A4), made by Tender: the seller and the customer as the invoice names them, with their addresses and tax ids (copied when it was finalized: a later change never alters it), the number, the dates (issue, period, payment; a test clock's for a clocked invoice, with \"Test clock time\"), the card that paid it, every line with its period, quantity, unit price and amount (a proration, a credit or a tiered price says so in place of a unit price; a long description wraps), the subtotal, the discount with its coupon's name, each tax rate, the total and amount paid, in major units with the currency's exponent, and the seller's invoice footer. Every page says \"Page n of N\". Names in any script (Latin, Greek, Cyrillic, Arabic, Hebrew, CJK) are drawn with embedded fonts. A draft has no number yet and says so.",
  scope: "invoices:read",
  request: { params: invoiceId },
  responses: {
    200: {
      description: "The PDF document.",
      headers: z.object({ "Content-Disposition": z.string().openapi({ description: 'inline; filename="<number>.pdf"', example: 'inline; filename="9V3K1QZD-0001.pdf"' }) }),
      content: { "application/pdf": { schema: z.string().openapi({ type: "string", format: "binary" }) } },
    },
  },
});

export function registerReadInvoices(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async function listInvoices(c) {
    const query = c.req.valid("query");
    const { auth } = c.var;
    const filters: SQL[] = [];
    if (query.subscription_id !== undefined) filters.push(eq(invoices.subscriptionId, query.subscription_id));
    if (query.user_id !== undefined) filters.push(eq(invoices.userId, query.user_id));
    if (query.status !== undefined) filters.push(eq(invoices.status, query.status));
    const page = await paginate({
      query,
      validCursor: (id) => hasPrefix(id, "invoice"),
      serialize: (row: { invoice: string }) => JSON.parse(row.invoice) as InvoiceJson,
      fetch: async (direction, cursor, limit) => {
        const where = owned(
          invoices,
          auth,
          ...filters,
          direction === "after" ? lt(invoices.id, cursor as string) : undefined,
          direction === "before" ? gt(invoices.id, cursor as string) : undefined,
        );
        const order = direction === "before" ? asc(invoices.id) : desc(invoices.id);
        return rowsOf<{ invoice: string }>(await withLiveKey(c, invoiceRows(c, where, sql`ORDER BY ${order} LIMIT ${limit}`)));
      },
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getInvoice(c) {
    const { id } = c.req.valid("param");
    return c.json(await readInvoice(c, id), 200);
  });

  app.openapi(pdf, async function getInvoicePdf(c) {
    const { id } = c.req.valid("param");
    // The PDF says what the invoice says: its parties as they were when it was finalized.
    const read = rawStatement(
      c.var.db,
      sql`SELECT ${INVOICE_JSON} AS invoice, ${INVOICE_PAID_WITH} AS paid_with FROM ${invoices} WHERE ${owned(invoices, c.var.auth, eq(invoices.id, id))} LIMIT 1`,
    ) as Statement & { result?: unknown };
    const [row] = rowsOf<{ invoice: string; paid_with: string | null }>(await withLiveKey(c, read));
    if (!row) throw notFound("invoice", id);
    const invoice = JSON.parse(row.invoice) as InvoiceJson;
    const bytes = await renderInvoicePdf({ invoice, paidWith: row.paid_with === null ? null : (JSON.parse(row.paid_with) as PaidWith) });
    const filename = `${invoice.number ?? invoice.id}.pdf`;
    return c.body(bytes as unknown as ArrayBuffer, 200, {
      "Content-Type": "application/pdf",
      "Content-Disposition": `inline; filename="${filename}"`,
      "Cache-Control": "private, no-store",
    }) as never;
  });
}
