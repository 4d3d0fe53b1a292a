// Proration of a plan or quantity change (DESIGN.md "Billing depth"). A change to an active
// subscription's price with `proration_behavior: create_prorations` (the default) credits the
// unused part of what the current period was charged and charges the new price for the time left,
// as two invoice items that wait for the subscription's next invoice (src/domain/proration.ts does
// the arithmetic, one rounding per line). The renewal that claims the next period prices them in
// (src/billing/periods.ts): the invoice's lines are the period's, then the items; when the items
// take its total below zero, the invoice charges nothing and a "credit carried" line brings it to
// zero, and the same credit waits, as an item, for the invoice after. A credit is never refunded
// by itself.
//
// The items and the subscription's count and sum of them are written in one batch with the change;
// the claim holds only if the count is the one it read (stillAsRead), and no change is taken while a
// charge of the period is in flight, so the settlement that issues the invoice takes exactly the
// items its claim priced.
import { and, asc, eq, isNull } from "drizzle-orm";
import type { Db } from "../db/client";
import { invoiceItems, type subscriptionPeriods, type subscriptions } from "../db/schema";
import { periodStartMs } from "../domain/billing-calendar";
import { newId } from "../domain/ids";
import { type OpenCharge, openCharge, prorateChange } from "../domain/proration";
import { priceExact } from "../domain/pricing";
import { isoTime } from "../lib/clock";
import type { InvoiceLineInput } from "./invoices";
import { exactPriceOf, type PlanRow } from "./pricing";

export type InvoiceItemRow = typeof invoiceItems.$inferSelect;
type SubscriptionRow = typeof subscriptions.$inferSelect;
type PeriodRow = typeof subscriptionPeriods.$inferSelect;

/** The exact price of one period of `plan` at `quantity` (minor units, up to 12 decimals). */
const periodPrice = (plan: PlanRow, quantity: number) => priceExact(plan.pricingModel, exactPriceOf(plan), quantity);

/** The current period of a subscription that has paid for one: [start, end), index periodsBilled - 1. */
export function currentPeriod(sub: Pick<SubscriptionRow, "billingAnchor" | "periodsBilled">, plan: Pick<PlanRow, "interval">) {
  const n = sub.periodsBilled - 1;
  return { index: n, start: periodStartMs(sub.billingAnchor, plan.interval, n), end: periodStartMs(sub.billingAnchor, plan.interval, n + 1) };
}

/**
 * What the current period was charged, from when: the open charge a change in the period left, or
 * else the period's own charge (its price net of its discount; nothing when its invoice was voided
 * and it was never paid).
 */
export function currentOpenCharge(
  sub: SubscriptionRow,
  plan: PlanRow,
  paid: Pick<PeriodRow, "amount" | "status" | "itemsAmount" | "creditCarried" | "discount" | "percentOff" | "tax"> | null,
): OpenCharge {
  const period = currentPeriod(sub, plan);
  if (sub.openCharge && sub.openCharge.periodStart === period.start && sub.openCharge.periodEnd === period.end) return sub.openCharge;
  return openCharge({
    currency: plan.currency,
    periodStart: period.start,
    periodEnd: period.end,
    periodPrice: periodPrice(plan, sub.quantity),
    // The period's own price less a percentage discount, however it was paid (by card or a
    // credit): not the items its invoice also took, nor the credit it carried on. An amount_off
    // discount is not prorated (Stripe's rule): it came off the invoice, so the unused time is
    // credited at the price before it, as a proration line is never discounted by amount.
    // Nor its exclusive tax: a proration line is taxed in its own right.
    amountCharged: paid?.status === "paid" ? Math.max(0, paid.amount - paid.itemsAmount - paid.creditCarried - (paid.tax ?? 0) + (paid.percentOff === null ? paid.discount : 0)) : 0,
  });
}

