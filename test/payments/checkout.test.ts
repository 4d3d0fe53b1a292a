// Hosted checkout sessions (POST /checkout/sessions, the page at its url, the cron's expiry) in
// test mode: the API's shape and every refusal; the page in payment, subscription and setup
// modes; declines, 3-D Secure cards, double submits and two tabs that pay once; expired and
// completed sessions that take no card; events once each; no card data kept or logged.
import { exports } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, BASE, ISO_MS, call, expectError, signup } from "../support/http";
import { createKey, createPlan, createUser } from "../support/fixtures";
import { CARDS, captureLogs, expectNoCardData, nextYear, sentCvvs, sentPans } from "../support/cards";
import { countRows, eventsOf } from "../support/db";
import { completeCheckoutSession, expireCheckoutSessions } from "../../src/payments/checkout";
import { createDb } from "../../src/db/client";
import { checkoutSessions } from "../../src/db/schema";
import { eq } from "drizzle-orm";

const logs = captureLogs();
let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let customer: { id: string; email: string };
let plan: Record<string, any>;

beforeAll(async () => {
  acct = await signup("Shop");
  other = await signup("Other shop");
  customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  plan = await createPlan(acct, { name: "Pro", price: 19.99, currency: "usd", interval: "month" });
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const SUCCESS = "https://shop.example.com/thanks?session={CHECKOUT_SESSION_ID}";
const CANCEL = "https://shop.example.com/cart";

const createSession = (body: Record<string, unknown>, options: { key?: string; idempotencyKey?: string } = {}) =>
  call("/checkout/sessions", { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body: { user_id: customer.id, success_url: SUCCESS, cancel_url: CANCEL, ...body } });

async function openSession(body: Record<string, unknown> = { mode: "payment", amount: 2500, currency: "usd" }) {
  const res = await createSession(body);
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any> & { id: string; url: string };
}

/** The page's path (the session's url without its origin). */
const pathOf = (session: { url: string }) => new URL(session.url).pathname;

async function page(path: string, init: RequestInit = {}) {
  const response = await exports.default.fetch(`${BASE}${path}`, { redirect: "manual", ...init });
  return { status: response.status, headers: response.headers, html: await response.text() };
}

/** Submits the page's form as a browser does (form-encoded, same origin). */
function pay(session: { url: string }, pan: string = CARDS.visa, overrides: Record<string, string> = {}) {
  sentPans.add(pan);
  sentCvvs.add("314");
  const form = new URLSearchParams({ cardholder_name: "Ada Lovelace", card_number: pan, exp_month: "12", exp_year: String(nextYear), cvc: "314", ...overrides });
  return page(pathOf(session), { method: "POST", body: form, headers: { "content-type": "application/x-www-form-urlencoded", origin: BASE } });
}

const readSession = async (id: string) => (await call(`/checkout/sessions/${id}`, { key: acct.key })).body as Record<string, any>;

describe("POST /checkout/sessions", () => {
  it("answers 201 with an open payment session, its url and a 24-hour expiry", async () => {
    const res = await createSession({ mode: "payment", amount: 2500, currency: "USD", metadata: { order_id: "6735" } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^cs_[0-9a-z]{26}$/),
      object: "checkout_session",
      url: expect.stringMatching(new RegExp(`^${BASE}/pay/checkout/cs_[0-9a-z]{26}/[0-9A-Za-z]{40}$`)),
      status: "open",
      mode: "payment",
      livemode: false,
      user_id: customer.id,
      amount: 2500,
      currency: "usd",
      plan_id: null,
      metadata: { order_id: "6735" },
      expires_at: expect.stringMatching(ISO_MS),
      payment_id: null,
      subscription_id: null,
      payment_method_id: null,
      success_url: SUCCESS,
      cancel_url: CANCEL,
      created_at: expect.stringMatching(ISO_MS),
      completed_at: null,
    });
    expect(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)).toBe(24 * 60 * 60 * 1000);
    expect(res.body.url).toContain(`/pay/checkout/${res.body.id}/`);
  });

  it("takes a plan in subscription mode (the plan's currency) and nothing but the user in setup mode", async () => {
    const sub = await openSession({ mode: "subscription", plan_id: plan.id });
    expect(sub).toMatchObject({ mode: "subscription", plan_id: plan.id, amount: null, currency: "usd" });
    const setup = await openSession({ mode: "setup" });
    expect(setup).toMatchObject({ mode: "setup", plan_id: null, amount: null, currency: null });
  });

  it("reads one by id and lists them newest first, by user and status", async () => {
    const session = await openSession();
    const read = await call(`/checkout/sessions/${session.id}`, { key: acct.key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(session);
    const list = await call(`/checkout/sessions?user_id=${customer.id}&status=open&limit=100`, { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body.object).toBe("list");
    expect(list.body.data[0].id).toBe(session.id);
    expect(list.body.data.every((s: { status: string }) => s.status === "open")).toBe(true);
  });

  it("names the field each mode needs, or does not take", async () => {
    expectError(await createSession({ mode: "payment", currency: "usd" }), 400, "invalid_request_error", "parameter_missing");
    expect((await createSession({ mode: "payment", currency: "usd" })).body.error.param).toBe("amount");
    expect((await createSession({ mode: "payment", amount: 100 })).body.error.param).toBe("currency");
    expect((await createSession({ mode: "payment", amount: 100, currency: "usd", plan_id: plan.id })).body.error.param).toBe("plan_id");
    expect((await createSession({ mode: "subscription" })).body.error).toMatchObject({ code: "parameter_missing", param: "plan_id" });
    expect((await createSession({ mode: "subscription", plan_id: plan.id, amount: 100 })).body.error).toMatchObject({ code: "parameter_unexpected", param: "amount" });
    expect((await createSession({ mode: "setup", currency: "usd" })).body.error).toMatchObject({ code: "parameter_unexpected", param: "currency" });
    expect((await createSession({ mode: "refund" })).body.error).toMatchObject({ code: "parameter_invalid", param: "mode" });
    expect((await createSession({ mode: "payment", amount: 100, currency: "zzz" })).body.error).toMatchObject({ code: "currency_invalid", param: "currency" });
    expect((await createSession({ mode: "payment", amount: 0, currency: "usd" })).body.error).toMatchObject({ param: "amount" });
    expect((await createSession({ mode: "payment", amount: 100, currency: "usd", colour: "red" })).body.error).toMatchObject({ code: "parameter_unknown", param: "colour" });
    expect(await countRows("checkout_sessions", "account_id = ? AND status = 'open' AND amount = 100", acct.id)).toBe(0);
  });

  it("refuses a decimal amount, naming the integer meant", async () => {
    const res = await call("/checkout/sessions", {
      key: acct.key,
      rawBody: `{"mode":"payment","amount":25.00,"currency":"usd","user_id":"${customer.id}","success_url":"${SUCCESS}","cancel_url":"${CANCEL}"}`,
      headers: { "content-type": "application/json" },
    });
    expectError(res, 400, "invalid_request_error");
    expect(res.body.error.message).toContain("2500");
  });

  it("takes https success and cancel URLs only (http only to localhost in development)", async () => {
    for (const [field, url] of [
      ["success_url", "http://shop.example.com/thanks"],
      ["success_url", "javascript:alert(1)"],
      ["cancel_url", "ftp://shop.example.com/cart"],
      ["cancel_url", "not a url"],
      ["success_url", "https://user:pw@shop.example.com/"],
    ] as const) {
      const res = await createSession({ mode: "setup", [field]: url });
      expectError(res, 400, "invalid_request_error", "url_invalid");
      expect(res.body.error.param).toBe(field);
    }
    const local = await createSession({ mode: "setup", success_url: "http://localhost:3000/ok", cancel_url: "http://127.0.0.1:3000/cart" });
    expect(local.status, local.text).toBe(201);
  });

  it("answers 404 for a user or plan of another account or of the other mode, and for another account's session", async () => {
    const stranger = await createUser(other, { name: "Grace Hopper" });
    const otherPlan = await createPlan(other);
    const theirUser = await createSession({ mode: "setup", user_id: stranger.id });
    expectError(theirUser, 404, "not_found_error", "resource_missing");
    expect(theirUser.body.error.param).toBe("user_id");
    const theirPlan = await createSession({ mode: "subscription", plan_id: otherPlan.id });
    expectError(theirPlan, 404, "not_found_error", "resource_missing");
    expect(theirPlan.body.error.param).toBe("plan_id");
    // A live key does not see test-mode users.
    const live = await createSession({ mode: "setup" }, { key: acct.liveKey });
    expectError(live, 404, "not_found_error");
    const mine = await openSession({ mode: "setup" });
    expectError(await call(`/checkout/sessions/${mine.id}`, { key: other.key }), 404, "not_found_error");
    expectError(await call(`/checkout/sessions/${mine.id}`, { key: acct.liveKey }), 404, "not_found_error");
  });

  it("needs checkout_sessions:write to create and checkout_sessions:read to read", async () => {
    const readOnly = await createKey(acct, ["checkout_sessions:read"]);
    expectError(await createSession({ mode: "setup" }, { key: readOnly.secret }), 403, "permission_error");
    const session = await openSession({ mode: "setup" });
    expect((await call(`/checkout/sessions/${session.id}`, { key: readOnly.secret })).status).toBe(200);
    const payments = await createKey(acct, ["payments:write"]);
    expectError(await call(`/checkout/sessions/${session.id}`, { key: payments.secret }), 403, "permission_error");
  });

  it("replays a retry with the same Idempotency-Key", async () => {
    const first = await createSession({ mode: "setup" }, { idempotencyKey: "cs-retry-1" });
    const again = await createSession({ mode: "setup" }, { idempotencyKey: "cs-retry-1" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(first.body.id);
  });
});

describe("the checkout page", () => {
  it("shows the amount and a card form with the standard autocomplete names, one submit button and the cancel link", async () => {
    const session = await openSession();
    const res = await page(pathOf(session));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(res.html).toContain("25.00 USD");
    for (const name of ["cc-name", "cc-number", "cc-exp-month", "cc-exp-year", "cc-csc"]) expect(res.html).toContain(`autocomplete="${name}"`);
    expect(res.html.match(/<button/g)).toHaveLength(1);
    expect(res.html).toContain(`href="${CANCEL}"`);
    expect(res.html).not.toMatch(/sk_(test|live)_/);
  });

  it("shows the plan's price and interval, or saving a card", async () => {
    const sub = await page(pathOf(await openSession({ mode: "subscription", plan_id: plan.id })));
    expect(sub.html).toContain("19.99 USD");
    expect(sub.html).toContain("per month");
    const setup = await page(pathOf(await openSession({ mode: "setup" })));
    expect(setup.html).toContain("Save a card");
  });

  it("answers 404 for a wrong secret or an unknown session, the same page for both", async () => {
    const session = await openSession();
    const path = pathOf(session);
    const wrong = await page(`${path.slice(0, -1)}${path.endsWith("a") ? "b" : "a"}`);
    expect(wrong.status).toBe(404);
    expect(wrong.html).not.toContain("<form");
    const unknown = await page("/pay/checkout/cs_01jd2x4k5m6n7p8q9r0s1t2v3w/abc");
    expect(unknown.status).toBe(404);
    // A submit with the wrong secret charges nothing.
    const before = await countRows("payments", "account_id = ?", acct.id);
    const submitted = await page(`${path}x`, { method: "POST", body: new URLSearchParams({ card_number: CARDS.visa }), headers: { "content-type": "application/x-www-form-urlencoded", origin: BASE } });
    expect(submitted.status).toBe(404);
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(before);
  });

  it("pays a payment session: 303 to success_url with the id, the session complete, one payment, checkout.session.completed once", async () => {
    const session = await openSession();
    const res = await pay(session);
    expect(res.status, res.html).toBe(303);
    expect(res.headers.get("location")).toBe(`https://shop.example.com/thanks?session=${session.id}`);
    const done = await readSession(session.id);
    expect(done).toMatchObject({ status: "complete", url: null, payment_id: expect.stringMatching(/^pay_/), payment_method_id: expect.stringMatching(/^pmt_/), subscription_id: null, completed_at: expect.stringMatching(ISO_MS) });
    const payment = (await call(`/payments/${done.payment_id}`, { key: acct.key })).body;
    expect(payment).toMatchObject({ status: "completed", amount: 2500, currency: "usd", user_id: customer.id, payment_method_id: done.payment_method_id, metadata: { checkout_session_id: session.id } });
    const events = (await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id);
    expect(events).toHaveLength(1);
    expect(events[0].body).toMatchObject({ object_id: session.id, sequence: 1, data: { id: session.id, object: "checkout_session", status: "complete", payment_id: done.payment_id } });
    // The page of a completed session takes no card.
    const after = await page(pathOf(session));
    expect(after.status).toBe(410);
    expect(after.html).not.toContain("<form");
    // Submitting it again goes to success_url and charges nothing more.
    const again = await pay(session);
    expect(again.status).toBe(303);
    expect(await countRows("payments", "metadata LIKE ?", `%${session.id}%`)).toBe(1);
  });

  it("subscribes in subscription mode and saves the card in setup mode", async () => {
    const sub = await openSession({ mode: "subscription", plan_id: plan.id });
    expect((await pay(sub, CARDS.mastercard)).status).toBe(303);
    const subDone = await readSession(sub.id);
    expect(subDone).toMatchObject({ status: "complete", subscription_id: expect.stringMatching(/^sub_/), payment_id: expect.stringMatching(/^pay_/), payment_method_id: expect.stringMatching(/^pmt_/) });
    const subscription = (await call(`/subscriptions/${subDone.subscription_id}`, { key: acct.key })).body;
    expect(subscription).toMatchObject({ status: "active", plan_id: plan.id, user_id: customer.id });
    const setup = await openSession({ mode: "setup" });
    expect((await pay(setup)).status).toBe(303);
    const setupDone = await readSession(setup.id);
    expect(setupDone).toMatchObject({ status: "complete", payment_id: null, subscription_id: null, payment_method_id: expect.stringMatching(/^pmt_/) });
    const methods = (await call(`/api/users/${customer.id}/payment-methods?limit=100`, { key: acct.key })).body.data.map((m: { id: string }) => m.id);
    expect(methods).toContain(setupDone.payment_method_id);
  });

  it("shows a decline on the form (402) and keeps the session open; another card then pays", async () => {
    const session = await openSession();
    const declined = await pay(session, CARDS.declined);
    expect(declined.status).toBe(402);
    expect(declined.html).toContain("<form");
    expect(declined.html).toMatch(/declined/i);
    expect(declined.html).not.toContain(CARDS.declined);
    expect((await readSession(session.id)).status).toBe("open");
    const paid = await pay(session, CARDS.visa);
    expect(paid.status).toBe(303);
    const done = await readSession(session.id);
    expect(done.status).toBe("complete");
    // The failed payment and the completed one: two attempts, two references.
    const rows = await env.DB.prepare("SELECT status, charge_reference FROM payments WHERE metadata LIKE ? ORDER BY id").bind(`%${session.id}%`).all<{ status: string; charge_reference: string }>();
    expect(rows.results.map((r) => r.status)).toEqual(["failed", "completed"]);
    expect(new Set(rows.results.map((r) => r.charge_reference)).size).toBe(2);
  });

  it("sends a card that asks for 3-D Secure to the challenge; Complete comes back and completes the session once, then success_url", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    expect(res.status, res.html).toBe(303);
    const challenge = res.headers.get("location")!;
    expect(challenge).toMatch(/^http:\/\/127\.0\.0\.1:8787\/pay\/authenticate\/pay_[0-9a-z]+\/[0-9A-Za-z]{40}$/);
    expect((await readSession(session.id)).status).toBe("open");
    // The challenge's Complete sends the payer back to the session's return route.
    const done = await page(`${new URL(challenge).pathname}/complete`, { method: "POST" });
    expect(done.status).toBe(303);
    const back = new URL(done.headers.get("location")!);
    expect(back.pathname).toBe(`${pathOf(session)}/return`);
    const landed = await page(`${back.pathname}${back.search}`);
    expect(landed.status, landed.html).toBe(303);
    expect(landed.headers.get("location")).toContain(session.id);
    const paymentId = back.searchParams.get("payment_id")!;
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: paymentId });
    expect((await call(`/payments/${paymentId}`, { key: acct.key })).body.status).toBe("completed");
    // The return again (a reload) completes nothing more.
    expect((await page(`${back.pathname}${back.search}`)).status).toBe(303);
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
  });

  it("in subscription mode, a card that asks for 3-D Secure makes the subscription incomplete; Complete comes back, the subscription is active and the session complete", async () => {
    const session = await openSession({ mode: "subscription", plan_id: plan.id });
    const res = await pay(session, "4000002760003184");
    expect(res.status, res.html).toBe(303);
    const challenge = new URL(res.headers.get("location")!);
    expect(challenge.pathname).toMatch(/^\/pay\/authenticate\/pay_/);
    const paymentId = challenge.pathname.split("/")[3];
    const waiting = (await call(`/payments/${paymentId}`, { key: acct.key })).body;
    expect((await call(`/subscriptions/${waiting.subscription_id}`, { key: acct.key })).body.status).toBe("incomplete");
    const done = await page(`${challenge.pathname}/complete`, { method: "POST" });
    expect(done.status).toBe(303);
    const back = new URL(done.headers.get("location")!);
    expect(back.pathname).toBe(`${pathOf(session)}/return`);
    const landed = await page(`${back.pathname}${back.search}`);
    expect(landed.status, landed.html).toBe(303);
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: paymentId, subscription_id: waiting.subscription_id });
    expect((await call(`/subscriptions/${waiting.subscription_id}`, { key: acct.key })).body.status).toBe("active");
  });

  it("a failed challenge comes back to the form with the reason, and the session stays open for another card", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    const challenge = new URL(res.headers.get("location")!);
    const failed = await page(`${challenge.pathname}/fail`, { method: "POST" });
    expect(failed.status).toBe(303);
    const back = new URL(failed.headers.get("location")!);
    const landed = await page(`${back.pathname}${back.search}`);
    expect(landed.status).toBe(402);
    expect(landed.html).toContain("<form");
    expect((await readSession(session.id)).status).toBe("open");
    // Another card then pays it.
    expect((await pay(session, CARDS.visa)).status).toBe(303);
    expect((await readSession(session.id)).status).toBe("complete");
  });

  it("re-renders a card the API refuses (400) with its message, and never echoes the number", async () => {
    const session = await openSession();
    const res = await pay(session, "4242424242424241");
    expect(res.status).toBe(400);
    expect(res.html).toContain("<form");
    expect(res.html).not.toContain("4242424242424241");
    expect((await pay(session, CARDS.visa, { exp_month: "13" })).status).toBe(400);
    expect((await readSession(session.id)).status).toBe("open");
  });

  it("charges once under a double submit or two tabs", async () => {
    const session = await openSession();
    const results = await Promise.all([pay(session), pay(session), pay(session)]);
    for (const res of results) {
      expect(res.status, res.html).toBe(303);
      expect(res.headers.get("location")).toContain(session.id);
    }
    expect(await countRows("payments", "metadata LIKE ? AND status = 'completed'", `%${session.id}%`)).toBe(1);
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
  });

  it("says a live session's page cannot take cards before the account connects Stripe with a publishable key", async () => {
    const liveUser = await createUser({ id: acct.id, key: acct.liveKey }, { name: "Live Payer", email: "live.payer@example.com" });
    const live = await createSession({ mode: "setup", user_id: liveUser.id }, { key: acct.liveKey });
    expect(live.status, live.text).toBe(201);
    expect(live.body.livemode).toBe(true);
    const shown = await page(pathOf(live.body));
    expect(shown.status).toBe(503);
    expect(shown.html).not.toContain("<form");
    expect(await countRows("payment_methods", "user_id = ?", liveUser.id)).toBe(0);
  });

  it("refuses a form posted from another site", async () => {
    const session = await openSession();
    const res = await page(pathOf(session), { method: "POST", body: new URLSearchParams({ card_number: CARDS.visa }), headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://evil.example" } });
    expect(res.status).toBe(400);
    expect((await readSession(session.id)).status).toBe("open");
  });

  it("stops taking cards when the key that made the session is revoked", async () => {
    const key = await createKey(acct, ["checkout_sessions:write"]);
    const res = await createSession({ mode: "payment", amount: 700, currency: "usd" }, { key: key.secret });
    expect(res.status, res.text).toBe(201);
    expect((await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const submitted = await pay(res.body);
    expect(submitted.status).not.toBe(303);
    expect(await countRows("payments", "metadata LIKE ?", `%${res.body.id}%`)).toBe(0);
    expect((await readSession(res.body.id)).status).toBe("open");
  });
});

describe("expiry", () => {
  const expire = (id: string) => env.DB.prepare("UPDATE checkout_sessions SET expires_at = ? WHERE id = ?").bind(new Date(Date.now() - 1000).toISOString(), id).run();

  it("answers 410 with no form for a session past expires_at, before and after the cron marks it expired, once", async () => {
    const session = await openSession();
    await expire(session.id);
    const before = await page(pathOf(session));
    expect(before.status).toBe(410);
    expect(before.html).not.toContain("<form");
    expect((await pay(session)).status).toBe(410);
    await expireCheckoutSessions(env, Date.now());
    await expireCheckoutSessions(env, Date.now());
    const read = await readSession(session.id);
    expect(read).toMatchObject({ status: "expired", url: null });
    const events = (await eventsOf(acct.id, "checkout.session.expired")).filter((e) => e.body.data.id === session.id);
    expect(events).toHaveLength(1);
    expect(events[0].body.data).toMatchObject({ status: "expired" });
    expect((await page(pathOf(session))).status).toBe(410);
    expect(await countRows("payments", "metadata LIKE ?", `%${session.id}%`)).toBe(0);
  });

  it("leaves a session a submit holds, and open sessions not yet due", async () => {
    const held = await openSession();
    const fresh = await openSession();
    await expire(held.id);
    await env.DB.prepare("UPDATE checkout_sessions SET submit_until = ? WHERE id = ?").bind(Date.now() + 60_000, held.id).run();
    await expireCheckoutSessions(env, Date.now());
    expect((await readSession(held.id)).status).toBe("open");
    expect((await readSession(fresh.id)).status).toBe("open");
  });
});

describe("POST /checkout/sessions/{id}/expire", () => {
  it("expires an open session now, once, with checkout.session.expired; its page takes no card", async () => {
    const session = await openSession();
    const res = await call(`/checkout/sessions/${session.id}/expire`, { key: acct.key, method: "POST" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: session.id, status: "expired", url: null });
    expect((await page(pathOf(session))).status).toBe(410);
    const again = await call(`/checkout/sessions/${session.id}/expire`, { key: acct.key, method: "POST" });
    expectError(again, 409, "invalid_request_error", "checkout_session_not_open");
    expect(again.body.error.message).toContain("expired");
    expect((await eventsOf(acct.id, "checkout.session.expired")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
  });

  it("answers 409 for a completed session, or one being paid on its page; 404 for another account's", async () => {
    const paid = await openSession({ mode: "setup" });
    expect((await pay(paid)).status).toBe(303);
    const done = await call(`/checkout/sessions/${paid.id}/expire`, { key: acct.key, method: "POST" });
    expectError(done, 409, "invalid_request_error", "checkout_session_not_open");
    expect(done.body.error.message).toContain("complete");
    const held = await openSession();
    await env.DB.prepare("UPDATE checkout_sessions SET submit_until = ? WHERE id = ?").bind(Date.now() + 60_000, held.id).run();
    expectError(await call(`/checkout/sessions/${held.id}/expire`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "checkout_session_in_progress");
    expect((await readSession(held.id)).status).toBe("open");
    expectError(await call(`/checkout/sessions/${held.id}/expire`, { key: other.key, method: "POST" }), 404, "not_found_error");
  });
});

describe("completing a session", () => {
  it("records one completion and one checkout.session.completed, however many finishers race (a submit, a 3-D Secure return)", async () => {
    const session = await openSession({ mode: "setup" });
    const db = createDb(env.DB);
    const typed = await db.select().from(checkoutSessions).where(eq(checkoutSessions.id, session.id));
    const finishers = await Promise.all(
      ["pmt_01jd2x4k5m6n7p8q9r0s1t2v3a", "pmt_01jd2x4k5m6n7p8q9r0s1t2v3b", "pmt_01jd2x4k5m6n7p8q9r0s1t2v3c"].map((pm) =>
        completeCheckoutSession({ db, queue: env.DELIVERY_QUEUE }, typed[0], { paymentId: null, subscriptionId: null, paymentMethodId: pm }, Date.now()),
      ),
    );
    expect(finishers.filter((f) => f !== null)).toHaveLength(1);
    const winner = finishers.find((f) => f !== null)!;
    expect((await readSession(session.id)).payment_method_id).toBe(winner.paymentMethodId);
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
  });
});

describe("the page's return from 3-D Secure (?payment_id=…)", () => {
  const back = (session: { url: string }, paymentId: string) => page(`${pathOf(session)}/return?payment_id=${encodeURIComponent(paymentId)}`);
  const savedCard = async (token = "pm_card_visa") => (await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: token } })).body.id as string;

  it("completes the session with its own completed payment, and goes to success_url", async () => {
    const session = await openSession();
    const payment = await call("/payments", { key: acct.key, body: { amount: 2500, currency: "usd", user_id: customer.id, payment_method: await savedCard(), metadata: { checkout_session_id: session.id } } });
    expect(payment.status, payment.text).toBe(201);
    const res = await back(session, payment.body.id);
    expect(res.status, res.html).toBe(303);
    expect(res.headers.get("location")).toContain(session.id);
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: payment.body.id });
  });

  it("refuses a payment that is not the session's (another session's, another amount, unknown, another account's) and completes nothing", async () => {
    const session = await openSession();
    const card = await savedCard();
    const elsewhere = await call("/payments", { key: acct.key, body: { amount: 2500, currency: "usd", user_id: customer.id, payment_method: card, metadata: { checkout_session_id: "cs_01jd2x4k5m6n7p8q9r0s1t2v3w" } } });
    const smaller = await call("/payments", { key: acct.key, body: { amount: 100, currency: "usd", user_id: customer.id, payment_method: card, metadata: { checkout_session_id: session.id } } });
    const stranger = await createUser(other, { name: "Grace Hopper" });
    const theirs = await call("/payments", { key: other.key, body: { amount: 2500, currency: "usd", user_id: stranger.id, payment_method: (await call(`/api/users/${stranger.id}/payment-methods`, { key: other.key, body: { processor_token: "pm_card_visa" } })).body.id, metadata: { checkout_session_id: session.id } } });
    for (const id of [elsewhere.body.id, smaller.body.id, theirs.body.id, "pay_01jd2x4k5m6n7p8q9r0s1t2v3w", "nonsense"]) {
      const res = await back(session, id);
      expect(res.status, id).toBe(400);
      expect(res.html).toContain("<form");
    }
    expect((await readSession(session.id)).status).toBe("open");
  });
});

describe("review of issue 34: the return route under attack", () => {
  const back = (session: { url: string }, paymentId: string) => page(`${pathOf(session)}/return?payment_id=${encodeURIComponent(paymentId)}`);
  const expiredMeanwhile = (id: string) =>
    env.DB.prepare("UPDATE checkout_sessions SET status = 'expired', expired_at = ?, expires_at = ? WHERE id = ?").bind(new Date().toISOString(), new Date(Date.now() - 1000).toISOString(), id).run();

  it("refuses, in subscription mode, a completed payment of another subscription of the same user, and completes nothing", async () => {
    // The payer holds the id of an earlier subscription's payment (from an earlier return URL).
    const card = (await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } })).body.id as string;
    const earlier = await call("/subscriptions", { key: acct.key, body: { user_id: customer.id, plan_id: plan.id, payment_method: card } });
    expect(earlier.status, earlier.text).toBe(201);
    const paid = (await call(`/payments?subscription_id=${earlier.body.id}&limit=1`, { key: acct.key })).body.data[0];
    expect(paid).toMatchObject({ status: "completed", user_id: customer.id, subscription_id: earlier.body.id });
    const session = await openSession({ mode: "subscription", plan_id: plan.id });
    const res = await back(session, paid.id);
    expect(res.status, res.html).toBe(400);
    expect(await readSession(session.id)).toMatchObject({ status: "open", subscription_id: null, payment_id: null });
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(0);
  });

  it("completes a subscription session with the subscription its attempt made (its plan, the card the attempt saved)", async () => {
    // As the page's subscription attempt does: the card saved for this attempt is recorded, then charged.
    const session = await openSession({ mode: "subscription", plan_id: plan.id });
    const card = (await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } })).body.id as string;
    await env.DB.prepare("UPDATE checkout_sessions SET attempt_payment_method_id = ? WHERE id = ?").bind(card, session.id).run();
    const made = await call("/subscriptions", { key: acct.key, body: { user_id: customer.id, plan_id: plan.id, payment_method: card } });
    expect(made.status, made.text).toBe(201);
    const paid = (await call(`/payments?subscription_id=${made.body.id}&limit=1`, { key: acct.key })).body.data[0];
    const res = await back(session, paid.id);
    expect(res.status, res.html).toBe(303);
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: paid.id, subscription_id: made.body.id, payment_method_id: card });
  });

  it("a 3-D Secure success that lands after the session expired still completes it (the money moved), once", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    const challenge = new URL(res.headers.get("location")!);
    // The session was expired while the payment waited for authentication (an expiry that raced the submit).
    await expiredMeanwhile(session.id);
    expect((await readSession(session.id)).status).toBe("expired");
    const done = await page(`${challenge.pathname}/complete`, { method: "POST" });
    const returnTo = new URL(done.headers.get("location")!);
    const paymentId = returnTo.searchParams.get("payment_id")!;
    expect((await call(`/payments/${paymentId}`, { key: acct.key })).body.status).toBe("completed");
    const landed = await page(`${returnTo.pathname}${returnTo.search}`);
    expect(landed.status, landed.html).toBe(303);
    expect(landed.headers.get("location")).toContain(session.id);
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: paymentId });
    expect((await page(`${returnTo.pathname}${returnTo.search}`)).status).toBe(303);
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
    // The expired session's page still takes no card.
    expect((await pay(session)).status).not.toBe(200);
  });

  it("a 3-D Secure success whose payer never comes back: the cron completes the session with it, never expires it", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    const challenge = new URL(res.headers.get("location")!);
    const past = () => env.DB.prepare("UPDATE checkout_sessions SET expires_at = ? WHERE id = ?").bind(new Date(Date.now() - 1000).toISOString(), session.id).run();
    await past();
    // Still waiting for the payer: the session is left open for the payment to decide.
    await expireCheckoutSessions(env, Date.now());
    expect((await readSession(session.id)).status).toBe("open");
    // The payer completes the challenge and closes the tab: the return route is never visited.
    const done = await page(`${challenge.pathname}/complete`, { method: "POST" });
    const paymentId = new URL(done.headers.get("location")!).searchParams.get("payment_id")!;
    await expireCheckoutSessions(env, Date.now());
    await expireCheckoutSessions(env, Date.now());
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: paymentId, payment_method_id: expect.stringMatching(/^pmt_/) });
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
    expect((await eventsOf(acct.id, "checkout.session.expired")).filter((e) => e.body.data.id === session.id)).toHaveLength(0);
  });

  it("a challenge abandoned past expiry: once the payment is canceled, the cron expires the session", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    const paymentId = new URL(res.headers.get("location")!).pathname.split("/")[3];
    await env.DB.prepare("UPDATE checkout_sessions SET expires_at = ? WHERE id = ?").bind(new Date(Date.now() - 1000).toISOString(), session.id).run();
    expect((await call(`/payments/${paymentId}/cancel`, { key: acct.key, body: {} })).status).toBe(200);
    await expireCheckoutSessions(env, Date.now());
    expect(await readSession(session.id)).toMatchObject({ status: "expired", payment_id: null });
  });

  it("POST /checkout/sessions/{id}/expire refuses while its payment waits for 3-D Secure (409), and completes the session whose payment succeeded", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    const challenge = new URL(res.headers.get("location")!);
    const waiting = await call(`/checkout/sessions/${session.id}/expire`, { key: acct.key, method: "POST" });
    expectError(waiting, 409, "invalid_request_error", "checkout_session_in_progress");
    expect((await readSession(session.id)).status).toBe("open");
    const done = await page(`${challenge.pathname}/complete`, { method: "POST" });
    const paymentId = new URL(done.headers.get("location")!).searchParams.get("payment_id")!;
    const paid = await call(`/checkout/sessions/${session.id}/expire`, { key: acct.key, method: "POST" });
    expectError(paid, 409, "invalid_request_error", "checkout_session_not_open");
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: paymentId });
    expect((await eventsOf(acct.id, "checkout.session.expired")).filter((e) => e.body.data.id === session.id)).toHaveLength(0);
    expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
  });

  it("a session's id with another session's secret (same account, another account, the live mode) is 404 everywhere and writes nothing", async () => {
    const mine = await openSession();
    const sibling = await openSession();
    const stranger = await createUser(other, { name: "Grace Hopper" });
    const theirs = (await call("/checkout/sessions", { key: other.key, body: { mode: "setup", user_id: stranger.id, success_url: SUCCESS, cancel_url: CANCEL } })).body;
    const liveUser = await createUser({ id: acct.id, key: acct.liveKey }, { name: "Live Payer", email: "live.r34@example.com" });
    const live = (await call("/checkout/sessions", { key: acct.liveKey, body: { mode: "setup", user_id: liveUser.id, success_url: SUCCESS, cancel_url: CANCEL } })).body;
    const secretOf = (session: { url: string }) => pathOf(session).split("/").pop()!;
    const before = await countRows("payment_methods", "1 = 1");
    for (const [id, secret] of [
      [mine.id, secretOf(sibling)],
      [mine.id, secretOf(theirs)],
      [mine.id, secretOf(live)],
      [live.id, secretOf(mine)],
      [theirs.id, secretOf(mine)],
    ]) {
      const path = `/pay/checkout/${id}/${secret}`;
      expect((await page(path)).status, path).toBe(404);
      sentPans.add(CARDS.visa);
      const submitted = await page(path, { method: "POST", body: new URLSearchParams({ card_number: CARDS.visa, exp_month: "12", exp_year: String(nextYear), cvc: "314" }), headers: { "content-type": "application/x-www-form-urlencoded", origin: BASE } });
      expect(submitted.status, path).toBe(404);
      expect((await page(`${path}/return?payment_id=pay_01jd2x4k5m6n7p8q9r0s1t2v3w`)).status, path).toBe(404);
    }
    expect(await countRows("payment_methods", "1 = 1")).toBe(before);
    for (const session of [mine, sibling]) expect((await readSession(session.id)).status).toBe("open");
  });

  it("the return route sends the payer nowhere but the session's own pages or success_url, whatever the query says", async () => {
    const session = await openSession();
    for (const query of ["payment_id=https://evil.example", "payment_id=//evil.example&next=https://evil.example", "payment_id=pay_x&return_url=https://evil.example", "payment_id="]) {
      const res = await page(`${pathOf(session)}/return?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.headers.get("location"), query).toBeNull();
      expect(res.html, query).not.toContain("evil.example");
    }
    expect((await readSession(session.id)).status).toBe("open");
  });

  it("a failed challenge that lands after the session expired shows the closed page, no form", async () => {
    const session = await openSession();
    const res = await pay(session, "4000002760003184");
    const challenge = new URL(res.headers.get("location")!);
    await expiredMeanwhile(session.id);
    const failed = await page(`${challenge.pathname}/fail`, { method: "POST" });
    const returnTo = new URL(failed.headers.get("location")!);
    const landed = await page(`${returnTo.pathname}${returnTo.search}`);
    expect(landed.status).toBe(410);
    expect(landed.html).not.toContain("<form");
    expect((await readSession(session.id)).status).toBe("expired");
  });
});

describe("a submit after an unknown outcome", () => {
  it("charges the card the earlier attempt was charging, under the same key, not the one typed now", async () => {
    const session = await openSession();
    // An earlier submit recorded its card, then its charge's outcome was lost.
    const earlier = (await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } })).body.id as string;
    await env.DB.prepare("UPDATE checkout_sessions SET attempt_payment_method_id = ? WHERE id = ?").bind(earlier, session.id).run();
    const res = await pay(session, CARDS.declined);
    expect(res.status, res.html).toBe(303);
    const done = await readSession(session.id);
    expect(done).toMatchObject({ status: "complete", payment_method_id: earlier });
    expect(await countRows("payments", "metadata LIKE ?", `%${session.id}%`)).toBe(1);
    expect(await countRows("payments", "metadata LIKE ? AND status = 'failed'", `%${session.id}%`)).toBe(0);
  });
});
