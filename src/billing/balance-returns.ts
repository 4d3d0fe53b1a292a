// The customer balance given back or credited outside a credit note's own batch:
//
// - An invoice voided after its period's claim took from the balance (a declined renewal, forgiven)
//   gives that credit back, as Stripe does (`unapplied_from_invoice`): one ledger row, unique per
//   source (`invoice_void:<invoice>`), so a retried batch (or a second void) gives it back once.
import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { rawStatement, type Statement } from "../db/batch";
import { newId } from "../domain/ids";
import { isoTime } from "../lib/clock";

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
