// How the connector talks to Stripe: which host (STRIPE_API_BASE only in development), which API
// version, and the one retry rule (429, 409, 5xx: retried with backoff and the same key; a lost
// answer: thrown as unknown, never retried inside).
import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { STRIPE_API_VERSION, StripeOutcomeUnknown, stripeApiBase } from "../../src/processor/stripe-client";
import { createStripeProcessor, stripeProcessorFor } from "../../src/processor/stripe";
import { sandboxProcessor } from "../../src/processor/sandbox";
import { STRIPE_CARDS, cardOf, connectToFake, requestsOf, TEST_SECRET_KEY } from "../support/fake-stripe-env";

const USER = { id: "usr_1", email: "a@example.com" };
const NOW = Date.parse("2026-11-23T12:00:00Z");

describe("where the connector sends", () => {
  it("honours STRIPE_API_BASE only when ENVIRONMENT=development", () => {
    expect(stripeApiBase({ ENVIRONMENT: "development", STRIPE_API_BASE: "http://127.0.0.1:12111" })).toBe("http://127.0.0.1:12111");
    expect(stripeApiBase({ ENVIRONMENT: "production", STRIPE_API_BASE: "http://127.0.0.1:12111" })).toBeUndefined();
    expect(stripeApiBase({ ENVIRONMENT: "staging", STRIPE_API_BASE: "https://evil.example" })).toBeUndefined();
    expect(stripeApiBase({ ENVIRONMENT: "development" })).toBeUndefined();
    expect(stripeApiBase({ ENVIRONMENT: "development", STRIPE_API_BASE: "" })).toBeUndefined();
  });

  it("goes to https://api.stripe.com without an API base, with the pinned version and the connection's key", async () => {
    const seen: { url: string; headers: Headers }[] = [];
    const stripe = createStripeProcessor(
      { secretKey: TEST_SECRET_KEY },
      {
        fetch: async (input, init) => {
          seen.push({ url: String(input), headers: new Headers(init?.headers) });
          return new Response(JSON.stringify({ id: "acct_live", object: "account" }), { headers: { "Content-Type": "application/json" } });
        },
      },
    );
    expect(await stripe.verifyKey()).toEqual({ valid: true, account: "acct_live", livemode: false });
    expect(seen[0].url).toBe("https://api.stripe.com/v1/account");
    expect(seen[0].headers.get("Stripe-Version")).toBe(STRIPE_API_VERSION);
    expect(seen[0].headers.get("Authorization")).toBe(`Bearer ${TEST_SECRET_KEY}`);
  });

  it("stripeProcessorFor points the connector at STRIPE_API_BASE in development, at Stripe anywhere else", async () => {
    const hosts: string[] = [];
    const fetch = async (input: RequestInfo | URL) => {
      hosts.push(new URL(String(input)).origin);
      return new Response(JSON.stringify({ id: "acct_1", object: "account" }), { headers: { "Content-Type": "application/json" } });
    };
    await stripeProcessorFor({ ENVIRONMENT: "development", STRIPE_API_BASE: "http://127.0.0.1:12111" }, TEST_SECRET_KEY, { fetch }).verifyKey();
    await stripeProcessorFor({ ENVIRONMENT: "production", STRIPE_API_BASE: "http://127.0.0.1:12111" }, TEST_SECRET_KEY, { fetch }).verifyKey();
    expect(hosts).toEqual(["http://127.0.0.1:12111", "https://api.stripe.com"]);
  });

  it("pins the API version the SDK itself is pinned to", () => {
    expect(STRIPE_API_VERSION).toBe(Stripe.API_VERSION);
  });

  it("sends every request to the API base when one is given (the local fake)", async () => {
    const { fake, stripe } = connectToFake();
    await stripe.verifyKey();
    expect(fake.requests.map((r) => [r.host, r.apiVersion])).toEqual([["127.0.0.1:12111", STRIPE_API_VERSION]]);
  });
});

