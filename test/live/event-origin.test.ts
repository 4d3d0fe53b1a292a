// Issue 33, items 1, 2 and 6: a Stripe event settles a Tender object only if it comes from where
// Tender made that object (the Stripe account it was made through, the connected account it lives
// on or none, the key's mode, the Stripe id Tender recorded); a connection removed or replaced by
// another Stripe account's is retired, and its late events (a payout that fails after it was
// paid) are still verified and settled; the webhook route refuses what cannot verify before it
// reads the body or asks a shard; re-encryption reaches every row.
import { exports } from "cloudflare:workers";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import { useStripeClient } from "../../src/processor";
import { openSecrets, readConnection, reencryptConnections, sealedKeyIds } from "../../src/processor/connections";
import { env } from "../support/env";
import { call, expectError, fetchWith, signup, withEnv } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { changes, quiesce, snapshot } from "../support/db";
import { runJobs } from "../support/queue";
import type { FakeStripe } from "../support/fake-stripe";
import { newFakeStripe } from "../support/fake-stripe-env";
import {
  type Connected,
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  deliverStripeEvents,
  livePayout,
  newSecretKey,
  newSigningSecret,
  payableUser,
  skipStripeEvents,
} from "../support/live";

// Two Stripe platform accounts: the Worker's connector talks to the one whose key it holds.
const deliver = (url: string, init: RequestInit) => exports.default.fetch(url, init);
const fake = newFakeStripe({ deliver });
const other = newFakeStripe({ deliver });
const keysOfOther = new Set<string>();
const fakeOf = (input: RequestInfo | URL, init?: RequestInit): FakeStripe => {
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  const key = (headers.get("authorization") ?? "").replace(/^Bearer /, "");
  return keysOfOther.has(key) ? other : fake;
};
useStripeClient({ fetch: (input, init) => fakeOf(input, init).fetch(input, init), sleep: async () => {} });
afterAll(async () => {
  await quiesce();
  useStripeClient();
});

const sign = (payload: string, secret: string, timestamp = Math.floor(Date.now() / 1000)) =>
  Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret, timestamp, cryptoProvider: Stripe.createSubtleCryptoProvider() });
const post = (path: string, payload: string, signature?: string) =>
  call(path, { method: "POST", rawBody: payload, headers: { "content-type": "application/json", ...(signature ? { "stripe-signature": signature } : {}) } });
const pathOf = (connected: Connected) => new URL(connected.webhookUrl).pathname;
/** Delivers `event` signed with `secret` at the connection's URL. */
async function deliverSigned(connected: Connected, event: Record<string, unknown>, secret: string) {
  const payload = JSON.stringify(event);
  return post(pathOf(connected), payload, await sign(payload, secret));
}
const row = async <T,>(query: string, ...args: unknown[]) => (await env.DB.prepare(query).bind(...args).first<T>())!;
const eventTypes = async (acct: LiveAccount, objectId: string) =>
  ((await call(`/api/events?object_id=${objectId}&limit=100`, { key: acct.liveKey })).body.data as { type: string }[]).map((e) => e.type).reverse();

