// @tender/client against the Worker: typed calls, Idempotency-Keys and the retries that reuse
// them, the one error class, auto-pagination and read-your-writes bookmarks.
import { afterEach, describe, expect, it } from "vitest";
import { API_VERSION, Tender, TenderError, type Schemas } from "@tender/client";
import { CURRENT_API_VERSION } from "../../src/domain/api-versions";
import { useProcessor } from "../../src/processor";
import { BASE, signup } from "../support/http";
import { countRows } from "../support/db";
import { gate, recordingProcessor } from "../support/faults";
import { tenderFor, workerFetch } from "./support";

const expYear = new Date().getUTCFullYear() + 3;
const card = (pan = "4242424242424242") => ({ payment_method: "card" as const, card_number: pan, expiration_month: 12, expiration_year: expYear, cvv: "123" });
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ada = { name: "Ada Lovelace", email: "ada@example.com" };

afterEach(() => useProcessor());

describe("typed calls against the Worker", () => {
  it("a payout: created with a generated Idempotency-Key, read back typed; reads carry no key", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    expect(user).toMatchObject({ object: "user", name: "Ada Lovelace", email: "ada@example.com" });
    const payout = await tender.POST("/payout", {
      body: { recipient_id: user.id, amount: 5000, currency: "USD", description: "Vendor payout", ...card() },
    });
    expect(payout).toMatchObject({ object: "payout", recipient_id: user.id, amount: 5000, currency: "usd", status: "pending" });
    expect(payout.id).toMatch(/^po_/);
    const read: Schemas["Payout"] = await tender.GET("/payouts/{id}", { params: { path: { id: payout.id } } });
    expect(read.id).toBe(payout.id);
    expect(read.card).toMatchObject({ last4: "4242" });

    const [createUser, createPayout, getPayout] = sent;
    expect(createUser.headers.get("idempotency-key")).toMatch(UUID);
    expect(createPayout.headers.get("idempotency-key")).toMatch(UUID);
    expect(createPayout.headers.get("idempotency-key")).not.toBe(createUser.headers.get("idempotency-key"));
    expect(createPayout.headers.get("authorization")).toBe(`Bearer ${acct.key}`);
    expect(getPayout.method).toBe("GET");
    expect(getPayout.headers.get("idempotency-key")).toBeNull();
  });

  it("a one-off payment: payments.create (manual), capture with the caller's Idempotency-Key, cancel of another, each typed; a decline throws a 402 TenderError", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    const held: Schemas["Payment"] = await tender.payments.create({ amount: 2500, currency: "usd", user_id: user.id, capture_method: "manual", ...card() });
    expect(held).toMatchObject({ object: "payment", status: "requires_capture", amount_capturable: 2500, subscription_id: null });
    const captured = await tender.payments.capture(held.id, { amount: 2000 }, { idempotencyKey: "capture-order-6735" });
    expect(captured).toMatchObject({ id: held.id, status: "completed", amount_received: 2000 });
    expect(sent.at(-1)!.headers.get("idempotency-key")).toBe("capture-order-6735");
    expect(await tender.payments.get(held.id)).toEqual(captured);
    const other = await tender.payments.create({ amount: 900, currency: "usd", user_id: user.id, capture_method: "manual", ...card() });
    expect(await tender.payments.cancel(other.id)).toMatchObject({ status: "canceled", cancellation_reason: null });
    const declined = await tender.payments.create({ amount: 900, currency: "usd", user_id: user.id, ...card("4000000000000002") }).catch((error: unknown) => error);
    expect(declined).toBeInstanceOf(TenderError);
    expect(declined).toMatchObject({ status: 402, code: "card_declined", decline_code: "card_declined" });
  });

  it("a checkout session: createCheckoutSession with the caller's Idempotency-Key, getCheckoutSession, expireCheckoutSession, each typed; a bad field throws a 400 TenderError", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    const urls = { success_url: "https://shop.example.com/thanks?session={CHECKOUT_SESSION_ID}", cancel_url: "https://shop.example.com/cart" };
    const session: Schemas["CheckoutSession"] = await tender.createCheckoutSession({ mode: "payment", amount: 2500, currency: "usd", user_id: user.id, ...urls }, { idempotencyKey: "checkout-order-6735" });
    expect(session).toMatchObject({ object: "checkout_session", status: "open", mode: "payment", amount: 2500, url: expect.stringContaining(`/pay/checkout/${session.id}/`) });
    expect(sent.at(-1)!.headers.get("idempotency-key")).toBe("checkout-order-6735");
    expect(await tender.getCheckoutSession(session.id)).toEqual(session);
    expect(await tender.expireCheckoutSession(session.id)).toMatchObject({ id: session.id, status: "expired", url: null });
    const refused = await tender.createCheckoutSession({ mode: "payment", currency: "usd", user_id: user.id, ...urls }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TenderError);
    expect(refused).toMatchObject({ status: 400, code: "parameter_missing", param: "amount" });
  });

  it("a portal session: createPortalSession with the caller's Idempotency-Key, getPortalSession, typed; another account's user throws a 404 TenderError", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const { tender, sent } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    const session: Schemas["PortalSession"] = await tender.createPortalSession({ user_id: user.id, return_url: "https://shop.example.com/account" }, { idempotencyKey: "portal-ada" });
    expect(session).toMatchObject({ object: "portal_session", user_id: user.id, url: expect.stringContaining(`/portal/${session.id}/`) });
    expect(sent.at(-1)!.headers.get("idempotency-key")).toBe("portal-ada");
    expect(await tender.getPortalSession(session.id)).toEqual(session);
    const theirs = await tenderFor(other.key).tender.POST("/api/users", { body: ada });
    const refused = await tender.createPortalSession({ user_id: theirs.id, return_url: "https://shop.example.com/account" }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TenderError);
    expect(refused).toMatchObject({ status: 404 });
  });

  it("usage events: usageEvents.create, typed; a resent call is all duplicates", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    const plan = await tender.POST("/subscription-plans", { body: { name: "Calls", price: 0.01, currency: "usd", interval: "month", usage_type: "metered" } });
    const sub = await tender.POST("/subscriptions", { body: { user_id: user.id, plan_id: plan.id, ...card() } });
    const events = [
      { id: "call-1", subscription_id: sub.id, quantity: 3 },
      { id: "call-2", subscription_id: "sub_missing", quantity: 1 },
    ];
    const result: Schemas["UsageEventsResult"] = await tender.usageEvents.create(events, { idempotencyKey: "usage-batch-1" });
    expect(result).toEqual({ livemode: false, accepted: 1, duplicates: 0, rejected: [{ index: 1, code: "resource_missing", message: "No such subscription: sub_missing", param: "subscription_id" }] });
    expect(sent.at(-1)!.headers.get("idempotency-key")).toBe("usage-batch-1");
    expect(await tender.usageEvents.create(events.slice(0, 1))).toMatchObject({ accepted: 0, duplicates: 1, rejected: [] });
  });

  it("a subscription: plan, subscribe, new card details (PUT), cancel (DELETE)", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    const plan = await tender.POST("/subscription-plans", { body: { name: "Pro", price: 19.99, currency: "usd", interval: "month" } });
    expect(plan).toMatchObject({ price: 19.99, unit_amount: 1999 });
    const sub = await tender.POST("/subscriptions", { body: { user_id: user.id, plan_id: plan.id, ...card() } });
    expect(sub).toMatchObject({ object: "subscription", status: "active", user_id: user.id, plan_id: plan.id });
    expect(Date.parse(sub.next_billing_date!)).toBeGreaterThan(Date.parse(sub.start_date));
    const updated = await tender.PUT("/subscriptions/{id}", { params: { path: { id: sub.id } }, body: card("5555555555554444") });
    expect(updated.card).toMatchObject({ brand: "mastercard", last4: "4444" });
    const canceled = await tender.DELETE("/subscriptions/{id}", { params: { path: { id: sub.id } } });
    expect(canceled).toMatchObject({ id: sub.id, status: "canceled" });
    expect(canceled.canceled_at).toEqual(expect.any(String));
    // Every write had its own key: PUT and DELETE too.
    const writes = sent.filter((r) => r.method !== "GET");
    expect(writes.map((r) => r.method)).toEqual(["POST", "POST", "POST", "PUT", "DELETE"]);
    expect(new Set(writes.map((r) => r.headers.get("idempotency-key"))).size).toBe(5);
  });

  it("a caller's own Idempotency-Key is used as given, and the second call replays the first", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const first = await tender.POST("/api/users", { body: ada, headers: { "Idempotency-Key": "create-ada" } });
    const again = await tender.POST("/api/users", { body: ada, params: { header: { "idempotency-key": "create-ada" } } });
    expect(again.id).toBe(first.id);
    expect(sent.map((r) => r.headers.get("idempotency-key"))).toEqual(["create-ada", "create-ada"]);
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
  });

  it("sends the freshest Tender-Consistency bookmark back on reads (read your own writes)", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    expect(tender.consistency).toBeNull();
    const user = await tender.POST("/api/users", { body: ada });
    const bookmark = tender.consistency;
    expect(bookmark).toMatch(/^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/);
    expect(sent[0].headers.get("tender-consistency")).toBeNull();
    const read = await tender.GET("/api/users/{id}", { params: { path: { id: user.id } } });
    expect(read.id).toBe(user.id);
    expect(sent[1].headers.get("tender-consistency")).toBe(bookmark);
    expect(tender.consistency! >= bookmark!).toBe(true);
  });

  it("pins the API version its types describe (Tender-Version), unless told to use the account's", async () => {
    const acct = await signup();
    expect(API_VERSION).toBe(CURRENT_API_VERSION);
    const pinned = tenderFor(acct.key);
    await pinned.tender.GET("/api/users");
    expect(pinned.sent[0].headers.get("tender-version")).toBe(API_VERSION);
    const older = tenderFor(acct.key, { apiVersion: "2026-11-01" });
    await older.tender.GET("/api/users");
    expect(older.sent[0].headers.get("tender-version")).toBe("2026-11-01");
    const account = tenderFor(acct.key, { apiVersion: null });
    await account.tender.GET("/api/users");
    expect(account.sent[0].headers.get("tender-version")).toBeNull();
  });
});

