// Reviewer R3's attacks on issue 33 items 3, 4 and 5 as merged (431821c): live money under a claim
// racing disconnects and account moves, lost replies, and the one-off payment paths. Each attack
// asserts what a payments engineer would trust: what Stripe did is recorded where the account
// lives, nothing moved twice, no claim left behind, no key left paused.
import { afterAll, describe, expect, it } from "vitest";
import { OTHER_SHARD, TEST_SHARD, env, envOf } from "../support/env";
import { call, fetchWith, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { waitFor } from "../support/wait";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { quiesce } from "../support/db";
import { faultyD1, sqlMatches } from "../support/faults";
import { type LiveAccount, STRIPE_CARDS, connectStripe, deliverStripeEvents, holdStripe, installFakeStripe, livePayout, payableUser, skipStripeEvents } from "../support/live";
import { runJobs } from "../support/queue";
import { ACCOUNT_TABLES } from "../../src/accounts/move";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(async () => {
  await quiesce();
  stripe.restore();
});

const hold = (matches: (method: string, path: string) => boolean) => holdStripe(fake, matches);
const moveTo = (accountId: string, shard: number) => call(`/api/accounts/${accountId}/move`, { body: { to_shard: shard, drain_seconds: 0 } });
const count = async (shard: number, sql: string, ...binds: unknown[]) => Number(await envOf(shard).DB.prepare(sql).bind(...binds).first("n"));
const pausedOn = (shard: number, accountId: string) => count(shard, "SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND paused_at IS NOT NULL", accountId);
const claimsOn = (shard: number, accountId: string) => count(shard, "SELECT count(*) AS n FROM money_claims WHERE account_id = ?", accountId);

async function liveAccount(name: string) {
  const acct: LiveAccount = await signup(name);
  const connected = await connectStripe(acct);
  const plan = await createPlan({ id: acct.id, key: acct.liveKey }, { price: 20, currency: "usd" });
  return { acct, connected, planId: plan.id as string };
}

async function authorized(acct: LiveAccount, name: string) {
  const user = await call("/api/users", { key: acct.liveKey, body: { name, email: `${name.toLowerCase().replace(/\W/g, ".")}@example.com` } });
  expect(user.status, user.text).toBe(201);
  const res = await call("/payments", { key: acct.liveKey, idempotencyKey: `auth-${name.replace(/\W/g, "-")}`, body: { amount: 3000, currency: "usd", user_id: user.body.id, capture_method: "manual", ...card(STRIPE_CARDS.succeeds) } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("requires_capture");
  return res.body as { id: string };
}

const intentOf = (paymentId: string) => [...fake.paymentIntents.values()].find((i) => i.metadata?.tender_reference === paymentId || i.metadata?.tender_payment === paymentId);

describe("an account move racing a capture or a cancel (one-off payments)", () => {
  for (const step of ["capture", "cancel"] as const) {
    it(`${step}: the move waits for it, the ${step} answers 200, and the payment where the account lives says what Stripe did`, { timeout: 30_000 }, async () => {
      const { acct } = await liveAccount(`Move ${step}`);
      const payment = await authorized(acct, `Pay ${step}`);
      const gate = hold((method, path) => method === "POST" && path.endsWith(`/${step}`));
      const stepping = call(`/payments/${payment.id}/${step}`, { key: acct.liveKey, body: {}, idempotencyKey: `race-${step}` });
      await gate.reached;
      const moving = moveTo(acct.id, OTHER_SHARD);
      await waitFor(async () => expect(await pausedOn(TEST_SHARD, acct.id)).toBeGreaterThan(0), 5000, 20);
      gate.release();
      const answered = await stepping;
      const moved = await moving;
      expect(moved.status, moved.text).toBe(200);
      expect(answered.status, answered.text).toBe(200);
      const read = await call(`/payments/${payment.id}`, { key: acct.liveKey });
      expect(read.status, read.text).toBe(200);
      expect(read.body.status).toBe(step === "capture" ? "completed" : "canceled");
      expect(await claimsOn(OTHER_SHARD, acct.id)).toBe(0);
      expect(await pausedOn(OTHER_SHARD, acct.id)).toBe(0);
    });
  }
});

describe("the commit's answer lost (a live first charge)", () => {
  for (const idempotencyKey of ["lost-commit", undefined]) {
    it(`${idempotencyKey ? "with" : "without"} an Idempotency-Key: the commit that landed answers 201, not 500, and the charge is recorded once`, { timeout: 30_000 }, async () => {
      const { acct, planId } = await liveAccount(`Lost commit ${idempotencyKey ?? "nokey"}`);
      const user = await payableUser(fake, acct, `Lo ${idempotencyKey ?? "nokey"}`);
      const json = { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) };
      const faulty = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => sqlMatches(op, /^\s*insert\s+into\s+"subscriptions"/i) });
      const res = await fetchWith({ DB: faulty } as never, "/subscriptions", { key: acct.liveKey, json, headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {} });
      expect(res.status, res.text).toBe(201);
      const subs = (await call(`/subscriptions?user_id=${user.id}`, { key: acct.liveKey })).body.data;
      expect(subs).toHaveLength(1);
      expect([...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id && i.status === "succeeded")).toHaveLength(1);
      expect(await claimsOn(TEST_SHARD, acct.id)).toBe(0);
    });
  }
});

