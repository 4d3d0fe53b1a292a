// The Stripe connector's charges against the fake Stripe: a first charge (customer, PaymentMethod,
// confirmed PaymentIntent), a renewal off-session, a card vaulted with a SetupIntent, and the key
// check. Every request is checked against Stripe's OpenAPI document (expectSpecClean).
import { describe, expect, it } from "vitest";
import { STRIPE_CARDS, cardOf, connectToFake, expectSpecClean, newFakeStripe, operationsOf, requestsOf, TEST_SECRET_KEY } from "../support/fake-stripe-env";
import { parseCardToken } from "../../src/processor/stripe-keys";
import { StripeOutcomeUnknown } from "../../src/processor/stripe-client";
import { createStripeProcessor } from "../../src/processor/stripe";

const USER = { id: "usr_01jx0000000000000000000001", email: "ada@example.com" };
const NOW = Date.parse("2026-11-23T12:00:00Z");
/** A first attempt made just now: the Idempotency-Keys are surely known to Stripe, no lookup first. */
const fresh = { firstAttemptAt: NOW - 1000 };
const clock = { now: () => NOW };

async function firstCharge(number: string, reference = "acct_1:idempotency:key-1:1700000000000", amount = 2500) {
  const connected = connectToFake({ client: clock });
  const result = await connected.stripe.chargeCard({ card: cardOf(number), amount, currency: "usd", reference, customer: USER, ...fresh });
  return { ...connected, result };
}

