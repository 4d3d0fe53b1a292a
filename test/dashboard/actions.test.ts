// Every dashboard action goes through the API's own route, as the session's key: the same
// validation, idempotency and events. One action per page, checked against what the API records.
import { env } from "../support/env";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createPlan, createUser, payoutWithoutSettlement, subscribed } from "../support/fixtures";
import { eventsFor, eventsOf } from "../support/db";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";
import { waitFor } from "../support/wait";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Actions");
  cookie = await signIn(acct.key);
});

describe("payouts page", () => {
  it("cancels a pending payout through POST /payouts/{id}/cancel: the same payout.canceled event as the API, once on a double submit", async () => {
    const payout = await payoutWithoutSettlement(acct, { amount: 1234, currency: "usd" });
    const list = await dashboardFetch("/dashboard/payouts", { cookie });
    expect(textOf(list.html)).toContain("12.34 USD");
    const action = `/dashboard/payouts/${payout.id}/cancel`;
    const form = formOf(list.html, action);
    expect(form.idempotency_key).toMatch(/^dash_[0-9A-Za-z]{32}$/);
    const first = await dashboardFetch(action, { cookie, form });
    expect(first.status, first.html.slice(0, 400)).toBe(303);
    expect(first.location).toBe(`/dashboard/payouts?done=payout_canceled&id=${payout.id}`);
    // The same form submitted again (a double click): the API replays its answer.
    const second = await dashboardFetch(action, { cookie, form });
    expect(second.status).toBe(303);

    const read = await call(`/payouts/${payout.id}`, { key: acct.key });
    expect(read.body.status).toBe("canceled");
    const events = await eventsFor(acct.id, payout.id);
    expect(events.map((e) => e.type)).toEqual(["payout.created", "payout.canceled"]);
    expect(events[1].body.data).toEqual(read.body);

    const after = await dashboardFetch(first.location!, { cookie });
    expect(textOf(after.html)).toContain(`Payout ${payout.id} canceled.`);
    expect(after.html).not.toContain(`action="${action}"`);

    // Cancelling again: the API's 409 is shown as a page with its code and request id.
    const again = await dashboardFetch(action, { cookie, form: { ...form, idempotency_key: `dash_${"z".repeat(32)}` } });
    expect(again.status).toBe(409);
    const text = textOf(again.html);
    expect(text).toContain("payout_not_pending");
    expect(text).toMatch(/Request id req_[0-9a-f]+/);
  });
});

describe("payments page", () => {
  it("refunds part of a payment in major units, then the rest; a bad amount gets a 400 page", async () => {
    const user = await createUser(acct, { name: "Refund Payer", email: "payer@example.com" });
    const plan = await createPlan(acct, { price: 20, currency: "usd" });
    const sub = await subscribed(acct, user.id, plan.id);
    const payments = await call(`/payments?subscription_id=${sub.id}`, { key: acct.key });
    const payment = payments.body.data[0];
    const page = "/dashboard/payments";
    const action = `/dashboard/payments/${payment.id}/refund`;

    const tooPrecise = await submit(cookie, page, action, { amount: "1.234" });
    expect(tooPrecise.status).toBe(400);
    expect(textOf(tooPrecise.html)).toContain("USD has 2 decimals");

    const partial = await submit(cookie, page, action, { amount: "5.25" });
    expect(partial.status, partial.html.slice(0, 400)).toBe(303);
    const afterPartial = await call(`/payments/${payment.id}`, { key: acct.key });
    expect(afterPartial.body).toMatchObject({ status: "partially_refunded", amount_refunded: 525 });
    const initiated = (await eventsOf(acct.id, "refund.initiated")).map((e) => e.body.data);
    expect(initiated).toContainEqual(expect.objectContaining({ payment_id: payment.id, amount: 525 }));

    const rest = await submit(cookie, page, action, { amount: "" });
    expect(rest.status).toBe(303);
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body).toMatchObject({ status: "refunded", amount_refunded: 2000 });
    const list = await dashboardFetch(page, { cookie });
    expect(textOf(list.html)).toContain("20.00 USD");
  });
});

describe("subscriptions page", () => {
  it("cancels at period end, then now, through DELETE /subscriptions/{id}", async () => {
    const user = await createUser(acct, { name: "Sub Scriber", email: "sub@example.com" });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const action = `/dashboard/subscriptions/${sub.id}/cancel`;
    const later = await submit(cookie, "/dashboard/subscriptions", action, { when: "period_end" });
    expect(later.status, later.html.slice(0, 300)).toBe(303);
    expect(later.location).toContain("subscription_cancel_scheduled");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body).toMatchObject({ status: "active", cancel_at_period_end: true });

    const bad = await submit(cookie, "/dashboard/subscriptions", action, { when: "tomorrow" });
    expect(bad.status).toBe(400);

    const now = await submit(cookie, "/dashboard/subscriptions", action, { when: "now" });
    expect(now.status).toBe(303);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("canceled");
    const notifications = (await eventsOf(acct.id, "subscription_canceled")).filter((e) => e.body.subscription_id === sub.id);
    expect(notifications).toHaveLength(1);
  });
});