describe("auto-pagination", () => {
  it("for await walks every page newest first, following starting_after; ending_before walks back up", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const made: string[] = [];
    for (let i = 0; i < 23; i++) made.push((await tender.POST("/api/users", { body: { name: `User ${i}`, email: `u${i}@example.com` } })).id);
    sent.length = 0;

    const seen: string[] = [];
    for await (const user of tender.list("/api/users", { limit: 10 })) seen.push(user.id);
    expect(seen).toEqual([...made].reverse());
    const pages = sent.map((r) => new URL(r.url).searchParams);
    expect(pages).toHaveLength(3);
    expect(pages[0].get("starting_after")).toBeNull();
    expect(pages[1].get("starting_after")).toBe(seen[9]);
    expect(pages[2].get("starting_after")).toBe(seen[19]);
    expect(pages.every((q) => q.get("limit") === "10")).toBe(true);

    // From the oldest, toward the newest.
    const newer: string[] = [];
    for await (const user of tender.list("/api/users", { limit: 10, ending_before: made[0] })) newer.push(user.id);
    expect(newer).toEqual(made.slice(1));

    // Breaking out early stops fetching.
    sent.length = 0;
    for await (const user of tender.list("/api/users", { limit: 5 })) if (user.id === made[20]) break;
    expect(sent).toHaveLength(1);
  });

  it("a list with path parameters: an endpoint's deliveries", async () => {
    const acct = await signup();
    const { tender } = tenderFor(acct.key);
    const endpoint = await tender.POST("/api/webhooks", { body: { url: "https://receiver.example.com/hooks", events: ["customer.created"] } });
    const deliveries = [];
    for await (const delivery of tender.list("/api/webhooks/{id}/deliveries", { limit: 1 }, { id: endpoint.id })) deliveries.push(delivery);
    expect(deliveries).toEqual([]);
    const missing = tender.list("/api/webhooks/{id}/deliveries", {}, { id: "whk_00000000000000000000000000" });
    await expect(missing.next()).rejects.toMatchObject({ status: 404, type: "not_found_error" });
  });
});

