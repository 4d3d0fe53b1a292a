// The fault matrix of the Stripe connector: every money-moving operation, under each fault the fake
// Stripe can inject on each of the operation's Stripe requests, retried as Tender's callers retry
// (a call that throws is made again with the same reference). After each run:
//   - exactly one money object exists for the reference (one charge, one transfer and one payout,
//     one refund, one reversal, one vaulted card), and none other;
//   - every retry of a Stripe POST carried the same Idempotency-Key;
//   - the fault did fire (so the combination tested something);
//   - every request and answer matches Stripe's OpenAPI document.
// The late variant: the answer is lost, Stripe forgets its keys (24 hours pass), and the retry must
// find the object by its metadata and create nothing.
import { describe, expect, it } from "vitest";
import { STRIPE_CARDS, cardOf, connectToFake, expectSpecClean, referenceOf } from "../support/fake-stripe-env";
import type { CardBehaviour, FakeStripe, FaultRule, RecordedRequest } from "../support/fake-stripe";
import type { StripeProcessor } from "../../src/processor/stripe";
import { StripeOutcomeUnknown } from "../../src/processor/stripe-client";

const START = Date.parse("2026-11-23T12:00:00Z");
const DAY_AND_AN_HOUR = 25 * 60 * 60 * 1000;
const USER = { id: "usr_faults", email: "faults@example.com" };
const REFERENCE = "tender-op-1";

type Obj = Record<string, any>;
interface Run {
  fake: FakeStripe;
  stripe: StripeProcessor;
  clock: { now: number };
  /** Arguments prepared before the faults (a vaulted card, a charge, a payout destination). */
  args: Obj;
}

interface Operation {
  name: string;
  /** The Stripe requests the operation makes, POSTs first (each is a place for a fault). */
  posts: string[];
  gets: string[];
  prepare(run: Omit<Run, "args">): Promise<Obj>;
  call(run: Run, firstAttemptAt: number): Promise<{ status: string }>;
  /** What the operation ends as when nothing declines. */
  expected: string;
  /** The objects that move money (or vault a card) for the reference: there must be exactly one of each kind. */
  moneyObjects(fake: FakeStripe): Record<string, Obj[]>;
  /** The request whose repetition would move money again. */
  moneyStep: string;
}

const tagged = (map: Map<string, Obj>) => [...map.values()].filter((o) => o.metadata?.tender_reference === REFERENCE);

