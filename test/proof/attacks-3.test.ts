// Third-round attacks on "one round trip for an idempotent write" (391d687): the Idempotency-Key
// recorded inside the route's own batch, a duplicate meeting the (account, key) primary key there,
// and claim-first kept only for routes where money moves before the commit.
import { TEST_SHARD, env } from "../support/env";
import { Hono } from "hono";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { AppEnv } from "../../src/context";
import { createDb } from "../../src/db/client";
import { ApiError } from "../../src/lib/errors";
import { idempotency } from "../../src/middleware/idempotency";
import { useProcessor } from "../../src/processor";
import { type Account, type CallResult, call, fetchWith, roundTrips, signup } from "../support/http";
import { createKey, createPlan, createUser, secretKeyId, seed, warm } from "../support/fixtures";
import { cardFields, payoutBody } from "../support/cards";
import { countRows, snapshot } from "../support/db";
import { type D1Op, faultyD1, gate, recordingProcessor, recordingQueue, sqlMatches } from "../support/faults";
import { CLAIM_FIRST, credentialFor, fixtureId, label, operations, pathWith, validBody } from "../support/operations";
import { installFakeStripe } from "../support/live";

// The processor connection's operations reach Stripe's key check: the fake Stripe answers it.
const stripe = installFakeStripe();
afterAll(() => stripe.restore());

afterEach(() => useProcessor());

const record = (accountId: string, key: string) =>
  env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(accountId, key).first<Record<string, any>>();
const expire = (accountId: string, key: string) =>
  env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE account_id = ? AND key = ?").bind(Date.now() - 1000, accountId, key).run();

/** The write batch that records the key (the one a duplicate meets the primary key in). */
const recordsKey = (op: D1Op) => op.kind === "batch" && sqlMatches(op, /insert\s+into\s+"?idempotency_keys"?/i);

/** Queues that keep their messages: no consumer runs, so the database holds only what the request wrote. */
const quietQueues = () => {
  const jobs = recordingQueue();
  const deliveries = recordingQueue();
  return { env: { JOB_QUEUE: jobs, DELIVERY_QUEUE: deliveries }, sent: () => jobs.sent.length + deliveries.sent.length };
};

function request(path: string, options: { key: string; method?: string; body?: unknown; idempotencyKey?: string }) {
  const headers: Record<string, string> = {};
  if (options.idempotencyKey) headers["idempotency-key"] = options.idempotencyKey;
  return { method: options.method ?? "POST", key: options.key, ...(options.body !== undefined ? { json: options.body } : {}), headers };
}

/** Rows per table, the whole database. */
async function rowCounts() {
  const snap = await snapshot();
  return Object.fromEntries(Object.entries(snap).map(([t, rows]) => [t, rows.length]));
}
const delta = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(Object.keys(after).filter((t) => after[t] !== before[t]).map((t) => [t, after[t] - (before[t] ?? 0)]));

const SECRET_FIELDS = ["secret", "api_key", "access_token"];
const withoutSecrets = (value: any): any =>
  Array.isArray(value)
    ? value.map(withoutSecrets)
    : value && typeof value === "object"
      ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, SECRET_FIELDS.includes(k) ? null : withoutSecrets(v)]))
      : value;

// ---------------------------------------------------------------------------------------------

