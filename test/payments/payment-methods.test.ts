// Saved cards in test mode (issue 34, part 1): POST /api/users/{id}/payment-methods from Stripe's
// test PaymentMethod names or the card fields, list and read, DELETE (detach, 409 while a
// subscription charges it), and subscriptions paying with payment_method "pmt_…". Every error path
// answers a clear 4xx and writes nothing.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, ISO_MS, call, expectError, signup } from "../support/http";
import { createPlan, createUser } from "../support/fixtures";
import { card, cardFields, expectNoCardData } from "../support/cards";
import { countRows, eventsOf, one } from "../support/db";

let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let userId: string;
let planId: string;

beforeAll(async () => {
  acct = await signup("Saved cards");
  other = await signup("Someone else");
  userId = (await createUser(acct)).id;
  planId = (await createPlan(acct, { price: 20, currency: "usd" })).id;
});

const save = (user: string, body: unknown, key = acct.key, idempotencyKey?: string) =>
  call(`/api/users/${user}/payment-methods`, { key, body, idempotencyKey });
const saved = async (user: string, token = "pm_card_visa") => {
  const res = await save(user, { processor_token: token });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
};
const detach = (user: string, id: string, key = acct.key) => call(`/api/users/${user}/payment-methods/${id}`, { method: "DELETE", key });
const subscribeWith = (user: string, paymentMethod: string, extra: Record<string, unknown> = {}, key = acct.key) =>
  call("/subscriptions", { key, body: { user_id: user, plan_id: planId, payment_method: paymentMethod, ...extra } });

describe("POST /api/users/{id}/payment-methods", () => {
  it("saves Stripe's test PaymentMethod as the user's card and emits payment_method.attached", async () => {
    const res = await save(userId, { processor_token: "pm_card_visa" });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^pmt_[0-9a-z]{26}$/),
      object: "payment_method",
      livemode: false,
      user_id: userId,
      type: "card",
      card: { brand: "visa", last4: "4242", exp_month: 12, exp_year: expect.any(Number) },
      created_at: expect.stringMatching(ISO_MS),
      detached_at: null,
    });
    const [event] = (await eventsOf(acct.id, "payment_method.attached")).filter((e) => e.body.object_id === res.body.id);
    expect(event.body.data).toEqual(res.body);
    const mastercard = await saved(userId, "pm_card_mastercard");
    expect(mastercard.card).toMatchObject({ brand: "mastercard", last4: "4444" });
  });

  it("answers 400 processor_token_invalid for a token test mode does not know, and writes nothing", async () => {
    const before = await countRows("payment_methods", "account_id = ?", acct.id);
    for (const token of ["pm_card_nope", "pm_1Nv0FGQ9RKHgCVdK", "tok_visa", "constructor"]) {
      const res = await save(userId, { processor_token: token });
      expect(expectError(res, 400, "invalid_request_error", "processor_token_invalid").param).toBe("processor_token");
      expect(res.body.error.message).toContain("pm_card_visa");
    }
    // A card number where a token belongs is refused as anywhere outside the card fields.
    expect(expectError(await save(userId, { processor_token: "4242424242424242" }), 400, "invalid_request_error", "card_number_in_text").param).toBe("processor_token");
    expect(await countRows("payment_methods", "account_id = ?", acct.id)).toBe(before);
  });

  it("takes the card fields (checked, never stored) as a saved card too", async () => {
    const res = await save(userId, cardFields("5555555555554444", "321"));
    expect(res.status, res.text).toBe(201);
    expect(res.body.card).toMatchObject({ brand: "mastercard", last4: "4444" });
    await expectNoCardData();
    expect(expectError(await save(userId, card("4242424242424241")), 400, "card_error").param).toBe("card_number");
    expect(expectError(await save(userId, card(undefined, { cvv: "12" })), 400, "card_error").param).toBe("cvv");
  });

  it("the same card fields and the same test card share one fingerprint", async () => {
    const token = await saved(userId, "pm_card_visa");
    const fields = (await save(userId, card("4242424242424242"))).body;
    const fingerprint = async (id: string) => (await one<{ f: string }>("SELECT card_fingerprint AS f FROM payment_methods WHERE id = ?", id)).f;
    expect(await fingerprint(token.id)).toBe(await fingerprint(fields.id));
    expect(await fingerprint(token.id)).not.toContain("4242424242424242");
  });

  it("answers 400 for neither, both, part of the card fields, or an unknown field", async () => {
    expect(expectError(await save(userId, {}), 400, "invalid_request_error", "parameter_missing").param).toBe("processor_token");
    expect(expectError(await save(userId, { processor_token: "pm_card_visa", ...card() }), 400, "invalid_request_error", "parameter_unexpected").param).toBe("card_number");
    expect(expectError(await save(userId, { payment_method: "card", card_number: "4242424242424242" }), 400, "invalid_request_error", "parameter_missing").param).toBe("expiration_month");
    expect(expectError(await save(userId, { processor_token: "" }), 400, "invalid_request_error").param).toBe("processor_token");
    expect(expectError(await save(userId, { processor_token: 42 }), 400, "invalid_request_error").param).toBe("processor_token");
    expect(expectError(await save(userId, { processor_token: "pm_card_visa", token: "x" }), 400, "invalid_request_error", "parameter_unknown").param).toBe("token");
  });

  it("answers 404 for a user of another account or of the other mode, and saves nothing", async () => {
    const before = await countRows("payment_methods");
    expectError(await save(userId, { processor_token: "pm_card_visa" }, other.key), 404, "not_found_error", "resource_missing");
    expectError(await save(userId, { processor_token: "pm_card_visa" }, acct.liveKey), 404, "not_found_error", "resource_missing");
    expectError(await save("usr_nope", { processor_token: "pm_card_visa" }), 404, "not_found_error", "resource_missing");
    expect(await countRows("payment_methods")).toBe(before);
  });

  it("replays a retry with the same Idempotency-Key: one card, one event", async () => {
    const first = await save(userId, { processor_token: "pm_card_visa" }, acct.key, "save-card-1");
    const again = await save(userId, { processor_token: "pm_card_visa" }, acct.key, "save-card-1");
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect((await eventsOf(acct.id, "payment_method.attached")).filter((e) => e.body.object_id === first.body.id)).toHaveLength(1);
    expect((await save(userId, { processor_token: "pm_card_mastercard" }, acct.key, "save-card-1")).status).toBe(422);
  });

  it("needs payment_methods:write; payment_methods:read only lists", async () => {
    const key = await call("/api/keys", { key: acct.key, body: { name: "reader", scopes: ["payment_methods:read"] } });
    expect(key.status, key.text).toBe(201);
    expectError(await save(userId, { processor_token: "pm_card_visa" }, key.body.secret), 403, "permission_error");
    expect((await call(`/api/users/${userId}/payment-methods`, { key: key.body.secret })).status).toBe(200);
  });
});

