// The writes of a new refund, as one batch with no read first. The refund's amount (by default
// what remains) and currency come from the payment row as the batch sees it; the CHECK
// `payments_refund_within_amount` refuses any refund that would take the refunded total past the
// charged amount, whatever runs concurrently, and so rolls the whole batch back.
import { type SQL, and, eq, sql } from "drizzle-orm";
import { guard, rawStatement, type Statement } from "../db/batch";
import type { Db } from "../db/client";
import { payments, refunds } from "../db/schema";
import { ownedBy } from "../db/scope";
import { isoTime } from "../lib/clock";
import { type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { refundJsonSql } from "./serialize";

export const REFUND_FAILURES = {
  paymentMissing: "payment_missing",
  paymentFailed: "payment_failed",
  paymentRefunded: "payment_refunded",
  /** The CHECK constraint's name, as SQLite reports it. */
  exceedsPayment: "payments_refund_within_amount",
} as const;

export interface NewRefund {
  accountId: string;
  /** The caller's mode: only a payment of that mode is found, and the refund is of it. */
  livemode: boolean;
  paymentId: string;
  refundId: string;
  /** Minor units; undefined refunds everything not yet refunded. */
  amount: number | undefined;
  reason: string | null;
  at: number;
}

export function refundWrites(db: Db, refund: NewRefund): { statements: Statement[]; returning: Statement; events: EmittedEvent[] } {
  const mine = and(ownedBy(payments, refund), eq(payments.id, refund.paymentId));
  const paymentIs = (condition: SQL) => sql`EXISTS (SELECT 1 FROM ${payments} WHERE ${mine} AND ${condition})`;
  const refundAmount = sql`(SELECT ${refunds.amount} FROM ${refunds} WHERE ${refunds.id} = ${refund.refundId})`;
  const amount = refund.amount ?? sql`${payments.amount} - ${payments.amountRefunded}`;
  const statements = [
    guard(db, REFUND_FAILURES.paymentMissing, paymentIs(sql`1`)),
    guard(db, REFUND_FAILURES.paymentFailed, paymentIs(sql`${payments.status} <> 'failed'`)),
    guard(db, REFUND_FAILURES.paymentRefunded, paymentIs(sql`${payments.status} <> 'refunded'`)),
    rawStatement(
      db,
      sql`INSERT INTO ${refunds} (id, account_id, livemode, payment_id, amount, currency, reason, status, created_at, completed_at)
        SELECT ${refund.refundId}, ${payments.accountId}, ${payments.livemode}, ${payments.id}, ${amount}, ${payments.currency}, ${refund.reason}, 'pending', ${isoTime(refund.at)}, NULL
        FROM ${payments} WHERE ${mine}`,
    ),
    db
      .update(payments)
      .set({
        amountRefunded: sql`${payments.amountRefunded} + ${refundAmount}`,
        status: sql`CASE WHEN ${payments.amountRefunded} + ${refundAmount} = ${payments.amount} THEN 'refunded' ELSE 'partially_refunded' END`,
      })
      .where(and(mine, sql`${payments.status} IN ('completed', 'partially_refunded')`)),
  ];
  return {
    statements,
    returning: db.select().from(refunds).where(eq(refunds.id, refund.refundId)),
    events: [emitEvent(db, refund, { type: "refund.initiated", dataSql: refundJsonSql(refund.refundId), objectId: refund.refundId }, refund.at)],
  };
}
