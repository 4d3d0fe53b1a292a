// Payouts and refunds through Stripe: a recipient is paid through Stripe Connect (a transfer to the
// connected account linked to the Tender user, then that account's payout to its debit card), and a
// refund is a Stripe Refund of the payment's PaymentIntent. Checked against Stripe's document.
import { describe, expect, it } from "vitest";
import { STRIPE_CARDS, cardOf, connectToFake, expectSpecClean, operationsOf, requestsOf, referenceOf } from "../support/fake-stripe-env";
import { parsePayoutToken } from "../../src/processor/stripe-keys";
import type { StripeProcessor } from "../../src/processor/stripe";
import type { FakeStripe } from "../support/fake-stripe";

const NOW = Date.parse("2026-11-23T12:00:00Z");
const card = cardOf(STRIPE_CARDS.succeeds);

async function payable(stripe: StripeProcessor, fake: FakeStripe) {
  const account = fake.createConnectedAccount();
  const destination = await stripe.payoutDestination({ card, currency: "usd", recipient: { id: "usr_recipient", processorAccount: account } });
  if (!destination.payable) throw new Error(destination.message);
  return { account, token: destination.token };
}

describe("a payout destination (a Tender user linked to a Stripe connected account)", () => {
  it("is the connected account's debit card that matches the card of the payout request", async () => {
    const { fake, stripe } = connectToFake();
    const account = fake.createConnectedAccount({
      cards: [
        { last4: "1111", expMonth: 1, expYear: 2031 },
        { last4: "4242", expMonth: 12, expYear: 2030 },
      ],
    });
    const destination = await stripe.payoutDestination({ card, currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
    expect(destination).toEqual({ payable: true, token: expect.stringMatching(/^stripe:acct_\w+:card_\w+$/) });
    const { account: tokenAccount, card: external } = parsePayoutToken(destination.payable ? destination.token : "");
    expect(tokenAccount).toBe(account);
    expect(fake.externalAccounts.get(account)!.find((c) => c.id === external)).toMatchObject({ last4: "4242", exp_month: 12, exp_year: 2030 });
    expect(operationsOf(fake)).toEqual(["GET /v1/accounts/{account}", "GET /v1/accounts/{account}/external_accounts"]);
    expectSpecClean(fake);
  });

  it.each([
    ["no recipient", null, "no_recipient", /needs a recipient_id/],
    ["a user not linked to Stripe", { id: "usr_r", processorAccount: null }, "no_processor_account", /not linked to a Stripe connected account/],
    ["an account not connected to the platform", { id: "usr_r", processorAccount: "acct_unknown0000000" }, "account_not_found", /not a connected account of this platform/],
  ] as const)("answers recipient_not_payable for %s", async (_, recipient, reason, message) => {
    const { fake, stripe } = connectToFake();
    const destination = await stripe.payoutDestination({ card, currency: "usd", recipient });
    expect(destination).toEqual({ payable: false, code: "recipient_not_payable", reason, message: expect.stringMatching(message) });
    if (recipient?.processorAccount) expectSpecClean(fake);
  });

  it.each([
    ["the transfers capability is not active", { transfers: "pending" as const }, "transfers_inactive", /transfers capability is pending/],
    ["payouts are disabled", { payoutsEnabled: false }, "payouts_disabled", /payouts disabled/],
    ["no debit card matches the request's card", { cards: [{ last4: "4242", expMonth: 11, expYear: 2030 }] }, "no_matching_debit_card", /no debit card ending 4242 \(12\/2030\) for USD/],
    ["the matching card is for another currency", { cards: [{ last4: "4242", expMonth: 12, expYear: 2030, currency: "eur" }] }, "no_matching_debit_card", /for USD payouts/],
    ["the matching card is a credit card", { cards: [{ last4: "4242", expMonth: 12, expYear: 2030, funding: "credit" as const }] }, "no_matching_debit_card", /no debit card/],
  ])("answers recipient_not_payable when %s", async (_, options, reason, message) => {
    const { fake, stripe } = connectToFake();
    const account = fake.createConnectedAccount(options);
    const destination = await stripe.payoutDestination({ card, currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
    expect(destination).toEqual({ payable: false, code: "recipient_not_payable", reason, message: expect.stringMatching(message) });
    expectSpecClean(fake);
  });
});

describe("a payout", () => {
  it("transfers to the connected account, then pays out on it (Stripe-Account) to the debit card: pending until payout.paid", async () => {
    const { fake, stripe } = connectToFake();
    const { account, token } = await payable(stripe, fake);
    const platformBefore = fake.balance(fake.platformAccount, "usd");
    const outcome = await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_1" });
    expect(outcome).toEqual({ status: "pending", reference: expect.stringMatching(/^po_/) });

    const [transfer] = fake.transfers.values();
    expect(transfer).toMatchObject({ amount: 5000, currency: "usd", destination: account, transfer_group: "po_tender_1", metadata: { tender_reference: "po_tender_1" } });
    const payout = fake.payouts.get(referenceOf(outcome))!;
    expect(payout).toMatchObject({ amount: 5000, currency: "usd", destination: parsePayoutToken(token).card, method: "standard", status: "pending", metadata: { tender_reference: "po_tender_1" } });
    expect(fake.balance(fake.platformAccount, "usd")).toBe(platformBefore - 5000);
    expect(fake.balance(account, "usd")).toBe(0);

    const [transferPost] = requestsOf(fake, "POST /v1/transfers");
    const [payoutPost] = requestsOf(fake, "POST /v1/payouts");
    expect(transferPost).toMatchObject({ idempotencyKey: "po_tender_1:transfer", stripeAccount: null });
    expect(payoutPost).toMatchObject({ idempotencyKey: "po_tender_1:payout", stripeAccount: account });
    // Looked up first (transfers by transfer_group, the account's payouts), then made.
    expect(operationsOf(fake).slice(2)).toEqual(["GET /v1/transfers", "POST /v1/transfers", "GET /v1/payouts", "POST /v1/payouts"]);
    expect(requestsOf(fake, "GET /v1/payouts")[0].stripeAccount).toBe(account);
    expectSpecClean(fake);
  });

  it("answers succeeded once Stripe says the payout is paid", async () => {
    const { fake, stripe } = connectToFake();
    const { token } = await payable(stripe, fake);
    const sent = await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_1" });
    fake.settlePayout(referenceOf(sent), "paid");
    // A retry of the same payout (a redelivered job) finds it and reads its status; nothing new.
    expect(await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_1" })).toEqual({ status: "succeeded", reference: referenceOf(sent) });
    expect(fake.count("payouts")).toBe(1);
    expect(fake.count("transfers")).toBe(1);
  });

  it("gives the money back (a transfer reversal) when Stripe refuses the payout, and answers failed", async () => {
    const { fake, stripe } = connectToFake();
    const { account, token } = await payable(stripe, fake);
    const platformBefore = fake.balance(fake.platformAccount, "usd");
    fake.inject({ kind: "payout_refused", code: "invalid_card_type" });
    const outcome = await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_2" });
    expect(outcome).toEqual({ status: "failed", code: "card_declined", message: expect.stringContaining("(invalid_card_type)") });
    expect(fake.balance(fake.platformAccount, "usd")).toBe(platformBefore);
    expect(fake.balance(account, "usd")).toBe(0);
    expect([...fake.transfers.values()][0]).toMatchObject({ reversed: true, amount_reversed: 5000 });
    expect(requestsOf(fake, "POST /v1/transfers/{id}/reversals")[0]).toMatchObject({ idempotencyKey: "po_tender_2:reversal", params: { metadata: { tender_reference: "po_tender_2" } } });
    // Sent again (the job retried), it does not pay out a transfer already taken back.
    expect(await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_2" })).toMatchObject({ status: "failed" });
    expect(fake.count("payouts")).toBe(0);
    expect(fake.count("transfers")).toBe(1);
    expectSpecClean(fake);
  });

  it("refuses to pay out a reference whose transfer was made for another amount", async () => {
    const { fake, stripe } = connectToFake();
    const { token } = await payable(stripe, fake);
    await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_5" });
    await expect(stripe.sendPayout({ token, amount: 9000, currency: "usd", reference: "po_tender_5" })).rejects.toThrow(/with 5000 usd, not 9000 usd/);
    expect(fake.count("transfers")).toBe(1);
    expect(fake.count("payouts")).toBe(1);
  });

  it("fails with insufficient_funds when the platform's balance cannot cover the transfer, moving nothing", async () => {
    const { fake, stripe } = connectToFake();
    const { token } = await payable(stripe, fake);
    const outcome = await stripe.sendPayout({ token, amount: 500_000_000, currency: "usd", reference: "po_tender_3" });
    expect(outcome).toEqual({ status: "failed", code: "insufficient_funds", message: expect.stringContaining("(balance_insufficient)") });
    expect(fake.count("transfers")).toBe(0);
    expect(fake.count("payouts")).toBe(0);
  });

  it("brings the money of a payout that failed later (payout.failed) back to the platform, once", async () => {
    const { fake, stripe } = connectToFake();
    const { account, token } = await payable(stripe, fake);
    const platformBefore = fake.balance(fake.platformAccount, "usd");
    const sent = await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_4" });
    fake.settlePayout(referenceOf(sent), "failed", "account_closed");
    expect(fake.balance(account, "usd")).toBe(5000);
    const first = await stripe.reclaimFailedPayout({ token, reference: "po_tender_4" });
    const again = await stripe.reclaimFailedPayout({ token, reference: "po_tender_4" });
    expect(first).toEqual({ status: "succeeded", reference: expect.stringMatching(/^trr_/) });
    expect(again).toEqual(first);
    expect(fake.count("reversals")).toBe(1);
    expect(fake.balance(fake.platformAccount, "usd")).toBe(platformBefore);
    expect(fake.balance(account, "usd")).toBe(0);
    // A retried send of that payout reads it failed, reverses nothing more and pays nothing more.
    expect(await stripe.sendPayout({ token, amount: 5000, currency: "usd", reference: "po_tender_4" })).toMatchObject({ status: "failed" });
    expect(fake.count("payouts")).toBe(1);
    expect(fake.count("reversals")).toBe(1);
    expectSpecClean(fake);
  });

  it("reclaims nothing for a payout whose transfer was never made", async () => {
    const { fake, stripe } = connectToFake();
    const { token } = await payable(stripe, fake);
    expect(await stripe.reclaimFailedPayout({ token, reference: "po_never_sent" })).toEqual({ status: "succeeded", reference: "po_never_sent" });
    expect(fake.count("reversals")).toBe(0);
  });
});

describe("a refund", () => {
  async function charged(amount = 3000) {
    const connected = connectToFake({ client: { now: () => NOW } });
    const first = await connected.stripe.chargeCard({ card, amount, currency: "usd", reference: "charge-1", customer: { id: "usr_1", email: null }, firstAttemptAt: NOW });
    if (first.outcome.status !== "succeeded") throw new Error("charge failed");
    return { ...connected, paymentIntent: first.outcome.reference };
  }

  it("is a Stripe Refund of the payment's PaymentIntent, keyed and tagged with the Tender refund id", async () => {
    const { fake, stripe, paymentIntent } = await charged();
    const outcome = await stripe.refund({ chargeReference: paymentIntent, amount: 1200, currency: "usd", reference: "re_tender_1" });
    expect(outcome).toEqual({ status: "succeeded", reference: expect.stringMatching(/^re_/) });
    expect(fake.refunds.get(referenceOf(outcome))).toMatchObject({ amount: 1200, payment_intent: paymentIntent, metadata: { tender_reference: "re_tender_1" } });
    expect(requestsOf(fake, "POST /v1/refunds")[0]).toMatchObject({ idempotencyKey: "re_tender_1:refund", params: { payment_intent: paymentIntent, amount: "1200" } });
    expect(requestsOf(fake, "GET /v1/refunds")[0].params).toMatchObject({ payment_intent: paymentIntent });
    expectSpecClean(fake);
  });

  it("answers pending for a refund Stripe has not settled yet", async () => {
    const { fake, stripe, paymentIntent } = await charged();
    fake.inject({ kind: "refund_pending" });
    expect(await stripe.refund({ chargeReference: paymentIntent, amount: 500, currency: "usd", reference: "re_tender_2" })).toMatchObject({ status: "pending" });
  });

  it("answers failed with Stripe's reason when Stripe refuses it (more than is left)", async () => {
    const { fake, stripe, paymentIntent } = await charged(3000);
    await stripe.refund({ chargeReference: paymentIntent, amount: 2500, currency: "usd", reference: "re_tender_3" });
    const outcome = await stripe.refund({ chargeReference: paymentIntent, amount: 1000, currency: "usd", reference: "re_tender_4" });
    expect(outcome).toEqual({ status: "failed", code: "processing_error", message: expect.stringContaining("(amount_too_large)") });
    expect(fake.count("refunds")).toBe(1);
    expectSpecClean(fake);
  });

  it("refuses to answer for a reference already used for another amount, sending nothing", async () => {
    const { fake, stripe, paymentIntent } = await charged(3000);
    await stripe.refund({ chargeReference: paymentIntent, amount: 1000, currency: "usd", reference: "re_a" });
    const before = fake.requests.length;
    await expect(stripe.refund({ chargeReference: paymentIntent, amount: 2000, currency: "usd", reference: "re_a" })).rejects.toThrow(/made for this reference with 1000 usd, not 2000 usd/);
    expect(fake.requests.slice(before).map((r) => r.method)).toEqual(["GET"]);
    expect(fake.count("refunds")).toBe(1);
  });

  it("several partial refunds of one payment are each found by their own reference", async () => {
    const { fake, stripe, paymentIntent } = await charged(3000);
    const a = await stripe.refund({ chargeReference: paymentIntent, amount: 1000, currency: "usd", reference: "re_a" });
    const b = await stripe.refund({ chargeReference: paymentIntent, amount: 1000, currency: "usd", reference: "re_b" });
    expect(referenceOf(a)).not.toBe(referenceOf(b));
    expect(await stripe.refund({ chargeReference: paymentIntent, amount: 1000, currency: "usd", reference: "re_a" })).toEqual(a);
    expect(fake.count("refunds")).toBe(2);
  });
});
