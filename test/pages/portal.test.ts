// The customer portal (POST /portal/sessions, src/pages/portal.tsx) in test mode: the session's
// answer and every refusal; the page (subscriptions, invoices, cards, the link back) behind its
// secret, 404 for a wrong one and 410 once its hour is over; each action the ordinary API action
// with its ordinary events (add a card, make one the default, remove one, cancel at period end);
// another user's objects in a form 404 with nothing written; a double submit is one action; a form
// from another site is refused.
import { exports } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, BASE, ISO_MS, call, expectError, signup } from "../support/http";
import { createKey, createPlan, createUser } from "../support/fixtures";
import { captureLogs, expectNoCardData, nextYear, sentCvvs, sentPans } from "../support/cards";
import { eventsOf } from "../support/db";

const logs = captureLogs();
let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let plan: Record<string, any>;

beforeAll(async () => {
  acct = await signup("Portal Shop");
  other = await signup("Other shop");
  plan = await createPlan(acct, { name: "Pro", price: 19.99, currency: "usd", interval: "month" });
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const RETURN = "https://shop.example.com/account";

const createSession = (body: Record<string, unknown>, options: { key?: string; idempotencyKey?: string } = {}) =>
  call("/portal/sessions", { key: options.key ?? acct.key, idempotencyKey: options.idempotencyKey, body: { return_url: RETURN, ...body } });

async function openPortal(userId: string) {
  const res = await createSession({ user_id: userId });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; url: string; expires_at: string };
}

async function page(path: string, init: RequestInit = {}) {
  const response = await exports.default.fetch(`${BASE}${path}`, { redirect: "manual", ...init });
  const pdf = response.headers.get("content-type") === "application/pdf";
  return { status: response.status, headers: response.headers, html: pdf ? new TextDecoder().decode(await response.arrayBuffer()) : await response.text() };
}

const pathOf = (session: { url: string }) => new URL(session.url).pathname;

/** The action_key the page put in its forms. */
const actionKeyIn = (html: string) => /name="action_key" value="([0-9A-Za-z]+)"/.exec(html)![1];

/** Submits a form of the portal as a browser does (form-encoded, same origin). */
const submit = (path: string, fields: Record<string, string>, headers: Record<string, string> = { origin: BASE }) =>
  page(path, { method: "POST", body: new URLSearchParams(fields), headers: { "content-type": "application/x-www-form-urlencoded", ...headers } });

async function savedCard(userId: string, token = "pm_card_visa", key = acct.key) {
  const res = await call(`/api/users/${userId}/payment-methods`, { key, body: { processor_token: token } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string };
}

/** A user with a saved card A and an active subscription charging it. */
async function customerWithSubscription(name = "Ada Lovelace") {
  const user = await createUser(acct, { name, email: `${name.split(" ")[0].toLowerCase()}@example.com` });
  const cardA = await savedCard(user.id);
  const sub = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, payment_method: cardA.id } });
  expect(sub.status, sub.text).toBe(201);
  return { user, cardA, sub: sub.body as Record<string, any> };
}

const count = async (type: string, objectId: string) => (await eventsOf(acct.id, type)).filter((e) => (e.body.data?.id ?? e.body.subscription_id) === objectId).length;
const paymentMethod = async (userId: string, id: string) => (await call(`/api/users/${userId}/payment-methods/${id}`, { key: acct.key })).body;
const userOf = async (id: string) => (await call(`/api/users/${id}`, { key: acct.key })).body;
const subscriptionOf = async (id: string) => (await call(`/subscriptions/${id}`, { key: acct.key })).body;

