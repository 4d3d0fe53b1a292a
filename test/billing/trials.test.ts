// Trials (issue 21, item 4): trial_period_days on plans and subscriptions, trial_end, status
// trialing, subscription_trial_will_end three days before (once), the first charge at the trial's
// end with the billing day anchored there, a cancel during the trial (never charged), a decline at
// its end (dunning), a coupon's first invoice at the trial's end, and the errors. A test clock
// drives all of it; the cron sends the notice of a subscription on the wall clock.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribe, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { invoicePdfText } from "../support/pdf";
import { notificationsOf } from "../support/db";
import { runCron } from "../support/queue";

const START = "2026-03-01T09:00:00.000Z";
const DAY = 86_400_000;
const at = (days: number, extraMs = 0) => new Date(Date.parse(START) + days * DAY + extraMs).toISOString();

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

async function clocked(planOverrides: Record<string, unknown> = {}) {
  const acct = await signup("Trial Co");
  const clock = await createClock(acct, START);
  const user = await createUser(acct, { testClock: clock.id });
  const plan = await createPlan(acct, { price: 30, ...planOverrides });
  return { acct, clock, user, plan };
}

describe("a 14-day trial on a test clock", () => {
  it("charges nothing until day 14, sends subscription_trial_will_end once on day 11, then charges the price and anchors the billing day there", async () => {
    const { acct, clock, user, plan } = await clocked({ trial_period_days: 14 });
    expect(plan.trial_period_days).toBe(14);
    const sub = await subscribed(acct, user.id, plan.id);
    expect(sub).toMatchObject({ status: "trialing", trial_start: START, trial_end: at(14), next_billing_date: at(14), current_period_start: START });
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
    expect(await invoicesOf(acct, sub.id)).toEqual([]);

    await advance(acct, clock.id, at(10, 23 * 3600_000));
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:trialing"]);
    await advance(acct, clock.id, at(11, 60_000));
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:trialing", "subscription_trial_will_end:trialing"]);
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
    expect((await getSubscription(acct, sub.id)).status).toBe("trialing");

    await advance(acct, clock.id, at(14, 60_000));
    const active = await getSubscription(acct, sub.id);
    expect(active).toMatchObject({ status: "active", trial_start: START, trial_end: at(14), current_period_start: at(14), next_billing_date: "2026-04-15T09:00:00.000Z" });
    expect((await paymentsOf(acct, sub.id)).map((p) => [p.amount, p.status])).toEqual([[3000, "completed"]]);
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ status: "paid", total: 3000, period_start: at(14), period_end: "2026-04-15T09:00:00.000Z" });
    const text = await invoicePdfText(acct.key, invoice.id);
    expect(text).toContain(invoice.number);
    expect(text).toContain("Total 30.00 USD");

    // A month on: the next period, once; the notice is never sent again.
    await advance(acct, clock.id, "2026-04-15T09:01:00.000Z");
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([3000, 3000]);
    const notes = await notificationsOf(acct.id, sub.id);
    expect(notes.filter((n) => n.startsWith("subscription_trial_will_end"))).toHaveLength(1);
    expect(notes).toEqual([
      "subscription_created:trialing",
      "subscription_trial_will_end:trialing",
      "subscription_renewal:success",
      "subscription_updated:active",
      "subscription_renewal:success",
    ]);
  });

  it("the subscription's trial_period_days or trial_end wins over the plan's; 0 is no trial", async () => {
    const { acct, user, plan } = await clocked({ trial_period_days: 14 });
    const shorter = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 3 });
    expect(shorter).toMatchObject({ status: "trialing", trial_end: at(3) });
    const none = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 0 });
    expect(none).toMatchObject({ status: "active", trial_start: null, trial_end: null });
    expect((await paymentsOf(acct, none.id)).map((p) => p.amount)).toEqual([3000]);
    const exact = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_end: "2026-03-20T00:00:00Z" });
    expect(exact).toMatchObject({ status: "trialing", trial_end: "2026-03-20T00:00:00.000Z", next_billing_date: "2026-03-20T00:00:00.000Z" });
  });

  it("canceled during the trial: never charged, not even when the clock passes its end", async () => {
    const { acct, clock, user, plan } = await clocked();
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 7 });
    const canceled = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    expect(canceled.status, canceled.text).toBe(200);
    await advance(acct, clock.id, at(20));
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
    expect(await invoicesOf(acct, sub.id)).toEqual([]);
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");
  });

  it("cancel at period end during the trial ends it at the trial's end, uncharged", async () => {
    const { acct, clock, user, plan } = await clocked();
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 7 });
    expect((await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    await advance(acct, clock.id, at(8));
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "canceled", canceled_at: at(7) });
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
  });

  it("a decline at the trial's end goes to dunning (past_due, retried), on the same invoice", async () => {
    const { acct, clock, user, plan } = await clocked();
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst, { trial_period_days: 7 });
    await advance(acct, clock.id, at(7, 60_000));
    expect((await getSubscription(acct, sub.id)).status).toBe("past_due");
    await advance(acct, clock.id, at(9));
    const payments = await paymentsOf(acct, sub.id);
    expect(payments.map((p) => p.status)).toEqual(["failed", "failed"]);
    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices).toHaveLength(1);
    expect(invoices[0].status).toBe("open");
  });

  it("a coupon redeemed with a trial discounts the first invoice, at the trial's end", async () => {
    const { acct, clock, user, plan } = await clocked();
    expect((await call("/coupons", { key: acct.key, body: { id: "WELCOME", name: "Welcome", percent_off: 50, duration: "once" } })).status).toBe(201);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 14, coupon: "WELCOME" });
    await advance(acct, clock.id, at(14, 60_000));
    await advance(acct, clock.id, "2026-04-15T09:01:00.000Z");
    expect((await invoicesOf(acct, sub.id)).map((i) => [i.subtotal, i.discount, i.total])).toEqual([
      [3000, 1500, 1500],
      [3000, 0, 3000],
    ]);
  });
});