describe("GET /api/users/{id}/payment-methods", () => {
  it("lists the user's attached cards newest first, with cursor pagination, and reads one by id", async () => {
    const user = (await createUser(acct, { name: "List Owner" })).id;
    const made = [await saved(user), await saved(user, "pm_card_mastercard"), await saved(user, "pm_card_chargeDeclined")];
    const page = await call(`/api/users/${user}/payment-methods?limit=2`, { key: acct.key });
    expect(page.status, page.text).toBe(200);
    expect(page.body).toMatchObject({ object: "list", has_more: true });
    expect(page.body.data.map((m: { id: string }) => m.id)).toEqual([made[2].id, made[1].id]);
    const next = await call(`/api/users/${user}/payment-methods?starting_after=${made[1].id}`, { key: acct.key });
    expect(next.body.data.map((m: { id: string }) => m.id)).toEqual([made[0].id]);
    const read = await call(`/api/users/${user}/payment-methods/${made[0].id}`, { key: acct.key });
    expect(read.body).toEqual(made[0]);
  });

  it("answers 404 for another user's card, another account's, or the other mode's", async () => {
    const owner = (await createUser(acct, { name: "Owner" })).id;
    const stranger = (await createUser(acct, { name: "Stranger" })).id;
    const method = await saved(owner);
    expectError(await call(`/api/users/${stranger}/payment-methods/${method.id}`, { key: acct.key }), 404, "not_found_error");
    expectError(await call(`/api/users/${owner}/payment-methods/${method.id}`, { key: other.key }), 404, "not_found_error");
    expectError(await call(`/api/users/${owner}/payment-methods/${method.id}`, { key: acct.liveKey }), 404, "not_found_error");
    expectError(await call(`/api/users/${owner}/payment-methods`, { key: other.key }), 404, "not_found_error");
    expect((await call(`/api/users/${stranger}/payment-methods`, { key: acct.key })).body.data).toEqual([]);
    expectError(await detach(stranger, method.id), 404, "not_found_error");
    expectError(await detach(owner, method.id, other.key), 404, "not_found_error");
    expect((await call(`/api/users/${owner}/payment-methods/${method.id}`, { key: acct.key })).body.detached_at).toBeNull();
  });
});

