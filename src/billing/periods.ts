// Charging one billing period: claim -> charge -> settle -> advance. This module is the one home
// of that rule. Renewals, dunning retries and test-clock advances (src/billing/renewals.ts,
// src/billing/test-clocks.ts) and the past-due card update (PUT /subscriptions/{id}) all go
// through it, so there is one period claim, one processor reference format and one settlement.
//
//   1. claim: the period row of index n (= periods_billed) is inserted for a first attempt, or
//      its `attempts` moved from k to k + 1 for a retry, in one conditional statement that also
//      re-checks that the subscription is still in the state that was read (status, period,
//      attempts, cancel_at_period_end). Whoever loses the claim charges nothing.
//   2. charge: the processor is called with the reference `<sub>:period:<n>:attempt:<k>`, fixed
//      for that attempt, and the card the claim names (the subscription's vaulted card, or the new
//      card of a past-due card update, vaulted before its claim and kept on it as `claim_card`),
//      so a retried call, by the same worker or by one that took the claim over, is the same
//      charge to the processor.
//   3. settle, in one batch: the payment (unique on its charge reference, so a claim taken over
//      after a crash cannot record the same processor charge twice), the period, the
//      subscription (advanced, past_due with its next retry, or canceled), the period's invoice
//      (src/billing/invoices.ts: issued, numbered and settled by its first attempt's settlement,
//      and settled again by each later attempt: one invoice per period, whatever the attempts)
//      and the events.
import { accountLivesHere } from "../processor/in-flight";
import { type SQL, and, eq, inArray, isNull, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { guard, rawStatement, type Statement } from "../db/batch";
import type { Tenant } from "../db/scope";
import { type ClaimCard, coupons, invoiceItems, plans, subscriptionPeriods, subscriptions, users } from "../db/schema";
import { newId } from "../domain/ids";
import { MAX_AMOUNT } from "../domain/money";
import { isoTime } from "../lib/clock";
import { charge, type ChargeArgs, type ChargeResult } from "../payments/charge";
import { cardOf } from "../payments/serialize";
import type { CardSummary } from "../domain/cards";
import type { Processor } from "../processor/types";
import { type EmittedEvent, emitEvent } from "../webhooks/outbox";
import { nextRetryAt, periodStartMs } from "../domain/billing-calendar";
import { type PlanRow, periodAmount } from "./pricing";
import { type InvoiceOutcome, invoiceActionRequiredEvent, issueInvoice, settleInvoice, subscriptionLine, totalsOf, uncollectibleInvoicesOf, usageLine } from "./invoices";
import { exclusiveTax, lineTax } from "../domain/tax";
import { taxRatesOf } from "./tax";
import { type InvoiceItemRow, carriedCreditItem, carriedCreditLine, itemLine, pendingItemsOf } from "./prorations";
import { balanceCreditLine, balanceTakes, excessCreditNoteWrites } from "./balance-credits";
import { type DiscountCoupon, discountAsCoupon, periodDiscount } from "./coupons";
import { type PeriodUsage, isMetered, meteredPeriod, usageUnchanged } from "./usage";
import { usagePeriodAt } from "../domain/usage";

export type SubscriptionRow = typeof subscriptions.$inferSelect;
export type UserRow = typeof users.$inferSelect;
export type PeriodRow = typeof subscriptionPeriods.$inferSelect;

/** What a row says of the period being collected (selected as `openPeriodColumns`). */
export type OpenPeriod = Pick<PeriodRow, "status" | "attempts" | "final">;
/** The columns of OpenPeriod (status first: a left-joined object whose first field is null reads as no row). */
export const openPeriodColumns = { status: subscriptionPeriods.status, attempts: subscriptionPeriods.attempts, final: subscriptionPeriods.final };

/** A subscription with what charging its open period needs. */
export interface BillableRow {
  sub: SubscriptionRow;
  plan: PlanRow;
  user: UserRow;
  /** The coupon of the subscription's discount, if it has one (read by renewals; a claim of a new period needs it). */
  coupon?: DiscountCoupon | null;
  /** A metered subscription's records of the period being claimed (read by renewals; a metered claim needs them). */
  usage?: PeriodUsage;
  /** The row of the period being collected (index = periods_billed), once claimed: its status and attempts. */
  period: OpenPeriod | null;
  /** The plan of a change scheduled for the next period (sub.pendingPlanId), read with the row. */
  pendingPlan?: PlanRow | null;
}

/**
 * The row as a new period is priced and invoiced: with its scheduled change (at_period_end), the
 * pending plan and quantity, which that period's first settlement makes the subscription's.
 */
export function withScheduledChange<R extends Pick<BillableRow, "sub" | "plan" | "pendingPlan">>(row: R): R {
  const { sub, pendingPlan } = row;
  if (sub.pendingPlanId === null || !pendingPlan || pendingPlan.id !== sub.pendingPlanId) return row;
  return { ...row, plan: pendingPlan, sub: { ...sub, planId: pendingPlan.id, quantity: sub.pendingQuantity ?? sub.quantity } };
}

/**
 * The plans of the rows' scheduled changes, read in one query (only when a row has one) and set on
 * them: a new period's claim prices with it, and its first settlement invoices with it.
 */
export async function attachPendingPlans<R extends Pick<BillableRow, "sub" | "pendingPlan">>(db: Db, rows: R[]): Promise<void> {
  const ids = [...new Set(rows.flatMap((r) => (r.sub.pendingPlanId === null ? [] : [r.sub.pendingPlanId])))];
  if (ids.length === 0) return;
  const found = new Map((await db.select().from(plans).where(inArray(plans.id, ids))).map((p) => [p.id, p]));
  for (const row of rows) if (row.sub.pendingPlanId !== null) row.pendingPlan = found.get(row.sub.pendingPlanId) ?? null;
}

/**
 * The columns of a subscription whose period `n` is done with (paid, or forgiven by a void): the
 * next period is open. A licensed period is paid at its start, so the next is due when it ends; a
 * metered one is invoiced at its end, so the next is due when the period after it ends.
 */
export function periodDone(sub: Pick<SubscriptionRow, "billingAnchor">, plan: Pick<PlanRow, "interval" | "usageType">, n: number) {
  const ahead = isMetered(plan) ? 1 : 0;
  const next = periodStartMs(sub.billingAnchor, plan.interval, n + 1 + ahead);
  return {
    periodsBilled: n + 1,
    currentPeriodStart: isoTime(periodStartMs(sub.billingAnchor, plan.interval, n + ahead)),
    nextBillingDate: isoTime(next),
    dueAt: next,
  };
}

/** `unpriceable`: the period's price is beyond the largest chargeable amount; left unclaimed (and logged). */
export type PeriodOutcome = "renewed" | "past_due" | "canceled" | "skipped" | "unpriceable" | "requires_action";

/** A claim older than this belongs to a worker that died before settling; it may be taken over. */
export const CLAIM_STALE_MS = 10 * 60 * 1000;
/** The statuses whose subscriptions are charged when due: a trial's end, a renewal, a dunning retry. */
export const RENEWING = ["trialing", "active", "past_due"] as const;

/** The processor reference of one attempt at one period: fixed, so a retried call is the same charge. */
export const periodReference = (subscriptionId: string, periodIndex: number, attempt: number) =>
  `${subscriptionId}:period:${periodIndex}:attempt:${attempt}`;

/** The period attempt a processor reference names (periodReference), or null for any other reference. */
export function periodAttemptOf(reference: string | null): { subscriptionId: string; periodIndex: number; attempt: number } | null {
  const match = reference ? /^(sub_[0-9a-z]+):period:(\d+):attempt:(\d+)$/.exec(reference) : null;
  return match ? { subscriptionId: match[1], periodIndex: Number(match[2]), attempt: Number(match[3]) } : null;
}

/**
 * SQL, of a subscription_periods row: its claimed attempt is a payment its payer is authenticating
 * (3-D Secure on the hosted invoice page, src/billing/invoice-payments.ts). That claim is not
 * stale however old: taking it over would charge the card again under the same reference while
 * the payer may still complete the first. It is settled when the payment ends (completed, failed,
 * or canceled as abandoned by the cron).
 */
export const awaitingPayer = sql.raw(
  `EXISTS (SELECT 1 FROM payments AS waiting WHERE waiting.charge_reference = subscription_periods.subscription_id || ':period:' || subscription_periods.period_index || ':attempt:' || subscription_periods.attempts AND waiting.status = 'requires_action')`,
);

/** Batch guard reason: this attempt's charge is already recorded (another worker settled it). */
export const PERIOD_ALREADY_SETTLED = "period_already_settled";

/**
 * The subscriptions, with what charging a period needs, in one query. (D1 answers at most 100
 * columns: the coupon and the open period bring only what is used, 70 in all.)
 */
export function selectBillableRows(db: Db) {
  return db
    .select({
      sub: subscriptions,
      plan: plans,
      user: users,
      // (duration first: a left-joined object whose first field is null reads as no row.)
      coupon: {
        duration: coupons.duration,
        percentOffBasisPoints: coupons.percentOffBasisPoints,
        amountOff: coupons.amountOff,
        currency: coupons.currency,
        durationInMonths: coupons.durationInMonths,
      },
      period: openPeriodColumns,
    })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(
      coupons,
      and(eq(coupons.accountId, subscriptions.accountId), eq(coupons.livemode, subscriptions.livemode), eq(coupons.id, subscriptions.couponId)),
    )
    .leftJoin(
      subscriptionPeriods,
      and(eq(subscriptionPeriods.subscriptionId, subscriptions.id), eq(subscriptionPeriods.periodIndex, subscriptions.periodsBilled)),
    );
}

export const isDue = (sub: SubscriptionRow, at: number) =>
  (RENEWING as readonly string[]).includes(sub.status) && sub.dueAt !== null && sub.dueAt <= at;

/** SQL: the subscription is still in the state that was read (and, for a renewal, due at `dueBy`). */
export const stillAsRead = (sub: SubscriptionRow, dueBy?: number) => sql`EXISTS (SELECT 1 FROM subscriptions AS as_read
  WHERE as_read.id = ${sub.id} AND as_read.status = ${sub.status} AND as_read.periods_billed = ${sub.periodsBilled}
    AND as_read.dunning_attempts = ${sub.dunningAttempts} AND as_read.cancel_at_period_end = ${sub.cancelAtPeriodEnd ? 1 : 0}
    ${dueBy === undefined ? sql`` : sql`AND as_read.due_at <= ${dueBy}`})`;

/**
 * SQL: what a new period's price was computed from is as read: the plan, quantity, discount and
 * pending items. A first claim priced from a row that changed since is lost, and the next run
 * prices it again (a later attempt charges the amount already fixed on the period's row).
 */
const pricedAsRead = (sub: SubscriptionRow) => sql`EXISTS (SELECT 1 FROM subscriptions AS priced
  WHERE priced.id = ${sub.id} AND priced.plan_id = ${sub.planId} AND priced.quantity = ${sub.quantity}
    AND priced.coupon_id IS ${sub.couponId} AND priced.discount_start IS ${sub.discountStart} AND priced.discount_uses = ${sub.discountUses}
    AND priced.pending_items = ${sub.pendingItems} AND priced.pending_items_amount = ${sub.pendingItemsAmount}
    AND priced.pending_plan_id IS ${sub.pendingPlanId} AND priced.pending_quantity IS ${sub.pendingQuantity}
    AND priced.default_tax_rates IS ${sub.defaultTaxRates === null ? null : JSON.stringify(sub.defaultTaxRates)}) AND NOT ${prorationChargeInFlight(sub.id)}`;

/**
 * SQL: a new period's price without the subscription's own tax rates was computed with its plan's
 * (`priced.plan`, the scheduled change's when there is one) as read: a plan re-taxed since makes
 * the claim lose, and the next run prices it with the new rates (planTaxChargeInFlight keeps them
 * from changing under a claim that holds).
 */
const planTaxRatesAsRead = (priced: { sub: Pick<SubscriptionRow, "defaultTaxRates">; plan: Pick<PlanRow, "id" | "defaultTaxRates"> }) =>
  priced.sub.defaultTaxRates !== null
    ? sql`1`
    : sql`EXISTS (SELECT 1 FROM plans AS taxed WHERE taxed.id = ${priced.plan.id} AND json(taxed.default_tax_rates) = json(${JSON.stringify(priced.plan.defaultTaxRates)}))`;

/**
 * SQL: a new period's first attempt priced with plan `planId`'s tax rates (by a subscription with
 * no rates of its own, on the plan or moving to it at that period: the scheduled plan prices it, not
 * the one it leaves) is claimed and its invoice not issued yet. That invoice is issued by its
 * settlement, from the plan as it then reads it (a claim taken over after its worker died
 * included), so the plan's rates must not change until it settles, or the invoice would not come
 * to what was charged. The plan's PATCH of default_tax_rates waits for it.
 */
export const planTaxChargeInFlight = (planId: string) => sql`EXISTS (SELECT 1 FROM subscription_periods AS p
  JOIN subscriptions AS s ON s.id = p.subscription_id
  WHERE p.status = 'open' AND p.period_index = s.periods_billed AND p.attempts > s.dunning_attempts
    AND COALESCE(s.pending_plan_id, s.plan_id) = ${planId} AND s.default_tax_rates IS NULL
    AND NOT EXISTS (SELECT 1 FROM invoices AS i WHERE i.subscription_id = p.subscription_id AND i.period_index = p.period_index))`;

/**
 * SQL: a charge claimed for the subscription's open period has not settled, so it may be at the
 * processor now, or may have moved money whose outcome is not known yet (a claim older than
 * CLAIM_STALE_MS is taken over by the cron, src/billing/claims.ts, which sends the same reference
 * with the same card and records it, due or not). A cancel must not pass under it, however old.
 */
export const chargeInFlight = (subscriptionId: string, _realNow?: number) =>
  sql`(${unsettledPeriodClaim(subscriptionId, sql``)} OR ${prorationChargeInFlight(subscriptionId)})`;

/**
 * SQL: the first attempt at a new period is claimed and unsettled: its price (plan, quantity,
 * scheduled change, pending items) is fixed, and its settlement issues the invoice from the
 * subscription as it then reads it, so none of those may change until it settles. (A later
 * attempt charges an invoice that exists already.) Or a change invoiced at once is in flight.
 */
export const priceChargeInFlight = (subscriptionId: string) =>
  sql`(${unsettledPeriodClaim(subscriptionId, sql`AND NOT EXISTS (SELECT 1 FROM invoices AS i WHERE i.subscription_id = p.subscription_id AND i.period_index = p.period_index)`)} OR ${prorationChargeInFlight(subscriptionId)})`;

/** SQL: an attempt at the open period is claimed and unsettled (and `also` holds of its row, `p`). */
const unsettledPeriodClaim = (subscriptionId: string, also: SQL) => sql`EXISTS (SELECT 1 FROM subscription_periods AS p
  JOIN subscriptions AS s ON s.id = p.subscription_id
  WHERE p.subscription_id = ${subscriptionId} AND p.period_index = s.periods_billed AND p.status = 'open'
    AND p.attempts > s.dunning_attempts ${also})`;

/** SQL: the open period of the subscription is its final invoice (claimed at its period's end, not paid or voided). */
export const finalInvoiceClaimed = (subscriptionId: string) => sql`EXISTS (SELECT 1 FROM subscription_periods AS fp
  JOIN subscriptions AS fs ON fs.id = fp.subscription_id
  WHERE fp.subscription_id = ${subscriptionId} AND fp.period_index = fs.periods_billed AND fp.status = 'open' AND fp.final = 1)`;

/** subscription_updated, with the status the batch that emits it leaves the subscription in. */
export const subscriptionUpdatedEvent = (db: Db, tenant: Tenant, subscriptionId: string, at: number) =>
  emitEvent(db, tenant, { type: "subscription_updated", subscriptionId, status: sql`(SELECT status FROM subscriptions WHERE id = ${subscriptionId})` }, at);

/** SQL: the charge of a change invoiced at once (src/billing/proration-charges.ts) is claimed and unsettled. */
export const prorationChargeInFlight = (subscriptionId: string) =>
  sql`EXISTS (SELECT 1 FROM proration_charges AS pc WHERE pc.subscription_id = ${subscriptionId} AND pc.status = 'claimed')`;

/** The period being collected has a claimed attempt that never settled. */
export const hasUnsettledClaim = (row: Pick<BillableRow, "sub" | "period">) =>
  row.period !== null && row.period.status === "open" && row.period.attempts > row.sub.dunningAttempts;

/**
 * A subscription set to cancel at its period's end that still owes for it, so the renewal run
 * sends it a final invoice (as Stripe does) instead of only canceling it: an active one whose
 * last period's metered usage is billed in arrears, or whose pending proration items come to
 * something owed (a credit is never refunded, so items that net to a credit need no invoice); a
 * past_due one whose open period is that final invoice, dunned as any period is; or a past_due
 * metered one dunned for its previous period while its current one (open, taking usage) runs to
 * its end: it is dunned on (paid, it is active to that end, and its final invoice bills that
 * period's usage), not canceled at the retry with the current period's usage dropped.
 */
export const owesFinalInvoice = (row: Pick<BillableRow, "sub" | "plan" | "period">) =>
  row.sub.cancelAtPeriodEnd &&
  ((row.sub.status === "active" && (isMetered(row.plan) || row.sub.pendingItemsAmount > 0)) ||
    (row.sub.status === "past_due" && row.period !== null && row.period.status === "open" && (row.period.final || isMetered(row.plan))));

export interface PeriodClaim {
  attempts: number;
  /** What the attempt charges: the period's price less its discount (0: nothing to charge). */
  amount: number;
  /** What the subscription's discount took off the period's price. */
  discount: number;
  /** A metered period's aggregated usage; null for a licensed one. */
  usageQuantity: number | null;
  /** The pending proration items priced in (how many, their sum), and the credit carried on when they took the total below zero. */
  items: number;
  itemsAmount: number;
  creditCarried: number;
  /** The exclusive tax of the period's invoice, in `amount`. */
  tax: number;
  /** What the claim took from the user's balance towards the invoice (the card is charged `amount` less this), and the balance it found. */
  balanceApplied: number;
  startingBalance: number;
  currency: string;
  /** The card the attempt charges when it is not the subscription's: a past-due card update's. */
  card: ClaimCard | null;
  /**
   * When the period's row was made (ms): no attempt's reference was sent before it, so a live
   * processor whose idempotency keys expire (Stripe: 24 hours) looks a charge up first past then.
   */
  periodCreatedAt: number;
  /** The period's invoice, once an earlier attempt's settlement issued it; null for the first attempt. */
  invoiceId: string | null;
  /** The final invoice of a subscription set to cancel at its period's end: paid, it cancels the subscription. */
  final: boolean;
}

/** SQL: the invoice of a period row, read by the claim that returns it. */
const periodInvoiceId = sql.raw(
  `(SELECT invoices.id FROM invoices WHERE invoices.subscription_id = subscription_periods.subscription_id AND invoices.period_index = subscription_periods.period_index)`,
);

/** What a claim statement returns. */
const CLAIM_RETURNING = sql`RETURNING attempts, amount, discount, usage_quantity, items, items_amount, credit_carried, tax, balance_applied, starting_balance, currency, claim_card, created_at, final, ${periodInvoiceId} AS invoice_id`;

export function claimOf(result: unknown): PeriodClaim | null {
  const row = (
    result as {
      results?: (Omit<PeriodClaim, "card" | "periodCreatedAt" | "invoiceId" | "usageQuantity" | "itemsAmount" | "creditCarried" | "final" | "tax" | "balanceApplied" | "startingBalance"> & {
        balance_applied: number | null;
        starting_balance: number | null;
        tax: number | null;
        final: number | boolean;
        usage_quantity: number | null;
        items_amount: number;
        credit_carried: number;
        claim_card: string | null;
        created_at: string;
        invoice_id: string | null;
      })[];
    }
  ).results?.[0];
  if (!row) return null;
  return {
    attempts: row.attempts,
    amount: row.amount,
    discount: row.discount,
    usageQuantity: row.usage_quantity ?? null,
    items: row.items,
    itemsAmount: row.items_amount,
    creditCarried: row.credit_carried,
    tax: row.tax ?? 0,
    balanceApplied: row.balance_applied ?? 0,
    startingBalance: row.starting_balance ?? 0,
    currency: row.currency,
    card: row.claim_card === null ? null : (JSON.parse(row.claim_card) as ClaimCard),
    periodCreatedAt: Date.parse(row.created_at),
    invoiceId: row.invoice_id ?? null,
    final: Boolean(row.final),
  };
}

/** SQL: the user's balance in `currency` (negative is a credit; 0 when it holds another currency or none). */
const userBalance = (userId: string, currency: string) => sql`COALESCE((SELECT u.balance FROM users AS u WHERE u.id = ${userId} AND u.currency = ${currency}), 0)`;

/**
 * The statements that follow a renewal's claim of a new period in its batch: what the claim took
 * from the user's balance (balance_applied) is written to the ledger, once per period (its source is
 * unique, so a claim taken over or retried takes nothing again), and the balance becomes the
 * ledger's sum. In the claim's own batch, right after it, so the next claim of the same user (in
 * this batch or a later one) sees the balance already taken: a credit is never used twice.
 */
export function balanceTaken(db: Db, sub: Pick<SubscriptionRow, "id" | "userId" | "accountId" | "livemode" | "periodsBilled">, at: number): Statement[] {
  const source = `period:${sub.id}:${sub.periodsBilled}`;
  return [
    rawStatement(
      db,
      sql`INSERT INTO customer_balance_transactions (id, account_id, livemode, user_id, amount, currency, type, credit_note_id, invoice_id, source, ending_balance, created_at)
        SELECT ${newId("balanceTransaction", at)}, p.account_id, p.livemode, ${sub.userId}, p.balance_applied, p.currency, 'applied_to_invoice', NULL, NULL, ${source},
          u.balance + p.balance_applied, ${isoTime(at)}
        FROM subscription_periods AS p JOIN users AS u ON u.id = ${sub.userId}
        WHERE p.subscription_id = ${sub.id} AND p.period_index = ${sub.periodsBilled} AND p.balance_applied > 0
        ON CONFLICT (source) DO NOTHING`,
    ),
    rawStatement(
      db,
      sql`UPDATE users SET balance = (SELECT COALESCE(SUM(t.amount), 0) FROM customer_balance_transactions AS t WHERE t.user_id = users.id)
        WHERE id = ${sub.userId} AND EXISTS (SELECT 1 FROM customer_balance_transactions AS t WHERE t.source = ${source})`,
    ),
  ];
}

/**
 * The claim of the next attempt at the open period, as one statement returning the claim (or
 * nothing when lost). `renewal` claims a due subscription (and may take over a stale claim);
 * `card_update` claims the next attempt of a past_due one, due or not, for `card` (vaulted);
 * `pay` claims the next attempt of a past_due one, due or not, with its own card (Pay now of the
 * period's open invoice); `takeover` takes over a stale, unsettled claim, due or not (the cron's
 * settlement of claims whose lease ran out, and a renewal run's at a cancel at period end).
 */
export function claimPeriod(
  db: Db,
  row: Pick<BillableRow, "sub" | "plan"> & { coupon?: DiscountCoupon | null; usage?: PeriodUsage; items?: InvoiceItemRow[] },
  kind: "renewal" | "card_update" | "pay" | "takeover",
  at: number,
  realNow: number,
  card?: ClaimCard,
): Statement {
  const { sub, plan } = row;
  const n = sub.periodsBilled;
  const nowIso = isoTime(realNow);
  const staleIso = isoTime(realNow - CLAIM_STALE_MS);
  if (kind === "takeover") {
    // Only a stale, unsettled claim of this period: charged again with the same reference and card.
    return rawStatement(
      db,
      sql`UPDATE subscription_periods SET updated_at = ${nowIso}
        WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open'
          AND attempts > ${sub.dunningAttempts} AND updated_at < ${staleIso} AND NOT ${awaitingPayer} AND ${stillAsRead(sub)}
        ${CLAIM_RETURNING}`,
    );
  }
  if (kind === "card_update" && !card) throw new Error("a card update claims the period for a vaulted card");
  if (kind === "pay" && sub.status !== "past_due") throw new Error("Pay now claims the open period of a past_due subscription");
  const asRead = stillAsRead(sub, kind === "renewal" ? at : undefined);
  // A new period's first attempt (a trial's end claims period 0 the same way), priced with the
  // change scheduled for it, if any.
  if (sub.status === "active" || sub.status === "trialing") {
    // A subscription set to cancel at this period's end is claimed only for its final invoice
    // (owesFinalInvoice): a metered period's usage and the pending items, no new period.
    const final = sub.cancelAtPeriodEnd;
    const priced = withScheduledChange(row);
    const startMs = periodStartMs(sub.billingAnchor, plan.interval, n);
    const start = isoTime(startMs);
    // The period's price (a metered period's: its usage, priced; the claim holds only if no record
    // arrived since it was read), less what the subscription's discount takes off the invoice of
    // the period that starts then.
    let subtotal: number;
    let usageQuantity: number | null = null;
    let usageHolds: SQL = sql`1`;
    if (isMetered(priced.plan)) {
      if (!row.usage) throw new Error(`a metered claim of ${sub.id} needs its period's usage`);
      ({ quantity: usageQuantity, amount: subtotal } = meteredPeriod(priced.plan, sub.billingAnchor, n, row.usage));
      usageHolds = usageUnchanged(sub.id, n, row.usage);
    } else {
      subtotal = final ? 0 : periodAmount(priced.plan, priced.sub.quantity);
    }
    // A metered period is invoiced at its end: a discount redeemed during it (one that "applies
    // from the next invoice") counts from the period's start, as one running then does, and its
    // duration in periods from there (a 1-month coupon redeemed mid-May discounts May's usage only).
    const discountFrom =
      isMetered(priced.plan) && sub.discountStart !== null && Date.parse(sub.discountStart) >= Date.parse(sub.billingAnchor)
        ? { ...sub, discountStart: isoTime(usagePeriodAt(sub.billingAnchor, plan.interval, Date.parse(sub.discountStart)).start) }
        : sub;
    const discount = periodDiscount(discountFrom, row.coupon ?? null, subtotal, plan.currency, startMs);
    // The pending proration items come on top; a total they take below zero charges nothing and
    // carries the rest on as a credit (src/billing/prorations.ts).
    // The exclusive tax of the invoice the period's settlement issues (its lines: the period's,
    // after its discount, and each pending item), rounded per line as that invoice rounds it.
    const tax = periodTax(priced, final && !isMetered(priced.plan) ? null : subtotal - discount, sub.pendingItems, row.items);
    const net = subtotal - discount + sub.pendingItemsAmount + tax;
    const amount = Math.max(0, net);
    const carried = Math.max(0, -net);
    if (subtotal > MAX_AMOUNT || amount > MAX_AMOUNT) throw new RangeError(`period ${n} of ${sub.id} prices at ${subtotal} (${amount} due), beyond the largest chargeable amount`);
    return rawStatement(
      db,
      sql`INSERT INTO subscription_periods (id, account_id, livemode, subscription_id, period_index, period_start, amount, discount, usage_quantity, items, items_amount, credit_carried, tax, balance_applied, starting_balance, percent_off, final, currency, status, attempts, created_at, updated_at)
        SELECT ${newId("period", realNow)}, ${sub.accountId}, ${sub.livemode ? 1 : 0}, ${sub.id}, ${n}, ${start}, ${amount}, ${discount}, ${usageQuantity}, ${sub.pendingItems}, ${sub.pendingItemsAmount}, ${carried}, ${tax},
          MIN(${amount}, MAX(0, -${userBalance(sub.userId, plan.currency)})), ${userBalance(sub.userId, plan.currency)},
          ${discount > 0 ? (row.coupon?.percentOffBasisPoints ?? null) : null}, ${final ? 1 : 0}, ${plan.currency}, 'open', 1, ${nowIso}, ${nowIso}
        WHERE ${asRead} AND ${pricedAsRead(sub)} AND ${planTaxRatesAsRead(priced)} AND ${usageHolds}
        ON CONFLICT (subscription_id, period_index) DO UPDATE SET updated_at = excluded.updated_at
          WHERE subscription_periods.status = 'open' AND subscription_periods.attempts = 1 AND subscription_periods.updated_at < ${staleIso}
        ${CLAIM_RETURNING}`,
    );
  }
  const k = sub.dunningAttempts;
  const takeover = kind === "renewal" ? sql`OR (attempts = ${k + 1} AND updated_at < ${staleIso} AND NOT ${awaitingPayer})` : sql``;
  // A new attempt charges the card it names (a renewal's: the subscription's, so none); a stale
  // claim taken over keeps the card it was claimed for.
  const claimCard = kind === "card_update" ? sql`${JSON.stringify(card)}` : sql`CASE WHEN attempts = ${k} THEN NULL ELSE claim_card END`;
  return rawStatement(
    db,
    sql`UPDATE subscription_periods SET attempts = ${k + 1}, updated_at = ${nowIso}, claim_card = ${claimCard}
      WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open'
        AND (attempts = ${k} ${takeover}) AND ${asRead}
      ${CLAIM_RETURNING}`,
  );
}

/**
 * The claim of the open period's next attempt that holds `card`, if the claim statement of a card
 * update committed: its commit answer was lost, and a token is vaulted once, so a claim holding it
 * is this request's. Null when it did not commit.
 */
export async function ownCardClaim(db: Db, sub: SubscriptionRow, card: ClaimCard): Promise<PeriodClaim | null> {
  return claimRead(db, sub, sub.dunningAttempts + 1, sql`json_extract(${subscriptionPeriods.claimCard}, '$.token') = ${card.token}`);
}

/** The claim of the open period's attempt `attempts`, if it is still open and claimed (a payment on the invoice's page holds it while its payer authenticates). */
export async function heldClaim(db: Db, sub: SubscriptionRow, attempts: number): Promise<PeriodClaim | null> {
  return claimRead(db, sub, attempts, sql`${subscriptionPeriods.status} = 'open'`);
}

async function claimRead(db: Db, sub: SubscriptionRow, attempts: number, also: SQL): Promise<PeriodClaim | null> {
  const [row] = await db
    .select({
      attempts: subscriptionPeriods.attempts,
      amount: subscriptionPeriods.amount,
      discount: subscriptionPeriods.discount,
      usageQuantity: subscriptionPeriods.usageQuantity,
      items: subscriptionPeriods.items,
      itemsAmount: subscriptionPeriods.itemsAmount,
      creditCarried: subscriptionPeriods.creditCarried,
      tax: subscriptionPeriods.tax,
      balanceApplied: subscriptionPeriods.balanceApplied,
      startingBalance: subscriptionPeriods.startingBalance,
      currency: subscriptionPeriods.currency,
      card: subscriptionPeriods.claimCard,
      createdAt: subscriptionPeriods.createdAt,
      final: subscriptionPeriods.final,
      invoiceId: sql<string | null>`${periodInvoiceId}`,
    })
    .from(subscriptionPeriods)
    .where(
      and(
        eq(subscriptionPeriods.subscriptionId, sub.id),
        eq(subscriptionPeriods.periodIndex, sub.periodsBilled),
        eq(subscriptionPeriods.attempts, attempts),
        also,
      ),
    );
  return row
    ? { attempts: row.attempts, amount: row.amount, discount: row.discount, usageQuantity: row.usageQuantity ?? null, items: row.items, itemsAmount: row.itemsAmount, creditCarried: row.creditCarried, tax: row.tax, balanceApplied: row.balanceApplied, startingBalance: row.startingBalance, currency: row.currency, card: row.card ?? null, periodCreatedAt: Date.parse(row.createdAt), invoiceId: row.invoiceId ?? null, final: row.final }
    : null;
}

/**
 * Gives a request's claim back at once, when the outcome of its charge is unknown (the processor
 * never answered, or the settlement's commit answer was lost): the cron's next run then sends the
 * same reference again and records what it answers, instead of waiting for the lease to run out.
 * Only the claim as this request made it (not taken over since, not settled) is given back.
 */
export function releaseClaim(db: Db, sub: SubscriptionRow, claim: PeriodClaim, claimedAt: number): Statement {
  return rawStatement(
    db,
    sql`UPDATE subscription_periods SET updated_at = ${isoTime(claimedAt - CLAIM_STALE_MS - 1)}
      WHERE subscription_id = ${sub.id} AND period_index = ${sub.periodsBilled} AND status = 'open'
        AND attempts = ${claim.attempts} AND attempts > (SELECT dunning_attempts FROM subscriptions WHERE id = ${sub.id})
        AND updated_at = ${isoTime(claimedAt)}`,
  );
}

/** The columns a charged card writes on its subscription: the token renewals charge, and what answers show. */
export const claimCardColumns = (card: ClaimCard): Partial<SubscriptionRow> => ({
  processorToken: card.token,
  cardBrand: card.brand,
  cardLast4: card.last4,
  cardExpMonth: card.exp_month,
  cardExpYear: card.exp_year,
  cardFingerprint: card.fingerprint,
});

/** The conditional match of a settlement: the subscription as the claim saw it. */
const asClaimed = (sub: SubscriptionRow) =>
  and(
    eq(subscriptions.id, sub.id),
    eq(subscriptions.periodsBilled, sub.periodsBilled),
    eq(subscriptions.dunningAttempts, sub.dunningAttempts),
    inArray(subscriptions.status, [...RENEWING]),
  );

export interface PeriodSettlement {
  outcome: PeriodOutcome;
  /** The charge; null for a period with nothing to charge (a discount took all of it), settled paid without one. */
  charge: ChargeResult | null;
  /** The columns the settlement writes on the subscription (when it renewed, the advance). */
  subscriptionChanges: Partial<SubscriptionRow>;
  writes: { statements: Statement[]; events: EmittedEvent[] };
}

export interface PeriodCharge {
  processor: Processor;
  /** PUBLIC_URL, for the hosted page of the invoice a first attempt issues (src/pages/public-url.ts). */
  pageBase: string | null;
  row: Pick<BillableRow, "sub" | "plan" | "user">;
  /**
   * The claimed attempt. It names the card charged: the subscription's vaulted card (a renewal or
   * dunning retry: a decline dunns, past_due with the next retry or canceled when the retries are
   * used up), or a past-due card update's new card (success makes it the subscription's card; a
   * decline counts the attempt and keeps the retry scheduled).
   */
  claim: PeriodClaim;
  /** Billing time (a test clock's, or the wall clock) and the wall clock. */
  at: number;
  realNow: number;
  /** Further column changes made with a success (a card update's plan, quantity or cancel_at_period_end). */
  changes?: Partial<SubscriptionRow>;
  /**
   * An attempt asked for by hand (Pay now): a decline counts the attempt and keeps the scheduled
   * retry, as a card update's does, instead of dunning.
   */
  manual?: boolean;
  /**
   * The payer is there (the invoice's hosted page): the card is charged on session, and one whose
   * bank asks for 3-D Secure makes a payment in requires_action (outcome `requires_action`) that
   * holds the claim until its payer has authenticated.
   */
  onSession?: NonNullable<ChargeArgs["onSession"]>;
}

/**
 * The charge of a settlement that made one. A past_due period always has something to charge (a
 * period its discount made free is settled paid at its first attempt), so a card update's and
 * Pay now's settlements always have one.
 */
export function chargeOf(settlement: PeriodSettlement): ChargeResult {
  if (!settlement.charge) throw new Error("a past_due period's attempt charged nothing");
  return settlement.charge;
}

/** The token of the card a claim charges: its own (a card update's), else the subscription's. */
export const chargedToken = (sub: SubscriptionRow, claim: PeriodClaim) => claim.card?.token ?? sub.processorToken;

/** Charges a claimed period and builds, without committing, the batch that settles it. */
export async function chargePeriod(db: Db, args: PeriodCharge): Promise<PeriodSettlement> {
  const { sub, plan, user } = args.row;
  const { claim, at, realNow } = args;
  const n = sub.periodsBilled;
  const reference = periodReference(sub.id, n, claim.attempts);
  const newCard = claim.card;
  // The period's invoice: issued by the settlement of its first attempt, named by every attempt.
  const invoiceId = claim.invoiceId ?? newId("invoice", realNow);
  // The invoice of the period's first attempt, with the pending items its claim priced in, built
  // before any money moves: it must come to what the claim charges.
  let invoice: ReturnType<typeof periodInvoice> | null = null;
  let items: InvoiceItemRow[] = [];
  let excessLineId: string | null = null;
  if (!claim.invoiceId) {
    if (claim.items > 0) items = await pendingItemsOf(db, sub.id);
    if (items.length !== claim.items || items.reduce((sum, item) => sum + item.amount, 0) !== claim.itemsAmount) {
      throw new Error(`the pending items of ${sub.id} are not the ${claim.items} its claim of period ${n} priced`);
    }
    invoice = periodInvoice(withScheduledChange(args.row), n, invoiceId, claim, items);
    // A credit beyond the invoice goes to the user's balance, as a credit note of its last line (src/billing/balance-credits.ts).
    excessLineId = claim.creditCarried > 0 && balanceTakes(user, plan.currency) ? newId("invoiceLine", realNow) : null;
    if (excessLineId) invoice.lines[invoice.lines.length - 1] = balanceCreditLine(excessLineId, claim.creditCarried, invoice.periodStart, invoice.periodEnd);
    const due = totalsOf(invoice).amountDue;
    if (due !== claim.amount - claim.balanceApplied) throw new Error(`the invoice of period ${n} of ${sub.id} comes to ${due}, its claim to ${claim.amount - claim.balanceApplied}`);
  }
  // What the card is charged: the claim's amount less what it took from the user's balance.
  const chargeAmount = claim.amount - claim.balanceApplied;
  // A period its discount (or a credit) made free is settled paid, with no charge: the processor is not called.
  const free = chargeAmount === 0;
  const result = free ? null : await charge({
    db,
    processor: args.processor,
    accountId: sub.accountId,
    livemode: sub.livemode,
    customer: { id: user.id, email: user.email },
    subscriptionId: sub.id,
    invoiceId,
    amount: chargeAmount,
    currency: claim.currency,
    source: { token: chargedToken(sub, claim), ...(args.onSession ? { customerPresent: true } : {}) },
    summary: newCard ? { brand: newCard.brand as CardSummary["brand"], last4: newCard.last4, exp_month: newCard.exp_month, exp_year: newCard.exp_year } : cardOf(sub),
    fingerprint: newCard ? newCard.fingerprint : sub.cardFingerprint,
    at: realNow,
    processorReference: reference,
    firstAttemptAt: claim.periodCreatedAt,
    ...(args.onSession ? { onSession: args.onSession } : {}),
  });
  const period = and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.periodIndex, n));
  // Recorded only where the account lives: one that a move switched away while the processor
  // answered is settled by the new shard's cron, with the same reference (issue 33).
  const here = accountLivesHere(sub.accountId);
  const statements: Statement[] = [
    result
      ? // A claim taken over after a crash charges with the same reference: record that charge once.
        guard(db, PERIOD_ALREADY_SETTLED, sql`NOT EXISTS (SELECT 1 FROM payments WHERE charge_reference = ${reference}) AND ${here}`)
      : guard(db, PERIOD_ALREADY_SETTLED, sql`EXISTS (SELECT 1 FROM subscription_periods WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open') AND ${here}`),
    ...(result?.statements ?? []),
  ];
  const base = { statements, events: [...(result?.events ?? [])] };
  if (result?.requiresAction) {
    // The payer is on the invoice's page and the card asks for 3-D Secure: the payment waits for
    // them, holding the claim (awaitingPayer), and the attempt is settled when it ends.
    statements.push(db.update(subscriptionPeriods).set({ updatedAt: isoTime(realNow) }).where(period));
    return { outcome: "requires_action", charge: result, subscriptionChanges: {}, writes: base };
  }
  return attemptSettlement(db, args, result, invoiceId, base, invoice ? { invoice, items, excessLineId } : null);
}

