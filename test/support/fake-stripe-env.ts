// The fake Stripe and the Stripe connector wired together for the Worker tests: the connector's
// SDK sends through the fake's fetch, in-process, and waits no real time between retries.
import spec from "../fixtures/stripe/openapi.json";
import fixtures from "../fixtures/stripe/fixtures.json";
import { createStripeProcessor, type StripeProcessor } from "../../src/processor/stripe";
import type { StripeClientOptions } from "../../src/processor/stripe-client";
import { expect } from "vitest";
import { FakeStripe, type FakeStripeOptions, type RecordedRequest, type StripeFixtures } from "./fake-stripe";
import type { StripeSpec } from "./stripe-spec";
import type { SettlementOutcome } from "../../src/processor/types";

export const stripeSpec = spec as unknown as StripeSpec;
export const stripeFixtures = fixtures as unknown as StripeFixtures;

export const TEST_SECRET_KEY = "sk_test_tender_connector";
export const FAKE_API_BASE = "http://127.0.0.1:12111";

export function newFakeStripe(options: Partial<FakeStripeOptions> = {}): FakeStripe {
  return new FakeStripe({ spec: stripeSpec, fixtures: stripeFixtures, ...options });
}

export interface Connected {
  fake: FakeStripe;
  stripe: StripeProcessor;
  /** The waits the connector asked for between retries (ms), in order. */
  sleeps: number[];
}

/** A fake Stripe and a connector that talks to it. */
export function connectToFake(options: { fake?: FakeStripe; client?: StripeClientOptions } = {}): Connected {
  const fake = options.fake ?? newFakeStripe();
  const sleeps: number[] = [];
  const stripe = createStripeProcessor(
    { secretKey: TEST_SECRET_KEY, apiBase: FAKE_API_BASE },
    {
      fetch: fake.fetch,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
      ...options.client,
    },
  );
  return { fake, stripe, sleeps };
}

/** Test cards, by what Stripe's test mode does with them. */
export const STRIPE_CARDS = {
  succeeds: "4242424242424242",
  declined: "4000000000000002",
  insufficientFunds: "4000000000009995",
  expired: "4000000000000069",
  processingError: "4000000000000119",
  needsAuthentication: "4000002760003184",
  declinesCharges: "4000000000000341",
} as const;

export const cardOf = (number: string, expYear = 2030) => ({ number, expMonth: 12, expYear, cvv: "123" });

/** Every request the fake saw is an operation of Stripe's document, rightly formed, and so was every answer. */
export function expectSpecClean(fake: FakeStripe): void {
  expect(fake.requests.length).toBeGreaterThan(0);
  expect(fake.requests.filter((r) => r.operation === null).map((r) => `${r.method} ${r.path}`)).toEqual([]);
  expect(fake.specViolations()).toEqual([]);
}

/** The requests of one operation (e.g. "POST /v1/transfers"). */
export const requestsOf = (fake: FakeStripe, operation: string): RecordedRequest[] => fake.requests.filter((r) => r.operation === operation);

/** The operations the fake saw, in order. */
export const operationsOf = (fake: FakeStripe): string[] => fake.requests.map((r) => r.operation ?? `${r.method} ${r.path}`);

/** The processor's reference of an outcome that did not fail (a test error otherwise). */
export function referenceOf(outcome: SettlementOutcome): string {
  if (outcome.status === "failed") throw new Error(`expected a processor reference, got a failure: ${outcome.message}`);
  return outcome.reference;
}
