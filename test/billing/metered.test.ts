// Metered usage (issue 21, item 6): usage_type metered plans with aggregate_usage; POST
// /subscriptions/{id}/usage (idempotent, into the period that holds its timestamp, 400
// usage_period_closed for an invoiced period, even when the invoicing claim races it); billed in
// arrears at each period's end through the plan's unit price or tiers; GET /subscriptions/{id}/usage.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribe, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { invoicePdfText } from "../support/pdf";
import { runJobs } from "../support/queue";
import { readBillableRows, renewRows } from "../support/renewal-rows";

const START = "2026-05-01T00:00:00.000Z";

async function clocked(plan: Record<string, unknown>) {
  const acct = await signup("Metered Co");
  const clock = await createClock(acct, START);
  const user = await createUser(acct, { testClock: clock.id });
  const res = await call("/subscription-plans", { key: acct.key, body: { name: "API calls", currency: "usd", interval: "month", usage_type: "metered", ...plan } });
  expect(res.status, res.text).toBe(201);
  const sub = await subscribed(acct, user.id, res.body.id);
  return { acct, clock, user, plan: res.body, sub };
}

const usage = (acct: Account, subId: string, body: Record<string, unknown>, idempotencyKey?: string) =>
  call(`/subscriptions/${subId}/usage`, { key: acct.key, body, idempotencyKey });

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  return (res.body.data as Record<string, any>[]).reverse();
}

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  return (res.body.data as Record<string, any>[]).reverse();
}

describe("a metered plan at 0.35 cent per unit", () => {
  it("charges nothing at creation, then invoices 1,000 units at 3.50 at the period's end, with a PDF showing its number and total", async () => {
    const { acct, clock, plan, sub } = await clocked({ unit_amount_decimal: "0.35" });
    expect(plan).toMatchObject({ usage_type: "metered", aggregate_usage: "sum", unit_amount_decimal: "0.35" });
    expect(sub).toMatchObject({ status: "active", current_period_start: START, next_billing_date: "2026-06-01T00:00:00.000Z" });
    expect(await paymentsOf(acct, sub.id)).toEqual([]);
    expect(await invoicesOf(acct, sub.id)).toEqual([]);

    await advance(acct, clock.id, "2026-05-10T00:00:00.000Z");
    const first = await usage(acct, sub.id, { quantity: 600 }, "usage-1");
    expect(first.status, first.text).toBe(201);
    expect(first.body).toMatchObject({ object: "usage_record", quantity: 600, action: "increment", timestamp: "2026-05-10T00:00:00.000Z", period_start: START, period_end: "2026-06-01T00:00:00.000Z" });
    // The same Idempotency-Key records once.
    const replay = await usage(acct, sub.id, { quantity: 600 }, "usage-1");
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect((await usage(acct, sub.id, { quantity: 400, timestamp: "2026-05-03T12:00:00Z" })).status).toBe(201);

    const listed = await call(`/subscriptions/${sub.id}/usage`, { key: acct.key });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data).toEqual([
      { object: "usage_period", livemode: false, period_start: START, period_end: "2026-06-01T00:00:00.000Z", total_usage: 1000, records: 2, invoiced: false, invoice_id: null },
    ]);

    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ status: "paid", subtotal: 350, total: 350, amount_paid: 350, period_start: START, period_end: "2026-06-01T00:00:00.000Z" });
    expect(invoice.lines).toMatchObject([{ type: "usage", quantity: 1000, unit_amount_decimal: "0.35", amount: 350 }]);
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([350]);
    expect(await getSubscription(acct, sub.id)).toMatchObject({ current_period_start: "2026-06-01T00:00:00.000Z", next_billing_date: "2026-07-01T00:00:00.000Z" });
    const text = await invoicePdfText(acct.key, invoice.id);
    expect(text).toContain(invoice.number);
    expect(text).toContain("Total 3.50 USD");
    expect(text).toContain("1000 × API calls (usage)");

    // The invoiced period takes no more usage; the next one does, and a period without usage is paid at 0.
    const closed = await usage(acct, sub.id, { quantity: 5, timestamp: "2026-05-20T00:00:00Z" });
    expectError(closed, 400, "invalid_request_error", "usage_period_closed");
    expect(closed.body.error.param).toBe("timestamp");
    await advance(acct, clock.id, "2026-07-01T00:01:00.000Z");
    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices.map((i) => [i.total, i.status, i.payment_id === null])).toEqual([
      [350, "paid", false],
      [0, "paid", true],
    ]);
    const after = await call(`/subscriptions/${sub.id}/usage`, { key: acct.key });
    expect(after.body.data.map((p: any) => [p.period_start, p.total_usage, p.invoiced])).toEqual([
      ["2026-07-01T00:00:00.000Z", 0, false],
      [START, 1000, true],
    ]);
  });

  it("aggregates by max or last_during_period, and prices through tiers (graduated)", async () => {
    const max = await clocked({ price: 1, aggregate_usage: "max" });
    const last = await clocked({ price: 1, aggregate_usage: "last_during_period" });
    const tiered = await clocked({ pricing_model: "graduated", tiers: [{ up_to: 10, unit_price: 1 }, { up_to: null, unit_price: 0.5 }] });
    for (const { acct, clock, sub } of [max, last, tiered]) {
      await advance(acct, clock.id, "2026-05-02T00:00:00.000Z");
      await usage(acct, sub.id, { quantity: 30, timestamp: "2026-05-01T10:00:00Z" });
      await usage(acct, sub.id, { quantity: 5, timestamp: "2026-05-01T11:00:00Z" });
      await usage(acct, sub.id, { quantity: 2, timestamp: "2026-05-01T11:00:00Z", action: "set" });
      await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    }
    expect((await invoicesOf(max.acct, max.sub.id))[0].lines[0]).toMatchObject({ quantity: 30, amount: 3000 });
    expect((await invoicesOf(last.acct, last.sub.id))[0].lines[0]).toMatchObject({ quantity: 2, amount: 200 });
    // sum: 30 + 2 (the set replaced 5 at its second) = 32: 10 × 1.00 + 22 × 0.50 = 21.00.
    expect((await invoicesOf(tiered.acct, tiered.sub.id))[0].lines[0]).toMatchObject({ quantity: 32, amount: 2100 });
  });
});

