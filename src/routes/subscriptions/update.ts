// PUT /subscriptions/{id}: new card details, plan, quantity or cancel_at_period_end. Only the
// fields sent are written, so a concurrent change to another field is never undone. On a
// past_due subscription new card details are charged at once for the unpaid period, through
// src/billing/periods.ts exactly as a dunning retry is (one claim, one reference, one settlement).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, inArray, sql } from "drizzle-orm";
import {
  chargeInFlight,
  finalInvoiceClaimed,
  priceChargeInFlight,
  claimCardColumns,
  subscriptionUpdatedEvent,
} from "../../billing/periods";
import { chargeableAmount } from "../../billing/pricing";
import { MAX_AMOUNT } from "../../domain/money";
import { processorForCardFields, processorForRequest } from "../../processor";
import { randomToken } from "../../lib/crypto";
import { guard } from "../../db/batch";
import { type ClaimCard, coupons, invoiceItems, subscriptions } from "../../db/schema";
import { currentOpenCharge, currentPeriod, prorationItems } from "../../billing/prorations";
import { changeAndInvoiceNow } from "./invoice-now";
import { resolveTaxRates } from "../../billing/tax";
import { type CouponRow, NO_DISCOUNT, assertCouponCurrency, couponRefusals, discountColumns, discountRunsAt, redeemCoupon } from "../../billing/coupons";
import { owned } from "../../db/scope";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import { readOne } from "../reads";
import { commitAndAnswerRow, holdMoney } from "../write-path";
import { assertNoCardData, cardInBody, readCard } from "../../payments/card-input";
import { holdSavedCard, isPaymentMethodId, savedCardFor } from "../../payments/methods";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { alreadyCanceled, notActivated, billingNow, chargeInProgress, changedMeanwhile, loadSubscription, type SubscriptionRow, subscriptionId, tags, CHARGE_IN_FLIGHT, SUBSCRIPTION_CANCELED, SUBSCRIPTION_CHANGED, proratedAsRead } from "./common";
import { SubscriptionSchema, subscriptionAnswer, UpdateSubscriptionBody } from "./schema";
import { chargePastDue, newPlanFor, vaultNewCard } from "./changes";

const update = apiRoute({
  method: "put",
  path: "/subscriptions/{id}",
  claimFirst: true,
  tags,
  operationId: "updateSubscription",
  summary: "Replace payment details, or change plan or quantity",
  description:
    "New card details (the card fields, or payment_method \"pmt_…\": a saved card of the subscription's user, used as it is) replace the stored ones (the card is vaulted, not charged; in live mode Stripe checks it with a SetupIntent, and a card it declines, or one that needs 3D Secure, answers 402 and changes nothing). On a past_due subscription the new card is charged at once for the unpaid period: success makes it active again, a decline answers 402 and leaves it past_due; should the processor not answer, 500 outcome_unknown, and Tender settles that charge within 10 minutes (recorded once, or released on a decline). plan_id and quantity apply now: on an active subscription, proration_behavior create_prorations (the default) credits the unused time of what the current period was charged and charges the time left at the new price, as lines of the next invoice (a credit that takes that invoice below zero is carried on, never refunded); always_invoice invoices those lines (and any pending) at once and charges the invoice: the change is made only once it is paid (a decline answers 402 and changes nothing; an invoice of nothing or a credit is paid at once, the credit carried on); none prorates nothing. at_period_end true schedules the plan_id and quantity for the next period instead, unprorated (pending_update). A subscription set to cancel at period end is sent a final invoice at its end for the prorations still pending. A metered subscription's plan does not change (400 plan_incompatible). coupon redeems a coupon whose discount applies from the next invoice (replacing any other); null removes the discount. default_tax_rates replaces its tax rates from the next invoice (null goes back to the plan's). Answers the subscription as the change committed it. While a charge of the period (or of a change invoiced at once) is at the processor with its outcome not yet known, new card details, cancel_at_period_end true, coupon, plan_id and quantity answer 409 charge_in_progress (retry in a few seconds): the charge is settled with the card it was sent with. Emits subscription_updated.",
  scope: "subscriptions:write",
  request: { params: subscriptionId, ...jsonBodyOf(UpdateSubscriptionBody) },
  responses: { 200: json(SubscriptionSchema, "The updated subscription.") },
  extraErrors: [402, 409],
});

const PAYMENT_METHOD_DETACHED = "payment_method_detached";
const FINAL_INVOICE_OPEN = "final_invoice_open";

