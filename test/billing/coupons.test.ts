// Coupons (issue 21, item 5): /coupons, `coupon` on subscription create and update, once /
// repeating / forever on the invoices a test clock makes, max_redemptions and redeem_by enforced
// in the batch that redeems (two redemptions racing for the last one give exactly one, and the
// loser's card is never charged), a 100% coupon (the card vaulted, nothing charged), the errors,
// and isolation between accounts and modes.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, fetchWith, signup } from "../support/http";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { type D1FaultKind, type D1Op, faultyD1, isWrite, writesTo } from "../support/faults";
import { createKey, createPlan, createUser, getSubscription, subscribe, subscribed } from "../support/fixtures";
import { CARDS, cardFields } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { invoicePdfText } from "../support/pdf";

async function createCoupon(acct: Account, body: Record<string, unknown>, key = acct.key) {
  const res = await call("/coupons", { key, body: { name: "Sale", ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse(); // oldest first
}

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

/** A user on a test clock at `start`, and a monthly plan at `price`. */
async function clocked(price = 30, start = "2026-01-15T00:00:00.000Z") {
  const acct = await signup("Coupon Co");
  const clock = await createClock(acct, start);
  const user = await createUser(acct, { testClock: clock.id });
  const plan = await createPlan(acct, { price });
  return { acct, clock, user, plan };
}

const MONTHS = ["2026-02-15", "2026-03-15", "2026-04-15", "2026-05-15"].map((d) => `${d}T00:01:00.000Z`);

describe("POST /coupons, GET /coupons, GET /coupons/{id}, DELETE /coupons/{id}", () => {
  it("creates a percent_off coupon under the caller's id and a generated one, lists them newest first, reads and deletes", async () => {
    const acct = await signup();
    const named = await createCoupon(acct, { id: "SUMMER20", name: "Summer", percent_off: 20, duration: "repeating", duration_in_months: 2, max_redemptions: 5 });
    expect(named).toEqual({
      id: "SUMMER20",
      object: "coupon",
      livemode: false,
      name: "Summer",
      percent_off: 20,
      amount_off: null,
      currency: null,
      duration: "repeating",
      duration_in_months: 2,
      max_redemptions: 5,
      redeem_by: null,
      times_redeemed: 0,
      valid: true,
      created_at: expect.any(String),
      deleted_at: null,
    });
    const generated = await createCoupon(acct, { amount_off: 500, currency: "USD", duration: "once" });
    expect(generated.id).toMatch(/^co_[0-9a-z]{26}$/);
    expect(generated).toMatchObject({ percent_off: null, amount_off: 500, currency: "usd", duration: "once", duration_in_months: null });

    const list = await call("/coupons", { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body.data.map((c: any) => c.id)).toEqual([generated.id, "SUMMER20"]);
    const page = await call("/coupons?limit=1&starting_after=" + generated.id, { key: acct.key });
    expect(page.body.data.map((c: any) => c.id)).toEqual(["SUMMER20"]);
    expect(page.body.has_more).toBe(false);

    expect((await call("/coupons/SUMMER20", { key: acct.key })).body).toEqual(named);
    const deleted = await call("/coupons/SUMMER20", { key: acct.key, method: "DELETE" });
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toMatchObject({ id: "SUMMER20", valid: false, deleted_at: expect.any(String) });
    // Deleting again answers the coupon as the first delete left it; the id stays taken.
    const again = await call("/coupons/SUMMER20", { key: acct.key, method: "DELETE" });
    expect(again.body.deleted_at).toBe(deleted.body.deleted_at);
    expectError(await call("/coupons", { key: acct.key, body: { id: "SUMMER20", name: "x", percent_off: 5, duration: "once" } }), 409, "invalid_request_error", "coupon_exists");
  });

  it.each([
    [{ percent_off: 20, amount_off: 100, currency: "usd", duration: "once" }, "parameter_missing", "amount_off"],
    [{ duration: "once" }, "parameter_missing", "percent_off"],
    [{ percent_off: 0, duration: "once" }, "parameter_invalid", "percent_off"],
    [{ percent_off: 100.5, duration: "once" }, "parameter_invalid", "percent_off"],
    [{ percent_off: 33.333, duration: "once" }, "parameter_invalid", "percent_off"],
    [{ percent_off: 10, currency: "usd", duration: "once" }, "parameter_unexpected", "currency"],
    [{ amount_off: 100, duration: "once" }, "parameter_missing", "currency"],
    [{ amount_off: 0, currency: "usd", duration: "once" }, "parameter_invalid", "amount_off"],
    [{ amount_off: 1.5, currency: "usd", duration: "once" }, "parameter_invalid", "amount_off"],
    [{ amount_off: 100, currency: "xyz", duration: "once" }, "currency_invalid", "currency"],
    [{ percent_off: 10, duration: "repeating" }, "parameter_missing", "duration_in_months"],
    [{ percent_off: 10, duration: "forever", duration_in_months: 3 }, "parameter_unexpected", "duration_in_months"],
    [{ percent_off: 10, duration: "weekly" }, "parameter_invalid", "duration"],
    [{ percent_off: 10, duration: "once", redeem_by: "2020-01-01T00:00:00Z" }, "parameter_invalid", "redeem_by"],
    [{ percent_off: 10, duration: "once", redeem_by: "next tuesday" }, "parameter_invalid", "redeem_by"],
    [{ percent_off: 10, duration: "once", id: "has space" }, "parameter_invalid", "id"],
    [{ percent_off: 10, duration: "once", max_redemptions: 0 }, "parameter_invalid", "max_redemptions"],
  ])("refuses %j with 400 %s on %s, and stores nothing", async (body, code, param) => {
    const acct = await signup();
    const res = await call("/coupons", { key: acct.key, body: { name: "Bad", ...body } });
    expectError(res, 400, "invalid_request_error", code);
    expect(res.body.error.param).toBe(param);
    expect(res.body.error.message).toMatch(/\.$/);
    expect((await call("/coupons", { key: acct.key })).body.data).toEqual([]);
  });

  it("is the account's and the mode's own: another account's or the other mode's coupon answers 404, and cannot be redeemed", async () => {
    const owner = await signup("Owner");
    const other = await signup("Other");
    await createCoupon(owner, { id: "MINE", percent_off: 50, duration: "forever" });
    expectError(await call("/coupons/MINE", { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await call("/coupons/MINE", { key: owner.liveKey }), 404, "not_found_error", "resource_missing");
    expectError(await call("/coupons/MINE", { key: other.key, method: "DELETE" }), 404, "not_found_error", "resource_missing");
    expect((await call("/coupons", { key: other.key })).body.data).toEqual([]);
    expect((await call("/coupons", { key: owner.liveKey })).body.data).toEqual([]);
    // The same id is free in another account.
    await createCoupon(other, { id: "MINE", percent_off: 5, duration: "once" });
    const user = await createUser(other);
    const plan = await createPlan(other);
    const sub = await subscribed(other, user.id, plan.id, CARDS.visa, { coupon: "MINE" });
    const [invoice] = await invoicesOf(other, sub.id);
    expect(invoice.discount).toBe(Math.round(plan.unit_amount * 0.05));
    expect((await call("/coupons/MINE", { key: owner.key })).body.times_redeemed).toBe(0);
  });

  it("needs coupons:read to read and coupons:write to create or delete", async () => {
    const acct = await signup();
    await createCoupon(acct, { id: "SCOPED", percent_off: 10, duration: "once" });
    const reader = await createKey(acct, ["coupons:read"]);
    const other = await createKey(acct, ["plans:write"]);
    expect((await call("/coupons/SCOPED", { key: reader.secret })).status).toBe(200);
    expectError(await call("/coupons", { key: reader.secret, body: { name: "x", percent_off: 5, duration: "once" } }), 403, "permission_error");
    expectError(await call("/coupons/SCOPED", { key: reader.secret, method: "DELETE" }), 403, "permission_error");
    expectError(await call("/coupons/SCOPED", { key: other.secret }), 403, "permission_error");
  });
});

describe("a discount on a subscription's invoices, driven by a test clock", () => {
  it("20% off for 2 months discounts exactly the first two invoices (30.00 -> 24.00, 24.00, then 30.00)", async () => {
    const { acct, clock, user, plan } = await clocked(30);
    await createCoupon(acct, { id: "TWENTY", percent_off: 20, duration: "repeating", duration_in_months: 2 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "TWENTY" });
    expect(sub.discount).toEqual({ coupon: "TWENTY", start: "2026-01-15T00:00:00.000Z", end: "2026-03-15T00:00:00.000Z" });
    for (const at of MONTHS.slice(0, 3)) await advance(acct, clock.id, at);

    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices.map((i) => [i.subtotal, i.discount, i.total, i.amount_paid, i.status])).toEqual([
      [3000, 600, 2400, 2400, "paid"],
      [3000, 600, 2400, 2400, "paid"],
      [3000, 0, 3000, 3000, "paid"],
      [3000, 0, 3000, 3000, "paid"],
    ]);
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([2400, 2400, 3000, 3000]);
    // A discounted invoice names its coupon (the first's by the subscription's creation, the second's by the renewal); the others none.
    const twenty = { id: "TWENTY", name: "Sale" };
    expect(invoices.map((i) => i.coupon)).toEqual([twenty, twenty, null, null]);
    expect((await call("/coupons/TWENTY", { key: acct.key })).body.times_redeemed).toBe(1);

    // Each discounted invoice's PDF shows its number, discount and total.
    for (const invoice of invoices.slice(0, 2)) {
      const text = await invoicePdfText(acct.key, invoice.id);
      expect(text).toContain(invoice.number);
      expect(text).toContain("Discount (Sale) -6.00 USD");
      expect(text).toContain("Total 24.00 USD");
    }
  });

  it("once: only the first invoice; forever: every invoice; amount_off: its amount", async () => {
    const { acct, clock, user, plan } = await clocked(30);
    await createCoupon(acct, { id: "ONCE", percent_off: 50, duration: "once" });
    await createCoupon(acct, { id: "ALWAYS", amount_off: 750, currency: "usd", duration: "forever" });
    const once = await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "ONCE" });
    const always = await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "ALWAYS" });
    expect(once.discount.end).toBeNull();
    for (const at of MONTHS.slice(0, 2)) await advance(acct, clock.id, at);
    expect((await invoicesOf(acct, once.id)).map((i) => i.total)).toEqual([1500, 3000, 3000]);
    expect((await invoicesOf(acct, always.id)).map((i) => i.total)).toEqual([2250, 2250, 2250]);
  });

  it("a 100% coupon: the card is vaulted, nothing is charged, the invoices are paid at 0, and it renews", async () => {
    const { acct, clock, user, plan } = await clocked(30);
    await createCoupon(acct, { id: "FREE", percent_off: 100, duration: "repeating", duration_in_months: 1 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "FREE" });
    expect(sub.status).toBe("active");
    await advance(acct, clock.id, MONTHS[0]);
    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices.map((i) => [i.total, i.amount_due, i.amount_paid, i.status, i.payment_id === null])).toEqual([
      [0, 0, 0, "paid", true],
      [3000, 3000, 3000, "paid", false],
    ]);
    // Only the second period moved money, charged to the card vaulted at creation.
    expect((await paymentsOf(acct, sub.id)).map((p) => [p.amount, p.status])).toEqual([[3000, "completed"]]);
    expect((await getSubscription(acct, sub.id)).status).toBe("active");
  });

  it("a coupon redeemed by PUT applies from the next invoice; coupon null removes the discount", async () => {
    const { acct, clock, user, plan } = await clocked(30);
    await createCoupon(acct, { id: "LATER", percent_off: 10, duration: "forever" });
    const sub = await subscribed(acct, user.id, plan.id);
    await advance(acct, clock.id, "2026-01-20T00:00:00.000Z");
    const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { coupon: "LATER" } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.discount).toEqual({ coupon: "LATER", start: "2026-01-20T00:00:00.000Z", end: null });
    await advance(acct, clock.id, MONTHS[0]);
    const removed = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { coupon: null } });
    expect(removed.body.discount).toBeNull();
    await advance(acct, clock.id, MONTHS[1]);
    expect((await invoicesOf(acct, sub.id)).map((i) => i.total)).toEqual([3000, 2700, 3000]);
  });

  it("rounds the percentage once per invoice, half away from zero, in JPY (0 decimals) and KWD (3)", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await createCoupon(acct, { id: "THIRD", percent_off: 33.33, duration: "forever" });
    const yen = await createPlan(acct, { price: 1001, currency: "jpy" });
    const dinar = await createPlan(acct, { price: 1.005, currency: "kwd" });
    const a = await subscribed(acct, user.id, yen.id, CARDS.visa, { coupon: "THIRD" });
    const b = await subscribed(acct, user.id, dinar.id, CARDS.visa, { coupon: "THIRD" });
    // 1001 × 0.3333 = 333.6333 -> 334; 1005 × 0.3333 = 334.9665 -> 335.
    expect((await invoicesOf(acct, a.id)).map((i) => [i.subtotal, i.discount, i.total])).toEqual([[1001, 334, 667]]);
    expect((await invoicesOf(acct, b.id)).map((i) => [i.subtotal, i.discount, i.total])).toEqual([[1005, 335, 670]]);
  });
});

