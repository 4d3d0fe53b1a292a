// A plan's PATCH and a subscription's cancel answer an object they do not read before their batch:
// one round trip. The batch returns the row as it commits, and the idempotency record stores that
// row, which a replay serializes as the live answer was (src/middleware/stored-answers.ts).
import { describe, expect, it } from "vitest";
import { call, expectError, roundTrips, signup } from "../support/http";
import { createPlan, createUser, subscribed, warm } from "../support/fixtures";
import { createClock } from "../support/clock";
import { notificationsOf, one } from "../support/db";

const storedAnswer = (accountId: string, key: string) =>
  one<{ response_body: string }>("SELECT response_body FROM idempotency_keys WHERE account_id = ? AND key = ?", accountId, key);

describe("answers stored as the committed row", () => {
  it("PATCH /subscription-plans/{id}: one round trip; the answer is the plan read after; a replay gives the same answer after later changes", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, {
      currency: "kwd",
      price: undefined,
      pricing_model: "graduated",
      tiers: [{ up_to: 3, unit_price: 1.005, flat_price: 0.5 }, { up_to: null, unit_price: 0.25 }],
    });
    await warm(acct.key);
    const patch = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Gold", active: false }, idempotencyKey: "plan-patch" });
    expect(patch.status, patch.text).toBe(200);
    expect(roundTrips(patch)).toBe(1);
    const read = await call(`/subscription-plans/${plan.id}`, { key: acct.key });
    expect(patch.body).toEqual(read.body);
    expect(patch.body).toMatchObject({ name: "Gold", active: false, currency: "kwd", description: plan.description, created_at: plan.created_at });
    expect(patch.body.tiers).toEqual(plan.tiers);
    expect(patch.body.updated_at >= plan.updated_at).toBe(true);

    // The plan changes again; the replay still answers what the first PATCH committed.
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Platinum" } })).status).toBe(200);
    const replay = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Gold", active: false }, idempotencyKey: "plan-patch" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(patch.text);
    expect(JSON.parse((await storedAnswer(acct.id, "plan-patch")).response_body)).toMatchObject({ $row: "plan", row: { id: plan.id, name: "Gold" } });
  });

  it("PATCH of a plan that is not the caller's, or not there: 404 in the error shape, and nothing changed", async () => {
    const a = await signup("A");
    const b = await signup("B");
    const plan = await createPlan(b);
    await warm(a.key);
    const foreign = await call(`/subscription-plans/${plan.id}`, { key: a.key, method: "PATCH", body: { name: "Mine" } });
    expectError(foreign, 404, "not_found_error", "resource_missing");
    expect(roundTrips(foreign)).toBe(1);
    expectError(await call("/subscription-plans/plan_00000000000000000000000000", { key: a.key, method: "PATCH", body: { name: "Mine" }, idempotencyKey: "p404" }), 404, "not_found_error", "resource_missing");
    expect((await call(`/subscription-plans/${plan.id}`, { key: b.key })).body.name).toBe(plan.name);
    // The refused key is free: a corrected retry with it goes through.
    const own = await createPlan(a);
    expect((await call(`/subscription-plans/${own.id}`, { key: a.key, method: "PATCH", body: { name: "Mine" }, idempotencyKey: "p404-fixed" })).status).toBe(200);
  });

  it("DELETE /subscriptions/{id}: one round trip; the answer is the subscription read after; the replay is the same; the record keeps no processor token", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await warm(acct.key);
    const canceled = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-1" });
    expect(canceled.status, canceled.text).toBe(200);
    expect(roundTrips(canceled)).toBe(1);
    expect(canceled.body).toMatchObject({ id: sub.id, status: "canceled", next_billing_date: null, card: sub.card });
    expect(canceled.body.canceled_at).toEqual(expect.any(String));
    expect(canceled.body).toEqual((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body);
    const replay = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-1" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(canceled.text);
    const stored = await storedAnswer(acct.id, "cancel-1");
    const row = await one<{ processor_token: string; card_fingerprint: string }>("SELECT processor_token, card_fingerprint FROM subscriptions WHERE id = ?", sub.id);
    expect(stored.response_body).not.toContain(row.processor_token);
    expect(stored.response_body).not.toContain(row.card_fingerprint);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_canceled:canceled"]);
    // Canceling again: 409, and a missing or foreign subscription: 404.
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "subscription_canceled");
    expectError(await call("/subscriptions/sub_00000000000000000000000000", { key: acct.key, method: "DELETE" }), 404, "not_found_error", "resource_missing");
    const other = await signup("Other");
    expectError(await call(`/subscriptions/${sub.id}`, { key: other.key, method: "DELETE" }), 404, "not_found_error", "resource_missing");
  });

  it("cancel at period end keeps the status, and its notification carries the status the batch saw", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const res = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: "cape" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: sub.id, status: "active", cancel_at_period_end: true, canceled_at: null, next_billing_date: sub.next_billing_date });
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_updated:active"]);
  });

  it("a subscription on a test clock is canceled at the clock's time", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2030-03-15T08:00:00Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.canceled_at).toBe("2030-03-15T08:00:00.000Z");
  });
});
