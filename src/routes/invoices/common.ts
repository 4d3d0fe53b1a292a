// What the invoice operations share: the tag and id parameter, the one read of an invoice as the
// API answers it (src/billing/invoices.ts INVOICE_JSON, with its lines), and its 409s.
import type { Context } from "hono";
import { type SQL, eq, sql } from "drizzle-orm";
import { INVOICE_JSON, type InvoiceJson, type InvoiceStatus } from "../../billing/invoices";
import { rawStatement, type Statement } from "../../db/batch";
import { invoices } from "../../db/schema";
import { owned } from "../../db/scope";
import type { AppEnv } from "../../context";
import { conflict, notFound } from "../../lib/errors";
import { idParam } from "../openapi";
import { withLiveKey } from "../reads";

export const tags = ["Invoices"];
export const invoiceId = idParam("invoice", "in_01jd2x4k5m6n7p8q9r0s1t2v3w");

/** A statement reading invoices as the API answers them (one `invoice` JSON text per row). */
export const invoiceRows = (c: Context<AppEnv>, where: SQL, tail: SQL = sql``): Statement & { result?: { invoice: string }[] } =>
  rawStatement(c.var.db, sql`SELECT ${INVOICE_JSON} AS invoice FROM ${invoices} WHERE ${where} ${tail}`) as Statement & { result?: { invoice: string }[] };

/** The rows of a raw statement's batch result. */
export const rowsOf = <T>(result: unknown): T[] => (result as { results?: T[] }).results ?? [];

/** The caller's invoice `id` as the API answers it, with the key check, in one round trip; 404 when absent. */
export async function readInvoice(c: Context<AppEnv>, id: string): Promise<InvoiceJson> {
  const [row] = rowsOf<{ invoice: string }>(await withLiveKey(c, invoiceRows(c, owned(invoices, c.var.auth, eq(invoices.id, id)), sql`LIMIT 1`)));
  if (!row) throw notFound("invoice", id);
  return JSON.parse(row.invoice) as InvoiceJson;
}

/** The invoice as the batch committed it, as JSON text: a write's answer and its stored answer. */
export const invoiceAnswerSql = (id: string) => sql`(SELECT ${INVOICE_JSON} FROM ${invoices} WHERE invoices.id = ${id})`;

export const notOpen = (id: string, status: InvoiceStatus, action: "voided" | "paid") =>
  conflict(
    status === "paid" ? "invoice_paid" : "invoice_not_open",
    `Invoice ${id} is ${status}; only an open invoice can be ${action}.`,
  );

export const invoiceChanged = () =>
  conflict("invoice_not_open", "The invoice changed while this request ran (it was paid or voided meanwhile); read it and retry.");
