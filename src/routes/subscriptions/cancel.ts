// DELETE /subscriptions/{id}: cancel now, or (at_period_end=true) at the end of the current
// period, when the renewal run cancels instead of charging a new period, after a final invoice of
// what the period still owes, if anything (src/billing/periods.ts).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, sql } from "drizzle-orm";
import { chargeInFlight, subscriptionUpdatedEvent } from "../../billing/periods";
import { uncollectibleInvoicesOf } from "../../billing/invoices";
import { guard, guardExists } from "../../db/batch";
import { subscriptionPeriods, subscriptions } from "../../db/schema";
import { type CallerSlots, owned } from "../../db/scope";
import type { Db } from "../../db/client";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { commitAndAnswerRow } from "../write-path";
import type { WriteSet } from "../../webhooks/outbox";
import { conflict, invalidRequest, notFound } from "../../lib/errors";
import type { Context } from "hono";
import { letGo, waitingPaymentOfSubscription } from "../../billing/incomplete";
import { payments } from "../../db/schema";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, json } from "../openapi";
import { alreadyCanceled, notActivated, billingNowSql, chargeInProgress, subscriptionId, tags, SUBSCRIPTION_CANCELED, CHARGE_IN_FLIGHT } from "./common";
import { CancelQuery, SubscriptionSchema, serializeSubscription, subscriptionAnswer } from "./schema";

const cancel = apiRoute({
  method: "delete",
  path: "/subscriptions/{id}",
  tags,
  operationId: "cancelSubscription",
  summary: "Cancel a subscription",
  description:
    "Cancels now (status canceled, canceled_at set, subscription_canceled emitted), or with at_period_end=true at the end of the current period: the subscription stays active and the renewal run cancels it instead of charging a new period. What that period still owes (a metered plan's usage, prorations still pending) is billed first on a final invoice, charged at the period's end: once it is paid (or voided), the subscription is canceled; a decline is retried on the dunning schedule (past_due), and while it is open cancel_at_period_end cannot be set back to false (400 final_invoice_open). While a charge for the current period is at the processor, either kind of cancel answers 409 charge_in_progress: retry in a few seconds (a charge whose outcome is unknown is settled by Tender within 10 minutes). A canceled subscription shows cancel_at_period_end false.",
  scope: "subscriptions:write",
  request: { params: subscriptionId, query: CancelQuery },
  responses: { 200: json(SubscriptionSchema, "The canceled (or cancel-scheduled) subscription.") },
});

const SUBSCRIPTION_MISSING = "subscription_missing";

