// Live mode against the fake Stripe, at Tender's level: the Worker's Stripe connector sends
// through the fake (useStripeClient, in this isolate: no network), an account's live key connects
// it (PUT /api/processor), and the fake's events are signed with the connection's secrets and
// delivered to the Worker's own webhook route.
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { useStripeClient } from "../../src/processor";
import { randomToken } from "../../src/lib/crypto";
import type { FakeStripe } from "./fake-stripe";
import { newFakeStripe } from "./fake-stripe-env";
import { type Account, BASE, type CallResult, call, fetchWith } from "./http";
import { droppingQueue } from "./queue";
import { card, cardFields, nextYear } from "./cards";

export { STRIPE_CARDS, requestsOf, operationsOf, expectSpecClean } from "./fake-stripe-env";

/** An account with both keys, as signup() answers. */
export type LiveAccount = Account & { liveKey: string };

/** What an account connected with, in clear (tests only: Tender never answers them). */
export interface Connected {
  secretKey: string;
  webhookSecret: string;
  connectWebhookSecret: string;
  webhookUrl: string;
  processorAccount: string;
}

/** The Worker's Stripe connector sends to `fake` (no waits between its retries) until restore(). */
export function installFakeStripe(fake: FakeStripe = newFakeStripe({ deliver: (url, init) => exports.default.fetch(url, init) })) {
  const sleeps: number[] = [];
  useStripeClient({
    fetch: fake.fetch,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  return { fake, sleeps, restore: () => useStripeClient() };
}

export const newSecretKey = () => `sk_live_${randomToken(40)}`;
export const newSigningSecret = () => `whsec_${randomToken(32)}`;

/**
 * PUT /api/processor with the live key; asserts 200. The connection takes card numbers
 * (raw_card_data: true, as the live tests of the card fields need) unless `rawCardData` is false.
 */
export async function connectStripe(
  acct: LiveAccount,
  secrets: Partial<Omit<Connected, "webhookUrl" | "processorAccount">> & { rawCardData?: boolean; publishableKey?: string } = {},
): Promise<Connected> {
  const secretKey = secrets.secretKey ?? newSecretKey();
  const webhookSecret = secrets.webhookSecret ?? newSigningSecret();
  const connectWebhookSecret = secrets.connectWebhookSecret ?? newSigningSecret();
  const res = await call("/api/processor", {
    method: "PUT",
    key: acct.liveKey,
    body: {
      provider: "stripe",
      secret_key: secretKey,
      webhook_secret: webhookSecret,
      connect_webhook_secret: connectWebhookSecret,
      raw_card_data: secrets.rawCardData ?? true,
      ...(secrets.publishableKey ? { publishable_key: secrets.publishableKey } : {}),
    },
  });
  expect(res.status, res.text).toBe(200);
  return { secretKey, webhookSecret, connectWebhookSecret, webhookUrl: res.body.webhook_url, processorAccount: res.body.processor_account };
}

/**
 * Sends the fake's undelivered events to the account's webhook URL, each signed with the secret
 * Stripe signs it with: a connected account's (payouts) with the Connect endpoint's, the others
 * with the account endpoint's. Returns Tender's answers.
 */
export async function deliverStripeEvents(
  fake: FakeStripe,
  connected: Connected,
  options: { twice?: boolean; reverse?: boolean; events?: Record<string, any>[] } = {},
) {
  const pending = options.events ?? fake.events.filter((event) => !delivered.has(event.id));
  const ordered = options.reverse ? [...pending].reverse() : pending;
  const results: { eventId: string; type: string; status: number | "network_error" }[] = [];
  for (const event of ordered) {
    const secret = event.account ? connected.connectWebhookSecret : connected.webhookSecret;
    results.push(...(await fake.deliverEvents({ url: connected.webhookUrl, secret, events: [event], twice: options.twice })));
    delivered.add(event.id);
  }
  return results;
}
const delivered = new Set<string>();

/** Marks the fake's events so far as handled: the next deliverStripeEvents sends only newer ones. */
export function skipStripeEvents(fake: FakeStripe) {
  for (const event of fake.events) delivered.add(event.id);
}

/** A live user linked to a new connected account of the fake, whose debit card is cardFields()'s. */
export async function payableUser(fake: FakeStripe, acct: LiveAccount, name = "Grace Payee") {
  const stripeAccount = fake.createConnectedAccount({ cards: [{ last4: "4242", expMonth: 12, expYear: nextYear }] });
  const res = await call("/api/users", { key: acct.liveKey, body: { name, email: `${name.split(" ")[0].toLowerCase()}@example.com`, stripe_account: stripeAccount } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id as string, stripeAccount };
}

/** POST /payout in live mode whose settlement message is lost (the test runs the job itself). */
export async function livePayout(acct: LiveAccount, recipientId: string, overrides: Record<string, unknown> = {}, idempotencyKey?: string): Promise<CallResult> {
  return fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", {
    key: acct.liveKey,
    json: { recipient_id: recipientId, amount: 2500, currency: "usd", description: "Vendor invoice 1042", ...cardFields("4242424242424242", "987"), ...overrides },
    headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {},
  });
}

const STRIPE_CARDS_SUCCEEDS = "4242424242424242";

/** A live user who can be paid out, subscribed to `planId` with a card that succeeds (charged through the fake). */
export async function liveSubscription(fake: FakeStripe, acct: LiveAccount, planId: string, name: string) {
  const user = await payableUser(fake, acct, name);
  const res = await call("/subscriptions", { key: acct.liveKey, body: { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS_SUCCEEDS) } });
  expect(res.status, res.text).toBe(201);
  return { user, sub: res.body.id as string };
}

/** What Stripe holds of a Tender payout: its transfers (by transfer group) and its payouts (by reference). */
export function sentForPayout(fake: FakeStripe, payoutId: string) {
  return {
    transfers: fake.count("transfers", (t) => t.transfer_group === payoutId || t.metadata?.tender_reference === payoutId),
    payouts: [...fake.payouts.values()].filter((p) => p.metadata?.tender_reference === payoutId).length,
  };
}

/** The Stripe PaymentIntents of a Tender reference (its metadata), by status. */
export const intentsOf = (fake: FakeStripe, reference?: string) =>
  [...fake.paymentIntents.values()].filter((intent) => reference === undefined || intent.metadata?.tender_reference === reference);

/**
 * The Idempotency-Keys the fake saw on each POST, by operation and the Tender object it was for
 * (its `metadata[tender_reference]`, or `tender_user` for a customer): a retry must send the same
 * key, so each set must hold one key, and never none.
 */
export function idempotencyKeysByObject(fake: FakeStripe): Map<string, Set<string | null>> {
  const keys = new Map<string, Set<string | null>>();
  for (const request of fake.requests) {
    if (request.method !== "POST" || !request.operation) continue;
    const metadata = request.params.metadata as Record<string, string> | undefined;
    const name = `${request.operation} ${metadata?.tender_reference ?? metadata?.tender_user ?? request.path}`;
    keys.set(name, (keys.get(name) ?? new Set()).add(request.idempotencyKey));
  }
  return keys;
}

/** Asserts every POST carried an Idempotency-Key, the same one for every try of one object. */
export function expectOneKeyPerObject(fake: FakeStripe, context = "") {
  for (const [name, keys] of idempotencyKeysByObject(fake)) {
    expect([...keys], `${context} ${name}`).toHaveLength(1);
    expect([...keys][0], `${context} ${name}`).not.toBeNull();
  }
}

export { BASE };