describe("retries", () => {
  it("a duplicate of a request still in flight (409 idempotency_key_in_use) waits, retries with the same key and gets the first answer", async () => {
    const acct = await signup();
    const user = await new Tender({ apiKey: acct.key, baseUrl: BASE, fetch: workerFetch().fetch }).POST("/api/users", { body: ada });
    const plan = await new Tender({ apiKey: acct.key, baseUrl: BASE, fetch: workerFetch().fetch }).POST("/subscription-plans", {
      body: { name: "Pro", price: 19.99, currency: "usd", interval: "month" },
    });
    // The first request claims its key and is held at the processor, mid-charge.
    const held = gate();
    const charges = recordingProcessor((method) => (method === "chargeCard" ? held.opened : undefined));
    const body = { user_id: user.id, plan_id: plan.id, ...card() };
    const first = new Tender({ apiKey: acct.key, baseUrl: BASE, fetch: workerFetch().fetch }).POST("/subscriptions", { body, headers: { "Idempotency-Key": "subscribe-once" } });
    while (charges.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));

    // The duplicate meets the claim; while it waits to retry, the first request finishes.
    const duplicate = workerFetch();
    const waits: number[] = [];
    const second = new Tender({
      apiKey: acct.key,
      baseUrl: BASE,
      fetch: duplicate.fetch,
      random: () => 0.5,
      sleep: async (ms) => {
        waits.push(ms);
        held.open();
        await first;
      },
    });
    const replayed = await second.POST("/subscriptions", { body, headers: { "Idempotency-Key": "subscribe-once" } });
    expect(replayed.id).toBe((await first).id);
    expect(duplicate.sent.map((r) => r.status)).toEqual([409, 201]);
    expect(duplicate.sent.map((r) => r.headers.get("idempotency-key"))).toEqual(["subscribe-once", "subscribe-once"]);
    expect(waits).toEqual([250]); // full jitter: 0.5 × 500 ms
    expect(charges).toHaveLength(1);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(1);
  });

  it("a 409 that is a conflict with the object's state is not retried", async () => {
    const acct = await signup();
    const { tender, sent, sleeps } = tenderFor(acct.key);
    const user = await tender.POST("/api/users", { body: ada });
    const payout = await tender.POST("/payout", { body: { recipient_id: user.id, amount: 100, currency: "usd", ...card() } });
    await tender.POST("/payouts/{id}/cancel", { params: { path: { id: payout.id } } });
    sent.length = 0;
    const error = await tender.POST("/payouts/{id}/cancel", { params: { path: { id: payout.id } } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TenderError);
    expect(error).toMatchObject({ status: 409, type: "invalid_request_error", code: "payout_not_pending" });
    expect(sent).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it("429 waits Retry-After, 5xx waits a jittered backoff, and every attempt carries the same key", async () => {
    const acct = await signup();
    const { fetch } = workerFetch();
    const attempts: { key: string | null; body: string }[] = [];
    const answers = [
      () => Response.json({ error: { type: "rate_limit_error", code: "rate_limited", message: "slow down", request_id: "req_x" } }, { status: 429, headers: { "Retry-After": "7" } }),
      () => Response.json({ error: { type: "api_error", code: "internal_error", message: "boom", request_id: "req_y" } }, { status: 503 }),
    ];
    const sleeps: number[] = [];
    const tender = new Tender({
      apiKey: acct.key,
      baseUrl: BASE,
      random: () => 0.25,
      sleep: async (ms) => void sleeps.push(ms),
      fetch: async (request) => {
        attempts.push({ key: request.headers.get("idempotency-key"), body: await request.clone().text() });
        const next = answers.shift();
        return next ? next() : fetch(request);
      },
    });
    const user = await tender.POST("/api/users", { body: ada });
    expect(user.name).toBe("Ada Lovelace");
    expect(sleeps).toEqual([7000, 250]); // Retry-After: 7; then 0.25 × (500 ms × 2^1)
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((a) => a.key)).size).toBe(1);
    expect(attempts[0].key).toMatch(UUID);
    expect(new Set(attempts.map((a) => a.body))).toEqual(new Set([JSON.stringify(ada)]));
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
  });

  it("stops after maxRetries and throws the last answer's error; maxRetries: 0 never retries", async () => {
    const failing = (status: number, headers: Record<string, string> = {}) => {
      const calls: number[] = [];
      const fetch = async () => {
        calls.push(status);
        return Response.json({ error: { type: "api_error", code: "internal_error", message: "down", request_id: "req_z" } }, { status, headers });
      };
      return { calls, fetch };
    };
    const five = failing(500);
    const sleeps: number[] = [];
    const error = await new Tender({ apiKey: "sk_test_x", fetch: five.fetch, random: () => 0.999, sleep: async (ms) => void sleeps.push(ms) })
      .GET("/api/users")
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 500, code: "internal_error", request_id: "req_z" });
    expect(five.calls).toHaveLength(3); // 1 + 2 retries by default
    expect(sleeps).toEqual([499, 999]); // full jitter under 500 ms, then under 1 s
    const once = failing(502);
    await expect(new Tender({ apiKey: "sk_test_x", fetch: once.fetch, maxRetries: 0 }).GET("/api/users")).rejects.toMatchObject({ status: 502 });
    expect(once.calls).toHaveLength(1);
    const five5 = failing(503);
    await expect(new Tender({ apiKey: "sk_test_x", fetch: five5.fetch, maxRetries: 5, sleep: async () => {} }).GET("/api/users")).rejects.toBeInstanceOf(TenderError);
    expect(five5.calls).toHaveLength(6);
    // A Retry-After beyond a minute is not waited for: the error comes back at once.
    const later = failing(429, { "Retry-After": "3600" });
    await expect(new Tender({ apiKey: "sk_test_x", fetch: later.fetch, sleep: async () => {} }).GET("/api/users")).rejects.toMatchObject({ status: 429, retry_after: 3600 });
    expect(later.calls).toHaveLength(1);
  });

  it("network errors are retried with the same key; when they persist the error is api_connection_error", async () => {
    const acct = await signup();
    const { fetch } = workerFetch();
    const keys: (string | null)[] = [];
    let failures = 2;
    const flaky = new Tender({
      apiKey: acct.key,
      baseUrl: BASE,
      sleep: async () => {},
      fetch: async (request) => {
        keys.push(request.headers.get("idempotency-key"));
        if (failures-- > 0) throw new TypeError("fetch failed");
        return fetch(request);
      },
    });
    const user = await flaky.POST("/api/users", { body: ada });
    expect(user.id).toMatch(/^usr_/);
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    const down = new Tender({ apiKey: acct.key, baseUrl: BASE, sleep: async () => {}, fetch: async () => Promise.reject(new TypeError("connection refused")) });
    const error = await down.GET("/api/users").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TenderError);
    expect(error).toMatchObject({ type: "api_connection_error", code: "network_error", status: 0 });
    expect((error as Error).message).toContain("connection refused");
  });
});

