// Saved cards in live mode, against the fake Stripe: a PaymentMethod made by Stripe.js (the fake's
// tokenize) is attached to the user's Stripe Customer, charged on-session for a subscription's first
// period, and detached; card numbers are refused unless the connection has raw card data access.
// Every Stripe request is checked against Stripe's OpenAPI document, every POST carries its key.
import { applyD1Migrations } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { countRows } from "../support/db";
import { type LiveAccount, STRIPE_CARDS, connectStripe, expectSpecClean, installFakeStripe, newSecretKey, newSigningSecret, requestsOf } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(() => {
  expectSpecClean(fake);
  stripe.restore();
});

let acct: LiveAccount;
let live: Account;
let planId: string;
let userId: string;

beforeAll(async () => {
  acct = await signup("Live saved cards");
  live = { id: acct.id, key: acct.liveKey };
  // A new connection without raw card data access: the default.
  await connectStripe(acct, { rawCardData: false, publishableKey: "pk_live_51AcmeSavedCards000000" });
  planId = (await createPlan(live, { price: 20, currency: "usd" })).id;
  const user = await call("/api/users", { key: live.key, body: { name: "Grace Hopper", email: "grace@example.com" } });
  userId = user.body.id;
});

const save = (body: unknown, user = userId, idempotencyKey?: string) => call(`/api/users/${user}/payment-methods`, { key: live.key, body, idempotencyKey });