const OPERATIONS: Operation[] = [
  {
    name: "first charge (chargeCard)",
    posts: ["POST /v1/customers", "POST /v1/payment_methods", "POST /v1/payment_intents"],
    gets: ["GET /v1/customers/search"],
    prepare: async () => ({}),
    call: async ({ stripe }, firstAttemptAt) =>
      (await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 2500, currency: "usd", reference: REFERENCE, customer: USER, firstAttemptAt })).outcome,
    expected: "succeeded",
    moneyObjects: (fake) => ({ charges: tagged(fake.paymentIntents).filter((pi) => pi.status === "succeeded"), customers: [...fake.customers.values()] }),
    moneyStep: "POST /v1/payment_intents",
  },
  {
    name: "renewal (chargeToken)",
    posts: ["POST /v1/payment_intents"],
    gets: [],
    prepare: async ({ stripe, clock }) => {
      const vault = await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.succeeds), customer: USER, reference: "vault", firstAttemptAt: clock.now });
      return { token: vault.token };
    },
    call: async ({ stripe, args }, firstAttemptAt) => stripe.chargeToken({ token: args.token, amount: 2500, currency: "usd", reference: REFERENCE, firstAttemptAt }),
    expected: "succeeded",
    moneyObjects: (fake) => ({ charges: tagged(fake.paymentIntents).filter((pi) => pi.status === "succeeded") }),
    moneyStep: "POST /v1/payment_intents",
  },
  {
    name: "card update (vaultCard)",
    posts: ["POST /v1/customers", "POST /v1/payment_methods", "POST /v1/setup_intents"],
    gets: ["GET /v1/customers/search"],
    prepare: async () => ({}),
    call: async ({ stripe }, firstAttemptAt) => (await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.succeeds), customer: USER, reference: REFERENCE, firstAttemptAt })).outcome,
    expected: "succeeded",
    moneyObjects: (fake) => ({ vaulted: tagged(fake.setupIntents).filter((s) => s.status === "succeeded"), customers: [...fake.customers.values()] }),
    moneyStep: "POST /v1/setup_intents",
  },
  {
    name: "payout (sendPayout)",
    posts: ["POST /v1/transfers", "POST /v1/payouts"],
    gets: ["GET /v1/transfers", "GET /v1/payouts"],
    prepare: async ({ stripe, fake }) => {
      const account = fake.createConnectedAccount();
      const destination = await stripe.payoutDestination({ card: cardOf(STRIPE_CARDS.succeeds), currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
      return { token: destination.payable ? destination.token : null };
    },
    call: async ({ stripe, args }) => stripe.sendPayout({ token: args.token, amount: 5000, currency: "usd", reference: REFERENCE }),
    expected: "pending",
    moneyObjects: (fake) => ({ transfers: tagged(fake.transfers), payouts: tagged(fake.payouts), reversals: [] }),
    moneyStep: "POST /v1/payouts",
  },
  {
    name: "payout refused by Stripe (sendPayout, then a reversal)",
    posts: ["POST /v1/transfers", "POST /v1/payouts", "POST /v1/transfers/{id}/reversals"],
    gets: ["GET /v1/transfers", "GET /v1/payouts"],
    prepare: async ({ stripe, fake }) => {
      const account = fake.createConnectedAccount();
      const destination = await stripe.payoutDestination({ card: cardOf(STRIPE_CARDS.succeeds), currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
      // Stripe refuses every payout to this card, as it would a card it cannot pay out to.
      fake.inject({ kind: "payout_refused", code: "invalid_card_type", times: 99 });
      return { token: destination.payable ? destination.token : null };
    },
    call: async ({ stripe, args }) => stripe.sendPayout({ token: args.token, amount: 5000, currency: "usd", reference: REFERENCE }),
    expected: "failed",
    moneyObjects: (fake) => ({ transfers: tagged(fake.transfers), reversals: tagged(fake.reversals) }),
    moneyStep: "POST /v1/transfers/{id}/reversals",
  },
  {
    name: "refund",
    posts: ["POST /v1/refunds"],
    gets: ["GET /v1/refunds"],
    prepare: async ({ stripe, clock }) => {
      const charged = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 3000, currency: "usd", reference: "charge", customer: USER, firstAttemptAt: clock.now });
      return { paymentIntent: charged.outcome.status === "succeeded" ? charged.outcome.reference : null };
    },
    call: async ({ stripe, args }) => stripe.refund({ chargeReference: args.paymentIntent, amount: 1000, currency: "usd", reference: REFERENCE }),
    expected: "succeeded",
    moneyObjects: (fake) => ({ refunds: tagged(fake.refunds) }),
    moneyStep: "POST /v1/refunds",
  },
  {
    name: "reclaim of a failed payout (reclaimFailedPayout)",
    posts: ["POST /v1/transfers/{id}/reversals"],
    gets: ["GET /v1/transfers"],
    prepare: async ({ stripe, fake }) => {
      const account = fake.createConnectedAccount();
      const destination = await stripe.payoutDestination({ card: cardOf(STRIPE_CARDS.succeeds), currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
      const token = destination.payable ? destination.token : "";
      const sent = await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: REFERENCE });
      fake.settlePayout(referenceOf(sent), "failed");
      return { token };
    },
    call: async ({ stripe, args }) => stripe.reclaimFailedPayout({ token: args.token, reference: REFERENCE }),
    expected: "succeeded",
    moneyObjects: (fake) => ({ reversals: tagged(fake.reversals) }),
    moneyStep: "POST /v1/transfers/{id}/reversals",
  },
];

type Fault = { label: string; rule: (operation: string) => FaultRule; callerRetries: number; late?: boolean };

const FAULTS: Fault[] = [
  { label: "429 once (retried inside, same key)", rule: (operation) => ({ kind: "status", status: 429, operation, times: 1 }), callerRetries: 0 },
  { label: "429 with Retry-After, 3 times", rule: (operation) => ({ kind: "status", status: 429, operation, times: 3, retryAfter: 1 }), callerRetries: 0 },
  { label: "429 4 times (retries used up: unknown, the caller retries)", rule: (operation) => ({ kind: "status", status: 429, operation, times: 4 }), callerRetries: 1 },
  { label: "409 lock conflict once", rule: (operation) => ({ kind: "status", status: 409, operation, times: 1 }), callerRetries: 0 },
  { label: "500 once", rule: (operation) => ({ kind: "status", status: 500, operation, times: 1 }), callerRetries: 0 },
  { label: "500 4 times (unknown, the caller retries)", rule: (operation) => ({ kind: "status", status: 500, operation, times: 4 }), callerRetries: 1 },
  { label: "timeout after success", rule: (operation) => ({ kind: "timeout_after_success", operation, times: 1 }), callerRetries: 1 },
  { label: "timeout after success, twice", rule: (operation) => ({ kind: "timeout_after_success", operation, times: 2 }), callerRetries: 2 },
  { label: "timeout after success, then Stripe forgets its keys (retry 25 h later)", rule: (operation) => ({ kind: "timeout_after_success", operation, times: 1 }), callerRetries: 1, late: true },
];

/** Calls as Tender's callers do: a call that throws is made again with the same reference. */
async function callWithRetries(operation: Operation, run: Run, fault: Fault) {
  const firstAttemptAt = run.clock.now;
  const thrown: unknown[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return { outcome: await operation.call(run, firstAttemptAt), thrown };
    } catch (error) {
      thrown.push(error);
      if (fault.late) {
        // The retry comes a day later: Stripe no longer knows the keys.
        run.fake.forgetIdempotencyKeys();
        run.clock.now += DAY_AND_AN_HOUR;
      }
    }
  }
  throw new Error(`${operation.name}: still failing after 5 calls: ${thrown.map(String).join(" | ")}`);
}