describe("a one-off payment's money racing a move, its claim's lease run out (the worker looked dead)", () => {
  const expireClaims = (accountId: string) => envOf(TEST_SHARD).DB.prepare("UPDATE money_claims SET lease_until = 0 WHERE account_id = ?").bind(accountId).run();
  const unlock = (accountId: string, key: string) =>
    envOf(OTHER_SHARD).DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, accountId, key).run();

  it("POST /payments: 500 outcome_unknown on the shard it left; the retry with its key records the one charge where the account lives", { timeout: 30_000 }, async () => {
    const { acct } = await liveAccount("Late one-off");
    const user = await call("/api/users", { key: acct.liveKey, body: { name: "Late Payer", email: "late.payer@example.com" } });
    const body = { amount: 3000, currency: "usd", user_id: user.body.id, ...card(STRIPE_CARDS.succeeds) };
    const key = "late-one-off";
    const gate = hold((method, path) => method === "POST" && path === "/v1/payment_intents");
    const paying = call("/payments", { key: acct.liveKey, body, idempotencyKey: key });
    await gate.reached;
    await expireClaims(acct.id);
    const moved = await moveTo(acct.id, OTHER_SHARD);
    expect(moved.status, moved.text).toBe(200);
    gate.release();
    const first = await paying;
    expect(first.status, first.text).toBe(500);
    expect(first.body.error.code).toBe("outcome_unknown");
    await unlock(acct.id, key);
    const retried = await call("/payments", { key: acct.liveKey, body, idempotencyKey: key });
    expect(retried.status, retried.text).toBe(201);
    expect(retried.body.status).toBe("completed");
    const listed = (await call(`/payments?user_id=${user.body.id}`, { key: acct.liveKey })).body.data;
    expect(listed).toHaveLength(1);
    expect([...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.body.id && i.status === "succeeded")).toHaveLength(1);
    expect(await pausedOn(OTHER_SHARD, acct.id)).toBe(0);
  });

  it("capture: 500 outcome_unknown on the shard it left; the retry with its key records the one capture where the account lives", { timeout: 30_000 }, async () => {
    const { acct } = await liveAccount("Late capture");
    const payment = await authorized(acct, "Late Capture");
    const key = "late-capture";
    const gate = hold((method, path) => method === "POST" && path.endsWith("/capture"));
    const capturing = call(`/payments/${payment.id}/capture`, { key: acct.liveKey, body: {}, idempotencyKey: key });
    await gate.reached;
    await expireClaims(acct.id);
    const moved = await moveTo(acct.id, OTHER_SHARD);
    expect(moved.status, moved.text).toBe(200);
    gate.release();
    const first = await capturing;
    expect(first.status, first.text).toBe(500);
    expect(first.body.error.code).toBe("outcome_unknown");
    await unlock(acct.id, key);
    const retried = await call(`/payments/${payment.id}/capture`, { key: acct.liveKey, body: {}, idempotencyKey: key });
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body.status).toBe("completed");
    expect((await call(`/payments/${payment.id}`, { key: acct.liveKey })).body).toMatchObject({ status: "completed", amount_received: 3000 });
    expect(fake.requests.filter((r) => r.method === "POST" && r.path.endsWith("/capture")).length).toBeGreaterThanOrEqual(1);
  });
});

