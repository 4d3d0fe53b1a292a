import { describe, expect, it } from "vitest";
import { TEST_CLOCK_SYNC_STEPS } from "../../src/billing/test-clocks";
import { call, expectError, fetchWith, signup } from "../support/http";
import { createPlan, createUser, getSubscription, liveKey, subscribed } from "../support/fixtures";
import { card, CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { notificationsOf, paymentsOf, periodsOf } from "../support/db";
import { droppingQueue, runCron, runJobs } from "../support/queue";
import { waitUntil } from "../support/wait";

describe("test clocks", () => {
  it("creates, reads and lists clocks; advancing moves the time forward only", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00Z");
    expect(clock).toMatchObject({ id: expect.stringMatching(/^clock_/), object: "test_clock", name: "clock", frozen_time: "2028-01-31T12:00:00.000Z", status: "ready" });
    expect((await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body).toEqual(clock);
    const second = await createClock(acct, "2030-06-01T00:00:00+02:00");
    expect(second.frozen_time).toBe("2030-05-31T22:00:00.000Z");
    expect((await call("/api/test-clocks", { key: acct.key })).body.data.map((c: { id: string }) => c.id)).toEqual([second.id, clock.id]);

    const moved = await advance(acct, clock.id, "2028-02-01T00:00:00.000Z");
    expect(moved).toMatchObject({ id: clock.id, frozen_time: "2028-02-01T00:00:00.000Z", status: "ready" });
    for (const frozen_time of ["2028-02-01T00:00:00.000Z", "2028-01-01T00:00:00.000Z"]) {
      const back = await call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time } });
      expect(expectError(back, 400, "invalid_request_error", "frozen_time_not_forward").param).toBe("frozen_time");
    }
    expectError(await call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time: "tomorrow" } }), 400, "invalid_request_error", "parameter_invalid");
    expectError(await call("/api/test-clocks", { key: acct.key, body: {} }), 400, "invalid_request_error", "parameter_missing");
  });

  it("answers 404 for another account's clock, and 403 without the test_clocks scope", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const clock = await createClock(acct, "2028-01-31T12:00:00Z");
    expectError(await call(`/api/test-clocks/${clock.id}`, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await call(`/api/test-clocks/${clock.id}/advance`, { key: other.key, body: { frozen_time: "2029-01-01T00:00:00Z" } }), 404, "not_found_error");
    expect((await call("/api/test-clocks", { key: other.key })).body.data).toEqual([]);
    const readOnly = (await call("/api/keys", { key: acct.key, body: { scopes: ["test_clocks:read"] } })).body.secret as string;
    expect((await call(`/api/test-clocks/${clock.id}`, { key: readOnly })).status).toBe(200);
    expectError(await call(`/api/test-clocks/${clock.id}/advance`, { key: readOnly, body: { frozen_time: "2029-01-01T00:00:00Z" } }), 403, "permission_error", "missing_scope");
  });

  it("refuses a live-mode key on every test clock route, and when attaching a user to a clock", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00Z");
    const live = await liveKey(acct.id);
    const routes: [string, string, unknown][] = [
      ["POST", "/api/test-clocks", { frozen_time: "2028-01-31T12:00:00Z" }],
      ["GET", "/api/test-clocks", undefined],
      ["GET", `/api/test-clocks/${clock.id}`, undefined],
      ["POST", `/api/test-clocks/${clock.id}/advance`, { frozen_time: "2029-01-31T12:00:00Z" }],
    ];
    for (const [method, path, body] of routes) {
      expectError(await call(path, { key: live, method, body }), 403, "permission_error", "livemode_not_allowed");
    }
    const user = await call("/api/users", { key: live, body: { name: "Ada", email: "ada@example.com", test_clock: clock.id } });
    expect(expectError(user, 404, "not_found_error").param).toBe("test_clock");
    expect((await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body.frozen_time).toBe("2028-01-31T12:00:00.000Z");
  });

  it("attaches a user to a clock of the account only", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const clock = await createClock(acct, "2028-01-31T12:00:00Z");
    const user = await createUser(acct, { testClock: clock.id });
    expect(user.test_clock).toBe(clock.id);
    expect((await call(`/api/users/${user.id}`, { key: acct.key })).body.test_clock).toBe(clock.id);
    for (const test_clock of [clock.id, "clock_unknown"]) {
      const res = await call("/api/users", { key: other.key, body: { name: "Eve", email: "eve@example.com", test_clock } });
      expect(expectError(res, 404, "not_found_error", "resource_missing").param).toBe("test_clock");
    }
    expect((await call("/api/users", { key: other.key })).body.data).toEqual([]);
  });
});

