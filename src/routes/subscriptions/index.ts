// Subscriptions. Plan and quantity changes take effect from the next period, without
// proration: the open period keeps the amount fixed when it was first billed.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq, inArray, sql } from "drizzle-orm";
import { cardInBody } from "../../billing/card";
import { periodStartMs } from "../../billing/calendar";
import { CLAIM_STALE_MS } from "../../billing/renewals";
import { chargeableAmount, type PlanRow } from "../../billing/pricing";
import { processorForRequest } from "../../processor";
import { guard, rawStatement, runBatch, type Statement } from "../../db/batch";
import { payments, plans, subscriptionPeriods, subscriptions, testClocks, users } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { isoTime } from "../../lib/clock";
import type { AppEnv } from "../../lib/context";
import { cardDeclined, conflict, invalidRequest } from "../../lib/errors";
import { listQuery, listSchema } from "../../lib/pagination";
import { found, listOwned } from "../../lib/reads";
import { commit, commitAndRespond } from "../../lib/respond";
import { type ChargeResult, charge, paymentEventData } from "../../payments/charge";
import { readCard } from "../../payments/card-input";
import { type EmittedEvent, emitEvent } from "../../webhooks/outbox";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import {
  CancelQuery,
  CreateSubscriptionBody,
  ListSubscriptionsQuery,
  SubscriptionSchema,
  serializeSubscription,
  UpdateSubscriptionBody,
} from "./schema";

const tags = ["Subscriptions"];
const subscriptionId = idParam("subscription", "sub_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/subscriptions",
  tags,
  operationId: "createSubscription",
  summary: "Subscribe a user to a plan",
  description:
    "Validates the user, the plan and the card, then charges the first period. On success the subscription is active and next_billing_date is one interval later, anchored to the start day (Jan 31 -> Feb 28/29 -> Mar 31). A decline answers 402, records the failed payment, emits payment.failed and creates no subscription.",
  scope: "subscriptions:write",
  request: jsonBodyOf(CreateSubscriptionBody),
  responses: { 201: json(SubscriptionSchema, "The active subscription.") },
  extraErrors: [402],
});

