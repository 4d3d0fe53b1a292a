import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { enqueueDueRenewals, fanOutRenewals, startRenewalFanout } from "../../src/billing/renewals";
import { call, expectError, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { card, CARDS } from "../support/cards";
import { createClock, makeDue } from "../support/clock";
import { notificationsOf, paymentsOf, periodsOf } from "../support/db";
import { runCron, runJobs } from "../support/queue";
import { waitUntil } from "../support/wait";
import { readBillableRows, renewRows } from "../support/renewal-rows";

async function activeSubscription(pan: string = CARDS.visa) {
  const acct = await signup();
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id, pan);
  return { acct, user, plan, sub };
}

describe("the renewal cron", () => {
  it("two overlapping cron runs charge a due subscription once", async () => {
    const { acct, sub } = await activeSubscription();
    await makeDue(sub.id);
    // Both runs see the subscription due and enqueue it; the queue consumer renews it.
    await Promise.all([runCron(), runCron()]);
    const renewed = await waitUntil(async () => {
      const current = await getSubscription(acct, sub.id);
      return current.current_period_start === sub.next_billing_date ? current : null;
    });
    // Run the chunk once more, as a late duplicate message would.
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(renewed.status).toBe("active");
    expect(renewed.next_billing_date > sub.next_billing_date).toBe(true);
    expect((await paymentsOf(acct.id)).map((p) => p.status)).toEqual(["completed", "completed"]);
    expect(await periodsOf(sub.id)).toMatchObject([
      { period_index: 0, status: "paid", attempts: 1 },
      { period_index: 1, status: "paid", attempts: 1, period_start: sub.next_billing_date },
    ]);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_renewal:success"]);
  });

  it("enqueues due subscriptions in bounded chunks, skipping those not due and those on a test clock", async () => {
    const { acct, user, plan, sub: first } = await activeSubscription();
    const others = [await subscribed(acct, user.id, plan.id), await subscribed(acct, user.id, plan.id), await subscribed(acct, user.id, plan.id)];
    const notDue = await subscribed(acct, user.id, plan.id);
    const clock = await createClock(acct, "2025-01-31T12:00:00.000Z");
    const clockUser = await createUser(acct, { testClock: clock.id });
    const onClock = await subscribed(acct, clockUser.id, plan.id); // due 2025-02-28 by the wall clock, but follows its clock
    const now = Date.now();
    for (const [i, s] of [first, ...others].entries()) await makeDue(s.id, now - 10_000 + i);

    const sent = await enqueueDueRenewals(env, now, { chunkSize: 2, maxMessages: 1 });
    expect(sent).toMatchObject({ subscriptions: 2, messages: 1, next: { id: expect.any(String) } });
    // The next step carries on from where the first stopped; then nothing is left.
    const rest = await enqueueDueRenewals(env, now, { chunkSize: 2, maxMessages: 10 }, sent.next);
    expect(rest).toEqual({ subscriptions: 2, messages: 1, next: null });

    await waitUntil(async () => (await paymentsOf(acct.id)).length >= 9);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const bySubscription = new Map<string, number>();
    for (const p of await paymentsOf(acct.id)) bySubscription.set(p.subscription_id!, (bySubscription.get(p.subscription_id!) ?? 0) + 1);
    for (const s of [first, ...others]) expect(bySubscription.get(s.id)).toBe(2);
    expect(bySubscription.get(notDue.id)).toBe(1);
    expect(bySubscription.get(onClock.id)).toBe(1);
    expect((await getSubscription(acct, onClock.id)).next_billing_date).toBe("2025-02-28T12:00:00.000Z");
  });
});

