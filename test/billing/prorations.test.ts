// Proration (issue 21, item 3): a change of plan or quantity on an active subscription, with
// proration_behavior create_prorations (the default), credits the unused time of what the current
// period was charged and charges the time left at the new price, as items of the next invoice;
// none prorates nothing. Credits beyond an invoice go to the balance (a credit note); a negative total is never charged and
// never refunded. All through the public API, on a test clock.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { invoicePdfText } from "../support/pdf";
import { readBillableRows, renewRows } from "../support/renewal-rows";

// April has 30 days: the 16th at midnight is exactly halfway through the period.
const START = "2026-04-01T00:00:00.000Z";

async function clocked(price = 30) {
  const acct = await signup("Proration Co");
  const clock = await createClock(acct, START);
  const user = await createUser(acct, { testClock: clock.id });
  const plan = await createPlan(acct, { name: "Basic", price });
  const sub = await subscribed(acct, user.id, plan.id, CARDS.visa);
  return { acct, clock, user, plan, sub };
}

const put = (acct: Account, id: string, body: Record<string, unknown>) => call(`/subscriptions/${id}`, { key: acct.key, method: "PUT", body });

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  return (res.body.data as Record<string, any>[]).reverse().map((p) => p.amount as number);
}

const linesOf = (invoice: Record<string, any>) => (invoice.lines as Record<string, any>[]).map((l) => [l.type, l.amount]);