describe("plans page", () => {
  it("creates a fixed plan and a tiered plan from major units; a bad price gets a 400 page", async () => {
    const fixed = await submit(cookie, "/dashboard/plans", "/dashboard/plans", { name: "Dash Pro", currency: "kwd", interval: "month", pricing_model: "fixed", price: "1.234" });
    expect(fixed.status, fixed.html.slice(0, 300)).toBe(303);
    const plans = await call("/subscription-plans?limit=100", { key: acct.key });
    expect(plans.body.data.find((p: any) => p.name === "Dash Pro")).toMatchObject({ unit_amount: 1234, currency: "kwd", pricing_model: "fixed" });

    const tiered = await submit(cookie, "/dashboard/plans", "/dashboard/plans", {
      name: "Dash Seats",
      currency: "usd",
      interval: "month",
      pricing_model: "volume",
      tier_up_to: ["5", "10", "", ""],
      tier_unit_price: ["7.00", "6.50", "6.00", ""],
      tier_flat_price: ["", "", "", ""],
    });
    expect(tiered.status, tiered.html.slice(0, 300)).toBe(303);
    const seats = (await call("/subscription-plans?limit=100", { key: acct.key })).body.data.find((p: any) => p.name === "Dash Seats");
    expect(seats.tiers.map((t: any) => [t.up_to, t.unit_amount])).toEqual([[5, 700], [10, 650], [null, 600]]);
    const page = await dashboardFetch("/dashboard/plans", { cookie });
    expect(textOf(page.html)).toContain("1.234 KWD / month");
    expect(textOf(page.html)).toContain("11–∞: 6.00 USD each");

    // A bad price is shown beside the field (test/dashboard/forms.test.ts has the rest of the rules).
    const bad = await submit(cookie, "/dashboard/plans", "/dashboard/plans", { name: "Bad", currency: "usd", interval: "month", pricing_model: "fixed", price: "abc" });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("The price: 'abc' is not an amount");
    // JPY has no decimals: the currency's exponent is checked before anything is sent.
    const yen = await submit(cookie, "/dashboard/plans", "/dashboard/plans", { name: "Yen", currency: "jpy", interval: "month", pricing_model: "fixed", price: "10.5" });
    expect(yen.status).toBe(400);
    expect(textOf(yen.html)).toContain("JPY has 0 decimals");
  });
});

describe("keys page", () => {
  it("creates a restricted key (shown once, and it works), then revokes it", async () => {
    const created = await submit(cookie, "/dashboard/keys", "/dashboard/keys", { name: "from dashboard", scopes: ["users:read", "events:read"] });
    expect(created.status).toBe(200);
    expect(created.headers.get("cache-control")).toBe("no-store");
    const secret = /<code id="secret-value">(rk_test_[0-9A-Za-z]{32})<\/code>/.exec(created.html)?.[1];
    expect(secret).toBeDefined();
    expect((await call("/api/users", { key: secret })).status).toBe(200);
    expect((await call("/payouts", { key: secret })).status).toBe(403);

    const keys = await call("/api/keys?limit=100", { key: acct.key });
    const key = keys.body.data.find((k: any) => k.name === "from dashboard");
    const revoked = await submit(cookie, "/dashboard/keys", `/dashboard/keys/${key.id}/revoke`);
    expect(revoked.status).toBe(303);
    expect((await call("/api/users", { key: secret })).status).toBe(401);

    const none = await submit(cookie, "/dashboard/keys", "/dashboard/keys", { name: "no scopes" });
    expect(none.status).toBe(400);
  });
});