/** A live payout of `acct` sent to Stripe (pending there). */
async function sentPayout(acct: LiveAccount, through = fake) {
  const payee = await payableUser(through, acct);
  const res = await livePayout(acct, payee.id);
  expect(res.status, res.text).toBe(201);
  await runJobs({ kind: "settlePayout", payoutId: res.body.id });
  const stripePayout = [...through.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
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
  const { processor_reference: intent } = await row<{ processor_reference: string }>("SELECT processor_reference FROM payments WHERE id = ?", payment.id);
  return { payment, intent, subscriptionId: sub.body.id as string };
}

/** A live refund of a new payment, settled at Stripe (succeeded), and its Stripe refund. */
async function succeededRefund(acct: LiveAccount, connected: Connected) {
  const { payment } = await livePayment(acct);
  fake.inject({ kind: "refund_pending" });
  const res = await call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id, amount: 1000 } });
  expect(res.status, res.text).toBe(201);
  await runJobs({ kind: "settleRefund", refundId: res.body.id });
  const stripeRefund = [...fake.refunds.values()].find((r) => r.metadata?.tender_reference === res.body.id)!;
  fake.settleRefund(stripeRefund.id, "succeeded");
  await deliverStripeEvents(fake, connected);
  expect((await call(`/refunds/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("succeeded");
  return { payment, refundId: res.body.id as string, stripeRefund };
}

let a: LiveAccount;
let connectedA: Connected;
beforeAll(async () => {
  a = await signup("Origin A");
  connectedA = await connectStripe(a);
});

describe("an event settles only what was made where it comes from (item 1)", () => {
  it("a Connect-signed refund.updated failed from a connected account leaves a platform refund succeeded, and nothing refundable twice", async () => {
    const { payment, refundId, stripeRefund } = await succeededRefund(a, connectedA);
    // Any connected account of the platform can make a refund carrying Tender's reference.
    const { _account, _seq, ...sent } = stripeRefund;
    const forged = fake.emitForeign("refund.updated", { ...sent, status: "failed", failure_reason: "declined" }, fake.createConnectedAccount());
    skipStripeEvents(fake);
    const res = await deliverSigned(connectedA, forged, connectedA.connectWebhookSecret);
    expect(res.body).toEqual({ received: true, event: forged.id, outcome: "ignored" });
    expect((await call(`/refunds/${refundId}`, { key: a.liveKey })).body.status).toBe("succeeded");
    expect((await call(`/payments/${payment.id}`, { key: a.liveKey })).body).toMatchObject({ amount_refunded: 1000 });
  });

  it("a platform refund event naming another Stripe refund than the one Tender recorded changes nothing", async () => {
    const { refundId, stripeRefund } = await succeededRefund(a, connectedA);
    expect((await row<{ processor_object: string }>("SELECT processor_object FROM refunds WHERE id = ?", refundId)).processor_object).toBe(stripeRefund.id);
    const { _account, _seq, ...sent } = stripeRefund;
    const forged = fake.emitForeign("refund.updated", { ...sent, id: "re_someone_else_s_1", status: "failed", failure_reason: "declined" });
    skipStripeEvents(fake);
    const res = await deliverSigned(connectedA, forged, connectedA.webhookSecret);
    expect(res.body.outcome).toBe("ignored");
    expect((await call(`/refunds/${refundId}`, { key: a.liveKey })).body.status).toBe("succeeded");
  });

  it("a test-mode event about a refund a live key made changes nothing", async () => {
    const { refundId, stripeRefund } = await succeededRefund(a, connectedA);
    const { _account, _seq, ...sent } = stripeRefund;
    fake.livemode = false;
    const testMode = fake.emitForeign("refund.updated", { ...sent, status: "failed", failure_reason: "declined" });
    fake.livemode = true;
    skipStripeEvents(fake);
    expect(testMode.livemode).toBe(false);
    const res = await deliverSigned(connectedA, testMode, connectedA.webhookSecret);
    expect(res.body.outcome).toBe("ignored");
    expect((await call(`/refunds/${refundId}`, { key: a.liveKey })).body.status).toBe("succeeded");
  });

  it("a dispute event from a connected account about a platform charge emits nothing", async () => {
    const { payment, intent } = await livePayment(a);
    const opened = fake.openDispute(intent, "fraudulent");
    skipStripeEvents(fake);
    const { data } = opened as { data: { object: Record<string, unknown> } };
    const forged = fake.emitForeign("charge.dispute.created", data.object, fake.createConnectedAccount());
    skipStripeEvents(fake);
    const res = await deliverSigned(connectedA, forged, connectedA.connectWebhookSecret);
    expect(res.body.outcome).toBe("ignored");
    expect(await eventTypes(a, payment.id)).not.toContain("payment.disputed");
    // The platform's own event about it is applied.
    const own = await deliverSigned(connectedA, opened, connectedA.webhookSecret);
    expect(own.body.outcome).toBe("applied");
    expect(await eventTypes(a, payment.id)).toContain("payment.disputed");
  });

  it("a platform-endpoint payout event, with no account, never settles a Connect payout", async () => {
    const { payoutId, stripePayoutId } = await sentPayout(a);
    const { _account, _seq, ...sent } = fake.payouts.get(stripePayoutId)!;
    const platform = fake.emitForeign("payout.paid", { ...sent, status: "paid" });
    skipStripeEvents(fake);
    expect(platform.account).toBeUndefined();
    const res = await deliverSigned(connectedA, platform, connectedA.webhookSecret);
    expect(res.body.outcome).toBe("ignored");
    expect((await row<{ status: string }>("SELECT status FROM payouts WHERE id = ?", payoutId)).status).toBe("pending");
    // Stripe's own, from the recipient's account, is applied; the payout's Stripe id was recorded.
    fake.settlePayout(stripePayoutId, "paid");
    await deliverStripeEvents(fake, connectedA);
    expect(await row("SELECT status, processor_object FROM payouts WHERE id = ?", payoutId)).toEqual({ status: "paid", processor_object: stripePayoutId });
  });

  it("an event for a refund whose Stripe id Tender has not recorded yet records it; another id is refused after", async () => {
    const { payment } = await livePayment(a);
    fake.inject({ kind: "refund_pending" });
    const res = await call("/refunds", { key: a.liveKey, body: { payment_id: payment.id, amount: 500 } });
    await runJobs({ kind: "settleRefund", refundId: res.body.id });
    const stripeRefund = [...fake.refunds.values()].find((r) => r.metadata?.tender_reference === res.body.id)!;
    // As if the job's answer had been lost: Tender does not know Stripe's id.
    await env.DB.prepare("UPDATE refunds SET processor_object = NULL WHERE id = ?").bind(res.body.id).run();
    fake.settleRefund(stripeRefund.id, "succeeded");
    await deliverStripeEvents(fake, connectedA);
    expect(await row("SELECT status, processor_object FROM refunds WHERE id = ?", res.body.id)).toEqual({ status: "succeeded", processor_object: stripeRefund.id });
  });
});

describe("a retired connection still settles what was made through it (item 2)", () => {
  it("after DELETE /api/processor, a paid payout's late payout.failed is verified, its transfer reversed, the payout failed; GET answers 404 and no new money moves", async () => {
    const acct = await signup("Retire by delete");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId, payee } = await sentPayout(acct);
    fake.settlePayout(stripePayoutId, "paid");
    await deliverStripeEvents(fake, connected);
    expect((await row<{ status: string }>("SELECT status FROM payouts WHERE id = ?", payoutId)).status).toBe("paid");

    const removed = await call("/api/processor", { method: "DELETE", key: acct.liveKey });
    expect(removed.status, removed.text).toBe(200);
    expectError(await call("/api/processor", { key: acct.liveKey }), 404, "not_found_error", "resource_missing");
    // The retired secrets are kept sealed, never in clear.
    const retired = await row<Record<string, string>>("SELECT * FROM retired_processor_connections WHERE account_id = ?", acct.id);
    expect(retired.processor_account).toBe(connected.processorAccount);
    for (const secret of [connected.secretKey, connected.webhookSecret, connected.connectWebhookSecret]) expect(JSON.stringify(retired)).not.toContain(secret);

    const platformBefore = fake.balance(fake.platformAccount, "usd");
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const [answer] = await deliverStripeEvents(fake, connected);
    expect(answer.status).toBe(200);
    expect((await row<{ status: string }>("SELECT status FROM payouts WHERE id = ?", payoutId)).status).toBe("failed");
    const [transfer] = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === payoutId);
    expect(transfer).toMatchObject({ reversed: true, amount_reversed: 2500 });
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
    expect(fake.balance(fake.platformAccount, "usd")).toBe(platformBefore + 2500);

    // Never new money: a live payout answers livemode_unavailable.
    const again = await call("/payout", { key: acct.liveKey, body: { recipient_id: payee.id, amount: 100, currency: "usd", ...card(STRIPE_CARDS.succeeds) } });
    expectError(again, 400, "invalid_request_error", "livemode_unavailable");
    // A bad signature is still a 400.
    const payload = JSON.stringify(fake.events.at(-1));
    expectError(await post(pathOf(connected), payload, await sign(payload, newSigningSecret())), 400, "invalid_request_error", "signature_mismatch");
  });

  it("after a PUT with another Stripe account's key, the old account's late payout.failed and dispute still settle, through the old key; the new account's secret settles none of them", async () => {
    const acct = await signup("Retire by swap");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId } = await sentPayout(acct);
    fake.settlePayout(stripePayoutId, "paid");
    await deliverStripeEvents(fake, connected);
    const { payment, intent } = await livePayment(acct);
    // The subscription is canceled, so the connection may be replaced.
    const subs = (await call(`/subscriptions?limit=100`, { key: acct.liveKey })).body.data as { id: string }[];
    for (const sub of subs) expect((await call(`/subscriptions/${sub.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);

    const otherKey = newSecretKey();
    keysOfOther.add(otherKey);
    const swapped = await connectStripe(acct, { secretKey: otherKey });
    expect(swapped.processorAccount).toBe(other.platformAccount);
    expect(swapped.processorAccount).not.toBe(connected.processorAccount);

    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const failed = fake.events.at(-1)!;
    // Signed with the new connection's secrets: not from where the payout was made.
    const wrong = await deliverSigned(connected, { ...failed, id: `${failed.id}_forged` }, swapped.connectWebhookSecret);
    expect(wrong.body.outcome).toBe("ignored");
    expect((await row<{ status: string }>("SELECT status FROM payouts WHERE id = ?", payoutId)).status).toBe("paid");
    const dispute = fake.openDispute(intent, "fraudulent");
    expect((await deliverSigned(connected, { ...dispute, id: `${dispute.id}_forged` }, swapped.webhookSecret)).body.outcome).toBe("ignored");
    skipStripeEvents(fake);

    // Signed as Stripe signs them, with the old connection's secrets: applied.
    const late = await deliverSigned(connected, failed, connected.connectWebhookSecret);
    expect(late.status, late.text).toBe(200);
    expect(late.body.outcome).toBe("applied");
    expect((await row<{ status: string }>("SELECT status FROM payouts WHERE id = ?", payoutId)).status).toBe("failed");
    const [transfer] = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === payoutId);
    expect(transfer).toMatchObject({ reversed: true, amount_reversed: 2500 });
    const disputed = await deliverSigned(connected, dispute, connected.webhookSecret);
    expect(disputed.body.outcome).toBe("applied");
    expect(await eventTypes(acct, payment.id)).toContain("payment.disputed");
    // The live connection is the new one.
    expect((await call("/api/processor", { key: acct.liveKey })).body.processor_account).toBe(other.platformAccount);
  });
});

