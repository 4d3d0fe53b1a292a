// The billing depth of issue 21 attacked where its money moves: a trial ending during two test-clock
// advances at once, a cancel racing a trial's first charge, a coupon redeemed while the period it
// would discount is being renewed, and a coupon raced with itself over PUT. Each attack states what
// must hold whatever the interleaving: one charge per period, one invoice per period, a discount
// used exactly as its duration says, never more redemptions than max_redemptions.
import { describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { createClock } from "../support/clock";
import { notificationsOf } from "../support/db";

const START = "2026-08-01T00:00:00.000Z";

async function listOf(acct: Account, path: string) {
  const res = await call(`${path}${path.includes("?") ? "&" : "?"}limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

const advanceRaw = (acct: Account, clockId: string, frozenTime: string) =>
  call(`/api/test-clocks/${clockId}/advance`, { key: acct.key, body: { frozen_time: frozenTime } });

/** Waits until the clock has run everything due (an advance that lost a race leaves the rest to the winner). */
async function settled(acct: Account, clockId: string) {
  for (let i = 0; i < 50; i++) {
    const clock = await call(`/api/test-clocks/${clockId}`, { key: acct.key });
    if (clock.body.status === "ready") return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`test clock ${clockId} never became ready`);
}

describe("issue 21's money paths under races", () => {
  it("two advances of one clock across a trial's end: one notice, one charge, one invoice", async () => {
    const acct = await signup();
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { price: 30 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 7 });
    const results = await Promise.all([advanceRaw(acct, clock.id, "2026-08-08T00:01:00.000Z"), advanceRaw(acct, clock.id, "2026-08-08T00:01:00.000Z")]);
    for (const res of results) expect([200, 409], res.text).toContain(res.status);
    await settled(acct, clock.id);
    expect((await listOf(acct, `/payments?subscription_id=${sub.id}`)).map((p) => p.amount)).toEqual([3000]);
    expect((await listOf(acct, `/invoices?subscription_id=${sub.id}`)).map((i) => i.status)).toEqual(["paid"]);
    expect((await notificationsOf(acct.id, sub.id)).filter((n) => n.startsWith("subscription_trial_will_end"))).toHaveLength(1);
    expect((await getSubscription(acct, sub.id)).status).toBe("active");
  });

  it("a cancel racing the trial's first charge: never charged after it is canceled, at most one charge, the state agrees with the money", async () => {
    for (let round = 0; round < 3; round++) {
      const acct = await signup();
      const clock = await createClock(acct, START);
      const user = await createUser(acct, { testClock: clock.id });
      const plan = await createPlan(acct, { price: 30 });
      const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 7 });
      const [, cancel] = await Promise.all([
        advanceRaw(acct, clock.id, "2026-08-08T00:01:00.000Z"),
        call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }),
      ]);
      expect([200, 409], cancel.text).toContain(cancel.status);
      await settled(acct, clock.id);
      const payments = await listOf(acct, `/payments?subscription_id=${sub.id}`);
      const invoices = await listOf(acct, `/invoices?subscription_id=${sub.id}`);
      const after = await getSubscription(acct, sub.id);
      expect(payments.length).toBeLessThanOrEqual(1);
      if (payments.length === 1) {
        // Charged first: the charge is recorded, its invoice paid, whatever the cancel did after.
        expect(invoices.map((i) => [i.status, i.payment_id])).toEqual([["paid", payments[0].id]]);
      } else {
        expect(after.status).toBe("canceled");
        expect(invoices).toEqual([]);
      }
      if (cancel.status === 200) expect(after.status).toBe("canceled");
    }
  });

  it("a once coupon redeemed while the period it could discount is renewed: exactly one invoice is discounted, one charge per period", async () => {
    for (let round = 0; round < 3; round++) {
      const acct = await signup();
      const clock = await createClock(acct, START);
      const user = await createUser(acct, { testClock: clock.id });
      const plan = await createPlan(acct, { price: 30 });
      expect((await call("/coupons", { key: acct.key, body: { id: "HALF", name: "Half", percent_off: 50, duration: "once" } })).status).toBe(201);
      const sub = await subscribed(acct, user.id, plan.id);
      const [renewal, put] = await Promise.all([
        advanceRaw(acct, clock.id, "2026-09-01T00:01:00.000Z"),
        call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { coupon: "HALF" } }),
      ]);
      expect(renewal.status, renewal.text).toBe(200);
      expect(put.status, put.text).toBe(200);
      await settled(acct, clock.id);
      expect((await advanceRaw(acct, clock.id, "2026-10-01T00:01:00.000Z")).status).toBe(200);
      await settled(acct, clock.id);
      const invoices = await listOf(acct, `/invoices?subscription_id=${sub.id}`);
      expect(invoices.map((i) => i.subtotal)).toEqual([3000, 3000, 3000]);
      // The first invoice came before the coupon; exactly one of the next two is discounted.
      expect(invoices[0].discount).toBe(0);
      expect(invoices.slice(1).map((i) => i.discount).sort()).toEqual([0, 1500]);
      expect((await listOf(acct, `/payments?subscription_id=${sub.id}`)).map((p) => p.amount).sort()).toEqual([1500, 3000, 3000]);
    }
  });

  it("a coupon with one redemption left, redeemed by PUT on two subscriptions at once: exactly one gets it", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    expect((await call("/coupons", { key: acct.key, body: { id: "ONE", name: "One", percent_off: 10, duration: "forever", max_redemptions: 1 } })).status).toBe(201);
    const subs = await Promise.all([subscribed(acct, user.id, plan.id), subscribed(acct, user.id, plan.id), subscribed(acct, user.id, plan.id)]);
    const results = await Promise.all(subs.map((s) => call(`/subscriptions/${s.id}`, { key: acct.key, method: "PUT", body: { coupon: "ONE" } })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 200)) expect(r.body.error.code).toBe("coupon_max_redemptions");
    const discounted = (await Promise.all(subs.map((s) => getSubscription(acct, s.id)))).filter((s) => s.discount !== null);
    expect(discounted).toHaveLength(1);
    expect((await call("/coupons/ONE", { key: acct.key })).body.times_redeemed).toBe(1);
  });
});

// Issue 33: the final invoice of a subscription set to cancel at its period's end, attacked with
// two workers at once and with an un-cancel racing its claim.
describe("issue 33's final invoices under races", () => {
  async function owing(acct: Account, clockId: string) {
    const user = await createUser(acct, { testClock: clockId });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 300 });
    const sub = await subscribed(acct, user.id, basic.id, CARDS.visa);
    return { user, basic, pro, sub };
  }

  it("two advances of one clock across the period's end: one final invoice and one charge each for prorations and for metered usage", async () => {
    const acct = await signup();
    const clock = await createClock(acct, START);
    const { user, pro, sub } = await owing(acct, clock.id);
    const calls = await createPlan(acct, { name: "Calls", price: 1, usage_type: "metered" });
    const metered = await subscribed(acct, user.id, calls.id, CARDS.visa);
    // August has 31 days: the 16th at noon is exactly halfway.
    expect((await advanceRaw(acct, clock.id, "2026-08-16T12:00:00.000Z")).status).toBe(200);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: pro.id } })).status).toBe(200); // −15.00 + 150.00
    expect((await call(`/subscriptions/${metered.id}/usage`, { key: acct.key, body: { quantity: 250 } })).status).toBe(201);
    for (const id of [sub.id, metered.id]) expect((await call(`/subscriptions/${id}?at_period_end=true`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const results = await Promise.all([advanceRaw(acct, clock.id, "2026-09-01T00:01:00.000Z"), advanceRaw(acct, clock.id, "2026-09-01T00:01:00.000Z")]);
    for (const res of results) expect([200, 409], res.text).toContain(res.status);
    await settled(acct, clock.id);
    expect((await listOf(acct, `/payments?subscription_id=${sub.id}`)).map((p) => p.amount)).toEqual([3000, 13500]);
    expect((await listOf(acct, `/invoices?subscription_id=${sub.id}`)).map((i) => [i.total, i.status])).toEqual([[3000, "paid"], [13500, "paid"]]);
    expect((await listOf(acct, `/payments?subscription_id=${metered.id}`)).map((p) => p.amount)).toEqual([25000]);
    expect((await listOf(acct, `/invoices?subscription_id=${metered.id}`)).map((i) => [i.total, i.status])).toEqual([[25000, "paid"]]);
    for (const id of [sub.id, metered.id]) expect((await getSubscription(acct, id)).status).toBe("canceled");
  });

  it("an un-cancel racing the final invoice's claim: either it renews (the period and the items on one invoice) or it ends with the final invoice, and the money agrees", async () => {
    const acct = await signup();
    const clock = await createClock(acct, START);
    const { pro, sub } = await owing(acct, clock.id);
    expect((await advanceRaw(acct, clock.id, "2026-08-16T12:00:00.000Z")).status).toBe(200);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: pro.id } })).status).toBe(200);
    expect((await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const [advanced, uncancel] = await Promise.all([
      advanceRaw(acct, clock.id, "2026-09-01T00:01:00.000Z"),
      call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: false } }),
    ]);
    expect([200, 409], advanced.text).toContain(advanced.status);
    expect([200, 400, 409], uncancel.text).toContain(uncancel.status);
    await settled(acct, clock.id);
    const state = await getSubscription(acct, sub.id);
    const payments = (await listOf(acct, `/payments?subscription_id=${sub.id}`)).map((p) => p.amount);
    const invoices = (await listOf(acct, `/invoices?subscription_id=${sub.id}`)).map((i) => [i.total, i.status]);
    if (state.status === "canceled") {
      // The final invoice won: the un-cancel was refused, or came after the end.
      expect(uncancel.status).not.toBe(200);
      expect(payments).toEqual([3000, 13500]);
      expect(invoices).toEqual([[3000, "paid"], [13500, "paid"]]);
    } else {
      // The un-cancel won: September is renewed at Pro with the items, 300.00 + 135.00.
      expect(uncancel.status, uncancel.text).toBe(200);
      expect(state).toMatchObject({ status: "active", cancel_at_period_end: false });
      expect(payments).toEqual([3000, 43500]);
      expect(invoices).toEqual([[3000, "paid"], [43500, "paid"]]);
    }
  });
});
