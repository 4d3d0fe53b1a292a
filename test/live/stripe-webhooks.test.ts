// Stripe's events at POST /processor-webhooks/stripe/{account_id}: verified against THAT account's
// connection (its account endpoint's secret, or its Connect endpoint's), applied once each, in any
// order, and acknowledged with 200 even when they are about nothing Tender knows. Anything refused
// changes nothing: every table is compared before and after.
import { env } from "../support/env";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import { settlePayout } from "../../src/payments/settle-payout";
import { processorFor } from "../../src/processor";
import type { Processor } from "../../src/processor/types";
import { call, expectError, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { changes, countOf, quiesce, snapshot } from "../support/db";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { runJobs } from "../support/queue";
import {
  type Connected,
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  deliverStripeEvents,
  installFakeStripe,
  livePayout,
  payableUser,
  skipStripeEvents,
} from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
const receiver = installReceiver();
afterAll(async () => {
  // Nothing may reach the network once the receiver is gone: let Tender's deliveries finish.
  await quiesce();
  stripe.restore();
  receiver.restore();
});

let a: LiveAccount;
let b: LiveAccount;
let connectedA: Connected;
let connectedB: Connected;

beforeAll(async () => {
  a = await signup("Account A");
  b = await signup("Account B");
  connectedA = await connectStripe(a);
  connectedB = await connectStripe(b);
  const hook = await call("/api/webhooks", { key: a.liveKey, body: { url: `${RECEIVER_ORIGIN}/live-a`, events: ["*"] } });
  expect(hook.status, hook.text).toBe(201);
});

/** Signs `payload` as Stripe does, with `secret`, at `timestamp` (seconds; default now). */
const sign = (payload: string, secret: string, timestamp = Math.floor(Date.now() / 1000)) =>
  Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret, timestamp, cryptoProvider: Stripe.createSubtleCryptoProvider() });

const post = (path: string, payload: string, signature?: string) =>
  call(path, { method: "POST", rawBody: payload, headers: { "content-type": "application/json", ...(signature ? { "stripe-signature": signature } : {}) } });

const pathOf = (connected: Connected) => new URL(connected.webhookUrl).pathname;

/** A live payout of `acct` sent to Stripe (pending there), and its Stripe payout id. */
async function sentPayout(acct: LiveAccount) {
  const payee = await payableUser(fake, acct);
  const res = await livePayout(acct, payee.id);
  expect(res.status, res.text).toBe(201);
  await runJobs({ kind: "settlePayout", payoutId: res.body.id });
  const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
  expect(stripePayout.status).toBe("pending");
  return { payoutId: res.body.id as string, stripePayoutId: stripePayout.id as string, payee };
}

/** A live payment of `acct` (a subscription's first charge) and its PaymentIntent. */
async function livePayment(acct: LiveAccount) {
  const user = await call("/api/users", { key: acct.liveKey, body: { name: "Payer", email: "payer@example.com" } });
  const plan = await createPlan({ id: acct.id, key: acct.liveKey }, { price: 30 });
  const sub = await call("/subscriptions", { key: acct.liveKey, body: { user_id: user.body.id, plan_id: plan.id, ...card(STRIPE_CARDS.succeeds) } });
  expect(sub.status, sub.text).toBe(201);
  const payment = (await call(`/payments?subscription_id=${sub.body.id}`, { key: acct.liveKey })).body.data[0];
  const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(payment.id).first<{ processor_reference: string }>();
  return { payment, intent: row!.processor_reference, userId: user.body.id as string, subscriptionId: sub.body.id as string };
}

const payoutStatus = async (id: string) => (await env.DB.prepare("SELECT status FROM payouts WHERE id = ?").bind(id).first<{ status: string }>())!.status;
const eventTypes = async (acct: LiveAccount, objectId: string) =>
  ((await call(`/api/events?object_id=${objectId}&limit=100`, { key: acct.liveKey })).body.data as { type: string; sequence: number }[]).map((e) => `${e.sequence} ${e.type}`).reverse();