/**
 * The items of a change at `at` from `oldPlan` × the subscription's quantity to `newPlan` ×
 * `quantity`, and the open charge it leaves; null when the period price does not change (no items).
 * `percentOffBasisPoints`: the percentage discount of the current period, folded into the charge.
 */
export function prorationItems(input: {
  sub: SubscriptionRow;
  oldPlan: PlanRow;
  newPlan: PlanRow;
  quantity: number;
  current: OpenCharge;
  at: number;
  percentOffBasisPoints: number;
}): { items: InvoiceItemRow[]; next: OpenCharge; amount: number } | null {
  const { sub, oldPlan, newPlan, quantity, current, at } = input;
  const { lines, next } = prorateChange(current, {
    currency: newPlan.currency,
    periodPrice: periodPrice(newPlan, quantity),
    changeAt: at,
    percentOffBasisPoints: input.percentOffBasisPoints,
  });
  if (lines.length === 0) return null;
  const [credit, charge] = lines;
  const since = isoTime(at).slice(0, 10);
  const item = (amount: number, description: string, itemQuantity: number): InvoiceItemRow => ({
    id: newId("invoiceItem", at),
    accountId: sub.accountId,
    livemode: sub.livemode,
    subscriptionId: sub.id,
    type: "proration",
    description,
    quantity: itemQuantity,
    amount,
    currency: newPlan.currency,
    periodStart: isoTime(credit.periodStart),
    periodEnd: isoTime(credit.periodEnd),
    invoiceId: null,
    createdAt: isoTime(at),
  });
  const items = [
    item(credit.amount, `Unused time on ${sub.quantity} × ${oldPlan.name} after ${since}`, sub.quantity),
    item(charge.amount, `Remaining time on ${quantity} × ${newPlan.name} after ${since}`, quantity),
  ];
  return { items, next, amount: credit.amount + charge.amount };
}

/** The pending items of a subscription, oldest first: what its next invoice takes. */
export const pendingItemsOf = (db: Db, subscriptionId: string) =>
  db
    .select()
    .from(invoiceItems)
    .where(and(eq(invoiceItems.subscriptionId, subscriptionId), isNull(invoiceItems.invoiceId)))
    .orderBy(asc(invoiceItems.id));

/** An item as a line of the invoice that takes it: a proration is not discounted again, nor is a credit. */
export const itemLine = (item: InvoiceItemRow): InvoiceLineInput => ({
  type: item.type,
  description: item.description,
  quantity: item.quantity,
  unitAmountDecimal: null,
  amount: item.amount,
  proration: item.type === "proration",
  discountable: false,
  periodStart: item.periodStart,
  periodEnd: item.periodEnd,
});

/** The line that brings an invoice whose items took it below zero back to zero: the credit goes on to the next invoice. */
export const carriedCreditLine = (amount: number, periodStart: string, periodEnd: string): InvoiceLineInput =>
  creditLine("Credit carried to the next invoice", amount, periodStart, periodEnd);

/** A credit line of `amount` (what brings an invoice back to zero), saying where the credit went. */
export const creditLine = (description: string, amount: number, periodStart: string, periodEnd: string): InvoiceLineInput => ({
  type: "credit",
  description,
  quantity: 1,
  unitAmountDecimal: null,
  amount,
  proration: false,
  discountable: false,
  periodStart,
  periodEnd,
});

/** The item that carries a credit to the next invoice (negative). */
export function carriedCreditItem(sub: SubscriptionRow, amount: number, currency: string, periodStart: string, periodEnd: string, at: number): InvoiceItemRow {
  return {
    id: newId("invoiceItem", at),
    accountId: sub.accountId,
    livemode: sub.livemode,
    subscriptionId: sub.id,
    type: "credit",
    description: `Credit carried from the invoice of ${periodStart.slice(0, 10)}`,
    quantity: 1,
    amount: -amount,
    currency,
    periodStart,
    periodEnd,
    invoiceId: null,
    createdAt: isoTime(at),
  };
}