describe("TenderError", () => {
  it("carries type, code, param, request_id and status from the API's answer", async () => {
    const acct = await signup();
    const { tender, sent } = tenderFor(acct.key);
    const invalid = await tender.POST("/api/users", { body: { name: "Ada", email: "not-an-email" } }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(TenderError);
    expect(invalid).toBeInstanceOf(Error);
    const error = invalid as TenderError;
    expect(error).toMatchObject({ name: "TenderError", status: 400, type: "invalid_request_error", code: "parameter_invalid", param: "email" });
    expect(error.message).toMatch(/email/);
    expect(error.request_id).toMatch(/^req_/);
    expect(sent).toHaveLength(1); // a 400 is not retried

    const missing = (await tender.GET("/api/users/{id}", { params: { path: { id: "usr_00000000000000000000000000" } } }).catch((e: unknown) => e)) as TenderError;
    expect(missing).toMatchObject({ status: 404, type: "not_found_error", code: "resource_missing" });
    expect(missing.param).toBe("id");

    const unauthenticated = await new Tender({ apiKey: "sk_test_nope", baseUrl: BASE, fetch: workerFetch().fetch }).GET("/api/users").catch((e: TenderError) => e);
    expect(unauthenticated).toMatchObject({ status: 401, type: "authentication_error" });

    const user = await tender.POST("/api/users", { body: ada });
    const plan = await tender.POST("/subscription-plans", { body: { name: "Pro", price: 5, currency: "usd", interval: "month" } });
    const declined = await tender.POST("/subscriptions", { body: { user_id: user.id, plan_id: plan.id, ...card("4000000000009995") } }).catch((e: TenderError) => e);
    expect(declined).toMatchObject({ status: 402, type: "card_error", code: "card_declined", decline_code: "insufficient_funds" });
  });

  it("an answer that is not Tender's error shape still becomes a TenderError", async () => {
    const tender = new Tender({ apiKey: "sk_test_x", maxRetries: 0, fetch: async () => new Response("<html>Bad gateway</html>", { status: 502 }) });
    await expect(tender.GET("/health")).rejects.toMatchObject({ status: 502, type: "api_error", code: "unexpected_response", message: expect.stringContaining("Bad gateway") });
  });
});
