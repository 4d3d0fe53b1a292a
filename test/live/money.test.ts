// Live mode moves money through the account's Stripe connection, over HTTP, against the fake
// Stripe: a first charge, renewals off-session (a card that needs authentication is a failed
// attempt for dunning), card updates (vaulted with a SetupIntent), refunds and payouts (Stripe
// Connect), each with the Stripe requests it makes, every one checked against Stripe's document.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renewChunk } from "../../src/billing/renewals";
import { parseCardToken, parsePayoutToken } from "../../src/processor/stripe-keys";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card, nextYear } from "../support/cards";
import { makeDue } from "../support/clock";
import { countOf, one } from "../support/db";
import { runJobs } from "../support/queue";
import {
  type Connected,
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  deliverStripeEvents,
  expectOneKeyPerObject,
  expectSpecClean,
  installFakeStripe,
  intentsOf,
  livePayout,
  operationsOf,
  payableUser,
  requestsOf,
} from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(() => {
  expectSpecClean(fake);
  expectOneKeyPerObject(fake, "money suite");
  stripe.restore();
});

let acct: LiveAccount;
let live: Account;
let connected: Connected;
let planId: string;

beforeAll(async () => {
  acct = await signup("Live money");
  live = { id: acct.id, key: acct.liveKey };
  connected = await connectStripe(acct);
  planId = (await createPlan(live, { price: 20, currency: "usd" })).id;
});

/** The Stripe operations made while `work` ran. */
async function stripeCalls<T>(work: () => Promise<T>): Promise<{ result: T; operations: string[] }> {
  const from = fake.requests.length;
  const result = await work();
  return { result, operations: operationsOf(fake).slice(from) };
}

async function liveUser(name = "Ada Live") {
  const res = await call("/api/users", { key: acct.liveKey, body: { name, email: `${name.split(" ")[0].toLowerCase()}.${Math.random().toString(36).slice(2, 8)}@example.com` } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; email: string };
}

const subscribe = (userId: string, pan: string, idempotencyKey?: string) =>
  call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, ...card(pan) }, idempotencyKey });

async function subscribed(pan: string = STRIPE_CARDS.succeeds) {
  const user = await liveUser();
  const res = await subscribe(user.id, pan);
  expect(res.status, res.text).toBe(201);
  return { user, sub: res.body as Record<string, any> };
}

const row = (table: string, id: string) => env.DB.prepare(`SELECT * FROM ${table} WHERE id = ?`).bind(id).first<Record<string, any>>();
const paymentsOf = async (subscriptionId: string) =>
  (await env.DB.prepare("SELECT * FROM payments WHERE subscription_id = ? ORDER BY created_at").bind(subscriptionId).all<Record<string, any>>()).results;