describe("a trial on the wall clock", () => {
  it("the cron sends subscription_trial_will_end once when it falls due; a second run sends nothing", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 10 });
    await runCron();
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:trialing"]);
    await env.DB.prepare("UPDATE subscriptions SET trial_will_end_at = ? WHERE id = ?").bind(Date.now() - 1000, sub.id).run();
    await Promise.all([runCron(), runCron()]);
    await runCron();
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:trialing", "subscription_trial_will_end:trialing"]);
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
  });

  it("a trial's end falling due before its notice went out: the renewal sends the notice first, then charges", async () => {
    // A trial shorter than the gap between two cron runs: its notice and its end are due at once.
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 1 });
    const ended = new Date(Date.now() - 60_000).toISOString();
    await env.DB.prepare("UPDATE subscriptions SET due_at = ?, trial_will_end_at = ?, trial_end = ?, billing_anchor = ? WHERE id = ?")
      .bind(Date.now() - 60_000, Date.now() - 60_000, ended, ended, sub.id)
      .run();
    const { renewChunk } = await import("../../src/billing/renewals");
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    await runCron(); // the notice is not sent twice
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([3000]);
    expect(await notificationsOf(acct.id, sub.id)).toEqual([
      "subscription_created:trialing",
      "subscription_trial_will_end:trialing",
      "subscription_renewal:success",
      "subscription_updated:active",
    ]);
    expect((await getSubscription(acct, sub.id)).status).toBe("active");
  });
});

describe("trial errors", () => {
  it.each([
    [{ trial_period_days: 731 }, "trial_period_days"],
    [{ trial_period_days: -1 }, "trial_period_days"],
    [{ trial_period_days: 1.5 }, "trial_period_days"],
    [{ trial_end: "2020-01-01T00:00:00Z" }, "trial_end"],
    [{ trial_end: "tomorrow" }, "trial_end"],
    [{ trial_end: "2099-01-01T00:00:00Z" }, "trial_end"],
    [{ trial_end: "2027-01-01T00:00:00Z", trial_period_days: 5 }, "trial_period_days"],
  ])("POST /subscriptions with %j answers 400 on %s, and charges and stores nothing", async (extra, param) => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    const res = await subscribe(acct, user.id, plan.id, CARDS.visa, extra);
    expectError(res, 400, "invalid_request_error");
    expect(res.body.error.param).toBe(param);
    expect(res.body.error.message).toMatch(/\.$/);
    expect((await call("/subscriptions", { key: acct.key })).body.data).toEqual([]);
    expect((await call("/payments", { key: acct.key })).body.data).toEqual([]);
  });

  it("a plan's trial_period_days must be a whole number from 0 to 730", async () => {
    const acct = await signup();
    for (const days of [731, -1, "14"]) {
      const res = await call("/subscription-plans", { key: acct.key, body: { name: "Trial", price: 5, currency: "usd", interval: "month", trial_period_days: days } });
      expectError(res, 400, "invalid_request_error");
      expect(res.body.error.param).toBe("trial_period_days");
    }
    const none = await createPlan(acct, { trial_period_days: 0 });
    expect(none.trial_period_days).toBeNull();
  });
});