/**
 * The batch that settles a claimed attempt once its charge is known (`result`; null for a period
 * with nothing to charge), after `statements` and `events` (the guard and the charge's own): the
 * period, the subscription, the invoice and their events. chargePeriod settles its own charge with
 * it; a payment its payer authenticated on the invoice's page is settled with it when the
 * authentication ends (src/billing/invoice-payments.ts).
 */
export function attemptSettlement(
  db: Db,
  args: Omit<PeriodCharge, "processor">,
  result: ChargeResult | null,
  invoiceId: string,
  base: { statements: Statement[]; events: EmittedEvent[] },
  first: { invoice: ReturnType<typeof periodInvoice>; items: InvoiceItemRow[]; excessLineId: string | null } | null,
): PeriodSettlement {
  const { sub, plan } = args.row;
  const { claim, at, realNow } = args;
  const n = sub.periodsBilled;
  const newCard = claim.card;
  const invoice = first?.invoice ?? null;
  const items = first?.items ?? [];
  const period = and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.periodIndex, n));
  const statements: Statement[] = [...base.statements];
  const events: EmittedEvent[] = [...base.events];
  const notify = (type: "subscription_renewal" | "subscription_canceled" | "subscription_updated", status: string) =>
    events.push(emitEvent(db, sub, { type, subscriptionId: sub.id, status }, realNow));
  const updatedAt = isoTime(realNow);
  let outcome: PeriodOutcome;
  let subscriptionChanges: Partial<SubscriptionRow> = {};

  if (!result || result.succeeded) {
    // A licensed period is paid at its start, so the next is due when it ends; a metered one is
    // invoiced at its end, so the next is due when the period after it ends.
    subscriptionChanges = claim.final
      ? // The final invoice is paid: the subscription ends, at its period's end (a past_due one's
        // final invoice paid later: when it was paid).
        {
          ...args.changes,
          ...(newCard ? claimCardColumns(newCard) : {}),
          status: "canceled",
          canceledAt: sub.status === "active" ? sub.nextBillingDate : isoTime(at),
          cancelAtPeriodEnd: false,
          dueAt: null,
          dunningAttempts: 0,
          updatedAt,
        }
      : {
          ...args.changes,
          ...(newCard ? claimCardColumns(newCard) : {}),
          status: "active",
          ...periodDone(sub, plan, n),
          dunningAttempts: 0,
          updatedAt,
        };
    statements.push(
      db.update(subscriptionPeriods).set({ status: "paid", paymentId: result?.payment.id ?? null, updatedAt }).where(period),
      db.update(subscriptions).set(subscriptionChanges).where(asClaimed(sub)),
    );
    if (claim.final) {
      notify("subscription_canceled", "canceled");
      outcome = "canceled";
    } else {
      notify("subscription_renewal", "success");
      if (newCard || sub.status === "trialing") notify("subscription_updated", "active");
      outcome = "renewed";
    }
  } else if (newCard || args.manual) {
    // The new card (or Pay now) was declined: the attempt counts, the scheduled retry stands, nothing else changes.
    statements.push(
      db.update(subscriptionPeriods).set({ updatedAt }).where(period),
      db.update(subscriptions).set({ dunningAttempts: claim.attempts, updatedAt }).where(asClaimed(sub)),
    );
    outcome = "past_due";
  } else {
    const failedAttempts = claim.attempts;
    const retryAt = nextRetryAt(failedAttempts, at);
    notify("subscription_renewal", "failed");
    if (retryAt !== null) {
      statements.push(
        db.update(subscriptionPeriods).set({ updatedAt }).where(period),
        db.update(subscriptions).set({ status: "past_due", dunningAttempts: failedAttempts, dueAt: retryAt, updatedAt }).where(asClaimed(sub)),
      );
      outcome = "past_due";
    } else {
      statements.push(
        db.update(subscriptionPeriods).set({ status: "uncollectible", updatedAt }).where(period),
        db
          .update(subscriptions)
          .set({ status: "canceled", canceledAt: isoTime(at), cancelAtPeriodEnd: false, dueAt: null, dunningAttempts: failedAttempts, updatedAt })
          .where(asClaimed(sub)),
      );
      notify("subscription_canceled", "canceled");
      outcome = "canceled";
    }
  }
  const invoiceOutcome: Extract<InvoiceOutcome, { kind: "paid" | "failed" }> = !result
    ? { kind: "paid", paymentId: null }
    : result.succeeded
      ? { kind: "paid", paymentId: result.payment.id }
      : { kind: "failed", paymentId: result.payment.id, status: outcome === "canceled" ? "uncollectible" : "open" };
  if (claim.invoiceId) {
    const settled = settleInvoice(db, sub, claim.invoiceId, invoiceOutcome, { at, realNow });
    statements.push(...settled.statements);
    events.push(...settled.events);
  } else {
    const issued = issueInvoice(db, invoice!, invoiceOutcome, { at, realNow, pageBase: args.pageBase });
    statements.push(...issued.statements);
    events.push(...issued.events);
    // The line chargePeriod named for a credit beyond the invoice: its credit note, not a carried item.
    const excessLineId = first!.excessLineId;
    statements.push(...takeItems(db, sub, invoiceId, items, excessLineId ? { ...claim, creditCarried: 0 } : claim, invoice!, realNow));
    if (excessLineId) {
      const excess = excessCreditNoteWrites(db, { tenant: sub, invoice: { id: invoiceId, userId: sub.userId, currency: plan.currency }, lineId: excessLineId, amount: claim.creditCarried, at: realNow });
      statements.push(...excess.statements);
      events.push(...excess.events);
    }
    // The change scheduled for this period is the subscription's from now on.
    if (sub.pendingPlanId !== null) {
      statements.push(
        rawStatement(
          db,
          sql`UPDATE subscriptions SET plan_id = pending_plan_id, quantity = COALESCE(pending_quantity, quantity), pending_plan_id = NULL, pending_quantity = NULL
            WHERE id = ${sub.id} AND pending_plan_id = ${sub.pendingPlanId}`,
        ),
      );
    }
    // The discount was used by this invoice (a `once` coupon by no other). Not when the
    // subscription redeemed another coupon since the period began (a metered period's: since it
    // ended, as one redeemed during it discounts it): that one starts afresh.
    if (claim.discount > 0) {
      statements.push(
        rawStatement(
          db,
          sql`UPDATE subscriptions SET discount_uses = discount_uses + 1 WHERE id = ${sub.id} AND ${isMetered(plan) ? sql`discount_start < ${isoTime(periodStartMs(sub.billingAnchor, plan.interval, n + 1))}` : sql`discount_start <= ${isoTime(periodStartMs(sub.billingAnchor, plan.interval, n))}`}`,
        ),
      );
    }
  }
  // An off-session charge the bank refused for want of the payer's authentication (3-D Secure):
  // the invoice stays open, dunning goes on, and its payer can pay it on its hosted page.
  if (result && !result.succeeded && result.declineCode === "authentication_required" && invoiceOutcome.kind === "failed" && invoiceOutcome.status === "open") {
    events.push(invoiceActionRequiredEvent(db, sub, claim.invoiceId ?? invoiceId, realNow));
  }
  // The payment is recorded whatever happened to the subscription meanwhile: money moved.
  return { outcome, charge: result, subscriptionChanges, writes: { statements, events } };
}