describe("create_prorations", () => {
  it("an upgrade from 30.00 to 60.00 halfway through a 30-day period credits 15.00 and charges 30.00 on the next invoice", async () => {
    const { acct, clock, plan, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const changed = await put(acct, sub.id, { plan_id: pro.id });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.plan_id).toBe(pro.id);
    // Nothing is charged now.
    expect(await paymentsOf(acct, sub.id)).toEqual([3000]);

    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [first, second] = await invoicesOf(acct, sub.id);
    expect(linesOf(first)).toEqual([["subscription", 3000]]);
    expect(linesOf(second)).toEqual([
      ["subscription", 6000],
      ["proration", -1500],
      ["proration", 3000],
    ]);
    expect(second.lines[1]).toMatchObject({ proration: true, description: "Unused time on 1 × Basic after 2026-04-16", period_start: "2026-04-16T00:00:00.000Z", period_end: "2026-05-01T00:00:00.000Z" });
    expect(second.lines[2]).toMatchObject({ proration: true, description: "Remaining time on 1 × Pro after 2026-04-16" });
    expect(second).toMatchObject({ status: "paid", subtotal: 7500, discount: 0, total: 7500, amount_paid: 7500 });
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 7500]);
    const text = await invoicePdfText(acct.key, second.id);
    expect(text).toContain(second.number);
    expect(text).toContain("Unused time on 1 × Basic after 2026-04-16");
    expect(text).toContain("Total 75.00 USD");
    // The period after: the new price alone.
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    expect(linesOf((await invoicesOf(acct, sub.id))[2])).toEqual([["subscription", 6000]]);
    expect(plan.id).not.toBe(pro.id);
  });

  it("an upgrade then a downgrade in one period bills only the time used: the second change credits what the first charged", async () => {
    const { acct, clock, plan, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-11T00:00:00.000Z"); // 10 of 30 days used
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-04-21T00:00:00.000Z"); // 10 more at 60.00
    expect((await put(acct, sub.id, { plan_id: plan.id })).status).toBe(200);
    // The same change again is no change: no items.
    expect((await put(acct, sub.id, { plan_id: plan.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const second = (await invoicesOf(acct, sub.id))[1];
    // Day 10: credit 20/30 of 30.00, charge 20/30 of 60.00; day 20: credit 10/20 of that charge, charge 10/30 of 30.00.
    expect(linesOf(second)).toEqual([
      ["subscription", 3000],
      ["proration", -2000],
      ["proration", 4000],
      ["proration", -2000],
      ["proration", 1000],
    ]);
    // 10 days at 60.00 instead of 30.00: 10.00 more, exactly.
    expect(second.total).toBe(3000 + 1000);
  });

  it("a downgrade whose credit exceeds the next invoice charges nothing and credits the rest to the balance, taken invoice after invoice, never refunded", async () => {
    const { acct, clock, sub } = await clocked(60);
    const small = await createPlan(acct, { name: "Small", price: 10 });
    await advance(acct, clock.id, "2026-04-02T00:00:00.000Z"); // 1 of 30 days used
    expect((await put(acct, sub.id, { plan_id: small.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-07-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-08-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-09-01T00:01:00.000Z");
    const invoices = await invoicesOf(acct, sub.id);
    // Credit 29/30 of 60.00 = 58.00, charge 29/30 of 10.00 = 9.67: 48.33 owed to the customer.
    expect(linesOf(invoices[1])).toEqual([
      ["subscription", 1000],
      ["proration", -5800],
      ["proration", 967],
      ["credit", 3833],
    ]);
    // The 38.33 beyond May's invoice is a credit note to the balance (issue 37), which the next
    // invoices consume: 10.00 each in June, July and August, the last 8.33 in September.
    expect((await call(`/credit-notes?invoice_id=${invoices[1].id}`, { key: acct.key })).body.data.map((n: any) => [n.amount, n.reason])).toEqual([[3833, "order_change"]]);
    expect(invoices.slice(1).map((i) => [i.total, i.starting_balance, i.ending_balance, i.amount_due, i.status])).toEqual([
      [0, 0, 0, 0, "paid"],
      [1000, -3833, -2833, 0, "paid"],
      [1000, -2833, -1833, 0, "paid"],
      [1000, -1833, -833, 0, "paid"],
      [1000, -833, 0, 167, "paid"],
    ]);
    expect(linesOf(invoices[2])).toEqual([["subscription", 1000]]);
    // Only the first period and the last were charged: no refund, no negative charge.
    expect(await paymentsOf(acct, sub.id)).toEqual([6000, 167]);
    // Money is conserved: the charges are April's 60.00, the prorations and five periods at 10.00.
    const charged = (await paymentsOf(acct, sub.id)).reduce((a, b) => a + b, 0);
    expect(charged).toBe(6000 - 5800 + 967 + 5 * 1000);
  });

  it("a quantity change is prorated alike; a percentage discount of the period is folded into the charge line", async () => {
    const { acct, clock, sub } = await clocked();
    const coupon = (await call("/coupons", { key: acct.key, body: { name: "Half", percent_off: 50, duration: "forever" } })).body;
    // The coupon applies from the next invoice: the first period (May) is discounted.
    expect((await put(acct, sub.id, { coupon: coupon.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    await advance(acct, clock.id, "2026-05-16T12:00:00.000Z"); // half of May's 31 days
    expect((await put(acct, sub.id, { quantity: 3 })).status).toBe(200);
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const june = (await invoicesOf(acct, sub.id))[2];
    // May charged 15.00 (30.00 less 50%): half of it is credited; 3 × 30.00 for half the period, less 50%.
    expect(linesOf(june)).toEqual([
      ["subscription", 9000],
      ["proration", -750],
      ["proration", 2250],
    ]);
    // The discount is taken on the period line only.
    expect(june).toMatchObject({ subtotal: 10500, discount: 4500, total: 6000 });
  });
});

describe("create_prorations over periods, coupons and many changes", () => {
  it("a change in a period whose invoice also took prorations credits the period's own price, not those items", async () => {
    const { acct, clock, plan, sub } = await clocked(10);
    const big = await createPlan(acct, { name: "Big", price: 30 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: big.id })).status).toBe(200); // −5.00, +15.00
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z"); // May: 30.00 + 10.00
    await advance(acct, clock.id, "2026-05-02T00:00:00.000Z"); // 1 of May's 31 days used
    expect((await put(acct, sub.id, { plan_id: plan.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const [, may, june] = await invoicesOf(acct, sub.id);
    expect(may.total).toBe(4000);
    // 30/31 of May's own 30.00 credited (not of the 40.00 its invoice came to), 30/31 of 10.00
    // charged: the 9.35 left over is carried on.
    expect(linesOf(june)).toEqual([
      ["subscription", 1000],
      ["proration", -2903],
      ["proration", 968],
      ["credit", 935],
    ]);
    expect(june.total).toBe(0);
  });

  it("the charge line takes the percentage the period was discounted by, not a coupon applied since", async () => {
    const { acct, clock, sub } = await clocked();
    const fifth = (await call("/coupons", { key: acct.key, body: { name: "Fifth", percent_off: 20, duration: "forever" } })).body;
    const free = (await call("/coupons", { key: acct.key, body: { name: "Free", percent_off: 100, duration: "forever" } })).body;
    expect((await put(acct, sub.id, { coupon: fifth.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z"); // May: 30.00 less 20%
    await advance(acct, clock.id, "2026-05-16T12:00:00.000Z"); // half of May
    expect((await put(acct, sub.id, { coupon: free.id })).status).toBe(200);
    expect((await put(acct, sub.id, { quantity: 2 })).status).toBe(200);
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const june = (await invoicesOf(acct, sub.id))[2];
    // Half of May's 24.00 credited; half of 2 × 30.00 less May's 20%; June itself free.
    expect(linesOf(june)).toEqual([
      ["subscription", 6000],
      ["proration", -1200],
      ["proration", 2400],
    ]);
    expect(june).toMatchObject({ discount: 6000, total: 1200 });
  });

  it("a subscription set to cancel at period end takes a create_prorations change onto its final invoice; none works; no scheduled change", async () => {
    const { acct, clock, sub } = await clocked();
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { cancel_at_period_end: true })).status).toBe(200);
    // Half of April at 1 seat credited, half at 2 charged: −15.00 + 30.00, for the final invoice.
    const prorated = await put(acct, sub.id, { quantity: 2 });
    expect(prorated.status, prorated.text).toBe(200);
    expect((await put(acct, sub.id, { quantity: 3, proration_behavior: "none" })).body).toMatchObject({ quantity: 3, cancel_at_period_end: true });
    // Nor does it take a scheduled change: no next period would.
    expectError(await put(acct, sub.id, { quantity: 1, at_period_end: true }), 400, "invalid_request_error", "parameter_invalid");
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const [, final] = await invoicesOf(acct, sub.id);
    expect(linesOf(final)).toEqual([
      ["proration", -1500],
      ["proration", 3000],
    ]);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500]);
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");
  });

  it("a hundred pending items are all taken by the next invoice (no statement binds them one by one)", async () => {
    const { acct, clock, sub } = await clocked();
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    for (let i = 0; i < 51; i++) expect((await put(acct, sub.id, { quantity: 2 + (i % 2) })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const may = (await invoicesOf(acct, sub.id))[1];
    expect(may.lines).toHaveLength(1 + 102);
    expect(may.total).toBe(may.lines.reduce((sum: number, l: { amount: number }) => sum + l.amount, 0));
    // The last change left 2 seats: May bills 2 × 30.00, and half a period at 2 seats less the 1 paid for, net.
    expect(may.lines[0].amount).toBe(6000);
    expect(may.total).toBe(6000 + 1500);
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM invoice_items WHERE subscription_id = ? AND invoice_id IS NULL").bind(sub.id).first()).toEqual({ n: 0 });
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 7500]);
  });
});

describe("always_invoice", () => {
  it("an upgrade from 30.00 to 60.00 halfway through a 30-day period charges 15.00 at once, on an invoice of its own with a PDF", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const changed = await put(acct, sub.id, { plan_id: pro.id, proration_behavior: "always_invoice" });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.plan_id).toBe(pro.id);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500]);
    const [, now] = await invoicesOf(acct, sub.id);
    expect(linesOf(now)).toEqual([
      ["proration", -1500],
      ["proration", 3000],
    ]);
    expect(now).toMatchObject({ status: "paid", total: 1500, amount_paid: 1500, period_start: "2026-04-16T00:00:00.000Z", period_end: "2026-05-01T00:00:00.000Z" });
    const text = await invoicePdfText(acct.key, now.id);
    expect(text).toContain(now.number);
    expect(text).toContain("Total 15.00 USD");
    // Nothing waits for the next invoice: it is the new price alone.
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    expect(linesOf((await invoicesOf(acct, sub.id))[2])).toEqual([["subscription", 6000]]);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500, 6000]);
  });

  it("takes the items already pending onto the invoice; a downgrade whose credit exceeds them is paid at 0 and the credit carried on", async () => {
    const { acct, clock, plan, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-11T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200); // +20.00 pending
    await advance(acct, clock.id, "2026-04-21T00:00:00.000Z");
    const down = await put(acct, sub.id, { plan_id: plan.id, proration_behavior: "always_invoice" });
    expect(down.status, down.text).toBe(200);
    const [, now] = await invoicesOf(acct, sub.id);
    // The pending +20.00 (−20.00, +40.00), then −20.00 and +10.00: 10.00 at once.
    expect(linesOf(now)).toEqual([
      ["proration", -2000],
      ["proration", 4000],
      ["proration", -2000],
      ["proration", 1000],
    ]);
    expect(now.total).toBe(1000);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1000]);

    // A downgrade right at the start of the next period: its credit goes to the balance, nothing charged.
    const small = await createPlan(acct, { name: "Small", price: 10 });
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    expect((await put(acct, sub.id, { plan_id: small.id, proration_behavior: "always_invoice" })).status).toBe(200);
    const credited = (await invoicesOf(acct, sub.id))[3];
    expect(credited).toMatchObject({ status: "paid", total: 0, amount_paid: 0, payment_id: null });
    expect(credited.lines.map((l: Record<string, unknown>) => l.type)).toEqual(["proration", "proration", "credit"]);
    const carried = credited.lines[2].amount as number;
    expect(carried).toBeGreaterThan(0);
    expect((await call(`/credit-notes?invoice_id=${credited.id}`, { key: acct.key })).body.data.map((n: any) => n.amount)).toEqual([carried]);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1000, 3000]);
    // The June invoice starts with that credit, from the balance.
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const june = (await invoicesOf(acct, sub.id))[4];
    expect(linesOf(june)).toEqual([["subscription", 1000]]);
    expect(june).toMatchObject({ starting_balance: -carried, ending_balance: Math.min(0, 1000 - carried) });
  });

  it("a declined charge answers 402 and changes nothing: the plan, the pending items; the invoice is void", async () => {
    const acct = await signup();
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    // Charged once, declined after.
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst);
    await advance(acct, clock.id, "2026-04-11T00:00:00.000Z");
    expect((await put(acct, sub.id, { quantity: 2 })).status).toBe(200); // pending items
    const before = await env.DB.prepare("SELECT pending_items, pending_items_amount, open_charge FROM subscriptions WHERE id = ?").bind(sub.id).first();
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const declined = await put(acct, sub.id, { plan_id: pro.id, proration_behavior: "always_invoice" });
    expectError(declined, 402, "card_error");
    expect(await getSubscription(acct, sub.id)).toMatchObject({ plan_id: plan.id, quantity: 2 });
    expect(await env.DB.prepare("SELECT pending_items, pending_items_amount, open_charge FROM subscriptions WHERE id = ?").bind(sub.id).first()).toEqual(before);
    const voided = (await invoicesOf(acct, sub.id))[1];
    expect(voided.status).toBe("void");
    // The pending items wait for the next invoice, as before.
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const may = (await invoicesOf(acct, sub.id))[2];
    expect(linesOf(may).slice(1)).toEqual([
      ["proration", -2000],
      ["proration", 4000],
    ]);
  });

  it("a charge whose outcome is lost is settled by the cron with the same reference: charged once, the change made", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const { sandboxProcessor } = await import("../../src/processor/sandbox");
    const { vi } = await import("vitest");
    // The processor takes the charge, and its answer never arrives.
    const real = sandboxProcessor.chargeToken.bind(sandboxProcessor);
    const spy = vi.spyOn(sandboxProcessor, "chargeToken").mockImplementation(async (args) => {
      await real(args);
      throw new Error("connection reset");
    });
    let lost;
    try {
      lost = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-1", body: { plan_id: pro.id, proration_behavior: "always_invoice" } });
    } finally {
      spy.mockRestore();
    }
    expectError(lost, 500, "api_error", "outcome_unknown");
    // Claimed: the subscription takes no other change meanwhile, and its open invoice is neither voided nor paid by hand.
    expectError(await put(acct, sub.id, { quantity: 3 }), 409, "invalid_request_error", "charge_in_progress");
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "charge_in_progress");
    const open = (await invoicesOf(acct, sub.id))[1];
    expect(open.status).toBe("open");
    expectError(await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "charge_in_progress");
    expectError(await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "charge_in_progress");
    expect((await getSubscription(acct, sub.id)).plan_id).not.toBe(pro.id);
    // The lease runs out; the cron sends the same reference and records it.
    await env.DB.prepare("UPDATE proration_charges SET updated_at = ? WHERE subscription_id = ?").bind(new Date(Date.now() - 11 * 60_000).toISOString(), sub.id).run();
    const { settleStaleProrationCharges } = await import("../../src/billing/proration-charges");
    expect(await settleStaleProrationCharges(env)).toBe(1);
    expect(await settleStaleProrationCharges(env)).toBe(0);
    expect((await getSubscription(acct, sub.id)).plan_id).toBe(pro.id);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500]);
    // The client's retry with the same key (once its lock ran out) is answered without a second charge.
    const { IDEMPOTENCY_LOCK_MS } = await import("../../src/middleware/idempotency");
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = 'upgrade-1'").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id).run();
    const retried = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-1", body: { plan_id: pro.id, proration_behavior: "always_invoice" } });
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body.plan_id).toBe(pro.id);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500]);
  });

  it("a retry with the same Idempotency-Key takes its earlier run's claim over and charges it once", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const { sandboxProcessor } = await import("../../src/processor/sandbox");
    const { vi } = await import("vitest");
    // The processor is unreachable: nothing charged, the claim left behind.
    const spy = vi.spyOn(sandboxProcessor, "chargeToken").mockRejectedValue(new Error("connection refused"));
    const body = { plan_id: pro.id, proration_behavior: "always_invoice" };
    let first;
    try {
      first = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-3", body });
    } finally {
      spy.mockRestore();
    }
    expectError(first, 500, "api_error", "outcome_unknown");
    const { IDEMPOTENCY_LOCK_MS } = await import("../../src/middleware/idempotency");
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = 'upgrade-3'").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id).run();
    const retried = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-3", body });
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body.plan_id).toBe(pro.id);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500]);
    expect((await invoicesOf(acct, sub.id)).map((i) => i.status)).toEqual(["paid", "paid"]);
    // The cron finds nothing left to settle.
    await env.DB.prepare("UPDATE proration_charges SET updated_at = ? WHERE subscription_id = ?").bind(new Date(Date.now() - 11 * 60_000).toISOString(), sub.id).run();
    const { settleStaleProrationCharges } = await import("../../src/billing/proration-charges");
    expect(await settleStaleProrationCharges(env)).toBe(0);
  });

  it("a retry with the same Idempotency-Key after a lost answer charges once", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const body = { plan_id: pro.id, proration_behavior: "always_invoice" };
    const [a, b] = await Promise.all([
      call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-2", body }),
      call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-2", body }),
    ]);
    expect([a.status, b.status]).toContain(200);
    const again = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", idempotencyKey: "upgrade-2", body });
    expect(again.status).toBe(200);
    expect(again.body.plan_id).toBe(pro.id);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 1500]);
  });
});