describe("usage reported while its period is being invoiced", () => {
  it("a record that arrives after the invoicing run read the usage makes that claim lose; the next run prices it in", async () => {
    const { acct, clock, sub } = await clocked({ price: 1 });
    await advance(acct, clock.id, "2026-05-31T23:59:00.000Z");
    expect((await usage(acct, sub.id, { quantity: 3 })).status).toBe(201);
    // The invoicing run reads the usage, then a record lands before its claim commits: the claim
    // checks the count it priced, so it claims nothing, and the record is in the invoice made next.
    const { usageOfOpenPeriods } = await import("../../src/billing/usage");
    const { claimPeriod, claimOf, selectBillableRows } = await import("../../src/billing/periods");
    const { createDb } = await import("../../src/db/client");
    const { subscriptions } = await import("../../src/db/schema");
    const { eq } = await import("drizzle-orm");
    const db = createDb(env.DB);
    const [row] = await selectBillableRows(db).where(eq(subscriptions.id, sub.id));
    const read = await usageOfOpenPeriods(db, [row.sub]);
    expect((await usage(acct, sub.id, { quantity: 4 })).status).toBe(201);
    const { runBatch } = await import("../../src/db/batch");
    const [claimed] = await runBatch(db, [claimPeriod(db, { ...row, usage: read.get(sub.id) }, "renewal", Date.parse("2026-06-01T00:00:01Z"), Date.now())]);
    expect(claimOf(claimed)).toBeNull();
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    expect((await invoicesOf(acct, sub.id))[0].lines[0]).toMatchObject({ quantity: 7, amount: 700 });
    // Once claimed, the period refuses usage, checked in the batch.
    expectError(await usage(acct, sub.id, { quantity: 1, timestamp: "2026-05-31T23:59:30Z" }), 400, "invalid_request_error", "usage_period_closed");
  });

  it("a period that cannot be priced is left unclaimed and logged, and the rest of its chunk renews", async () => {
    // Records written past the bound (as before it existed) price the period beyond the largest
    // chargeable amount: that one subscription is skipped, the other in the same run is invoiced.
    const acct = await signup();
    const clock = await createClock(acct, START);
    const user = await createUser(acct, { testClock: clock.id });
    const dear = (await call("/subscription-plans", { key: acct.key, body: { name: "Dear", price: 10_000, currency: "usd", interval: "month", usage_type: "metered" } })).body;
    const cheap = (await call("/subscription-plans", { key: acct.key, body: { name: "Cheap", price: 1, currency: "usd", interval: "month", usage_type: "metered" } })).body;
    const stuck = await subscribed(acct, user.id, dear.id);
    const fine = await subscribed(acct, user.id, cheap.id);
    expect((await usage(acct, stuck.id, { quantity: 90_000 })).status).toBe(201);
    expect((await usage(acct, fine.id, { quantity: 5 })).status).toBe(201);
    await env.DB.prepare("UPDATE usage_records SET quantity = 1000000000 WHERE subscription_id = ?").bind(stuck.id).run();
    const rows = await readBillableRows(stuck.id, fine.id);
    const errors: string[] = [];
    const original = console.error;
    console.error = (line: string) => errors.push(String(line));
    try {
      const outcomes = await renewRows(rows, Date.parse("2026-06-01T00:00:01Z"));
      expect(outcomes[rows.findIndex((r) => r.sub.id === stuck.id)]).toBe("unpriceable");
      expect(outcomes[rows.findIndex((r) => r.sub.id === fine.id)]).toBe("renewed");
    } finally {
      console.error = original;
    }
    expect(errors.some((e) => e.includes(stuck.id) && e.includes("cannot be priced"))).toBe(true);
    expect(await invoicesOf(acct, stuck.id)).toEqual([]);
    expect((await invoicesOf(acct, fine.id)).map((i) => i.total)).toEqual([500]);
    // The clock's advance moves past it: the other subscription's next period is invoiced.
    expect((await usage(acct, fine.id, { quantity: 2, timestamp: "2026-06-15T00:00:00Z" })).status).toBe(400); // the clock is still at May 1
    await advance(acct, clock.id, "2026-06-20T00:00:00.000Z");
    expect((await usage(acct, fine.id, { quantity: 2 })).status).toBe(201);
    await advance(acct, clock.id, "2026-07-01T00:01:00.000Z");
    expect((await invoicesOf(acct, fine.id)).map((i) => i.total)).toEqual([500, 200]);
    expect(await invoicesOf(acct, stuck.id)).toEqual([]);
  });

  it("a renewal job run twice invoices a metered period once", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Calls", price: 1, currency: "usd", interval: "month", usage_type: "metered" } })).body;
    const sub = await subscribed(acct, user.id, plan.id);
    await usage(acct, sub.id, { quantity: 2 });
    await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(Date.now() - 1000, sub.id).run();
    await env.DB.prepare("UPDATE subscriptions SET billing_anchor = ?, start_date = ?, current_period_start = ? WHERE id = ?")
      .bind(new Date(Date.now() - 31 * 86_400_000).toISOString(), new Date(Date.now() - 31 * 86_400_000).toISOString(), new Date(Date.now() - 31 * 86_400_000).toISOString(), sub.id)
      .run();
    await env.DB.prepare("UPDATE usage_records SET period_index = 0, timestamp = ? WHERE subscription_id = ?").bind(new Date(Date.now() - 20 * 86_400_000).toISOString(), sub.id).run();
    await Promise.all([runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] }), runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] })]);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect((await invoicesOf(acct, sub.id)).map((i) => i.total)).toEqual([200]);
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([200]);
  });
});

