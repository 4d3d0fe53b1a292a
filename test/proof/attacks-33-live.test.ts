// Reviewer R1's attacks on issue 33 items 1, 2 and 6 as merged (96703e6): Stripe events from every
// wrong place, retired connections, the webhook route's bounds, the triggers of migration 0020,
// an account move with retired connections. Each test states what must hold; one that failed on
// the merged code names the defect it proves.
import { exports } from "cloudflare:workers";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useStripeClient } from "../../src/processor";
import { openSecrets, reencryptConnections, sealSecrets } from "../../src/processor/connections";
import { env, envOf, OTHER_SHARD, TEST_SHARD } from "../support/env";
import { call, expectError, fetchWith, signup, withEnv } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { quiesce } from "../support/db";
import { runJobs } from "../support/queue";
import type { FakeStripe } from "../support/fake-stripe";
import { newFakeStripe } from "../support/fake-stripe-env";
import { type Connected, type LiveAccount, STRIPE_CARDS, connectStripe, deliverStripeEvents, livePayout, newSecretKey, newSigningSecret, payableUser, skipStripeEvents } from "../support/live";

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
/** Called before each Stripe request the Worker makes (a test's interleaving), with its URL. */
let beforeStripe: ((url: string) => Promise<void>) | null = null;
useStripeClient({
  fetch: async (input, init) => {
    if (beforeStripe) await beforeStripe(input instanceof Request ? input.url : String(input));
    return fakeOf(input, init).fetch(input, init);
  },
  sleep: async () => {},
});
afterAll(async () => {
  await quiesce();
  useStripeClient();
});

const sign = (payload: string, secret: string, timestamp = Math.floor(Date.now() / 1000)) =>
  Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret, timestamp, cryptoProvider: Stripe.createSubtleCryptoProvider() });
const post = (path: string, payload: string, signature?: string) =>
  call(path, { method: "POST", rawBody: payload, headers: { "content-type": "application/json", ...(signature ? { "stripe-signature": signature } : {}) } });
const pathOf = (connected: Connected) => new URL(connected.webhookUrl).pathname;
async function deliverSigned(connected: Connected, event: Record<string, unknown>, secret: string) {
  const payload = JSON.stringify(event);
  return post(pathOf(connected), payload, await sign(payload, secret));
}
const row = async <T,>(query: string, ...args: unknown[]) => (await env.DB.prepare(query).bind(...args).first<T>())!;
const payoutStatus = async (id: string, db = env.DB) => (await db.prepare("SELECT status FROM payouts WHERE id = ?").bind(id).first<{ status: string }>())?.status;
const eventTypes = async (acct: LiveAccount, objectId: string) =>
  ((await call(`/api/events?object_id=${objectId}&limit=100`, { key: acct.liveKey })).body.data as { type: string }[]).map((e) => e.type);
const transfersOf = (through: FakeStripe, payoutId: string) => [...through.transfers.values()].filter((t) => t.metadata?.tender_reference === payoutId);