describe("a first charge (POST /subscriptions)", () => {
  it("is a confirmed PaymentIntent on the user's Stripe Customer, kept for renewals; a retry with the key charges nothing more", async () => {
    const user = await liveUser();
    const { result: res, operations } = await stripeCalls(() => subscribe(user.id, STRIPE_CARDS.succeeds, "first-charge-1"));
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ livemode: true, status: "active", user_id: user.id });
    expect(operations).toEqual(["GET /v1/customers/search", "POST /v1/customers", "POST /v1/payment_methods", "POST /v1/payment_intents"]);
    const [payment] = await paymentsOf(res.body.id);
    expect(payment).toMatchObject({ status: "completed", amount: 2000, livemode: 1, processor_reference: expect.stringMatching(/^pi_/) });
    const intent = fake.paymentIntents.get(payment.processor_reference)!;
    expect(intent).toMatchObject({ status: "succeeded", amount: 2000, currency: "usd", metadata: { tender_reference: payment.charge_reference, tender_user: user.id } });
    expect(payment.charge_reference).toMatch(new RegExp(`^${acct.id}:live:idempotency:first-charge-1:`));
    // The subscription keeps the Stripe customer and payment method, never the card.
    const stored = (await row("subscriptions", res.body.id))!;
    const { customer, paymentMethod } = parseCardToken(stored.processor_token);
    expect([intent.customer, intent.payment_method]).toEqual([customer, paymentMethod]);
    expect(fake.customers.get(customer)).toMatchObject({ email: user.email, metadata: { tender_user: user.id } });

    const { result: again, operations: none } = await stripeCalls(() => subscribe(user.id, STRIPE_CARDS.succeeds, "first-charge-1"));
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(res.body);
    expect(none).toEqual([]);
    expect(intentsOf(fake, payment.charge_reference)).toHaveLength(1);
    // The test key sees none of it.
    expect((await call(`/subscriptions/${res.body.id}`, { key: acct.key })).status).toBe(404);
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).status).toBe(404);
  });

  it("a declined card answers 402 with Tender's decline code (Stripe's kept in the message) and makes no subscription", async () => {
    for (const [pan, declineCode, stripeCode] of [
      [STRIPE_CARDS.declined, "card_declined", "generic_decline"],
      [STRIPE_CARDS.insufficientFunds, "insufficient_funds", "insufficient_funds"],
      [STRIPE_CARDS.expired, "expired_card", "expired_card"],
    ]) {
      const user = await liveUser();
      const res = await subscribe(user.id, pan);
      const error = expectError(res, 402, "card_error");
      expect(error).toMatchObject({ decline_code: declineCode });
      expect(error.message).toContain(`decline_code ${stripeCode}`);
      expect(await countOf("SELECT count(*) AS n FROM subscriptions WHERE user_id = ?", user.id)).toBe(0);
      expect(await countOf("SELECT count(*) AS n FROM payments WHERE user_id = ? AND status = 'failed' AND livemode = 1", user.id)).toBe(1);
    }
  });

  it("a card that needs 3D Secure makes the subscription incomplete: nothing charged yet, its PaymentIntent waits for the payer", async () => {
    const user = await liveUser();
    const res = await subscribe(user.id, STRIPE_CARDS.needsAuthentication);
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "incomplete", latest_payment: { status: "requires_action" } });
    expect(intentsOf(fake).filter((i) => i.metadata?.tender_user === user.id && i.status === "succeeded")).toEqual([]);
    expect(intentsOf(fake).filter((i) => i.metadata?.tender_user === user.id && i.status === "requires_action")).toHaveLength(1);
    // Its card is kept on the Customer for the renewals (the token names the intent's PaymentMethod).
    const token = (await one<{ processor_token: string }>("SELECT processor_token FROM subscriptions WHERE id = ?", res.body.id)).processor_token;
    expect(token).toMatch(/pm_/);
  });
});

describe("renewals and dunning, off-session", () => {
  it("a renewal charges the kept card off-session, with the period attempt as its reference", async () => {
    const { sub } = await subscribed();
    await makeDue(sub.id);
    const { operations } = await stripeCalls(() => renewChunk(env, [sub.id]));
    expect(operations).toEqual(["POST /v1/payment_intents"]);
    const [, renewal] = await paymentsOf(sub.id);
    expect(renewal).toMatchObject({ status: "completed", livemode: 1, charge_reference: `${sub.id}:period:1:attempt:1` });
    const [request] = requestsOf(fake, "POST /v1/payment_intents").slice(-1);
    const { customer, paymentMethod } = parseCardToken((await row("subscriptions", sub.id))!.processor_token);
    expect(request.params).toMatchObject({ off_session: "true", confirm: "true", customer, payment_method: paymentMethod, amount: "2000" });
    expect(request.idempotencyKey).toBe(`${sub.id}:period:1:attempt:1:payment_intent`);
    expect((await row("subscriptions", sub.id))!.periods_billed).toBe(2);
  });

  it("a renewal that needs authentication is a failed attempt: past_due, retried on the dunning schedule", async () => {
    const { sub } = await subscribed();
    await makeDue(sub.id);
    fake.inject({ kind: "card", behaviour: "authentication_required", operation: "POST /v1/payment_intents" });
    expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
    const [, attempt] = await paymentsOf(sub.id);
    expect(attempt).toMatchObject({ status: "failed", failure_code: "authentication_required" });
    expect((await row("subscriptions", sub.id))!).toMatchObject({ status: "past_due", dunning_attempts: 1 });
    // The retry (due again) charges attempt 2 with a reference of its own.
    await makeDue(sub.id);
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    expect((await paymentsOf(sub.id)).map((p) => p.charge_reference)).toEqual([expect.any(String), `${sub.id}:period:1:attempt:1`, `${sub.id}:period:1:attempt:2`]);
  });

  it("a live account whose connection is gone is left as it is: nothing claimed, no attempt counted", async () => {
    const other = await signup("Gone");
    await connectStripe(other);
    const user = await call("/api/users", { key: other.liveKey, body: { name: "Left", email: "left@example.com" } });
    const plan = await createPlan({ id: other.id, key: other.liveKey });
    const sub = await call("/subscriptions", { key: other.liveKey, body: { user_id: user.body.id, plan_id: plan.id, ...card(STRIPE_CARDS.succeeds) } });
    expect(sub.status, sub.text).toBe(201);
    // Not a state Tender makes (DELETE /api/processor refuses it): the row removed by hand.
    await env.DB.prepare("DELETE FROM processor_connections WHERE account_id = ?").bind(other.id).run();
    await makeDue(sub.body.id);
    expect(await renewChunk(env, [sub.body.id])).toEqual(["skipped"]);
    expect(await countOf("SELECT count(*) AS n FROM subscription_periods WHERE subscription_id = ?", sub.body.id)).toBe(1);
    expect((await row("subscriptions", sub.body.id))!).toMatchObject({ status: "active", dunning_attempts: 0, periods_billed: 1 });
  });
});

