// Stripe's webhook events: verified with the SDK's constructEventAsync (300 s tolerance) against the
// connection's webhook secret, then read as processor-neutral settlements. The events come from the
// fake Stripe (built from Stripe's fixtures, signed with generateTestHeaderStringAsync), delivered
// late, twice and out of order to a receiver that verifies and maps each one.
import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { STRIPE_CARDS, cardOf, connectToFake, newFakeStripe, referenceOf } from "../support/fake-stripe-env";
import { settlementOf, verifyStripeEvent } from "../../src/processor/stripe-events";
import type { ProcessorSettlement } from "../../src/processor/types";

const SECRET = "whsec_tender_test_secret";
const NOW_S = Math.floor(Date.parse("2026-11-23T12:00:00Z") / 1000);
/** verifyStripeEvent takes the arrival time in ms, as Tender's clock gives it. */
const at = (seconds: number) => seconds * 1000;

async function sign(payload: string, secret = SECRET, timestamp = NOW_S) {
  return Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret, timestamp, cryptoProvider: Stripe.createSubtleCryptoProvider() });
}

/** A receiver standing in for the route: verifies each delivery and reads its settlement. */
function receiver(secret = SECRET, receivedAt = NOW_S) {
  const received: { status: number; settlement?: ProcessorSettlement; reason?: string }[] = [];
  const deliver = async (_url: string, init: RequestInit) => {
    const verified = await verifyStripeEvent({ rawBody: String(init.body), signature: new Headers(init.headers).get("Stripe-Signature"), webhookSecret: secret, receivedAt: at(receivedAt) });
    if (!verified.verified) {
      received.push({ status: 400, reason: verified.reason });
      return new Response(verified.message, { status: 400 });
    }
    received.push({ status: 200, settlement: settlementOf(verified.event) });
    return new Response("ok");
  };
  return { received, deliver };
}