/** A live payout of `acct` sent through `through` and paid there; its Stripe payout. */
async function paidPayout(acct: LiveAccount, connected: Connected, through = fake) {
  const payee = await payableUser(through, acct);
  const res = await livePayout(acct, payee.id);
  expect(res.status, res.text).toBe(201);
  await runJobs({ kind: "settlePayout", payoutId: res.body.id });
  const stripePayout = [...through.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
  through.settlePayout(stripePayout.id, "paid");
  await deliverStripeEvents(through, connected);
  expect(await payoutStatus(res.body.id)).toBe("paid");
  return { payoutId: res.body.id as string, stripePayoutId: stripePayout.id as string, payee };
}

/** Connects `acct` to the other Stripe platform (a PUT with another Stripe account's key). */
async function swapToOther(acct: LiveAccount) {
  const otherKey = newSecretKey();
  keysOfOther.add(otherKey);
  const swapped = await connectStripe(acct, { secretKey: otherKey });
  expect(swapped.processorAccount).toBe(other.platformAccount);
  return swapped;
}

const LOST = `lost:${"A".repeat(16)}:${"B".repeat(32)}`;

describe("events from every wrong source (item 1)", () => {
  it("held: a payout.failed from another connected account of the platform leaves the payout paid and its transfer in place", async () => {
    const acct = await signup("R1 wrong recipient");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId } = await paidPayout(acct, connected);
    const { _account, _seq, ...sent } = fake.payouts.get(stripePayoutId)!;
    const forged = fake.emitForeign("payout.failed", { ...sent, status: "failed", failure_code: "account_closed" }, fake.createConnectedAccount());
    skipStripeEvents(fake);
    const res = await deliverSigned(connected, forged, connected.connectWebhookSecret);
    expect(res.body.outcome).toBe("ignored");
    expect(await payoutStatus(payoutId)).toBe("paid");
    expect(transfersOf(fake, payoutId)[0]).toMatchObject({ reversed: false });
  });

  it("a payout whose Stripe id Tender has not recorded (the job's reply lost) is not failed by the recipient's own payout carrying its reference; Stripe's own settles it once recorded (was: failed, its transfer reversed while Stripe's payout stood)", async () => {
    const acct = await signup("R1 forged by the payee");
    const connected = await connectStripe(acct);
    const payee = await payableUser(fake, acct);
    const res = await livePayout(acct, payee.id);
    expect(res.status, res.text).toBe(201);
    const payoutId = res.body.id as string;
    await runJobs({ kind: "settlePayout", payoutId });
    const real = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === payoutId)!;
    expect(real.status).toBe("pending");
    // The job's reply was lost: Tender does not know Stripe's payout id.
    await env.DB.prepare("UPDATE payouts SET processor_object = NULL WHERE id = ?").bind(payoutId).run();
    skipStripeEvents(fake);
    // The recipient's connected account makes a payout of its own, with Tender's reference, that fails.
    const { _account, _seq, ...sent } = real;
    const forged = fake.emitForeign("payout.failed", { ...sent, id: "po_r1_payee_own", amount: 1, status: "failed", failure_code: "account_closed" }, payee.stripeAccount);
    skipStripeEvents(fake);
    const answer = await deliverSigned(connected, forged, connected.connectWebhookSecret);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.outcome).toBe("ignored");
    expect(await payoutStatus(payoutId)).toBe("pending");
    expect(transfersOf(fake, payoutId)[0]).toMatchObject({ reversed: false });
    // The same amount to another card of its own: not Tender's payout either.
    const elsewhere = fake.emitForeign("payout.failed", { ...sent, id: "po_r1_payee_own_2", destination: "card_r1_payee_other", status: "failed", failure_code: "account_closed" }, payee.stripeAccount);
    skipStripeEvents(fake);
    expect((await deliverSigned(connected, elsewhere, connected.connectWebhookSecret)).body.outcome).toBe("ignored");
    expect(await payoutStatus(payoutId)).toBe("pending");
    // Stripe's own event about the real payout, once the id is known again, settles it.
    await env.DB.prepare("UPDATE payouts SET processor_object = ? WHERE id = ?").bind(real.id, payoutId).run();
    fake.settlePayout(real.id, "paid");
    await deliverStripeEvents(fake, connected);
    expect(await payoutStatus(payoutId)).toBe("paid");
  });

  it("held: a retired connection's secret never verifies at another Tender account's URL", async () => {
    const x = await signup("R1 retired X");
    const connectedX = await connectStripe(x);
    expect((await call("/api/processor", { method: "DELETE", key: x.liveKey })).status).toBe(200);
    const y = await signup("R1 account Y");
    const connectedY = await connectStripe(y);
    const { payoutId, stripePayoutId } = await paidPayout(y, connectedY);
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const failed = fake.events.at(-1)!;
    skipStripeEvents(fake);
    const res = await deliverSigned(connectedY, failed, connectedX.connectWebhookSecret);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("signature_mismatch");
    expect(await payoutStatus(payoutId)).toBe("paid");
  });

  it("a payee connected to both platforms: its payout.failed reaching the retired platform's Connect endpoint first is ignored, not recorded, and the live one's delivery of the same event applies (was answered duplicate: the transfer never reversed)", async () => {
    const acct = await signup("R1 old secret new object");
    const connected = await connectStripe(acct);
    const swapped = await swapToOther(acct);
    const { payoutId, stripePayoutId, payee } = await paidPayout(acct, swapped, other);
    other.settlePayout(stripePayoutId, "failed", "account_closed");
    const failed = other.events.at(-1)!;
    skipStripeEvents(other);
    // Stripe sends a connected account's event to the Connect endpoint of every platform it is
    // connected to, under one event id: the retired platform's endpoint (same URL) may be first.
    const early = await deliverSigned(connected, failed, connected.connectWebhookSecret);
    expect(early.body.outcome).toBe("ignored");
    expect(await payoutStatus(payoutId)).toBe("paid");
    // Stripe's delivery signed for the live connection settles it.
    const own = await deliverSigned(swapped, failed, swapped.connectWebhookSecret);
    expect(own.body.outcome).toBe("applied");
    expect(await payoutStatus(payoutId)).toBe("failed");
    expect(transfersOf(other, payoutId)[0]).toMatchObject({ reversed: true, amount_reversed: 2500 });
    expect(other.balance(payee.stripeAccount, "usd")).toBe(0);
  });

  it("held: two deliveries of one payout.failed at once, and again out of order with payout.paid: failed once, one reversal, one payout.failed event", async () => {
    const acct = await signup("R1 twice at once");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId, payee } = await paidPayout(acct, connected);
    const paidEvent = fake.events.filter((e) => (e.data as any).object.id === stripePayoutId && e.type === "payout.paid").at(-1)!;
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const failed = fake.events.at(-1)!;
    skipStripeEvents(fake);
    const [one, two] = await Promise.all([
      deliverSigned(connected, failed, connected.connectWebhookSecret),
      deliverSigned(connected, failed, connected.connectWebhookSecret),
    ]);
    expect([one.status, two.status]).toEqual([200, 200]);
    expect([one.body.outcome, two.body.outcome].sort()).toEqual(["applied", "duplicate"]);
    expect((await deliverSigned(connected, paidEvent, connected.connectWebhookSecret)).body.outcome).toBe("duplicate");
    const replayed = { ...paidEvent, id: `${paidEvent.id}_late` };
    expect((await deliverSigned(connected, replayed, connected.connectWebhookSecret)).body.outcome).toBe("unchanged");
    expect(await payoutStatus(payoutId)).toBe("failed");
    const transfers = transfersOf(fake, payoutId);
    expect(transfers).toHaveLength(1);
    expect(transfers[0]).toMatchObject({ reversed: true, amount_reversed: 2500 });
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
    expect((await eventTypes(acct, payoutId)).filter((t) => t === "payout.failed")).toHaveLength(1);
  });
});

