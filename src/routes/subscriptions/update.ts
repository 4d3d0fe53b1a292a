// PUT /subscriptions/{id}: new card details, plan, quantity or cancel_at_period_end. Only the
// fields sent are written, so a concurrent change to another field is never undone. On a
// past_due subscription new card details are charged at once for the unpaid period, through
// src/billing/periods.ts exactly as a dunning retry is (one claim, one reference, one settlement).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, inArray, sql } from "drizzle-orm";
import { PERIOD_ALREADY_SETTLED, chargeInFlight, chargePeriod, claimOf, claimPeriod, hasUnsettledClaim } from "../../billing/periods";
import { chargeableAmount, type PlanRow } from "../../billing/pricing";
import { processorForRequest } from "../../processor";
import { guard, runBatch } from "../../db/batch";
import { plans, subscriptions } from "../../db/schema";
import { owned } from "../../db/scope";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import { readById } from "../reads";
import { assertKeyClaimedFirst, commitAndRespond, outcomeTracked } from "../write-path";
import { cardInBody, readCard } from "../../payments/card-input";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { alreadyCanceled, answerDecline, chargeInProgress, cardColumns, changedMeanwhile, loadSubscription, type SubscriptionRow, subscriptionId, tags } from "./common";
import { SubscriptionSchema, serializeSubscription, UpdateSubscriptionBody } from "./schema";

const update = apiRoute({
  method: "put",
  path: "/subscriptions/{id}",
  claimFirst: true,
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

const SUBSCRIPTION_CANCELED = "subscription_canceled";
const CHARGE_IN_FLIGHT = "charge_in_flight";

export function registerUpdateSubscription(app: OpenAPIHono<AppEnv>) {
  app.openapi(update, async function updateSubscription(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const realNow = clock.now();
    const newCard = cardInBody(body);
    if (!newCard && body.plan_id === undefined && body.quantity === undefined && body.cancel_at_period_end === undefined) {
      throw invalidRequest("parameter_missing", "Send new payment details, plan_id, quantity or cancel_at_period_end.");
    }
    const current = await loadSubscription(c, id);
    const { sub } = current;
    if (sub.status === "canceled") throw alreadyCanceled(id);

    let plan: PlanRow = current.plan;
    if (body.plan_id !== undefined && body.plan_id !== sub.planId) {
      const planId = body.plan_id;
      plan = await readById(c, plans, planId, "plan", "plan_id");
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

    // Only what the request sends is written.
    const changes: Partial<SubscriptionRow> = { updatedAt: isoTime(realNow) };
    if (body.plan_id !== undefined) changes.planId = plan.id;
    if (body.quantity !== undefined) changes.quantity = body.quantity;
    if (body.cancel_at_period_end !== undefined) changes.cancelAtPeriodEnd = body.cancel_at_period_end;
    const card = newCard ? await readCard(c.env, newCard, realNow) : null;
    const processor = card ? processorForRequest(c.env, auth.mode) : null;

    if (card && processor && sub.status === "past_due") {
      // The unpaid period is charged to the new card at once, claimed as the next attempt of the
      // period exactly as a dunning retry claims it, so the two can never both charge.
      const [claimResult] = await runBatch(db, [claimPeriod(db, current, "card_update", realNow, realNow)]);
      const claim = claimOf(claimResult);
      if (!claim) {
        // This request took its own stale Idempotency-Key claim over, and the period's next attempt
        // is claimed and unsettled: that may be this request's earlier run, whose charge's outcome
        // is unknown. The key is not freed (500 outcome_unknown; the renewal run takes the stale
        // charge over and records it); any other request is told the subscription changed.
        if (c.var.idempotency?.takeover && current.period && hasUnsettledClaim(current)) {
          await outcomeTracked(c, () => Promise.reject(new Error(`card update of ${sub.id}: an earlier run's charge is unsettled`)));
        }
        throw changedMeanwhile();
      }
      // A processor call that still threw after its retries may have moved money: the outcome is
      // unknown, so the Idempotency-Key stays claimed.
      assertKeyClaimedFirst(c);
      const settlement = await outcomeTracked(c, () => chargePeriod(db, {
        processor,
        row: current,
        claim,
        source: { card: card.card, summary: card.summary, fingerprint: card.fingerprint },
        at: realNow,
        realNow,
        onDecline: "count_attempt",
        changes: { ...changes, ...cardColumns(card) },
      }));
      // Money moved: the settlement commits whatever became of the caller's key or claim meanwhile.
      const options = { moneyMoved: { paymentId: settlement.charge.payment.id }, claimGuard: false, failures: { [PERIOD_ALREADY_SETTLED]: changedMeanwhile } };
      if (settlement.outcome !== "renewed") return answerDecline(c, settlement.charge, settlement.writes, options);
      const renewed: SubscriptionRow = { ...sub, ...settlement.subscriptionChanges };
      return commitAndRespond(c, settlement.writes, 200, serializeSubscription(renewed), options);
    }

    if (card && processor) {
      // Replacing the card of a subscription in good standing vaults it without charging;
      // the next renewal charges the new token.
      Object.assign(changes, cardColumns(card), { processorToken: await processor.tokenizeDestination(card.card) });
    }
    return commitAndRespond(
      c,
      {
        statements: [
          guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status IN ('active', 'past_due'))`),
          // Setting cancel at period end under a charge already at the processor would answer that
          // a period will not be charged while it is being charged (as DELETE ?at_period_end=true).
          ...(body.cancel_at_period_end === true ? [guard(db, CHARGE_IN_FLIGHT, sql`NOT ${chargeInFlight(sub.id, realNow)}`)] : []),
          db.update(subscriptions).set(changes).where(and(owned(subscriptions, auth, eq(subscriptions.id, sub.id)), inArray(subscriptions.status, ["active", "past_due"]))),
        ],
        events: [emitEvent(db, auth, { type: "subscription_updated", subscriptionId: sub.id, status: sub.status }, realNow)],
      },
      200,
      serializeSubscription({ ...sub, ...changes }),
      { failures: { [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id), [CHARGE_IN_FLIGHT]: chargeInProgress } },
    );
  });
}
