import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { call, expectError, ISO_MS, signup } from "../support/http";
import { createPlan, createUser, DESIGN_TIERS, getSubscription, liveKey, subscribe, subscribed } from "../support/fixtures";
import { card, CARDS } from "../support/cards";
import { makeDue } from "../support/clock";
import { eventsOf, notificationsOf, paymentsOf, periodsOf } from "../support/db";
import { runJobs } from "../support/queue";

describe("POST /subscriptions", () => {
  it("charges the first period and answers the active subscription, one interval to the next billing date", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const res = await subscribe(acct, user.id, plan.id);
    expect(res.status, res.text).toBe(201);
    const sub = res.body;
    expect(sub).toMatchObject({
      id: expect.stringMatching(/^sub_/),
      object: "subscription",
      user_id: user.id,
      plan_id: plan.id,
      status: "active",
      quantity: 1,
      card: { brand: "visa", last4: "4242", exp_month: 12 },
      start_date: expect.stringMatching(ISO_MS),
      next_billing_date: expect.stringMatching(ISO_MS),
      cancel_at_period_end: false,
      canceled_at: null,
    });
    expect(sub.current_period_start).toBe(sub.start_date);
    const start = new Date(sub.start_date);
    const next = new Date(sub.next_billing_date);
    expect(next.getUTCHours()).toBe(start.getUTCHours());
    expect((next.getUTCMonth() - start.getUTCMonth() + 12) % 12).toBe(1);
    expect((await getSubscription(acct, sub.id))).toEqual(sub);

    const [payment] = await paymentsOf(acct.id);
    expect(payment).toMatchObject({ subscription_id: sub.id, user_id: user.id, amount: 1999, currency: "usd", status: "completed" });
    expect(await periodsOf(sub.id)).toMatchObject([{ period_index: 0, amount: 1999, status: "paid", attempts: 1, payment_id: payment.id }]);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active"]);
    const [completed] = await eventsOf(acct.id, "payment.completed");
    expect(completed.body.data).toMatchObject({
      transaction_id: payment.id,
      amount: 1999,
      currency: "usd",
      status: "completed",
      customer: { id: user.id, email: user.email },
      subscription_id: sub.id,
    });
  });

  it("prices tiered plans by quantity: volume 6 units is 3900, graduated 4150; 20 units 12000 and 12750", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const volume = await createPlan(acct, { price: undefined, pricing_model: "volume", tiers: DESIGN_TIERS });
    const graduated = await createPlan(acct, { price: undefined, pricing_model: "graduated", tiers: DESIGN_TIERS });
    const fixed = await createPlan(acct, { price: 7.25 });
    const subs = [
      await subscribed(acct, user.id, volume.id, CARDS.visa, { quantity: 6 }),
      await subscribed(acct, user.id, graduated.id, CARDS.visa, { quantity: 6 }),
      await subscribed(acct, user.id, volume.id, CARDS.visa, { quantity: 20 }),
      await subscribed(acct, user.id, graduated.id, CARDS.visa, { quantity: 20 }),
      await subscribed(acct, user.id, fixed.id, CARDS.visa, { quantity: 3 }),
    ];
    expect(subs.map((s) => s.quantity)).toEqual([6, 6, 20, 20, 3]);
    const amounts = new Map((await paymentsOf(acct.id)).map((p) => [p.subscription_id, p.amount]));
    expect(subs.map((s) => amounts.get(s.id))).toEqual([3900, 4150, 12000, 12750, 2175]);

    // The renewal charges the same tier arithmetic.
    await makeDue(subs[1].id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [subs[1].id] });
    const renewal = (await paymentsOf(acct.id)).filter((p) => p.subscription_id === subs[1].id);
    expect(renewal.map((p) => p.amount)).toEqual([4150, 4150]);
  });

  it("answers 402 on a decline, records the failed payment and payment.failed, and creates no subscription", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    for (const [pan, decline, code] of [
      [CARDS.declined, "card_declined", "card_declined"],
      [CARDS.insufficientFunds, "insufficient_funds", "card_declined"],
    ] as const) {
      const res = await subscribe(acct, user.id, plan.id, pan);
      const error = expectError(res, 402, "card_error", code);
      expect(res.body.error.decline_code).toBe(decline);
      expect(error.message).not.toMatch(/\d{6}/);
    }
    expect((await call("/subscriptions", { key: acct.key })).body.data).toEqual([]);
    const failed = await paymentsOf(acct.id);
    expect(failed.map((p) => [p.status, p.subscription_id, p.amount, p.failure_code])).toEqual([
      ["failed", null, 1999, "card_declined"],
      ["failed", null, 1999, "insufficient_funds"],
    ]);
    const events = await eventsOf(acct.id, "payment.failed");
    expect(events.map((e) => e.body.data.status)).toEqual(["failed", "failed"]);
    expect(await eventsOf(acct.id, "subscription_created")).toEqual([]);
    const { count } = (await env.DB.prepare("SELECT count(*) AS count FROM subscriptions WHERE account_id = ?").bind(acct.id).first<{ count: number }>())!;
    expect(count).toBe(0);
  });

  it("replays a declined request's 402 under its Idempotency-Key without charging again", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const body = { user_id: user.id, plan_id: plan.id, ...card(CARDS.declined) };
    const first = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "decline-1" });
    expectError(first, 402, "card_error");
    const again = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "decline-1" });
    expect(again.status).toBe(402);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(await paymentsOf(acct.id)).toHaveLength(1);
  });

  it("answers 400 for invalid input, naming the parameter and never echoing the card number", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const base = { user_id: user.id, plan_id: plan.id, ...card() };
    const cases: [Record<string, unknown>, string, string][] = [
      [{ ...base, card_number: "4242424242424241" }, "invalid_number", "card_number"],
      [{ ...base, expiration_month: 13 }, "invalid_expiry_month", "expiration_month"],
      [{ ...base, expiration_year: 2020 }, "expired_card", "expiration_year"],
      [{ ...base, cvv: "12" }, "invalid_cvc", "cvv"],
      [{ ...base, card_number: CARDS.amex, cvv: "123" }, "invalid_cvc", "cvv"],
      [{ ...base, payment_method: "bank_transfer" }, "payment_method_invalid", "payment_method"],
      [{ ...base, quantity: 0 }, "parameter_invalid", "quantity"],
      [{ ...base, quantity: 1.5 }, "parameter_invalid", "quantity"],
      [{ ...base, user_id: undefined }, "parameter_missing", "user_id"],
      [{ ...base, cvv: undefined }, "parameter_missing", "cvv"],
    ];
    for (const [body, code, param] of cases) {
      const res = await call("/subscriptions", { key: acct.key, body });
      expect(res.status, `${JSON.stringify(body)} ${res.text}`).toBe(400);
      expect(res.body.error.code, JSON.stringify(body)).toBe(code);
      expect(res.body.error.param).toBe(param);
      expect(res.text).not.toContain("424242424242");
    }
    expect(await paymentsOf(acct.id)).toEqual([]);
  });

  it("refuses an archived plan with 400 plan_inactive, but its existing subscriptions keep renewing", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { active: false } })).status).toBe(200);
    const res = await subscribe(acct, user.id, plan.id);
    expect(expectError(res, 400, "invalid_request_error", "plan_inactive").param).toBe("plan_id");

    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    const renewed = await getSubscription(acct, sub.id);
    expect(renewed.status).toBe("active");
    expect(renewed.current_period_start).toBe(sub.next_billing_date);
    expect((await paymentsOf(acct.id)).map((p) => p.status)).toEqual(["completed", "completed"]);
  });

  it("answers 404 for another account's user or plan, naming the parameter", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const theirUser = await createUser(other);
    const theirPlan = await createPlan(other);
    const noUser = await subscribe(acct, theirUser.id, plan.id);
    expect(expectError(noUser, 404, "not_found_error", "resource_missing").param).toBe("user_id");
    const noPlan = await subscribe(acct, user.id, theirPlan.id);
    expect(expectError(noPlan, 404, "not_found_error", "resource_missing").param).toBe("plan_id");
    expect(await paymentsOf(acct.id)).toEqual([]);
  });

  it("answers 400 livemode_unavailable to a live key, which has no card processor yet", async () => {
    const acct = await signup();
    const live = await liveKey(acct.id);
    // The live key's own user and plan: a test-mode user or plan is not found in live mode.
    const user = await createUser({ id: acct.id, key: live });
    const plan = await createPlan({ id: acct.id, key: live });
    const res = await call("/subscriptions", { key: live, body: { user_id: user.id, plan_id: plan.id, ...card() } });
    expectError(res, 400, "invalid_request_error", "livemode_unavailable");
    expect(await paymentsOf(acct.id)).toEqual([]);
  });

  it("needs subscriptions:write; subscriptions:read may only read", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const key = (await call("/api/keys", { key: acct.key, body: { scopes: ["subscriptions:read"] } })).body.secret as string;
    expectError(await call("/subscriptions", { key, body: { user_id: user.id, plan_id: plan.id, ...card() } }), 403, "permission_error");
    expectError(await call(`/subscriptions/${sub.id}`, { key, method: "DELETE" }), 403, "permission_error");
    expectError(await call(`/subscriptions/${sub.id}`, { key, method: "PUT", body: { quantity: 2 } }), 403, "permission_error");
    expect((await call(`/subscriptions/${sub.id}`, { key })).status).toBe(200);
  });
});