describe("the renewal fan-out has no per-run cap", () => {
  it("a step hands what it did not reach to a continuation on the queue, until every due subscription renewed; one walk at a time", async () => {
    const { acct, user, plan, sub: first } = await activeSubscription();
    const subs = [first, await subscribed(acct, user.id, plan.id), await subscribed(acct, user.id, plan.id), await subscribed(acct, user.id, plan.id)];
    const now = Date.now();
    for (const [i, s] of subs.entries()) await makeDue(s.id, now - 10_000 + i);
    // The cron's walk is running (its lease is live): a second cron run starts none.
    await env.DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES ('renewal_fanout', ?, ?, ?) ON CONFLICT (key) DO UPDATE SET lease_until = excluded.lease_until")
      .bind(new Date(now).toISOString(), now + 60_000, now + 86_400_000)
      .run();
    expect(await startRenewalFanout(env, now)).toBe(false);
    // A step of one message of one subscription: the rest goes to its continuation.
    const step = await fanOutRenewals(env, { kind: "billing.enqueue_due", now, after: null }, { chunkSize: 1, maxMessages: 1 });
    expect(step).toMatchObject({ subscriptions: 1, messages: 1, next: { id: subs[0].id } });
    await waitUntil(async () => (await paymentsOf(acct.id)).length >= 2 * subs.length);
    for (const s of subs) expect((await getSubscription(acct, s.id)).next_billing_date > s.next_billing_date).toBe(true);
    // The walk ended and gave its lease back: the next cron run may start one.
    const lease = await env.DB.prepare("SELECT lease_until FROM job_runs WHERE key = 'renewal_fanout'").first<{ lease_until: number }>();
    expect(lease!.lease_until).toBeLessThanOrEqual(Date.now());
    expect(await startRenewalFanout(env, Date.now())).toBe(true);
  });
});

describe("the renewal job", () => {
  it("renews a chunk; the same message run concurrently or redelivered charges each period once", async () => {
    const { acct, user, plan, sub } = await activeSubscription();
    const second = await subscribed(acct, user.id, plan.id);
    const notDue = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    await makeDue(second.id);
    const message = { kind: "billing.renew" as const, subscriptionIds: [sub.id, second.id, notDue.id] };
    const results = await Promise.all([runJobs(message), runJobs(message)]);
    for (const result of results) expect(result.explicitAcks).toHaveLength(1);
    const redelivered = await runJobs(message);
    expect(redelivered.explicitAcks).toHaveLength(1);
    expect(redelivered.retryMessages).toHaveLength(0);

    const payments = await paymentsOf(acct.id);
    expect(payments.filter((p) => p.subscription_id === sub.id)).toHaveLength(2);
    expect(payments.filter((p) => p.subscription_id === second.id)).toHaveLength(2);
    expect(payments.filter((p) => p.subscription_id === notDue.id)).toHaveLength(1);
    expect((await getSubscription(acct, sub.id)).current_period_start).toBe(sub.next_billing_date);
    expect((await getSubscription(acct, notDue.id)).current_period_start).toBe(notDue.start_date);
  });

  it("leaves a period claimed by a live worker alone, and takes over a claim whose worker died", async () => {
    const { acct, sub } = await activeSubscription();
    await makeDue(sub.id);
    const claim = (updatedAt: string) =>
      env.DB.prepare(
        "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES (?, ?, ?, 1, ?, 1999, 'usd', 'open', 1, ?, ?) ON CONFLICT (subscription_id, period_index) DO UPDATE SET updated_at = excluded.updated_at",
      )
        .bind(`sper_test${sub.id.slice(4)}`, acct.id, sub.id, sub.next_billing_date, updatedAt, updatedAt)
        .run();
    await claim(new Date().toISOString());
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect(await paymentsOf(acct.id)).toHaveLength(1);
    expect((await getSubscription(acct, sub.id)).current_period_start).toBe(sub.start_date);

    await claim(new Date(Date.now() - 11 * 60 * 1000).toISOString());
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect((await paymentsOf(acct.id)).map((p) => p.status)).toEqual(["completed", "completed"]);
    expect((await getSubscription(acct, sub.id)).current_period_start).toBe(sub.next_billing_date);
  });

  it("one settlement that cannot commit does not hold back the rest of its chunk; its message is retried", async () => {
    const { acct, user, plan, sub } = await activeSubscription();
    const broken = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    await makeDue(broken.id);
    // A dead worker's stale claim on the broken one, for an amount no payment may have (a negative
    // one: 0 is a period its discount made free, settled without a payment).
    const stale = new Date(Date.now() - 11 * 60 * 1000).toISOString();
    await env.DB.prepare(
      "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES (?, ?, ?, 1, ?, -1, 'usd', 'open', 1, ?, ?)",
    )
      .bind(`sper_bad${broken.id.slice(4)}`, acct.id, broken.id, broken.next_billing_date, stale, stale)
      .run();
    const result = await runJobs({ kind: "billing.renew", subscriptionIds: [broken.id, sub.id] });
    expect(result.retryMessages).toHaveLength(1);
    expect((await getSubscription(acct, sub.id)).current_period_start).toBe(sub.next_billing_date);
    expect((await getSubscription(acct, broken.id)).current_period_start).toBe(broken.start_date);
    expect((await paymentsOf(acct.id)).filter((p) => p.subscription_id === sub.id)).toHaveLength(2);
  });

  it("a declined renewal makes the subscription past_due with payment.failed and subscription_renewal failed", async () => {
    const { acct, sub } = await activeSubscription(CARDS.declineAfterFirst);
    await makeDue(sub.id);
    const before = Date.now();
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    const pastDue = await getSubscription(acct, sub.id);
    expect(pastDue).toMatchObject({ status: "past_due", next_billing_date: sub.next_billing_date, current_period_start: sub.start_date });
    const failed = (await paymentsOf(acct.id))[1];
    expect(failed).toMatchObject({ status: "failed", failure_code: "card_declined", subscription_id: sub.id });
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_renewal:failed"]);
    // The first retry is one day later; running again now changes nothing.
    const row = await env.DB.prepare("SELECT due_at, dunning_attempts FROM subscriptions WHERE id = ?").bind(sub.id).first<{ due_at: number; dunning_attempts: number }>();
    expect(row!.dunning_attempts).toBe(1);
    expect(row!.due_at - before).toBeGreaterThanOrEqual(24 * 3600 * 1000 - 5000);
    expect(row!.due_at - before).toBeLessThanOrEqual(24 * 3600 * 1000 + 5000);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect(await paymentsOf(acct.id)).toHaveLength(2);
  });
});