describe("live payment methods", () => {
  it("attaches a Stripe.js PaymentMethod to the user's Stripe Customer, with the reference as Idempotency-Key", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 11, expYear: 2031 });
    const res = await save({ processor_token: pm }, userId, "attach-1");
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ object: "payment_method", livemode: true, user_id: userId, type: "card", card: { brand: "visa", last4: "4242", exp_month: 11, exp_year: 2031 } });
    const [attach] = requestsOf(fake, "POST /v1/payment_methods/{payment_method}/attach");
    expect(attach.path).toBe(`/v1/payment_methods/${pm}/attach`);
    expect(attach.idempotencyKey).toMatch(new RegExp(`^${acct.id}:live:idempotency:attach-1:\\d{4}-\\d{2}-\\d{2}T[0-9:.]+Z:payment_method:attach$`));
    const customer = fake.customers.get(String(attach.params.customer))!;
    expect(customer.metadata.tender_user).toBe(userId);
    expect(fake.paymentMethods.get(pm)!.customer).toBe(customer.id);
    // A retry with the key replays Tender's answer: Stripe is not asked again.
    const again = await save({ processor_token: pm }, userId, "attach-1");
    expect(again.body).toEqual(res.body);
    expect(requestsOf(fake, "POST /v1/payment_methods/{payment_method}/attach")).toHaveLength(1);
  });

  it("sets the saved card up for off-session charges: a SetupIntent confirmed with usage off_session, the reference as its Idempotency-Key", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    const before = requestsOf(fake, "POST /v1/setup_intents").length;
    const res = await save({ processor_token: pm }, userId, "setup-1");
    expect(res.status, res.text).toBe(201);
    const sent = requestsOf(fake, "POST /v1/setup_intents").slice(before);
    expect(sent).toHaveLength(1);
    const customer = fake.paymentMethods.get(pm)!.customer;
    expect(sent[0].params).toMatchObject({ customer, payment_method: pm, confirm: "true", usage: "off_session" });
    expect(sent[0].idempotencyKey).toMatch(new RegExp(`^${acct.id}:live:idempotency:setup-1:\\d{4}-\\d{2}-\\d{2}T[0-9:.]+Z:payment_method:setup_intent$`));
    const intent = [...fake.setupIntents.values()].find((i) => i.payment_method === pm)!;
    expect(intent).toMatchObject({ status: "succeeded", customer, usage: "off_session" });
  });

  it("a card that asks its holder to authenticate on setup answers 402 authentication_required naming the checkout page; nothing saved", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.needsAuthentication });
    const res = await save({ processor_token: pm });
    expect(expectError(res, 402, "card_error", "authentication_required").param).toBe("processor_token");
    expect(res.body.error.decline_code).toBe("authentication_required");
    expect(res.body.error.message).toContain('mode "setup"');
    expect([...fake.setupIntents.values()].find((i) => i.payment_method === pm)!.status).toBe("requires_action");
    expect(await countRows("payment_methods", "processor_token LIKE ?", `%${pm}`)).toBe(0);
  });

  it("a card its bank declines on setup answers 402 card_declined; nothing saved", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    fake.inject({ kind: "card", behaviour: "insufficient_funds", operation: "POST /v1/setup_intents" });
    const res = await save({ processor_token: pm });
    expectError(res, 402, "card_error", "card_declined");
    expect(res.body.error.decline_code).toBe("insufficient_funds");
    expect(await countRows("payment_methods", "processor_token LIKE ?", `%${pm}`)).toBe(0);
  });

  it("an attach whose answer was lost is sent again with its key: one attach at Stripe, one payment method", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    const before = requestsOf(fake, "POST /v1/payment_methods/{payment_method}/attach").length;
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_methods/{payment_method}/attach" });
    const res = await save({ processor_token: pm }, userId, "attach-lost");
    expect(res.status, res.text).toBe(201);
    const sent = requestsOf(fake, "POST /v1/payment_methods/{payment_method}/attach").slice(before);
    expect(sent.map((r) => r.replayed)).toEqual([false, true]);
    expect(new Set(sent.map((r) => r.idempotencyKey)).size).toBe(1);
    expect(await countRows("payment_methods", "processor_token LIKE ?", `%${pm}`)).toBe(1);
  });

  it("answers 400 processor_token_invalid for a PaymentMethod Stripe does not have, a test name, or another customer's", async () => {
    const before = await countRows("payment_methods", "account_id = ?", acct.id);
    for (const token of ["pm_1DoesNotExist000", "pm_card_visa", "tok_visa"]) {
      expect(expectError(await save({ processor_token: token }), 400, "invalid_request_error", "processor_token_invalid").param, token).toBe("processor_token");
    }
    // The fake names the test PaymentMethods as ids it does not know: pm_card_visa is not a live card.
    const taken = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    expect((await save({ processor_token: taken })).status).toBe(201);
    const stranger = await call("/api/users", { key: live.key, body: { name: "Other Payer", email: "other@example.com" } });
    expectError(await save({ processor_token: taken }, stranger.body.id), 400, "invalid_request_error", "processor_token_invalid");
    expect(await countRows("payment_methods", "account_id = ?", acct.id)).toBe(before + 1);
  });

  it("refuses card numbers on a connection without raw card data access: 400 raw_card_data_unavailable, nothing sent to Stripe", async () => {
    const sent = fake.requests.length;
    const saved = expectError(await save(card()), 400, "invalid_request_error", "raw_card_data_unavailable");
    expect(saved.message).toMatch(/hosted checkout page/);
    expect(saved.message).toMatch(/Stripe\.js/);
    const subscribed = await call("/subscriptions", { key: live.key, body: { user_id: userId, plan_id: planId, ...card() } });
    expectError(subscribed, 400, "invalid_request_error", "raw_card_data_unavailable");
    expect(fake.requests.length).toBe(sent);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(0);
  });

  it("a subscription charges the saved card on-session at Stripe, and renewals can charge it", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    const method = (await save({ processor_token: pm })).body;
    const res = await call("/subscriptions", { key: live.key, body: { user_id: userId, plan_id: planId, payment_method: method.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "active", payment_method: method.id, card: method.card });
    const intent = requestsOf(fake, "POST /v1/payment_intents").at(-1)!;
    expect(intent.params).toMatchObject({ payment_method: pm, confirm: "true", setup_future_usage: "off_session", error_on_requires_action: "true" });
    expect(intent.params.off_session).toBeUndefined();
    expect(intent.idempotencyKey).toMatch(/:payment_intent$/);

    // A card change: card fields are refused on this connection; another saved card is taken as it is.
    const put = (body: unknown) => call(`/subscriptions/${res.body.id}`, { method: "PUT", key: live.key, body });
    expectError(await put(card()), 400, "invalid_request_error", "raw_card_data_unavailable");
    const next = (await save({ processor_token: fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 3, expYear: 2032 }) })).body;
    const setups = requestsOf(fake, "POST /v1/setup_intents").length;
    const changed = await put({ payment_method: next.id });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({ payment_method: next.id, card: { exp_month: 3, exp_year: 2032 } });
    expect(requestsOf(fake, "POST /v1/setup_intents")).toHaveLength(setups);
  });

  it("a saved card that asks for authentication makes the subscription incomplete: its PaymentIntent requires_action, kept for renewals", async () => {
    // Set up without authentication, then its bank asks for it on the first charge (both of its PaymentIntents).
    const method = (await save({ processor_token: fake.tokenize({ number: STRIPE_CARDS.succeeds }) })).body;
    fake.inject({ kind: "card", behaviour: "authentication_required", operation: "POST /v1/payment_intents", times: 2 });
    const res = await call("/subscriptions", { key: live.key, body: { user_id: userId, plan_id: planId, payment_method: method.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "incomplete", payment_method: method.id, latest_payment: { status: "requires_action", next_action: { type: "redirect_to_url" } } });
    const [request] = requestsOf(fake, "POST /v1/payment_intents").slice(-1);
    expect(request.params).toMatchObject({ setup_future_usage: "off_session", confirm: "true" });
    expect(request.params.error_on_requires_action).toBeUndefined();
  });

  it("DELETE detaches it at Stripe once no subscription charges it", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    const method = (await save({ processor_token: pm })).body;
    const res = await call(`/api/users/${userId}/payment-methods/${method.id}`, { method: "DELETE", key: live.key });
    expect(res.status, res.text).toBe(200);
    expect(fake.paymentMethods.get(pm)!.customer).toBeNull();
    const [detach] = requestsOf(fake, "POST /v1/payment_methods/{payment_method}/detach").filter((r) => r.path.includes(pm));
    expect(detach.idempotencyKey).toBe(`${method.id}:detach`);
    // Again: Stripe says it is detached already, which is what was asked.
    expect((await call(`/api/users/${userId}/payment-methods/${method.id}`, { method: "DELETE", key: live.key })).status).toBe(200);
  });

  // A one-off payment claims its key before Stripe is called, and reads the user and the saved card
  // in the claim's own batch (claimReads, src/payments/payer.ts), as in test mode
  // (test/payments/one-off.test.ts); then live mode's money claim, then Stripe.
  it("a one-off payment with a saved card and an Idempotency-Key: the user and card read with the key's claim; each error frees the key, once", async () => {
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    const method = (await save({ processor_token: pm })).body;
    const detached = (await save({ processor_token: fake.tokenize({ number: STRIPE_CARDS.succeeds }) })).body;
    expect((await call(`/api/users/${userId}/payment-methods/${detached.id}`, { method: "DELETE", key: live.key })).status).toBe(200);
    const other = (await call("/api/users", { key: live.key, body: { name: "Otto", email: "otto-live@example.com" } })).body;
    const pay = (body: Record<string, unknown>, key: string) =>
      call("/payments", { key: live.key, idempotencyKey: key, body: { amount: 2500, currency: "usd", user_id: userId, payment_method: method.id, ...body } });
    const cases: [string, Record<string, unknown>, number, string, string][] = [
      ["unknown-user", { user_id: "user_01jd2x4k5m6n7p8q9r0s1t2v3w" }, 404, "resource_missing", "user_id"],
      ["other-user-card", { user_id: other.id }, 404, "resource_missing", "payment_method"],
      ["detached-card", { payment_method: detached.id }, 400, "payment_method_detached", "payment_method"],
    ];
    const first = requestsOf(fake, "POST /v1/payment_intents").length;
    for (const [name, body, status, code, param] of cases) {
      const intents = requestsOf(fake, "POST /v1/payment_intents").length;
      const refused = await pay(body, `live-payer-${name}`);
      expect(refused.status, `${name}: ${refused.text}`).toBe(status);
      expect(refused.body.error, name).toMatchObject({ code, param });
      expect(requestsOf(fake, "POST /v1/payment_intents"), name).toHaveLength(intents);
      // Nothing was charged: the key is free for the corrected request.
      const corrected = await pay({}, `live-payer-${name}`);
      expect(corrected.status, `${name}, corrected: ${corrected.text}`).toBe(201);
      expect(corrected.body).toMatchObject({ status: "completed", livemode: true, payment_method_id: method.id, user_id: userId });
    }
    expect(requestsOf(fake, "POST /v1/payment_intents")).toHaveLength(first + cases.length);
  });
});

