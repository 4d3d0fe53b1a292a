// Subscriptions: the list (filter by status) and cancel, now or at the end of the current period
// (DELETE /subscriptions/{id}, with at_period_end=true for the latter).
import type { Context, Hono } from "hono";
import { act, apiErrorPage, field, redirectWithNotice, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time } from "../format";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render, StatusFilter } from "../layout";
import { apiQuery, listQuery } from "../lists";
import { PlanRef, UserRef, namesFor } from "../names";
import { and, eq, gt, inArray } from "drizzle-orm";
import type { Db } from "../../db/client";
import type { Tenant } from "../../db/scope";
import { plans, subscriptions, usageRecords } from "../../db/schema";
import { periodStartMs } from "../../domain/billing-calendar";
import { type AggregateUsage, aggregateUsage } from "../../domain/usage";

/**
 * The proration items of each subscription among `ids` waiting for its next invoice (their sum, in
 * its plan's currency), by subscription id. One read.
 */
async function pendingProrations(db: Db, auth: Tenant, ids: string[]): Promise<Map<string, { amount: number; currency: string; items: number }>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: subscriptions.id, items: subscriptions.pendingItems, amount: subscriptions.pendingItemsAmount, currency: plans.currency })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .where(and(eq(subscriptions.accountId, auth.accountId), eq(subscriptions.livemode, auth.livemode), inArray(subscriptions.id, ids), gt(subscriptions.pendingItems, 0)));
  return new Map(rows.map((r) => [r.id, { amount: r.amount, currency: r.currency, items: r.items }]));
}

/**
 * The usage so far in the open period of each metered subscription among `ids` (aggregated as its
 * plan says), by subscription id. Two reads, only when the page shows a metered subscription.
 */
async function openPeriodUsage(db: Db, auth: Tenant & { keyId?: string }, ids: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (ids.length === 0) return out;
  const metered = await db
    .select({ id: subscriptions.id, n: subscriptions.periodsBilled, anchor: subscriptions.billingAnchor, interval: plans.interval, aggregate: plans.aggregateUsage })
    .from(subscriptions)
    .innerJoin(plans, eq(plans.id, subscriptions.planId))
    .where(and(eq(subscriptions.accountId, auth.accountId), eq(subscriptions.livemode, auth.livemode), inArray(subscriptions.id, ids), eq(plans.usageType, "metered")));
  if (metered.length === 0) return out;
  const records = await db
    .select({ subscriptionId: usageRecords.subscriptionId, periodIndex: usageRecords.periodIndex, quantity: usageRecords.quantity, action: usageRecords.action, timestamp: usageRecords.timestamp })
    .from(usageRecords)
    .where(inArray(usageRecords.subscriptionId, metered.map((m) => m.id)))
    .orderBy(usageRecords.id);
  for (const m of metered) {
    const own = records.filter((r) => r.subscriptionId === m.id && r.periodIndex === m.n);
    const period = { start: periodStartMs(m.anchor, m.interval, m.n), end: periodStartMs(m.anchor, m.interval, m.n + 1) };
    out.set(m.id, aggregateUsage(own, (m.aggregate ?? "sum") as AggregateUsage, period));
  }
  return out;
}

interface Subscription {
  id: string;
  user_id: string;
  plan_id: string;
  status: string;
  quantity: number;
  card: { brand: string; last4: string };
  next_billing_date: string | null;
  discount: { coupon: string; start: string; end: string | null } | null;
  trial_end: string | null;
  pending_update: { plan_id: string; quantity: number; effective_at: string } | null;
  cancel_at_period_end: boolean;
  canceled_at: string | null;
  created_at: string;
}

