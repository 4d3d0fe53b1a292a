// Issue 33 (items 3, 4 and 5): a disconnect and an account move racing live money. A Stripe call is
// held open at the fake Stripe while the race is run, then let go: the connection cannot be
// removed or swapped while a first charge is at Stripe (409 processor_in_use, Retry-After), a move
// waits for it and the charge lands where the account lives, a charge whose claim ran out is never
// recorded on a shard the account has left (its retry records it there, once), and a Stripe event
// applied while the account moved is answered so that Stripe sends it again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { expireRecords } from "../../src/jobs/expiry";
import { JOB_RUN_TTL_MS } from "../../src/db/leases";
import { OTHER_SHARD, TEST_SHARD, envOf } from "../support/env";
import { call, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { runJobs } from "../support/queue";
import { waitFor } from "../support/wait";
import { quiesce } from "../support/db";
import {
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  deliverStripeEvents,
  holdStripe,
  installFakeStripe,
  livePayout,
  newSecretKey,
  newSigningSecret,
  payableUser,
  paymentIntent,
  skipStripeEvents,
} from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(async () => {
  await quiesce();
  stripe.restore();
});

const hold = (matches: (method: string, path: string) => boolean) => holdStripe(fake, matches);
const succeededFor = (userId: string) => [...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === userId && i.status === "succeeded");
const moveTo = (accountId: string, shard: number) => call(`/api/accounts/${accountId}/move`, { body: { to_shard: shard, drain_seconds: 0 } });
const pausedOn = async (shard: number, accountId: string) =>
  Number(await envOf(shard).DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND paused_at IS NOT NULL").bind(accountId).first("n"));
const claimsOn = async (shard: number, accountId: string) => Number(await envOf(shard).DB.prepare("SELECT count(*) AS n FROM money_claims WHERE account_id = ?").bind(accountId).first("n"));

/**
 * PUT /api/processor with the key of another Stripe account: the fake answers GET /v1/account with
 * its platform, so a second fake is that other account (for this call only; a request already at
 * Stripe keeps the client it was made with).
 */
async function putAnotherStripeAccount(acct: LiveAccount) {
  installFakeStripe();
  try {
    return await call("/api/processor", { method: "PUT", key: acct.liveKey, body: { provider: "stripe", secret_key: newSecretKey(), webhook_secret: newSigningSecret() } });
  } finally {
    installFakeStripe(fake);
  }
}

async function liveAccount(name: string) {
  const acct: LiveAccount = await signup(name);
  const connected = await connectStripe(acct);
  const plan = await createPlan({ id: acct.id, key: acct.liveKey }, { price: 20, currency: "usd" });
  return { acct, connected, planId: plan.id as string };
}

describe("a disconnect racing a first charge (issue 33, item 3)", () => {
  it("DELETE and a PUT naming another Stripe account answer 409 processor_in_use while POST /subscriptions is at Stripe; the charge commits against the connection it used", { timeout: 30_000 }, async () => {
    const { acct, connected, planId } = await liveAccount("Disconnect race");
    const user = await payableUser(fake, acct, "Dee Race");
    const gate = hold(paymentIntent);
    const creating = call("/subscriptions", { key: acct.liveKey, body: { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: "race-disconnect" });
    await gate.reached;

    const removed = await call("/api/processor", { method: "DELETE", key: acct.liveKey });
    expect(removed.status, removed.text).toBe(409);
    expect(removed.body.error.code).toBe("processor_in_use");
    expect(Number(removed.headers.get("retry-after"))).toBeGreaterThan(0);
    const swapped = await putAnotherStripeAccount(acct);
    expect(swapped.status, swapped.text).toBe(409);
    expect(swapped.body.error.code).toBe("processor_in_use");
    // The same Stripe account with a rolled key is not a change of where the money goes.
    const rolled = await call("/api/processor", { method: "PUT", key: acct.liveKey, body: { provider: "stripe", secret_key: connected.secretKey, webhook_secret: newSigningSecret() } });
    expect(rolled.status, rolled.text).toBe(200);

    gate.release();
    const created = await creating;
    expect(created.status, created.text).toBe(201);
    expect(created.body.status).toBe("active");
    expect(succeededFor(user.id)).toHaveLength(1);
    const connection = await call("/api/processor", { key: acct.liveKey });
    expect(connection.status).toBe(200);
    expect(connection.body.processor_account).toBe(connected.processorAccount);
    // The claim ended with the commit: once the subscription is canceled, the connection can go.
    expect(await claimsOn(TEST_SHARD, acct.id)).toBe(0);
    expect((await call(`/subscriptions/${created.body.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
  });

  it("a disconnect that commits first leaves the charge unmade: POST /subscriptions answers 400 livemode_unavailable and Stripe is not called", async () => {
    const { acct, planId } = await liveAccount("Disconnect first");
    const user = await call("/api/users", { key: acct.liveKey, body: { name: "Early", email: "early@example.com" } });
    expect((await call("/api/processor", { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    const before = fake.count("paymentIntents");
    const created = await call("/subscriptions", { key: acct.liveKey, body: { user_id: user.body.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: "after-disconnect" });
    expect(created.status, created.text).toBe(400);
    expect(created.body.error.code).toBe("livemode_unavailable");
    expect(fake.count("paymentIntents")).toBe(before);
    expect(await claimsOn(TEST_SHARD, acct.id)).toBe(0);
  });

  it("a claim whose worker died (its lease ran out) does not hold the connection; its late commit is refused, not recorded against another connection", { timeout: 30_000 }, async () => {
    const { acct, planId } = await liveAccount("Dead claim");
    const user = await payableUser(fake, acct, "Lee Late");
    const gate = hold(paymentIntent);
    const creating = call("/subscriptions", { key: acct.liveKey, body: { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: "race-dead-claim" });
    await gate.reached;
    await envOf(TEST_SHARD).DB.prepare("UPDATE money_claims SET lease_until = 0 WHERE account_id = ?").bind(acct.id).run();
    const other = await putAnotherStripeAccount(acct);
    expect(other.status, other.text).toBe(200);
    gate.release();
    const created = await creating;
    expect(created.status, created.text).toBe(500);
    expect(created.body.error.code).toBe("outcome_unknown");
    expect((await call(`/subscriptions?user_id=${user.id}`, { key: acct.liveKey })).body.data).toHaveLength(0);
  });
});

describe("money claims left behind", () => {
  it("a claim whose worker died is deleted by the record expiry a day after its lease ran out, not before", async () => {
    const { acct } = await liveAccount("Stale claim");
    const insert = (id: string, leaseUntil: number) =>
      envOf(TEST_SHARD).DB.prepare("INSERT INTO money_claims (id, account_id, livemode, processor_account, purpose, created_at, lease_until) VALUES (?, ?, 1, NULL, 'first_charge', ?, ?)").bind(id, acct.id, new Date().toISOString(), leaseUntil).run();
    await insert(`mcl_stale_${acct.id}`, Date.now() - JOB_RUN_TTL_MS - 1000);
    await insert(`mcl_recent_${acct.id}`, Date.now() - 1000);
    const swept = await expireRecords(envOf(TEST_SHARD), Date.now());
    expect(swept.moneyClaims).toBeGreaterThanOrEqual(1);
    const left = await envOf(TEST_SHARD).DB.prepare("SELECT id FROM money_claims WHERE account_id = ?").bind(acct.id).all<{ id: string }>();
    expect(left.results.map((r) => r.id)).toEqual([`mcl_recent_${acct.id}`]);
  });
});

describe("an account move racing a live first charge (issue 33, item 4)", () => {
  it("the move waits while the charge is at Stripe (drain_seconds 0), and the subscription and its payment are where the account lives", { timeout: 30_000 }, async () => {
    const { acct, planId } = await liveAccount("Move race");
    const user = await payableUser(fake, acct, "Mo Race");
    const gate = hold(paymentIntent);
    const creating = call("/subscriptions", { key: acct.liveKey, body: { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: "race-move" });
    await gate.reached;
    let moveEnded = false;
    const moving = moveTo(acct.id, OTHER_SHARD).finally(() => (moveEnded = true));
    await waitFor(async () => expect(await pausedOn(TEST_SHARD, acct.id)).toBeGreaterThan(0), 5000, 20);
    // The charge is still at Stripe: the move has not copied, let alone switched.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(moveEnded).toBe(false);
    gate.release();
    const created = await creating;
    expect(created.status, created.text).toBe(201);
    const moved = await moving;
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.to_shard).toBe(OTHER_SHARD);

    const read = await call(`/subscriptions/${created.body.id}`, { key: acct.liveKey });
    expect(read.status, read.text).toBe(200);
    expect(read.body.status).toBe("active");
    expect(Number(await envOf(OTHER_SHARD).DB.prepare("SELECT count(*) AS n FROM subscriptions WHERE id = ?").bind(created.body.id).first("n"))).toBe(1);
    const payments = (await call(`/payments?subscription_id=${created.body.id}`, { key: acct.liveKey })).body.data;
    expect(payments.map((p: { status: string; amount: number }) => [p.status, p.amount])).toEqual([["completed", 2000]]);
    expect(succeededFor(user.id)).toHaveLength(1);
    expect(await claimsOn(OTHER_SHARD, acct.id)).toBe(0);
  });

  it("a charge whose claim ran out while the move switched is not recorded on the shard it left: 500 outcome_unknown, and its retry records the one charge where the account lives", { timeout: 30_000 }, async () => {
    const { acct, planId } = await liveAccount("Move late");
    const user = await payableUser(fake, acct, "Al Late");
    const gate = hold(paymentIntent);
    const key = "race-move-late";
    const body = { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) };
    const creating = call("/subscriptions", { key: acct.liveKey, body, idempotencyKey: key });
    await gate.reached;
    // Its worker looks dead: the claim's lease ran out, so the move does not wait for it.
    await envOf(TEST_SHARD).DB.prepare("UPDATE money_claims SET lease_until = 0 WHERE account_id = ?").bind(acct.id).run();
    const moved = await moveTo(acct.id, OTHER_SHARD);
    expect(moved.status, moved.text).toBe(200);
    gate.release();
    const created = await creating;
    expect(created.status, created.text).toBe(500);
    expect(created.body.error.code).toBe("outcome_unknown");
    expect(succeededFor(user.id)).toHaveLength(1);

    // The client retries with its key once the lock has run out: the same reference, the same charge.
    await envOf(OTHER_SHARD).DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
    const retried = await call("/subscriptions", { key: acct.liveKey, body, idempotencyKey: key });
    expect(retried.status, retried.text).toBe(201);
    expect(succeededFor(user.id)).toHaveLength(1);
    const subs = (await call(`/subscriptions?user_id=${user.id}`, { key: acct.liveKey })).body.data;
    expect(subs).toHaveLength(1);
    const payments = (await call(`/payments?subscription_id=${subs[0].id}`, { key: acct.liveKey })).body.data;
    expect(payments).toHaveLength(1);
  });
});

describe("an account move racing a Stripe event (issue 33, item 5)", () => {
  it("a payout.failed applied while the account moved answers 503 (Stripe sends it again); the next delivery fails the payout where it lives, with one reversal", { timeout: 30_000 }, async () => {
    const { acct, connected } = await liveAccount("Event race");
    const payee = await payableUser(fake, acct, "Pat Payee");
    const res = await livePayout(acct, payee.id);
    expect(res.status, res.text).toBe(201);
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
    skipStripeEvents(fake);
    fake.settlePayout(stripePayout.id, "paid");
    await deliverStripeEvents(fake, connected);
    expect((await call(`/payouts/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("paid");

    fake.settlePayout(stripePayout.id, "failed", "account_closed");
    const failedEvent = fake.events[fake.events.length - 1];
    expect(failedEvent.type).toBe("payout.failed");
    const gate = hold((method, path) => method === "POST" && path.endsWith("/reversals"));
    const delivering = deliverStripeEvents(fake, connected, { events: [failedEvent] });
    await gate.reached;
    const moved = await moveTo(acct.id, OTHER_SHARD);
    expect(moved.status, moved.text).toBe(200);
    gate.release();
    const [first] = await delivering;
    expect(first.status).toBe(503);

    const [again] = await deliverStripeEvents(fake, connected, { events: [failedEvent] });
    expect(again.status).toBe(200);
    const payout = (await call(`/payouts/${res.body.id}`, { key: acct.liveKey })).body;
    expect(payout.status).toBe("failed");
    const [transfer] = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === res.body.id);
    expect(transfer).toMatchObject({ reversed: true, amount_reversed: 2500 });
    expect(fake.count("reversals")).toBeGreaterThanOrEqual(1);
    expect([...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === res.body.id)).toHaveLength(1);
  });
});
