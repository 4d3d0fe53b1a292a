// DELETE /subscriptions/{id}: cancel now, or (at_period_end=true) at the end of the current
// period, when the renewal run cancels instead of charging (src/billing/periods.ts).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, sql } from "drizzle-orm";
import { chargeInFlight } from "../../billing/periods";
import { guard } from "../../db/batch";
import { subscriptionPeriods, subscriptions } from "../../db/schema";
import { owned } from "../../db/scope";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { commitAndRespond } from "../write-path";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, json } from "../openapi";
import { alreadyCanceled, billingNow, chargeInProgress, loadSubscription, subscriptionId, tags } from "./common";
import { CancelQuery, SubscriptionSchema, serializeSubscription } from "./schema";

const cancel = apiRoute({
  method: "delete",
  path: "/subscriptions/{id}",
  tags,
  operationId: "cancelSubscription",
  summary: "Cancel a subscription",
  description:
    "Cancels now (status canceled, canceled_at set, subscription_canceled emitted), or with at_period_end=true at the end of the current period: the subscription stays active and the renewal run cancels it instead of charging. While a charge for the current period is at the processor, either kind of cancel answers 409 charge_in_progress: retry in a few seconds.",
  scope: "subscriptions:write",
  request: { params: subscriptionId, query: CancelQuery },
  responses: { 200: json(SubscriptionSchema, "The canceled (or cancel-scheduled) subscription.") },
});

const SUBSCRIPTION_CANCELED = "subscription_canceled";
const CHARGE_IN_FLIGHT = "charge_in_flight";

export function registerCancelSubscription(app: OpenAPIHono<AppEnv>) {
  app.openapi(cancel, async function cancelSubscription(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const atPeriodEnd = c.req.valid("query").at_period_end === "true";
    const realNow = clock.now();
    const { sub, clock: testClock } = await loadSubscription(c, id);
    if (sub.status === "canceled") throw alreadyCanceled(id);

    const notCanceled = guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status != 'canceled')`);
    const match = owned(subscriptions, auth, eq(subscriptions.id, sub.id));
    // A charge claimed for the open period (by a renewal, or by new card details) may already be
    // at the processor. Canceling under it, now or at the period's end, would answer that a period
    // will not be charged while it is being charged: 409, retry once it settled.
    const noChargeInFlight = guard(db, CHARGE_IN_FLIGHT, sql`NOT ${chargeInFlight(sub.id, realNow)}`);
    const failures = {
      [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id),
      [CHARGE_IN_FLIGHT]: chargeInProgress,
    };
    if (atPeriodEnd) {
      const changes = { cancelAtPeriodEnd: true, updatedAt: isoTime(realNow) };
      return commitAndRespond(
        c,
        {
          statements: [notCanceled, noChargeInFlight, db.update(subscriptions).set(changes).where(match)],
          events: [emitEvent(db, auth.accountId, { type: "subscription_updated", subscriptionId: sub.id, status: sub.status }, realNow)],
        },
        200,
        serializeSubscription({ ...sub, ...changes }),
        { failures },
      );
    }
    const changes = { status: "canceled" as const, canceledAt: isoTime(billingNow(testClock, realNow)), dueAt: null, updatedAt: isoTime(realNow) };
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
      { failures },
    );
  });
}