describe("subscriptions with payment_method: \"pmt_…\"", () => {
  it("charges the saved card: active, naming it, its card shown", async () => {
    const method = await saved(userId, "pm_card_mastercard");
    const res = await subscribeWith(userId, method.id);
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "active", payment_method: method.id, card: method.card });
    const payment = await one<{ status: string; card_last4: string }>("SELECT status, card_last4 FROM payments WHERE subscription_id = ?", res.body.id);
    expect(payment).toEqual({ status: "completed", card_last4: "4444" });
  });

  it("a card subscription says payment_method null", async () => {
    const res = await call("/subscriptions", { key: acct.key, body: { user_id: userId, plan_id: planId, ...card() } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.payment_method).toBeNull();
  });

  it("behaves as the test card does: declined 402 with the failed payment; authentication required makes it incomplete", async () => {
    for (const [token, code] of [
      ["pm_card_chargeDeclined", "card_declined"],
      ["pm_card_chargeDeclinedInsufficientFunds", "insufficient_funds"],
    ]) {
      const method = await saved(userId, token);
      const res = await subscribeWith(userId, method.id);
      expect((expectError(res, 402, "card_error") as { decline_code?: string }).decline_code, token).toBe(code);
    }
    for (const token of ["pm_card_authenticationRequired", "pm_card_threeDSecure2Required"]) {
      const method = await saved(userId, token);
      const res = await subscribeWith(userId, method.id);
      expect(res.status, `${token}: ${res.text}`).toBe(201);
      expect(res.body).toMatchObject({ status: "incomplete", latest_payment: { status: "requires_action" } });
    }
  });

  it("answers 404 for a card of another user, account or mode, and creates nothing", async () => {
    const owner = (await createUser(acct, { name: "Card Owner" })).id;
    const method = await saved(owner);
    const before = await countRows("subscriptions", "account_id = ?", acct.id);
    expect(expectError(await subscribeWith(userId, method.id), 404, "not_found_error").param).toBe("payment_method");
    const strangerUser = (await createUser(other)).id;
    await call("/subscription-plans", { key: other.key, body: { name: "P", price: 5, currency: "usd", interval: "month" } });
    expectError(await subscribeWith(strangerUser, method.id, {}, other.key), 404, "not_found_error");
    expectError(await subscribeWith(userId, "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w"), 404, "not_found_error");
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(before);
  });

  it("answers 400 when card fields come with it", async () => {
    const method = await saved(userId);
    const { payment_method: _, ...fields } = cardFields();
    expect(expectError(await subscribeWith(userId, method.id, fields), 400, "invalid_request_error", "parameter_unexpected").param).toBe("card_number");
    expect(expectError(await subscribeWith(userId, method.id, { cvv: "123" }), 400, "invalid_request_error", "parameter_unexpected").param).toBe("cvv");
    expect(expectError(await subscribeWith(userId, "card"), 400, "invalid_request_error", "parameter_missing").param).toBe("card_number");
  });

  it("PUT replaces the card with a saved one, and the card fields take it off again", async () => {
    const sub = (await subscribeWith(userId, (await saved(userId)).id)).body;
    const next = await saved(userId, "pm_card_mastercard");
    const res = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: { payment_method: next.id } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ payment_method: next.id, card: next.card });
    const back = await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: card() });
    expect(back.status, back.text).toBe(200);
    expect(back.body).toMatchObject({ payment_method: null, card: { last4: "4242" } });
    const stranger = await saved((await createUser(acct, { name: "Not Mine" })).id);
    expect(expectError(await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: { payment_method: stranger.id } }), 404, "not_found_error").param).toBe("payment_method");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.payment_method).toBeNull();
  });
});

describe("DELETE /api/users/{id}/payment-methods/{pm_id}", () => {
  it("answers 409 payment_method_in_use while a subscription charges it; detaches it once the subscription is canceled", async () => {
    const user = (await createUser(acct, { name: "Detacher" })).id;
    const method = await saved(user);
    const sub = (await subscribeWith(user, method.id)).body;
    expectError(await detach(user, method.id), 409, "invalid_request_error", "payment_method_in_use");
    expect((await call(`/api/users/${user}/payment-methods/${method.id}`, { key: acct.key })).body.detached_at).toBeNull();
    expect((await eventsOf(acct.id, "payment_method.detached")).filter((e) => e.body.object_id === method.id)).toHaveLength(0);

    expect((await call(`/subscriptions/${sub.id}`, { method: "DELETE", key: acct.key })).status).toBe(200);
    const res = await detach(user, method.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ ...method, detached_at: expect.stringMatching(ISO_MS) });
    const [event] = (await eventsOf(acct.id, "payment_method.detached")).filter((e) => e.body.object_id === method.id);
    expect(event.body.data).toEqual(res.body);
    expect(event.body.sequence).toBe(2);

    // Gone from the list, still readable, and never charged again.
    expect((await call(`/api/users/${user}/payment-methods`, { key: acct.key })).body.data).toEqual([]);
    expect((await call(`/api/users/${user}/payment-methods/${method.id}`, { key: acct.key })).body.detached_at).toBe(res.body.detached_at);
    expect(expectError(await subscribeWith(user, method.id), 400, "invalid_request_error", "payment_method_detached").param).toBe("payment_method");
    // Detaching again answers it again, with no second event.
    expect((await detach(user, method.id)).body).toEqual(res.body);
    expect((await eventsOf(acct.id, "payment_method.detached")).filter((e) => e.body.object_id === method.id)).toHaveLength(1);
  });

  it("a card that was replaced on its subscription can be detached", async () => {
    const user = (await createUser(acct, { name: "Replacer" })).id;
    const first = await saved(user);
    const sub = (await subscribeWith(user, first.id)).body;
    expect((await call(`/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, body: { payment_method: (await saved(user, "pm_card_mastercard")).id } })).status).toBe(200);
    expect((await detach(user, first.id)).status).toBe(200);
  });
});