describe("retired connections (item 2)", () => {
  it("a live connection that cannot be opened never stops a retired one verifying and settling a late event (was 500 forever: Stripe gives up)", async () => {
    const acct = await signup("R1 live unopenable");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId, payee } = await paidPayout(acct, connected);
    await swapToOther(acct);
    // The live connection's values were sealed under a key the ring no longer holds.
    await env.DB.prepare("UPDATE processor_connections SET secret_key_encrypted = ?, webhook_secret_encrypted = ?, connect_webhook_secret_encrypted = ? WHERE account_id = ?")
      .bind(LOST, LOST, LOST, acct.id)
      .run();
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const failed = fake.events.at(-1)!;
    skipStripeEvents(fake);
    const res = await deliverSigned(connected, failed, connected.connectWebhookSecret);
    expect(res.status, res.text).toBe(200);
    expect(res.body.outcome).toBe("applied");
    expect(await payoutStatus(payoutId)).toBe("failed");
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
    // A body no connection verifies, while one cannot be opened: 500, so Stripe sends it again.
    const unknown = { id: "evt_r1_unknown", object: "event", type: "customer.created", livemode: true, created: 1, data: { object: { id: "cus_1", object: "customer" } } };
    expect((await deliverSigned(connected, unknown, newSigningSecret())).status).toBe(500);
  });

  it("held: DELETE, PUT back the same Stripe account, DELETE again: one retired row per Stripe account, and a payout made before the first DELETE still settles", async () => {
    const acct = await signup("R1 back again");
    const first = await connectStripe(acct);
    const { payoutId, stripePayoutId, payee } = await paidPayout(acct, first);
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    const again = await connectStripe(acct);
    expect(again.processorAccount).toBe(first.processorAccount);
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    const { n } = await row<{ n: number }>("SELECT count(*) AS n FROM retired_processor_connections WHERE account_id = ?", acct.id);
    expect(n).toBe(1);
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    skipStripeEvents(fake);
    const failed = fake.events.at(-1)!;
    const res = await deliverSigned(again, failed, again.connectWebhookSecret);
    expect(res.body.outcome).toBe("applied");
    expect(await payoutStatus(payoutId)).toBe("failed");
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
  });

  it("connecting a retired Stripe account again un-retires it: its old (perhaps leaked) webhook secrets stop verifying, the new ones settle what it made (was: the old secrets verified forever)", async () => {
    const acct = await signup("R1 un-retire");
    const first = await connectStripe(acct);
    const { payoutId, stripePayoutId } = await paidPayout(acct, first);
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    // Reconnected with new endpoint secrets (the old ones may be why it was disconnected).
    const again = await connectStripe(acct);
    expect(again.processorAccount).toBe(first.processorAccount);
    expect((await row<{ n: number }>("SELECT count(*) AS n FROM retired_processor_connections WHERE account_id = ?", acct.id)).n).toBe(0);
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    const failed = fake.events.at(-1)!;
    skipStripeEvents(fake);
    const old = await deliverSigned(first, failed, first.connectWebhookSecret);
    expect(old.status, old.text).toBe(400);
    expect(old.body.error.code).toBe("signature_mismatch");
    expect(await payoutStatus(payoutId)).toBe("paid");
    expect((await deliverSigned(again, failed, again.connectWebhookSecret)).body.outcome).toBe("applied");
    expect(await payoutStatus(payoutId)).toBe("failed");
  });

  it("a PUT of the same Stripe account without connect_webhook_secret, while a payout made through it may still fail, answers 400 and keeps the secret that verifies its late payout.failed (was 200: the event then answered 400, Stripe gave up)", async () => {
    const acct = await signup("R1 connect secret dropped");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId, payee } = await paidPayout(acct, connected);
    const rolled = await call("/api/processor", { method: "PUT", key: acct.liveKey, body: { provider: "stripe", secret_key: newSecretKey(), webhook_secret: connected.webhookSecret } });
    expectError(rolled, 400, "invalid_request_error", "connect_webhook_secret_required");
    expect(rolled.body.error.param).toBe("connect_webhook_secret");
    // After a DELETE too (connecting it again would drop the retired secret).
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    const back = await call("/api/processor", { method: "PUT", key: acct.liveKey, body: { provider: "stripe", secret_key: newSecretKey(), webhook_secret: connected.webhookSecret } });
    expectError(back, 400, "invalid_request_error", "connect_webhook_secret_required");
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    skipStripeEvents(fake);
    const res = await deliverSigned(connected, fake.events.at(-1)!, connected.connectWebhookSecret);
    expect(res.status, res.text).toBe(200);
    expect(res.body.outcome).toBe("applied");
    expect(await payoutStatus(payoutId)).toBe("failed");
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
    // With the secret given, or for an account that never paid out, the PUT is fine.
    expect((await call("/api/processor", { method: "PUT", key: acct.liveKey, body: { provider: "stripe", secret_key: newSecretKey(), webhook_secret: connected.webhookSecret, connect_webhook_secret: connected.connectWebhookSecret } })).status).toBe(200);
    const fresh = await signup("R1 never paid out");
    expect((await call("/api/processor", { method: "PUT", key: fresh.liveKey, body: { provider: "stripe", secret_key: newSecretKey(), webhook_secret: newSigningSecret() } })).status).toBe(200);
  });

  it("held: an account moved with a retired connection settles its late payout.failed on the new shard, through the retired key", { timeout: 60_000 }, async () => {
    const acct = await signup("R1 moved retired");
    const connected = await connectStripe(acct);
    const { payoutId, stripePayoutId, payee } = await paidPayout(acct, connected);
    await swapToOther(acct);
    const home = Number((await call("/api/processor", { key: acct.liveKey })).headers.get("tender-shard") ?? TEST_SHARD);
    const to = home === TEST_SHARD ? OTHER_SHARD : TEST_SHARD;
    const moved = await call(`/api/accounts/${acct.id}/move`, { body: { to_shard: to, drain_seconds: 0 } });
    expect(moved.status, moved.text).toBe(200);
    const proof = (moved.body.tables as { table: string; rows: number }[]).find((t) => t.table === "retired_processor_connections")!;
    expect(proof.rows).toBe(1);
    const copied = await envOf(to).DB.prepare("SELECT processor_account FROM payouts WHERE id = ?").bind(payoutId).first<{ processor_account: string }>();
    expect(copied?.processor_account).toBe(connected.processorAccount);
    fake.settlePayout(stripePayoutId, "failed", "account_closed");
    skipStripeEvents(fake);
    const res = await deliverSigned(connected, fake.events.at(-1)!, connected.connectWebhookSecret);
    expect(res.status, res.text).toBe(200);
    expect(res.body.outcome).toBe("applied");
    expect(await payoutStatus(payoutId, envOf(to).DB)).toBe("failed");
    expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
  });
});