describe("an account move racing a one-off payment at Stripe (its claim held)", () => {
  it("the move waits; POST /payments answers 201 and the payment is where the account lives, once", { timeout: 30_000 }, async () => {
    const { acct } = await liveAccount("Move one-off");
    const user = await call("/api/users", { key: acct.liveKey, body: { name: "Moving Payer", email: "moving.payer@example.com" } });
    const gate = hold((method, path) => method === "POST" && path === "/v1/payment_intents");
    const paying = call("/payments", { key: acct.liveKey, body: { amount: 3000, currency: "usd", user_id: user.body.id, ...card(STRIPE_CARDS.succeeds) } });
    await gate.reached;
    const moving = moveTo(acct.id, OTHER_SHARD);
    await waitFor(async () => expect(await pausedOn(TEST_SHARD, acct.id)).toBeGreaterThan(0), 5000, 20);
    gate.release();
    const paid = await paying;
    expect(paid.status, paid.text).toBe(201);
    expect((await moving).status).toBe(200);
    const read = await call(`/payments/${paid.body.id}`, { key: acct.liveKey });
    expect(read.status, read.text).toBe(200);
    expect(await count(OTHER_SHARD, "SELECT count(*) AS n FROM payments WHERE id = ?", paid.body.id)).toBe(1);
    expect(await claimsOn(OTHER_SHARD, acct.id)).toBe(0);
  });
});

