// Credit notes: issue one for a finalized invoice (refunded to the card, or credited to the user's
// balance), list and read them, void one that credited the balance. What a note credits each line
// is src/domain/credit-notes.ts; its batch (numbering, the guards that hold it under concurrency,
// the payout) is src/billing/credit-notes.ts.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { type SQL, asc, desc, eq, gt, lt, sql } from "drizzle-orm";
import type { Context } from "hono";
import { hasScope } from "../../auth/scopes";
import { CREDIT_NOTE_JSON, type CreditNoteJson, CREDIT_NOTE_FAILURES, type CreditNoteReason, creditNoteJsonSql, issueCreditNoteWrites, issuedNotesOf, voidCreditNoteWrites } from "../../billing/credit-notes";
import { INVOICE_JSON, type InvoiceJson } from "../../billing/invoices";
import { renderCreditNotePdf } from "../../billing/credit-note-pdf";
import { type FailureMap, rawStatement, type Statement } from "../../db/batch";
import { creditNotes, invoices } from "../../db/schema";
import { owned } from "../../db/scope";
import { type CreditNoteRequest, creditedFrom, planCreditNote } from "../../domain/credit-notes";
import { hasPrefix, newId } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { clock } from "../../lib/clock";
import { type ApiError, conflict, invalidRequest, notFound, permissionError } from "../../lib/errors";
import { sendSoon } from "../../lib/queue";
import { REFUND_FAILURES, refundWrites } from "../../payments/refund-writes";
import { refundSettlementMessages } from "../../payments/settle-refund";
import { processorForRequest } from "../../processor";
import { type EmittedEvent } from "../../webhooks/outbox";
import { rowsOf } from "../invoices/common";
import { listSchema, paginate } from "../pagination";
import { readById, withLiveKey, withLiveKeyAll } from "../reads";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { commit } from "../write-path";
import { CreateCreditNoteBody, CreditNoteListQuery, CreditNoteSchema } from "./schema";

const tags = ["Credit notes"];
const creditNoteId = idParam("credit note", "cn_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/credit-notes",
  tags,
  operationId: "createCreditNote",
  summary: "Issue a credit note",
  description:
    "Corrects a finalized invoice (open, paid or uncollectible; a draft or a void invoice answers 409 invoice_not_creditable, as does an open one whose charge is still settling, which a failed charge voids: an incomplete subscription's first, or a change's at the processor), which itself never changes. Give `amount` (what to credit in all, tax included, spread over the lines in proportion to what is left of each) or `lines` (what to credit each line, tax included). The tax in each line's credit is the line's tax pro rata over the line's notes so far with this one, rounded once per line and rate, less what earlier notes carried (many small notes never carry more than the line's tax). " +
    "The invoice's credit notes not void never credit more than its total, nor a line more than it cost: 400 credit_note_exceeds_invoice, however many are issued at once. " +
    "`refund: true` refunds the invoice's card payment for the note's amount (one refund, `refund_id`; the key also needs refunds:write); `refund: false` credits the user's `balance`, which later invoices consume. Numbers are gap-free per account and mode, in their own sequence (<PREFIX>-CN-0001). Emits credit_note.created (and refund.initiated for a refund).",
  scope: "credit_notes:write",
  request: jsonBodyOf(CreateCreditNoteBody),
  responses: { 201: json(CreditNoteSchema, "The credit note, issued.") },
});