describe("at_period_end: a change scheduled for the next period", () => {
  it("a downgrade scheduled mid-period shows as pending_update, charges nothing now, and prices the next period", async () => {
    const { acct, clock, sub } = await clocked(60);
    const basic = await createPlan(acct, { name: "Basic", price: 25 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const scheduled = await put(acct, sub.id, { plan_id: basic.id, quantity: 2, at_period_end: true });
    expect(scheduled.status, scheduled.text).toBe(200);
    expect(scheduled.body).toMatchObject({ plan_id: sub.plan_id, quantity: 1, pending_update: { plan_id: basic.id, quantity: 2, effective_at: "2026-05-01T00:00:00.000Z" } });
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM invoice_items WHERE subscription_id = ?").bind(sub.id).first()).toEqual({ n: 0 });
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    const may = (await invoicesOf(acct, sub.id))[1];
    expect(linesOf(may)).toEqual([["subscription", 5000]]);
    expect(may.lines[0].description).toBe("2 × Basic");
    expect(await getSubscription(acct, sub.id)).toMatchObject({ plan_id: basic.id, quantity: 2, pending_update: null });
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    expect(await paymentsOf(acct, sub.id)).toEqual([6000, 5000, 5000]);
  });

  it("a change made now replaces the scheduled one; scheduling the current plan clears it", async () => {
    const { acct, clock, plan, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id, at_period_end: true })).body.pending_update).toMatchObject({ plan_id: pro.id });
    expect((await put(acct, sub.id, { plan_id: plan.id, at_period_end: true })).body.pending_update).toBeNull();
    expect((await put(acct, sub.id, { plan_id: pro.id, at_period_end: true })).body.pending_update).toMatchObject({ plan_id: pro.id });
    const now = await put(acct, sub.id, { quantity: 2 });
    expect(now.body).toMatchObject({ plan_id: plan.id, quantity: 2, pending_update: null });
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    // The period at 2 × 30.00, and the prorated change of quantity (half of one 30.00 credited, half of two charged).
    expect(linesOf((await invoicesOf(acct, sub.id))[1])).toEqual([
      ["subscription", 6000],
      ["proration", -1500],
      ["proration", 3000],
    ]);
  });

  it("refuses at_period_end without plan_id or quantity, or with a proration, changing nothing", async () => {
    const { acct, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const missing = await put(acct, sub.id, { at_period_end: true });
    expectError(missing, 400, "invalid_request_error", "parameter_missing");
    expect(missing.body.error.param).toBe("at_period_end");
    const prorated = await put(acct, sub.id, { plan_id: pro.id, at_period_end: true, proration_behavior: "always_invoice" });
    expectError(prorated, 400, "invalid_request_error", "parameter_unexpected");
    expect(prorated.body.error.param).toBe("proration_behavior");
    const bad = await put(acct, sub.id, { plan_id: pro.id, at_period_end: "yes" });
    expectError(bad, 400, "invalid_request_error");
    expect(bad.body.error.param).toBe("at_period_end");
    expect((await getSubscription(acct, sub.id)).pending_update).toBeNull();
  });

  it("a change of price, or of the one scheduled, waits while a new period's first charge is in flight (409); a past_due subscription takes no scheduled change", async () => {
    const { acct, plan, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    expect((await put(acct, sub.id, { plan_id: pro.id, at_period_end: true })).status).toBe(200);
    const now = new Date().toISOString();
    // The next period's first attempt is claimed (priced with the scheduled change) and at the processor.
    await env.DB.prepare(
      "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES ('sper_first_race', ?, ?, 1, ?, 6000, 'usd', 'open', 1, ?, ?)",
    ).bind(acct.id, sub.id, now, now, now).run();
    for (const body of [{ quantity: 2, proration_behavior: "none" }, { plan_id: plan.id, at_period_end: true }, { quantity: 2 }]) {
      expectError(await put(acct, sub.id, body), 409, "invalid_request_error", "charge_in_progress");
    }
    expect((await getSubscription(acct, sub.id)).pending_update).toMatchObject({ plan_id: pro.id });
    // Past due: the scheduled change would wait for the unpaid period; it is refused.
    await env.DB.prepare("DELETE FROM subscription_periods WHERE id = 'sper_first_race'").run();
    await env.DB.prepare("UPDATE subscriptions SET status = 'past_due' WHERE id = ?").bind(sub.id).run();
    const refused = await put(acct, sub.id, { quantity: 2, at_period_end: true });
    expectError(refused, 400, "invalid_request_error", "parameter_invalid");
    expect(refused.body.error.param).toBe("at_period_end");
  });

  it("a change scheduled during a trial prices the trial's first invoice", async () => {
    const acct = await signup();
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 10 });
    expect((await put(acct, sub.id, { plan_id: pro.id, at_period_end: true })).body.pending_update).toMatchObject({ plan_id: pro.id, effective_at: "2026-04-11T00:00:00.000Z" });
    await advance(acct, clock.id, "2026-04-11T00:01:00.000Z");
    expect(linesOf((await invoicesOf(acct, sub.id))[0])).toEqual([["subscription", 6000]]);
    expect((await getSubscription(acct, sub.id)).plan_id).toBe(pro.id);
  });
});