describe("a Stripe event applied on the shard its account left (issue 33, item 5)", () => {
  it("its late batch leaves nothing on the source: no event, no delivery, no recorded Stripe event outlives the move there (only pointers stay)", { timeout: 30_000 }, async () => {
    const { acct, connected } = await liveAccount("Orphan event");
    const hook = await call("/api/webhooks", { key: acct.liveKey, body: { url: "https://receiver.example.com/hooks", events: ["payout.failed", "payout.paid"] } });
    expect(hook.status, hook.text).toBe(201);
    const payee = await payableUser(fake, acct, "Orla Orphan");
    const res = await livePayout(acct, payee.id);
    expect(res.status, res.text).toBe(201);
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
    skipStripeEvents(fake);
    fake.settlePayout(stripePayout.id, "paid");
    await deliverStripeEvents(fake, connected);
    fake.settlePayout(stripePayout.id, "failed", "account_closed");
    const failedEvent = fake.events[fake.events.length - 1];
    const gate = hold((method, path) => method === "POST" && path.endsWith("/reversals"));
    const delivering = deliverStripeEvents(fake, connected, { events: [failedEvent] });
    await gate.reached;
    expect((await moveTo(acct.id, OTHER_SHARD)).status).toBe(200);
    gate.release();
    const [first] = await delivering;
    expect(first.status).toBe(503);

    const left: Record<string, number> = {};
    for (const table of ACCOUNT_TABLES) {
      if (table === "accounts" || table === "api_keys" || table === "access_tokens") continue;
      const n = await count(TEST_SHARD, `SELECT count(*) AS n FROM "${table}" WHERE account_id = ?`, acct.id);
      if (n > 0) left[table] = n;
    }
    expect(left).toEqual({});

    const [again] = await deliverStripeEvents(fake, connected, { events: [failedEvent] });
    expect(again.status).toBe(200);
    expect((await call(`/payouts/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("failed");
    expect(await count(OTHER_SHARD, "SELECT count(*) AS n FROM events WHERE account_id = ? AND type = 'payout.failed'", acct.id)).toBe(1);
  });
});

describe("two workers at once while a first charge is at Stripe", () => {
  const subscribe = (acct: LiveAccount, userId: string, planId: string, idempotencyKey?: string) =>
    call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey });
  const succeededFor = (userId: string) => [...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === userId && i.status === "succeeded");

  it("two moves, a disconnect and a duplicate of the request: the second move 409, the others wait or are refused; one charge, recorded where the account lives; the replay answers it", { timeout: 30_000 }, async () => {
    const { acct, connected, planId } = await liveAccount("Crowd");
    const user = await payableUser(fake, acct, "Cro Wd");
    const gate = hold((method, path) => method === "POST" && path === "/v1/payment_intents");
    const creating = subscribe(acct, user.id, planId, "crowd-key");
    await gate.reached;
    const duplicate = await subscribe(acct, user.id, planId, "crowd-key");
    expect(duplicate.status, duplicate.text).toBe(409);
    const moving = moveTo(acct.id, OTHER_SHARD);
    await waitFor(async () => expect(await pausedOn(TEST_SHARD, acct.id)).toBeGreaterThan(0), 5000, 20);
    const second = await moveTo(acct.id, OTHER_SHARD);
    expect(second.status, second.text).toBe(409);
    const removed = await call("/api/processor", { method: "DELETE", key: acct.liveKey });
    expect([409, 503]).toContain(removed.status);
    gate.release();
    const created = await creating;
    expect(created.status, created.text).toBe(201);
    expect((await moving).status).toBe(200);
    const replay = await subscribe(acct, user.id, planId, "crowd-key");
    expect(replay.status, replay.text).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.id).toBe(created.body.id);
    expect(succeededFor(user.id)).toHaveLength(1);
    expect(await count(OTHER_SHARD, "SELECT count(*) AS n FROM payments WHERE subscription_id = ?", created.body.id)).toBe(1);
    expect((await call("/api/processor", { key: acct.liveKey })).body.processor_account).toBe(connected.processorAccount);
    expect(await claimsOn(OTHER_SHARD, acct.id)).toBe(0);
    expect(await pausedOn(OTHER_SHARD, acct.id)).toBe(0);
  });
});

describe("a Stripe event racing a disconnect and a move", () => {
  it("payout.failed at Stripe (reversing its transfer) while the connection is removed and the account moves: 503, then applied where the account lives, one reversal", { timeout: 30_000 }, async () => {
    const { acct, connected } = await liveAccount("Event crowd");
    const payee = await payableUser(fake, acct, "Eve Crowd");
    const res = await livePayout(acct, payee.id);
    expect(res.status, res.text).toBe(201);
    await runJobs({ kind: "settlePayout", payoutId: res.body.id });
    const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === res.body.id)!;
    skipStripeEvents(fake);
    fake.settlePayout(stripePayout.id, "paid");
    await deliverStripeEvents(fake, connected);
    fake.settlePayout(stripePayout.id, "failed", "account_closed");
    const failedEvent = fake.events[fake.events.length - 1];
    const gate = hold((method, path) => method === "POST" && path.endsWith("/reversals"));
    const delivering = deliverStripeEvents(fake, connected, { events: [failedEvent] });
    await gate.reached;
    const removed = await call("/api/processor", { method: "DELETE", key: acct.liveKey });
    expect([200, 409]).toContain(removed.status);
    expect((await moveTo(acct.id, OTHER_SHARD)).status).toBe(200);
    gate.release();
    const [first] = await delivering;
    expect(first.status).toBe(503);
    const [again] = await deliverStripeEvents(fake, connected, { events: [failedEvent] });
    expect(again.status, JSON.stringify(again)).toBe(200);
    expect((await call(`/payouts/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("failed");
    const [transfer] = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === res.body.id);
    expect(transfer).toMatchObject({ reversed: true, amount_reversed: 2500 });
    expect(await pausedOn(OTHER_SHARD, acct.id)).toBe(0);
  });
});

describe("Stripe's answer lost (a first charge whose outcome is unknown), then a disconnect", () => {
  it("the connection cannot be removed while the charge's outcome is unknown under its Idempotency-Key; the retry records the one charge, and then it can", { timeout: 30_000 }, async () => {
    const { acct, planId } = await liveAccount("Unknown then disconnect");
    const user = await payableUser(fake, acct, "Un Known");
    const body = { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) };
    const key = "unknown-then-disconnect";
    fake.inject({ kind: "timeout_after_success", operation: "POST /v1/payment_intents", times: 10 });
    const first = await call("/subscriptions", { key: acct.liveKey, body, idempotencyKey: key });
    (fake as unknown as { faults: unknown[] }).faults.length = 0;
    expect(first.status, first.text).toBe(500);
    expect(first.body.error.code).toBe("outcome_unknown");
    const charged = [...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id && i.status === "succeeded");
    expect(charged.length).toBeGreaterThanOrEqual(1);

    // Stripe charged; Tender must still be able to record it through the connection it used.
    const removed = await call("/api/processor", { method: "DELETE", key: acct.liveKey });
    expect(removed.status, removed.text).toBe(409);
    expect(removed.body.error.code).toBe("processor_in_use");

    await envOf(TEST_SHARD).DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
    const retried = await call("/subscriptions", { key: acct.liveKey, body, idempotencyKey: key });
    expect(retried.status, retried.text).toBe(201);
    expect([...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id && i.status === "succeeded")).toHaveLength(1);
    expect(await claimsOn(TEST_SHARD, acct.id)).toBe(0);
  });
});

describe("a move paused before the claim", () => {
  it("a second live payment while the move waits for the first: 503 account_moving, Stripe not called, no claim left; the first lands where the account lives", { timeout: 30_000 }, async () => {
    const { acct } = await liveAccount("Before claim");
    const user = await call("/api/users", { key: acct.liveKey, body: { name: "Bea Fore", email: "bea.fore@example.com" } });
    const gate = hold((method, path) => method === "POST" && path === "/v1/payment_intents");
    const firstPaying = call("/payments", { key: acct.liveKey, body: { amount: 1000, currency: "usd", user_id: user.body.id, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: "before-claim-1" });
    await gate.reached;
    const moving = moveTo(acct.id, OTHER_SHARD);
    await waitFor(async () => expect(await pausedOn(TEST_SHARD, acct.id)).toBeGreaterThan(0), 5000, 20);
    const intents = fake.count("paymentIntents");
    const second = await call("/payments", { key: acct.liveKey, body: { amount: 2000, currency: "usd", user_id: user.body.id, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: "before-claim-2" });
    expect(second.status, second.text).toBe(503);
    expect(second.body.error.code).toBe("account_moving");
    expect(fake.count("paymentIntents")).toBe(intents);
    expect(await claimsOn(TEST_SHARD, acct.id)).toBe(1);
    gate.release();
    expect((await firstPaying).status).toBe(201);
    expect((await moving).status).toBe(200);
    const listed = (await call(`/payments?user_id=${user.body.id}`, { key: acct.liveKey })).body.data as { amount: number }[];
    expect(listed.map((p) => p.amount)).toEqual([1000]);
    expect(await claimsOn(OTHER_SHARD, acct.id)).toBe(0);
    expect(await pausedOn(OTHER_SHARD, acct.id)).toBe(0);
  });
});
