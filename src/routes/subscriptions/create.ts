// POST /subscriptions: validates the user, the plan and the card, charges the first period, and
// commits the subscription, its first (paid) period, the payment and the events in one batch.
// The processor reference is derived from the Idempotency-Key, so a retry after a lost answer
// reaches the processor as the same charge; a decline answers 402 and creates no subscription; a
// card that asks for 3-D Secure makes it incomplete (src/billing/incomplete.ts).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { periodStartMs } from "../../domain/billing-calendar";
import { chargeableAmount } from "../../billing/pricing";
import { isMetered } from "../../billing/usage";
import { processorForCardFields, processorForRequest } from "../../processor";
import { coupons, payments, plans, subscriptionPeriods, subscriptions, testClocks, users } from "../../db/schema";
import { owned } from "../../db/scope";
import { newId } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { cardDeclined, invalidRequest } from "../../lib/errors";
import { found } from "../reads";
import { commitAndRespond, firstChargeReference, holdMoney, outcomeTracked } from "../write-path";
import { charge } from "../../payments/charge";
import { type PaymentRow, paymentEventData } from "../../payments/event-data";
import { type InvoiceInput, issueInvoice, subscriptionLine, totalsOf } from "../../billing/invoices";
import { resolveTaxRates, taxRatesOf } from "../../billing/tax";
import { assertNoCardData, cardInBody, readCard } from "../../payments/card-input";
import { holdSavedCard, isPaymentMethodId, savedCardFor } from "../../payments/methods";
import { type EmittedEvent, emitEvent } from "../../webhooks/outbox";
import { type Statement, runBatch } from "../../db/batch";
import { NO_DISCOUNT, assertCouponCurrency, bindReservation, couponRefusals, discountAsCoupon, discountColumns, periodDiscount, redeemCoupon, releaseReservation } from "../../billing/coupons";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { futureInstant } from "../shared";
import { resolveTrialEnd, trialWillEndAt } from "../../domain/trials";
import { idempotencyClaimLost } from "../../middleware/idempotency";
import { answerDecline, billingNow, cardColumns, type SubscriptionRow, tags } from "./common";
import { CreateSubscriptionBody, SubscriptionSchema, serializeSubscription } from "./schema";
import { publicUrl } from "../../pages/public-url";
import { newPageSecret } from "../../pages/hosted";
import { isDevelopment } from "../../env";
import { serializePayment } from "../../payments/serialize";
import { readReturnUrl } from "../payments/create";

const create = apiRoute({
  method: "post",
  path: "/subscriptions",
  claimFirst: true,
  tags,
  operationId: "createSubscription",
  summary: "Subscribe a user to a plan",
  description:
    "Validates the user, the plan and the card (payment_method \"card\" with the card fields, or a saved card of the user, payment_method \"pmt_…\"; a payment method of another user, account or mode answers 404, a detached one 400 payment_method_detached; card fields in live mode need a connection with raw_card_data, else 400 raw_card_data_unavailable), then charges the first period. On success the subscription is active and next_billing_date is one interval later, anchored to the start day (Jan 31 -> Feb 28/29 -> Mar 31). With a trial (trial_end or trial_period_days, else the plan's trial_period_days) the card is vaulted, not charged: the subscription is trialing, subscription_trial_will_end is sent three days before the trial ends, and the first period is charged at trial_end, which anchors the billing day (a decline then goes to dunning). A coupon is redeemed before the card is charged, and its discount applies to the first invoice (after the trial, if any); a discount that leaves nothing to pay vaults the card and charges nothing. A decline answers 402, records the failed payment, emits payment.failed and creates no subscription. In live mode the card is charged through the account's Stripe connection (a confirmed PaymentIntent on the user's Stripe Customer, kept for renewals off-session); a card that needs 3D Secure makes the subscription incomplete (201): latest_payment is its first payment, requires_action, with next_action { type: redirect_to_url, url } to the 3-D Secure page (the payer lands on return_url with ?payment_id=… afterwards), and its first invoice stays open. Once the payment succeeds the subscription is active, the invoice paid and subscription_created sent; if the payer fails, or does not finish within 23 hours (the payment is then canceled), it is incomplete_expired (subscription_updated) and the invoice voided. Until then it is never renewed; PUT answers 409 subscription_incomplete and DELETE cancels it (its payment canceled, its invoice voided).",
  scope: "subscriptions:write",
  request: jsonBodyOf(CreateSubscriptionBody),
  responses: { 201: json(SubscriptionSchema, "The subscription: active, trialing, or incomplete (with latest_payment) when its first charge asks for 3-D Secure.") },
  extraErrors: [402],
});