export function registerCancelSubscription(app: OpenAPIHono<AppEnv>) {
  app.openapi(cancel, async function cancelSubscription(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const atPeriodEnd = c.req.valid("query").at_period_end === "true";
    const realNow = clock.now();
    // One round trip: the subscription is not read first. Its guards refuse a subscription that
    // is not there (404), already canceled, or being charged (409); the batch returns the row as
    // it commits, and the record stores that row as the answer (subscriptionAnswer).
    const match = owned(subscriptions, auth, eq(subscriptions.id, id));
    const guards = [
      guardExists(db, SUBSCRIPTION_MISSING, subscriptions, match),
      guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${id} AND s.status != 'canceled')`),
      // An incomplete subscription is canceled by letting its payment go (below); an expired one is over.
      guard(db, NOT_ACTIVATED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${id} AND s.status NOT IN ('incomplete', 'incomplete_expired'))`),
      // A charge claimed for the open period (by a renewal, or by new card details) may already be
      // at the processor. Canceling under it, now or at the period's end, would answer that a
      // period will not be charged while it is being charged: 409, retry once it settled.
      guard(db, CHARGE_IN_FLIGHT, sql`NOT ${chargeInFlight(id, realNow)}`),
    ];
    const failures = {
      [SUBSCRIPTION_MISSING]: () => notFound("subscription", id, "id"),
      [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(id),
      [CHARGE_IN_FLIGHT]: chargeInProgress,
      [NOT_ACTIVATED]: () => notActivatedMarker,
    };
    const writes: WriteSet = atPeriodEnd
      ? {
          statements: guards,
          returning: db.update(subscriptions).set({ cancelAtPeriodEnd: true, updatedAt: isoTime(realNow) }).where(match).returning(),
          // The status it keeps, as the batch sees it.
          events: [subscriptionUpdatedEvent(db, auth, id, realNow)],
        }
      : {
          statements: [
            ...guards,
            // A period still being dunned will not be collected.
            db
              .update(subscriptionPeriods)
              .set({ status: "uncollectible", updatedAt: isoTime(realNow) })
              .where(and(eq(subscriptionPeriods.subscriptionId, id), eq(subscriptionPeriods.status, "open"))),
            // Its open invoice with it.
            uncollectibleInvoicesOf(db, id, realNow),
          ],
          returning: db
            .update(subscriptions)
            // Canceled at billing time: the user's test clock when one is attached (billingNow). A
            // canceled subscription has nothing left to cancel at its period's end (as Stripe's).
            .set({ status: "canceled", canceledAt: billingNowSql(subscriptions.userId, realNow), cancelAtPeriodEnd: false, dueAt: null, updatedAt: isoTime(realNow) })
            .where(match)
            .returning(),
          events: [emitEvent(db, auth, { type: "subscription_canceled", subscriptionId: id, status: "canceled" }, realNow)],
        };
    try {
      return await commitAndAnswerRow(c, writes, subscriptionAnswer, eq(subscriptions.id, id), { failures });
    } catch (error) {
      if (error !== notActivatedMarker) throw error;
      return cancelIncomplete(c, id, atPeriodEnd, realNow);
    }
  });
}

const NOT_ACTIVATED = "subscription_not_activated";
/** The failure the batch answers for an incomplete (or expired) subscription: the route takes it to cancelIncomplete. */
const notActivatedMarker = conflict("subscription_incomplete", "incomplete");

/** The caller's subscription `id` with its payment waiting for 3-D Secure, if one does (joined on its account and mode: a seek in payments_subscription). */
export const incompleteWithPayment = (db: Db, auth: CallerSlots, id: string) =>
  db
    .select({ sub: subscriptions, payment: payments })
    .from(subscriptions)
    .leftJoin(payments, waitingPaymentOfSubscription())
    .where(owned(subscriptions, auth, eq(subscriptions.id, id)))
    .limit(1);

/**
 * DELETE of an incomplete subscription, as Stripe's: canceled (subscription_canceled), its payment
 * canceled at the processor and its invoice voided, in the batch guarded on the payment still
 * waiting for its payer (src/billing/incomplete.ts). A payment decided meanwhile decides it: an
 * active one is canceled as any is, by a retry. An expired one answers 409.
 */
async function cancelIncomplete(c: Context<AppEnv>, id: string, atPeriodEnd: boolean, realNow: number) {
  const { db, auth } = c.var;
  const [row] = await incompleteWithPayment(db, auth, id);
  if (!row) throw notFound("subscription", id, "id");
  if (row.sub.status !== "incomplete" || !row.payment || atPeriodEnd) {
    if (row.sub.status === "incomplete" && atPeriodEnd) throw invalidRequest("parameter_invalid", `at_period_end: subscription ${id} is incomplete and has no period to end; cancel it now.`, "at_period_end");
    if (row.sub.status === "incomplete_expired" || row.sub.status === "incomplete") throw notActivated(id, row.sub.status);
    throw conflict("subscription_changed", `Subscription ${id} changed while it was canceled; retry.`);
  }
  const outcome = await letGo(c.env, db, row.payment, realNow, "canceled");
  if (outcome !== "expired") throw conflict("payment_in_progress", `Subscription ${id}'s first payment is being decided; retry in a few seconds.`);
  const [now] = await db.select().from(subscriptions).where(owned(subscriptions, auth, eq(subscriptions.id, id))).limit(1);
  return c.json(serializeSubscription(now!), 200);
}