describe("card updates (PUT /subscriptions/{id})", () => {
  it("on an active subscription the new card is vaulted with a SetupIntent, not charged", async () => {
    const { sub } = await subscribed();
    const { result: res, operations } = await stripeCalls(() => call(`/subscriptions/${sub.id}`, { key: acct.liveKey, method: "PUT", body: card("5555555555554444") }));
    expect(res.status, res.text).toBe(200);
    expect(res.body.card).toMatchObject({ brand: "mastercard", last4: "4444" });
    expect(operations).toEqual(["GET /v1/customers/search", "POST /v1/payment_methods", "POST /v1/setup_intents"]);
    const setup = requestsOf(fake, "POST /v1/setup_intents").at(-1)!;
    expect(setup.params).toMatchObject({ confirm: "true", usage: "off_session" });
    const token = (await row("subscriptions", sub.id))!.processor_token;
    expect(parseCardToken(token).paymentMethod).toBe(setup.params.payment_method);
  });

  it("a card Stripe declines, or one that needs authentication, answers 402 and changes nothing", async () => {
    const { sub } = await subscribed();
    const before = await row("subscriptions", sub.id);
    for (const [pan, declineCode] of [[STRIPE_CARDS.declined, "card_declined"], [STRIPE_CARDS.needsAuthentication, "authentication_required"]]) {
      const res = await call(`/subscriptions/${sub.id}`, { key: acct.liveKey, method: "PUT", body: card(pan) });
      expect(expectError(res, 402, "card_error")).toMatchObject({ decline_code: declineCode });
    }
    expect(await row("subscriptions", sub.id)).toEqual(before);
  });

  it("on a past-due subscription the new card is vaulted, then charged for the unpaid period, and the subscription is active again", async () => {
    const { sub } = await subscribed();
    await makeDue(sub.id);
    fake.inject({ kind: "card", behaviour: "generic_decline", operation: "POST /v1/payment_intents" });
    expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
    const { result: res, operations } = await stripeCalls(() => call(`/subscriptions/${sub.id}`, { key: acct.liveKey, method: "PUT", body: card("5555555555554444"), idempotencyKey: "new-card-1" }));
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe("active");
    expect(operations).toEqual(["GET /v1/customers/search", "POST /v1/payment_methods", "POST /v1/setup_intents", "POST /v1/payment_intents"]);
    expect(requestsOf(fake, "POST /v1/payment_intents").at(-1)!.idempotencyKey).toBe(`${sub.id}:period:1:attempt:2:payment_intent`);
    expect((await paymentsOf(sub.id)).map((p) => p.status)).toEqual(["completed", "failed", "completed"]);
  });
});

