// Payments, payouts and refunds as the API returns them (and as event data carries them). Each
// has a JS serializer for rows in hand and an SQL twin (json_object over the committed row) for
// event data and stored idempotent answers built inside a batch.
import { type SQL, sql } from "drizzle-orm";
import { payments, payouts, refunds } from "../db/schema";
import { livemodeJsonSql } from "../db/scope";
import type { CardSummary } from "../domain/cards";

export type PaymentRow = typeof payments.$inferSelect;
export type PayoutRow = typeof payouts.$inferSelect;
export type RefundRow = typeof refunds.$inferSelect;

type CardColumns = { cardBrand: string; cardLast4: string; cardExpMonth: number; cardExpYear: number };

export function cardOf(row: CardColumns): CardSummary {
  return { brand: row.cardBrand as CardSummary["brand"], last4: row.cardLast4, exp_month: row.cardExpMonth, exp_year: row.cardExpYear };
}

export interface PaymentJson {
  id: string;
  object: "payment";
  livemode: boolean;
  subscription_id: string | null;
  invoice_id: string | null;
  user_id: string | null;
  amount: number;
  currency: string;
  status: PaymentRow["status"];
  capture_method: PaymentRow["captureMethod"];
  amount_capturable: number;
  amount_received: number;
  amount_refunded: number;
  next_action: PaymentRow["nextAction"];
  payment_method_id: string | null;
  capture_before: string | null;
  canceled_at: string | null;
  cancellation_reason: PaymentRow["cancellationReason"];
  description: string | null;
  metadata: Record<string, string>;
  failure_code: string | null;
  failure_message: string | null;
  card: CardSummary;
  created_at: string;
}

export function serializePayment(row: PaymentRow): PaymentJson {
  return {
    id: row.id,
    object: "payment",
    livemode: row.livemode,
    subscription_id: row.subscriptionId,
    invoice_id: row.invoiceId,
    user_id: row.userId,
    amount: row.amount,
    currency: row.currency,
    status: row.status,
    capture_method: row.captureMethod,
    amount_capturable: row.amountCapturable,
    amount_received: row.amountReceived,
    amount_refunded: row.amountRefunded,
    next_action: row.nextAction ?? null,
    payment_method_id: row.paymentMethodId,
    capture_before: row.captureBefore,
    canceled_at: row.canceledAt,
    cancellation_reason: row.cancellationReason,
    description: row.description,
    metadata: row.metadata ?? {},
    failure_code: row.failureCode,
    failure_message: row.failureMessage,
    card: cardOf(row),
    created_at: row.createdAt,
  };
}

export interface PayoutJson {
  id: string;
  object: "payout";
  livemode: boolean;
  recipient_id: string | null;
  amount: number;
  currency: string;
  description: string | null;
  status: PayoutRow["status"];
  date: string;
  card: CardSummary;
  failure_code: string | null;
  failure_message: string | null;
  created_at: string;
  updated_at: string;
}

export function serializePayout(row: PayoutRow): PayoutJson {
  return {
    id: row.id,
    object: "payout",
    livemode: row.livemode,
    recipient_id: row.recipientId,
    amount: row.amount,
    currency: row.currency,
    description: row.description,
    status: row.status,
    date: row.date,
    card: cardOf(row),
    failure_code: row.failureCode,
    failure_message: row.failureMessage,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export interface RefundJson {
  id: string;
  object: "refund";
  livemode: boolean;
  payment_id: string;
  amount: number;
  currency: string;
  reason: string | null;
  status: RefundRow["status"];
  created_at: string;
  completed_at: string | null;
}

export function serializeRefund(row: RefundRow): RefundJson {
  return {
    id: row.id,
    object: "refund",
    livemode: row.livemode,
    payment_id: row.paymentId,
    amount: row.amount,
    currency: row.currency,
    reason: row.reason,
    status: row.status,
    created_at: row.createdAt,
    completed_at: row.completedAt,
  };
}

// The SQL twins. Plain column names: these run inside hand-written statements and subqueries.
const cardJsonSql = sql.raw(
  `json_object('brand', card_brand, 'last4', card_last4, 'exp_month', card_exp_month, 'exp_year', card_exp_year)`,
);

/** The payout as committed, as JSON text, read inside the batch. */
export const payoutJsonSql = (id: string): SQL => sql`(SELECT json_object(
  'id', id, 'object', 'payout', 'livemode', ${livemodeJsonSql()}, 'recipient_id', recipient_id, 'amount', amount, 'currency', currency,
  'description', description, 'status', status, 'date', date, 'card', ${cardJsonSql},
  'failure_code', failure_code, 'failure_message', failure_message, 'created_at', created_at, 'updated_at', updated_at
) FROM ${payouts} WHERE id = ${id})`;

/** The refund as committed, as JSON text, read inside the batch. */
export const refundJsonSql = (id: string): SQL => sql`(SELECT json_object(
  'id', id, 'object', 'refund', 'livemode', ${livemodeJsonSql()}, 'payment_id', payment_id, 'amount', amount, 'currency', currency,
  'reason', reason, 'status', status, 'created_at', created_at, 'completed_at', completed_at
) FROM ${refunds} WHERE id = ${id})`;