/** A fake with one paid-out payout, one refund and one charge to dispute. */
async function withMoneyMoved(deliver?: (url: string, init: RequestInit) => Promise<Response>) {
  const fake = newFakeStripe({ deliver, now: () => NOW_S * 1000 });
  const { stripe } = connectToFake({ fake });
  const charge = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 3000, currency: "usd", reference: "charge-1", customer: { id: "usr_1", email: null } });
  const paymentIntent = charge.outcome.status === "succeeded" ? charge.outcome.reference : "";
  fake.inject({ kind: "refund_pending" });
  const refund = await stripe.refund({ chargeReference: paymentIntent, amount: 1000, currency: "usd", reference: "re_tender_1" });
  const account = fake.createConnectedAccount();
  const destination = await stripe.payoutDestination({ card: cardOf(STRIPE_CARDS.succeeds), currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
  const payout = await stripe.sendPayout({ token: destination.payable ? destination.token : "", amount: 5000, currency: "usd", reference: "po_tender_1" });
  return { fake, paymentIntent, refund: referenceOf(refund), payout: referenceOf(payout), account };
}

describe("verifying a Stripe-Signature", () => {
  const body = JSON.stringify({ id: "evt_1", object: "event", type: "payout.paid", created: NOW_S, data: { object: { id: "po_1", object: "payout", metadata: {} } } });

  it("accepts the body exactly as signed", async () => {
    const verified = await verifyStripeEvent({ rawBody: body, signature: await sign(body), webhookSecret: SECRET, receivedAt: at(NOW_S + 299) });
    expect(verified).toMatchObject({ verified: true, event: { id: "evt_1", type: "payout.paid" } });
  });

  it("refuses a tampered body", async () => {
    const signature = await sign(body);
    const verified = await verifyStripeEvent({ rawBody: body.replace("po_1", "po_2"), signature, webhookSecret: SECRET, receivedAt: at(NOW_S) });
    expect(verified).toEqual({ verified: false, reason: "signature_mismatch", message: expect.any(String) });
  });

  it("refuses a signature made with another secret", async () => {
    const verified = await verifyStripeEvent({ rawBody: body, signature: await sign(body, "whsec_someone_else"), webhookSecret: SECRET, receivedAt: at(NOW_S) });
    expect(verified).toMatchObject({ verified: false, reason: "signature_mismatch" });
  });

  it("refuses a signature more than 300 seconds old (a replay), and accepts one just inside", async () => {
    const signature = await sign(body, SECRET, NOW_S - 301);
    expect(await verifyStripeEvent({ rawBody: body, signature, webhookSecret: SECRET, receivedAt: at(NOW_S) })).toMatchObject({ verified: false, reason: "timestamp_outside_tolerance" });
    expect(await verifyStripeEvent({ rawBody: body, signature: await sign(body, SECRET, NOW_S - 300), webhookSecret: SECRET, receivedAt: at(NOW_S) })).toMatchObject({ verified: true });
  });

  it("measures the signature's age against the real clock when no arrival time is given", async () => {
    const nowS = Math.floor(Date.now() / 1000);
    expect(await verifyStripeEvent({ rawBody: body, signature: await sign(body, SECRET, nowS - 3600), webhookSecret: SECRET })).toMatchObject({ verified: false, reason: "timestamp_outside_tolerance" });
    expect(await verifyStripeEvent({ rawBody: body, signature: await sign(body, SECRET, nowS), webhookSecret: SECRET })).toMatchObject({ verified: true });
  });

  it("accepts a body signed with either of the connection's secrets (the platform endpoint's, the Connect endpoint's)", async () => {
    const secrets = ["whsec_platform_endpoint", "whsec_connect_endpoint"];
    for (const secret of secrets) {
      expect(await verifyStripeEvent({ rawBody: body, signature: await sign(body, secret), webhookSecret: secrets, receivedAt: at(NOW_S) })).toMatchObject({ verified: true });
    }
    expect(await verifyStripeEvent({ rawBody: body, signature: await sign(body, "whsec_other"), webhookSecret: secrets, receivedAt: at(NOW_S) })).toMatchObject({ verified: false, reason: "signature_mismatch" });
    const stale = await sign(body, secrets[1], NOW_S - 600);
    expect(await verifyStripeEvent({ rawBody: body, signature: stale, webhookSecret: secrets, receivedAt: at(NOW_S) })).toMatchObject({ verified: false, reason: "timestamp_outside_tolerance" });
    expect(await verifyStripeEvent({ rawBody: body, signature: await sign(body), webhookSecret: [], receivedAt: at(NOW_S) })).toMatchObject({ verified: false, reason: "signature_mismatch" });
  });

  it("refuses a missing or malformed header", async () => {
    expect(await verifyStripeEvent({ rawBody: body, signature: null, webhookSecret: SECRET })).toMatchObject({ verified: false, reason: "missing_signature" });
    expect(await verifyStripeEvent({ rawBody: body, signature: "v1=abc", webhookSecret: SECRET })).toMatchObject({ verified: false, reason: "malformed_signature" });
    expect(await verifyStripeEvent({ rawBody: body, signature: `t=${NOW_S},v0=abc`, webhookSecret: SECRET, receivedAt: at(NOW_S) })).toMatchObject({ verified: false, reason: "malformed_signature" });
  });

  it("verifies the fake Stripe's own events: they are signed with the SDK's generateTestHeaderStringAsync", async () => {
    const { received, deliver } = receiver();
    const { fake, payout } = await withMoneyMoved(deliver);
    fake.settlePayout(payout, "paid");
    await fake.deliverEvents({ url: "https://tender.test/processor-webhooks/stripe/acct_1", secret: SECRET });
    expect(received).toEqual([{ status: 200, settlement: expect.objectContaining({ kind: "payout", outcome: "paid" }) }]);
  });
});

describe("reading Stripe events as settlements", () => {
  it("payout.paid: the Tender payout (its reference) is paid; the event names the connected account", async () => {
    const { fake, payout, account } = await withMoneyMoved();
    const event = fake.settlePayout(payout, "paid");
    expect(settlementOf(event as Stripe.Event)).toEqual({
      kind: "payout",
      outcome: "paid",
      reference: "po_tender_1",
      processorObject: payout,
      eventId: event.id,
      type: "payout.paid",
      occurredAt: NOW_S * 1000,
      account,
      livemode: event.livemode,
      // What the payout is: checked against Tender's while its Stripe id is not recorded.
      amount: (event.data as { object: { amount: number } }).object.amount,
      currency: "usd",
      destination: (event.data as { object: { destination: string } }).object.destination,
    });
  });

  it("payout.failed: failed, with Stripe's failure code kept in the message", async () => {
    const { fake, payout } = await withMoneyMoved();
    const settlement = settlementOf(fake.settlePayout(payout, "failed", "account_closed") as Stripe.Event);
    expect(settlement).toMatchObject({ kind: "payout", outcome: "failed", reference: "po_tender_1", code: "card_declined", message: expect.stringContaining("failure_code account_closed") });
    const insufficient = await withMoneyMoved();
    expect(settlementOf(insufficient.fake.settlePayout(insufficient.payout, "failed", "insufficient_funds") as Stripe.Event)).toMatchObject({ code: "insufficient_funds" });
  });

  it("payout.canceled: failed", async () => {
    const { fake, payout } = await withMoneyMoved();
    expect(settlementOf(fake.settlePayout(payout, "canceled") as Stripe.Event)).toMatchObject({ kind: "payout", outcome: "failed", code: "processing_error" });
  });

  it("refund.updated and charge.refund.updated: the Tender refund succeeded, or failed", async () => {
    const succeeded = await withMoneyMoved();
    const events = succeeded.fake.settleRefund(succeeded.refund, "succeeded");
    expect(events.map((e) => e.type)).toEqual(["refund.updated", "charge.refund.updated"]);
    for (const event of events) {
      expect(settlementOf(event as Stripe.Event)).toMatchObject({ kind: "refund", outcome: "succeeded", reference: "re_tender_1", processorObject: succeeded.refund });
    }
    const failed = await withMoneyMoved();
    const [updated] = failed.fake.settleRefund(failed.refund, "failed");
    expect(settlementOf(updated as Stripe.Event)).toMatchObject({ kind: "refund", outcome: "failed", reference: "re_tender_1", message: expect.stringContaining("failure_reason declined") });
  });

  it("a refund still pending settles nothing", async () => {
    const { fake, refund } = await withMoneyMoved();
    const pending = fake.emitForeign("refund.updated", { ...fake.refunds.get(refund)!, status: "pending" });
    expect(settlementOf(pending as Stripe.Event)).toMatchObject({ kind: "ignore", reason: expect.stringContaining("pending") });
  });

  it("charge.dispute.created: a dispute on the payment whose processor reference is the PaymentIntent", async () => {
    const { fake, paymentIntent } = await withMoneyMoved();
    const event = fake.openDispute(paymentIntent, "fraudulent");
    expect(settlementOf(event as Stripe.Event)).toMatchObject({
      kind: "dispute",
      chargeReference: paymentIntent,
      processorObject: expect.stringMatching(/^dp_/),
      amount: 3000,
      currency: "usd",
      reason: "fraudulent",
      status: "needs_response",
      account: null,
    });
  });

  it("ignores an event type Tender does not act on, an object Tender did not make, and a dispute without a PaymentIntent", async () => {
    const { fake, payout, account } = await withMoneyMoved();
    const resources = fake.fixtures.resources;
    expect(settlementOf(fake.emitForeign("customer.created", structuredClone(resources.customer)) as Stripe.Event)).toMatchObject({ kind: "ignore", reason: "Tender does not act on customer.created" });
    // A payout of the connected account that Tender did not make (no tender_reference).
    const foreign = { ...structuredClone(resources.payout), metadata: {} };
    expect(settlementOf(fake.emitForeign("payout.paid", foreign, account) as Stripe.Event)).toMatchObject({ kind: "ignore", reason: expect.stringContaining("not made by Tender") });
    const foreignRefund = { ...structuredClone(resources.refund), metadata: {} };
    expect(settlementOf(fake.emitForeign("charge.refund.updated", foreignRefund) as Stripe.Event)).toMatchObject({ kind: "ignore" });
    const oldDispute = { ...structuredClone(resources.dispute), payment_intent: null };
    expect(settlementOf(fake.emitForeign("charge.dispute.created", oldDispute) as Stripe.Event)).toMatchObject({ kind: "ignore", reason: expect.stringContaining("without a PaymentIntent") });
    // A type Tender knows about an object of another kind is not read as that kind.
    expect(fake.payouts.get(payout)).toBeDefined();
    const transfer = [...fake.transfers.values()][0];
    expect(transfer.metadata.tender_reference).toBe("po_tender_1");
    const wrongObject = fake.emitForeign("payout.paid", transfer);
    expect(settlementOf(wrongObject as Stripe.Event)).toMatchObject({ kind: "ignore", reason: "payout.paid about a transfer, not a payout" });
  });
});

describe("events delivered late, twice and out of order", () => {
  const url = "https://tender.test/processor-webhooks/stripe/acct_1";

  it("twice: each copy verifies and reads as the same settlement (the route applies it once, by event id)", async () => {
    const { received, deliver } = receiver();
    const { fake, payout } = await withMoneyMoved(deliver);
    fake.settlePayout(payout, "paid");
    const results = await fake.deliverEvents({ url, secret: SECRET, twice: true });
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    expect(received[0].settlement).toEqual(received[1].settlement);
    expect(received[0].settlement).toMatchObject({ eventId: expect.stringMatching(/^evt_/), kind: "payout", outcome: "paid" });
  });

  it("out of order: each event carries its own time, so the route can keep the latest", async () => {
    const { received, deliver } = receiver();
    const fakeNow = { s: NOW_S };
    const fake = newFakeStripe({ deliver, now: () => fakeNow.s * 1000 });
    const { stripe } = connectToFake({ fake });
    const charge = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 3000, currency: "usd", reference: "c", customer: { id: "usr_1", email: null } });
    fake.inject({ kind: "refund_pending" });
    const refund = await stripe.refund({ chargeReference: charge.outcome.status === "succeeded" ? charge.outcome.reference : "", amount: 1000, currency: "usd", reference: "re_tender_9" });
    fake.settleRefund(referenceOf(refund), "succeeded");
    fakeNow.s += 60;
    fake.openDispute(charge.outcome.status === "succeeded" ? charge.outcome.reference : "");
    await fake.deliverEvents({ url, secret: SECRET, reverse: true, timestamp: fakeNow.s });
    const kinds = received.map((r) => r.settlement!.kind);
    expect(kinds).toEqual(["dispute", "refund", "refund"]);
    const times = received.map((r) => r.settlement!.occurredAt);
    expect(times[0]).toBeGreaterThan(times[1]);
  });

  it("late: delivered after a wait, still within the tolerance, verifies", async () => {
    const { received, deliver } = receiver(SECRET, NOW_S + 200);
    const { fake, payout } = await withMoneyMoved(deliver);
    fake.settlePayout(payout, "failed");
    await fake.deliverEvents({ url, secret: SECRET, delayMs: 20, timestamp: NOW_S });
    expect(received).toEqual([{ status: 200, settlement: expect.objectContaining({ kind: "payout", outcome: "failed" }) }]);
  });

  it("signed too long ago (a replay of an old delivery): refused with 400, nothing settled", async () => {
    const { received, deliver } = receiver(SECRET, NOW_S);
    const { fake, payout } = await withMoneyMoved(deliver);
    fake.settlePayout(payout, "paid");
    const results = await fake.deliverEvents({ url, secret: SECRET, timestamp: NOW_S - 3600 });
    expect(results.map((r) => r.status)).toEqual([400]);
    expect(received).toEqual([{ status: 400, reason: "timestamp_outside_tolerance" }]);
  });

  it("signed with another account's secret: refused", async () => {
    const { received, deliver } = receiver("whsec_the_right_one");
    const { fake, payout } = await withMoneyMoved(deliver);
    fake.settlePayout(payout, "paid");
    await fake.deliverEvents({ url, secret: "whsec_the_wrong_one" });
    expect(received).toEqual([{ status: 400, reason: "signature_mismatch" }]);
  });
});

