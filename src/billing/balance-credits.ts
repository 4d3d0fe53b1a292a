// The customer balance given back or credited outside a credit note's own batch:
//
// - A downgrade's credit that takes an invoice below zero (its proration items' credits exceed its
//   charges) is issued to the user's balance as a credit note (refund: false, reason order_change)
//   in the batch that issues the invoice: the invoice has a line that brings it to zero ("Credit
//   to the customer's balance") and the note credits that line, so the invoice still says what it
//   billed and the note says where the rest went. Later invoices consume the balance (the renewal
//   claim, src/billing/periods.ts). A rerun issues it once: the invoice is issued once (unique per
//   period; a change's batch is guarded by the subscription as read), and the note is its own.
//   When the user's balance holds another currency, the credit is carried as before (an item).
// - An invoice voided after its period's claim took from the balance (a declined renewal, forgiven)
//   gives that credit back, as Stripe does (`unapplied_from_invoice`): one ledger row, unique per
//   source (`invoice_void:<invoice>`), so a retried batch (or a second void) gives it back once.
import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { rawStatement, type Statement } from "../db/batch";
import type { Tenant } from "../db/scope";
import { newId } from "../domain/ids";
import { isoTime } from "../lib/clock";
import type { EmittedEvent } from "../webhooks/outbox";
import { issueCreditNoteWrites } from "./credit-notes";
import type { InvoiceLineInput } from "./invoices";
import { creditLine } from "./prorations";

/**
 * Whether a credit in `currency` can go to the user's balance: it holds none, or this currency (a
 * balance holds one currency, src/billing/credit-notes.ts). Read before the batch; the note's own
 * guard holds it as the batch commits.
 */
export function balanceTakes(user: { balance: number; currency: string | null } | null | undefined, currency: string): boolean {
  return !!user && (user.balance === 0 || user.currency === null || user.currency === currency);
}

/** The line that brings an invoice whose items took it below zero back to zero: the credit note it issues credits it. */
export const balanceCreditLine = (id: string, amount: number, periodStart: string, periodEnd: string): InvoiceLineInput => ({
  id,
  ...creditLine("Credit to the customer's balance", amount, periodStart, periodEnd),
});

/**
 * The credit note of an invoice's excess credit (`amount`, what its line `lineId` brought the
 * invoice up by), to the user's balance, in the batch that issues the invoice (after its
 * statements): the note (order_change), the balance credited and its ledger row, credit_note.created.
 */
export function excessCreditNoteWrites(
  db: Db,
  input: { tenant: Tenant; invoice: { id: string; userId: string; currency: string }; lineId: string; amount: number; at: number },
): { statements: Statement[]; events: EmittedEvent[] } {
  const { statements, events } = issueCreditNoteWrites(db, {
    id: newId("creditNote", input.at),
    tenant: input.tenant,
    invoice: input.invoice,
    note: {
      amount: input.amount,
      tax: 0,
      exclusiveTax: 0,
      taxAmounts: [],
      lines: [{ invoice_line_id: input.lineId, description: "Credit to the customer's balance", amount: input.amount, tax_amounts: [] }],
      grossOf: new Map([[input.lineId, input.amount]]),
      taxOf: new Map(),
    },
    reason: "order_change",
    memo: "The credit of a change beyond this invoice, to the customer's balance.",
    payout: { kind: "balance" },
    beyondTotal: input.amount,
    at: input.at,
  });
  return { statements, events };
}

/**
 * The statements, in the batch that voids the open invoice `invoiceId` and before its UPDATE, that
 * give back what the invoice took from the user's balance (ending_balance − starting_balance): its
 * ledger row (once per invoice) and the balance set to the ledger's sum. Nothing when it took none.
 */
export function balanceGivenBackOnVoid(db: Db, invoiceId: string, at: number): Statement[] {
  const source = `invoice_void:${invoiceId}`;
  return [
    rawStatement(
      db,
      sql`INSERT INTO customer_balance_transactions (id, account_id, livemode, user_id, amount, currency, type, credit_note_id, invoice_id, source, ending_balance, created_at)
        SELECT ${newId("balanceTransaction", at)}, i.account_id, i.livemode, i.user_id, i.starting_balance - i.ending_balance, i.currency, 'unapplied_from_invoice', NULL, i.id, ${source},
          u.balance + i.starting_balance - i.ending_balance, ${isoTime(at)}
        FROM invoices AS i JOIN users AS u ON u.id = i.user_id
        WHERE i.id = ${invoiceId} AND i.status = 'open' AND i.ending_balance > i.starting_balance AND (u.balance = 0 OR u.currency = i.currency)
        ON CONFLICT (source) DO NOTHING`,
    ),
    rawStatement(
      db,
      sql`UPDATE users SET balance = (SELECT COALESCE(SUM(t.amount), 0) FROM customer_balance_transactions AS t WHERE t.user_id = users.id),
          currency = (SELECT t.currency FROM customer_balance_transactions AS t WHERE t.source = ${source})
        WHERE id = (SELECT user_id FROM invoices WHERE id = ${invoiceId}) AND EXISTS (SELECT 1 FROM customer_balance_transactions AS t WHERE t.source = ${source})`,
    ),
  ];
}