describe("refunds", () => {
  it("a refund is a Stripe Refund of the payment's PaymentIntent, settled by the job", async () => {
    const { sub } = await subscribed();
    const [payment] = await paymentsOf(sub.id);
    const res = await call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id, amount: 500 } });
    expect(res.status, res.text).toBe(201);
    const { operations } = await stripeCalls(() => runJobs({ kind: "settleRefund", refundId: res.body.id }));
    // (The real local queue may have settled it already: then the job finds nothing to do.)
    expect(operations.length === 0 || operations.join() === "GET /v1/refunds,POST /v1/refunds").toBe(true);
    expect((await row("refunds", res.body.id))!.status).toBe("succeeded");
    const refunds = [...fake.refunds.values()].filter((r) => r.metadata?.tender_reference === res.body.id);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ amount: 500, payment_intent: payment.processor_reference, status: "succeeded" });
  });

  it("a credit note with refund: true is one Stripe Refund of the invoice's PaymentIntent, its Idempotency-Key the refund's id; a retry makes no second", async () => {
    const { sub } = await subscribed();
    const [payment] = await paymentsOf(sub.id);
    const invoice = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.liveKey })).body.data[0];
    const body = { invoice_id: invoice.id, amount: 700, reason: "product_unsatisfactory", refund: true };
    const res = await call("/credit-notes", { key: acct.liveKey, body, idempotencyKey: "live-note-1" });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ livemode: true, amount: 700, refund_id: expect.stringMatching(/^re_/) });
    const again = await call("/credit-notes", { key: acct.liveKey, body, idempotencyKey: "live-note-1" });
    expect(again.body).toEqual(res.body);
    await runJobs({ kind: "settleRefund", refundId: res.body.refund_id });
    expect((await row("refunds", res.body.refund_id))!.status).toBe("succeeded");
    const refunds = [...fake.refunds.values()].filter((r) => r.metadata?.tender_reference === res.body.refund_id);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ amount: 700, payment_intent: payment.processor_reference, status: "succeeded" });
    expect(requestsOf(fake, "POST /v1/refunds").filter((r) => r.idempotencyKey?.startsWith(res.body.refund_id))).toHaveLength(1);
    expect(await countOf("SELECT count(*) AS n FROM credit_notes WHERE invoice_id = ?", invoice.id)).toBe(1);
  });

  it("a refund Stripe answers pending stays pending until Stripe's event settles it", async () => {
    const { sub } = await subscribed();
    const [payment] = await paymentsOf(sub.id);
    fake.inject({ kind: "refund_pending" });
    const res = await call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id } });
    expect(res.status, res.text).toBe(201);
    await runJobs({ kind: "settleRefund", refundId: res.body.id });
    expect((await row("refunds", res.body.id))!.status).toBe("pending");
    expect((await row("payments", payment.id))!).toMatchObject({ status: "refunded", amount_refunded: 2000 });
    // A second message finds the refund held (its lease kept until the recheck): Stripe is not asked again.
    expect((await stripeCalls(() => runJobs({ kind: "settleRefund", refundId: res.body.id }))).operations).toEqual([]);
    const stripeRefund = [...fake.refunds.values()].find((r) => r.metadata?.tender_reference === res.body.id)!;
    fake.settleRefund(stripeRefund.id, "succeeded");
    const answers = await deliverStripeEvents(fake, connected);
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect((await row("refunds", res.body.id))!.status).toBe("succeeded");
    expect(await countOf("SELECT count(*) AS n FROM events WHERE object_id = ? AND type = 'refund.completed'", res.body.id)).toBe(1);
  });
});