describe("a disconnect or a swap committing while an event is applied (item 2)", () => {
  for (const change of ["DELETE", "PUT another Stripe account"] as const) {
    it(`held: ${change} commits while a late payout.failed is reversing its transfer: the event still applies, through the retired key`, async () => {
      const acct = await signup(`R1 race ${change}`);
      const connected = await connectStripe(acct);
      const { payoutId, stripePayoutId, payee } = await paidPayout(acct, connected);
      fake.settlePayout(stripePayoutId, "failed", "account_closed");
      const failed = fake.events.at(-1)!;
      skipStripeEvents(fake);
      let changed: number | undefined;
      beforeStripe = async (url) => {
        if (!url.includes("/reversals") || changed !== undefined) return;
        if (change === "DELETE") changed = (await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status;
        else {
          const otherKey = newSecretKey();
          keysOfOther.add(otherKey);
          changed = (await call("/api/processor", { method: "PUT", key: acct.liveKey, body: { provider: "stripe", secret_key: otherKey, webhook_secret: newSigningSecret(), connect_webhook_secret: newSigningSecret() } })).status;
        }
      };
      try {
        const res = await deliverSigned(connected, failed, connected.connectWebhookSecret);
        expect(changed).toBe(200);
        expect(res.status, res.text).toBe(200);
        expect(res.body.outcome).toBe("applied");
      } finally {
        beforeStripe = null;
      }
      expect(await payoutStatus(payoutId)).toBe("failed");
      expect(transfersOf(fake, payoutId)[0]).toMatchObject({ reversed: true, amount_reversed: 2500 });
      expect(fake.balance(payee.stripeAccount, "usd")).toBe(0);
      // Delivered again (Stripe's retry): a duplicate, nothing reversed twice.
      expect((await deliverSigned(connected, failed, connected.connectWebhookSecret)).body.outcome).toBe("duplicate");
    });
  }
});

describe("the webhook route's bounds (item 6)", () => {
  const noDatabase = new Proxy({}, { get: () => { throw new Error("a database was asked"); } }) as D1Database;
  const refusedWithoutDatabase = async (path: string, signature: string, body = "{}") =>
    fetchWith({ DB_0: noDatabase, DB_1: noDatabase, DB: noDatabase } as never, path, { method: "POST", body, headers: { "content-type": "application/json", "stripe-signature": signature } });

  it("held: header tricks (two t=, a very long header, short or upper-case v1, no v1) are refused before any database is asked", async () => {
    const now = Math.floor(Date.now() / 1000);
    const hex = "a".repeat(64);
    const path = "/processor-webhooks/stripe/account_r1_tricks";
    for (const signature of [
      `t=${now},t=${now},v1=${hex}`,
      `t=${now},${Array.from({ length: 70 }, () => `v1=${hex}`).join(",")}`,
      `t=${now},v1=${"a".repeat(63)}`,
      `t=${now},v1=${"A".repeat(64)}`,
      `t=${now},v0=${hex}`,
      `t=${now}${" ".repeat(5000)},v1=${hex}`,
      `t=-${now},v1=${hex}`,
    ]) {
      const res = await refusedWithoutDatabase(path, signature);
      expect(res.status, `${signature.slice(0, 80)}: ${res.text}`).toBe(400);
      expect(res.body.error.code).toBe("malformed_signature");
    }
  });

  it("held: a streamed body over 256 KiB without a Content-Length answers 413", async () => {
    const acct = await signup("R1 streamed");
    const connected = await connectStripe(acct);
    const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ >= 6) return controller.close();
        controller.enqueue(chunk);
      },
    });
    const signature = `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}`;
    const res = await exports.default.fetch(new Request(`https://tender.test${pathOf(connected)}`, { method: "POST", body, headers: { "stripe-signature": signature }, duplex: "half" } as RequestInit));
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe("body_too_large");
  });

  it("held: a signed body that is not JSON, or under another content type, answers 400 and changes nothing", async () => {
    const acct = await signup("R1 not json");
    const connected = await connectStripe(acct);
    const res = await call(pathOf(connected), { method: "POST", rawBody: "not json", headers: { "content-type": "text/plain", "stripe-signature": await sign("not json", connected.webhookSecret) } });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe("invalid_payload");
  });
});

