// Coupons and the discounts they give subscriptions (DESIGN.md "Billing depth"). The arithmetic
// is src/domain/discounts.ts; this module holds what the routes and the billing paths share:
//
//   redeemCoupon     the statements that redeem a coupon in the caller's batch: guards that it is
//                    still valid, not past redeem_by and not used up, then the count and a
//                    redemption row. D1 runs one batch at a time, and the CHECK on
//                    times_redeemed <= max_redemptions backs the guard, so two redemptions of a
//                    coupon with one left give exactly one.
//   periodDiscount   what a subscription's discount takes off a period's price, on the invoice
//                    dated at the period's start (once: the first invoice; repeating N months:
//                    invoices dated before start + N months; forever: every one).
//
// A subscription's creation redeems its coupon before the card is charged (a reservation under the
// first charge's reference, which a retry with the same Idempotency-Key reuses), so a coupon used
// up meanwhile is refused before any money moves; a decline gives the reservation back. A
// reservation whose request died before its commit keeps its redemption: the charge's outcome may
// be unknown and its retry may still come, so it is never given back by time. A coupon can lose a
// redemption that way; it never gives more than max_redemptions.
import { type SQL, and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { guard, rawStatement, type Statement } from "../db/batch";
import { couponRedemptions, coupons, type subscriptions } from "../db/schema";
import { type CouponValue, discountAmount, discountAppliesToInvoice, discountEnd, percentOffFromBasisPoints } from "../domain/discounts";
import { newId } from "../domain/ids";
import { clock, isoTime } from "../lib/clock";
import { invalidRequest } from "../lib/errors";

export type CouponRow = typeof coupons.$inferSelect;
type SubscriptionRow = typeof subscriptions.$inferSelect;

/** The coupon as the API answers it. */
export function serializeCoupon(row: CouponRow, now: number = clock.now()) {
  return {
    id: row.id,
    object: "coupon" as const,
    livemode: row.livemode,
    name: row.name,
    percent_off: row.percentOffBasisPoints === null ? null : percentOffFromBasisPoints(row.percentOffBasisPoints),
    amount_off: row.amountOff,
    currency: row.currency,
    duration: row.duration,
    duration_in_months: row.durationInMonths,
    max_redemptions: row.maxRedemptions,
    redeem_by: row.redeemBy,
    times_redeemed: row.timesRedeemed,
    // Whether it can be redeemed now (Stripe's `valid`): not deleted, not past redeem_by, not used up.
    valid: row.valid && (row.redeemBy === null || Date.parse(row.redeemBy) > now) && (row.maxRedemptions === null || row.timesRedeemed < row.maxRedemptions),
    created_at: row.createdAt,
    deleted_at: row.deletedAt,
  };
}

/** What the coupon takes off. */
export const couponValue = (row: Pick<CouponRow, "percentOffBasisPoints" | "amountOff" | "currency">): CouponValue =>
  row.percentOffBasisPoints !== null
    ? { type: "percent_off", basisPoints: row.percentOffBasisPoints }
    : { type: "amount_off", amountOff: row.amountOff as number, currency: row.currency as string };

const couponDuration = (row: Pick<CouponRow, "duration" | "durationInMonths">) =>
  row.duration === "repeating" ? { duration: "repeating" as const, durationInMonths: row.durationInMonths as number } : { duration: row.duration };

/** Batch guard reasons of a redemption, in the order they are checked. */
export const COUPON_DELETED = "coupon_deleted";
export const COUPON_EXPIRED = "coupon_expired";
export const COUPON_USED_UP = "coupon_used_up";

/** The 400s of a coupon that cannot be redeemed now (also what a redemption's batch guards map to). */
export const couponRefusals = (id: string) => ({
  [COUPON_DELETED]: () => invalidRequest("coupon_invalid", `Coupon ${id} was deleted and accepts no new redemptions.`, "coupon"),
  [COUPON_EXPIRED]: () => invalidRequest("coupon_expired", `Coupon ${id} could be redeemed until its redeem_by date, which has passed.`, "coupon"),
  [COUPON_USED_UP]: () => invalidRequest("coupon_max_redemptions", `Coupon ${id} has been redeemed its max_redemptions times.`, "coupon"),
  coupons_redemptions: () => invalidRequest("coupon_max_redemptions", `Coupon ${id} has been redeemed its max_redemptions times.`, "coupon"),
});

/**
 * Checks that `coupon` can discount a price in `currency` (an amount_off coupon is in one
 * currency): 400 otherwise. Whether it is still valid, before redeem_by and not used up is
 * checked only by the batch that redeems it, which knows whether this request's reservation is
 * already there: a retry whose first run reserved the last redemption, and may have charged the
 * card, is never refused for it.
 */
export function assertCouponCurrency(coupon: CouponRow, currency: string): void {
  if (coupon.currency !== null && coupon.currency !== currency) {
    throw invalidRequest(
      "coupon_currency_mismatch",
      `Coupon ${coupon.id} takes ${coupon.amountOff} minor units of ${coupon.currency} off; the plan bills in ${currency}.`,
      "coupon",
    );
  }
}

/**
 * The statements that redeem `coupon` under `reference` (unique: a second redemption under the
 * same reference changes nothing), for `subscriptionId`, or reserved for a subscription not yet
 * made (null). `at` is the wall clock (redeem_by is a real date, not a test clock's).
 */
export function redeemCoupon(db: Db, coupon: CouponRow, reference: string, subscriptionId: string | null, at: number): Statement[] {
  const pk = coupon.pk;
  const now = isoTime(at);
  const already = sql`EXISTS (SELECT 1 FROM ${couponRedemptions} WHERE reference = ${reference})`;
  const current = (condition: SQL) => sql`${already} OR EXISTS (SELECT 1 FROM ${coupons} WHERE pk = ${pk} AND ${condition})`;
  return [
    guard(db, COUPON_DELETED, current(sql`valid = 1`)),
    guard(db, COUPON_EXPIRED, current(sql`(redeem_by IS NULL OR redeem_by > ${now})`)),
    guard(db, COUPON_USED_UP, current(sql`(max_redemptions IS NULL OR times_redeemed < max_redemptions)`)),
    rawStatement(db, sql`UPDATE ${coupons} SET times_redeemed = times_redeemed + 1, updated_at = ${now} WHERE pk = ${pk} AND NOT ${already}`),
    rawStatement(
      db,
      sql`INSERT INTO ${couponRedemptions} (id, account_id, livemode, coupon_pk, subscription_id, reference, created_at)
        VALUES (${newId("couponRedemption", at)}, ${coupon.accountId}, ${coupon.livemode ? 1 : 0}, ${pk}, ${subscriptionId}, ${reference}, ${now})
        ON CONFLICT (reference) DO NOTHING`,
    ),
  ];
}

/** A reservation made for a subscription's creation, now held by the subscription. */
export const bindReservation = (db: Db, reference: string, subscriptionId: string): Statement =>
  db.update(couponRedemptions).set({ subscriptionId }).where(and(eq(couponRedemptions.reference, reference), sql`${couponRedemptions.subscriptionId} IS NULL`));

/** Gives back a reservation whose subscription was never made (a declined first charge). */
export function releaseReservation(db: Db, reference: string, at: number): Statement[] {
  const reserved = sql`(SELECT coupon_pk FROM ${couponRedemptions} WHERE reference = ${reference} AND subscription_id IS NULL)`;
  return [
    rawStatement(db, sql`UPDATE ${coupons} SET times_redeemed = times_redeemed - 1, updated_at = ${isoTime(at)} WHERE pk = ${reserved}`),
    rawStatement(db, sql`DELETE FROM ${couponRedemptions} WHERE reference = ${reference} AND subscription_id IS NULL`),
  ];
}

/** The discount columns of a subscription that redeems `coupon` at `start` (billing time). */
export const discountColumns = (coupon: CouponRow, start: number): Pick<SubscriptionRow, "couponId" | "discountStart" | "discountEnd" | "discountUses"> => {
  const end = discountEnd(couponDuration(coupon), start);
  return { couponId: coupon.id, discountStart: isoTime(start), discountEnd: end === null ? null : isoTime(end), discountUses: 0 };
};

/** No discount: what `coupon: null` writes. */
export const NO_DISCOUNT = { couponId: null, discountStart: null, discountEnd: null, discountUses: 0 } as const;

/** A subscription's discount as the API answers it, or null. */
export const discountOf = (row: Pick<SubscriptionRow, "couponId" | "discountStart" | "discountEnd">) =>
  row.couponId === null || row.discountStart === null ? null : { coupon: row.couponId, start: row.discountStart, end: row.discountEnd };

/**
 * What the subscription's discount takes off a period priced `subtotal`, on the invoice dated
 * `invoiceDate` (ms): 0 when it has none, or none applies to that invoice.
 */
/** What pricing a period's discount needs of its coupon. */
export type DiscountCoupon = Pick<CouponRow, "percentOffBasisPoints" | "amountOff" | "currency" | "duration" | "durationInMonths">;

export function periodDiscount(
  sub: Pick<SubscriptionRow, "couponId" | "discountStart" | "discountUses">,
  coupon: DiscountCoupon | null,
  subtotal: number,
  currency: string,
  invoiceDate: number,
): number {
  if (sub.couponId === null || sub.discountStart === null || coupon === null) return 0;
  const applies = discountAppliesToInvoice({
    duration: couponDuration(coupon),
    discountStart: Date.parse(sub.discountStart),
    invoiceDate,
    invoicesAlreadyDiscounted: sub.discountUses,
  });
  // An amount_off coupon in another currency never reaches here (refused at redemption).
  return applies ? discountAmount(couponValue(coupon), subtotal, currency) : 0;
}

/**
 * Whether the subscription's discount still runs at `at` (billing time): it would discount an
 * invoice dated then. A `once` coupon that discounted an invoice runs no more.
 */
export function discountRunsAt(sub: Pick<SubscriptionRow, "couponId" | "discountStart" | "discountUses">, coupon: DiscountCoupon | null, at: number): boolean {
  if (sub.couponId === null || sub.discountStart === null || coupon === null) return false;
  return discountAppliesToInvoice({ duration: couponDuration(coupon), discountStart: Date.parse(sub.discountStart), invoiceDate: at, invoicesAlreadyDiscounted: sub.discountUses });
}

/**
 * A discount already worked out (in minor units), as the coupon an invoice's totals take it from:
 * an amount off of exactly that much (never more than the subtotal it was worked out on), or none.
 */
export const discountAsCoupon = (discount: number, currency: string): CouponValue | null =>
  discount > 0 ? { type: "amount_off", amountOff: discount, currency } : null;