describe("retries", () => {
  const charge = (stripe: ReturnType<typeof connectToFake>["stripe"], reference = "r-1") =>
    stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference, customer: USER, firstAttemptAt: NOW });

  it("retries a 429 with exponential backoff and the same Idempotency-Key", async () => {
    const { fake, stripe, sleeps } = connectToFake({ client: { now: () => NOW } });
    fake.inject({ kind: "status", status: 429, operation: "POST /v1/payment_intents", times: 3 });
    expect((await charge(stripe)).outcome.status).toBe("succeeded");
    const attempts = requestsOf(fake, "POST /v1/payment_intents");
    expect(attempts.map((r) => [r.status, r.idempotencyKey])).toEqual([
      [429, "r-1:payment_intent"],
      [429, "r-1:payment_intent"],
      [429, "r-1:payment_intent"],
      [200, "r-1:payment_intent"],
    ]);
    expect(sleeps).toEqual([250, 500, 1000]);
  });

  it("waits as long as Retry-After says, up to 4 s", async () => {
    const { fake, stripe, sleeps } = connectToFake({ client: { now: () => NOW } });
    fake.inject(
      { kind: "status", status: 429, operation: "POST /v1/payment_intents", times: 1, retryAfter: 2 },
      { kind: "status", status: 429, operation: "POST /v1/payment_intents", times: 1, retryAfter: 60 },
    );
    expect((await charge(stripe)).outcome.status).toBe("succeeded");
    expect(sleeps).toEqual([2000, 4000]);
  });

  it("stops after 3 retries and throws the outcome as unknown, having sent one key", async () => {
    const { fake, stripe } = connectToFake({ client: { now: () => NOW } });
    fake.inject({ kind: "status", status: 500, operation: "POST /v1/payment_intents", times: 4 });
    await expect(charge(stripe)).rejects.toThrow(StripeOutcomeUnknown);
    const attempts = requestsOf(fake, "POST /v1/payment_intents");
    expect(attempts).toHaveLength(4);
    expect(new Set(attempts.map((r) => r.idempotencyKey))).toEqual(new Set(["r-1:payment_intent"]));
  });

  it("does not retry a refusal (400): it is an answer", async () => {
    const { fake, stripe } = connectToFake({ client: { now: () => NOW } });
    const result = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 10, currency: "usd", reference: "r-2", customer: USER, firstAttemptAt: NOW });
    expect(result.outcome).toMatchObject({ status: "failed", message: expect.stringContaining("amount_too_small") });
    expect(requestsOf(fake, "POST /v1/payment_intents")).toHaveLength(1);
  });

  it("throws a lost answer as unknown at once: the caller's claim machinery retries, not the SDK", async () => {
    const { fake, stripe, sleeps } = connectToFake({ client: { now: () => NOW } });
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents" });
    const error = await charge(stripe).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StripeOutcomeUnknown);
    expect((error as Error).message).toMatch(/^Stripe POST \/v1\/payment_intents: .*the outcome is unknown, retry with the same reference$/);
    expect(requestsOf(fake, "POST /v1/payment_intents")).toHaveLength(1);
    expect(sleeps).toEqual([]);
    // The charge did happen at Stripe: the same call again is answered from its key.
    expect((await charge(stripe)).outcome.status).toBe("succeeded");
    expect(requestsOf(fake, "POST /v1/payment_intents").map((r) => r.replayed)).toEqual([false, true]);
    expect(fake.count("paymentIntents", (pi) => pi.status === "succeeded")).toBe(1);
  });

  it("sends no Idempotency-Key of the SDK's own: GETs carry none, POSTs carry Tender's", async () => {
    const { fake, stripe } = connectToFake({ client: { now: () => NOW } });
    await charge(stripe);
    for (const request of fake.requests) {
      if (request.method === "GET") expect(request.idempotencyKey).toBeNull();
      else expect(request.idempotencyKey).not.toMatch(/^stripe-node-retry-/);
    }
  });

  it("never puts the card number into what it throws", async () => {
    const { fake, stripe } = connectToFake({ client: { now: () => NOW } });
    fake.inject({ kind: "status", status: 500, operation: "POST /v1/payment_methods", times: 4 });
    const error = (await charge(stripe).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(StripeOutcomeUnknown);
    expect(JSON.stringify({ message: error.message, stack: error.stack })).not.toContain("4242424242424242");
  });
});

describe("the sandbox's new calls keep test mode as it was", () => {
  it("vaults and answers payout destinations as tokenizeDestination does, for any recipient", async () => {
    const card = cardOf("4000000000000002");
    const vault = await sandboxProcessor.vaultCard({ card, customer: USER, reference: "r" });
    expect(vault).toEqual({ token: expect.stringMatching(/^tok_sandbox_card_declined_/), outcome: { status: "succeeded", reference: vault.token } });
    expect(await sandboxProcessor.payoutDestination({ card, currency: "usd", recipient: null })).toEqual({ payable: true, token: expect.stringMatching(/^tok_sandbox_card_declined_/) });
    // The vaulted token behaves as the card: a declining card's token declines its charges.
    expect(await sandboxProcessor.chargeToken({ token: vault.token!, amount: 100, currency: "usd", reference: "c" })).toMatchObject({ status: "failed", code: "card_declined" });
    expect(await sandboxProcessor.reclaimFailedPayout({ token: vault.token!, reference: "po_1" })).toMatchObject({ status: "succeeded" });
  });
});