/**
 * The invoice of a subscription's billing period `n`: one line, the period's price (what it
 * charges plus its discount), and the discount the claim took off, as the invoice's discount.
 */
export function periodInvoice(
  row: Pick<BillableRow, "sub" | "plan">,
  n: number,
  id: string,
  charged: Pick<PeriodClaim, "amount" | "discount" | "currency" | "usageQuantity" | "itemsAmount" | "creditCarried" | "tax"> & Partial<Pick<PeriodClaim, "balanceApplied" | "startingBalance">> & { final?: boolean },
  items: InvoiceItemRow[] = [],
) {
  const { sub, plan } = row;
  // A licensed subscription's final invoice bills no new period: it is dated by the period that
  // ended (the one its items were prorated in), and has no period line.
  const noPeriodLine = charged.final === true && charged.usageQuantity === null;
  const first = noPeriodLine ? n - 1 : n;
  const periodStart = isoTime(periodStartMs(sub.billingAnchor, plan.interval, first));
  const periodEnd = isoTime(periodStartMs(sub.billingAnchor, plan.interval, first + 1));
  // The period's own price: what the claim charges, plus its discount, less the items and the credit carried on.
  const price = charged.amount + charged.discount - charged.itemsAmount - charged.creditCarried - charged.tax;
  return {
    id,
    tenant: sub,
    subscriptionId: sub.id,
    periodIndex: n,
    userId: sub.userId,
    currency: plan.currency,
    periodStart,
    periodEnd,
    lines: [
      ...(noPeriodLine
        ? []
        : [
            charged.usageQuantity !== null
              ? usageLine(plan, charged.usageQuantity, price, periodStart, periodEnd)
              : subscriptionLine(plan, sub.quantity, price, periodStart, periodEnd),
          ]),
      ...items.map(itemLine),
      ...(charged.creditCarried > 0 ? [carriedCreditLine(charged.creditCarried, periodStart, periodEnd)] : []),
    ],
    coupon: discountAsCoupon(charged.discount, charged.currency),
    couponId: sub.couponId,
    taxRates: taxRatesOf(sub, plan),
    balance: { starting: charged.startingBalance ?? 0, applied: charged.balanceApplied ?? 0 },
  };
}