describe("test clocks page", () => {
  it("creates a clock and advances it", async () => {
    const created = await submit(cookie, "/dashboard/test-clocks", "/dashboard/test-clocks", { frozen_time: "2026-01-31T12:00", name: "dash clock" });
    expect(created.status, created.html.slice(0, 300)).toBe(303);
    const clocks = await call("/api/test-clocks", { key: acct.key });
    const clock = clocks.body.data.find((k: any) => k.name === "dash clock");
    expect(clock.frozen_time).toBe("2026-01-31T12:00:00.000Z");
    const advanced = await submit(cookie, "/dashboard/test-clocks", `/dashboard/test-clocks/${clock.id}/advance`, { frozen_time: "2026-02-28T12:00:00" });
    expect(advanced.status).toBe(303);
    expect((await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body.frozen_time).toBe("2026-02-28T12:00:00.000Z");
    const backwards = await submit(cookie, "/dashboard/test-clocks", `/dashboard/test-clocks/${clock.id}/advance`, { frozen_time: "2020-01-01T00:00" });
    expect(backwards.status).toBe(400);
    const garbage = await submit(cookie, "/dashboard/test-clocks", "/dashboard/test-clocks", { frozen_time: "soon" });
    expect(garbage.status).toBe(400);
    expect(textOf(garbage.html)).toContain("UTC date and time");
  });
});

describe("webhooks page, deliveries and events", () => {
  let receiver: ReturnType<typeof installReceiver>;
  afterEach(() => receiver?.restore());

  it("registers an endpoint (secret shown once), shows a failed attempt, redelivers it, rotates, disables, deletes", async () => {
    receiver = installReceiver();
    receiver.answer(500, 200);
    const registered = await submit(cookie, "/dashboard/webhooks", "/dashboard/webhooks", { url: `${RECEIVER_ORIGIN}/dash`, events: "customer.created" });
    expect(registered.status, registered.html.slice(0, 400)).toBe(200);
    const secret = /<code id="secret-value">(whsec_[^<]+)<\/code>/.exec(registered.html)?.[1];
    expect(secret).toBeDefined();
    const endpointId = /webhooks\/(whk_[0-9a-z]+)/.exec(registered.html)![1];
    const stored = await env.DB.prepare("SELECT secret FROM webhook_endpoints WHERE id = ?").bind(endpointId).first<{ secret: string }>();
    expect(stored!.secret).toBe(secret);
    const page = `/dashboard/webhooks/${endpointId}`;

    const test = await submit(cookie, page, `${page}/test`);
    expect(test.status).toBe(303);
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    let detail = await waitFor(async () => {
      const loaded = await dashboardFetch(page, { cookie });
      expect(loaded.html).toMatch(/<tr data-attempt="1">[\s\S]*?500/);
      return loaded;
    });
    expect(detail.html).toContain('data-status="pending"');
    // A delivery names its event's type, not only its id.
    expect(detail.html).toMatch(/<tr data-delivery="dlv_[^"]+" data-status="pending">[\s\S]*?data-event-type="webhook.test"/);
    const redeliver = await dashboardFetch(`${page}/redeliver`, { cookie, form: formOf(detail.html, `${page}/redeliver`) });
    expect(redeliver.status, redeliver.html.slice(0, 300)).toBe(303);
    detail = await waitFor(async () => {
      const loaded = await dashboardFetch(page, { cookie });
      expect(loaded.html).toContain('data-status="delivered"');
      return loaded;
    });
    expect(detail.html).toMatch(/<tr data-attempt="2">[\s\S]*?200/);

    const rotated = await submit(cookie, page, `${page}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const newSecret = /<code id="secret-value">(whsec_[^<]+)<\/code>/.exec(rotated.html)?.[1];
    expect(newSecret).toBeDefined();
    expect(newSecret).not.toBe(secret);

    const disabled = await submit(cookie, page, `${page}/status`);
    expect(disabled.status).toBe(303);
    expect((await call(`/api/webhooks/${endpointId}`, { key: acct.key })).body.status).toBe("disabled");
    const enabled = await submit(cookie, page, `${page}/status`);
    expect(enabled.location).toContain("webhook_enabled");

    // The rate limit: shown, set through PATCH, removed with an empty field; a bad one is a 400 page.
    expect((await dashboardFetch(page, { cookie })).html).toContain('data-rate-limit=""');
    const limited = await submit(cookie, page, `${page}/rate-limit`, { rate_limit: "25" });
    expect(limited.status, limited.html.slice(0, 400)).toBe(303);
    expect(limited.location).toContain("webhook_rate_limit_set");
    expect((await call(`/api/webhooks/${endpointId}`, { key: acct.key })).body.rate_limit).toBe(25);
    expect(textOf((await dashboardFetch(page, { cookie })).html)).toContain("25 deliveries a second");
    const tooFast = await submit(cookie, page, `${page}/rate-limit`, { rate_limit: "1001" });
    expect(tooFast.status).toBe(400);
    expect(textOf(tooFast.html)).toContain("rate_limit must be a whole number from 1 to 1000");
    const unlimited = await submit(cookie, page, `${page}/rate-limit`, { rate_limit: "" });
    expect(unlimited.status).toBe(303);
    expect((await call(`/api/webhooks/${endpointId}`, { key: acct.key })).body.rate_limit).toBeNull();

    const events = await dashboardFetch("/dashboard/events?type=webhook.test", { cookie });
    const testEvent = (await eventsOf(acct.id, "webhook.test"))[0];
    const { payload } = (await env.DB.prepare("SELECT payload FROM events WHERE id = ?").bind(testEvent.id).first<{ payload: string }>())!;
    // The exact delivered body, escaped for HTML.
    expect(events.html).toContain(payload.replaceAll("&", "&amp;").replaceAll('"', "&quot;").replaceAll("<", "&lt;").replaceAll(">", "&gt;"));
    expect(receiver.received[0].body).toBe(payload);

    const deleted = await submit(cookie, page, `${page}/delete`);
    expect(deleted.status).toBe(303);
    expect((await call(`/api/webhooks/${endpointId}`, { key: acct.key })).status).toBe(404);
  }, 30_000);
});

describe("a disabled webhook endpoint", () => {
  let receiver: ReturnType<typeof installReceiver>;
  afterEach(() => receiver?.restore());

  it("its page says why and since when, and Enable (a CSRF-protected form) enables it again without resending", async () => {
    receiver = installReceiver();
    receiver.answer(410);
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/gone`, events: ["customer.created"] } });
    const page = `/dashboard/webhooks/${hook.body.id}`;
    const sent = await call(`/api/webhooks/${hook.body.id}/test`, { method: "POST", key: acct.key });
    const disabled = await waitFor(async () => {
      const read = await call(`/api/webhooks/${hook.body.id}`, { key: acct.key });
      expect(read.body).toMatchObject({ status: "disabled", disabled_reason: "gone" });
      return read.body as { disabled_at: string };
    }, 8000, 25);

    const loaded = await dashboardFetch(page, { cookie });
    expect(loaded.html).toContain('data-disabled-reason="gone"');
    const text = textOf(loaded.html);
    expect(text).toContain("It answered 410 Gone.");
    expect(loaded.html).toContain(`datetime="${disabled.disabled_at}"`);
    expect(text).toContain("enabling it does not send them again");
    const form = formOf(loaded.html, `${page}/status`);
    expect(form).toMatchObject({ status: "active", idempotency_key: expect.stringMatching(/^dash_/) });
    // Without the session's CSRF token the form is refused, and nothing changes.
    const { csrf_token: _csrf, ...forged } = form;
    expect((await dashboardFetch(`${page}/status`, { cookie, form: forged })).status).toBe(403);
    expect((await call(`/api/webhooks/${hook.body.id}`, { key: acct.key })).body.status).toBe("disabled");

    const enabled = await dashboardFetch(`${page}/status`, { cookie, form });
    expect(enabled.status, enabled.html.slice(0, 300)).toBe(303);
    expect(enabled.location).toContain("webhook_enabled");
    expect((await call(`/api/webhooks/${hook.body.id}`, { key: acct.key })).body).toMatchObject({ status: "active", disabled_reason: null, disabled_at: null });
    const after = await dashboardFetch(page, { cookie });
    expect(after.html).not.toContain("data-disabled-reason");
    // The delivery the 410 ended stays failed: enabling sent nothing again.
    expect(receiver.received).toHaveLength(1);
    expect((await call(`/api/webhooks/${hook.body.id}/deliveries`, { key: acct.key })).body.data).toMatchObject([{ id: sent.body.delivery_id, status: "failed" }]);
  });
});