describe("payment_intent.* events of a payment that asked for 3-D Secure", () => {
  async function waiting(capture: "automatic" | "manual", reference: string) {
    const fake = newFakeStripe({ now: () => NOW_S * 1000 });
    const { stripe } = connectToFake({ fake });
    const outcome = await stripe.authorizeCard({ card: cardOf(STRIPE_CARDS.needsAuthentication), amount: 4200, currency: "eur", reference, capture, customer: { id: "usr_1", email: null }, onSession: true });
    expect(outcome).toMatchObject({ status: "requires_action", reference: expect.stringMatching(/^pi_/), clientSecret: expect.stringMatching(/^pi_\w+_secret_/) });
    return { fake, intent: outcome.status === "requires_action" ? outcome.reference : "" };
  }

  it("off session the same card still fails authentication_required (renewals keep today's behaviour)", async () => {
    const fake = newFakeStripe({ now: () => NOW_S * 1000 });
    const { stripe } = connectToFake({ fake });
    const outcome = await stripe.authorizeCard({ card: cardOf(STRIPE_CARDS.needsAuthentication), amount: 4200, currency: "eur", reference: "pi-off", capture: "automatic", customer: { id: "usr_1", email: null } });
    expect(outcome).toMatchObject({ status: "failed", code: "authentication_required" });
  });

  it("reads each as how the authentication ended (each event checked against Stripe's document by the fake)", async () => {
    const completed = await waiting("automatic", "pi-1");
    expect(settlementOf(completed.fake.authenticate(completed.intent, "complete") as Stripe.Event)).toMatchObject({
      kind: "payment_intent",
      type: "payment_intent.succeeded",
      chargeReference: completed.intent,
      state: { status: "succeeded", authorized: false, amountReceived: 4200 },
    });
    const held = await waiting("manual", "pi-2");
    expect(settlementOf(held.fake.authenticate(held.intent, "complete") as Stripe.Event)).toMatchObject({
      type: "payment_intent.amount_capturable_updated",
      state: { status: "succeeded", authorized: true },
    });
    const failed = await waiting("automatic", "pi-3");
    expect(settlementOf(failed.fake.authenticate(failed.intent, "fail") as Stripe.Event)).toMatchObject({
      type: "payment_intent.payment_failed",
      state: { status: "failed", code: "authentication_failed" },
    });
    const canceled = await waiting("automatic", "pi-4");
    const { stripe } = connectToFake({ fake: canceled.fake });
    await stripe.cancelPayment({ chargeReference: canceled.intent, reference: "pi-4:cancel" });
    expect(settlementOf(canceled.fake.events.at(-1) as Stripe.Event)).toMatchObject({ type: "payment_intent.canceled", state: { status: "canceled" } });
    for (const { fake } of [completed, held, failed, canceled]) expect(fake.specViolations()).toEqual([]);
  });
});