describe("POST /portal/sessions", () => {
  it("answers 201 with a one-hour url under PUBLIC_URL, its secret in the path", async () => {
    const user = await createUser(acct);
    const res = await createSession({ user_id: user.id });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^bps_[0-9a-z]{26}$/),
      object: "portal_session",
      url: expect.stringMatching(new RegExp(`^${BASE}/portal/bps_[0-9a-z]{26}/[0-9A-Za-z]{40}$`)),
      livemode: false,
      user_id: user.id,
      return_url: RETURN,
      expires_at: expect.stringMatching(ISO_MS),
      created_at: expect.stringMatching(ISO_MS),
    });
    expect(res.body.url).toContain(`/portal/${res.body.id}/`);
    expect(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)).toBe(60 * 60 * 1000);
  });

  it("replays its answer for a retry with the same Idempotency-Key, and makes one session", async () => {
    const user = await createUser(acct);
    const first = await createSession({ user_id: user.id }, { idempotencyKey: "portal-once" });
    const again = await createSession({ user_id: user.id }, { idempotencyKey: "portal-once" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM portal_sessions WHERE user_id = ?").bind(user.id).first<{ n: number }>();
    expect(rows!.n).toBe(1);
  });

  it("answers 404 for another account's user, the other mode's user, or no user at all, and writes nothing", async () => {
    const theirs = await createUser(other);
    const before = await env.DB.prepare("SELECT count(*) AS n FROM portal_sessions").first<{ n: number }>();
    const res = await createSession({ user_id: theirs.id });
    expectError(res, 404, "not_found_error");
    expect(res.body.error.param).toBe("user_id");
    const mine = await createUser(acct);
    expectError(await createSession({ user_id: mine.id }, { key: acct.liveKey }), 404, "not_found_error");
    expectError(await createSession({ user_id: "usr_01jd2x4k5m6n7p8q9r0s1t2v3w" }), 404, "not_found_error");
    expectError(await createSession({ user_id: "nonsense" }), 404, "not_found_error");
    const after = await env.DB.prepare("SELECT count(*) AS n FROM portal_sessions").first<{ n: number }>();
    expect(after!.n).toBe(before!.n);
  });

  it("reads one by id and lists them newest first, by user; another account's is 404", async () => {
    const user = await createUser(acct);
    const session = await openPortal(user.id);
    const read = await call(`/portal/sessions/${session.id}`, { key: acct.key });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(session);
    const list = await call(`/portal/sessions?user_id=${user.id}`, { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body.data.map((s: { id: string }) => s.id)).toEqual([session.id]);
    expectError(await call(`/portal/sessions/${session.id}`, { key: other.key }), 404, "not_found_error");
    expectError(await call(`/portal/sessions/${session.id}`, { key: acct.liveKey }), 404, "not_found_error");
  });

  it("checks return_url as checkout checks success_url", async () => {
    const user = await createUser(acct);
    for (const bad of ["shop.example.com/account", "ftp://shop.example.com/", "https://user:pw@shop.example.com/", "javascript:alert(1)"]) {
      const res = await createSession({ user_id: user.id, return_url: bad });
      expectError(res, 400, "invalid_request_error", "url_invalid");
      expect(res.body.error.param).toBe("return_url");
    }
    expectError(await createSession({ user_id: user.id, return_url: 7 }), 400, "invalid_request_error");
    expectError(await call("/portal/sessions", { key: acct.key, body: { user_id: user.id } }), 400, "invalid_request_error");
  });

  it("needs portal_sessions:write", async () => {
    const user = await createUser(acct);
    const readOnly = await createKey(acct, ["users:read"]);
    expectError(await createSession({ user_id: user.id }, { key: readOnly.secret }), 403, "permission_error");
    const portal = await createKey(acct, ["portal_sessions:write"]);
    expect((await createSession({ user_id: user.id }, { key: portal.secret })).status).toBe(201);
  });
});

describe("the portal page", () => {
  it("shows the user's subscriptions, cards (the default badged), invoices with PDFs and the link back, framed by no one", async () => {
    const { user, cardA, sub } = await customerWithSubscription("Grace Hopper");
    expect((await call(`/api/users/${user.id}/payment-methods/${cardA.id}/default`, { key: acct.key, method: "POST" })).status).toBe(200);
    const session = await openPortal(user.id);
    const shown = await page(pathOf(session));
    expect(shown.status).toBe(200);
    expect(shown.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(shown.headers.get("cache-control")).toBe("no-store");
    expect(shown.html).toContain("Grace Hopper");
    expect(shown.html).toContain("Pro");
    expect(shown.html).toContain("19.99 USD per month");
    expect(shown.html).toContain(`Renews on ${sub.next_billing_date.slice(0, 10)}`);
    expect(shown.html).toMatch(/Visa •••• 4242<\/strong><span class="badge">Default<\/span>/);
    expect(shown.html).toContain(`href="${RETURN}"`);
    const invoices = (await call(`/invoices?user_id=${user.id}`, { key: acct.key })).body.data;
    expect(invoices).toHaveLength(1);
    expect(shown.html).toContain(invoices[0].number);
    expect(shown.html).toContain(`${pathOf(session)}/invoices/${invoices[0].id}/pdf`);
    expect(shown.html).not.toContain(acct.key);
    expect(shown.html).not.toMatch(/sk_(test|live)_/);
    const pdf = await page(`${pathOf(session)}/invoices/${invoices[0].id}/pdf`);
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("content-type")).toBe("application/pdf");
    expect(pdf.html.startsWith("%PDF-")).toBe(true);
  });

  it("answers 404 for a wrong secret, another session's secret or an unknown session, and 410 once its hour is over", async () => {
    const user = await createUser(acct);
    const session = await openPortal(user.id);
    const otherSession = await openPortal(user.id);
    const [, , id, secret] = pathOf(session).split("/");
    const wrong = `${secret.slice(0, 39)}${secret.endsWith("a") ? "b" : "a"}`;
    for (const path of [`/portal/${id}/${wrong}`, `/portal/${id}/${pathOf(otherSession).split("/")[3]}`, `/portal/bps_01jd2x4k5m6n7p8q9r0s1t2v3w/${secret}`, `/portal/${id}/short`]) {
      const res = await page(path);
      expect(res.status, path).toBe(404);
      expect(res.html).not.toContain("<form");
    }
    await env.DB.prepare("UPDATE portal_sessions SET expires_at = ? WHERE id = ?").bind(new Date(Date.now() - 1000).toISOString(), id).run();
    const expired = await page(pathOf(session));
    expect(expired.status).toBe(410);
    expect(expired.html).toContain("expired");
    expect(expired.html).not.toContain("<form");
    const posted = await submit(`${pathOf(session)}/payment-methods`, { card_number: "4242424242424242", exp_month: "12", exp_year: String(nextYear), cvc: "123" });
    expect(posted.status).toBe(410);
  });

  it("an unknown secret's form writes nothing", async () => {
    const { user, cardA } = await customerWithSubscription("Wrong Secret");
    const session = await openPortal(user.id);
    const [, , id] = pathOf(session).split("/");
    const res = await submit(`/portal/${id}/${"x".repeat(40)}/payment-methods/${cardA.id}/remove`, { action_key: "k".repeat(24) });
    expect(res.status).toBe(404);
    expect((await paymentMethod(user.id, cardA.id)).detached_at ?? null).toBeNull();
  });
});

describe("the portal's actions", () => {
  it("adds a card, makes it the default (the subscription moves to it), removes the old one: each the API's action with its events", async () => {
    const { user, cardA, sub } = await customerWithSubscription("Katherine Johnson");
    const session = await openPortal(user.id);
    const base = pathOf(session);

    // Add a card through the hosted card form.
    const form = await page(`${base}/payment-methods/new`);
    expect(form.status).toBe(200);
    for (const name of ["cc-number", "cc-exp-month", "cc-exp-year", "cc-csc"]) expect(form.html).toContain(`autocomplete="${name}"`);
    sentPans.add("5555555555554444");
    sentCvvs.add("321");
    const added = await submit(`${base}/payment-methods`, { cardholder_name: "K Johnson", card_number: "5555555555554444", exp_month: "11", exp_year: String(nextYear), cvc: "321", action_key: actionKeyIn(form.html) });
    expect(added.status, added.html).toBe(303);
    expect(added.headers.get("location")).toBe(`${base}?done=added`);
    const cards = (await call(`/api/users/${user.id}/payment-methods`, { key: acct.key })).body.data as any[];
    const cardB = cards.find((c) => c.card.last4 === "4444");
    expect(cardB).toBeDefined();
    expect(await count("payment_method.attached", cardB.id)).toBe(1);
    const after = await page(`${base}?done=added`);
    expect(after.html).toContain("Your card was added.");
    expect(after.html).toContain("Mastercard •••• 4444");

    // Make it the default: the user's default, and the subscription charges it from now on.
    const updatedBefore = await count("subscription_updated", sub.id);
    const made = await submit(`${base}/payment-methods/${cardB.id}/default`, { action_key: actionKeyIn(after.html) });
    expect(made.status, made.html).toBe(303);
    expect(made.headers.get("location")).toBe(`${base}?done=default`);
    expect((await userOf(user.id)).default_payment_method).toBe(cardB.id);
    expect((await subscriptionOf(sub.id)).payment_method).toBe(cardB.id);
    expect((await eventsOf(acct.id, "customer.updated")).filter((e) => e.body.data.id === user.id).map((e) => e.body.data.default_payment_method)).toEqual([cardB.id]);
    expect(await count("subscription_updated", sub.id)).toBe(updatedBefore + 1);
    const badged = await page(base);
    expect(badged.html).toMatch(/Mastercard •••• 4444<\/strong><span class="badge">Default<\/span>/);

    // Remove the old card.
    const removed = await submit(`${base}/payment-methods/${cardA.id}/remove`, { action_key: actionKeyIn(badged.html) });
    expect(removed.status, removed.html).toBe(303);
    expect(removed.headers.get("location")).toBe(`${base}?done=removed`);
    expect((await paymentMethod(user.id, cardA.id)).detached_at).toMatch(ISO_MS);
    expect(await count("payment_method.detached", cardA.id)).toBe(1);
  });

  it("refuses to remove the card an active subscription charges, with a clear message, and changes nothing", async () => {
    const { user, cardA } = await customerWithSubscription("Dorothy Vaughan");
    const session = await openPortal(user.id);
    const shown = await page(pathOf(session));
    const refused = await submit(`${pathOf(session)}/payment-methods/${cardA.id}/remove`, { action_key: actionKeyIn(shown.html) });
    expect(refused.status).toBe(409);
    expect(refused.html).toContain("This card pays for a subscription that is still running");
    expect((await paymentMethod(user.id, cardA.id)).detached_at ?? null).toBeNull();
    expect(await count("payment_method.detached", cardA.id)).toBe(0);
  });

  it("cancels at period end after a confirmation step, then shows when it cancels; a double submit is one change", async () => {
    const { user, sub } = await customerWithSubscription("Mary Jackson");
    const session = await openPortal(user.id);
    const base = pathOf(session);
    const overview = await page(base);
    expect(overview.html).toContain(`${base}/subscriptions/${sub.id}/cancel`);
    const confirm = await page(`${base}/subscriptions/${sub.id}/cancel`);
    expect(confirm.status).toBe(200);
    expect(confirm.html).toContain("Cancel Pro?");
    expect(confirm.html).toContain(sub.next_billing_date.slice(0, 10));
    expect((await subscriptionOf(sub.id)).cancel_at_period_end).toBe(false);
    const before = await count("subscription_updated", sub.id);
    const fields = { action_key: actionKeyIn(confirm.html) };
    const [first, second] = await Promise.all([submit(`${base}/subscriptions/${sub.id}/cancel`, fields), submit(`${base}/subscriptions/${sub.id}/cancel`, fields)]);
    expect([first.status, second.status]).toEqual([303, 303]);
    expect(first.headers.get("location")).toBe(`${base}?done=canceled`);
    const read = await subscriptionOf(sub.id);
    expect(read).toMatchObject({ status: "active", cancel_at_period_end: true });
    expect(await count("subscription_updated", sub.id)).toBe(before + 1);
    const shown = await page(`${base}?done=canceled`);
    expect(shown.html).toContain(`Cancels on ${read.next_billing_date.slice(0, 10)}`);
    expect(shown.html).not.toContain(`${base}/subscriptions/${sub.id}/cancel`);
  });

  it("removes a card once when its form is submitted twice", async () => {
    const user = await createUser(acct, { name: "Twice", email: "twice@example.com" });
    const card = await savedCard(user.id);
    const session = await openPortal(user.id);
    const fields = { action_key: actionKeyIn((await page(pathOf(session))).html) };
    const [first, second] = await Promise.all([submit(`${pathOf(session)}/payment-methods/${card.id}/remove`, fields), submit(`${pathOf(session)}/payment-methods/${card.id}/remove`, fields)]);
    expect([first.status, second.status]).toEqual([303, 303]);
    expect(await count("payment_method.detached", card.id)).toBe(1);
  });

  it("answers 404 for another user's card, subscription or invoice in a form, and writes nothing", async () => {
    const mine = await customerWithSubscription("Mine Only");
    const theirs = await customerWithSubscription("Theirs Only");
    const session = await openPortal(mine.user.id);
    const base = pathOf(session);
    const key = { action_key: actionKeyIn((await page(base)).html) };
    const eventsBefore = (await eventsOf(acct.id)).length;
    for (const path of [`${base}/payment-methods/${theirs.cardA.id}/remove`, `${base}/payment-methods/${theirs.cardA.id}/default`, `${base}/subscriptions/${theirs.sub.id}/cancel`]) {
      const res = await submit(path, key);
      expect(res.status, path).toBe(404);
      expect(res.html).toContain("not one of yours");
    }
    expect((await page(`${base}/subscriptions/${theirs.sub.id}/cancel`)).status).toBe(404);
    const theirInvoice = (await call(`/invoices?user_id=${theirs.user.id}`, { key: acct.key })).body.data[0];
    expect((await page(`${base}/invoices/${theirInvoice.id}/pdf`)).status).toBe(404);
    // Another account's card, too.
    const stranger = await createUser(other);
    const strangerCard = await savedCard(stranger.id, "pm_card_visa", other.key);
    expect((await submit(`${base}/payment-methods/${strangerCard.id}/remove`, key)).status).toBe(404);
    expect((await paymentMethod(theirs.user.id, theirs.cardA.id)).detached_at ?? null).toBeNull();
    expect((await userOf(theirs.user.id)).default_payment_method).toBeNull();
    expect((await subscriptionOf(theirs.sub.id)).cancel_at_period_end).toBe(false);
    expect((await eventsOf(acct.id)).length).toBe(eventsBefore);
  });

  it("refuses a form sent from another site, and writes nothing", async () => {
    const user = await createUser(acct, { name: "Cross", email: "cross@example.com" });
    const card = await savedCard(user.id);
    const session = await openPortal(user.id);
    const fields = { action_key: actionKeyIn((await page(pathOf(session))).html) };
    const res = await submit(`${pathOf(session)}/payment-methods/${card.id}/remove`, fields, { origin: "https://evil.example" });
    expect(res.status).toBe(400);
    const site = await submit(`${pathOf(session)}/payment-methods/${card.id}/remove`, fields, { "sec-fetch-site": "cross-site" });
    expect(site.status).toBe(400);
    expect((await paymentMethod(user.id, card.id)).detached_at ?? null).toBeNull();
  });

  it("shows a card the API refuses on the add-a-card form, never repeating its number, and saves nothing", async () => {
    const user = await createUser(acct, { name: "Refused", email: "refused@example.com" });
    const session = await openPortal(user.id);
    sentPans.add("4242424242424241");
    sentCvvs.add("123");
    const res = await submit(`${pathOf(session)}/payment-methods`, { card_number: "4242424242424241", exp_month: "12", exp_year: String(nextYear), cvc: "123" });
    expect(res.status).toBe(400);
    expect(res.html).toContain('role="alert"');
    expect(res.html).toContain('autocomplete="cc-number"');
    expect(res.html).not.toContain("4242424242424241");
    expect((await call(`/api/users/${user.id}/payment-methods`, { key: acct.key })).body.data).toEqual([]);
  });
});

describe("POST /api/users/{id}/payment-methods/{pm_id}/default", () => {
  it("sets the user's default and emits customer.updated; detaching that card clears it", async () => {
    const user = await createUser(acct, { name: "Default", email: "default@example.com" });
    const card = await savedCard(user.id);
    const res = await call(`/api/users/${user.id}/payment-methods/${card.id}/default`, { key: acct.key, method: "POST" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: user.id, object: "user", default_payment_method: card.id });
    expect((await call(`/api/users/${user.id}/payment-methods/${card.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expect((await userOf(user.id)).default_payment_method).toBeNull();
  });

  it("answers 404 for another user's card and 400 for a detached one, changing nothing", async () => {
    const user = await createUser(acct, { name: "Mine", email: "mine@example.com" });
    const someone = await createUser(acct, { name: "Someone", email: "someone@example.com" });
    const theirs = await savedCard(someone.id);
    expectError(await call(`/api/users/${user.id}/payment-methods/${theirs.id}/default`, { key: acct.key, method: "POST" }), 404, "not_found_error");
    const mine = await savedCard(user.id);
    await call(`/api/users/${user.id}/payment-methods/${mine.id}`, { key: acct.key, method: "DELETE" });
    expectError(await call(`/api/users/${user.id}/payment-methods/${mine.id}/default`, { key: acct.key, method: "POST" }), 400, "invalid_request_error", "payment_method_detached");
    expect((await userOf(user.id)).default_payment_method).toBeNull();
    expectError(await call(`/api/users/${user.id}/payment-methods/${mine.id}/default`, { key: other.key, method: "POST" }), 404, "not_found_error");
  });
});