describe("what is refused changes nothing", () => {
  it("no signature, a malformed one, a wrong secret, an old timestamp, a re-serialized body, no connection, another account's URL: 400 each", async () => {
    const { payoutId, stripePayoutId } = await sentPayout(a);
    const event = fake.settlePayout(stripePayoutId, "paid");
    const payload = JSON.stringify(event, null, 2);
    const unconnected = await signup("Not connected");
    const cases: [string, string, string | undefined, string][] = [
      ["no Stripe-Signature", pathOf(connectedA), undefined, "missing_signature"],
      ["a malformed signature", pathOf(connectedA), "not a signature", "malformed_signature"],
      ["signed with another secret", pathOf(connectedA), await sign(payload, "whsec_someone_else_s_secret"), "signature_mismatch"],
      ["signed an hour ago", pathOf(connectedA), await sign(payload, connectedA.connectWebhookSecret, Math.floor(Date.now() / 1000) - 3600), "timestamp_outside_tolerance"],
      ["signed with B's secret at A's URL", pathOf(connectedA), await sign(payload, connectedB.connectWebhookSecret), "signature_mismatch"],
      ["signed with A's secret at B's URL", pathOf(connectedB), await sign(payload, connectedA.connectWebhookSecret), "signature_mismatch"],
      ["an account without a connection", `/processor-webhooks/stripe/${unconnected.id}`, await sign(payload, connectedA.connectWebhookSecret), "no_processor_connection"],
      ["no such account", "/processor-webhooks/stripe/acct_01jx00000000000000000000zz", await sign(payload, connectedA.connectWebhookSecret), "no_processor_connection"],
      ["not an account id", "/processor-webhooks/stripe/whatever", await sign(payload, connectedA.connectWebhookSecret), "no_processor_connection"],
    ];
    const before = await snapshot();
    for (const [name, path, signature, code] of cases) {
      const res = await post(path, payload, signature);
      expectError(res, 400, "invalid_request_error", code);
      expect(res.body.error.message, name).toMatch(/Nothing was changed/);
    }
    // The signed bytes re-serialized (same JSON, other whitespace): the signature no longer matches.
    const signature = await sign(payload, connectedA.connectWebhookSecret);
    expectError(await post(pathOf(connectedA), JSON.stringify(event), signature), 400, "invalid_request_error", "signature_mismatch");
    expect(changes(before, await snapshot())).toEqual({});
    expect(await payoutStatus(payoutId)).toBe("pending");
    // The same bytes, rightly signed, at A's URL: applied.
    const ok = await post(pathOf(connectedA), payload, signature);
    skipStripeEvents(fake);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual({ received: true, event: event.id, outcome: "applied" });
    expect(await payoutStatus(payoutId)).toBe("paid");
  });

  it("a connection without a Connect secret refuses payout events signed by the Connect endpoint", async () => {
    const c = await signup("No connect secret");
    const res = await call("/api/processor", { method: "PUT", key: c.liveKey, body: { provider: "stripe", secret_key: `sk_live_${"c".repeat(30)}`, webhook_secret: "whsec_only_the_account_endpoint" } });
    expect(res.status, res.text).toBe(200);
    const payload = JSON.stringify({ id: "evt_1", object: "event", type: "payout.paid", created: 1, data: { object: { id: "po_1", object: "payout" } } });
    expectError(await post(new URL(res.body.webhook_url).pathname, payload, await sign(payload, "whsec_a_connect_endpoint")), 400, "invalid_request_error", "signature_mismatch");
    const accepted = await post(new URL(res.body.webhook_url).pathname, payload, await sign(payload, "whsec_only_the_account_endpoint"));
    expect(accepted.body).toMatchObject({ received: true, outcome: "ignored" });
  });
});