describe("none, and what is never prorated", () => {
  it("none applies the new price from the next period, with no items", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id, proration_behavior: "none" })).status).toBe(200);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    expect(linesOf((await invoicesOf(acct, sub.id))[1])).toEqual([["subscription", 6000]]);
  });

  it("a trialing subscription's change is not prorated", async () => {
    const acct = await signup();
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const plan = await createPlan(acct, { name: "Basic", price: 30 });
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { trial_period_days: 10 });
    await advance(acct, clock.id, "2026-04-05T00:00:00.000Z");
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    await advance(acct, clock.id, "2026-04-11T00:01:00.000Z");
    expect(linesOf((await invoicesOf(acct, sub.id))[0])).toEqual([["subscription", 6000]]);
  });
});

describe("proration errors and races", () => {
  it("refuses an unknown proration_behavior, and always_invoice beside card, coupon or cancel_at_period_end, changing nothing", async () => {
    const { acct, plan, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const bad = await put(acct, sub.id, { plan_id: pro.id, proration_behavior: "sometimes" });
    expectError(bad, 400, "invalid_request_error");
    expect(bad.body.error.param).toBe("proration_behavior");
    const mixed = await put(acct, sub.id, { plan_id: pro.id, proration_behavior: "always_invoice", cancel_at_period_end: true });
    expectError(mixed, 400, "invalid_request_error", "parameter_unexpected");
    expect(mixed.body.error.param).toBe("cancel_at_period_end");
    expect((await getSubscription(acct, sub.id)).plan_id).toBe(plan.id);
    const row = await env.DB.prepare("SELECT pending_items, pending_items_amount FROM subscriptions WHERE id = ?").bind(sub.id).first();
    expect(row).toEqual({ pending_items: 0, pending_items_amount: 0 });
  });

  it("a prorated change under a charge in flight answers 409 charge_in_progress and writes no items", async () => {
    const { acct, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const now = new Date().toISOString();
    await env.DB.prepare(
      "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES ('sper_prorate_race', ?, ?, 1, ?, 3000, 'usd', 'open', 1, ?, ?)",
    ).bind(acct.id, sub.id, now, now, now).run();
    expectError(await put(acct, sub.id, { plan_id: pro.id }), 409, "invalid_request_error", "charge_in_progress");
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM invoice_items WHERE subscription_id = ?").bind(sub.id).first<{ n: number }>())!.n).toBe(0);
  });

  it("two changes at once: one is prorated, the other answers 409 subscription_changed; the items are one change's", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    const max = await createPlan(acct, { name: "Max", price: 90 });
    await advance(acct, clock.id, "2026-04-16T00:00:00.000Z");
    const answers = await Promise.all([put(acct, sub.id, { plan_id: pro.id }), put(acct, sub.id, { plan_id: max.id })]);
    const statuses = answers.map((a) => a.status).sort();
    const items = (await env.DB.prepare("SELECT amount FROM invoice_items WHERE subscription_id = ? ORDER BY id").bind(sub.id).all<{ amount: number }>()).results.map((r) => r.amount);
    if (statuses[1] === 409) {
      expect(statuses).toEqual([200, 409]);
      expect(answers.find((a) => a.status === 409)!.body.error.code).toBe("subscription_changed");
      expect(items).toHaveLength(2);
    } else {
      // They ran one after the other: the second credits what the first charged.
      expect(statuses).toEqual([200, 200]);
      expect(items).toHaveLength(4);
      expect(items[2]).toBe(-items[1]);
    }
    const row = await env.DB.prepare("SELECT pending_items, pending_items_amount FROM subscriptions WHERE id = ?").bind(sub.id).first<{ pending_items: number; pending_items_amount: number }>();
    expect(row).toEqual({ pending_items: items.length, pending_items_amount: items.reduce((a, b) => a + b, 0) });
  });

  it("a change committed between the renewal's read and its claim makes the claim lose; the next run invoices the items", async () => {
    const { acct, clock, sub } = await clocked();
    const pro = await createPlan(acct, { name: "Pro", price: 60 });
    await advance(acct, clock.id, "2026-04-30T00:00:00.000Z"); // one day left
    const stale = await readBillableRows(sub.id);
    expect((await put(acct, sub.id, { plan_id: pro.id })).status).toBe(200);
    expect(await renewRows(stale, Date.parse("2026-05-01T00:00:00Z"))).toEqual(["skipped"]);
    await advance(acct, clock.id, "2026-05-01T00:01:00.000Z");
    expect(linesOf((await invoicesOf(acct, sub.id))[1])).toEqual([
      ["subscription", 6000],
      ["proration", -100],
      ["proration", 200],
    ]);
    expect(await paymentsOf(acct, sub.id)).toEqual([3000, 6100]);
  });
});