const list = apiRoute({
  method: "get",
  path: "/subscriptions",
  tags,
  operationId: "listSubscriptions",
  summary: "List subscriptions",
  scope: "subscriptions:read",
  request: { query: listQuery.extend(ListSubscriptionsQuery.shape) },
  responses: { 200: json(listSchema(SubscriptionSchema, "SubscriptionList"), "A page of subscriptions, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/subscriptions/{id}",
  tags,
  operationId: "getSubscription",
  summary: "Read a subscription",
  scope: "subscriptions:read",
  request: { params: subscriptionId },
  responses: { 200: json(SubscriptionSchema, "The subscription.") },
});

const update = apiRoute({
  method: "put",
  path: "/subscriptions/{id}",
  tags,
  operationId: "updateSubscription",
  summary: "Replace payment details, or change plan or quantity",
  description:
    "New card details replace the stored ones (the card is vaulted, not charged). On a past_due subscription the new card is charged at once for the unpaid period: success makes it active again, a decline answers 402 and leaves it past_due. plan_id and quantity take effect from the next period, without proration. Emits subscription_updated.",
  scope: "subscriptions:write",
  request: { params: subscriptionId, ...jsonBodyOf(UpdateSubscriptionBody) },
  responses: { 200: json(SubscriptionSchema, "The updated subscription.") },
  extraErrors: [402],
});

const cancel = apiRoute({
  method: "delete",
  path: "/subscriptions/{id}",
  tags,
  operationId: "cancelSubscription",
  summary: "Cancel a subscription",
  description:
    "Cancels now (status canceled, canceled_at set, subscription_canceled emitted), or with at_period_end=true at the end of the current period: the subscription stays active and the renewal run cancels it instead of charging.",
  scope: "subscriptions:write",
  request: { params: subscriptionId, query: CancelQuery },
  responses: { 200: json(SubscriptionSchema, "The canceled (or cancel-scheduled) subscription.") },
});

const SUBSCRIPTION_CANCELED = "subscription_canceled";
const CHARGE_IN_FLIGHT = "charge_in_flight";

const alreadyCanceled = (id: string) => conflict("subscription_canceled", `Subscription ${id} is canceled; it cannot be changed or canceled again.`);
const changedMeanwhile = () =>
  conflict("subscription_changed", "The subscription changed while this request ran (a renewal or another update); read it and retry.");

type SubscriptionRow = typeof subscriptions.$inferSelect;

/** A subscription of the caller's account with its plan, user, the user's test clock and the period being collected. */
async function loadSubscription(c: Context<AppEnv>, id: string) {
  const { db, auth } = c.var;
  const [row] = await db
    .select({ sub: subscriptions, plan: plans, user: users, clock: testClocks, period: subscriptionPeriods })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .leftJoin(testClocks, eq(testClocks.id, users.testClockId))
    .leftJoin(
      subscriptionPeriods,
      and(eq(subscriptionPeriods.subscriptionId, subscriptions.id), eq(subscriptionPeriods.periodIndex, subscriptions.periodsBilled)),
    )
    .where(owned(subscriptions, auth, eq(subscriptions.id, id)))
    .limit(1);
  return found(c, row, "subscription", id);
}

/** Billing time: the user's test clock when attached, else the wall clock. */
const billingNow = (clock: { frozenTime: string } | null, realNow: number) => (clock ? Date.parse(clock.frozenTime) : realNow);

const cardColumns = (card: { summary: { brand: string; last4: string; exp_month: number; exp_year: number }; fingerprint: string }) => ({
  cardBrand: card.summary.brand,
  cardLast4: card.summary.last4,
  cardExpMonth: card.summary.exp_month,
  cardExpYear: card.summary.exp_year,
  cardFingerprint: card.fingerprint,
});

/** Commits a declined charge (its failed payment and payment.failed) with the 402 as the stored answer, then throws the 402. */
async function answerDecline(c: Context<AppEnv>, result: ChargeResult, statements: Statement[], events: EmittedEvent[]): Promise<never> {
  const error = cardDeclined(result.declineCode ?? "card_declined", result.declineMessage ?? "The card was declined.");
  await commit(c, { statements, events }, 402, error.body(c.var.requestId));
  throw error;
}

export function registerSubscriptions(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async (c) => {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const realNow = c.var.clock.now();
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
    const { user, clock } = await found(c, userRows[0], "user", body.user_id, "user_id");
    const plan = await found(c, planRows[0], "plan", body.plan_id, "plan_id");
    if (!plan.active) throw invalidRequest("plan_inactive", `Plan ${plan.id} is archived and accepts no new subscriptions.`, "plan_id");
    const amount = chargeableAmount(plan, body.quantity);
    const card = await readCard(c.env, body, realNow);
    const processor = processorForRequest(c.env, auth.mode);

    const id = newId("subscription", realNow);
    const customer = { id: user.id, email: user.email };
    const result = await charge({
      db,
      processor,
      accountId: auth.accountId,
      customer,
      subscriptionId: id,
      amount,
      currency: plan.currency,
      source: { card: card.card },
      summary: card.summary,
      fingerprint: card.fingerprint,
      at: realNow,
      // A retry with the same Idempotency-Key (after a lost answer or a failed commit) reaches the
      // processor with the same reference, which a live processor uses to refuse a second charge.
      processorReference: c.var.idempotency ? `${auth.accountId}:idempotency:${c.var.idempotency.key}` : undefined,
    });
    if (!result.succeeded || !result.token) {
      // No subscription exists: the failed payment belongs to none.
      const failed = { ...result.payment, subscriptionId: null };
      return answerDecline(
        c,
        result,
        [db.insert(payments).values(failed)],
        [emitEvent(db, auth.accountId, { type: "payment.failed", data: paymentEventData(failed, customer) }, realNow)],
      );
    }

    const start = billingNow(clock, realNow);
    const next = periodStartMs(isoTime(start), plan.interval, 1);
    const row: SubscriptionRow = {
      id,
      accountId: auth.accountId,
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
        ],
        events: [...result.events, emitEvent(db, auth.accountId, { type: "subscription_created", subscriptionId: id, status: "active" }, realNow)],
      },
      201,
      serializeSubscription(row),
    );
  });

  app.openapi(list, async (c) => {
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: subscriptions,
      id: subscriptions.id,
      query,
      filters: [
        query.user_id !== undefined ? eq(subscriptions.userId, query.user_id) : undefined,
        query.status !== undefined ? eq(subscriptions.status, query.status) : undefined,
      ],
      validCursor: (id) => hasPrefix(id, "subscription"),
      serialize: serializeSubscription,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async (c) => {
    const { id } = c.req.valid("param");
    const row = await found(
      c,
      await c.var.db.query.subscriptions.findFirst({ where: owned(subscriptions, c.var.auth, eq(subscriptions.id, id)) }),
      "subscription",
      id,
    );
    return c.json(serializeSubscription(row), 200);
  });

  app.openapi(update, async (c) => {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const realNow = c.var.clock.now();
    const newCard = cardInBody(body);
    if (!newCard && body.plan_id === undefined && body.quantity === undefined && body.cancel_at_period_end === undefined) {
      throw invalidRequest("parameter_missing", "Send new payment details, plan_id, quantity or cancel_at_period_end.");
    }
    const current = await loadSubscription(c, id);
    const { sub, user } = current;
    if (sub.status === "canceled") throw alreadyCanceled(id);

    let plan: PlanRow = current.plan;
    if (body.plan_id !== undefined && body.plan_id !== sub.planId) {
      const planId = body.plan_id;
      plan = await found(c, await db.query.plans.findFirst({ where: owned(plans, auth, eq(plans.id, planId)) }), "plan", planId, "plan_id");
      if (!plan.active) throw invalidRequest("plan_inactive", `Plan ${plan.id} is archived and accepts no new subscriptions.`, "plan_id");
      if (plan.currency !== current.plan.currency || plan.interval !== current.plan.interval) {
        throw invalidRequest(
          "plan_incompatible",
          `Plan ${plan.id} bills in ${plan.currency} every ${plan.interval}; the subscription bills in ${current.plan.currency} every ${current.plan.interval}. Cancel and subscribe to change either.`,
          "plan_id",
        );
      }
    }
    const quantity = body.quantity ?? sub.quantity;
    if (plan.id !== sub.planId || quantity !== sub.quantity) chargeableAmount(plan, quantity);

    const changes: Partial<SubscriptionRow> = { planId: plan.id, quantity, updatedAt: isoTime(realNow) };
    if (body.cancel_at_period_end !== undefined) changes.cancelAtPeriodEnd = body.cancel_at_period_end;
    const card = newCard ? await readCard(c.env, newCard, realNow) : null;
    const processor = card ? processorForRequest(c.env, auth.mode) : null;
    const customer = { id: user.id, email: user.email };

    if (card && processor && sub.status === "past_due") {
      // The unpaid period is charged to the new card at once. The attempt is claimed on the
      // period row exactly as a dunning retry claims it, so the two can never both charge.
      const n = sub.periodsBilled;
      const k = sub.dunningAttempts;
      const [claimResult] = await runBatch(db, [
        rawStatement(
          db,
          sql`UPDATE subscription_periods SET attempts = ${k + 1}, updated_at = ${isoTime(realNow)}
            WHERE subscription_id = ${sub.id} AND period_index = ${n} AND status = 'open' AND attempts = ${k}
              AND EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status = 'past_due' AND s.periods_billed = ${n} AND s.dunning_attempts = ${k})
            RETURNING amount, currency`,
        ),
      ]);
      const claim = (claimResult as { results?: { amount: number; currency: string }[] }).results?.[0];
      if (!claim) throw changedMeanwhile();
      const result = await charge({
        db,
        processor,
        accountId: auth.accountId,
        customer,
        subscriptionId: sub.id,
        amount: claim.amount,
        currency: claim.currency,
        source: { card: card.card },
        summary: card.summary,
        fingerprint: card.fingerprint,
        at: realNow,
        // The same reference a renewal run would use for this attempt of this period.
        processorReference: `${sub.id}:period:${n}:attempt:${k + 1}`,
      });
      const asClaimed = and(eq(subscriptions.id, sub.id), eq(subscriptions.status, "past_due"), eq(subscriptions.periodsBilled, n), eq(subscriptions.dunningAttempts, k));
      if (!result.succeeded || !result.token) {
        // A declined card update counts as a failed attempt of the period; the next scheduled retry stands.
        return answerDecline(
          c,
          result,
          [...result.statements, db.update(subscriptions).set({ dunningAttempts: k + 1, updatedAt: isoTime(realNow) }).where(asClaimed)],
          result.events,
        );
      }
      const next = periodStartMs(sub.billingAnchor, plan.interval, n + 1);
      const renewed: SubscriptionRow = {
        ...sub,
        ...changes,
        ...cardColumns(card),
        processorToken: result.token,
        status: "active",
        periodsBilled: n + 1,
        currentPeriodStart: isoTime(periodStartMs(sub.billingAnchor, plan.interval, n)),
        nextBillingDate: isoTime(next),
        dueAt: next,
        dunningAttempts: 0,
      };
      const { id: _id, accountId: _account, createdAt: _created, ...set } = renewed;
      return commitAndRespond(
        c,
        {
          statements: [
            ...result.statements,
            db
              .update(subscriptionPeriods)
              .set({ status: "paid", paymentId: result.payment.id, updatedAt: isoTime(realNow) })
              .where(and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.periodIndex, n))),
            db.update(subscriptions).set(set).where(asClaimed),
          ],
          events: [
            ...result.events,
            emitEvent(db, auth.accountId, { type: "subscription_renewal", subscriptionId: sub.id, status: "success" }, realNow),
            emitEvent(db, auth.accountId, { type: "subscription_updated", subscriptionId: sub.id, status: "active" }, realNow),
          ],
        },
        200,
        serializeSubscription(renewed),
      );
    }

    if (card && processor) {
      // Replacing the card of a subscription in good standing vaults it without charging;
      // the next renewal charges the new token.
      Object.assign(changes, cardColumns(card), { processorToken: await processor.tokenizeDestination(card.card) });
    }
    const updated: SubscriptionRow = { ...sub, ...changes };
    return commitAndRespond(
      c,
      {
        statements: [
          guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status IN ('active', 'past_due'))`),
          db.update(subscriptions).set(changes).where(and(owned(subscriptions, auth, eq(subscriptions.id, sub.id)), inArray(subscriptions.status, ["active", "past_due"]))),
        ],
        events: [emitEvent(db, auth.accountId, { type: "subscription_updated", subscriptionId: sub.id, status: sub.status }, realNow)],
      },
      200,
      serializeSubscription(updated),
      { failures: { [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id) } },
    );
  });

  app.openapi(cancel, async (c) => {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const atPeriodEnd = c.req.valid("query").at_period_end === "true";
    const realNow = c.var.clock.now();
    const { sub, clock } = await loadSubscription(c, id);
    if (sub.status === "canceled") throw alreadyCanceled(id);

    const notCanceled = guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status != 'canceled')`);
    const match = owned(subscriptions, auth, eq(subscriptions.id, sub.id));
    const failures = { [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id) };
    if (atPeriodEnd) {
      const changes = { cancelAtPeriodEnd: true, updatedAt: isoTime(realNow) };
      return commitAndRespond(
        c,
        {
          statements: [notCanceled, db.update(subscriptions).set(changes).where(match)],
          events: [emitEvent(db, auth.accountId, { type: "subscription_updated", subscriptionId: sub.id, status: sub.status }, realNow)],
        },
        200,
        serializeSubscription({ ...sub, ...changes }),
        { failures },
      );
    }
    const changes = { status: "canceled" as const, canceledAt: isoTime(billingNow(clock, realNow)), dueAt: null, updatedAt: isoTime(realNow) };
    // A charge claimed for the open period (by a renewal, or by new card details) may already
    // be at the processor. Canceling under it would leave a paid charge on a canceled
    // subscription, so the cancel waits for that attempt to settle: 409, retry shortly.
    const noChargeInFlight = guard(
      db,
      CHARGE_IN_FLIGHT,
      sql`NOT EXISTS (SELECT 1 FROM subscription_periods AS p JOIN subscriptions AS s ON s.id = p.subscription_id
        WHERE p.subscription_id = ${sub.id} AND p.period_index = s.periods_billed AND p.status = 'open'
          AND p.attempts > s.dunning_attempts AND p.updated_at >= ${isoTime(realNow - CLAIM_STALE_MS)})`,
    );
    return commitAndRespond(
      c,
      {
        statements: [
          notCanceled,
          noChargeInFlight,
          db.update(subscriptions).set(changes).where(match),
          // A period still being dunned will not be collected.
          db
            .update(subscriptionPeriods)
            .set({ status: "uncollectible", updatedAt: isoTime(realNow) })
            .where(and(eq(subscriptionPeriods.subscriptionId, sub.id), eq(subscriptionPeriods.status, "open"))),
        ],
        events: [emitEvent(db, auth.accountId, { type: "subscription_canceled", subscriptionId: sub.id, status: "canceled" }, realNow)],
      },
      200,
      serializeSubscription({ ...sub, ...changes }),
      {
        failures: {
          ...failures,
          [CHARGE_IN_FLIGHT]: () =>
            conflict("charge_in_progress", "A charge for this subscription's current period is in progress. Retry the cancellation in a few seconds."),
        },
      },
    );
  });
}
