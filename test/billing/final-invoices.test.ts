// Issue 33, items 7, 8, 9 and 11: billing that forgot what was owed. A voided metered invoice
// no longer bills the next period at once; a subscription canceled at its period's end is sent a
// final invoice for its last period's usage and its pending prorations (idempotent: one invoice,
// one charge, however many runs); discounts on proration lines follow Stripe's rule. All through
// the public API, on test clocks.
import { describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { readBillableRows, renewRows } from "../support/renewal-rows";

const put = (acct: Account, id: string, body: Record<string, unknown>) => call(`/subscriptions/${id}`, { key: acct.key, method: "PUT", body });
const usage = (acct: Account, subId: string, body: Record<string, unknown>) => call(`/subscriptions/${subId}/usage`, { key: acct.key, body });
const cancelAtPeriodEnd = (acct: Account, id: string) => call(`/subscriptions/${id}?at_period_end=true`, { key: acct.key, method: "DELETE" });

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  return (res.body.data as Record<string, any>[]).reverse().map((p) => [p.amount as number, p.status as string]);
}

const linesOf = (invoice: Record<string, any>) => (invoice.lines as Record<string, any>[]).map((l) => [l.type, l.amount]);

async function meteredOnClock(start: string, pan: string = CARDS.visa) {
  const acct = await signup("Final Invoice Co");
  const clock = await createClock(acct, start);
  const user = await createUser(acct, { testClock: clock.id });
  // 1.00 a unit.
  const plan = await createPlan(acct, { name: "Calls", price: 1, usage_type: "metered" });
  const sub = await subscribed(acct, user.id, plan.id, pan);
  return { acct, clock, user, plan, sub };
}

// April has 30 days: the 16th at midnight is exactly halfway through the period.
async function licensedOnClock(price: number, extra: Record<string, unknown> = {}) {
  const acct = await signup("Final Invoice Co");
  const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
  const user = await createUser(acct, { testClock: clock.id });
  const plan = await createPlan(acct, { name: "Basic", price });
  const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, extra);
  return { acct, clock, user, plan, sub };
}

describe("item 7: voiding a metered subscription's past-due invoice", () => {
  it("June's usage is one invoice on July 1 (5 + 7 units = 12.00), not an invoice on the day of the void (June 5)", async () => {
    // The card is vaulted at creation and declines every charge of its token: May's invoice fails.
    const { acct, clock, sub } = await meteredOnClock("2026-05-01T00:00:00.000Z", CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2026-05-10T00:00:00.000Z");
    { const r = await usage(acct, sub.id, { quantity: 3, timestamp: "2026-05-10T00:00:00Z" }); expect(r.status, r.text).toBe(201); }
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const [may] = await invoicesOf(acct, sub.id);
    expect(may).toMatchObject({ status: "open", total: 300, period_start: "2026-05-01T00:00:00.000Z" });
    expect((await getSubscription(acct, sub.id)).status).toBe("past_due");

    // Voided on June 5, before the last retry (June 6) would cancel it.
    await advance(acct, clock.id, "2026-06-05T00:00:00.000Z");
    { const r = await usage(acct, sub.id, { quantity: 5, timestamp: "2026-06-03T00:00:00Z" }); expect(r.status, r.text).toBe(201); }
    const voided = await call(`/invoices/${may.id}/void`, { key: acct.key, body: {} });
    expect(voided.status, voided.text).toBe(200);
    // June is the open period: due at its end, July 1.
    expect(await getSubscription(acct, sub.id)).toMatchObject({
      status: "active",
      current_period_start: "2026-06-01T00:00:00.000Z",
      next_billing_date: "2026-07-01T00:00:00.000Z",
    });
    await advance(acct, clock.id, "2026-06-20T00:00:00.000Z");
    // Nothing of June is invoiced yet, and June 20's usage is taken.
    expect((await invoicesOf(acct, sub.id)).length).toBe(1);
    const june20 = await usage(acct, sub.id, { quantity: 7, timestamp: "2026-06-20T00:00:00Z" });
    expect(june20.status, june20.text).toBe(201);

    await advance(acct, clock.id, "2026-07-01T00:01:00.000Z");
    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices.length).toBe(2);
    // 5 + 7 = 12 units at 1.00 = 12.00, for June, invoiced at its end.
    expect(invoices[1]).toMatchObject({ total: 1200, period_start: "2026-06-01T00:00:00.000Z", period_end: "2026-07-01T00:00:00.000Z" });
    expect(linesOf(invoices[1])).toEqual([["usage", 1200]]);
  });
});