describe("migration 0020 on existing connections", () => {
  it("a connection made before raw_card_data existed keeps taking card numbers (raw_card_data true)", async () => {
    const old = await signup("Before 0020");
    await connectStripe(old, { rawCardData: false });
    // The table as it was before 0020, holding that connection; then 0020's statements about it.
    await env.DB.exec("ALTER TABLE processor_connections DROP COLUMN raw_card_data");
    await env.DB.exec("ALTER TABLE processor_connections DROP COLUMN publishable_key");
    type Migration = Parameters<typeof applyD1Migrations>[1][number];
    const migration = (env as unknown as { TEST_MIGRATIONS: Migration[] }).TEST_MIGRATIONS.find((m) => m.name.endsWith("_payment_methods.sql") || m.name.endsWith("_payment_methods"))!;
    for (const query of migration.queries.filter((q) => q.includes("processor_connections"))) await env.DB.prepare(query).run();
    const row = await env.DB.prepare("SELECT raw_card_data, publishable_key FROM processor_connections WHERE account_id = ?").bind(old.id).first();
    expect(row).toEqual({ raw_card_data: 1, publishable_key: null });
    const user = await call("/api/users", { key: old.liveKey, body: { name: "Old Payer", email: "old@example.com" } });
    const saved = await call(`/api/users/${user.body.id}/payment-methods`, { key: old.liveKey, body: card() });
    expect(saved.status, saved.text).toBe(201);
  });
});