describe("re-encryption with rows that cannot be opened (item 6)", () => {
  it("held: one account's retired connections, lost ones between good ones, one row a page: every good row is sealed again, the lost ones reported", async () => {
    const acct = await signup("R1 rotation");
    await connectStripe(acct);
    const secrets = { secretKey: newSecretKey(), webhookSecret: newSigningSecret(), connectWebhookSecret: newSigningSecret() };
    const sealed = await sealSecrets(env, acct.id, secrets);
    const insert = (processorAccount: string, values: { secretKeyEncrypted: string; webhookSecretEncrypted: string; connectWebhookSecretEncrypted: string | null }) =>
      env.DB.prepare(
        "INSERT INTO retired_processor_connections (account_id, livemode, provider, processor_account, secret_key_encrypted, secret_key_last4, webhook_secret_encrypted, connect_webhook_secret_encrypted, created_at, updated_at, retired_at) VALUES (?, 1, 'stripe', ?, ?, 'x', ?, ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z')",
      ).bind(acct.id, processorAccount, values.secretKeyEncrypted, values.webhookSecretEncrypted, values.connectWebhookSecretEncrypted).run();
    const lost = { secretKeyEncrypted: LOST, webhookSecretEncrypted: LOST, connectWebhookSecretEncrypted: null };
    // Only the Connect secret lost: the row cannot be opened whole.
    const partly = { ...sealed, connectWebhookSecretEncrypted: LOST };
    await insert("acct_r1_a", lost);
    await insert("acct_r1_b", sealed);
    await insert("acct_r1_c", partly);
    await insert("acct_r1_d", sealed);
    await insert("acct_r1_e", lost);
    await insert("acct_r1_f", sealed);
    const key = (text: string) => btoa(text.padEnd(32, "!").slice(0, 32));
    const development = `development:${btoa("tender-development-only-key-0000")}`;
    const rotated = withEnv({ PROCESSOR_ENCRYPTION_KEY: `k2028:${key("rotation key 2028")},${development}` });
    try {
      const result = await reencryptConnections(rotated, Date.now(), 1);
      expect(result.skipped).toBeGreaterThanOrEqual(3);
      const rows = (await env.DB.prepare("SELECT processor_account, secret_key_encrypted, webhook_secret_encrypted, connect_webhook_secret_encrypted FROM retired_processor_connections WHERE account_id = ? ORDER BY processor_account").bind(acct.id).all<Record<string, string | null>>()).results;
      const ids = (r: Record<string, string | null>) => [r.secret_key_encrypted, r.webhook_secret_encrypted, r.connect_webhook_secret_encrypted].map((v) => (v === null ? null : v.split(":")[0]));
      expect(Object.fromEntries(rows.map((r) => [r.processor_account, ids(r)]))).toEqual({
        acct_r1_a: ["lost", "lost", null],
        acct_r1_b: ["k2028", "k2028", "k2028"],
        acct_r1_c: ["development", "development", "lost"],
        acct_r1_d: ["k2028", "k2028", "k2028"],
        acct_r1_e: ["lost", "lost", null],
        acct_r1_f: ["k2028", "k2028", "k2028"],
      });
      const b = rows.find((r) => r.processor_account === "acct_r1_b")!;
      expect((await openSecrets(rotated, { accountId: acct.id, secretKeyEncrypted: b.secret_key_encrypted!, webhookSecretEncrypted: b.webhook_secret_encrypted!, connectWebhookSecretEncrypted: b.connect_webhook_secret_encrypted })).secretKey).toBe(secrets.secretKey);
    } finally {
      await reencryptConnections(withEnv({ PROCESSOR_ENCRYPTION_KEY: `${development},k2028:${key("rotation key 2028")}` }), Date.now(), 50);
      await env.DB.prepare("DELETE FROM retired_processor_connections WHERE account_id = ?").bind(acct.id).run();
    }
  });
});