describe("list pages", () => {
  it("show a clear empty state, paginate with the API's cursors, and refuse a bad cursor with a 4xx page", async () => {
    const fresh = await signup("Dash Empty");
    const freshCookie = await signIn(fresh.key);
    for (const [path, empty] of [
      ["/dashboard/users", "No users yet"],
      ["/dashboard/payouts", "No payouts yet"],
      ["/dashboard/payments", "No payments yet"],
      ["/dashboard/subscriptions", "No subscriptions yet"],
      ["/dashboard/plans", "No plans yet"],
      ["/dashboard/webhooks", "No webhook endpoints yet"],
      ["/dashboard/test-clocks", "No test clocks yet"],
      ["/dashboard", "No payments in the last 30 days"],
    ]) {
      const page = await dashboardFetch(path, { cookie: freshCookie });
      expect(page.status, path).toBe(200);
      expect(textOf(page.html), path).toContain(empty);
    }
    for (let i = 0; i < 22; i++) await createUser(fresh, { name: `User ${i}`, email: `u${i}@example.com` });
    const first = await dashboardFetch("/dashboard/users", { cookie: freshCookie });
    expect(first.html.match(/data-user="/g)).toHaveLength(20);
    const older = /href="(\/dashboard\/users\?starting_after=usr_[0-9a-z]+)"/.exec(first.html)![1];
    const second = await dashboardFetch(older, { cookie: freshCookie });
    expect(second.html.match(/data-user="/g)).toHaveLength(2);
    expect(second.html).toContain("Newer");
    const bad = await dashboardFetch("/dashboard/users?starting_after=po_nope", { cookie: freshCookie });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("invalid_cursor");
  });
});