describe("renewals on a test clock", () => {
  it("bills 13 monthly renewals from Jan 31, anchored: Feb 29, Mar 31, Apr 30 … Jan 31, Feb 28", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { price: 9.99 });
    const sub = await subscribed(acct, user.id, plan.id);
    expect(sub).toMatchObject({ start_date: "2028-01-31T12:00:00.000Z", next_billing_date: "2028-02-29T12:00:00.000Z" });

    // Watch the first two renewals one at a time; nothing happens before the billing time.
    expect((await advance(acct, clock.id, "2028-02-29T11:59:59.999Z")).status).toBe("ready");
    expect(await paymentsOf(acct.id)).toHaveLength(1);
    await advance(acct, clock.id, "2028-02-29T12:00:00.000Z");
    expect(await getSubscription(acct, sub.id)).toMatchObject({ current_period_start: "2028-02-29T12:00:00.000Z", next_billing_date: "2028-03-31T12:00:00.000Z" });
    await advance(acct, clock.id, "2028-04-15T00:00:00.000Z");
    expect((await getSubscription(acct, sub.id)).next_billing_date).toBe("2028-04-30T12:00:00.000Z");

    // Then the rest of the year, in advances of at most two months each.
    for (const step of ["2028-06-14", "2028-08-14", "2028-10-14", "2028-12-14", "2029-02-14"]) {
      expect((await advance(acct, clock.id, `${step}T00:00:00.000Z`)).status).toBe("ready");
    }
    expect((await advance(acct, clock.id, "2029-03-01T00:00:00.000Z")).status).toBe("ready");
    const expected = [
      "2028-01-31", "2028-02-29", "2028-03-31", "2028-04-30", "2028-05-31", "2028-06-30", "2028-07-31",
      "2028-08-31", "2028-09-30", "2028-10-31", "2028-11-30", "2028-12-31", "2029-01-31", "2029-02-28",
    ].map((day) => `${day}T12:00:00.000Z`);
    const periods = await periodsOf(sub.id);
    expect(periods.map((p) => p.period_start)).toEqual(expected);
    expect(periods.every((p) => p.status === "paid" && p.attempts === 1 && p.amount === 999)).toBe(true);
    const payments = await paymentsOf(acct.id);
    expect(payments).toHaveLength(14);
    expect(payments.every((p) => p.status === "completed" && p.amount === 999 && p.subscription_id === sub.id)).toBe(true);
    expect(new Set(periods.map((p) => p.payment_id)).size).toBe(14);
    expect(await getSubscription(acct, sub.id)).toMatchObject({
      status: "active",
      current_period_start: "2029-02-28T12:00:00.000Z",
      next_billing_date: "2029-03-31T12:00:00.000Z",
    });
    const notifications = await notificationsOf(acct.id, sub.id);
    expect(notifications.filter((n) => n === "subscription_renewal:success")).toHaveLength(13);
  });

  it("walks the whole dunning path with 4000000000000341: past_due, retries at +1, +3 and +5 days, then canceled", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    expect(sub.status).toBe("active");

    await advance(acct, clock.id, "2028-02-29T12:00:00.000Z");
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "past_due", next_billing_date: "2028-02-29T12:00:00.000Z" });
    await advance(acct, clock.id, "2028-03-01T11:59:00.000Z");
    expect(await paymentsOf(acct.id)).toHaveLength(2);
    await advance(acct, clock.id, "2028-03-01T12:00:00.000Z");
    expect(await paymentsOf(acct.id)).toHaveLength(3);
    await advance(acct, clock.id, "2028-03-04T00:00:00.000Z");
    expect(await paymentsOf(acct.id)).toHaveLength(4);
    expect((await getSubscription(acct, sub.id)).status).toBe("past_due");
    await advance(acct, clock.id, "2028-04-30T00:00:00.000Z");

    const canceled = await getSubscription(acct, sub.id);
    expect(canceled).toMatchObject({ status: "canceled", canceled_at: "2028-03-05T12:00:00.000Z", next_billing_date: null });
    const payments = await paymentsOf(acct.id);
    expect(payments.map((p) => `${p.status}:${p.failure_code}`)).toEqual([
      "completed:null",
      "failed:card_declined",
      "failed:card_declined",
      "failed:card_declined",
      "failed:card_declined",
    ]);
    expect(await periodsOf(sub.id)).toMatchObject([{ status: "paid" }, { period_index: 1, status: "uncollectible", attempts: 4 }]);
    expect(await notificationsOf(acct.id, sub.id)).toEqual([
      "subscription_created:active",
      "subscription_renewal:failed",
      "subscription_renewal:failed",
      "subscription_renewal:failed",
      "subscription_renewal:failed",
      "subscription_canceled:canceled",
    ]);
  });

  it("a past_due subscription on a clock recovers with a new card and renews on the anchor again", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2028-03-02T00:00:00.000Z");
    expect((await getSubscription(acct, sub.id)).status).toBe("past_due");
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.visa) });
    expect(res.body).toMatchObject({ status: "active", current_period_start: "2028-02-29T12:00:00.000Z", next_billing_date: "2028-03-31T12:00:00.000Z" });
    await advance(acct, clock.id, "2028-04-01T00:00:00.000Z");
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "active", next_billing_date: "2028-04-30T12:00:00.000Z" });
    expect((await paymentsOf(acct.id)).map((p) => p.status)).toEqual(["completed", "failed", "failed", "completed", "completed"]);
  });

  it("cancels now at the clock's time", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await advance(acct, clock.id, "2028-02-10T08:00:00.000Z");
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    expect(res.body).toMatchObject({ status: "canceled", canceled_at: "2028-02-10T08:00:00.000Z" });
    await advance(acct, clock.id, "2028-06-01T00:00:00.000Z");
    expect(await paymentsOf(acct.id)).toHaveLength(1);
  });

  it("an advance with more renewals than one request runs finishes in the background: the clock is advancing until every renewal has run", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const count = TEST_CLOCK_SYNC_STEPS + 6;
    const subs = [];
    for (let i = 0; i < count; i++) subs.push(await subscribed(acct, user.id, plan.id));
    const moved = await advance(acct, clock.id, "2028-03-01T00:00:00.000Z");
    expect(moved.status).toBe("advancing");
    expect(await paymentsOf(acct.id)).toHaveLength(count + TEST_CLOCK_SYNC_STEPS);
    // The queue consumer carries on (run here by hand as well: both are idempotent).
    await runJobs({ kind: "billing.advance_test_clock", testClockId: clock.id });
    await waitUntil(async () => (await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body.status === "ready");
    expect(await paymentsOf(acct.id)).toHaveLength(2 * count);
    for (const sub of subs) expect((await getSubscription(acct, sub.id)).next_billing_date).toBe("2028-03-31T12:00:00.000Z");
  });

  it("one advance moves at most two intervals of the shortest subscription on the clock (400 frozen_time_too_far)", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    // No subscription on the clock: nothing to run, no bound.
    expect((await advance(acct, clock.id, "2029-01-31T12:00:00.000Z")).frozen_time).toBe("2029-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    await subscribed(acct, user.id, (await createPlan(acct, { interval: "year" })).id);
    // A yearly subscription only: two years.
    const tooFarForYear = await call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time: "2031-02-01T00:00:00.000Z" } });
    const error = expectError(tooFarForYear, 400, "invalid_request_error", "frozen_time_too_far");
    expect(error.param).toBe("frozen_time");
    expect(error.message).toContain("2031-01-31T12:00:00.000Z");
    // A monthly one joins: two months from now is the limit.
    await subscribed(acct, user.id, (await createPlan(acct)).id);
    expectError(
      await call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time: "2029-04-01T00:00:00.000Z" } }),
      400,
      "invalid_request_error",
      "frozen_time_too_far",
    );
    // Refused advances moved nothing.
    expect((await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body.frozen_time).toBe("2029-01-31T12:00:00.000Z");
    expect((await advance(acct, clock.id, "2029-03-31T12:00:00.000Z")).frozen_time).toBe("2029-03-31T12:00:00.000Z");
  });

  it("the cron resumes a clock whose background continuation was lost", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2028-01-31T12:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct);
    const count = TEST_CLOCK_SYNC_STEPS + 3;
    for (let i = 0; i < count; i++) await subscribed(acct, user.id, plan.id);
    // The advance's continuation message is lost (the queue drops it).
    const res = await fetchWith({ JOB_QUEUE: droppingQueue() }, `/api/test-clocks/${clock.id}/advance`, {
      key: acct.key,
      json: { frozen_time: "2028-02-29T13:00:00.000Z" },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe("advancing");
    expect(await paymentsOf(acct.id)).toHaveLength(count + TEST_CLOCK_SYNC_STEPS);
    // Nothing else would ever finish it; the cron does.
    await runCron();
    await waitUntil(async () => (await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body.status === "ready", 15_000);
    expect(await paymentsOf(acct.id)).toHaveLength(2 * count);
  }, 30_000);
});