describe("GET /subscriptions", () => {
  it("lists newest first, filters by user and status, and hides other accounts' subscriptions", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const ada = await createUser(acct);
    const bob = await createUser(acct);
    const plan = await createPlan(acct);
    const a1 = await subscribed(acct, ada.id, plan.id);
    const b1 = await subscribed(acct, bob.id, plan.id);
    const a2 = await subscribed(acct, ada.id, plan.id);
    await call(`/subscriptions/${a1.id}`, { key: acct.key, method: "DELETE" });
    const ids = async (query: string, key = acct.key) => (await call(`/subscriptions${query}`, { key })).body.data.map((s: { id: string }) => s.id);
    expect(await ids("")).toEqual([a2.id, b1.id, a1.id]);
    expect(await ids(`?user_id=${ada.id}`)).toEqual([a2.id, a1.id]);
    expect(await ids("?status=canceled")).toEqual([a1.id]);
    expect(await ids(`?status=active&user_id=${ada.id}`)).toEqual([a2.id]);
    expect(await ids("", other.key)).toEqual([]);
    expectError(await call("/subscriptions?status=paused", { key: acct.key }), 400, "invalid_request_error", "parameter_invalid");
    expectError(await call(`/subscriptions/${a1.id}`, { key: other.key }), 404, "not_found_error", "resource_missing");
  });
});