describe("payouts", () => {
  it("payout.paid delivered twice is applied once: one payout.paid, delivered to the live endpoint", async () => {
    const { payoutId, stripePayoutId } = await sentPayout(a);
    fake.settlePayout(stripePayoutId, "paid");
    const answers = await deliverStripeEvents(fake, connectedA, { twice: true });
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    expect(await payoutStatus(payoutId)).toBe("paid");
    expect(await eventTypes(a, payoutId)).toEqual(["1 payout.created", "2 payout.paid"]);
    expect(await countOf("SELECT count(*) AS n FROM processor_events WHERE account_id = ? AND object_id = ?", a.id, payoutId)).toBe(1);
    await waitFor(() => expect(receiver.received.some((r) => r.url.endsWith("/live-a") && JSON.parse(r.body).type === "payout.paid" && JSON.parse(r.body).data.id === payoutId)).toBe(true));
  });

  it("payout.paid arriving while the settlement job is at Stripe: one payout.paid, whatever the job then answers", async () => {
    for (const answer of ["pending", "paid"] as const) {
      const payee = await payableUser(fake, a);
      const res = await livePayout(a, payee.id);
      const real = await processorFor(env, createDb(env.DB), { accountId: a.id, livemode: true });
      // Stripe pays the payout and its event lands before the job's own step commits.
      const racing: Processor = {
        ...real,
        async sendPayout(args) {
          const outcome = await real.sendPayout(args);
          const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === args.reference)!;
          fake.settlePayout(stripePayout.id, "paid");
          await deliverStripeEvents(fake, connectedA);
          expect(await payoutStatus(res.body.id)).toBe("paid");
          return answer === "paid" ? { status: "succeeded", reference: stripePayout.id } : outcome;
        },
      };
      const result = await settlePayout({ kind: "settlePayout", payoutId: res.body.id }, env, racing);
      expect(result, answer).toBe(answer === "pending" ? "pending" : "skipped");
      expect(await payoutStatus(res.body.id)).toBe("paid");
      expect(await eventTypes(a, res.body.id)).toEqual(["1 payout.created", "2 payout.paid"]);
    }
  });

  it("payout.failed after payout.paid: the payout becomes failed (Stripe reports late failures) and its transfer is reversed", async () => {
    const { payoutId, stripePayoutId, payee } = await sentPayout(a);
    fake.settlePayout(stripePayoutId, "paid");
    await deliverStripeEvents(fake, connectedA);
    expect(await payoutStatus(payoutId)).toBe("paid");
    const platformBefore = fake.balance(fake.platformAccount, "usd");
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const [answer] = await deliverStripeEvents(fake, connectedA);
    expect(answer.status).toBe(200);
    const read = (await call(`/payouts/${payoutId}`, { key: a.liveKey })).body;
    expect(read).toMatchObject({ status: "failed", failure_code: "card_declined", failure_message: expect.stringContaining("failure_code account_closed") });
    expect(await eventTypes(a, payoutId)).toEqual(["1 payout.created", "2 payout.paid", "3 payout.failed"]);
    const [transfer] = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === payoutId);
    expect(transfer).toMatchObject({ reversed: true, amount_reversed: 2500 });
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
    expect(fake.balance(fake.platformAccount, "usd")).toBe(platformBefore + 2500);
  });

  it("out of order (payout.failed delivered before the payout.paid that preceded it): failed stays, once", async () => {
    const { payoutId, stripePayoutId } = await sentPayout(a);
    fake.settlePayout(stripePayoutId, "paid");
    fake.settlePayout(stripePayoutId, "failed", "insufficient_funds");
    const answers = await deliverStripeEvents(fake, connectedA, { reverse: true });
    expect(answers.map((r) => r.type)).toEqual(["payout.failed", "payout.paid"]);
    expect(await payoutStatus(payoutId)).toBe("failed");
    expect(await eventTypes(a, payoutId)).toEqual(["1 payout.created", "2 payout.failed"]);
    const outcomes = (await env.DB.prepare("SELECT type, outcome FROM processor_events WHERE object_id = ? ORDER BY received_at").bind(payoutId).all()).results;
    expect(outcomes).toEqual([{ type: "payout.failed", outcome: "applied" }, { type: "payout.paid", outcome: "unchanged" }]);
  });

  it("an event of account A naming a payout of account B changes nothing of B's (acknowledged, ignored)", async () => {
    const { payoutId } = await sentPayout(b);
    const { stripePayoutId: ofA, payee } = await sentPayout(a);
    // A's own Stripe payout, its reference changed to B's payout, signed with A's secret.
    const { _account, _seq, ...sent } = fake.payouts.get(ofA)!;
    const stripePayout = { ...sent, status: "paid", metadata: { tender_reference: payoutId } };
    const forged = fake.emitForeign("payout.paid", stripePayout, payee.stripeAccount);
    skipStripeEvents(fake);
    const before = await snapshot();
    const payload = JSON.stringify(forged);
    const res = await post(pathOf(connectedA), payload, await sign(payload, connectedA.connectWebhookSecret));
    expect(res.body).toEqual({ received: true, event: forged.id, outcome: "ignored" });
    expect(await payoutStatus(payoutId)).toBe("pending");
    const changed = changes(before, await snapshot());
    expect(Object.keys(changed)).toEqual(["processor_events"]);
  });

  it("a payout event from another connected account than the payout was sent to is ignored", async () => {
    const { payoutId, stripePayoutId } = await sentPayout(a);
    const { _account, _seq, ...sent } = fake.payouts.get(stripePayoutId)!;
    const stripePayout = { ...sent, status: "paid" };
    const event = fake.emitForeign("payout.paid", stripePayout, "acct_not_the_recipient");
    skipStripeEvents(fake);
    const payload = JSON.stringify(event);
    const res = await post(pathOf(connectedA), payload, await sign(payload, connectedA.connectWebhookSecret));
    expect(res.body.outcome).toBe("ignored");
    expect(await payoutStatus(payoutId)).toBe("pending");
  });
});