/**
 * The exclusive tax a period's invoice will carry: the period line's (`periodNet`, its price after
 * its discount; null when the invoice has no period line) and each pending item's, per rate,
 * rounded once per line (src/domain/tax.ts), as issueInvoice computes it from the same lines.
 */
function periodTax(row: Pick<BillableRow, "sub" | "plan">, periodNet: number | null, pendingItems: number, items: InvoiceItemRow[] | undefined): number {
  const rates = taxRatesOf(row.sub, row.plan);
  if (rates.length === 0) return 0;
  if (pendingItems > 0 && items?.length !== pendingItems) throw new Error(`the claim of ${row.sub.id} needs its ${pendingItems} pending items to price their tax`);
  const nets = [...(periodNet === null ? [] : [periodNet]), ...(items ?? []).filter((item) => item.type !== "credit").map((item) => item.amount)];
  return nets.reduce((sum, net) => sum + exclusiveTax(lineTax(net, rates)), 0);
}

/**
 * The statements that give the invoice of a period's first attempt the items its claim priced in,
 * and carry on the credit of one whose items took it below zero, as an item for the next invoice.
 */
function takeItems(db: Db, sub: SubscriptionRow, invoiceId: string, items: InvoiceItemRow[], claim: PeriodClaim, invoice: { currency: string; periodStart: string; periodEnd: string }, at: number): Statement[] {
  if (items.length === 0 && claim.creditCarried === 0) return [];
  const carried = claim.creditCarried > 0 ? carriedCreditItem(sub, claim.creditCarried, invoice.currency, invoice.periodStart, invoice.periodEnd, at) : null;
  return [
    // Every pending item: the set is the claim's (no change is taken while its charge is in flight),
    // named by the subscription, not by id (D1 binds at most 100 values per statement).
    ...(items.length > 0 ? [db.update(invoiceItems).set({ invoiceId }).where(and(eq(invoiceItems.subscriptionId, sub.id), isNull(invoiceItems.invoiceId)))] : []),
    ...(carried ? [db.insert(invoiceItems).values(carried)] : []),
    rawStatement(
      db,
      sql`UPDATE subscriptions SET pending_items = pending_items - ${items.length} + ${carried ? 1 : 0},
        pending_items_amount = pending_items_amount - ${claim.itemsAmount} + ${carried ? carried.amount : 0} WHERE id = ${sub.id}`,
    ),
  ];
}