const BACK = "/dashboard/subscriptions";
const STATUSES = ["trialing", "active", "past_due", "canceled"];

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const query = listQuery(c, ["status", "user_id"]);
  const answer = await c.var.api<Page<Subscription>>("/subscriptions", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read subscriptions", "/dashboard");
  const page = answer.body;
  const write = can(session, "subscriptions:write");
  const names = await namesFor(c.var.db, session.auth, {
    users: page.data.map((s) => s.user_id),
    plans: page.data.flatMap((s) => (s.pending_update ? [s.plan_id, s.pending_update.plan_id] : [s.plan_id])),
  });
  const open = page.data.filter((s) => s.status !== "canceled").map((s) => s.id);
  const [usage, prorations] = await Promise.all([openPeriodUsage(c.var.db, session.auth, open), pendingProrations(c.var.db, session.auth, open)]);
  return render(c, 200, {
    title: "Subscriptions",
    active: BACK,
    children: (
      <section class="panel">
        <p class="muted">
          <StatusFilter statuses={STATUSES} current={query.status} base={BACK} />
        </p>
        {page.data.length === 0 ? (
          <Empty title={query.status ? `No ${query.status} subscriptions` : "No subscriptions yet"}>Subscriptions are created with POST /subscriptions.</Empty>
        ) : (
          <TableWrap>
          <table>
            <thead>
              <tr>
                <th>Subscription</th>
                <th>Customer</th>
                <th>Plan</th>
                <th>Status</th>
                <th class="num">Qty</th>
                <th>Next billing</th>
                <th>Card</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {page.data.map((s) => (
                <tr data-subscription={s.id}>
                  <td>
                    <Id id={s.id} />
                  </td>
                  <td>
                    <UserRef id={s.user_id} names={names} />
                  </td>
                  <td>
                    <PlanRef id={s.plan_id} names={names} />
                    {usage.has(s.id) ? (
                      <div class="muted" data-usage={usage.get(s.id)}>
                        {usage.get(s.id)} units used this period
                      </div>
                    ) : null}
                    {s.pending_update ? (
                      <div class="muted" data-pending-update={s.pending_update.plan_id}>
                        changes to {s.pending_update.quantity} × <PlanRef id={s.pending_update.plan_id} names={names} /> on <Time iso={s.pending_update.effective_at} />
                      </div>
                    ) : null}
                    {prorations.has(s.id) ? (
                      <div class="muted" data-pending-prorations={prorations.get(s.id)!.amount}>
                        prorations on the {s.cancel_at_period_end ? "final" : "next"} invoice: <Money minor={prorations.get(s.id)!.amount} currency={prorations.get(s.id)!.currency} />
                      </div>
                    ) : null}
                    {s.discount ? (
                      <div class="muted" data-discount={s.discount.coupon}>
                        coupon <a href={`/dashboard/coupons#coupon-${encodeURIComponent(s.discount.coupon)}`}>{s.discount.coupon}</a>
                        {s.discount.end ? (
                          <>
                            {" "}until <Time iso={s.discount.end} />
                          </>
                        ) : null}
                      </div>
                    ) : null}
                  </td>
                  <td>
                    <StatusBadge status={s.status} />
                    {s.status === "trialing" && s.trial_end ? (
                      <div class="muted" data-trial-end={s.trial_end}>
                        trial ends <Time iso={s.trial_end} />
                      </div>
                    ) : null}
                    {s.cancel_at_period_end && s.status !== "canceled" ? <div class="muted">cancels at period end</div> : null}
                    {s.canceled_at ? (
                      <div class="muted">
                        canceled <Time iso={s.canceled_at} />
                      </div>
                    ) : null}
                  </td>
                  <td class="num">{s.quantity}</td>
                  <td>
                    <Time iso={s.next_billing_date} />
                  </td>
                  <td class="nowrap">
                    {s.card.brand} •••• {s.card.last4}
                  </td>
                  <td>
                    {write && s.status !== "canceled" ? (
                      <div class="actions">
                        <form method="post" action={`${BACK}/${s.id}/cancel`} class="inline" data-confirm="Cancel this subscription now?">
                          <FormFields session={session} />
                          <input type="hidden" name="when" value="now" />
                          <button type="submit" class="small danger">
                            Cancel now
                          </button>
                        </form>
                        {!s.cancel_at_period_end ? (
                          <form method="post" action={`${BACK}/${s.id}/cancel`} class="inline">
                            <FormFields session={session} />
                            <input type="hidden" name="when" value="period_end" />
                            <button type="submit" class="small">
                              At period end
                            </button>
                          </form>
                        ) : null}
                      </div>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          </TableWrap>
        )}
        <Pager page={page} query={query} base={BACK} />
      </section>
    ),
  });
}

export function registerSubscriptionPages(dash: Hono<DashEnv>) {
  dash.get("/subscriptions", listPage);
  dash.post("/subscriptions/:id/cancel", (c) => {
    const id = c.req.param("id");
    const when = field(c, "when");
    if (when !== "now" && when !== "period_end") return refuse(c, 400, "when must be now or period_end.", BACK, "parameter_invalid", "when");
    return act<Subscription>(c, {
      what: "cancel this subscription",
      back: BACK,
      send: (key) =>
        c.var.api(`/subscriptions/${encodeURIComponent(id)}`, { method: "DELETE", query: when === "period_end" ? { at_period_end: "true" } : {}, idempotencyKey: key }),
      done: (s) => redirectWithNotice(c, BACK, s.status === "canceled" ? "subscription_canceled" : "subscription_cancel_scheduled", s.id),
    });
  });
}
