// Credit notes: issuing, numbering and paying out a credit note, and voiding one, each as the
// statements of the caller's one batch (POST /credit-notes, POST /refunds of an invoiced payment,
// POST /credit-notes/{id}/void). The maths (what each line is credited, the tax in it) is
// src/domain/credit-notes.ts; this is the SQL that makes it hold under concurrency:
//
// - The batch's guards, before its INSERT, re-read what the invoice's notes not void credited, in
//   all and per line, and refuse the batch when this note would take either past what the invoice
//   (or the line) cost: two notes at once can never exceed the invoice, whatever they read before.
// - `number` is gap-free per account and mode in its own sequence: the INSERT takes MAX + 1, and a
//   unique index refuses a second taker (D1 runs one write at a time, so in commit order).
// - A note is paid out in the same batch, once: a refund of the invoice's payment (the caller adds
//   src/payments/refund-writes.ts, whose CHECK holds the payment), or a credit to the user's
//   balance with its ledger row, unique per source, so a retried batch applies once.
//
// A credit note is answered (by the API and as event data) by one serializer, in SQL
// (CREDIT_NOTE_JSON), so a batch can answer the note it numbered.
import { type SQL, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { guard, rawStatement, type Statement } from "../db/batch";
import type { Tenant } from "../db/scope";
import { type CreditNoteLine, creditNotes, customerBalanceTransactions, invoices, users } from "../db/schema";
import { creditedKey, type PlannedCreditNote } from "../domain/credit-notes";
import { newId } from "../domain/ids";
import type { TaxAmount } from "../domain/tax";
import { isoTime } from "../lib/clock";
import { type EmittedEvent, emitEvent } from "../webhooks/outbox";

export type CreditNoteRow = typeof creditNotes.$inferSelect;
export const CREDIT_NOTE_REASONS = ["duplicate", "fraudulent", "order_change", "product_unsatisfactory"] as const;
export type CreditNoteReason = (typeof CREDIT_NOTE_REASONS)[number];

/** The statuses of an invoice a credit note may correct: finalized, and not void. */
export const CREDITABLE_INVOICE_STATUSES = ["open", "paid", "uncollectible"] as const;

/** Batch guard reasons. */
export const CREDIT_NOTE_FAILURES = {
  /** This note would take the invoice's notes not void past its total, or a line past its gross. */
  exceeds: "credit_note_exceeds_invoice",
  /** The invoice was voided (or is not the caller's) since it was read. */
  invoiceChanged: "credit_note_invoice_changed",
  /** The invoice is open while its first charge (an incomplete subscription's) or a change's charge settles: Tender may void it itself. */
  invoiceUnsettled: "credit_note_invoice_unsettled",
  /** The user's balance holds another currency. */
  balanceCurrency: "balance_currency_mismatch",
  /** Void: the note is no longer issued. */
  noteChanged: "credit_note_changed",
  /** Void: the user's balance no longer holds the credit (a later invoice used it). */
  balanceUsed: "credit_note_balance_used",
} as const;

/** The credit note as the API answers it, as SQL over a row of `credit_notes` (unaliased). */
export const CREDIT_NOTE_JSON = sql`json_object(
  'id', credit_notes.id, 'object', 'credit_note', 'livemode', json(CASE WHEN credit_notes.livemode THEN 'true' ELSE 'false' END),
  'number', credit_notes.number, 'invoice_id', credit_notes.invoice_id, 'user_id', credit_notes.user_id, 'currency', credit_notes.currency,
  'amount', credit_notes.amount, 'subtotal', credit_notes.amount - credit_notes.exclusive_tax, 'tax', credit_notes.tax,
  'tax_amounts', json(credit_notes.tax_amounts), 'lines', json(credit_notes.lines), 'reason', credit_notes.reason, 'memo', credit_notes.memo,
  'refund_id', credit_notes.refund_id, 'customer_balance_transaction', credit_notes.balance_transaction_id, 'status', credit_notes.status,
  'created_at', credit_notes.created_at, 'voided_at', credit_notes.voided_at)`;

/** The credit note `id` as JSON text, read by the batch that writes it (its answer and its events). */
export const creditNoteJsonSql = (id: string | SQL) => sql`(SELECT ${CREDIT_NOTE_JSON} FROM ${creditNotes} WHERE credit_notes.id = ${id})`;

/** The credit note as JSON, as the API answers it. */
export interface CreditNoteJson {
  id: string;
  object: "credit_note";
  livemode: boolean;
  number: string;
  invoice_id: string;
  user_id: string | null;
  currency: string;
  amount: number;
  subtotal: number;
  tax: number;
  tax_amounts: TaxAmount[];
  lines: CreditNoteLine[];
  reason: CreditNoteReason | null;
  memo: string | null;
  refund_id: string | null;
  customer_balance_transaction: string | null;
  status: "issued" | "void";
  created_at: string;
  voided_at: string | null;
}

/**
 * SQL: a note of `alias` counts against its invoice: issued, and not a refund the processor failed
 * (a failed refund makes its amount refundable again, so its note credits nothing).
 */
const counts = (alias: string) =>
  sql.raw(`${alias}.status = 'issued' AND NOT EXISTS (SELECT 1 FROM refunds AS failed WHERE failed.id = ${alias}.refund_id AND failed.status = 'failed')`);

/** SQL: what the invoice's notes not void credited in all. */
const creditedTotal = (invoiceId: string) => sql`(SELECT COALESCE(SUM(cn.amount), 0) FROM ${creditNotes} AS cn WHERE cn.invoice_id = ${invoiceId} AND ${counts("cn")})`;

/** SQL: what the invoice's notes not void credited one of its lines. */
const creditedLine = (invoiceId: string, lineId: string) =>
  sql`(SELECT COALESCE(SUM(json_extract(l.value, '$.amount')), 0) FROM ${creditNotes} AS cn, json_each(cn.lines) AS l
    WHERE cn.invoice_id = ${invoiceId} AND ${counts("cn")} AND json_extract(l.value, '$.invoice_line_id') = ${lineId})`;

/** SQL: the tax of `rate` the invoice's notes not void credited one of its lines. */
const creditedLineTax = (invoiceId: string, lineId: string, rate: string) =>
  sql`(SELECT COALESCE(SUM(json_extract(t.value, '$.amount')), 0) FROM ${creditNotes} AS cn, json_each(cn.lines) AS l, json_each(l.value, '$.tax_amounts') AS t
    WHERE cn.invoice_id = ${invoiceId} AND ${counts("cn")} AND json_extract(l.value, '$.invoice_line_id') = ${lineId} AND json_extract(t.value, '$.tax_rate') = ${rate})`;

/** A new credit note to write. */
export interface NewCreditNote {
  id: string;
  tenant: Tenant;
  invoice: { id: string; userId: string | null; currency: string };
  note: PlannedCreditNote;
  reason: CreditNoteReason | null;
  memo: string | null;
  /** How it is paid out: a refund the same batch makes (its id), or a credit to the user's balance. */
  payout: { kind: "refund"; refundId: string } | { kind: "balance" };
  /**
   * What the note may credit beyond the invoice's total: a downgrade's excess credit credits the
   * line that brought a total below zero up to zero (src/billing/balance-credits.ts). Default 0.
   */
  beyondTotal?: number;
  at: number;
}

/**
 * The statements and event of a new credit note: its guards (the invoice still creditable, never
 * past its total nor a line past its gross), the numbered note, the balance credit and its ledger
 * row when it credits the balance, and credit_note.created. A refund's own statements are the
 * caller's (refundWrites), in the same batch.
 */
export function issueCreditNoteWrites(db: Db, input: NewCreditNote): { statements: Statement[]; events: EmittedEvent[]; balanceTransactionId: string | null } {
  const { tenant, invoice, note, id } = input;
  const livemode = tenant.livemode ? 1 : 0;
  const createdAt = isoTime(input.at);
  const lines: CreditNoteLine[] = note.lines.map((l) => ({ id: newId("creditNoteLine", input.at), ...l }));
  const balanceTransactionId = input.payout.kind === "balance" ? newId("balanceTransaction", input.at) : null;
  const statements: Statement[] = [
    guard(
      db,
      CREDIT_NOTE_FAILURES.invoiceChanged,
      sql`EXISTS (SELECT 1 FROM ${invoices} WHERE id = ${invoice.id} AND account_id = ${tenant.accountId} AND livemode = ${livemode}
        AND status IN ('open', 'paid', 'uncollectible'))`,
    ),
    // An invoice Tender voids by itself when its charge fails (an incomplete subscription's first,
    // a change invoiced at once while its charge is at the processor) takes no note until settled:
    // a balance credit would outlive the void, a credit for a charge never made.
    guard(
      db,
      CREDIT_NOTE_FAILURES.invoiceUnsettled,
      sql`NOT EXISTS (SELECT 1 FROM ${invoices} AS i JOIN subscriptions AS s ON s.id = i.subscription_id WHERE i.id = ${invoice.id} AND i.status = 'open' AND s.status = 'incomplete')
        AND NOT EXISTS (SELECT 1 FROM proration_charges WHERE invoice_id = ${invoice.id} AND status = 'claimed')`,
    ),
    guard(db, CREDIT_NOTE_FAILURES.exceeds, sql`${creditedTotal(invoice.id)} + ${note.amount} <= (SELECT total FROM ${invoices} WHERE id = ${invoice.id}) + ${input.beyondTotal ?? 0}`),
    guard(
      db,
      CREDIT_NOTE_FAILURES.exceeds,
      sql.join(
        note.lines.map((l) => sql`${creditedLine(invoice.id, l.invoice_line_id)} + ${l.amount} <= ${note.grossOf.get(l.invoice_line_id)!}`),
        sql` AND `,
      ),
    ),
    // Nor a line's tax past what the line carried (two small notes at once, each rounded up).
    ...note.lines.flatMap((l) =>
      l.tax_amounts.map((t) =>
        guard(db, CREDIT_NOTE_FAILURES.exceeds, sql`${creditedLineTax(invoice.id, l.invoice_line_id, t.tax_rate)} + ${t.amount} <= ${note.taxOf.get(creditedKey(l.invoice_line_id, t.tax_rate))!}`),
      ),
    ),
    rawStatement(
      db,
      sql`INSERT INTO ${creditNotes} (id, account_id, livemode, number_sequence, invoice_id, user_id, currency, amount, tax, exclusive_tax, tax_amounts, lines,
          reason, memo, refund_id, balance_transaction_id, status, created_at, voided_at)
        VALUES (${id}, ${tenant.accountId}, ${livemode},
          (SELECT COALESCE(MAX(number_sequence), 0) + 1 FROM ${creditNotes} WHERE account_id = ${tenant.accountId} AND livemode = ${livemode}),
          ${invoice.id}, ${invoice.userId}, ${invoice.currency}, ${note.amount}, ${note.tax}, ${note.exclusiveTax}, ${JSON.stringify(note.taxAmounts)}, ${JSON.stringify(lines)},
          ${input.reason}, ${input.memo}, ${input.payout.kind === "refund" ? input.payout.refundId : null}, ${balanceTransactionId}, 'issued', ${createdAt}, NULL)`,
    ),
  ];
  if (balanceTransactionId !== null) {
    if (invoice.userId === null) throw new Error(`invoice ${invoice.id} has no user whose balance a credit note could credit`);
    statements.push(
      ...balanceWrites(db, tenant, {
        id: balanceTransactionId,
        userId: invoice.userId,
        amount: -note.amount,
        currency: invoice.currency,
        type: "credit_note",
        creditNoteId: id,
        invoiceId: invoice.id,
        at: input.at,
      }),
    );
  }
  return {
    statements,
    events: [emitEvent(db, tenant, { type: "credit_note.created", dataSql: creditNoteJsonSql(id), objectId: id }, input.at)],
    balanceTransactionId,
  };
}

interface BalanceChange {
  id: string;
  userId: string;
  /** Negative credits the user. */
  amount: number;
  currency: string;
  type: "credit_note" | "credit_note_void";
  creditNoteId: string;
  invoiceId: string;
  at: number;
}

/**
 * A change of the user's balance: its ledger row (unique per source, with the balance after it)
 * and the balance itself. The balance holds one currency at a time: a credit in another is refused
 * while it is not zero; a credit taken back (a void) must still be there (never past zero).
 */
function balanceWrites(db: Db, tenant: Tenant, change: BalanceChange): Statement[] {
  const livemode = tenant.livemode ? 1 : 0;
  const user = sql`${users.id} = ${change.userId} AND ${users.accountId} = ${tenant.accountId} AND ${users.livemode} = ${livemode}`;
  const guards =
    change.type === "credit_note"
      ? [guard(db, CREDIT_NOTE_FAILURES.balanceCurrency, sql`EXISTS (SELECT 1 FROM ${users} WHERE ${user} AND (balance = 0 OR currency IS NULL OR currency = ${change.currency}))`)]
      : [guard(db, CREDIT_NOTE_FAILURES.balanceUsed, sql`EXISTS (SELECT 1 FROM ${users} WHERE ${user} AND currency = ${change.currency} AND balance + ${change.amount} <= 0)`)];
  return [
    ...guards,
    rawStatement(
      db,
      sql`INSERT INTO ${customerBalanceTransactions} (id, account_id, livemode, user_id, amount, currency, type, credit_note_id, invoice_id, source, ending_balance, created_at)
        SELECT ${change.id}, ${tenant.accountId}, ${livemode}, ${change.userId}, ${change.amount}, ${change.currency}, ${change.type}, ${change.creditNoteId}, ${change.invoiceId},
          ${`${change.type}:${change.creditNoteId}`}, ${users.balance} + ${change.amount}, ${isoTime(change.at)}
        FROM ${users} WHERE ${user}`,
    ),
    rawStatement(db, sql`UPDATE ${users} SET balance = balance + ${change.amount}, currency = ${change.currency} WHERE ${user}`),
  ];
}

/**
 * Voids a credit note that credited the balance: takes the credit back (while the balance still
 * holds it), with its ledger row, and marks the note void (credit_note.voided).
 */
export function voidCreditNoteWrites(db: Db, tenant: Tenant, note: CreditNoteRow, at: number): { statements: Statement[]; events: EmittedEvent[] } {
  if (note.userId === null) throw new Error(`credit note ${note.id} has no user`);
  const now = isoTime(at);
  return {
    statements: [
      guard(db, CREDIT_NOTE_FAILURES.noteChanged, sql`EXISTS (SELECT 1 FROM ${creditNotes} WHERE id = ${note.id} AND status = 'issued')`),
      ...balanceWrites(db, tenant, {
        id: newId("balanceTransaction", at),
        userId: note.userId,
        amount: note.amount,
        currency: note.currency,
        type: "credit_note_void",
        creditNoteId: note.id,
        invoiceId: note.invoiceId,
        at,
      }),
      rawStatement(db, sql`UPDATE ${creditNotes} SET status = 'void', voided_at = ${now} WHERE id = ${note.id} AND status = 'issued'`),
    ],
    events: [emitEvent(db, tenant, { type: "credit_note.voided", dataSql: creditNoteJsonSql(note.id), objectId: note.id }, at)],
  };
}

/** The notes not void of an invoice, as what they credited (src/domain/credit-notes.ts creditedFrom). */
export const issuedNotesOf = (db: Db, invoiceId: string | SQL) =>
  rawStatement(db, sql`SELECT cn.amount, cn.lines FROM ${creditNotes} AS cn WHERE cn.invoice_id = ${invoiceId} AND ${counts("cn")}`) as Statement & {
    result?: { amount: number; lines: string }[];
  };