export function registerUpdateSubscription(app: OpenAPIHono<AppEnv>) {
  app.openapi(update, async function updateSubscription(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const realNow = clock.now();
    // New payment details: a saved card (payment_method "pmt_…", read once the subscription's user
    // is known), or the card fields.
    const wantsSaved = isPaymentMethodId(body.payment_method);
    if (wantsSaved) assertNoCardData(body);
    const newCard = wantsSaved ? null : cardInBody(body);
    const paymentChange = wantsSaved || newCard !== null;
    if (body.at_period_end === true && body.plan_id === undefined && body.quantity === undefined) {
      throw invalidRequest("parameter_missing", "at_period_end schedules a change of plan_id or quantity: send one of them.", "at_period_end");
    }
    if (body.at_period_end === true && body.proration_behavior !== undefined && body.proration_behavior !== "none") {
      throw invalidRequest("parameter_unexpected", "proration_behavior: a change scheduled at period end is not prorated; send none, or leave it out.", "proration_behavior");
    }
    if (!paymentChange && body.plan_id === undefined && body.quantity === undefined && body.cancel_at_period_end === undefined && body.coupon === undefined && body.default_tax_rates === undefined) {
      throw invalidRequest("parameter_missing", "Send new payment details, plan_id, quantity, cancel_at_period_end, coupon or default_tax_rates.");
    }
    const current = await loadSubscription(c, id);
    const { sub } = current;
    if (sub.status === "canceled") throw alreadyCanceled(id);
    if (sub.status === "incomplete" || sub.status === "incomplete_expired") throw notActivated(id, sub.status);
    const saved = wantsSaved ? await savedCardFor(c, body.payment_method as string, sub.userId) : null;

    const plan = body.plan_id !== undefined && body.plan_id !== sub.planId ? await newPlanFor(c, current.plan, sub.id, body.plan_id) : current.plan;
    if (body.quantity !== undefined && plan.usageType === "metered") {
      throw invalidRequest("parameter_unexpected", "quantity: a metered plan is billed by the usage reported for each period, not by a quantity.", "quantity");
    }
    const quantity = body.quantity ?? sub.quantity;
    const priceChanges = plan.id !== sub.planId || quantity !== sub.quantity;
    if (priceChanges && plan.usageType !== "metered") chargeableAmount(plan, quantity);
    const scheduled = body.at_period_end === true;
    // A scheduled change applies at the next period's first invoice: one a past_due subscription
    // reaches only once its unpaid period is settled, and one set to cancel never has.
    if (scheduled && (sub.status === "past_due" || sub.cancelAtPeriodEnd)) {
      throw invalidRequest(
        "parameter_invalid",
        sub.status === "past_due"
          ? `at_period_end: subscription ${sub.id} is past_due; pay or settle its open invoice first, or change it now.`
          : `at_period_end: subscription ${sub.id} cancels at the end of its period, so no next period takes a scheduled change.`,
        "at_period_end",
      );
    }
    const behavior = scheduled ? "none" : (body.proration_behavior ?? "create_prorations");
    if (behavior === "always_invoice" && (paymentChange || body.coupon !== undefined || body.cancel_at_period_end !== undefined)) {
      const field = newCard ? "card_number" : saved ? "payment_method" : body.coupon !== undefined ? "coupon" : "cancel_at_period_end";
      throw invalidRequest("parameter_unexpected", `${field}: a change invoiced at once (proration_behavior always_invoice) is charged now; send ${field} in a request of its own.`, field);
    }
    // An active subscription's change of price is prorated from now (its test clock's now) to the
    // current period's end; a trialing or past_due one's, or one whose period is over and not yet
    // renewed, applies from the next period.
    let proration: ReturnType<typeof prorationItems> = null;
    const at = billingNow(current.clock, realNow);
    if (priceChanges && behavior !== "none" && sub.status === "active" && sub.periodsBilled >= 1 && current.plan.usageType !== "metered" && at < currentPeriod(sub, current.plan).end) {
      // Pending items are collected by the next invoice; a subscription set to cancel at its
      // period's end has none, so its final invoice collects them (src/billing/periods.ts).
      // What the current period was charged, and the percentage its discount took off, if any:
      // the charge line is discounted alike while the subscription's discount still runs at the
      // change (as Stripe's prorations carry the discounts in effect; a `once` coupon was used up
      // by the period's invoice, a removed or ended one runs no more).
      const paid = current.paid?.status ? current.paid : null;
      let percentOffBasisPoints = paid?.percentOff ?? 0;
      if (percentOffBasisPoints > 0) {
        const [coupon] = sub.couponId === null ? [] : await db.select().from(coupons).where(owned(coupons, auth, eq(coupons.id, sub.couponId))).limit(1);
        if (!coupon || !discountRunsAt(sub, coupon, at)) percentOffBasisPoints = 0;
      }
      try {
        proration = prorationItems({ sub, oldPlan: current.plan, newPlan: plan, quantity, current: currentOpenCharge(sub, current.plan, paid), at, percentOffBasisPoints });
      } catch (error) {
        // Another change, committed since this request began, prorated from a later moment.
        if (error instanceof RangeError) throw changedMeanwhile();
        throw error;
      }
    }
    // The next invoice (the new price and every pending item) must stay chargeable.
    if (priceChanges && plan.usageType !== "metered" && chargeableAmount(plan, quantity) + Math.max(0, sub.pendingItemsAmount + (proration?.amount ?? 0)) > MAX_AMOUNT) {
      throw invalidRequest("amount_too_large", `With its prorations, the next invoice of ${sub.id} would come to more than the largest chargeable amount (${MAX_AMOUNT} minor units).`, "quantity");
    }
    if (proration && behavior === "always_invoice") {
      const changes = { ...(body.plan_id !== undefined ? { planId: plan.id } : {}), ...(body.quantity !== undefined ? { quantity: body.quantity } : {}) };
      return changeAndInvoiceNow(c, { row: current, plan, proration, changes, at, realNow });
    }

    // Only what the request sends is written.
    const changes: Partial<SubscriptionRow> = { updatedAt: isoTime(realNow) };
    if (scheduled) {
      // Scheduled for the next period (none when it is what the subscription already has).
      Object.assign(changes, priceChanges ? { pendingPlanId: plan.id, pendingQuantity: quantity } : { pendingPlanId: null, pendingQuantity: null });
    } else {
      if (body.plan_id !== undefined) changes.planId = plan.id;
      if (body.quantity !== undefined) changes.quantity = body.quantity;
      // A change made now replaces one scheduled.
      if (body.plan_id !== undefined || body.quantity !== undefined) Object.assign(changes, { pendingPlanId: null, pendingQuantity: null });
    }
    if (proration) {
      Object.assign(changes, {
        openCharge: proration.next,
        pendingItems: sql`${subscriptions.pendingItems} + ${proration.items.length}`,
        pendingItemsAmount: sql`${subscriptions.pendingItemsAmount} + ${proration.amount}`,
      });
    }
    if (body.cancel_at_period_end !== undefined) changes.cancelAtPeriodEnd = body.cancel_at_period_end;
    // Its own tax rates from the next invoice (null: its plan's again); issued invoices keep theirs.
    if (body.default_tax_rates !== undefined) changes.defaultTaxRates = body.default_tax_rates === null ? null : await resolveTaxRates(c, body.default_tax_rates);
    // A coupon's discount starts now (the subscription's clock) and applies from the next invoice;
    // it is redeemed in the batch that writes it. null removes the discount.
    let redeem: { coupon: CouponRow; reference: string } | null = null;
    if (body.coupon === null) Object.assign(changes, NO_DISCOUNT);
    if (typeof body.coupon === "string") {
      if (paymentChange && sub.status === "past_due") {
        throw invalidRequest("parameter_unexpected", "coupon: new card details on a past_due subscription charge the unpaid period now; send coupon in a request of its own.", "coupon");
      }
      const coupon = await readOne(c, db.select().from(coupons).where(owned(coupons, auth, eq(coupons.id, body.coupon))).limit(1), "coupon", body.coupon, "coupon");
      assertCouponCurrency(coupon, plan.currency);
      Object.assign(changes, discountColumns(coupon, billingNow(current.clock, realNow)));
      redeem = { coupon, reference: `${sub.id}:coupon:${c.var.idempotency ? `${c.var.idempotency.key}:${c.var.idempotency.since}` : randomToken(20)}` };
    }
    const card = newCard ? await readCard(c.env, newCard, realNow) : null;
    if ((card || saved) && sub.status === "past_due") await holdMoney(c, "past_due_charge");
    const processor = card ? await processorForCardFields(c) : saved ? await processorForRequest(c) : null;
    // Every new card is vaulted first (no money moves): the token is what a charge, a retry of it
    // and the next renewals send, so the card itself is needed only here, and never kept. A live
    // processor checks the card with its bank (a Stripe SetupIntent), which may decline it: 402,
    // and nothing changes.
    // A saved card is vaulted already: the user's at the processor.
    const vaulted: ClaimCard | null =
      card && processor ? await vaultNewCard(c, processor, card, current.user, sub.id, realNow) : saved ? { token: saved.token, ...saved.summary, fingerprint: saved.fingerprint } : null;
    // The subscription names the saved card it charges (none for card fields), so it is not detached meanwhile.
    if (vaulted) changes.paymentMethodId = saved?.id ?? null;

    if (vaulted && processor && sub.status === "past_due") {
      // The unpaid period is charged to the new card at once, claimed as the next attempt of the
      // period exactly as a dunning retry claims it, so the two can never both charge. The claim
      // names the vaulted card, so whoever settles it (this request, or the cron once its lease
      // ran out) sends the same reference with the same card. A saved card is held while it is
      // charged: a detach meanwhile answers 409 payment_method_in_use.
      const held = saved ? await holdSavedCard(c, saved.id, realNow) : null;
      try {
        return await chargePastDue(c, current, vaulted, processor, changes, realNow);
      } finally {
        await held?.release();
      }
    }

    // Replacing the card of a subscription in good standing vaults it without charging; the next
    // renewal charges the new token.
    if (vaulted) Object.assign(changes, claimCardColumns(vaulted));
    return commitAndAnswerRow(
      c,
      {
        statements: [
          guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status IN ('trialing', 'active', 'past_due'))`),
          // Setting cancel at period end under a charge already at the processor would answer that
          // a period will not be charged while it is being charged (as DELETE ?at_period_end=true).
          // Nor is the card replaced under it: a charge whose outcome is unknown is settled by
          // sending its reference again with the card it was sent with, which is the
          // subscription's until it settles (src/billing/claims.ts).
          // A coupon is not changed under it either: the charge's discount was fixed by its claim,
          // and its settlement counts that discount's use against the coupon then in place.
          // Nor is a change prorated or scheduled under it: the claim priced the pending items and
          // the scheduled change its settlement takes. Any other change of price (or of a scheduled
          // one) waits for a new period's first charge, which is invoiced from the subscription as
          // its settlement reads it, and for the charge of a change invoiced at once.
          // Nor are its tax rates: the claim priced the charge's tax.
          ...(body.cancel_at_period_end === true || vaulted || body.coupon !== undefined || body.default_tax_rates !== undefined || proration || scheduled
            ? [guard(db, CHARGE_IN_FLIGHT, sql`NOT ${chargeInFlight(sub.id, realNow)}`)]
            : priceChanges || sub.pendingPlanId !== null
              ? [guard(db, CHARGE_IN_FLIGHT, sql`NOT ${priceChargeInFlight(sub.id)}`)]
              : []),
          // A proration was computed from the subscription as read: its plan, quantity, period and
          // pending items. Changed since (a renewal, another change): the request is refused.
          ...(proration
            ? [
                guard(db, SUBSCRIPTION_CHANGED, proratedAsRead(sub, sql`AND s.cancel_at_period_end = ${sub.cancelAtPeriodEnd ? 1 : 0}`)),
                db.insert(invoiceItems).values(proration.items),
              ]
            : []),
          // A final invoice, once claimed, ends the subscription when it is paid: it is not
          // un-canceled under it (pay or void that invoice first).
          ...(body.cancel_at_period_end === false ? [guard(db, FINAL_INVOICE_OPEN, sql`NOT ${finalInvoiceClaimed(sub.id)}`)] : []),
          ...(redeem ? redeemCoupon(db, redeem.coupon, redeem.reference, sub.id, realNow) : []),
          // A saved card detached since it was read is not given to the subscription.
          ...(saved ? [guard(db, PAYMENT_METHOD_DETACHED, sql`EXISTS (SELECT 1 FROM payment_methods WHERE id = ${saved.id} AND detached_at IS NULL)`)] : []),
        ],
        // Only the fields sent are written; the answer is the row as this batch committed it, so a
        // renewal that committed since the read above shows in it (and in the stored answer).
        returning: db
          .update(subscriptions)
          .set(changes)
          .where(and(owned(subscriptions, auth, eq(subscriptions.id, sub.id)), inArray(subscriptions.status, ["trialing", "active", "past_due"])))
          .returning(),
        events: [
          subscriptionUpdatedEvent(db, auth, sub.id, realNow),
        ],
      },
      subscriptionAnswer,
      eq(subscriptions.id, sub.id),
      {
        failures: {
          [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id),
          [CHARGE_IN_FLIGHT]: chargeInProgress,
          [SUBSCRIPTION_CHANGED]: changedMeanwhile,
          [FINAL_INVOICE_OPEN]: () =>
            invalidRequest(
              "final_invoice_open",
              `cancel_at_period_end: subscription ${id} ended its period and its final invoice is open; pay or void that invoice.`,
              "cancel_at_period_end",
            ),
          [PAYMENT_METHOD_DETACHED]: () => invalidRequest("payment_method_detached", `Payment method ${saved?.id} was detached meanwhile and can be charged no more.`, "payment_method"),
          ...(redeem ? couponRefusals(redeem.coupon.id) : {}),
        },
      },
    );
  });
}