/**
 * The batch that ends a subscription whose period is over and that was set to cancel at period
 * end. It aborts (RENEWAL_STALE) when the subscription changed since it was read, or while a
 * charge for the open period may be at the processor, so a period is never charged after the
 * subscription went canceled.
 */
export const CANCEL_AT_PERIOD_END_STALE = "cancel_at_period_end_stale";

export function cancelAtPeriodEndWrites(db: Db, sub: SubscriptionRow, at: number, realNow: number): { statements: Statement[]; events: EmittedEvent[] } {
  const updatedAt = isoTime(realNow);
  const ready: SQL = sql`${stillAsRead(sub, at)} AND ${sql.raw(sub.cancelAtPeriodEnd ? "1" : "0")} AND NOT ${chargeInFlight(sub.id, realNow)}`;
  return {
    statements: [
      guard(db, CANCEL_AT_PERIOD_END_STALE, ready),
      db
        .update(subscriptions)
        // An active subscription ends exactly at its period end (a trialing one at its trial's end);
        // a past_due one when its retry was due.
        .set({ status: "canceled", canceledAt: sub.status !== "past_due" ? sub.nextBillingDate : isoTime(at), cancelAtPeriodEnd: false, dueAt: null, updatedAt })
        .where(eq(subscriptions.id, sub.id)),
      db
        .update(subscriptionPeriods)
        .set({ status: "uncollectible", updatedAt })
        .where(and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.status, "open"))),
      uncollectibleInvoicesOf(db, sub.id, realNow),
    ],
    events: [emitEvent(db, sub, { type: "subscription_canceled", subscriptionId: sub.id, status: "canceled" }, realNow)],
  };
}
