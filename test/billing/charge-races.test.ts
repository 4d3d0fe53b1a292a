// Charges in flight: a cancel never lands under a charge already at the processor, and every
// charge reaches the processor with a reference that stays fixed when the request is retried.
import { env } from "../support/env";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sandboxProcessor } from "../../src/processor/sandbox";
import { renewChunk } from "../../src/billing/renewals";
import { call, expectError, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { card } from "../support/cards";

afterEach(() => vi.restoreAllMocks());

describe("a charge in flight", () => {
  it("refuses to cancel while the open period's charge is claimed and unsettled, however old, then cancels once the renewal run settled it", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    // A renewal has claimed period 1 (as the cron's claim statement does) and is at the processor.
    const now = new Date().toISOString();
    await env.DB.prepare(
      "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES ('sper_race', ?, ?, 1, ?, 1999, 'usd', 'open', 1, ?, ?)",
    ).bind(acct.id, sub.id, now, now, now).run();
    const refused = expectError(await call(`/subscriptions/${sub.id}`, { method: "DELETE", key: acct.key }), 409, "invalid_request_error", "charge_in_progress");
    expect(refused.message).toMatch(/in progress/);
    expect((await getSubscription(acct, sub.id)).status).toBe("active");

    // The claimer died: its charge's outcome is unknown, so a stale claim still refuses the cancel,
    // until the renewal run takes it over (same reference) and settles it.
    const stale = new Date(Date.now() - 11 * 60 * 1000).toISOString();
    await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE id = 'sper_race'").bind(stale).run();
    expectError(await call(`/subscriptions/${sub.id}`, { method: "DELETE", key: acct.key }), 409, "invalid_request_error", "charge_in_progress");
    await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(Date.now() - 1000, sub.id).run();
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    const canceled = await call(`/subscriptions/${sub.id}`, { method: "DELETE", key: acct.key });
    expect(canceled.status, canceled.text).toBe(200);
    expect(canceled.body.status).toBe("canceled");
  });
});

describe("a coupon change under a charge in flight", () => {
  it("answers 409 charge_in_progress, then applies once the charge settled; the settled charge kept its own discount", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const coupon = await call("/coupons", { key: acct.key, body: { name: "Once", percent_off: 50, duration: "once" } });
    expect(coupon.status, coupon.text).toBe(201);
    const now = new Date().toISOString();
    await env.DB.prepare(
      "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES ('sper_coupon_race', ?, ?, 1, ?, 1999, 'usd', 'open', 1, ?, ?)",
    ).bind(acct.id, sub.id, now, now, now).run();
    for (const value of [coupon.body.id, null]) {
      const refused = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: { coupon: value } });
      expectError(refused, 409, "invalid_request_error", "charge_in_progress");
    }
    // Nothing was redeemed by the refused request.
    expect((await call(`/coupons/${coupon.body.id}`, { key: acct.key })).body.times_redeemed).toBe(0);
    expect((await getSubscription(acct, sub.id)).discount).toBeNull();

    await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE id = 'sper_coupon_race'").bind(new Date(Date.now() - 11 * 60 * 1000).toISOString()).run();
    await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(Date.now() - 1000, sub.id).run();
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    const applied = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: { coupon: coupon.body.id } });
    expect(applied.status, applied.text).toBe(200);
    expect(applied.body.discount).toMatchObject({ coupon: coupon.body.id });
    // The period charged under the claim is full price; the once coupon discounts the next invoice, once.
    const amounts = async () => ((await call(`/payments?subscription_id=${sub.id}&limit=10`, { key: acct.key })).body.data as { amount: number }[]).map((p) => p.amount).reverse();
    expect(await amounts()).toEqual([1999, 1999]);
    await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(Date.now() - 1000, sub.id).run();
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(Date.now() - 1000, sub.id).run();
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    expect(await amounts()).toEqual([1999, 1999, 999, 1999]); // 19.99 less 50% (9.995, rounded half away from zero: 10.00 off)
  });
});

describe("processor references", () => {
  it("a first charge sent with an Idempotency-Key reaches the processor with a reference derived from it", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const spy = vi.spyOn(sandboxProcessor, "chargeCard");
    const res = await call("/subscriptions", { key: acct.key, idempotencyKey: "first-charge-1", body: { user_id: user.id, plan_id: plan.id, ...card() } });
    expect(res.status, res.text).toBe(201);
    expect(spy).toHaveBeenCalledTimes(1);
    // The key and the time this use of it began: after the key's 24 hours, the same key is a new charge.
    const since = (await env.DB.prepare("SELECT created_at FROM idempotency_keys WHERE account_id = ? AND key = 'first-charge-1'").bind(acct.id).first<{ created_at: string }>())!.created_at;
    expect(spy.mock.calls[0][0].reference).toBe(`${acct.id}:idempotency:first-charge-1:${since}`);
  });
});