describe("a first charge", () => {
  it("makes the card a PaymentMethod on the user's Customer and charges it with a confirmed PaymentIntent", async () => {
    const { fake, result } = await firstCharge(STRIPE_CARDS.succeeds);
    expect(result.outcome).toMatchObject({ status: "succeeded", reference: expect.stringMatching(/^pi_/) });
    const intent = fake.paymentIntents.get(result.outcome.status === "succeeded" ? result.outcome.reference : "")!;
    expect(intent).toMatchObject({ status: "succeeded", amount: 2500, currency: "usd", metadata: { tender_reference: "acct_1:idempotency:key-1:1700000000000", tender_user: USER.id } });

    // The token names the customer and the payment method, never the card.
    const { customer, paymentMethod } = parseCardToken(result.token!);
    expect(result.token).not.toContain("4242424242424242");
    expect(intent.customer).toBe(customer);
    expect(intent.payment_method).toBe(paymentMethod);
    expect(fake.customers.get(customer)).toMatchObject({ email: USER.email, metadata: { tender_user: USER.id } });
    // Saved on the customer (setup_future_usage=off_session), so renewals can charge it.
    expect(fake.paymentMethods.get(paymentMethod)).toMatchObject({ customer, card: { last4: "4242", exp_month: 12, exp_year: 2030 } });

    expect(operationsOf(fake)).toEqual(["GET /v1/customers/search", "POST /v1/customers", "POST /v1/payment_methods", "POST /v1/payment_intents"]);
    const [pi] = requestsOf(fake, "POST /v1/payment_intents");
    expect(pi.params).toMatchObject({ confirm: "true", setup_future_usage: "off_session", error_on_requires_action: "true", automatic_payment_methods: { enabled: "true", allow_redirects: "never" } });
    expect(requestsOf(fake, "POST /v1/payment_methods")[0].params).toMatchObject({ type: "card", card: { number: "4242424242424242", exp_month: "12", exp_year: "2030", cvc: "123" } });
    expectSpecClean(fake);
  });

  it("gives every POST its own Idempotency-Key, derived from the reference and the step", async () => {
    const { fake } = await firstCharge(STRIPE_CARDS.succeeds, "acct_1:idempotency:key-2:1700000000000");
    const posts = fake.requests.filter((r) => r.method === "POST").map((r) => [r.operation, r.idempotencyKey]);
    expect(posts).toEqual([
      ["POST /v1/customers", expect.stringMatching(new RegExp(`^customer:${USER.id}:[0-9a-f]{16}$`))],
      ["POST /v1/payment_methods", "acct_1:idempotency:key-2:1700000000000:payment_method"],
      ["POST /v1/payment_intents", "acct_1:idempotency:key-2:1700000000000:payment_intent"],
    ]);
  });

  it("sends a reference Stripe's keys and search cannot hold as its SHA-256", async () => {
    const reference = `acct_1:idempotency:${"k'".repeat(100)}:1700000000000`;
    const { fake, result } = await firstCharge(STRIPE_CARDS.succeeds, reference);
    expect(result.outcome.status).toBe("succeeded");
    const [pi] = requestsOf(fake, "POST /v1/payment_intents");
    expect(pi.idempotencyKey).toMatch(/^sha256_[0-9a-f]{64}:payment_intent$/);
    expect((pi.params.metadata as Record<string, string>).tender_reference).toBe(pi.idempotencyKey!.replace(":payment_intent", ""));
    expectSpecClean(fake);
  });

  it("keeps one Customer per Tender user: a second charge finds it by metadata", async () => {
    const { fake, stripe } = connectToFake({ client: clock });
    const one = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "r-1", customer: USER, ...fresh });
    const two = await stripe.chargeCard({ card: cardOf("5555555555554444"), amount: 1000, currency: "usd", reference: "r-2", customer: USER, ...fresh });
    expect(fake.count("customers")).toBe(1);
    expect(parseCardToken(one.token!).customer).toBe(parseCardToken(two.token!).customer);
    expect(requestsOf(fake, "POST /v1/customers")).toHaveLength(1);
    const other = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "r-3", customer: { id: "usr_other", email: null }, ...fresh });
    expect(fake.count("customers")).toBe(2);
    expect(parseCardToken(other.token!).customer).not.toBe(parseCardToken(one.token!).customer);
    expectSpecClean(fake);
  });

  it("creates the Customer once even before Stripe's search has indexed it (the customer's key replays)", async () => {
    const fake = newFakeStripe({ searchLagSeconds: 60, now: () => NOW });
    const { stripe } = connectToFake({ fake, client: clock });
    await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "r-1", customer: USER, ...fresh });
    await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "r-2", customer: USER, ...fresh });
    expect(requestsOf(fake, "POST /v1/customers").map((r) => r.replayed)).toEqual([false, true]);
    expect(fake.count("customers")).toBe(1);
  });

  it.each([
    [STRIPE_CARDS.declined, "card_declined", "code card_declined, decline_code generic_decline"],
    [STRIPE_CARDS.insufficientFunds, "insufficient_funds", "code card_declined, decline_code insufficient_funds"],
    [STRIPE_CARDS.expired, "expired_card", "code expired_card, decline_code expired_card"],
    [STRIPE_CARDS.processingError, "processing_error", "code processing_error, decline_code processing_error"],
    [STRIPE_CARDS.declinesCharges, "card_declined", "code card_declined, decline_code generic_decline"],
    [STRIPE_CARDS.needsAuthentication, "authentication_required", "code authentication_required, decline_code authentication_required"],
  ])("card %s: declined as %s, Stripe's codes kept in the message, nothing charged or saved", async (number, code, stripeCodes) => {
    const { fake, result } = await firstCharge(number);
    expect(result).toEqual({ token: null, outcome: { status: "failed", code, message: expect.stringContaining(`(Stripe ${stripeCodes})`) } });
    expect(fake.count("paymentIntents", (pi) => pi.status === "succeeded")).toBe(0);
    expect(fake.count("paymentIntents", (pi) => pi.status === "requires_payment_method")).toBe(1);
    expect(fake.count("paymentMethods", (pm) => pm.customer !== null)).toBe(0);
    expectSpecClean(fake);
  });

  it("answers a card number Stripe refuses (incorrect_number) as a decline, before any PaymentIntent", async () => {
    const { fake, result } = await firstCharge("4242424242424241");
    expect(result.outcome).toEqual({ status: "failed", code: "card_declined", message: expect.stringContaining("code incorrect_number") });
    expect(fake.count("paymentIntents")).toBe(0);
    expectSpecClean(fake);
  });

  it("answers an amount below Stripe's minimum as a failed payment with Stripe's reason, not as an unknown outcome", async () => {
    const { fake, result } = await firstCharge(STRIPE_CARDS.succeeds, "r-small", 30);
    expect(result.outcome).toEqual({ status: "failed", code: "processing_error", message: expect.stringContaining("(amount_too_small)") });
    expect(fake.count("paymentIntents")).toBe(0);
  });

  it("refuses to charge without the Tender user: the card must be kept on a customer", async () => {
    const { fake, stripe } = connectToFake();
    await expect(stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "r" })).rejects.toThrow(/needs the customer/);
    expect(fake.requests).toHaveLength(0);
  });
});