async function setUp(operation: Operation): Promise<Run> {
  const clock = { now: START };
  const { fake, stripe } = connectToFake({ client: { now: () => clock.now } });
  const args = await operation.prepare({ fake, stripe, clock });
  return { fake, stripe, clock, args };
}

/** The POSTs of one Stripe operation made by the operation under test, by Idempotency-Key. */
const keysOf = (requests: RecordedRequest[], step: string) => new Set(requests.filter((r) => r.operation === step).map((r) => r.idempotencyKey));

const combinations = OPERATIONS.flatMap((operation) =>
  [...operation.posts, ...operation.gets].flatMap((step) =>
    FAULTS.filter((fault) => !fault.late || step.startsWith("POST")).map((fault) => ({ operation, step, fault })),
  ),
);

describe("the Stripe connector under faults", () => {
  it.each(combinations.map((c) => [c.operation.name, c.step, c.fault.label, c] as const))("%s: %s: %s", async (_name, step, _label, { operation, fault }) => {
    const run = await setUp(operation);
    const before = run.fake.requests.length;
    run.fake.inject(fault.rule(step));
    const { outcome, thrown } = await callWithRetries(operation, run, fault);
    const requests = run.fake.requests.slice(before);

    expect(outcome.status).toBe(operation.expected);
    // The fault fired, and the caller saw an unknown outcome for each answer it did not get.
    const fired = requests.filter((r) => r.operation === step && r.fault !== null);
    expect(fired.length).toBeGreaterThan(0);
    const rule = fault.rule(step);
    if (rule.kind === "status") {
      expect(fired).toHaveLength(rule.times ?? 1);
      expect(thrown).toHaveLength(fault.callerRetries);
    } else {
      // A lost answer is thrown each time; a second one fires only where the retry sends the step
      // again (a step found by its lookup is not sent again: that is the point of the lookup).
      expect(thrown).toHaveLength(fired.length);
      expect(fired.length).toBeLessThanOrEqual(rule.times ?? 1);
    }
    for (const error of thrown) expect(error).toBeInstanceOf(StripeOutcomeUnknown);

    // Exactly one of each money object for the reference; none of another.
    for (const [kind, objects] of Object.entries(operation.moneyObjects(run.fake))) {
      const expectedCount = kind === "reversals" && operation.name.startsWith("payout (") ? 0 : 1;
      expect(objects, kind).toHaveLength(expectedCount);
    }
    // The same Idempotency-Key on every retry of each POST.
    for (const post of operation.posts) expect(keysOf(requests, post).size, post).toBeLessThanOrEqual(1);
    if (fault.late) {
      // After Stripe forgot the keys, the retry found the object and did not make the money step again.
      const forgotAt = requests.findIndex((r) => r.fault === "timeout_after_success");
      const after = requests.slice(forgotAt + 1);
      const moneyStepIndex = operation.posts.indexOf(operation.moneyStep);
      if (operation.posts.indexOf(step) >= moneyStepIndex) expect(after.filter((r) => r.operation === operation.moneyStep)).toEqual([]);
    }
    expectSpecClean(run.fake);
  });

  it("ran every combination", () => {
    // Printed in the report: operations x (requests x faults).
    console.log(`Stripe fault combinations: ${combinations.length}`);
    expect(combinations.length).toBeGreaterThan(100);
  });
});