describe("migration 0020's triggers", () => {
  it("held: a test-mode row stays NULL; a live row given a value keeps it (a move's copy), '' included; a live row given NULL takes the connection's, or ''", async () => {
    const acct = await signup("R1 triggers");
    const connected = await connectStripe(acct);
    const insert = (id: string, livemode: number, processorAccount: string | null) =>
      env.DB.prepare(
        `INSERT INTO payouts (id, account_id, livemode, amount, currency, status, card_last4, card_brand, card_exp_month, card_exp_year, card_fingerprint, processor_token, processor_account, date, created_at, updated_at)
         SELECT ?, ?, ?, 100, 'usd', 'paid', '4242', 'visa', 12, 2030, 'fp', 'tok', ?, '2026-01-01', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'`,
      ).bind(id, acct.id, livemode, processorAccount).run();
    const cases: [string, number, string | null, string | null][] = [
      ["po_r1_test", 0, null, null],
      ["po_r1_copy", 1, "acct_elsewhere", "acct_elsewhere"],
      ["po_r1_empty", 1, "", ""],
      ["po_r1_null", 1, null, connected.processorAccount],
    ];
    for (const [id, livemode, given, expected] of cases) {
      const inserted = await insert(id, livemode, given).catch((error: unknown) => error);
      if (inserted instanceof Error) throw new Error(`${id}: ${inserted.message}`);
      expect((await row<{ processor_account: string | null }>("SELECT processor_account FROM payouts WHERE id = ?", id)).processor_account, id).toBe(expected);
    }
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    await insert("po_r1_gone", 1, null);
    expect((await row<{ processor_account: string | null }>("SELECT processor_account FROM payouts WHERE id = ?", "po_r1_gone")).processor_account).toBe("");
  });
});