const list = apiRoute({
  method: "get",
  path: "/credit-notes",
  tags,
  operationId: "listCreditNotes",
  summary: "List credit notes",
  description: "Credit notes, newest first, optionally of one invoice.",
  scope: "credit_notes:read",
  request: { query: CreditNoteListQuery },
  responses: { 200: json(listSchema(CreditNoteSchema, "CreditNoteList"), "A page of credit notes, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/credit-notes/{id}",
  tags,
  operationId: "getCreditNote",
  summary: "Read a credit note",
  scope: "credit_notes:read",
  request: { params: creditNoteId },
  responses: { 200: json(CreditNoteSchema, "The credit note.") },
});

const voidNote = apiRoute({
  method: "post",
  path: "/credit-notes/{id}/void",
  tags,
  operationId: "voidCreditNote",
  summary: "Void a credit note",
  description:
    "Takes back the credit a note put on the user's balance, while the balance still holds it (409 credit_note_balance_used once a later invoice used it); the note turns void, keeps its number, and no longer counts against its invoice. A note that refunded the card cannot be voided (409 credit_note_refunded: the money went back). Emits credit_note.voided.",
  scope: "credit_notes:write",
  request: { params: creditNoteId },
  responses: { 200: json(CreditNoteSchema, "The credit note, void.") },
});

const pdf = apiRoute({
  method: "get",
  path: "/credit-notes/{id}/pdf",
  tags,
  operationId: "getCreditNotePdf",
  summary: "Download a credit note as a PDF",
  description: "The credit note as a PDF document (A4): its number, the invoice it corrects (its number), the seller and customer as the invoice names them, each line credited with its tax, the tax per rate, the total, how it was paid out, the reason and the memo.",
  scope: "credit_notes:read",
  request: { params: creditNoteId },
  responses: {
    200: {
      description: "The PDF document.",
      headers: z.object({ "Content-Disposition": z.string().openapi({ description: 'inline; filename="<number>.pdf"', example: 'inline; filename="9V3K1QZD-CN-0001.pdf"' }) }),
      content: { "application/pdf": { schema: z.string().openapi({ type: "string", format: "binary" }) } },
    },
  },
});

type Read<R> = Statement & { result?: R };

/** A statement reading the caller's credit notes as the API answers them. */
const noteRows = (c: Context<AppEnv>, where: SQL, tail: SQL = sql``) =>
  rawStatement(c.var.db, sql`SELECT ${CREDIT_NOTE_JSON} AS note FROM ${creditNotes} WHERE ${where} ${tail}`) as Read<{ note: string }[]>;

/** The caller's credit note `id` as the API answers it; 404 when absent (another account's, the other mode's). */
async function readCreditNote(c: Context<AppEnv>, id: string): Promise<CreditNoteJson> {
  const [row] = rowsOf<{ note: string }>(await withLiveKey(c, noteRows(c, owned(creditNotes, c.var.auth, eq(creditNotes.id, id)), sql`LIMIT 1`)));
  if (!row) throw notFound("credit_note", id);
  return JSON.parse(row.note) as CreditNoteJson;
}

/** A refund's reason from a credit note's: Stripe's refund reasons are fewer. */
const refundReason = (reason: CreditNoteReason | null) => (reason === "duplicate" || reason === "fraudulent" ? reason : "requested_by_customer");

/** How a refused refund of the invoice's payment answers (as POST /refunds answers it). */
export const refundFailures = (paymentId: string, amount: number): FailureMap => ({
  [REFUND_FAILURES.paymentMissing]: () => conflict("invoice_not_paid", `The payment that paid the invoice (${paymentId}) is not there to refund.`),
  [REFUND_FAILURES.paymentFailed]: () => conflict("payment_not_refundable", `Payment '${paymentId}' failed, so nothing was charged and there is nothing to refund.`),
  [REFUND_FAILURES.paymentRefunded]: () => conflict("payment_already_refunded", `Payment '${paymentId}' has already been fully refunded.`),
  [REFUND_FAILURES.paymentNotCaptured]: () => conflict("payment_not_refundable", `Payment '${paymentId}' has captured nothing, so there is nothing to refund.`),
  [REFUND_FAILURES.processorRetired]: () =>
    conflict("payment_processor_retired", `Payment '${paymentId}' was charged through a Stripe account that is no longer connected, so Tender cannot refund it: credit the balance (refund: false), or connect that account again.`),
  [REFUND_FAILURES.exceedsPayment]: () =>
    invalidRequest("refund_exceeds_payment", `A refund of ${amount} is more than payment '${paymentId}' has left to refund (some of it was refunded already): credit the balance (refund: false) instead, or credit less.`, "amount"),
});

export const creditNoteExceeded = (amount: number) => () =>
  invalidRequest(
    "credit_note_exceeds_invoice",
    `A credit note of ${amount} would take the invoice's credit notes past its total, or a line past what it cost: another credit note was issued for it meanwhile. Read its credit notes (GET /credit-notes?invoice_id=) and credit what is left.`,
    "amount",
  );

export const creditNoteFailures = (amount: number): FailureMap => ({
  [CREDIT_NOTE_FAILURES.exceeds]: creditNoteExceeded(amount),
  [CREDIT_NOTE_FAILURES.invoiceChanged]: () => conflict("invoice_not_creditable", "The invoice was voided while this request ran; a void invoice takes no credit note."),
  [CREDIT_NOTE_FAILURES.invoiceUnsettled]: () =>
    conflict(
      "invoice_not_creditable",
      "The invoice's charge is still being settled (an incomplete subscription's first charge, or a change's charge at the processor), and a failed charge voids it: credit it once it is paid, or open for dunning.",
    ),
  [CREDIT_NOTE_FAILURES.balanceCurrency]: () =>
    invalidRequest(
      "balance_currency_mismatch",
      "The user's balance holds credit in another currency, and a balance holds one currency at a time: refund this credit note to the card (refund: true) instead.",
      "refund",
    ),
});

/** The planning error of src/domain/credit-notes.ts as an API error. */
export function planError(plan: Exclude<ReturnType<typeof planCreditNote>, { ok: true }>): ApiError {
  return invalidRequest(plan.code, plan.message, plan.param);
}

/** The caller's invoice and its credit notes not void, in one round trip with the key check; 404 (naming invoice_id) when absent. */
export async function readCreditable(c: Context<AppEnv>, invoiceId: string) {
  if (!hasPrefix(invoiceId, "invoice")) throw notFound("invoice", invoiceId, "invoice_id");
  const [invoiceRead, notesRead] = await withLiveKeyAll<[unknown, unknown]>(c, [
    rawStatement(c.var.db, sql`SELECT ${INVOICE_JSON} AS invoice FROM ${invoices} WHERE ${owned(invoices, c.var.auth, eq(invoices.id, invoiceId))} LIMIT 1`),
    issuedNotesOf(c.var.db, invoiceId),
  ]);
  const [row] = rowsOf<{ invoice: string }>(invoiceRead);
  if (!row) throw notFound("invoice", invoiceId, "invoice_id");
  const invoice = JSON.parse(row.invoice) as InvoiceJson;
  const credited = creditedFrom(rowsOf<{ amount: number; lines: string }>(notesRead).map((n) => ({ amount: n.amount, lines: JSON.parse(n.lines) })));
  return { invoice, credited };
}

export function registerCreditNotes(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createCreditNote(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    if (body.amount !== undefined && body.lines !== undefined) {
      throw invalidRequest("parameter_invalid", "Give amount or lines, not both: amount credits the invoice as a whole, lines credits the lines you name.", "lines");
    }
    if (body.amount === undefined && body.lines === undefined) {
      throw invalidRequest("parameter_missing", "Give amount (what to credit in all, tax included) or lines (what to credit each invoice line).", "amount");
    }
    // A refund moves money: the key must be allowed to refund too.
    if (body.refund && !hasScope(auth.scopes, "refunds:write")) throw permissionError("refunds:write");
    // The refund settles at the processor: a mode without one refunds nothing (400 livemode_unavailable).
    if (body.refund) await processorForRequest(c);
    const { invoice, credited } = await readCreditable(c, body.invoice_id);
    if (invoice.status === "draft" || invoice.status === "void") {
      throw conflict("invoice_not_creditable", `Invoice ${invoice.id} is ${invoice.status}; only a finalized invoice (open, paid or uncollectible) takes a credit note.`);
    }
    if (body.refund && (invoice.status !== "paid" || invoice.payment_id === null || invoice.amount_paid === 0)) {
      throw conflict(
        "invoice_not_paid",
        `Invoice ${invoice.id} was not paid by a card payment (it is ${invoice.status}${invoice.status === "paid" ? ", with nothing charged" : ""}), so there is nothing to refund: credit the user's balance (refund: false).`,
      );
    }
    if (!body.refund && invoice.user_id === null) throw conflict("invoice_not_creditable", `Invoice ${invoice.id} has no user whose balance could be credited.`);
    const request: CreditNoteRequest = body.amount !== undefined ? { amount: body.amount } : { lines: body.lines! };
    const plan = planCreditNote(invoice, credited, request);
    if (!plan.ok) throw planError(plan);
    const { note } = plan;

    const id = newId("creditNote", now);
    const refundId = body.refund ? newId("refund", now) : null;
    const issued = issueCreditNoteWrites(db, {
      id,
      tenant: auth,
      invoice: { id: invoice.id, userId: invoice.user_id, currency: invoice.currency },
      note,
      reason: body.reason ?? null,
      memo: body.memo ?? null,
      payout: refundId ? { kind: "refund", refundId } : { kind: "balance" },
      at: now,
    });
    const statements = [...issued.statements];
    const events: EmittedEvent[] = [...issued.events];
    if (refundId) {
      const refund = refundWrites(db, {
        accountId: auth.accountId,
        livemode: auth.livemode,
        paymentId: invoice.payment_id!,
        refundId,
        amount: note.amount,
        reason: refundReason(body.reason ?? null),
        at: now,
      });
      statements.push(...refund.statements);
      events.push(...refund.events);
    }
    const { answered } = await commit(
      c,
      { statements, events, answer: db.select({ note: sql<string>`${creditNoteJsonSql(id)}` }).from(creditNotes).where(eq(creditNotes.id, id)) },
      201,
      creditNoteJsonSql(id),
      { failures: { ...creditNoteFailures(note.amount), ...(refundId ? refundFailures(invoice.payment_id!, note.amount) : {}) } },
    );
    if (refundId) {
      sendSoon(c.env.JOB_QUEUE, refundSettlementMessages([refundId]), (p) => c.executionCtx.waitUntil(p), (error) => {
        console.error(JSON.stringify({ message: "refund settlement enqueue failed; the sweep will retry", refund: refundId, error: String(error) }));
      });
    }
    const [row] = answered as { note: string }[];
    return c.json(JSON.parse(row.note) as CreditNoteJson, 201);
  });

  app.openapi(list, async function listCreditNotes(c) {
    const query = c.req.valid("query");
    const { auth } = c.var;
    const page = await paginate({
      query,
      validCursor: (id) => hasPrefix(id, "creditNote"),
      serialize: (row: { note: string }) => JSON.parse(row.note) as CreditNoteJson,
      fetch: async (direction, cursor, limit) => {
        const where = owned(
          creditNotes,
          auth,
          query.invoice_id !== undefined ? eq(creditNotes.invoiceId, query.invoice_id) : undefined,
          direction === "after" ? lt(creditNotes.id, cursor as string) : undefined,
          direction === "before" ? gt(creditNotes.id, cursor as string) : undefined,
        );
        const order = direction === "before" ? asc(creditNotes.id) : desc(creditNotes.id);
        return rowsOf<{ note: string }>(await withLiveKey(c, noteRows(c, where, sql`ORDER BY ${order} LIMIT ${limit}`)));
      },
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getCreditNote(c) {
    const { id } = c.req.valid("param");
    return c.json(await readCreditNote(c, id), 200);
  });

  app.openapi(voidNote, async function voidCreditNote(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const now = clock.now();
    const row = await readById(c, creditNotes, id, "credit_note");
    if (row.status === "void") throw conflict("credit_note_void", `Credit note ${id} is already void.`);
    if (row.refundId !== null) {
      throw conflict("credit_note_refunded", `Credit note ${id} refunded the card (refund ${row.refundId}): the money went back, so it cannot be voided.`);
    }
    const writes = voidCreditNoteWrites(db, auth, row, now);
    const { answered } = await commit(
      c,
      { ...writes, answer: db.select({ note: sql<string>`${creditNoteJsonSql(id)}` }).from(creditNotes).where(eq(creditNotes.id, id)) },
      200,
      creditNoteJsonSql(id),
      {
        failures: {
          [CREDIT_NOTE_FAILURES.noteChanged]: () => conflict("credit_note_void", `Credit note ${id} was voided meanwhile.`),
          [CREDIT_NOTE_FAILURES.balanceUsed]: () =>
            conflict("credit_note_balance_used", `The user's balance no longer holds the ${row.amount} credit note ${id} put there (a later invoice used it), so it cannot be taken back.`),
        },
      },
    );
    const [answer] = answered as { note: string }[];
    return c.json(JSON.parse(answer.note) as CreditNoteJson, 200);
  });

  app.openapi(pdf, async function getCreditNotePdf(c) {
    const { id } = c.req.valid("param");
    const note = await readCreditNote(c, id);
    // The invoice it corrects, as issued (its number, its parties).
    const [read] = (await c.var.db.batch([rawStatement(c.var.db, sql`SELECT ${INVOICE_JSON} AS invoice FROM ${invoices} WHERE invoices.id = ${note.invoice_id} LIMIT 1`)] as [Statement])) as unknown[];
    const [row] = rowsOf<{ invoice: string }>(read);
    const invoice = row ? (JSON.parse(row.invoice) as InvoiceJson) : null;
    const bytes = await renderCreditNotePdf({ note, invoice });
    return c.body(bytes as unknown as ArrayBuffer, 200, {
      "Content-Type": "application/pdf",
      "Content-Disposition": `inline; filename="${note.number}.pdf"`,
      "Cache-Control": "private, no-store",
    }) as never;
  });
}