describe("redeeming: max_redemptions, redeem_by, deletion and currency, checked in the batch that redeems", () => {
  it("two subscriptions racing for a coupon's last redemption: exactly one gets it, and the other's card is never charged", async () => {
    const acct = await signup();
    const plan = await createPlan(acct, { price: 30 });
    await createCoupon(acct, { id: "LAST", percent_off: 10, duration: "once", max_redemptions: 1 });
    const users = await Promise.all([createUser(acct, { name: "A" }), createUser(acct, { name: "B" })]);
    const results = await Promise.all(users.map((u, i) => subscribe(acct, u.id, plan.id, CARDS.visa, { coupon: "LAST" }).then((r) => ({ r, i }))));
    const won = results.filter(({ r }) => r.status === 201);
    const lost = results.filter(({ r }) => r.status !== 201);
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expectError(lost[0].r, 400, "invalid_request_error", "coupon_max_redemptions");
    expect(lost[0].r.body.error.param).toBe("coupon");
    const payments = await call("/payments?limit=100", { key: acct.key });
    expect(payments.body.data).toHaveLength(1);
    expect(payments.body.data[0].amount).toBe(2700);
    expect((await call("/coupons/LAST", { key: acct.key })).body).toMatchObject({ times_redeemed: 1, valid: false });
    const redemptions = await env.DB.prepare("SELECT COUNT(*) AS n FROM coupon_redemptions WHERE account_id = ?").bind(acct.id).first<{ n: number }>();
    expect(redemptions?.n).toBe(1);
  });

  it("a declined first charge gives its redemption back; a retry with the same Idempotency-Key redeems once", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    await createCoupon(acct, { id: "ONE", percent_off: 10, duration: "once", max_redemptions: 1 });
    const declined = await subscribe(acct, user.id, plan.id, CARDS.declined, { coupon: "ONE" });
    expect(declined.status).toBe(402);
    expect((await call("/coupons/ONE", { key: acct.key })).body.times_redeemed).toBe(0);

    const body = { user_id: user.id, plan_id: plan.id, coupon: "ONE", ...cardFields(CARDS.visa) };
    const first = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "coupon-retry" });
    expect(first.status, first.text).toBe(201);
    const again = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "coupon-retry" });
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect((await call("/coupons/ONE", { key: acct.key })).body.times_redeemed).toBe(1);
  });

  it("refuses a deleted coupon, one past redeem_by, one used up, one in another currency, and an unknown one, before charging", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    await createCoupon(acct, { id: "GONE", percent_off: 10, duration: "once" });
    await call("/coupons/GONE", { key: acct.key, method: "DELETE" });
    await createCoupon(acct, { id: "SOON", percent_off: 10, duration: "once", redeem_by: new Date(Date.now() + 60_000).toISOString() });
    await env.DB.prepare("UPDATE coupons SET redeem_by = ? WHERE id = 'SOON' AND account_id = ?").bind(new Date(Date.now() - 1000).toISOString(), acct.id).run();
    await createCoupon(acct, { id: "EUROS", amount_off: 100, currency: "eur", duration: "once" });
    await createCoupon(acct, { id: "USED", percent_off: 10, duration: "once", max_redemptions: 1 });
    await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "USED" });

    const refusals: [string, number, string][] = [
      ["GONE", 400, "coupon_invalid"],
      ["SOON", 400, "coupon_expired"],
      ["USED", 400, "coupon_max_redemptions"],
      ["EUROS", 400, "coupon_currency_mismatch"],
      ["NOPE", 404, "resource_missing"],
    ];
    for (const [coupon, status, code] of refusals) {
      const res = await subscribe(acct, user.id, plan.id, CARDS.visa, { coupon });
      expectError(res, status, status === 404 ? "not_found_error" : "invalid_request_error", code);
      expect(res.body.error.param).toBe("coupon");
    }
    expect((await call("/payments?limit=100", { key: acct.key })).body.data).toHaveLength(1);
    expect((await call("/subscriptions?limit=100", { key: acct.key })).body.data).toHaveLength(1);
  });

  it("PUT with a coupon it cannot redeem answers 400 and changes nothing; a canceled subscription takes none", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    await createCoupon(acct, { id: "USED", percent_off: 10, duration: "once", max_redemptions: 1 });
    await createCoupon(acct, { id: "OK", percent_off: 10, duration: "once" });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { coupon: "USED" });
    const other = await subscribed(acct, user.id, plan.id);
    const refused = await call(`/subscriptions/${other.id}`, { key: acct.key, method: "PUT", body: { coupon: "USED", quantity: 3 } });
    expectError(refused, 400, "invalid_request_error", "coupon_max_redemptions");
    expect(await getSubscription(acct, other.id)).toMatchObject({ quantity: 1, discount: null });
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { coupon: "OK" } }), 409, "invalid_request_error", "subscription_canceled");
    expect((await call("/coupons/OK", { key: acct.key })).body.times_redeemed).toBe(0);
  });
});

