// Live mode attacked by a reviewer who did not write it (issue 20): money moving twice when two
// workers run the same thing at once or Stripe has forgotten its keys, a forged Stripe event, and a
// test key reaching live money. Each attack ends by counting what the fake Stripe holds.
import Stripe from "stripe";
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";
import {
  type Connected,
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  expectOneKeyPerObject,
  expectSpecClean,
  installFakeStripe,
  liveSubscription,
  livePayout,
  newSigningSecret,
  payableUser,
  sentForPayout,
} from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(() => {
  expectSpecClean(fake);
  expectOneKeyPerObject(fake, "live attacks");
  stripe.restore();
});

let acct: LiveAccount;
let connected: Connected;
let planId: string;

beforeAll(async () => {
  acct = await signup("Live attacks");
  connected = await connectStripe(acct);
  planId = (await createPlan({ id: acct.id, key: acct.liveKey }, { price: 20, currency: "usd" })).id;
});

const byReference = (map: Map<string, Record<string, any>>, reference: string) => [...map.values()].filter((o) => o.metadata?.tender_reference === reference);
const row = (table: string, id: string) => env.DB.prepare(`SELECT * FROM ${table} WHERE id = ?`).bind(id).first<Record<string, any>>();

const subscribedLive = () => liveSubscription(fake, acct, planId, `Sam ${Math.random().toString(36).slice(2, 7)}`);

describe("two workers at once", () => {
  it("two settlement jobs of one live payout make one transfer and one Stripe payout", async () => {
    const payee = await payableUser(fake, acct, "Pat Twice");
    const res = await livePayout(acct, payee.id);
    expect(res.status, res.text).toBe(201);
    await Promise.all([runJobs({ kind: "settlePayout", payoutId: res.body.id }), runJobs({ kind: "settlePayout", payoutId: res.body.id })]);
    expect(sentForPayout(fake, res.body.id)).toEqual({ transfers: 1, payouts: 1 });
    expect((await row("payouts", res.body.id))!.status).toBe("pending");
  });

  it("two first charges with one Idempotency-Key at once make one PaymentIntent", async () => {
    const user = await payableUser(fake, acct, "Ike Same-Key");
    const body = { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) };
    const before = fake.count("paymentIntents");
    const answers = await Promise.all([0, 1].map(() => call("/subscriptions", { key: acct.liveKey, body, idempotencyKey: "same-key-at-once" })));
    const statuses = answers.map((a) => a.status).sort();
    // One ran; the other replayed it, or was told the key is in use (409) while it ran.
    expect(statuses[0], answers.map((a) => a.text).join("\n")).toBe(201);
    expect([201, 409]).toContain(statuses[1]);
    expect(fake.count("paymentIntents") - before).toBe(1);
    const subs = await call(`/subscriptions?user_id=${user.id}`, { key: acct.liveKey });
    expect(subs.body.data).toHaveLength(1);
  });

  it("two renewal runs of one due live subscription at once charge the period once", async () => {
    const { sub } = await subscribedLive();
    await makeDue(sub);
    const before = fake.count("paymentIntents");
    await Promise.all([runJobs({ kind: "billing.renew", subscriptionIds: [sub] }), runJobs({ kind: "billing.renew", subscriptionIds: [sub] })]);
    expect(fake.count("paymentIntents") - before).toBe(1);
    const payments = await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey });
    expect(payments.body.data.map((p: { status: string }) => p.status)).toEqual(["completed", "completed"]);
    const invoices = await call(`/invoices?subscription_id=${sub}`, { key: acct.liveKey });
    expect(invoices.body.data).toHaveLength(2);
  });

  it("two refunds of the whole payment at once (two keys): one goes through, Stripe refunds it once", async () => {
    const { sub } = await subscribedLive();
    const payment = (await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey })).body.data[0];
    const answers = await Promise.all(["a", "b"].map((k) => call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id }, idempotencyKey: `whole-${k}-${payment.id}` })));
    const created = answers.filter((a) => a.status === 201);
    expect(created, answers.map((a) => a.text).join("\n")).toHaveLength(1);
    const refused = answers.find((a) => a.status !== 201)!;
    // Whichever committed second finds the payment refunded (409), or its amount beyond what is left (400).
    expect([`409 payment_already_refunded`, `400 refund_exceeds_payment`]).toContain(`${refused.status} ${refused.body.error.code}`);
    await Promise.all([runJobs({ kind: "settleRefund", refundId: created[0].body.id }), runJobs({ kind: "settleRefund", refundId: created[0].body.id })]);
    const refunds = [...fake.refunds.values()].filter((r) => r.payment_intent === payment.processor_reference || byReference(fake.refunds, created[0].body.id).includes(r));
    expect(refunds).toHaveLength(1);
    expect(refunds[0].amount).toBe(2000);
  });
});

