// One-off payments in live mode, against the fake Stripe: POST /payments is a confirmed
// PaymentIntent on the user's Stripe Customer (captured at once, or held with capture_method
// manual), capture and cancel are Stripe's capture and cancel of it, the cron's expiry cancels it
// there too, and every request is checked against Stripe's document.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { card } from "../support/cards";
import { eventsFor } from "../support/db";
import { type LiveAccount, STRIPE_CARDS, connectStripe, expectOneKeyPerObject, expectSpecClean, installFakeStripe, operationsOf } from "../support/live";
import { AUTHORIZATION_LIFETIME_MS, expireAuthorizations } from "../../src/payments/intents";

const stripe = installFakeStripe();
const { fake } = stripe;
let acct: LiveAccount;

beforeAll(async () => {
  acct = await signup("Live one-off");
  await connectStripe(acct);
});

afterAll(() => {
  expectSpecClean(fake);
  expectOneKeyPerObject(fake, "one-off payments");
  stripe.restore();
});

async function liveUser(name: string) {
  const res = await call("/api/users", { key: acct.liveKey, body: { name, email: `${name.toLowerCase().replace(/\W/g, ".")}@example.com` } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string };
}

const pay = (userId: string, body: Record<string, unknown> = {}, pan: string = STRIPE_CARDS.succeeds, idempotencyKey?: string) =>
  call("/payments", { key: acct.liveKey, idempotencyKey, body: { amount: 3000, currency: "usd", user_id: userId, ...card(pan), ...body } });

/** The Stripe operations made while `work` ran. */
async function stripeCalls<T>(work: () => Promise<T>): Promise<{ result: T; operations: string[] }> {
  const from = fake.requests.length;
  const result = await work();
  return { result, operations: operationsOf(fake).slice(from) };
}

describe("live one-off payments", () => {
  it("capture_method automatic: a confirmed PaymentIntent, succeeded; the payment keeps its id as the processor reference", async () => {
    const user = await liveUser("Auto Live");
    const { result: res, operations } = await stripeCalls(() => pay(user.id, {}, STRIPE_CARDS.succeeds, "live-auto-1"));
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ livemode: true, status: "completed", amount_received: 3000 });
    expect(operations).toContain("POST /v1/payment_intents");
    const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.id).first<{ processor_reference: string }>();
    const intent = fake.paymentIntents.get(row!.processor_reference)!;
    expect(intent).toMatchObject({ status: "succeeded", amount_received: 3000, capture_method: "automatic" });
  });

  it("capture_method manual: requires_capture at Stripe and at Tender; a partial capture takes that much, the rest released", async () => {
    const user = await liveUser("Manual Live");
    const res = await pay(user.id, { capture_method: "manual" });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: "requires_capture", amount_capturable: 3000 });
    const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.id).first<{ processor_reference: string }>();
    const intent = fake.paymentIntents.get(row!.processor_reference)!;
    expect(intent).toMatchObject({ status: "requires_capture", amount_capturable: 3000 });

    const { result: captured, operations } = await stripeCalls(() => call(`/payments/${res.body.id}/capture`, { key: acct.liveKey, body: { amount: 1800 }, idempotencyKey: "live-cap-1" }));
    expect(captured.status, captured.text).toBe(200);
    expect(operations).toEqual(["POST /v1/payment_intents/{intent}/capture"]);
    expect(captured.body).toMatchObject({ status: "completed", amount_received: 1800, amount_capturable: 0 });
    expect(intent).toMatchObject({ status: "succeeded", amount_received: 1800 });
    // A refund takes only what was captured, at Stripe too.
    const refund = await call("/refunds", { key: acct.liveKey, body: { payment_id: res.body.id } });
    expect(refund.status, refund.text).toBe(201);
    expect(refund.body.amount).toBe(1800);
  });

  it("cancel releases the authorization at Stripe; a second cancel answers 409 without asking Stripe", async () => {
    const user = await liveUser("Cancel Live");
    const res = await pay(user.id, { capture_method: "manual" });
    const { result: canceled, operations } = await stripeCalls(() => call(`/payments/${res.body.id}/cancel`, { key: acct.liveKey, body: {} }));
    expect(canceled.status, canceled.text).toBe(200);
    expect(operations).toEqual(["POST /v1/payment_intents/{intent}/cancel"]);
    const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.id).first<{ processor_reference: string }>();
    expect(fake.paymentIntents.get(row!.processor_reference)!.status).toBe("canceled");
    const { result: again, operations: none } = await stripeCalls(() => call(`/payments/${res.body.id}/cancel`, { key: acct.liveKey, body: {} }));
    expectError(again, 409, "invalid_request_error", "payment_unexpected_state");
    expect(none).toEqual([]);
  });

  it("a decline answers 402 with the failed payment's id; a card that asks for 3-D Secure answers requires_action (test/live/authenticate.test.ts)", async () => {
    const user = await liveUser("Declined Live");
    const declined = await pay(user.id, {}, STRIPE_CARDS.insufficientFunds);
    expectError(declined, 402, "card_error", "card_declined");
    expect(declined.body.error.decline_code).toBe("insufficient_funds");
    expect((await call(`/payments/${declined.body.error.payment_id}`, { key: acct.liveKey })).body.status).toBe("failed");
    const authentication = await pay(user.id, { capture_method: "manual" }, STRIPE_CARDS.needsAuthentication);
    expect(authentication.status, authentication.text).toBe(201);
    expect(authentication.body).toMatchObject({ status: "requires_action", next_action: { type: "redirect_to_url" } });
  });

  it("the cron cancels a lapsed live authorization at Stripe, once", async () => {
    const user = await liveUser("Expiry Live");
    const res = await pay(user.id, { capture_method: "manual" });
    const later = Date.parse(res.body.created_at) + AUTHORIZATION_LIFETIME_MS + 1000;
    const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(res.body.id).first<{ processor_reference: string }>();
    const from = fake.requests.length;
    await expireAuthorizations(env, later);
    await expireAuthorizations(env, later);
    // (Earlier tests' payments waiting for 3-D Secure are canceled by the same runs: abandoned.)
    const cancels = fake.requests.slice(from).filter((r) => r.operation === "POST /v1/payment_intents/{intent}/cancel" && r.path.includes(row!.processor_reference));
    expect(cancels).toHaveLength(1);
    expect((await call(`/payments/${res.body.id}`, { key: acct.liveKey })).body).toMatchObject({ status: "canceled", cancellation_reason: "expired" });
    expect((await eventsFor(acct.id, res.body.id)).map((e) => e.type)).toEqual(["payment.authorized", "payment.canceled"]);
  });
});
