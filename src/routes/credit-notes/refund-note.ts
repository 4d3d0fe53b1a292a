// The credit note of a refund (POST /refunds) of a payment that paid an invoice: planned from the
// payment, its invoice and the invoice's notes not void, read in one round trip, and written in the
// refund's own batch (src/billing/credit-notes.ts), so the refund and its note commit together.
import { eq, sql } from "drizzle-orm";
import type { Context } from "hono";
import { issueCreditNoteWrites, issuedNotesOf } from "../../billing/credit-notes";
import { INVOICE_JSON, type InvoiceJson } from "../../billing/invoices";
import { rawStatement, type Statement } from "../../db/batch";
import { payments } from "../../db/schema";
import { owned } from "../../db/scope";
import { creditedFrom, planCreditNote } from "../../domain/credit-notes";
import { newId } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import type { EmittedEvent } from "../../webhooks/outbox";
import { rowsOf } from "../invoices/common";
import { withLiveKeyAll } from "../reads";

/** A refund's reason as a credit note's: Stripe's credit note reasons. */
const noteReason = (reason: string | null) => (reason === "duplicate" || reason === "fraudulent" ? reason : "order_change");

/**
 * The credit note a refund of `paymentId` issues, when the payment paid an invoice that takes one;
 * null otherwise (a one-off payment, or a payment the refund's own guards will refuse). A refund
 * above what the invoice's notes leave is refused here: 400 credit_note_exceeds_invoice.
 */
export async function creditNoteOfRefund(
  c: Context<AppEnv>,
  refund: { paymentId: string; refundId: string; amount: number | undefined; reason: string | null; at: number },
): Promise<{ statements: Statement[]; events: EmittedEvent[]; amount: number } | null> {
  const { db, auth } = c.var;
  const payment = owned(payments, auth, eq(payments.id, refund.paymentId));
  const [paymentRead, notesRead] = await withLiveKeyAll<[unknown, unknown]>(c, [
    rawStatement(
      db,
      sql`SELECT payments.amount_received - payments.amount_refunded AS refundable,
          (SELECT ${INVOICE_JSON} FROM invoices WHERE invoices.id = payments.invoice_id) AS invoice
        FROM ${payments} WHERE ${payment} AND payments.invoice_id IS NOT NULL LIMIT 1`,
    ),
    issuedNotesOf(db, sql`(SELECT payments.invoice_id FROM ${payments} WHERE ${payment})`),
  ]);
  const [row] = rowsOf<{ refundable: number; invoice: string | null }>(paymentRead);
  if (!row || row.invoice === null || row.refundable <= 0) return null;
  const invoice = JSON.parse(row.invoice) as InvoiceJson;
  // Only the payment that paid the invoice is a correction of it (a declined attempt refunds nothing).
  if (invoice.status === "draft" || invoice.status === "void" || invoice.payment_id !== refund.paymentId) return null;
  const amount = refund.amount ?? row.refundable;
  if (amount > row.refundable) return null; // the refund's own CHECK refuses it, naming what is left
  const credited = creditedFrom(rowsOf<{ amount: number; lines: string }>(notesRead).map((n) => ({ amount: n.amount, lines: JSON.parse(n.lines) })));
  const plan = planCreditNote(invoice, credited, { amount });
  if (!plan.ok) {
    throw invalidRequest(
      "credit_note_exceeds_invoice",
      `A refund of ${amount} is more than invoice ${invoice.number ?? invoice.id}, which payment '${refund.paymentId}' paid, has left to credit: ${plan.left ?? 0} of its total ${invoice.total} (its credit notes not void took the rest). Refund at most that.`,
      "amount",
    );
  }
  const issued = issueCreditNoteWrites(db, {
    id: newId("creditNote", refund.at),
    tenant: auth,
    invoice: { id: invoice.id, userId: invoice.user_id, currency: invoice.currency },
    note: plan.note,
    reason: noteReason(refund.reason),
    memo: null,
    payout: { kind: "refund", refundId: refund.refundId },
    at: refund.at,
  });
  return { statements: issued.statements, events: issued.events, amount };
}