describe("DELETE /subscriptions/{id}", () => {
  it("cancels now, emits subscription_canceled, and a second cancel answers 409", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: sub.id, status: "canceled", canceled_at: expect.stringMatching(ISO_MS), next_billing_date: null });
    expect(await getSubscription(acct, sub.id)).toEqual(res.body);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_canceled:canceled"]);
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "subscription_canceled");
    expectError(await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" }), 409, "invalid_request_error", "subscription_canceled");
    expectError(await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: 2 } }), 409, "invalid_request_error", "subscription_canceled");

    // A canceled subscription is never renewed.
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect(await paymentsOf(acct.id)).toHaveLength(1);
  });

  it("replays a cancel under the same Idempotency-Key instead of answering 409", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const first = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-1" });
    const again = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "cancel-1" });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
  });

  it("at_period_end=true keeps it active; the renewal run then cancels instead of charging", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const res = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "active", cancel_at_period_end: true, canceled_at: null, next_billing_date: sub.next_billing_date });

    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    const canceled = await getSubscription(acct, sub.id);
    expect(canceled).toMatchObject({ status: "canceled", cancel_at_period_end: false, canceled_at: sub.next_billing_date });
    expect(await paymentsOf(acct.id)).toHaveLength(1);
    expect(await notificationsOf(acct.id, sub.id)).toEqual([
      "subscription_created:active",
      "subscription_updated:active",
      "subscription_canceled:canceled",
    ]);
  });

  it("PUT cancel_at_period_end=false undoes a scheduled cancellation", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: false } });
    expect(res.body).toMatchObject({ status: "active", cancel_at_period_end: false });
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect((await getSubscription(acct, sub.id)).status).toBe("active");
    expect(await paymentsOf(acct.id)).toHaveLength(2);
  });

  it("answers 404 for another account's subscription and for an unknown id", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    expectError(await call(`/subscriptions/${sub.id}`, { key: other.key, method: "DELETE" }), 404, "not_found_error");
    expectError(await call(`/subscriptions/${sub.id}`, { key: other.key, method: "PUT", body: card() }), 404, "not_found_error");
    expectError(await call("/subscriptions/sub_nope", { key: acct.key, method: "DELETE" }), 404, "not_found_error");
    expect((await getSubscription(acct, sub.id)).status).toBe("active");
  });
});