describe("a renewal (a vaulted card, off-session)", () => {
  async function vaulted(number: string = STRIPE_CARDS.succeeds) {
    const connected = connectToFake({ client: clock });
    const first = await connected.stripe.chargeCard({ card: cardOf(number), amount: 1000, currency: "usd", reference: "first", customer: USER, ...fresh });
    return { ...connected, token: first.token! };
  }

  it("charges the customer's saved PaymentMethod with off_session and confirm", async () => {
    const { fake, stripe, token } = await vaulted();
    const outcome = await stripe.chargeToken({ token, amount: 1000, currency: "usd", reference: "sub_1:period:1:attempt:0", ...fresh });
    expect(outcome).toMatchObject({ status: "succeeded", reference: expect.stringMatching(/^pi_/) });
    const renewal = requestsOf(fake, "POST /v1/payment_intents")[1];
    const { customer, paymentMethod } = parseCardToken(token);
    expect(renewal.params).toMatchObject({ customer, payment_method: paymentMethod, off_session: "true", confirm: "true", metadata: { tender_reference: "sub_1:period:1:attempt:0" } });
    expect(renewal.idempotencyKey).toBe("sub_1:period:1:attempt:0:payment_intent");
    expect(fake.count("paymentIntents", (pi) => pi.status === "succeeded")).toBe(2);
    expectSpecClean(fake);
  });

  it("answers a card that needs authentication off-session as authentication_required: a failed attempt for dunning", async () => {
    const { fake, stripe, token } = await vaulted();
    fake.inject({ kind: "card", behaviour: "authentication_required", operation: "POST /v1/payment_intents" });
    const outcome = await stripe.chargeToken({ token, amount: 1000, currency: "usd", reference: "sub_1:period:1:attempt:0", ...fresh });
    expect(outcome).toEqual({ status: "failed", code: "authentication_required", message: expect.stringContaining("decline_code authentication_required") });
    expect(fake.count("paymentIntents", (pi) => pi.status === "succeeded")).toBe(1);
    expectSpecClean(fake);
  });

  it.each([
    ["insufficient_funds", "insufficient_funds"],
    ["expired_card", "expired_card"],
    ["generic_decline", "card_declined"],
  ] as const)("a renewal declined with %s fails as %s", async (behaviour, code) => {
    const { fake, stripe, token } = await vaulted();
    fake.inject({ kind: "card", behaviour, operation: "POST /v1/payment_intents" });
    const outcome = await stripe.chargeToken({ token, amount: 1000, currency: "usd", reference: "sub_1:period:1:attempt:0", ...fresh });
    expect(outcome).toMatchObject({ status: "failed", code });
  });

  it("reads a PaymentIntent left processing again, and records what it became", async () => {
    const { fake, stripe, token } = await vaulted();
    fake.inject({ kind: "processing", then: "succeeded" });
    const paid = await stripe.chargeToken({ token, amount: 1000, currency: "usd", reference: "sub_1:period:1:attempt:0", ...fresh });
    expect(paid).toMatchObject({ status: "succeeded" });
    fake.inject({ kind: "processing", then: "requires_payment_method" });
    const failed = await stripe.chargeToken({ token, amount: 1000, currency: "usd", reference: "sub_1:period:2:attempt:0", ...fresh });
    expect(failed).toMatchObject({ status: "failed", code: "card_declined" });
    expect(requestsOf(fake, "GET /v1/payment_intents/{intent}")).toHaveLength(2);
    expectSpecClean(fake);
  });

  it("leaves a PaymentIntent that stays processing unknown (thrown), for the claim machinery to retry", async () => {
    const { fake, stripe, token } = await vaulted();
    fake.inject({ kind: "processing", then: "processing" });
    await expect(stripe.chargeToken({ token, amount: 1000, currency: "usd", reference: "sub_1:period:1:attempt:0", ...fresh })).rejects.toThrow(/still processing/);
  });

  it("a late lookup that finds a declined and a succeeded PaymentIntent for one reference answers the success", async () => {
    const clock = { now: NOW };
    const { fake, stripe } = connectToFake({ client: { now: () => clock.now } });
    const first = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "first", customer: USER, ...fresh });
    fake.inject({ kind: "card", behaviour: "generic_decline", operation: "POST /v1/payment_intents" });
    const reference = "sub_1:period:1:attempt:0";
    expect(await stripe.chargeToken({ token: first.token!, amount: 1000, currency: "usd", reference, firstAttemptAt: NOW })).toMatchObject({ status: "failed" });
    // Stripe forgot the key and a caller (wrongly) said the attempt was fresh: a second intent is made.
    fake.forgetIdempotencyKeys();
    const charged = await stripe.chargeToken({ token: first.token!, amount: 1000, currency: "usd", reference, firstAttemptAt: NOW });
    expect(charged.status).toBe("succeeded");
    clock.now += 25 * 60 * 60 * 1000;
    const late = await stripe.chargeToken({ token: first.token!, amount: 1000, currency: "usd", reference, firstAttemptAt: NOW });
    expect(late).toEqual(charged);
    expect(fake.count("paymentIntents", (pi) => pi.metadata.tender_reference === reference)).toBe(2);
  });

  it("refuses a token that is not a Stripe card token, sending nothing", async () => {
    const { fake, stripe } = connectToFake();
    await expect(stripe.chargeToken({ token: "tok_sandbox_succeed_AAAAAAAAAAAAAAAA", amount: 1000, currency: "usd", reference: "r" })).rejects.toThrow(/Not a Stripe card token/);
    expect(fake.requests).toHaveLength(0);
  });
});