describe("metered errors and isolation", () => {
  it("refuses usage for a licensed subscription, a future or too early timestamp, a bad quantity or action, and a canceled subscription", async () => {
    const { acct, sub } = await clocked({ price: 1 });
    const licensedPlan = await createPlan(acct, { price: 5 });
    const user = await createUser(acct);
    const licensed = await subscribed(acct, user.id, licensedPlan.id);
    expectError(await usage(acct, licensed.id, { quantity: 1 }), 400, "invalid_request_error", "subscription_not_metered");
    expectError(await call(`/subscriptions/${licensed.id}/usage`, { key: acct.key }), 400, "invalid_request_error", "subscription_not_metered");
    for (const [body, param] of [
      [{ quantity: 1, timestamp: "2026-05-02T00:00:00Z" }, "timestamp"],
      [{ quantity: 1, timestamp: "2026-04-30T00:00:00Z" }, "timestamp"],
      [{ quantity: 1, timestamp: "yesterday" }, "timestamp"],
      [{ quantity: -1 }, "quantity"],
      [{ quantity: 1.5 }, "quantity"],
      [{ quantity: 1, action: "decrement" }, "action"],
      [{}, "quantity"],
    ] as const) {
      const res = await usage(acct, sub.id, body);
      expectError(res, 400, "invalid_request_error");
      expect(res.body.error.param, JSON.stringify(body)).toBe(param);
    }
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expectError(await usage(acct, sub.id, { quantity: 1 }), 409, "invalid_request_error", "subscription_canceled");
    expect((await call(`/subscriptions/${sub.id}/usage`, { key: acct.key })).body.data).toEqual([]);
  });

  it("a metered plan takes no trial, no quantity and no aggregate on a licensed plan; a plan change keeps the usage type", async () => {
    const acct = await signup();
    const refuse = async (body: Record<string, unknown>, param: string) => {
      const res = await call("/subscription-plans", { key: acct.key, body: { name: "x", price: 1, currency: "usd", interval: "month", ...body } });
      expectError(res, 400, "invalid_request_error");
      expect(res.body.error.param).toBe(param);
    };
    await refuse({ usage_type: "metered", trial_period_days: 7 }, "trial_period_days");
    await refuse({ aggregate_usage: "max" }, "aggregate_usage");
    await refuse({ usage_type: "per_seat" }, "usage_type");
    const metered = (await call("/subscription-plans", { key: acct.key, body: { name: "m", price: 1, currency: "usd", interval: "month", usage_type: "metered" } })).body;
    const licensed = await createPlan(acct, { price: 5 });
    const user = await createUser(acct);
    expectError(await subscribe(acct, user.id, metered.id, CARDS.visa, { quantity: 3 }), 400, "invalid_request_error", "parameter_unexpected");
    expectError(await subscribe(acct, user.id, metered.id, CARDS.visa, { trial_period_days: 3 }), 400, "invalid_request_error", "parameter_unexpected");
    const sub = await subscribed(acct, user.id, metered.id);
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: licensed.id } }), 400, "invalid_request_error", "plan_incompatible");
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: 2 } }), 400, "invalid_request_error", "parameter_unexpected");
    // Nor does it move to another metered plan: the plan prices the open period's usage at its end.
    const dearer = (await call("/subscription-plans", { key: acct.key, body: { name: "m2", price: 9, currency: "usd", interval: "month", usage_type: "metered" } })).body;
    const moved = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: dearer.id } });
    expectError(moved, 400, "invalid_request_error", "plan_incompatible");
    expect(moved.body.error.param).toBe("plan_id");
    expect((await getSubscription(acct, sub.id)).plan_id).toBe(metered.id);
  });

  it("refuses usage that would price its period beyond the largest chargeable amount, counting records written before it", async () => {
    // 10,000.00 (1,000,000 minor units) a unit: 99,999 units reach 99,999,000,000 (the limit is 99,999,999,999).
    const { acct, sub } = await clocked({ price: 10_000 });
    const tooMuch = await usage(acct, sub.id, { quantity: 100_000 });
    expectError(tooMuch, 400, "invalid_request_error", "usage_too_large");
    expect(tooMuch.body.error.param).toBe("quantity");
    expect(tooMuch.body.error.message).toContain("more than 99999:");
    expect((await usage(acct, sub.id, { quantity: 60_000, action: "set" })).status).toBe(201);
    // A set replaces the usage at its second, but the bound counts every record's quantity.
    expectError(await usage(acct, sub.id, { quantity: 40_000, action: "set" }), 400, "invalid_request_error", "usage_too_large");
    expect((await usage(acct, sub.id, { quantity: 39_999 })).status).toBe(201);
    expectError(await usage(acct, sub.id, { quantity: 1 }), 400, "invalid_request_error", "usage_too_large");
    // Nothing of the refused records was written.
    expect((await call(`/subscriptions/${sub.id}/usage`, { key: acct.key })).body.data[0]).toMatchObject({ total_usage: 99_999, records: 2 });
  });

  it("two records racing for the last of a period's room: exactly one is written", async () => {
    const { acct, sub } = await clocked({ price: 10_000 });
    expect((await usage(acct, sub.id, { quantity: 99_000 })).status).toBe(201);
    const raced = await Promise.all([usage(acct, sub.id, { quantity: 600 }), usage(acct, sub.id, { quantity: 600 })]);
    expect(raced.map((r) => r.status).sort()).toEqual([201, 400]);
    expect(raced.find((r) => r.status === 400)!.body.error.code).toBe("usage_too_large");
    expect((await call(`/subscriptions/${sub.id}/usage`, { key: acct.key })).body.data[0]).toMatchObject({ total_usage: 99_600, records: 2 });
  });

  it("another account's or the other mode's subscription answers 404 for usage, both ways", async () => {
    const { acct, sub } = await clocked({ price: 1 });
    const other = await signup("Other");
    for (const key of [other.key, acct.liveKey]) {
      expectError(await call(`/subscriptions/${sub.id}/usage`, { key, body: { quantity: 1 } }), 404, "not_found_error", "resource_missing");
      expectError(await call(`/subscriptions/${sub.id}/usage`, { key }), 404, "not_found_error", "resource_missing");
    }
    expect((await call(`/subscriptions/${sub.id}/usage`, { key: acct.key })).body.data[0].records).toBe(0);
  });
});
