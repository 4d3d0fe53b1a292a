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
import { invoicePdfText } from "../support/pdf";
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

describe("item 8: cancel at period end bills the last period's metered usage", () => {
  it("a final invoice of the period's usage (250 units at 1.00 = 250.00) is charged at the period's end, then the subscription ends", async () => {
    const { acct, clock, sub } = await meteredOnClock("2026-05-01T00:00:00.000Z");
    await advance(acct, clock.id, "2026-05-20T00:00:00.000Z");
    const recorded = await usage(acct, sub.id, { quantity: 250, timestamp: "2026-05-10T00:00:00Z" });
    expect(recorded.status, recorded.text).toBe(201);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);

    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices.length).toBe(1);
    expect(invoices[0]).toMatchObject({ status: "paid", total: 25000, amount_paid: 25000, period_start: "2026-05-01T00:00:00.000Z", period_end: "2026-06-01T00:00:00.000Z" });
    expect(linesOf(invoices[0])).toEqual([["usage", 25000]]);
    expect(await paymentsOf(acct, sub.id)).toEqual([[25000, "completed"]]);
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "canceled", canceled_at: "2026-06-01T00:00:00.000Z", cancel_at_period_end: false });
    // Its period is closed: no usage is taken after the final invoice.
    expect((await usage(acct, sub.id, { quantity: 1, timestamp: "2026-05-30T00:00:00Z" })).status).toBe(409);
  });

  it("two renewal runs at once send one final invoice and one charge (the period row is unique)", async () => {
    const { acct, clock, sub } = await meteredOnClock("2026-05-01T00:00:00.000Z");
    await advance(acct, clock.id, "2026-05-20T00:00:00.000Z");
    expect((await usage(acct, sub.id, { quantity: 250, timestamp: "2026-05-10T00:00:00Z" })).status).toBe(201);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    const rows = await readBillableRows(sub.id);
    const at = Date.parse("2026-06-01T00:01:00.000Z");
    await Promise.all([renewRows(rows, at), renewRows(rows, at), renewRows(await readBillableRows(sub.id), at)]);
    await renewRows(await readBillableRows(sub.id), at);
    expect((await invoicesOf(acct, sub.id)).map((i) => [i.total, i.status])).toEqual([[25000, "paid"]]);
    expect(await paymentsOf(acct, sub.id)).toEqual([[25000, "completed"]]);
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");
  });

  it("a period without usage is canceled with a final invoice of 0.00, charging nothing", async () => {
    const { acct, clock, sub } = await meteredOnClock("2026-05-01T00:00:00.000Z");
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    expect((await invoicesOf(acct, sub.id)).map((i) => [i.total, i.status])).toEqual([[0, "paid"]]);
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");
  });
});