describe("vaulting a card without charging it (new card details on an active subscription)", () => {
  it("confirms a SetupIntent for off-session use and answers a token renewals can charge", async () => {
    const { fake, stripe } = connectToFake({ client: clock });
    const vault = await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.succeeds), customer: USER, reference: "sub_1:card_update:k", ...fresh });
    expect(vault.outcome).toMatchObject({ status: "succeeded", reference: expect.stringMatching(/^seti_/) });
    const [seti] = requestsOf(fake, "POST /v1/setup_intents");
    expect(seti.params).toMatchObject({ confirm: "true", usage: "off_session", metadata: { tender_reference: "sub_1:card_update:k" } });
    expect(seti.idempotencyKey).toBe("sub_1:card_update:k:setup_intent");
    expect(fake.count("paymentIntents")).toBe(0);
    const renewal = await stripe.chargeToken({ token: vault.token!, amount: 700, currency: "usd", reference: "sub_1:period:1:attempt:0", ...fresh });
    expect(renewal.status).toBe("succeeded");
    expectSpecClean(fake);
  });

  it("saves Stripe's 'declines every charge' card, whose renewal then declines", async () => {
    const { stripe } = connectToFake({ client: clock });
    const vault = await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.declinesCharges), customer: USER, reference: "v", ...fresh });
    expect(vault.outcome.status).toBe("succeeded");
    expect(await stripe.chargeToken({ token: vault.token!, amount: 700, currency: "usd", reference: "c", ...fresh })).toMatchObject({ status: "failed", code: "card_declined" });
  });

  it("answers a declined card, and one that needs authentication (requires_action), without a token", async () => {
    const { fake, stripe } = connectToFake({ client: clock });
    const declined = await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.insufficientFunds), customer: USER, reference: "v1", ...fresh });
    expect(declined).toEqual({ token: null, outcome: { status: "failed", code: "insufficient_funds", message: expect.stringContaining("decline_code insufficient_funds") } });
    const authentication = await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.needsAuthentication), customer: USER, reference: "v2", ...fresh });
    expect(authentication).toEqual({ token: null, outcome: { status: "failed", code: "authentication_required", message: expect.stringContaining("requires_action") } });
    expect(fake.count("paymentMethods", (pm) => pm.customer !== null)).toBe(0);
    expectSpecClean(fake);
  });
});

describe("checking a secret key (GET /v1/account)", () => {
  it("answers the Stripe account the key belongs to", async () => {
    const { fake, stripe } = connectToFake();
    expect(await stripe.verifyKey()).toEqual({ valid: true, account: fake.platformAccount, livemode: false });
    expect(requestsOf(fake, "GET /v1/account")[0]).toMatchObject({ host: "127.0.0.1:12111", apiVersion: "2026-10-28.endive" });
    expectSpecClean(fake);
  });

  it("answers processor_key_invalid when Stripe answers 401", async () => {
    const fake = newFakeStripe();
    fake.rejectedKeys.add(TEST_SECRET_KEY);
    const { stripe } = connectToFake({ fake });
    expect(await stripe.verifyKey()).toEqual({ valid: false, code: "processor_key_invalid", message: "Stripe refused this secret key (401)." });
  });

  it("says whether the key is a live one, and answers processor_key_invalid to a key Stripe forbids to read the account (403)", async () => {
    const answer = (status: number, body: object) => async () => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
    const live = createStripeProcessor({ secretKey: "sk_live_abc" }, { fetch: answer(200, { id: "acct_live", object: "account" }) });
    expect(await live.verifyKey()).toEqual({ valid: true, account: "acct_live", livemode: true });
    const restricted = createStripeProcessor({ secretKey: "rk_live_abc" }, { fetch: answer(403, { error: { type: "invalid_request_error", message: "The provided key does not have the required permissions" } }) });
    expect(await restricted.verifyKey()).toEqual({ valid: false, code: "processor_key_invalid", message: expect.stringContaining("(403)") });
    const down = createStripeProcessor({ secretKey: "sk_live_abc" }, { fetch: answer(500, { error: { type: "api_error", message: "x" } }), sleep: async () => {} });
    await expect(down.verifyKey()).rejects.toBeInstanceOf(StripeOutcomeUnknown);
  });

  it("throws, rather than calling the key invalid, when Stripe cannot be reached", async () => {
    const stripe = createStripeProcessor({ secretKey: TEST_SECRET_KEY }, { fetch: async () => { throw new TypeError("Network connection lost"); } });
    await expect(stripe.verifyKey()).rejects.toBeInstanceOf(StripeOutcomeUnknown);
  });
});