describe("PUT /subscriptions/{id}", () => {
  it("replaces the card without charging; the next renewal charges the new card", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.mastercard) });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: sub.id, status: "active", card: { brand: "mastercard", last4: "4444" }, updated_at: expect.stringMatching(ISO_MS) });
    expect(res.body.updated_at >= sub.updated_at).toBe(true);
    expect(await paymentsOf(acct.id)).toHaveLength(1);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_updated:active"]);

    // A card that declines, once vaulted, makes the next renewal fail.
    await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.declined) });
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect((await getSubscription(acct, sub.id)).status).toBe("past_due");
    const renewal = (await paymentsOf(acct.id))[1];
    expect(renewal).toMatchObject({ status: "failed", failure_code: "card_declined", amount: 1999 });
  });

  it("changes plan and quantity from the next period with proration_behavior none", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const basic = await createPlan(acct, { price: 10 });
    const graduated = await createPlan(acct, { price: undefined, pricing_model: "graduated", tiers: DESIGN_TIERS });
    const sub = await subscribed(acct, user.id, basic.id);
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: graduated.id, quantity: 6, proration_behavior: "none" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ plan_id: graduated.id, quantity: 6, next_billing_date: sub.next_billing_date });
    expect((await paymentsOf(acct.id)).map((p) => p.amount)).toEqual([1000]);
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    expect((await paymentsOf(acct.id)).map((p) => p.amount)).toEqual([1000, 4150]);
  });

  it("answers 400, 404 and 409 for invalid updates", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const yearly = await createPlan(acct, { interval: "year" });
    const euro = await createPlan(acct, { currency: "eur" });
    const archived = await createPlan(acct);
    await call(`/subscription-plans/${archived.id}`, { key: acct.key, method: "PATCH", body: { active: false } });
    const theirPlan = await createPlan(other);
    const sub = await subscribed(acct, user.id, plan.id);
    const put = (body: unknown) => call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body });

    expect(expectError(await put({}), 400, "invalid_request_error", "parameter_missing")).toBeTruthy();
    expect(expectError(await put({ card_number: CARDS.visa }), 400, "invalid_request_error", "parameter_missing").param).toBe("payment_method");
    expect(expectError(await put(card(CARDS.visa, { cvv: "1" })), 400, "card_error", "invalid_cvc").param).toBe("cvv");
    expect(expectError(await put(card("4242424242424241")), 400, "card_error", "invalid_number").param).toBe("card_number");
    expect(expectError(await put({ plan_id: yearly.id }), 400, "invalid_request_error", "plan_incompatible").param).toBe("plan_id");
    expect(expectError(await put({ plan_id: euro.id }), 400, "invalid_request_error", "plan_incompatible").param).toBe("plan_id");
    expect(expectError(await put({ plan_id: archived.id }), 400, "invalid_request_error", "plan_inactive").param).toBe("plan_id");
    expect(expectError(await put({ plan_id: theirPlan.id }), 404, "not_found_error").param).toBe("plan_id");
    expectError(await put({ quantity: 0 }), 400, "invalid_request_error", "parameter_invalid");
    expect(await getSubscription(acct, sub.id)).toEqual(sub);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active"]);
  });
});

describe("card data", () => {
  it("never stores a card number or CVV, in any table", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst, { cvv: "739" });
    await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...card(CARDS.declined, { cvv: "738" }) }, idempotencyKey: "scan-1" });
    await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: card(CARDS.mastercard, { cvv: "737" }), idempotencyKey: "scan-2" });
    const tables = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'd1_%'").all<{ name: string }>();
    for (const { name } of tables.results) {
      const rows = await env.DB.prepare(`SELECT * FROM "${name}"`).all();
      const dump = JSON.stringify(rows.results);
      for (const secret of [CARDS.declineAfterFirst, CARDS.declined, CARDS.mastercard, "739", "738", "737"]) {
        expect(dump.includes(`"${secret}"`) || dump.includes(secret.length > 4 ? secret : `"cvv":"${secret}"`), `${name} holds ${secret}`).toBe(false);
      }
    }
  });
});
