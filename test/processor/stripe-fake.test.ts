// The fake Stripe keeps Stripe's rules, or the connector's tests would prove nothing: its
// idempotency (replay, mismatch, per-account scope, what is not kept, the 24 hours), its refusals,
// its faults, and the control routes that `npm run fake-stripe` serves.
import { describe, expect, it } from "vitest";
import { FAKE_API_BASE, TEST_SECRET_KEY, newFakeStripe, requestsOf } from "../support/fake-stripe-env";
import type { FakeStripe } from "../support/fake-stripe";

const auth = { Authorization: `Bearer ${TEST_SECRET_KEY}`, "Content-Type": "application/x-www-form-urlencoded" };

async function call(fake: FakeStripe, method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const response = await fake.fetch(`${FAKE_API_BASE}${path}`, { method, headers: { ...auth, ...headers }, body });
  return { status: response.status, replayed: response.headers.get("Idempotent-Replayed"), body: (await response.json()) as Record<string, any> };
}

const CUSTOMER = "metadata[tender_user]=usr_1&email=a%40example.com";

describe("the fake's idempotency, as Stripe's", () => {
  it("replays the first answer for the same key and parameters, and makes nothing new", async () => {
    const fake = newFakeStripe();
    const first = await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" });
    const again = await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" });
    expect(first).toMatchObject({ status: 200, replayed: null });
    expect(again).toMatchObject({ status: 200, replayed: "true", body: { id: first.body.id } });
    expect(fake.count("customers")).toBe(1);
  });

  it("answers 400 idempotency_error for the same key with other parameters", async () => {
    const fake = newFakeStripe();
    await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" });
    const other = await call(fake, "POST", "/v1/customers", "metadata[tender_user]=usr_2", { "Idempotency-Key": "k1" });
    expect(other).toMatchObject({ status: 400, body: { error: { type: "idempotency_error" } } });
    expect(fake.count("customers")).toBe(1);
  });

  it("replays a decline too: the declined PaymentIntent is not tried again", async () => {
    const fake = newFakeStripe();
    const customer = (await call(fake, "POST", "/v1/customers", CUSTOMER)).body.id;
    const method = (await call(fake, "POST", "/v1/payment_methods", "type=card&card[number]=4000000000000002&card[exp_month]=12&card[exp_year]=2030")).body.id;
    const intent = `amount=1000&currency=usd&customer=${customer}&payment_method=${method}&confirm=true&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=never`;
    const first = await call(fake, "POST", "/v1/payment_intents", intent, { "Idempotency-Key": "pi-1" });
    const again = await call(fake, "POST", "/v1/payment_intents", intent, { "Idempotency-Key": "pi-1" });
    expect(first).toMatchObject({ status: 402, body: { error: { type: "card_error", code: "card_declined", decline_code: "generic_decline" } } });
    expect(again).toMatchObject({ status: 402, replayed: "true", body: { error: { payment_intent: { id: first.body.error.payment_intent.id } } } });
    expect(fake.count("paymentIntents")).toBe(1);
  });

  it("keeps nothing for a request refused before it ran (an invalid parameter, a 429, a 500)", async () => {
    const fake = newFakeStripe();
    expect((await call(fake, "POST", "/v1/customers", `${CUSTOMER}&nickname=x`, { "Idempotency-Key": "k1" })).status).toBe(400);
    fake.inject({ kind: "status", status: 429 }, { kind: "status", status: 500 });
    expect((await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" })).status).toBe(429);
    expect((await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" })).status).toBe(500);
    const ran = await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" });
    expect(ran).toMatchObject({ status: 200, replayed: null });
    expect(fake.count("customers")).toBe(1);
  });

  it("scopes keys to the account: the same key on two connected accounts is two requests", async () => {
    const fake = newFakeStripe();
    const [a, b] = [fake.createConnectedAccount(), fake.createConnectedAccount()];
    for (const account of [a, b]) await call(fake, "POST", "/v1/transfers", `amount=1000&currency=usd&destination=${account}`);
    for (const account of [a, b]) {
      const card = fake.externalAccounts.get(account)![0].id;
      const payout = await call(fake, "POST", "/v1/payouts", `amount=400&currency=usd&destination=${card}`, { "Idempotency-Key": "same", "Stripe-Account": account });
      expect(payout).toMatchObject({ status: 200, replayed: null });
    }
    expect(fake.count("payouts")).toBe(2);
    expect([fake.balance(a, "usd"), fake.balance(b, "usd")]).toEqual([600, 600]);
  });

  it("forgets every key when told 24 hours have passed: the same request then makes a second object", async () => {
    const fake = newFakeStripe();
    await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" });
    fake.forgetIdempotencyKeys();
    expect(await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" })).toMatchObject({ status: 200, replayed: null });
    expect(fake.count("customers")).toBe(2);
  });
});

describe("the fake's refusals and faults", () => {
  it("answers 401 to a key it was told to refuse, or one that is not a Stripe key", async () => {
    const fake = newFakeStripe();
    fake.rejectedKeys.add(TEST_SECRET_KEY);
    expect((await call(fake, "GET", "/v1/account")).status).toBe(401);
    const response = await fake.fetch(`${FAKE_API_BASE}/v1/account`, { headers: { Authorization: "Bearer not-a-key" } });
    expect(response.status).toBe(401);
  });

  it("answers 404 to an operation Stripe's document does not have, and records it as none", async () => {
    const fake = newFakeStripe();
    expect((await call(fake, "POST", "/v1/charges", "amount=100&currency=usd")).status).toBe(404);
    expect(fake.requests[0]).toMatchObject({ operation: null, violations: ["POST /v1/charges: no such path in Stripe's document"] });
    expect(fake.specViolations()).toEqual(["POST /v1/charges: POST /v1/charges: no such path in Stripe's document"]);
  });

  it("runs a request and then drops the connection (timeout after success): the object exists, the caller saw nothing", async () => {
    const fake = newFakeStripe();
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/customers" });
    await expect(call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" })).rejects.toThrow(/Network connection lost/);
    expect(fake.count("customers")).toBe(1);
    expect(await call(fake, "POST", "/v1/customers", CUSTOMER, { "Idempotency-Key": "k1" })).toMatchObject({ status: 200, replayed: "true" });
  });

  it("answers 429 with Retry-After, 409 and 500 the number of times it is told, on the operation it is told", async () => {
    const fake = newFakeStripe();
    fake.inject({ kind: "status", status: 429, operation: "POST /v1/customers", times: 2, retryAfter: 2 });
    expect((await call(fake, "GET", "/v1/account")).status).toBe(200);
    const limited = await fake.fetch(`${FAKE_API_BASE}/v1/customers`, { method: "POST", headers: auth, body: CUSTOMER });
    expect([limited.status, limited.headers.get("Retry-After")]).toEqual([429, "2"]);
    expect((await call(fake, "POST", "/v1/customers", CUSTOMER)).status).toBe(429);
    expect((await call(fake, "POST", "/v1/customers", CUSTOMER)).status).toBe(200);
    fake.inject({ kind: "status", status: 409 });
    expect((await call(fake, "GET", "/v1/account")).body.error.type).toBe("idempotency_error");
  });

  it("finds nothing by search until Stripe's index has caught up (search lag)", async () => {
    const clock = { now: Date.parse("2026-11-23T12:00:00Z") };
    const fake = newFakeStripe({ searchLagSeconds: 60, now: () => clock.now });
    await call(fake, "POST", "/v1/customers", CUSTOMER);
    const query = `/v1/customers/search?query=${encodeURIComponent("metadata['tender_user']:'usr_1'")}`;
    expect((await call(fake, "GET", query)).body.data).toHaveLength(0);
    clock.now += 61_000;
    expect((await call(fake, "GET", query)).body.data).toHaveLength(1);
  });

  it("builds its objects from Stripe's fixtures, changing only ids, amounts, statuses, links and metadata", async () => {
    const fake = newFakeStripe();
    const customer = (await call(fake, "POST", "/v1/customers", CUSTOMER)).body;
    const fixture = fake.fixtures.resources.customer;
    expect(Object.keys(customer).sort()).toEqual(Object.keys(fixture).sort());
    expect(customer).toMatchObject({ object: "customer", invoice_prefix: fixture.invoice_prefix, balance: fixture.balance, email: "a@example.com", metadata: { tender_user: "usr_1" } });
    expect(customer.id).not.toBe(fixture.id);
    expect(fake.specViolations()).toEqual([]);
  });
});

describe("the fake's control routes (what npm run fake-stripe serves under /_fake)", () => {
  const control = async (fake: FakeStripe, method: string, path: string, body?: unknown) => {
    const response = await fake.fetch(`${FAKE_API_BASE}/_fake${path}`, { method, headers: { "Content-Type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  it("makes a connected account, injects faults, settles a payout and delivers its signed event", async () => {
    const delivered: { url: string; signature: string | null; body: string }[] = [];
    const fake = newFakeStripe({ deliver: async (url, init) => (delivered.push({ url, signature: new Headers(init.headers).get("Stripe-Signature"), body: String(init.body) }), new Response("ok")) });
    const account = (await control(fake, "POST", "/accounts", { cards: [{ last4: "4242", expMonth: 12, expYear: 2030 }] })).body.id;
    expect(account).toMatch(/^acct_/);
    expect((await control(fake, "POST", "/faults", { kind: "status", status: 500, operation: "POST /v1/payouts" })).body.pending).toHaveLength(1);
    await call(fake, "POST", "/v1/transfers", `amount=1000&currency=usd&destination=${account}`);
    const card = fake.externalAccounts.get(account)![0].id;
    expect((await call(fake, "POST", "/v1/payouts", `amount=1000&currency=usd&destination=${card}`, { "Stripe-Account": account })).status).toBe(500);
    const payout = (await call(fake, "POST", "/v1/payouts", `amount=1000&currency=usd&destination=${card}`, { "Stripe-Account": account })).body.id;
    expect((await control(fake, "POST", `/payouts/${payout}/settle`, { status: "paid" })).body.events).toEqual([{ id: expect.stringMatching(/^evt_/), type: "payout.paid" }]);
    const results = (await control(fake, "POST", "/events/deliver", { url: "http://127.0.0.1:8816/processor-webhooks/stripe/acct_1", secret: "whsec_x", twice: true })).body.delivered;
    expect(results.map((r: { status: number }) => r.status)).toEqual([200, 200]);
    expect(delivered[0]).toMatchObject({ url: "http://127.0.0.1:8816/processor-webhooks/stripe/acct_1", signature: expect.stringMatching(/^t=\d+,v1=[0-9a-f]{64}$/) });
    expect(JSON.parse(delivered[0].body)).toMatchObject({ type: "payout.paid", account, data: { object: { id: payout, status: "paid" } } });
    const state = (await control(fake, "GET", "/state")).body;
    expect(state).toMatchObject({ payouts: [{ id: payout, status: "paid" }], events: [{ type: "payout.paid", delivered: true }], spec_violations: [] });
    expect(JSON.stringify(state)).not.toContain('"_account"');
  });

  it("with a webhook endpoint set, delivers each event, signed, as it happens", async () => {
    const delivered: { signature: string | null; type: string }[] = [];
    const fake = newFakeStripe({ deliver: async (_url, init) => (delivered.push({ signature: new Headers(init.headers).get("Stripe-Signature"), type: JSON.parse(String(init.body)).type }), new Response("ok")) });
    expect((await control(fake, "POST", "/webhook-endpoint", { url: "http://127.0.0.1:8816/processor-webhooks/stripe/acct_1", secret: "whsec_x" })).body).toEqual({
      webhook_endpoint: { url: "http://127.0.0.1:8816/processor-webhooks/stripe/acct_1" },
    });
    const account = fake.createConnectedAccount();
    await call(fake, "POST", "/v1/transfers", `amount=1000&currency=usd&destination=${account}`);
    const card = fake.externalAccounts.get(account)![0].id;
    const payout = (await call(fake, "POST", "/v1/payouts", `amount=1000&currency=usd&destination=${card}`, { "Stripe-Account": account })).body.id;
    await control(fake, "POST", `/payouts/${payout}/settle`, { status: "failed", failure_code: "could_not_process" });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(delivered).toEqual([{ signature: expect.stringMatching(/^t=\d+,v1=/), type: "payout.failed" }]);
    expect(fake.balance(account, "usd")).toBe(1000);
  });

  it("answers 404 to an unknown control and 400 to a control about an unknown object", async () => {
    const fake = newFakeStripe();
    expect((await control(fake, "POST", "/nothing", {})).status).toBe(404);
    expect((await control(fake, "POST", "/payouts/po_missing/settle", { status: "paid" })).status).toBe(400);
    expect(requestsOf(fake, "POST /v1/payouts")).toHaveLength(0);
  });
});