/**
 * The charge's reference is already recorded: another request took this Idempotency-Key over (a
 * stale claim) and charged with the same reference. It answers for the key.
 */
const CHARGE_RECORDED = "unique:payments.charge_reference";

/**
 * When the trial of a subscription starting at `start` ends (epoch ms), or null for none: the
 * request's trial_end, else its trial_period_days, else the plan's (src/domain/trials.ts).
 */
function readTrialEnd(body: { trial_end?: string; trial_period_days?: number }, plan: { trialPeriodDays: number | null }, start: number): number | null {
  if (body.trial_end !== undefined && body.trial_period_days !== undefined) {
    throw invalidRequest("parameter_unexpected", "trial_period_days: give trial_end or trial_period_days, not both.", "trial_period_days");
  }
  const trialEnd = body.trial_end === undefined ? undefined : futureInstant(body.trial_end, "trial_end", start);
  const resolved = resolveTrialEnd({ start, trialEnd, trialPeriodDays: body.trial_period_days, planTrialPeriodDays: plan.trialPeriodDays });
  if (!resolved.ok) throw invalidRequest("parameter_invalid", resolved.message, resolved.reason === "trial_period_days_invalid" ? "trial_period_days" : "trial_end");
  return resolved.trialEnd;
}

export function registerCreateSubscription(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createSubscription(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const realNow = clock.now();
    // Two reads in parallel (not one db.batch: drizzle maps a batched join's columns by name, and the tables share names).
    // The coupon is read only when one is sent: a create without one keeps its round trips.
    const [userRows, planRows, couponRows] = await Promise.all([
      db
        .select({ user: users, clock: testClocks })
        .from(users)
        .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
        .where(owned(users, auth, eq(users.id, body.user_id)))
        .limit(1),
      db.select().from(plans).where(owned(plans, auth, eq(plans.id, body.plan_id))).limit(1),
      body.coupon === undefined ? Promise.resolve([]) : db.select().from(coupons).where(owned(coupons, auth, eq(coupons.id, body.coupon))).limit(1),
    ]);
    const { user, clock: testClock } = await found(c, userRows[0], "user", body.user_id, "user_id");
    const plan = await found(c, planRows[0], "plan", body.plan_id, "plan_id");
    if (!plan.active) throw invalidRequest("plan_inactive", `Plan ${plan.id} is archived and accepts no new subscriptions.`, "plan_id");
    const coupon = body.coupon === undefined ? null : await found(c, couponRows[0], "coupon", body.coupon, "coupon");
    // Its own tax rates (which win over the plan's), or null: the plan's apply.
    const ownTaxRates = body.default_tax_rates === undefined ? null : await resolveTaxRates(c, body.default_tax_rates);
    const taxRates = taxRatesOf({ defaultTaxRates: ownTaxRates }, plan);
    if (coupon) assertCouponCurrency(coupon, plan.currency);
    // A metered plan is billed in arrears for its usage: nothing is charged now, and it has no quantity.
    const metered = isMetered(plan);
    if (metered && body.quantity !== 1) throw invalidRequest("parameter_unexpected", "quantity: a metered plan is billed by the usage reported for each period, not by a quantity.", "quantity");
    if (metered && (body.trial_end !== undefined || body.trial_period_days)) {
      throw invalidRequest("parameter_unexpected", `${body.trial_end !== undefined ? "trial_end" : "trial_period_days"}: a metered plan is billed in arrears for its usage, and has no trial.`, body.trial_end !== undefined ? "trial_end" : "trial_period_days");
    }
    const subtotal = metered ? 0 : chargeableAmount(plan, body.quantity);
    // Where the payer lands after 3-D Secure, when the first charge asks for it (as POST /payments).
    const returnUrl = readReturnUrl(body.return_url, isDevelopment(c.env));
    // The card: a saved one (payment_method "pmt_…", the user's), or the card fields (checked; in
    // live mode only on a connection with raw card data access).
    const saved = isPaymentMethodId(body.payment_method) ? await savedCardFor(c, body.payment_method, user.id) : null;
    if (saved) assertNoCardData(body);
    const fields = saved ? null : await readCard(c.env, cardInBody(body) ?? body as never, realNow);
    const card = saved ?? (fields as NonNullable<typeof fields>);
    // Live money goes out through the connection only under a claim of it (src/processor/in-flight.ts).
    await holdMoney(c, "first_charge");
    const processor = saved ? await processorForRequest(c) : await processorForCardFields(c);
    // A saved card is held while this request charges it: a detach meanwhile answers 409
    // payment_method_in_use, and one that came first answers this 400 payment_method_detached.
    const held = saved ? await holdSavedCard(c, saved.id, realNow) : null;
    const proceed = async () => {

      const id = newId("subscription", realNow);
      const invoiceId = newId("invoice", realNow);
      const customer = { id: user.id, email: user.email };
      const start = billingNow(testClock, realNow);
      // A trial (the request's trial_end or trial_period_days, else the plan's): nothing is charged
      // until it ends, and the first period starts there (the billing anchor).
      const trialEnd = readTrialEnd(body, plan, start);
      const next = trialEnd ?? periodStartMs(isoTime(start), plan.interval, 1);
      // The discount on the first invoice, and what is charged: the price less it. A trial's first
      // invoice comes at its end, priced by the renewal that makes it.
      const discountColumnsOf = coupon ? discountColumns(coupon, start) : NO_DISCOUNT;
      const discount = coupon && trialEnd === null && !metered ? periodDiscount(discountColumnsOf, coupon, subtotal, plan.currency, start) : 0;
      // The first invoice: the period's line, its discount, and its tax (exclusive tax is charged on top).
      const firstInvoice = (subscriptionId: string | null): InvoiceInput => ({
        id: invoiceId,
        tenant: auth,
        subscriptionId,
        periodIndex: subscriptionId === null ? null : 0,
        userId: user.id,
        currency: plan.currency,
        periodStart: isoTime(start),
        periodEnd: isoTime(next),
        lines: [subscriptionLine(plan, body.quantity, subtotal, isoTime(start), isoTime(next))],
        coupon: discountAsCoupon(discount, plan.currency),
        couponId: coupon?.id ?? null,
        taxRates,
      });
      const firstTotals = totalsOf(firstInvoice(id));
      const amount = firstTotals.amountDue;
      const firstTax = firstTotals.exclusiveTax;
      const reference = firstChargeReference(c);
      // The coupon is redeemed before the card is charged (reserved under the charge's reference, so a
      // retry with the same Idempotency-Key reuses the reservation): one used up meanwhile is refused
      // before any money moves. The batch that creates the subscription binds the reservation to it.
      const couponReference = `${reference ?? id}:coupon`;
      // A reservation whose commit answer was lost may hold the coupon's last redemption: the key stays
      // claimed (outcome unknown), so its retry reuses the same reference and the same reservation.
      if (coupon) await outcomeTracked(c, () => runBatch(db, redeemCoupon(db, coupon, couponReference, null, realNow), couponRefusals(coupon.id)));
      const couponStatements = (made: boolean) => (!coupon ? [] : made ? [bindReservation(db, couponReference, id)] : releaseReservation(db, couponReference, realNow));
      // The first period's invoice: issued, finalized (numbered) and paid or failed in the batch
      // that records the charge. A declined first charge creates no subscription, and nothing can
      // ever pay its invoice: it is voided there and then (it keeps its number: numbers are gap-free).
      const invoice = (outcome: Parameters<typeof issueInvoice>[2], subscriptionId: string | null) =>
        issueInvoice(
          db,
          firstInvoice(subscriptionId),
          outcome,
          { at: start, realNow, pageBase: publicUrl(c.env) },
        );
      if (trialEnd !== null || metered || amount === 0) return createWithoutCharge();
      // A processor call that still threw after its retries may have moved money: the outcome is
      // unknown, so the Idempotency-Key stays claimed (a retry after the lock charges the same reference).
      const result = await outcomeTracked(c, () => charge({
        db,
        processor,
        accountId: auth.accountId,
        livemode: auth.livemode,
        customer,
        subscriptionId: id,
        invoiceId,
        amount,
        currency: plan.currency,
        source: saved ? { token: saved.token, customerPresent: true } : { card: (fields as NonNullable<typeof fields>).card },
        summary: card.summary,
        fingerprint: card.fingerprint,
        at: realNow,
        // A retry with the same Idempotency-Key (after a lost answer or a failed commit) reaches the
        // processor with the same reference, which a live processor uses to refuse a second charge.
        // The use of the key is part of it: after the key's 24 hours, the same key is a new charge.
        processorReference: reference,
        // The reference was first sent when this use of the Idempotency-Key began.
        firstAttemptAt: c.var.idempotency ? Date.parse(c.var.idempotency.since) : realNow,
        // The payer is here: a card that asks for 3-D Secure makes the subscription incomplete.
        onSession: { origin: new URL(c.req.url).origin, pageSecret: newPageSecret(), returnUrl, paymentMethodId: saved?.id ?? null },
      }));
      // The card asks its holder for 3-D Secure: the subscription is incomplete, its first invoice
      // open (numbered) until the payment succeeds (src/billing/incomplete.ts activates it then).
      if (result.requiresAction) {
        const token = result.token ?? saved?.token ?? null;
        if (!token) throw new Error("a first charge that asks for authentication kept no card token");
        const open = invoice({ kind: "open" }, id);
        return commitSubscription(token, result.payment.id, result.statements, result.events, open, {
          moneyMoved: { paymentId: result.payment.id },
          failures: { [CHARGE_RECORDED]: idempotencyClaimLost },
        }, result.payment);
      }
      // A saved card's token is the one that charged it.
      const chargedToken = result.token ?? (saved && result.succeeded ? saved.token : null);
      if (!result.succeeded || !chargedToken) {
        // No subscription exists: the failed payment belongs to none.
        const failed = { ...result.payment, subscriptionId: null };
        const voided = invoice({ kind: "failed", paymentId: failed.id, status: "void" }, null);
        return answerDecline(
          c,
          result,
          {
            statements: [db.insert(payments).values(failed), ...voided.statements, ...couponStatements(false)],
            events: [emitEvent(db, auth, { type: "payment.failed", data: paymentEventData(failed, customer) }, realNow), ...voided.events],
          },
          { failures: { [CHARGE_RECORDED]: idempotencyClaimLost } },
        );
      }

      // The card was charged: a key revoked meanwhile must not lose the record of it. The claim
      // guard stays: a request that took the key over charges with the same reference and records it.
      const paid = invoice({ kind: "paid", paymentId: result.payment.id }, id);
      return commitSubscription(chargedToken, result.payment.id, result.statements, result.events, paid, {
        moneyMoved: { paymentId: result.payment.id },
        failures: { [CHARGE_RECORDED]: idempotencyClaimLost },
      });

      /**
       * A trial, or a first invoice its discount made free: the card is vaulted (a live processor
       * checks it with its bank), not charged. A trial starts `trialing` with no period billed yet; a
       * free first period is paid by no payment.
       */
      async function createWithoutCharge() {
        // A saved card is the user's at the processor already.
        if (saved) return commitSubscription(saved.token, null, [], [], trialEnd === null && !metered ? invoice({ kind: "paid", paymentId: null }, id) : null, {});
        const { token, outcome } = await outcomeTracked(c, () =>
          processor.vaultCard({ card: (fields as NonNullable<typeof fields>).card, customer, reference: `${reference ?? id}:vault`, firstAttemptAt: c.var.idempotency ? Date.parse(c.var.idempotency.since) : realNow }),
        );
        if (outcome.status === "failed" || !token) {
          await runBatch(db, couponStatements(false));
          throw cardDeclined(outcome.status === "failed" ? outcome.code : "processing_error", outcome.status === "failed" ? outcome.message : "The card could not be vaulted.");
        }
        return commitSubscription(token, null, [], [], trialEnd === null && !metered ? invoice({ kind: "paid", paymentId: null }, id) : null, {});
      }

      function commitSubscription(
        token: string,
        paymentId: string | null,
        chargeStatements: Statement[],
        chargeEvents: EmittedEvent[],
        paid: ReturnType<typeof invoice> | null,
        options: Parameters<typeof commitAndRespond>[4],
        awaiting: PaymentRow | null = null,
      ) {
        const incomplete = awaiting !== null;
        const row: SubscriptionRow = {
          id,
          accountId: auth.accountId,
          livemode: auth.livemode,
          userId: user.id,
          planId: plan.id,
          status: incomplete ? "incomplete" : trialEnd === null ? "active" : "trialing",
          quantity: body.quantity,
          ...cardColumns(card),
          processorToken: token,
          paymentMethodId: saved?.id ?? null,
          startDate: isoTime(start),
          billingAnchor: isoTime(trialEnd ?? start),
          // A trial's or a metered subscription's first period is billed later (at the trial's end, at the period's end).
          // An incomplete one has billed nothing yet and is never renewed: its payment activates it.
          periodsBilled: trialEnd === null && !metered && !incomplete ? 1 : 0,
          currentPeriodStart: isoTime(start),
          nextBillingDate: isoTime(next),
          dueAt: incomplete ? null : next,
          dunningAttempts: 0,
          cancelAtPeriodEnd: false,
          canceledAt: null,
          ...discountColumnsOf,
          discountUses: discount > 0 ? 1 : 0,
          trialStart: trialEnd === null ? null : isoTime(start),
          trialEnd: trialEnd === null ? null : isoTime(trialEnd),
          trialWillEndAt: trialEnd === null ? null : trialWillEndAt(start, trialEnd),
          trialWillEndSent: false,
          openCharge: null,
          pendingItems: 0,
          pendingItemsAmount: 0,
          pendingPlanId: null,
          pendingQuantity: null,
          defaultTaxRates: ownTaxRates,
          createdAt: isoTime(realNow),
          updatedAt: isoTime(realNow),
        };
        return commitAndRespond(
          c,
          {
            statements: [
              db.insert(subscriptions).values(row),
              ...(trialEnd !== null || metered ? [] : [db.insert(subscriptionPeriods).values({
                id: newId("period", realNow),
                accountId: auth.accountId,
                livemode: auth.livemode,
                subscriptionId: id,
                periodIndex: 0,
                periodStart: isoTime(start),
                amount,
                discount,
                tax: firstTax,
                percentOff: discount > 0 ? (coupon?.percentOffBasisPoints ?? null) : null,
                currency: plan.currency,
                status: incomplete ? "open" : "paid",
                attempts: 1,
                paymentId,
                createdAt: isoTime(realNow),
                updatedAt: isoTime(realNow),
              })]),
              ...chargeStatements,
              ...(paid?.statements ?? []),
              ...couponStatements(true),
            ],
            // An incomplete subscription is created (subscription_created) when its payment succeeds.
            events: [...chargeEvents, ...(incomplete ? [] : [emitEvent(db, auth, { type: "subscription_created", subscriptionId: id, status: row.status }, realNow)]), ...(paid?.events ?? [])],
          },
          201,
          incomplete ? { ...serializeSubscription(row), latest_payment: serializePayment(awaiting) } : serializeSubscription(row),
          { ...options, failures: { ...options?.failures, ...(coupon ? couponRefusals(coupon.id) : {}) } },
        );
      }
    };
    try {
      return await proceed();
    } finally {
      if (held) await held.release();
    }
  });
}