describe("item 9: cancel at period end bills pending prorations", () => {
  it("Basic 30.00 to Pro 300.00 halfway, then cancel at period end: a final invoice of −15.00 + 150.00 = 135.00, so 165.00 in all", async () => {
    const { acct, clock, sub } = await licensedOnClock(30);
    const pro = await createPlan(acct, { name: "Pro", price: 300 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const upgraded = await put(acct, sub.id, { plan_id: pro.id });
    expect(upgraded.status, upgraded.text).toBe(200);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    expect(await paymentsOf(acct, sub.id)).toEqual([[3000, "completed"]]);

    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [april, final] = await invoicesOf(acct, sub.id);
    expect(linesOf(april)).toEqual([["subscription", 3000]]);
    // No new period is billed: only what April still owes, dated by April.
    expect(linesOf(final)).toEqual([
      ["proration", -1500],
      ["proration", 15000],
    ]);
    expect(final).toMatchObject({ status: "paid", subtotal: 13500, discount: 0, total: 13500, amount_paid: 13500, period_start: "2026-04-01T00:00:00.000Z", period_end: "2026-05-01T00:00:00.000Z" });
    // 30.00 + 135.00 = 165.00: half of April at 30.00 and half at 300.00.
    expect(await paymentsOf(acct, sub.id)).toEqual([
      [3000, "completed"],
      [13500, "completed"],
    ]);
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "canceled", canceled_at: "2026-05-01T00:00:00.000Z" });
    const pdf = await invoicePdfText(acct.key, final.id);
    expect(pdf).toContain(final.number);
    expect(pdf).toContain("Total 135.00 USD");

    // Nothing more, however far the clock goes.
    await advance(acct, clock.id, "2026-06-15T00:00:00.000Z");
    expect((await invoicesOf(acct, sub.id)).length).toBe(2);
    expect((await paymentsOf(acct, sub.id)).length).toBe(2);
  });

  it("a downgrade then cancel at period end: the items net to a credit, which is never refunded, so no final invoice", async () => {
    const { acct, clock, plan, sub } = await licensedOnClock(300);
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: basic.id })).status).toBe(200); // −150.00 + 15.00
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    expect((await invoicesOf(acct, sub.id)).map((i) => i.total)).toEqual([30000]);
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "canceled", canceled_at: "2026-05-01T00:00:00.000Z", plan_id: basic.id });
    expect(plan.id).not.toBe(basic.id);
  });

  it("two renewal runs at once: one final invoice, one charge of 135.00", async () => {
    const { acct, clock, sub } = await licensedOnClock(30);
    const pro = await createPlan(acct, { name: "Pro", price: 300 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    const rows = await readBillableRows(sub.id);
    const at = Date.parse("2026-05-01T00:01:00.000Z");
    await Promise.all([renewRows(rows, at), renewRows(rows, at)]);
    await renewRows(await readBillableRows(sub.id), at);
    expect((await invoicesOf(acct, sub.id)).map((i) => i.total)).toEqual([3000, 13500]);
    expect((await paymentsOf(acct, sub.id)).map(([amount]) => amount)).toEqual([3000, 13500]);
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");
  });

  it("a declined final invoice is dunned; it cannot be un-canceled under it; used up, the invoice is uncollectible and the subscription canceled", async () => {
    const acct = await signup("Final Invoice Co");
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 300 });
    // The first charge succeeds; every later charge of the card's token is declined.
    const sub = await subscribed(acct, user.id, basic.id, CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [, final] = await invoicesOf(acct, sub.id);
    expect(final).toMatchObject({ status: "open", total: 13500, amount_paid: 0 });
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "past_due", cancel_at_period_end: true });
    const uncancel = await put(acct, sub.id, { cancel_at_period_end: false });
    expect(uncancel.status, uncancel.text).toBe(400);
    expect(uncancel.body.error).toMatchObject({ code: "final_invoice_open", param: "cancel_at_period_end" });

    await advance(acct, clock.id, "2026-05-07T00:00:00.000Z");
    expect((await invoicesOf(acct, sub.id)).map((i) => [i.id, i.status])).toEqual([
      [expect.any(String), "paid"],
      [final.id, "uncollectible"],
    ]);
    expect((await paymentsOf(acct, sub.id)).map(([amount, status]) => [amount, status])).toEqual([
      [3000, "completed"],
      [13500, "failed"],
      [13500, "failed"],
      [13500, "failed"],
      [13500, "failed"],
    ]);
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");
  });

  it("a declined final invoice paid by a new card (PUT): the subscription ends, nothing more is billed", async () => {
    const acct = await signup("Final Invoice Co");
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 300 });
    const sub = await subscribed(acct, user.id, basic.id, CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const paid = await put(acct, sub.id, { payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2035, cvv: "123" });
    expect(paid.status, paid.text).toBe(200);
    expect(paid.body).toMatchObject({ status: "canceled", cancel_at_period_end: false });
    const [, final] = await invoicesOf(acct, sub.id);
    expect(final).toMatchObject({ status: "paid", total: 13500, amount_paid: 13500 });
    await advance(acct, clock.id, "2026-06-15T00:00:00.000Z");
    expect((await invoicesOf(acct, sub.id)).length).toBe(2);
    expect((await paymentsOf(acct, sub.id)).map(([amount, status]) => [amount, status])).toEqual([
      [3000, "completed"],
      [13500, "failed"],
      [13500, "completed"],
    ]);
  });

  it("a declined final invoice, voided: the subscription ends then, and nothing more is billed", async () => {
    const acct = await signup("Final Invoice Co");
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 300 });
    const sub = await subscribed(acct, user.id, basic.id, CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    expect((await cancelAtPeriodEnd(acct, sub.id)).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [, final] = await invoicesOf(acct, sub.id);
    const voided = await call(`/invoices/${final.id}/void`, { key: acct.key, body: {} });
    expect(voided.status, voided.text).toBe(200);
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "canceled", cancel_at_period_end: false, canceled_at: "2026-05-01T00:01:00.000Z" });
    await advance(acct, clock.id, "2026-06-15T00:00:00.000Z");
    expect((await invoicesOf(acct, sub.id)).length).toBe(2);
  });
});

