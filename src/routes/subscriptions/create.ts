// POST /subscriptions: validates the user, the plan and the card, charges the first period, and
// commits the subscription, its first (paid) period, the payment and the events in one batch.
// The processor reference is derived from the Idempotency-Key, so a retry after a lost answer
// reaches the processor as the same charge; a decline answers 402 and creates no subscription.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { periodStartMs } from "../../domain/billing-calendar";
import { chargeableAmount } from "../../billing/pricing";
import { processorForRequest } from "../../processor";
import { payments, plans, subscriptionPeriods, subscriptions, testClocks, users } from "../../db/schema";
import { owned } from "../../db/scope";
import { newId } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import { found } from "../reads";
import { commitAndRespond, firstChargeReference, outcomeTracked } from "../write-path";
import { charge, paymentEventData } from "../../payments/charge";
import { issueInvoice, subscriptionLine } from "../../billing/invoices";
import { readCard } from "../../payments/card-input";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { idempotencyClaimLost } from "../../middleware/idempotency";
import { answerDecline, billingNow, cardColumns, type SubscriptionRow, tags } from "./common";
import { CreateSubscriptionBody, SubscriptionSchema, serializeSubscription } from "./schema";

const create = apiRoute({
  method: "post",
  path: "/subscriptions",
  claimFirst: true,
  tags,
  operationId: "createSubscription",
  summary: "Subscribe a user to a plan",
  description:
    "Validates the user, the plan and the card, then charges the first period. On success the subscription is active and next_billing_date is one interval later, anchored to the start day (Jan 31 -> Feb 28/29 -> Mar 31). A decline answers 402, records the failed payment, emits payment.failed and creates no subscription. In live mode the card is charged through the account's Stripe connection (a confirmed PaymentIntent on the user's Stripe Customer, kept for renewals off-session); a card that needs 3D Secure answers 402 with decline_code authentication_required (Tender cannot ask the holder to authenticate).",
  scope: "subscriptions:write",
  request: jsonBodyOf(CreateSubscriptionBody),
  responses: { 201: json(SubscriptionSchema, "The active subscription.") },
  extraErrors: [402],
});

/**
 * The charge's reference is already recorded: another request took this Idempotency-Key over (a
 * stale claim) and charged with the same reference. It answers for the key.
 */
const CHARGE_RECORDED = "unique:payments.charge_reference";

export function registerCreateSubscription(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createSubscription(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const realNow = clock.now();
    // Two reads in parallel (not one db.batch: drizzle maps a batched join's columns by name, and the tables share names).
    const [userRows, planRows] = await Promise.all([
      db
        .select({ user: users, clock: testClocks })
        .from(users)
        .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
        .where(owned(users, auth, eq(users.id, body.user_id)))
        .limit(1),
      db.select().from(plans).where(owned(plans, auth, eq(plans.id, body.plan_id))).limit(1),
    ]);
    const { user, clock: testClock } = await found(c, userRows[0], "user", body.user_id, "user_id");
    const plan = await found(c, planRows[0], "plan", body.plan_id, "plan_id");
    if (!plan.active) throw invalidRequest("plan_inactive", `Plan ${plan.id} is archived and accepts no new subscriptions.`, "plan_id");
    const amount = chargeableAmount(plan, body.quantity);
    const card = await readCard(c.env, body, realNow);
    const processor = await processorForRequest(c);

    const id = newId("subscription", realNow);
    const invoiceId = newId("invoice", realNow);
    const customer = { id: user.id, email: user.email };
    const start = billingNow(testClock, realNow);
    const next = periodStartMs(isoTime(start), plan.interval, 1);
    // The first period's invoice: issued, finalized (numbered) and paid or failed in the batch
    // that records the charge. A declined first charge creates no subscription, and nothing can
    // ever pay its invoice: it is voided there and then (it keeps its number: numbers are gap-free).
    const invoice = (outcome: Parameters<typeof issueInvoice>[2], subscriptionId: string | null) =>
      issueInvoice(
        db,
        {
          id: invoiceId,
          tenant: auth,
          subscriptionId,
          periodIndex: subscriptionId === null ? null : 0,
          userId: user.id,
          currency: plan.currency,
          periodStart: isoTime(start),
          periodEnd: isoTime(next),
          lines: [subscriptionLine(plan, body.quantity, amount, isoTime(start), isoTime(next))],
        },
        outcome,
        realNow,
      );
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
      source: { card: card.card },
      summary: card.summary,
      fingerprint: card.fingerprint,
      at: realNow,
      // A retry with the same Idempotency-Key (after a lost answer or a failed commit) reaches the
      // processor with the same reference, which a live processor uses to refuse a second charge.
      // The use of the key is part of it: after the key's 24 hours, the same key is a new charge.
      processorReference: firstChargeReference(c),
      // The reference was first sent when this use of the Idempotency-Key began.
      firstAttemptAt: c.var.idempotency ? Date.parse(c.var.idempotency.since) : realNow,
    }));
    if (!result.succeeded || !result.token) {
      // No subscription exists: the failed payment belongs to none.
      const failed = { ...result.payment, subscriptionId: null };
      const voided = invoice({ kind: "failed", paymentId: failed.id, status: "void" }, null);
      return answerDecline(
        c,
        result,
        {
          statements: [db.insert(payments).values(failed), ...voided.statements],
          events: [emitEvent(db, auth, { type: "payment.failed", data: paymentEventData(failed, customer) }, realNow), ...voided.events],
        },
        { failures: { [CHARGE_RECORDED]: idempotencyClaimLost } },
      );
    }

    const paid = invoice({ kind: "paid", paymentId: result.payment.id }, id);
    const row: SubscriptionRow = {
      id,
      accountId: auth.accountId,
      livemode: auth.livemode,
      userId: user.id,
      planId: plan.id,
      status: "active",
      quantity: body.quantity,
      ...cardColumns(card),
      processorToken: result.token,
      startDate: isoTime(start),
      billingAnchor: isoTime(start),
      periodsBilled: 1,
      currentPeriodStart: isoTime(start),
      nextBillingDate: isoTime(next),
      dueAt: next,
      dunningAttempts: 0,
      cancelAtPeriodEnd: false,
      canceledAt: null,
      createdAt: isoTime(realNow),
      updatedAt: isoTime(realNow),
    };
    return commitAndRespond(
      c,
      {
        statements: [
          db.insert(subscriptions).values(row),
          db.insert(subscriptionPeriods).values({
            id: newId("period", realNow),
            accountId: auth.accountId,
            livemode: auth.livemode,
            subscriptionId: id,
            periodIndex: 0,
            periodStart: isoTime(start),
            amount,
            currency: plan.currency,
            status: "paid",
            attempts: 1,
            paymentId: result.payment.id,
            createdAt: isoTime(realNow),
            updatedAt: isoTime(realNow),
          }),
          ...result.statements,
          ...paid.statements,
        ],
        events: [...result.events, emitEvent(db, auth, { type: "subscription_created", subscriptionId: id, status: "active" }, realNow), ...paid.events],
      },
      201,
      serializeSubscription(row),
      // The card was charged: a key revoked meanwhile must not lose the record of it. The claim
      // guard stays: a request that took the key over charges with the same reference and records it.
      { moneyMoved: { paymentId: result.payment.id }, failures: { [CHARGE_RECORDED]: idempotencyClaimLost } },
    );
  });
}