describe("two identical requests at once, on every operation that records its key in its batch", () => {
  it("the first's batch held until the second answered: one change, one set of events and deliveries, and the first replays the second's answer", async () => {
    const ops = (await operations()).filter((op) => op.method !== "get" && !op.isPublic && !CLAIM_FIRST.has(op.operationId));
    expect(ops.length).toBeGreaterThan(15);
    for (const op of ops) {
      const context = label(op);
      // The control: the same request once, on its own account.
      const solo = await signup();
      const soloFx = await seed(solo);
      const soloPath = op.hasId ? pathWith(op, fixtureId(op, soloFx)) : op.path;
      const soloKey = await credentialFor(op, solo);
      const soloQueues = quietQueues();
      const beforeSolo = await rowCounts();
      const once = await fetchWith(soloQueues.env, soloPath, request(soloPath, { key: soloKey, method: op.method.toUpperCase(), body: validBody(op, soloFx), idempotencyKey: `solo-${op.operationId}` }));
      expect(once.status, `${context}: ${once.text}`).toBeLessThan(300);
      const soloDelta = delta(beforeSolo, await rowCounts());

      const acct = await signup();
      const fx = await seed(acct);
      const credential = await credentialFor(op, acct);
      const path = op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path;
      const body = validBody(op, fx);
      const key = `pair-${op.operationId}`;
      const held = gate();
      const queues = quietQueues();
      const before = await rowCounts();
      const db = faultyD1(env.DB, [], { gate: (o) => (recordsKey(o) ? held.opened : Promise.resolve()) });
      const first = fetchWith({ ...queues.env, DB: db }, path, request(path, { key: credential, method: op.method.toUpperCase(), body, idempotencyKey: key }));
      // Let the first reach its batch before the second starts.
      for (let i = 0; i < 200 && !db.ops.some(recordsKey); i++) await new Promise((r) => setTimeout(r, 5));
      expect(db.ops.some(recordsKey), `${context}: the first request reached its batch`).toBe(true);
      const second = await fetchWith(queues.env, path, request(path, { key: credential, method: op.method.toUpperCase(), body, idempotencyKey: key }));
      expect(second.status, `${context}: ${second.text}`).toBe(once.status);
      expect(second.headers.get("idempotent-replayed"), context).toBeNull();
      held.open();
      const late = await first;
      expect(late.status, `${context}: the held request replays: ${late.text}`).toBe(second.status);
      expect(late.headers.get("idempotent-replayed"), context).toBe("true");
      expect(late.body, context).toEqual(withoutSecrets(second.body));
      const pairDelta = delta(before, await rowCounts());
      expect(pairDelta, `${context}: the pair changed what one request changes`).toEqual(soloDelta);
      expect(queues.sent(), `${context}: messages sent by the pair`).toBe(soloQueues.sent());
      // The stored answer is the one the second gave, and a third request replays it too.
      const third = await call(path, { key: credential, method: op.method.toUpperCase(), body, idempotencyKey: key });
      expect(third.headers.get("idempotent-replayed"), context).toBe("true");
      expect(third.body, context).toEqual(late.body);
    }
  }, 240_000);

  it("five identical POST /payout and POST /refunds at once: one payout, one refund, one answer", async () => {
    const acct = await signup();
    const fx = await seed(acct);
    const queues = quietQueues();
    const payoutBodyOnce = payoutBody({ amount: 4321 });
    const payoutsBefore = await countRows("payouts", "account_id = ?", acct.id);
    const payouts = await Promise.all(
      Array.from({ length: 5 }, () => fetchWith(queues.env, "/payout", request("/payout", { key: acct.key, body: payoutBodyOnce, idempotencyKey: "burst-payout" }))),
    );
    expect(payouts.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(new Set(payouts.map((r) => r.body.id)).size).toBe(1);
    expect(payouts.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(payoutsBefore + 1);
    expect(await countRows("events", "account_id = ? AND type = 'payout.created'", acct.id)).toBe(payoutsBefore + 1);

    const refundsBefore = await countRows("refunds", "account_id = ?", acct.id);
    const refunds = await Promise.all(
      Array.from({ length: 5 }, () => fetchWith(queues.env, "/refunds", request("/refunds", { key: acct.key, body: { payment_id: fx.payment, amount: 7 }, idempotencyKey: "burst-refund" }))),
    );
    expect(refunds.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(new Set(refunds.map((r) => r.body.id)).size).toBe(1);
    expect(await countRows("refunds", "account_id = ?", acct.id)).toBe(refundsBefore + 1);
    const payment = await env.DB.prepare("SELECT amount_refunded FROM payments WHERE id = ?").bind(fx.payment).first<{ amount_refunded: number }>();
    expect(payment!.amount_refunded).toBe(100 + 7);
  });

  it("a full refund raced by its duplicate: the loser meets the refund limit first, and still replays the winner", async () => {
    const acct = await signup();
    const fx = await seed(acct);
    const payment = await env.DB.prepare("SELECT amount, amount_refunded FROM payments WHERE id = ?").bind(fx.payment).first<{ amount: number; amount_refunded: number }>();
    const rest = payment!.amount - payment!.amount_refunded;
    const held = gate();
    const db = faultyD1(env.DB, [], { gate: (o) => (recordsKey(o) ? held.opened : Promise.resolve()) });
    const body = { payment_id: fx.payment, amount: rest };
    const first = fetchWith({ DB: db, ...quietQueues().env }, "/refunds", request("/refunds", { key: acct.key, body, idempotencyKey: "full" }));
    for (let i = 0; i < 200 && !db.ops.some(recordsKey); i++) await new Promise((r) => setTimeout(r, 5));
    const second = await fetchWith(quietQueues().env, "/refunds", request("/refunds", { key: acct.key, body, idempotencyKey: "full" }));
    expect(second.status, second.text).toBe(201);
    held.open();
    const late = await first;
    expect(late.status, late.text).toBe(201);
    expect(late.headers.get("idempotent-replayed")).toBe("true");
    expect(late.body.id).toBe(second.body.id);
    expect(await countRows("refunds", "payment_id = ?", fx.payment)).toBe(2);
  });
});

// ---------------------------------------------------------------------------------------------

describe("lost answers and late commits", () => {
  it("commit_then_throw on the first POST /payout: it still answers its committed payout, and an immediate retry replays it", async () => {
    const acct = await signup();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: recordsKey });
    const body = payoutBody({ amount: 555 });
    const first = await fetchWith({ DB: db, ...quietQueues().env }, "/payout", request("/payout", { key: acct.key, body, idempotencyKey: "ctt" }));
    expect(db.fired).toHaveLength(1);
    expect(first.status, first.text).toBe(201);
    const retry = await call("/payout", { key: acct.key, body, idempotencyKey: "ctt" });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body).toEqual(first.body);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(1);
  });

  it("a retry racing a late commit: whichever batch commits first wins, the other replays it, and one payout exists", async () => {
    for (const order of ["first-commits-first", "retry-commits-first"] as const) {
      const acct = await signup();
      const body = payoutBody({ amount: 777 });
      const gateA = gate();
      const gateB = gate();
      // The first request's batch commits late and its answer is lost.
      const dbA = faultyD1(env.DB, { kind: "commit_then_throw", when: recordsKey }, { gate: (o) => (recordsKey(o) ? gateA.opened : Promise.resolve()) });
      const dbB = faultyD1(env.DB, [], { gate: (o) => (recordsKey(o) ? gateB.opened : Promise.resolve()) });
      const a = fetchWith({ DB: dbA, ...quietQueues().env }, "/payout", request("/payout", { key: acct.key, body, idempotencyKey: "late" }));
      const b = fetchWith({ DB: dbB, ...quietQueues().env }, "/payout", request("/payout", { key: acct.key, body, idempotencyKey: "late" }));
      for (let i = 0; i < 200 && !(dbA.ops.some(recordsKey) && dbB.ops.some(recordsKey)); i++) await new Promise((r) => setTimeout(r, 5));
      let ra: CallResult;
      let rb: CallResult;
      if (order === "first-commits-first") {
        gateA.open();
        ra = await a;
        gateB.open();
        rb = await b;
        expect(rb.headers.get("idempotent-replayed"), order).toBe("true");
      } else {
        gateB.open();
        rb = await b;
        gateA.open();
        ra = await a;
        expect(ra.headers.get("idempotent-replayed"), order).toBe("true");
      }
      expect([ra.status, rb.status], `${order}: ${ra.text} ${rb.text}`).toEqual([201, 201]);
      expect(ra.body.id, order).toBe(rb.body.id);
      expect(await countRows("payouts", "account_id = ?", acct.id), order).toBe(1);
    }
  });

  it("fail_before_commit on the first: 500 outcome_unknown with no record left, and the retry runs once", async () => {
    const acct = await signup();
    const db = faultyD1(env.DB, { kind: "fail_before_commit", when: recordsKey });
    const body = { name: "Lost", email: "lost@example.com" };
    const first = await fetchWith({ DB: db, ...quietQueues().env }, "/api/users", request("/api/users", { key: acct.key, body, idempotencyKey: "fbc" }));
    expect(first.status).toBe(500);
    expect(first.body.error.code).toBe("outcome_unknown");
    expect(await record(acct.id, "fbc")).toBeNull();
    const retry = await call("/api/users", { key: acct.key, body, idempotencyKey: "fbc" });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------

describe("one key, different requests", () => {
  it("the same key with a different body racing the first: the loser answers 422 and made nothing, whichever commits first", async () => {
    for (const heldFirst of [true, false]) {
      const acct = await signup();
      const held = gate();
      const db = faultyD1(env.DB, [], { gate: (o) => (recordsKey(o) ? held.opened : Promise.resolve()) });
      const a = fetchWith({ DB: db, ...quietQueues().env }, "/payout", request("/payout", { key: acct.key, body: payoutBody({ amount: 100 }), idempotencyKey: "diff" }));
      for (let i = 0; i < 200 && !db.ops.some(recordsKey); i++) await new Promise((r) => setTimeout(r, 5));
      let ra: CallResult;
      let rb: CallResult;
      if (heldFirst) {
        rb = await fetchWith(quietQueues().env, "/payout", request("/payout", { key: acct.key, body: payoutBody({ amount: 200 }), idempotencyKey: "diff" }));
        held.open();
        ra = await a;
        expect(rb.status).toBe(201);
        expect(ra.status, ra.text).toBe(422);
        expect(ra.body.error.code).toBe("idempotency_key_reused");
      } else {
        held.open();
        ra = await a;
        rb = await fetchWith(quietQueues().env, "/payout", request("/payout", { key: acct.key, body: payoutBody({ amount: 200 }), idempotencyKey: "diff" }));
        expect(ra.status).toBe(201);
        expect(rb.status, rb.text).toBe(422);
      }
      const rows = await env.DB.prepare("SELECT amount FROM payouts WHERE account_id = ?").bind(acct.id).all<{ amount: number }>();
      expect(rows.results.map((r) => r.amount)).toEqual([heldFirst ? 200 : 100]);
    }
  });

  it("a key whose first use failed validation is free; after a success it replays, and other parameters answer 422", async () => {
    const acct = await signup();
    const bad = await call("/payout", { key: acct.key, body: payoutBody({ amount: -5 }), idempotencyKey: "reuse" });
    expect(bad.status).toBe(400);
    expect(await record(acct.id, "reuse")).toBeNull();
    // A 404 from inside the batch (a missing recipient) leaves it free too.
    const missing = await call("/payout", { key: acct.key, body: payoutBody({ amount: 50, recipient_id: "user_00000000000000000000000000" }), idempotencyKey: "reuse" });
    expect(missing.status, missing.text).toBe(404);
    expect(await record(acct.id, "reuse")).toBeNull();
    const good = await call("/payout", { key: acct.key, body: payoutBody({ amount: 50 }), idempotencyKey: "reuse" });
    expect(good.status).toBe(201);
    expect(good.headers.get("idempotent-replayed")).toBeNull();
    const again = await call("/payout", { key: acct.key, body: payoutBody({ amount: 50 }), idempotencyKey: "reuse" });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(good.body.id);
    const other = await call("/payout", { key: acct.key, body: payoutBody({ amount: 51 }), idempotencyKey: "reuse" });
    expect(other.status).toBe(422);
    // A request that fails validation with a used key is told the key is taken, not given the answer.
    const invalid = await call("/payout", { key: acct.key, body: payoutBody({ amount: -5 }), idempotencyKey: "reuse" });
    expect(invalid.status).toBe(422);
    expect(invalid.text).not.toContain(good.body.id);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(1);
  });

  it("a claim-first route and an in-batch route sharing one key: whichever comes second answers 422 and moves no money", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const subBody = { user_id: user.id, plan_id: plan.id, ...cardFields() };
    // The subscription holds the key while its charge is at the processor.
    const release = gate();
    const calls = recordingProcessor((method) => (method === "chargeCard" ? release.opened : undefined));
    const sub = call("/subscriptions", { key: acct.key, body: subBody, idempotencyKey: "shared" });
    for (let i = 0; i < 400 && !calls.some((c) => c.method === "chargeCard"); i++) await new Promise((r) => setTimeout(r, 5));
    expect(calls.map((c) => c.method)).toEqual(["chargeCard"]);
    expect((await record(acct.id, "shared"))?.status).toBe("in_flight");
    const payout = await call("/payout", { key: acct.key, body: payoutBody({ amount: 99 }), idempotencyKey: "shared" });
    expect(payout.status, payout.text).toBe(422);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(0);
    release.open();
    expect((await sub).status).toBe(201);
    expect((await call("/payout", { key: acct.key, body: payoutBody({ amount: 99 }), idempotencyKey: "shared" })).status).toBe(422);

    // The other way round: the payout holds the key, and the first charge is never made.
    const before = calls.length;
    const first = await call("/payout", { key: acct.key, body: payoutBody({ amount: 98 }), idempotencyKey: "shared-2" });
    expect(first.status).toBe(201);
    const second = await call("/subscriptions", { key: acct.key, body: subBody, idempotencyKey: "shared-2" });
    expect(second.status, second.text).toBe(422);
    expect(calls.slice(before).filter((c) => c.method === "chargeCard")).toEqual([]);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(1);
  });

  it("the same key on two accounts, at once: two payouts, each account replays its own", async () => {
    const [a, b] = [await signup(), await signup()];
    const body = payoutBody({ amount: 1111 });
    const [ra, rb] = await Promise.all([a, b].map((acct) => call("/payout", { key: acct.key, body, idempotencyKey: "collide" })));
    expect([ra.status, rb.status]).toEqual([201, 201]);
    expect(ra.body.id).not.toBe(rb.body.id);
    const [replayA, replayB] = await Promise.all([a, b].map((acct) => call("/payout", { key: acct.key, body, idempotencyKey: "collide" })));
    expect(replayA.body.id).toBe(ra.body.id);
    expect(replayB.body.id).toBe(rb.body.id);
    // Each account's key is its own: a different body on one account is not judged by the other's record.
    expect((await call("/payout", { key: a.key, body: payoutBody({ amount: 1 }), idempotencyKey: "collide-a-only" })).status).toBe(201);
    expect((await call("/payout", { key: b.key, body: payoutBody({ amount: 2 }), idempotencyKey: "collide-a-only" })).status).toBe(201);
  });
});

// ---------------------------------------------------------------------------------------------

describe("expired keys (24 h)", () => {
  it("an expired key reused by two racing requests: one new payout; the same body replays it, another body answers 422", async () => {
    const acct = await signup();
    expect((await call("/payout", { key: acct.key, body: payoutBody({ amount: 10 }), idempotencyKey: "old" })).status).toBe(201);
    await expire(acct.id, "old");
    const held = gate();
    const db = faultyD1(env.DB, [], { gate: (o) => (recordsKey(o) ? held.opened : Promise.resolve()) });
    const a = fetchWith({ DB: db, ...quietQueues().env }, "/payout", request("/payout", { key: acct.key, body: payoutBody({ amount: 20 }), idempotencyKey: "old" }));
    for (let i = 0; i < 200 && !db.ops.some(recordsKey); i++) await new Promise((r) => setTimeout(r, 5));
    const b = await call("/payout", { key: acct.key, body: payoutBody({ amount: 30 }), idempotencyKey: "old" });
    expect(b.status, b.text).toBe(201);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    held.open();
    const ra = await a;
    expect(ra.status, ra.text).toBe(422);
    const c = await call("/payout", { key: acct.key, body: payoutBody({ amount: 30 }), idempotencyKey: "old" });
    expect(c.body.id).toBe(b.body.id);
    const rows = await env.DB.prepare("SELECT amount FROM payouts WHERE account_id = ? ORDER BY amount").bind(acct.id).all<{ amount: number }>();
    expect(rows.results.map((r) => r.amount)).toEqual([10, 30]);
  });

  it("an expired key is free on the error path too: a failing request gets its own error, never the 24-hour-old answer or 422", async () => {
    const acct = await signup();
    const fx = await seed(acct);
    // Cancel a payout with a key, then let the key's 24 hours pass (the cron has not swept it yet).
    const canceled = await call(`/payouts/${fx.payout}/cancel`, { key: acct.key, method: "POST", idempotencyKey: "stale" });
    expect(canceled.status).toBe(200);
    await expire(acct.id, "stale");
    // The same request a day later is a new request: the payout is no longer pending.
    const again = await call(`/payouts/${fx.payout}/cancel`, { key: acct.key, method: "POST", idempotencyKey: "stale" });
    expect(again.status, again.text).toBe(409);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
    // Another request with the expired key that fails: its own 404, not "key reused".
    const missing = await call("/refunds", { key: acct.key, body: { payment_id: "payment_00000000000000000000000000", amount: 1 }, idempotencyKey: "stale" });
    expect(missing.status, missing.text).toBe(404);
  });
});

// ---------------------------------------------------------------------------------------------

describe("credentials: revoked keys, scopes, and stored answers", () => {
  it("a key revoked while its request waits for its batch: 401, nothing made, no record; the key is free for a live credential", async () => {
    const acct = await signup();
    const restricted = await createKey(acct, ["payouts:write", "payouts:read"]);
    await warm(acct.key);
    const held = gate();
    const db = faultyD1(env.DB, [], { gate: (o) => (recordsKey(o) ? held.opened : Promise.resolve()) });
    const body = payoutBody({ amount: 321 });
    const pending = fetchWith({ DB: db, ...quietQueues().env }, "/payout", request("/payout", { key: restricted.secret, body, idempotencyKey: "rev" }));
    for (let i = 0; i < 200 && !db.ops.some(recordsKey); i++) await new Promise((r) => setTimeout(r, 5));
    expect((await call(`/api/keys/${restricted.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    held.open();
    const res = await pending;
    expect(res.status, res.text).toBe(401);
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(0);
    expect(await record(acct.id, "rev")).toBeNull();
    const live = await call("/payout", { key: acct.key, body, idempotencyKey: "rev" });
    expect(live.status).toBe(201);
    expect(live.headers.get("idempotent-replayed")).toBeNull();
  });

  it("a stored answer is never replayed to its revoked key, even one still cached in this isolate, on the batch path or the error path", async () => {
    const acct = await signup();
    const restricted = await createKey(acct, ["payouts:write", "payouts:read"]);
    const body = payoutBody({ amount: 432 });
    const first = await call("/payout", { key: restricted.secret, body, idempotencyKey: "leak" });
    expect(first.status).toBe(201);
    // Revoked in another isolate: this one's cache still holds the key as live.
    await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), restricted.id).run();
    const replay = await call("/payout", { key: restricted.secret, body, idempotencyKey: "leak" });
    expect(replay.status, replay.text).toBe(401);
    expect(replay.text).not.toContain(first.body.id);
    // A request refused before any D1 round trip (validation), with the same key: still 401, no leak.
    const invalid = await call("/payout", { key: restricted.secret, body: { ...body, amount: -1 }, idempotencyKey: "leak" });
    expect(invalid.status, invalid.text).toBe(401);
    expect(invalid.text).not.toContain(first.body.id);
  });

  it("a credential of the same account without the route's scope gets 403, not the stored answer", async () => {
    const acct = await signup();
    const body = payoutBody({ amount: 654 });
    const first = await call("/payout", { key: acct.key, body, idempotencyKey: "scoped" });
    expect(first.status).toBe(201);
    const reader = await createKey(acct, ["payouts:read", "users:write"]);
    const res = await call("/payout", { key: reader.secret, body, idempotencyKey: "scoped" });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("missing_scope");
    expect(res.text).not.toContain(first.body.id);
  });

  it("stored answers hold no secret: POST /api/keys, webhook create and rotate, replayed and as stored", async () => {
    const acct = await signup();
    const keyBody = { name: "replayed", scopes: ["users:read"] };
    const created = await call("/api/keys", { key: acct.key, body: keyBody, idempotencyKey: "sec-key" });
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^rk_/);
    const keyReplay = await call("/api/keys", { key: acct.key, body: keyBody, idempotencyKey: "sec-key" });
    expect(keyReplay.headers.get("idempotent-replayed")).toBe("true");
    expect(keyReplay.body).toEqual({ ...created.body, secret: null });

    const hookBody = { url: "https://receiver.example/hook", events: ["payout.paid"] };
    const hook = await call("/api/webhooks", { key: acct.key, body: hookBody, idempotencyKey: "sec-hook" });
    expect(hook.status, hook.text).toBe(201);
    expect(hook.body.secret).toMatch(/^whsec_/);
    const hookReplay = await call("/api/webhooks", { key: acct.key, body: hookBody, idempotencyKey: "sec-hook" });
    expect(hookReplay.body).toEqual({ ...hook.body, secret: null });

    const rotated = await call(`/api/webhooks/${hook.body.id}/rotate-secret`, { key: acct.key, method: "POST", idempotencyKey: "sec-rotate" });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    const rotateReplay = await call(`/api/webhooks/${hook.body.id}/rotate-secret`, { key: acct.key, method: "POST", idempotencyKey: "sec-rotate" });
    expect(rotateReplay.headers.get("idempotent-replayed")).toBe("true");
    expect(rotateReplay.body.secret).toBeNull();
    // The replay did not rotate again: the secret in force is the one the first answer showed.
    const endpoint = await env.DB.prepare("SELECT secret, previous_secret FROM webhook_endpoints WHERE id = ?").bind(hook.body.id).first<{ secret: string; previous_secret: string }>();
    expect(endpoint).toEqual({ secret: rotated.body.secret, previous_secret: hook.body.secret });

    const stored = await env.DB.prepare("SELECT response_body FROM idempotency_keys WHERE account_id = ?").bind(acct.id).all<{ response_body: string }>();
    expect(stored.results).toHaveLength(3);
    for (const row of stored.results) {
      for (const secret of [created.body.secret, hook.body.secret, rotated.body.secret]) expect(row.response_body).not.toContain(secret);
      expect(row.response_body).not.toMatch(/whsec_[A-Za-z0-9]/);
    }
  });

  it("a lost answer of POST /api/keys (commit, then the connection drops) is answered from the record: no secret there either", async () => {
    const acct = await signup();
    const db = faultyD1(env.DB, { kind: "commit_then_throw", when: recordsKey });
    const res = await fetchWith({ DB: db }, "/api/keys", request("/api/keys", { key: acct.key, body: { name: "lost", scopes: ["users:read"] }, idempotencyKey: "lost-key" }));
    expect(db.fired).toHaveLength(1);
    expect(res.status).toBe(201);
    expect(res.body.secret).toBeNull();
    expect(await countRows("api_keys", "account_id = ? AND name = 'lost'", acct.id)).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------

describe("money moves only under a claimed key", () => {
  it("no operation that records its key in its batch calls the processor to move money during the request", async () => {
    // Deletions last, so every operation finds its fixture (a detached card can be made the default no more; and the void of the open invoice after its credit note).
    const last = new Set(["voidInvoice", "deleteWebhook", "revokeKey", "detachPaymentMethod"]);
    const ops = (await operations())
      .filter((op) => op.method !== "get" && !op.isPublic && !CLAIM_FIRST.has(op.operationId))
      .sort((a, b) => Number(last.has(a.operationId)) - Number(last.has(b.operationId)));
    const acct = await signup();
    const fx = await seed(acct);
    const calls = recordingProcessor();
    for (const op of ops) {
      const path = op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path;
      const key = op.operationId === "disconnectProcessor" ? acct.liveKey : await credentialFor(op, acct);
      const res = await fetchWith(quietQueues().env, path, request(path, { key, method: op.method.toUpperCase(), body: validBody(op, fx), idempotencyKey: `money-${op.operationId}` }));
      expect(res.status, `${label(op)}: ${res.text}`).toBeLessThan(300);
    }
    expect(calls).toEqual([]);
  }, 120_000);

  it("every route file that reaches a money-moving call declares claimFirst", () => {
    const sources = import.meta.glob<string>("../../src/routes/**/*.ts", { query: "?raw", import: "default", eager: true });
    const moving = /\b(chargeCard|chargeToken|sendPayout|chargePeriod|chargePastDue|runTestClock|renewChunk)\s*\(|\bcharge\s*\(\s*\{|\.refund\s*\(/;
    const files = Object.entries(sources).filter(([, text]) => moving.test(text));
    expect(files.map(([file]) => file).sort()).toEqual([
      "../../src/routes/invoices/pay.ts",
      "../../src/routes/subscriptions/changes.ts",
      "../../src/routes/subscriptions/create.ts",
      "../../src/routes/subscriptions/update.ts",
      "../../src/routes/test-clocks/index.ts",
    ]);
    // A route declares it; a helper module of routes (no route of its own) is called only by routes that do.
    for (const [file, text] of files) {
      if (/\b(apiRoute|createRoute)\(/.test(text)) expect(text, file).toMatch(/claimFirst:\s*true/);
      else {
        const name = file.split("/").pop()!.replace(/\.ts$/, "");
        const callers = Object.entries(sources).filter(([other, source]) => other !== file && source.includes(`from "./${name}"`));
        expect(callers.length, `${file} is called by a route`).toBeGreaterThan(0);
        for (const [caller, source] of callers) expect(source, `${caller}, which calls ${file}`).toMatch(/claimFirst:\s*true/);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe("a route that answers 2xx without a batch of its own", () => {
  /** The idempotency middleware alone, in front of a handler that writes nothing. */
  async function bareApp(acct: Account) {
    const keyId = await secretKeyId(acct);
    let runs = 0;
    const app = new Hono<AppEnv>();
    app.onError((error, c) => {
      if (error instanceof ApiError) return c.json(error.body("req_test") as never, error.status as never);
      return c.json({ error: String(error) }, 500);
    });
    app.use(async (c, next) => {
      c.set("db", createDb(c.env.DB));
      c.set("requestId", "req_test");
      c.set("auth", { shard: TEST_SHARD, accountId: acct.id, keyId, mode: "test", livemode: false, scopes: ["*"], credential: "secret_key", apiVersion: "2026-11-22" });
      c.set("jsonBody", await c.req.json().catch(() => null));
      await next();
    });
    app.post("/bare", idempotency({ claimFirst: false }), (c) => c.json({ run: ++runs, secret: "shown-once" }, 200));
    const send = async (body: unknown, key: string) => {
      const res = await app.request("/bare", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", "idempotency-key": key } }, env);
      return { status: res.status, replayed: res.headers.get("idempotent-replayed"), body: (await res.json()) as any };
    };
    return { send, runs: () => runs };
  }

  it("its answer is stored without secrets and replayed; another body answers 422", async () => {
    const acct = await signup();
    const bare = await bareApp(acct);
    const first = await bare.send({ a: 1 }, "bare-1");
    expect(first).toEqual({ status: 200, replayed: null, body: { run: 1, secret: "shown-once" } });
    const again = await bare.send({ a: 1 }, "bare-1");
    expect(again).toEqual({ status: 200, replayed: "true", body: { run: 1, secret: null } });
    expect((await bare.send({ a: 2 }, "bare-1")).status).toBe(422);
  });

  it("an expired record does not hold the key: a new request with it is stored and answered as new", async () => {
    const acct = await signup();
    const bare = await bareApp(acct);
    expect((await bare.send({ a: 1 }, "bare-old")).status).toBe(200);
    await expire(acct.id, "bare-old");
    const fresh = await bare.send({ a: 2 }, "bare-old");
    expect(fresh.status, JSON.stringify(fresh.body)).toBe(200);
    expect(fresh.replayed).toBeNull();
    expect(fresh.body.run).toBe(bare.runs());
    // The new answer is the stored one now.
    const replay = await bare.send({ a: 2 }, "bare-old");
    expect(replay).toEqual({ status: 200, replayed: "true", body: { run: fresh.body.run, secret: null } });
  });
});

// ---------------------------------------------------------------------------------------------

describe("the error path's cost", () => {
  it("an error answer with an Idempotency-Key costs at most one round trip more than without", async () => {
    const acct = await signup();
    await warm(acct.key);
    const missingHook = "/api/webhooks/we_00000000000000000000000000";
    const plain = await call(missingHook, { key: acct.key, method: "DELETE" });
    expect(plain.status).toBe(404);
    const keyed = await call(missingHook, { key: acct.key, method: "DELETE", idempotencyKey: "err-cost" });
    expect(keyed.status).toBe(404);
    expect(roundTrips(keyed)).toBeLessThanOrEqual(roundTrips(plain) + 1);
    const invalidPlain = await call("/payout", { key: acct.key, body: payoutBody({ amount: -1 }) });
    const invalidKeyed = await call("/payout", { key: acct.key, body: payoutBody({ amount: -1 }), idempotencyKey: "err-cost-2" });
    expect([invalidPlain.status, invalidKeyed.status]).toEqual([400, 400]);
    expect(roundTrips(invalidKeyed)).toBeLessThanOrEqual(roundTrips(invalidPlain) + 1);
  });
});