// Stripe's rule for discounts on proration lines: a proration line is never discounted on its
// invoice (discountable false); the discounts in effect are reflected in its own amount instead. A
// percentage is (the credit carries the percentage that discounted the period, the charge the
// percentage of a discount still running at the change); an amount_off is not prorated: it came
// off the invoice, so the unused time is credited at the price before it, and the charge is at
// the full price. The invoice's discount then applies to its other lines only.
describe("item 11: discounts on proration lines, as Stripe bills them", () => {
  it("an amount_off 10.00 coupon (forever), Basic 30.00 to Pro 60.00 halfway: May bills 65.00", async () => {
    const { acct } = { acct: await signup("Discount Co") };
    const coupon = await call("/coupons", { key: acct.key, body: { id: "TENOFF", name: "Ten off", amount_off: 1000, currency: "usd", duration: "forever" } });
    expect(coupon.status, coupon.text).toBe(201);
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const sub = await subscribed(acct, user.id, basic.id, CARDS.visa, { coupon: "TENOFF" });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [april, may] = await invoicesOf(acct, sub.id);
    // April: 30.00 − 10.00 = 20.00.
    expect(april).toMatchObject({ subtotal: 3000, discount: 1000, total: 2000 });
    // May: Pro 60.00; unused half of Basic at its price, −30.00 × 15/30 = −15.00 (the amount_off
    // is not prorated); the remaining half of Pro, +60.00 × 15/30 = +30.00. The 10.00 comes off
    // the period line only: 60.00 − 10.00 − 15.00 + 30.00 = 65.00.
    expect(linesOf(may)).toEqual([
      ["subscription", 6000],
      ["proration", -1500],
      ["proration", 3000],
    ]);
    expect(may).toMatchObject({ subtotal: 7500, discount: 1000, total: 6500, amount_paid: 6500 });
    expect(await paymentsOf(acct, sub.id)).toEqual([
      [2000, "completed"],
      [6500, "completed"],
    ]);
  });

  it("a 100%-off once coupon, Basic 30.00 to Pro 60.00 halfway: May bills 90.00", async () => {
    const acct = await signup("Discount Co");
    const coupon = await call("/coupons", { key: acct.key, body: { id: "FREEMONTH", name: "First month free", percent_off: 100, duration: "once" } });
    expect(coupon.status, coupon.text).toBe(201);
    const clock = await createClock(acct, "2026-04-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const basic = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const sub = await subscribed(acct, user.id, basic.id, CARDS.visa, { coupon: "FREEMONTH" });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [april, may] = await invoicesOf(acct, sub.id);
    // April: 30.00 − 100% = 0.00, paid with no charge; the once coupon is used up.
    expect(april).toMatchObject({ subtotal: 3000, discount: 3000, total: 0 });
    // May: Pro 60.00; unused half of Basic, credited net of the 100% April took: −30.00 × 15/30 ×
    // (1 − 100%) = 0.00; the remaining half of Pro, with no discount running any more: +60.00 ×
    // 15/30 = +30.00. 60.00 + 0.00 + 30.00 = 90.00.
    expect(linesOf(may)).toEqual([
      ["subscription", 6000],
      ["proration", 0],
      ["proration", 3000],
    ]);
    expect(may).toMatchObject({ subtotal: 9000, discount: 0, total: 9000, amount_paid: 9000 });
    expect(await paymentsOf(acct, sub.id)).toEqual([[9000, "completed"]]);
  });
});