describe("a change committed between a renewal's read and its claim", () => {
  it("a quantity, plan or coupon change makes the claim priced from the old row lose; the next run charges the new price", async () => {
    const { acct, plan, sub } = await activeSubscription();
    const dearer = await createPlan(acct, { price: 50 });
    const coupon = (await call("/coupons", { key: acct.key, body: { name: "Tenth", percent_off: 10, duration: "forever" } })).body;
    await makeDue(sub.id);
    for (const change of [{ quantity: 2, proration_behavior: "none" }, { plan_id: dearer.id, proration_behavior: "none" }, { coupon: coupon.id }]) {
      const stale = await readBillableRows(sub.id);
      const res = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: change });
      expect(res.status, res.text).toBe(200);
      expect(await renewRows(stale, Date.now()), JSON.stringify(change)).toEqual(["skipped"]);
    }
    expect(plan.id).not.toBe(dearer.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    // 2 × 50.00, less 10%.
    expect((await paymentsOf(acct.id)).map((p) => p.amount)).toEqual([1999, 9000]);
  });
});

describe("past_due and new payment details", () => {
  it("a new card is charged at once for the unpaid period and makes the subscription active", async () => {
    const { acct, sub } = await activeSubscription(CARDS.declineAfterFirst);
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect((await getSubscription(acct, sub.id)).status).toBe("past_due");

    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.mastercard) });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "active", card: { last4: "4444" }, current_period_start: sub.next_billing_date });
    expect(res.body.next_billing_date > sub.next_billing_date).toBe(true);
    expect(await getSubscription(acct, sub.id)).toEqual(res.body);
    expect((await paymentsOf(acct.id)).map((p) => `${p.status}:${p.amount}`)).toEqual(["completed:1999", "failed:1999", "completed:1999"]);
    expect(await periodsOf(sub.id)).toMatchObject([{ status: "paid" }, { period_index: 1, status: "paid", attempts: 2 }]);
    expect(await notificationsOf(acct.id, sub.id)).toEqual([
      "subscription_created:active",
      "subscription_renewal:failed",
      "subscription_renewal:success",
      "subscription_updated:active",
    ]);
    // The scheduled dunning retry no longer applies.
    await makeDue(sub.id, Date.parse(sub.next_billing_date) + 1000);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect(await paymentsOf(acct.id)).toHaveLength(3);
  });

  it("a declined new card answers 402 and the subscription stays past_due", async () => {
    const { acct, sub } = await activeSubscription(CARDS.declineAfterFirst);
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.insufficientFunds) });
    expect(expectError(res, 402, "card_error", "card_declined")).toBeTruthy();
    expect(res.body.error.decline_code).toBe("insufficient_funds");
    const after = await getSubscription(acct, sub.id);
    expect(after).toMatchObject({ status: "past_due", card: { last4: "0341" } });
    expect((await paymentsOf(acct.id)).map((p) => p.failure_code)).toEqual([null, "card_declined", "insufficient_funds"]);
  });
});