describe("a retired connection that cannot be opened (item 2)", () => {
  it("never stops another retired one verifying, and a body none verifies then answers 500 (Stripe retries), not 400", async () => {
    const acct = await signup("Retired lost");
    const connected = await connectStripe(acct);
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    // Tried first (its Stripe account sorts first), and sealed under a key the ring no longer holds.
    const lost = `lost:${"A".repeat(16)}:${"B".repeat(32)}`;
    await env.DB.prepare(
      "INSERT INTO retired_processor_connections (account_id, livemode, provider, processor_account, secret_key_encrypted, secret_key_last4, webhook_secret_encrypted, created_at, updated_at, retired_at) VALUES (?, 1, 'stripe', 'acct_0000lost', ?, 'lost', ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z')",
    ).bind(acct.id, lost, lost).run();
    const event = { id: "evt_lost_1", object: "event", type: "customer.created", livemode: true, created: 1, data: { object: { id: "cus_1", object: "customer" } } };
    const ok = await deliverSigned(connected, event, connected.webhookSecret);
    expect(ok.status, ok.text).toBe(200);
    const unknown = await deliverSigned(connected, { ...event, id: "evt_lost_2" }, newSigningSecret());
    expect(unknown.status, unknown.text).toBe(500);
  });
});

describe("the webhook route bounds its work; re-encryption reaches every row (item 6)", () => {
  it("a Stripe-Signature that cannot verify is refused before any shard is asked", async () => {
    const payload = JSON.stringify({ id: "evt_x", object: "event", type: "payout.paid", data: { object: {} } });
    const noDatabase = new Proxy({}, { get: () => { throw new Error("a database was asked"); } }) as D1Database;
    const cases: [string | undefined, string][] = [
      [undefined, "missing_signature"],
      ["t=abc,v1=00", "malformed_signature"],
      [`t=${Math.floor(Date.now() / 1000)}`, "malformed_signature"],
      [await sign(payload, connectedA.webhookSecret, Math.floor(Date.now() / 1000) - 3600), "timestamp_outside_tolerance"],
    ];
    for (const [signature, code] of cases) {
      const res = await fetchWith({ DB_0: noDatabase, DB_1: noDatabase, DB: noDatabase } as never, pathOf(connectedA), {
        method: "POST",
        body: payload,
        headers: { "content-type": "application/json", ...(signature ? { "stripe-signature": signature } : {}) },
      });
      expect(res.status, `${code}: ${res.text}`).toBe(400);
      expect(res.body.error.code).toBe(code);
    }
  });

  it("a body over 256 KiB answers 413 and changes nothing", async () => {
    const payload = JSON.stringify({ id: "evt_big", object: "event", type: "payout.paid", padding: "x".repeat(300 * 1024), data: { object: {} } });
    const before = await snapshot();
    const res = await post(pathOf(connectedA), payload, await sign(payload, connectedA.webhookSecret));
    expectError(res, 413, "invalid_request_error", "body_too_large");
    expect(changes(before, await snapshot())).toEqual({});
  });

  it("rows that cannot be opened never stop the rest: every row, live and retired, is reached in one run", async () => {
    const key = (text: string) => btoa(text.padEnd(32, "!").slice(0, 32));
    const development = `development:${btoa("tender-development-only-key-0000")}`;
    // Sealed with a key no ring holds any more: they sort first.
    const lost = `lost:${"A".repeat(16)}:${"B".repeat(32)}`;
    const broken: string[] = [];
    for (const name of ["Lost 1", "Lost 2", "Lost 3"]) {
      const acct = await signup(name);
      broken.push(acct.id);
      await env.DB.prepare(
        "INSERT INTO processor_connections (account_id, livemode, provider, processor_account, secret_key_encrypted, secret_key_last4, webhook_secret_encrypted, created_at, updated_at) VALUES (?, 1, 'stripe', 'acct_lost', ?, 'lost', ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
      ).bind(acct.id, lost, lost).run();
    }
    const fine = await signup("Rotates");
    const sent = await connectStripe(fine);
    // A retired connection of it too: replaced by another Stripe account's (connecting the same
    // one again would un-retire it).
    const otherKey = newSecretKey();
    keysOfOther.add(otherKey);
    const again = await connectStripe(fine, { secretKey: otherKey });
    const rotated = withEnv({ PROCESSOR_ENCRYPTION_KEY: `k2027:${key("rotation key 2027")},${development}` });
    const result = await reencryptConnections(rotated, Date.now(), 2);
    expect(result.skipped).toBeGreaterThanOrEqual(broken.length);
    const live = (await readConnection(createDb(env.DB), fine.id))!;
    expect(sealedKeyIds(live)).toEqual(["k2027", "k2027", "k2027"]);
    expect((await openSecrets(rotated, live)).secretKey).toBe(again.secretKey);
    const retired = await row<{ account_id: string; secret_key_encrypted: string; webhook_secret_encrypted: string; connect_webhook_secret_encrypted: string }>(
      "SELECT account_id, secret_key_encrypted, webhook_secret_encrypted, connect_webhook_secret_encrypted FROM retired_processor_connections WHERE account_id = ?",
      fine.id,
    );
    const retiredRow = { accountId: retired.account_id, secretKeyEncrypted: retired.secret_key_encrypted, webhookSecretEncrypted: retired.webhook_secret_encrypted, connectWebhookSecretEncrypted: retired.connect_webhook_secret_encrypted };
    expect(sealedKeyIds(retiredRow)).toEqual(["k2027", "k2027", "k2027"]);
    expect(await openSecrets(rotated, retiredRow)).toEqual({ secretKey: sent.secretKey, webhookSecret: sent.webhookSecret, connectWebhookSecret: sent.connectWebhookSecret });
    // Back to the development key for the rest of the file; the lost rows are left as they were.
    await reencryptConnections(withEnv({ PROCESSOR_ENCRYPTION_KEY: `${development},k2027:${key("rotation key 2027")}` }), Date.now(), 2);
    for (const id of broken) await env.DB.prepare("DELETE FROM processor_connections WHERE account_id = ?").bind(id).run();
  });
});