describe("PUT /api/processor: publishable_key and raw_card_data", () => {
  it("answers them back; a replacement that omits them keeps them", async () => {
    const fresh = await signup("Keys");
    const body = { provider: "stripe", secret_key: newSecretKey(), webhook_secret: newSigningSecret() };
    const first = await call("/api/processor", { method: "PUT", key: fresh.liveKey, body: { ...body, publishable_key: "pk_live_51AcmeKeys0000000", raw_card_data: true } });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ publishable_key: "pk_live_51AcmeKeys0000000", raw_card_data: true });
    const rolled = await call("/api/processor", { method: "PUT", key: fresh.liveKey, body: { ...body, secret_key: newSecretKey() } });
    expect(rolled.body).toMatchObject({ publishable_key: "pk_live_51AcmeKeys0000000", raw_card_data: true });
    const other = await signup("Default");
    expect((await call("/api/processor", { method: "PUT", key: other.liveKey, body })).body).toMatchObject({ publishable_key: null, raw_card_data: false });
  });

  it("refuses a malformed publishable key, a secret one, or one of the other mode", async () => {
    const fresh = await signup("Bad keys");
    const body = { provider: "stripe", secret_key: newSecretKey(), webhook_secret: newSigningSecret() };
    for (const publishable_key of ["pk_nope", "sk_live_51AcmeKeys0000000", "", 42]) {
      expect(expectError(await call("/api/processor", { method: "PUT", key: fresh.liveKey, body: { ...body, publishable_key } }), 400, "invalid_request_error").param).toBe("publishable_key");
    }
    expectError(await call("/api/processor", { method: "PUT", key: fresh.liveKey, body: { ...body, publishable_key: "pk_test_51AcmeKeys0000000" } }), 400, "invalid_request_error", "publishable_key_mismatch");
    expect(expectError(await call("/api/processor", { method: "PUT", key: fresh.liveKey, body: { ...body, raw_card_data: "yes" } }), 400, "invalid_request_error").param).toBe("raw_card_data");
    expect((await call("/api/processor", { key: fresh.liveKey })).status).toBe(404);
  });
});