describe("Stripe has forgotten its keys (24 hours later)", () => {
  it("a payout's settlement sent again finds the transfer and the payout by their reference and makes neither again", async () => {
    const payee = await payableUser(fake, acct, "Flo Forgotten");
    const res = await livePayout(acct, payee.id);
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    fake.forgetIdempotencyKeys();
    // The sweep's retry of a payout whose send lease ran out (as if the first worker's answer was lost).
    await env.DB.prepare("UPDATE payouts SET updated_at = '2000-01-01T00:00:00.000Z' WHERE id = ?").bind(res.body.id).run();
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    expect(sentForPayout(fake, res.body.id)).toEqual({ transfers: 1, payouts: 1 });
  });

  it("a renewal's charge sent again after the keys are gone makes no second PaymentIntent", async () => {
    const { sub } = await subscribedLive();
    await makeDue(sub);
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents", times: 4 });
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub] });
    const intentsAfterTimeout = fake.count("paymentIntents", (i) => i.metadata?.tender_reference?.startsWith(`${sub}:period:1`));
    expect(intentsAfterTimeout).toBe(1);
    fake.forgetIdempotencyKeys();
    // A day later: the claim's lease ran out long ago, and its first attempt is more than 23 hours
    // old (Stripe forgets a key after 24): the retry takes it over and sends the same reference.
    await env.DB.prepare("UPDATE subscription_periods SET updated_at = '2000-01-01T00:00:00.000Z', created_at = '2000-01-01T00:00:00.000Z' WHERE subscription_id = ? AND period_index = 1").bind(sub).run();
    await makeDue(sub);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub] });
    expect(fake.count("paymentIntents", (i) => i.metadata?.tender_reference?.startsWith(`${sub}:period:1`))).toBe(1);
    const payments = (await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey })).body.data;
    expect(payments.filter((p: { status: string }) => p.status === "completed")).toHaveLength(2);
  });
});

describe("forged and misdirected Stripe events", () => {
  it("payout.paid signed with a secret that is not the connection's changes nothing", async () => {
    const payee = await payableUser(fake, acct, "Fay Forged");
    const res = await livePayout(acct, payee.id);
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    const stripePayout = byReference(fake.payouts, res.body.id)[0];
    const { _account, _seq, ...sent } = stripePayout;
    const event = { id: "evt_forged_1", object: "event", type: "payout.paid", account: _account, created: Math.floor(Date.now() / 1000), data: { object: { ...sent, status: "paid" } }, livemode: true };
    const payload = JSON.stringify(event);
    const signature = await Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: newSigningSecret(), cryptoProvider: Stripe.createSubtleCryptoProvider() });
    const answer = await call(new URL(connected.webhookUrl).pathname, { method: "POST", rawBody: payload, headers: { "content-type": "application/json", "stripe-signature": signature } });
    expectError(answer, 400, "invalid_request_error", "signature_mismatch");
    expect((await row("payouts", res.body.id))!.status).toBe("pending");
  });

  it("the test key cannot refund, read or cancel live money", async () => {
    const { sub } = await subscribedLive();
    const payment = (await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey })).body.data[0];
    expect((await call("/refunds", { key: acct.key, body: { payment_id: payment.id } })).status).toBe(404);
    expect((await call(`/subscriptions/${sub}`, { key: acct.key, method: "DELETE" })).status).toBe(404);
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).status).toBe(404);
    expect([...fake.refunds.values()].filter((r) => r.payment_intent === payment.processor_reference)).toHaveLength(0);
  });
});