describe("refunds", () => {
  async function pendingRefund(amount?: number) {
    const { payment } = await livePayment(a);
    fake.inject({ kind: "refund_pending" });
    const res = await call("/refunds", { key: a.liveKey, body: { payment_id: payment.id, ...(amount ? { amount } : {}) } });
    expect(res.status, res.text).toBe(201);
    await runJobs({ kind: "settleRefund", refundId: res.body.id });
    const stripeRefund = [...fake.refunds.values()].find((r) => r.metadata?.tender_reference === res.body.id)!;
    expect(stripeRefund.status).toBe("pending");
    return { payment, refundId: res.body.id as string, stripeRefundId: stripeRefund.id as string };
  }

  it("refund.updated succeeded twice, and charge.refund.updated for the same change: one refund.completed", async () => {
    const { refundId, stripeRefundId } = await pendingRefund(1000);
    const [updated] = fake.settleRefund(stripeRefundId, "succeeded");
    const answers = await deliverStripeEvents(fake, connectedA);
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    const again = await deliverStripeEvents(fake, connectedA, { events: [updated] });
    expect(again.map((r) => r.status)).toEqual([200]);
    expect((await call(`/refunds/${refundId}`, { key: a.liveKey })).body.status).toBe("succeeded");
    expect(await eventTypes(a, refundId)).toEqual(["1 refund.initiated", "2 refund.completed"]);
    const outcomes = (await env.DB.prepare("SELECT type, outcome FROM processor_events WHERE object_id = ? ORDER BY received_at").bind(refundId).all()).results;
    expect(outcomes).toEqual([{ type: "refund.updated", outcome: "applied" }, { type: "charge.refund.updated", outcome: "unchanged" }]);
  });

  it("a refund Stripe fails makes its amount refundable again", async () => {
    const { payment, refundId, stripeRefundId } = await pendingRefund();
    expect((await call(`/payments/${payment.id}`, { key: a.liveKey })).body).toMatchObject({ status: "refunded", amount_refunded: 3000 });
    fake.settleRefund(stripeRefundId, "failed");
    await deliverStripeEvents(fake, connectedA);
    expect((await call(`/refunds/${refundId}`, { key: a.liveKey })).body.status).toBe("failed");
    expect((await call(`/payments/${payment.id}`, { key: a.liveKey })).body).toMatchObject({ status: "completed", amount_refunded: 0 });
    const again = await call("/refunds", { key: a.liveKey, body: { payment_id: payment.id } });
    expect(again.status, again.text).toBe(201);
    expect(again.body.amount).toBe(3000);
  });
});

describe("disputes", () => {
  it("charge.dispute.created emits payment.disputed once, about the payment, with the dispute", async () => {
    const { payment, intent, userId, subscriptionId } = await livePayment(a);
    const opened = fake.openDispute(intent, "product_not_received");
    const answers = await deliverStripeEvents(fake, connectedA, { twice: true });
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    const events = (await call(`/api/events?object_id=${payment.id}&type=payment.disputed`, { key: a.liveKey })).body.data;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: "payment.disputed",
      livemode: true,
      object_id: payment.id,
      sequence: 2,
      data: {
        transaction_id: payment.id,
        amount: 3000,
        currency: "usd",
        status: "disputed",
        customer: { id: userId, email: "payer@example.com" },
        subscription_id: subscriptionId,
        dispute: { id: opened.data.object.id, amount: 3000, currency: "usd", reason: "product_not_received", status: "needs_response" },
      },
    });
    // The test key sees none of it.
    expect((await call(`/api/events?type=payment.disputed`, { key: a.key })).body.data).toEqual([]);
  });

  it("a dispute about a charge Tender did not make is acknowledged and changes nothing", async () => {
    const dispute = { ...structuredClone(fake.fixtures.resources.dispute), id: "dp_x", amount: 100, currency: "usd", payment_intent: "pi_unknown", reason: "fraudulent", status: "needs_response", charge: "ch_x" };
    const event = fake.emitForeign("charge.dispute.created", dispute);
    skipStripeEvents(fake);
    const payload = JSON.stringify(event);
    const before = await snapshot();
    const res = await post(pathOf(connectedA), payload, await sign(payload, connectedA.webhookSecret));
    expect(res.body).toEqual({ received: true, event: event.id, outcome: "ignored" });
    expect(Object.keys(changes(before, await snapshot()))).toEqual(["processor_events"]);
  });

  it("an event type Tender does not act on answers 200 ignored", async () => {
    const event = fake.emitForeign("customer.created", { ...structuredClone(fake.fixtures.resources.customer), id: "cus_x", metadata: {} });
    skipStripeEvents(fake);
    const payload = JSON.stringify(event);
    const res = await post(pathOf(connectedA), payload, await sign(payload, connectedA.webhookSecret));
    expect(res.status).toBe(200);
    expect(res.body.outcome).toBe("ignored");
  });
});