/** A charge that Stripe declines, or that needs authentication, under a lost answer and a retry. */
describe("declines and authentication under a lost answer", () => {
  const behaviours: CardBehaviour[] = ["generic_decline", "insufficient_funds", "expired_card", "processing_error", "authentication_required"];
  const charges = [
    { name: "first charge", operation: "POST /v1/payment_intents", call: (run: Run) => run.stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 2500, currency: "usd", reference: REFERENCE, customer: USER, firstAttemptAt: run.clock.now }).then((r) => r.outcome) },
    { name: "renewal", operation: "POST /v1/payment_intents", call: (run: Run) => run.stripe.chargeToken({ token: run.args.token, amount: 2500, currency: "usd", reference: REFERENCE, firstAttemptAt: run.clock.now }) },
    { name: "card update", operation: "POST /v1/setup_intents", call: (run: Run) => run.stripe.vaultCard({ card: cardOf(STRIPE_CARDS.succeeds), customer: USER, reference: REFERENCE, firstAttemptAt: run.clock.now }).then((r) => r.outcome) },
  ];
  const cases = charges.flatMap((charge) => behaviours.map((behaviour) => ({ charge, behaviour })));

  it.each(cases.map((c) => [c.charge.name, c.behaviour, c] as const))("%s declined as %s: the retry replays the decline and charges nothing", async (_n, behaviour, { charge }) => {
    const run = await setUp(OPERATIONS[1]);
    const before = run.fake.requests.length;
    run.fake.inject({ kind: "card", behaviour, operation: charge.operation }, { kind: "timeout_after_success", operation: charge.operation });
    await expect(charge.call(run)).rejects.toBeInstanceOf(StripeOutcomeUnknown);
    const outcome = await charge.call(run);
    expect(outcome.status).toBe("failed");
    const requests = run.fake.requests.slice(before).filter((r) => r.operation === charge.operation);
    // The retry was answered from Stripe's idempotency record: same key, the same decline.
    expect(requests.map((r) => [r.replayed, r.idempotencyKey])).toEqual([
      [false, `${REFERENCE}:${charge.operation === "POST /v1/setup_intents" ? "setup_intent" : "payment_intent"}`],
      [true, `${REFERENCE}:${charge.operation === "POST /v1/setup_intents" ? "setup_intent" : "payment_intent"}`],
    ]);
    expect(tagged(run.fake.paymentIntents).filter((pi) => pi.status === "succeeded")).toHaveLength(0);
    expect(tagged(run.fake.setupIntents).filter((s) => s.status === "succeeded")).toHaveLength(0);
    expectSpecClean(run.fake);
  });

  it("counts the decline combinations", () => {
    console.log(`Stripe decline combinations: ${cases.length}`);
    expect(cases).toHaveLength(15);
  });
});
