// Subscriptions: the list (filter by status), a subscription's page (its plan, customer, card,
// what is scheduled, and its payments), and cancel, now or at the end of the current period
// (DELETE /subscriptions/{id}, with at_period_end=true for the latter).
import type { Context, Hono } from "hono";
import { act, apiErrorPage, field, redirectWithNotice, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time, cardText } from "../format";
import { BackLink, Fact, Headline, PaymentRows, StackTable } from "../details";
import { Empty, FormFields, Pager, StatusBadge, can, render, StatusFilter } from "../layout";
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
const subscriptionPage = (id: string) => `${BACK}/${encodeURIComponent(id)}`;

interface SubscriptionPayment {
  id: string;
  amount: number;
  currency: string;
  status: string;
  created_at: string;
}

function CancelForms({ c, s }: { c: Context<DashEnv>; s: Subscription }) {
  const session = c.var.session!;
  return (
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
  );
}

/** Trial, scheduled cancellation or cancellation, under the status. */
function StatusNotes({ s }: { s: Subscription }) {
  return (
    <>
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
    </>
  );
}
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
          <StackTable columns={["Subscription", "Customer", "Plan", "Status", { label: "Qty", class: "num" }, "Next billing", "Card", ""]}>
            {page.data.map((s) => (
              <tr data-subscription={s.id}>
                <td data-label="Subscription">
                  <Id id={s.id} href={subscriptionPage(s.id)} />
                </td>
                <td data-label="Customer">
                  <UserRef id={s.user_id} names={names} />
                </td>
                <td class="lead">
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
                <td class="lead">
                  <StatusBadge status={s.status} />
                  <StatusNotes s={s} />
                </td>
                <td class="num" data-label="Qty">{s.quantity}</td>
                <td data-label="Next billing">
                  <Time iso={s.next_billing_date} />
                </td>
                <td class="nowrap" data-label="Card">
                  {cardText(s.card)}
                </td>
                <td class="lead">{write && s.status !== "canceled" ? <CancelForms c={c} s={s} /> : null}</td>
              </tr>
            ))}
          </StackTable>
        )}
        <Pager page={page} query={query} base={BACK} />
      </section>
    ),
  });
}

async function subscriptionDetail(c: Context<DashEnv>) {
  const session = c.var.session!;
  const id = c.req.param("id")!;
  const answer = await c.var.api<Subscription>(`/subscriptions/${encodeURIComponent(id)}`);
  if (!answer.ok) return apiErrorPage(c, answer, "read this subscription", BACK);
  const s = answer.body;
  const payments = can(session, "payments:read") ? await c.var.api<Page<SubscriptionPayment>>("/payments", { query: { subscription_id: s.id, limit: 20 } }) : undefined;
  const names = await namesFor(c.var.db, session.auth, { users: [s.user_id], plans: s.pending_update ? [s.plan_id, s.pending_update.plan_id] : [s.plan_id] });
  const open = s.status !== "canceled" ? [s.id] : [];
  const [usage, prorations] = await Promise.all([openPeriodUsage(c.var.db, session.auth, open), pendingProrations(c.var.db, session.auth, open)]);
  const proration = prorations.get(s.id);
  return render(c, 200, {
    title: "Subscription",
    active: BACK,
    children: (
      <>
        <section class="panel" data-subscription-page={s.id}>
          <Headline
            amount={
              <span class="inline-ref">
                {s.quantity} × <PlanRef id={s.plan_id} names={names} />
              </span>
            }
            status={s.status}
          >
            {can(session, "subscriptions:write") && s.status !== "canceled" ? <CancelForms c={c} s={s} /> : null}
          </Headline>
          <StatusNotes s={s} />
          <dl class="facts">
            <Fact term="Subscription">
              <Id id={s.id} />
            </Fact>
            <Fact term="Customer">
              <UserRef id={s.user_id} names={names} />
            </Fact>
            <Fact term="Card">{cardText(s.card)}</Fact>
            <Fact term="Next billing">
              <Time iso={s.next_billing_date} />
            </Fact>
            {usage.has(s.id) ? (
              <Fact term="Usage this period" data-usage={usage.get(s.id)}>
                {usage.get(s.id)} units
              </Fact>
            ) : null}
            {s.pending_update ? (
              <Fact term="Scheduled change" data-pending-update={s.pending_update.plan_id}>
                {s.pending_update.quantity} × <PlanRef id={s.pending_update.plan_id} names={names} /> on <Time iso={s.pending_update.effective_at} />
              </Fact>
            ) : null}
            {proration ? (
              <Fact term={<>Prorations on the {s.cancel_at_period_end ? "final" : "next"} invoice</>} data-pending-prorations={proration.amount}>
                <Money minor={proration.amount} currency={proration.currency} />
              </Fact>
            ) : null}
            {s.discount ? (
              <Fact term="Discount" data-discount={s.discount.coupon}>
                coupon <a href={`/dashboard/coupons#coupon-${encodeURIComponent(s.discount.coupon)}`}>{s.discount.coupon}</a>
                {s.discount.end ? (
                  <>
                    {" "}until <Time iso={s.discount.end} />
                  </>
                ) : null}
              </Fact>
            ) : null}
            <Fact term="Created">
              <Time iso={s.created_at} />
            </Fact>
          </dl>
          {can(session, "invoices:read") ? (
            <p>
              <a href={`/dashboard/invoices?subscription_id=${encodeURIComponent(s.id)}`}>Its invoices</a>
            </p>
          ) : null}
        </section>
        {payments?.ok ? (
          <section class="panel">
            <h2>Payments</h2>
            {payments.body.data.length === 0 ? (
              <Empty title="No payments yet">A payment is recorded each time this subscription is charged.</Empty>
            ) : (
              <PaymentRows payments={payments.body.data} />
            )}
          </section>
        ) : null}
        <BackLink href={BACK}>All subscriptions</BackLink>
      </>
    ),
  });
}

export function registerSubscriptionPages(dash: Hono<DashEnv>) {
  dash.get("/subscriptions", listPage);
  dash.get("/subscriptions/:id", subscriptionDetail);
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