describe("new money through the wrong Stripe account (item 2)", () => {
  it("a refund of a payment charged through a Stripe account no longer connected answers 409 and sends nothing anywhere (was 201, then sent through the new Stripe account with the old one's PaymentIntent)", async () => {
    const acct = await signup("R1 refund after swap");
    const connected = await connectStripe(acct);
    const user = await call("/api/users", { key: acct.liveKey, body: { name: "Payer", email: "payer@example.com" } });
    const plan = await createPlan({ id: acct.id, key: acct.liveKey }, { price: 30 });
    const sub = await call("/subscriptions", { key: acct.liveKey, body: { user_id: user.body.id, plan_id: plan.id, ...card(STRIPE_CARDS.succeeds) } });
    expect(sub.status, sub.text).toBe(201);
    const payment = (await call(`/payments?subscription_id=${sub.body.id}`, { key: acct.liveKey })).body.data[0];
    expect((await call(`/subscriptions/${sub.body.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    await swapToOther(acct);
    const [before, beforeOther] = [fake.refunds.size, other.refunds.size];
    const res = await call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id, amount: 1000 } });
    expectError(res, 409, "invalid_request_error", "payment_processor_retired");
    expect(res.body.error.message).toContain(connected.processorAccount);
    expect([fake.refunds.size, other.refunds.size]).toEqual([before, beforeOther]);
    expect((await row<{ n: number }>("SELECT count(*) AS n FROM refunds WHERE payment_id = ?", payment.id)).n).toBe(0);
    expect((await call(`/payments/${payment.id}`, { key: acct.liveKey })).body).toMatchObject({ status: "completed", amount_refunded: 0 });
    // Connected back to that Stripe account, the payment is refundable again.
    await connectStripe(acct);
    const again = await call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id, amount: 1000 } });
    expect(again.status, again.text).toBe(201);
  });
});