describe("payouts (Stripe Connect)", () => {
  it("a user is linked to a connected account in live mode only", async () => {
    const test = await call("/api/users", { key: acct.key, body: { name: "Test", email: "t@example.com", stripe_account: "acct_1Nv0FGQ9RKHgCVdK" } });
    expect(expectError(test, 400, "invalid_request_error", "livemode_required").param).toBe("stripe_account");
    const made = await call("/api/users", { key: acct.liveKey, body: { name: "Linked", email: "l@example.com", stripe_account: "acct_1Nv0FGQ9RKHgCVdK" } });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ livemode: true, stripe_account: "acct_1Nv0FGQ9RKHgCVdK" });
    const kept = await call(`/api/users/${made.body.id}`, { key: acct.liveKey, method: "PUT", body: { name: "Linked 2", email: "l@example.com" } });
    expect(kept.body.stripe_account).toBe("acct_1Nv0FGQ9RKHgCVdK");
    const unlinked = await call(`/api/users/${made.body.id}`, { key: acct.liveKey, method: "PUT", body: { name: "Linked 2", email: "l@example.com", stripe_account: null } });
    expect(unlinked.body.stripe_account).toBeNull();
    expect(expectError(await call("/api/users", { key: acct.liveKey, body: { name: "Bad", email: "b@example.com", stripe_account: "acct 1" } }), 400, "invalid_request_error", "parameter_invalid").param).toBe("stripe_account");
  });

  it("a recipient that cannot be paid answers 400 recipient_not_payable, saying why, and nothing is written", async () => {
    const unlinked = await liveUser("Nobody Linked");
    const inactive = fake.createConnectedAccount({ transfers: "inactive", cards: [{ last4: "4242", expMonth: 12, expYear: nextYear }] });
    const disabled = fake.createConnectedAccount({ payoutsEnabled: false, cards: [{ last4: "4242", expMonth: 12, expYear: nextYear }] });
    const otherCard = fake.createConnectedAccount({ cards: [{ last4: "4444", expMonth: 12, expYear: nextYear }] });
    const linked = async (stripeAccount: string) =>
      (await call("/api/users", { key: acct.liveKey, body: { name: "Linked", email: "linked@example.com", stripe_account: stripeAccount } })).body.id as string;
    const cases: [string | undefined, RegExp, string][] = [
      [undefined, /needs a recipient_id/, "recipient_id"],
      [unlinked.id, /not linked to a Stripe connected account/, "recipient_id"],
      [await linked("acct_UnknownToStripe1"), /not a connected account of this platform/, "recipient_id"],
      [await linked(inactive), /cannot receive transfers/, "recipient_id"],
      [await linked(disabled), /payouts disabled/, "recipient_id"],
      [await linked(otherCard), /no debit card ending 4242/, "card_number"],
    ];
    const before = await countOf("SELECT count(*) AS n FROM payouts WHERE account_id = ?", acct.id);
    const transfers = fake.count("transfers");
    for (const [recipient, message, param] of cases) {
      const res = await livePayout(acct, recipient as string, recipient === undefined ? { recipient_id: undefined } : {});
      const error = expectError(res, 400, "invalid_request_error", "recipient_not_payable");
      expect(error.message).toMatch(message);
      expect(error.param).toBe(param);
    }
    // Since Tender-Version 2026-11-27 a missing recipient_id is the same error in both modes.
    const missing = await call("/payout", {
      key: acct.liveKey,
      body: { amount: 2500, currency: "usd", ...card("4242424242424242") },
      headers: { "tender-version": "2026-11-27" },
    });
    expect(expectError(missing, 400, "invalid_request_error", "parameter_missing").param).toBe("recipient_id");
    expect(await countOf("SELECT count(*) AS n FROM payouts WHERE account_id = ?", acct.id)).toBe(before);
    expect(fake.count("transfers")).toBe(transfers);
  });

  it("a payout is a transfer to the connected account, then its payout to the card; Stripe's payout.paid settles it", async () => {
    const payee = await payableUser(fake, acct);
    const res = await livePayout(acct, payee.id);
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "pending", livemode: true, recipient_id: payee.id, card: { last4: "4242" } });
    const token = parsePayoutToken((await row("payouts", res.body.id))!.processor_token);
    expect(token.account).toBe(payee.stripeAccount);
    const { result: settled, operations } = await stripeCalls(() => runJobs({ kind: "settlePayout", payoutId: res.body.id }));
    expect(settled.retryMessages).toEqual([]);
    expect(operations).toEqual(["GET /v1/transfers", "POST /v1/transfers", "GET /v1/payouts", "POST /v1/payouts"]);
    expect((await row("payouts", res.body.id))!.status).toBe("pending");
    const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
    expect(stripePayout).toMatchObject({ amount: 2500, currency: "usd", status: "pending", destination: token.card });
    expect(requestsOf(fake, "POST /v1/payouts").at(-1)!.stripeAccount).toBe(payee.stripeAccount);
    // A cancel is refused once it was handed to Stripe.
    expectError(await call(`/payouts/${res.body.id}/cancel`, { key: acct.liveKey, method: "POST" }), 409, "invalid_request_error", "payout_not_pending");

    fake.settlePayout(stripePayout.id, "paid");
    const answers = await deliverStripeEvents(fake, connected);
    expect(answers).toEqual([{ eventId: expect.any(String), type: "payout.paid", status: 200 }]);
    expect((await call(`/payouts/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("paid");
    const events = (await call(`/api/events?object_id=${res.body.id}`, { key: acct.liveKey })).body.data.map((e: { type: string }) => e.type);
    expect(events).toEqual(["payout.paid", "payout.created"]);
  });

  it("a payout Stripe refuses fails at once, and the transfer is taken back", async () => {
    const payee = await payableUser(fake, acct);
    const res = await livePayout(acct, payee.id);
    fake.inject({ kind: "payout_refused", code: "invalid_card" });
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    expect((await row("payouts", res.body.id))!).toMatchObject({ status: "failed", failure_code: "card_declined" });
    const [transfer] = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === res.body.id);
    expect(transfer).toMatchObject({ reversed: true, amount_reversed: 2500 });
  });
});