describe("a subscription created with a coupon under D1 faults, then the same request again", () => {
  const BATCHES = {
    // The redemption's batch: the reservation, before the card is charged.
    "the redemption's batch": (op: D1Op) => isWrite(op) && writesTo(op, "coupon_redemptions") && !writesTo(op, "subscriptions"),
    // The batch that records the charge and creates the subscription.
    "the creation's batch": (op: D1Op) => isWrite(op) && writesTo(op, "subscriptions"),
  };
  const cases: [keyof typeof BATCHES, D1FaultKind][] = [];
  for (const batch of Object.keys(BATCHES) as (keyof typeof BATCHES)[]) {
    for (const fault of ["fail_before_commit", "commit_then_throw"] as const) cases.push([batch, fault]);
  }
  it.each(cases)("%s, %s: one subscription, one discounted payment, one redemption", async (batch, fault) => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 30 });
    await createCoupon(acct, { id: "HALF", percent_off: 50, duration: "once", max_redemptions: 1 });
    const body = { user_id: user.id, plan_id: plan.id, coupon: "HALF", ...cardFields(CARDS.visa) };
    const DB = faultyD1(env.DB, { kind: fault, when: BATCHES[batch] });
    const key = `fault-${batch.length}-${fault}`;
    const first = await fetchWith({ DB }, "/subscriptions", { key: acct.key, json: body, headers: { "idempotency-key": key } });
    expect(DB.fired, `the fault fired: ${first.text}`).toHaveLength(1);
    // The creation's batch records money that moved, so the route commits it again itself (201);
    // a lost redemption batch answers 500 and keeps the key claimed (its outcome is unknown).
    expect(first.status, first.text).toBe(batch === "the creation's batch" ? 201 : 500);
    expect(first.text).not.toMatch(/D1_ERROR|Network connection lost/);
    // The retry comes after the claim's lock ran out (as a client's would).
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();

    const again = await call("/subscriptions", { key: acct.key, body, idempotencyKey: key });
    expect(again.status, again.text).toBe(201);
    if (first.status === 201) expect(again.body).toEqual(first.body);
    expect((await call("/subscriptions?limit=100", { key: acct.key })).body.data.map((s: any) => s.id)).toEqual([again.body.id]);
    expect((await paymentsOf(acct, again.body.id)).map((p) => [p.amount, p.status])).toEqual([[1500, "completed"]]);
    expect((await call("/coupons/HALF", { key: acct.key })).body.times_redeemed).toBe(1);
    const rows = await env.DB.prepare("SELECT subscription_id FROM coupon_redemptions WHERE account_id = ?").bind(acct.id).all<{ subscription_id: string }>();
    expect(rows.results).toEqual([{ subscription_id: again.body.id }]);
  });
});
