// Review of the gathered delivery batches (src/db/gathered.ts, handleDeliveryBatch in
// src/webhooks/consumer.ts): failures of a shared batch, duplicates and ordered endpoints in one
// queue batch. Real local D1 through the fault wrapper of test/support/faults.ts; only the
// receiver is faked.
import { env as runtime } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import worker from "../../src/index";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { OTHER_SHARD, TEST_SHARD, env, envOf } from "../support/env";
import { handleDeliveryBatch } from "../../src/webhooks/consumer";
import { call, signup, withEnv } from "../support/http";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { useClock } from "../../src/lib/clock";
import { purgeExpiredEvents } from "../../src/webhooks/retention";
import { createUser } from "../support/fixtures";
import { countOf, deliveryRow, one } from "../support/db";
import { faultyD1, recordingQueue } from "../support/faults";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

const recordedEnv = (db: D1Database) => ({ ...(runtime as unknown as Record<string, unknown>), [`DB_${TEST_SHARD}`]: db });
const messages = (ids: string[]) =>
  createMessageBatch(
    "tender-webhook-deliveries",
    ids.map((deliveryId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { deliveryId, shard: TEST_SHARD } })),
  );
const isAttempt = (s: string) => /^\s*insert into "delivery_attempts"/i.test(s);
const isClaim = (s: string) => /^update "webhook_deliveries" set "attempt_count"/i.test(s);

const deliveryOf = (endpointId: string, eventType: string) =>
  waitFor(async () => {
    const row = await one<{ id: string; status: string }>(
      "SELECT d.id, d.status FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.endpoint_id = ? AND e.type = ?",
      endpointId,
      eventType,
    );
    expect(row?.status).toBe("delivered");
    return row!.id;
  });

const owners = new Map<string, { key: string; endpoint: string; account: string }>();

/** A customer.created delivery to a new unordered endpoint, delivered, then pending again as a redelivery leaves it. */
async function pendingDelivery(path = "/other") {
  const acct = await signup();
  const hook = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events: ["customer.created"] } })).body as { id: string };
  await createUser(acct, { name: "Ada" });
  const id = await deliveryOf(hook.id, "customer.created");
  await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, lease_until = NULL, delivered_at = NULL WHERE id = ?").bind(id).run();
  owners.set(id, { key: acct.key, endpoint: hook.id, account: acct.id });
  return id;
}

/**
 * On a per_object endpoint: a user's customer.created delivery pending again, and its
 * customer.updated delivery pending and waiting for it (as the consumer leaves it).
 */
async function orderedPair() {
  const acct = await signup();
  const hook = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/ordered`, events: ["customer.created", "customer.updated"], ordering: "per_object" } }))
    .body as { id: string };
  const user = await createUser(acct, { name: "Ada" });
  const first = await deliveryOf(hook.id, "customer.created");
  expect((await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Ada B", email: "ada@example.com" } })).status).toBe(200);
  const second = await deliveryOf(hook.id, "customer.updated");
  await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, lease_until = NULL, delivered_at = NULL WHERE id = ?").bind(first).run();
  await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, lease_until = NULL, delivered_at = NULL, waiting_for = ? WHERE id = ?")
    .bind(first, second)
    .run();
  return { first, second };
}

it("a shared record batch that commits but loses its answer still wakes the ordered delivery that waited (its message is acked, so nothing else would before the sweeper)", async () => {
  const { first, second } = await orderedPair();
  const other = await pendingDelivery();
  const db = faultyD1(env.DB, { kind: "commit_then_throw", when: (op) => op.sql.filter(isAttempt).length > 1 });
  await handleDeliveryBatch(messages([first, other]), recordedEnv(db) as never, 60_000);
  expect(db.fired).toHaveLength(1);
  expect((await deliveryRow(first))!.status).toBe("delivered");
  expect((await deliveryRow(other))!.status).toBe("delivered");
  // Each attempt recorded once although its statements were sent twice.
  expect(await countOf("SELECT count(*) AS n FROM delivery_attempts WHERE delivery_id = ?", first)).toBe(2);
  expect(await countOf("SELECT count(*) AS n FROM delivery_attempts WHERE delivery_id = ?", other)).toBe(2);
  // The waiting one goes out now (through the real queue), not when the sweeper next looks.
  await waitFor(async () => expect((await deliveryRow(second))!.status).toBe("delivered"), 8_000);
});

const attempts = (id: string) => countOf("SELECT count(*) AS n FROM delivery_attempts WHERE delivery_id = ?", id);
async function runQueue(ids: string[], db: D1Database) {
  const batch = messages(ids);
  const ctx = createExecutionContext();
  await worker.queue(batch, recordedEnv(db) as never, ctx);
  const result = await getQueueResult(batch, ctx);
  return { acked: [...result.explicitAcks].sort(), retried: result.retryMessages.map((m) => m.msgId).sort() };
}

it("a claims batch that fails on one message's statement: the others are claimed and sent once and acked, that one is retried unclaimed", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery(), await pendingDelivery()];
  const before = receiver.received.length;
  const db = faultyD1(env.DB, [
    { kind: "fail_before_commit", on: "any", when: (op) => op.sql.filter(isClaim).length > 1, error: () => new Error("D1_ERROR: CHECK constraint failed") },
    // Sent again alone, in the batch's order: the second message's claim fails again.
    { kind: "fail_before_commit", on: "any", when: (op) => op.sql.filter(isClaim).length === 1, nth: 1, error: () => new Error("D1_ERROR: CHECK constraint failed") },
  ]);
  const { acked, retried } = await runQueue(ids, db);
  expect(db.fired).toHaveLength(2);
  expect(acked).toEqual(["m0", "m2"]);
  expect(retried).toEqual(["m1"]);
  expect(receiver.received.length).toBe(before + 2);
  for (const id of [ids[0], ids[2]]) {
    expect((await deliveryRow(id))!.status).toBe("delivered");
    expect(await attempts(id)).toBe(2);
  }
  // Unclaimed: no lease holds it back from its retry.
  const unclaimed = (await deliveryRow(ids[1]))!;
  expect(unclaimed.status).toBe("pending");
  expect(unclaimed.lease_until ?? null).toBeNull();
  expect(await attempts(ids[1])).toBe(1);
});

it("a records batch that fails after the POSTs, and one message's record again alone: the others recorded once and acked, that one retried, nobody sent twice", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery(), await pendingDelivery()];
  const before = receiver.received.length;
  const db = faultyD1(env.DB, [
    { kind: "fail_before_commit", on: "any", when: (op) => op.sql.filter(isAttempt).length > 1 },
    { kind: "fail_before_commit", on: "any", when: (op) => op.sql.filter(isAttempt).length === 1, nth: 2 },
  ]);
  const { acked, retried } = await runQueue(ids, db);
  expect(db.fired).toHaveLength(2);
  expect(acked).toEqual(["m0", "m1"]);
  expect(retried).toEqual(["m2"]);
  expect(receiver.received.length).toBe(before + 3);
  for (const id of [ids[0], ids[1]]) expect(await attempts(id)).toBe(2);
  // Its retry finds the lease of the attempt whose record was lost and sends nothing now.
  const again = await runQueue([ids[2]], env.DB);
  expect(again.acked).toEqual(["m0"]);
  expect(receiver.received.length).toBe(before + 3);
});

it("two consumers with overlapping batches: each delivery sent and recorded once, attempt numbers unique", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery(), await pendingDelivery(), await pendingDelivery()];
  const before = receiver.received.length;
  const [one_, two] = await Promise.all([runQueue([ids[0], ids[1], ids[2]], env.DB), runQueue([ids[1], ids[2], ids[3]], env.DB)]);
  expect(one_.retried).toEqual([]);
  expect(two.retried).toEqual([]);
  expect(receiver.received.length).toBe(before + 4);
  for (const id of ids) {
    expect((await deliveryRow(id))!.status).toBe("delivered");
    expect(await attempts(id)).toBe(2);
    expect(await countOf("SELECT count(DISTINCT attempt_number) AS n FROM delivery_attempts WHERE delivery_id = ?", id)).toBe(2);
  }
});

it("a slow receiver holds back the others' records by the linger at most, not by its own answer", async () => {
  const fast = [await pendingDelivery(), await pendingDelivery()];
  const slow = await pendingDelivery();
  await env.DB.prepare("UPDATE webhook_endpoints SET url = ? WHERE id = (SELECT endpoint_id FROM webhook_deliveries WHERE id = ?)").bind(`${RECEIVER_ORIGIN}/slow`, slow).run();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  // This test's own receiver (the shared one's spy is replaced, not wrapped): /slow answers once released.
  receiver.restore();
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new Request(input, init).url;
    if (url === `${RECEIVER_ORIGIN}/slow`) await held;
    return new Response("ok", { status: 200 });
  });
  try {
    const run = handleDeliveryBatch(messages([fast[0], slow, fast[1]]), recordedEnv(env.DB) as never);
    await waitFor(async () => {
      for (const id of fast) expect((await deliveryRow(id))!.status).toBe("delivered");
    }, 5_000);
    expect(await attempts(slow)).toBe(1);
    release();
    await run;
  } finally {
    release();
    spy.mockRestore();
  }
  expect((await deliveryRow(slow))!.status).toBe("delivered");
  expect(await attempts(slow)).toBe(2);
});

it("a Worker that dies between the POST and the record: the redelivered message sends nothing while the lease holds, the sweeper's sends it again once (a duplicate the at-least-once rule allows), attempt numbers unique", async () => {
  const id = await pendingDelivery();
  const before = receiver.received.length;
  // The record never lands (the Worker died after the POST): the message is retried.
  const dead = faultyD1(env.DB, { kind: "fail_before_commit", on: "any", when: (op) => op.sql.some(isAttempt), times: 10 });
  expect((await runQueue([id], dead)).retried).toEqual(["m0"]);
  expect(receiver.received.length).toBe(before + 1);
  // Redelivered at once: the attempt's lease holds it.
  expect((await runQueue([id], env.DB)).acked).toEqual(["m0"]);
  expect(receiver.received.length).toBe(before + 1);
  const start = Date.now();
  try {
    useClock({ now: () => start + 120_000 });
    const swept = recordingQueue();
    await sweepDeliveries(withEnv({ DELIVERY_QUEUE: swept }));
    expect(swept.sent.map((b) => (b as { deliveryId: string }).deliveryId)).toContain(id);
    expect((await runQueue([id, id], env.DB)).acked).toEqual(["m0", "m1"]);
  } finally {
    useClock();
  }
  expect(receiver.received.length).toBe(before + 2);
  expect((await deliveryRow(id))!.status).toBe("delivered");
  const numbers = (await env.DB.prepare("SELECT attempt_number FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt_number").bind(id).all<{ attempt_number: number }>()).results;
  // The first delivery's attempt, then the swept one's; the dead attempt (2) left no record.
  expect(numbers.map((r) => r.attempt_number)).toEqual([1, 3]);
});

it("an endpoint disabled after the batch read its deliveries, before their claims: nothing is sent to it, the others go out, every message acked", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery("/disabled"), await pendingDelivery()];
  const before = receiver.received.length;
  const { key, endpoint } = owners.get(ids[1])!;
  let disabled = false;
  const db = faultyD1(env.DB, [], {
    gate: async (op) => {
      if (disabled || !op.sql.some(isClaim)) return;
      disabled = true;
      expect((await call(`/api/webhooks/${endpoint}`, { key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    },
  });
  const { acked, retried } = await runQueue(ids, db);
  expect(disabled).toBe(true);
  expect(acked).toEqual(["m0", "m1", "m2"]);
  expect(retried).toEqual([]);
  expect(receiver.received.slice(before).map((r) => new URL(r.url).pathname)).toEqual(["/other", "/other"]);
  expect((await deliveryRow(ids[1]))!.status).toBe("failed");
  expect(await attempts(ids[1])).toBe(1);
  for (const id of [ids[0], ids[2]]) expect((await deliveryRow(id))!.status).toBe("delivered");
});

it("a throttled endpoint's deliveries in a batch with others: the others go out and are recorded together, the throttled endpoint's second waits for its slot, nothing lost", async () => {
  const first = await pendingDelivery("/throttled");
  const { key, endpoint } = owners.get(first)!;
  expect((await call(`/api/webhooks/${endpoint}`, { key, method: "PATCH", body: { rate_limit: 1 } })).status).toBe(200);
  // A second delivery to the same endpoint (another customer).
  const acct = { id: "", key };
  await createUser(acct as never, { name: "Bob" });
  const second = await waitFor(async () => {
    const row = await one<{ id: string }>(
      "SELECT d.id FROM webhook_deliveries d WHERE d.endpoint_id = ? AND d.id <> ? ORDER BY d.created_at DESC LIMIT 1",
      endpoint,
      first,
    );
    expect(row).toBeTruthy();
    return row!.id;
  });
  // Whatever the queue did with it, both pending again with the endpoint's budget unused for a while.
  await new Promise((r) => setTimeout(r, 50));
  const others = [await pendingDelivery(), await pendingDelivery()];
  const before = receiver.received.length;
  const { acked, retried } = await runQueue([others[0], first, second, others[1]], env.DB);
  expect(retried).toEqual([]);
  expect(acked).toEqual(["m0", "m1", "m2", "m3"]);
  for (const id of others) expect((await deliveryRow(id))!.status).toBe("delivered");
  const sentThrottled = receiver.received.slice(before).filter((r) => r.url.endsWith("/throttled")).length;
  expect(sentThrottled).toBeLessThanOrEqual(1);
  // Each throttled delivery is either delivered or pending with its next attempt set (held by the endpoint's object).
  for (const id of [first, second]) {
    const row = (await deliveryRow(id))!;
    expect(["delivered", "pending"]).toContain(row.status);
    if (row.status === "pending") expect(row.next_attempt_at).not.toBeNull();
  }
});

it("an account moved to another shard between its delivery's POST and the record: nothing is left behind on the shard it left, the others are recorded, every message acked", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery("/moving"), await pendingDelivery()];
  const { account } = owners.get(ids[1])!;
  let moved = false;
  const db = faultyD1(env.DB, [], {
    gate: async (op) => {
      if (moved || !op.sql.some(isAttempt)) return;
      moved = true;
      const res = await call(`/api/accounts/${account}/move`, { body: { to_shard: OTHER_SHARD, drain_seconds: 0 } });
      expect(res.status, res.text).toBe(200);
    },
  });
  const { acked, retried } = await runQueue(ids, db);
  expect(moved).toBe(true);
  expect(retried).toEqual([]);
  expect(acked).toEqual(["m0", "m1", "m2"]);
  for (const id of [ids[0], ids[2]]) {
    expect((await deliveryRow(id))!.status).toBe("delivered");
    expect(await attempts(id)).toBe(2);
  }
  expect(await countOf("SELECT count(*) AS n FROM delivery_attempts WHERE account_id = ?", account)).toBe(0);
  expect(await countOf("SELECT count(*) AS n FROM webhook_deliveries WHERE account_id = ?", account)).toBe(0);
  // On its new shard the delivery is still there, pending (its 2xx recorded nowhere: the sweeper sends it again, as at-least-once allows) or delivered.
  const there = await envOf(OTHER_SHARD).DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(ids[1]).first<{ status: string }>();
  expect(["pending", "delivered"]).toContain(there!.status);
});

it("a queue batch of two shards: each shard's deliveries read, claimed and recorded in its own batches, every one sent once", async () => {
  const here = [await pendingDelivery(), await pendingDelivery()];
  const away = [await pendingDelivery(), await pendingDelivery()];
  for (const id of away) {
    const res = await call(`/api/accounts/${owners.get(id)!.account}/move`, { body: { to_shard: OTHER_SHARD, drain_seconds: 0 } });
    expect(res.status, res.text).toBe(200);
    await envOf(OTHER_SHARD).DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, lease_until = NULL, delivered_at = NULL WHERE id = ?").bind(id).run();
  }
  const dbHere = faultyD1(env.DB);
  const dbAway = faultyD1(envOf(OTHER_SHARD).DB);
  const batch = createMessageBatch(
    "tender-webhook-deliveries",
    [here[0], away[0], here[1], away[1]].map((deliveryId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { deliveryId, shard: i % 2 === 0 ? TEST_SHARD : OTHER_SHARD } })),
  );
  const before = receiver.received.length;
  const ctx = createExecutionContext();
  await worker.queue(batch, { ...(runtime as unknown as Record<string, unknown>), [`DB_${TEST_SHARD}`]: dbHere, [`DB_${OTHER_SHARD}`]: dbAway } as never, ctx);
  const result = await getQueueResult(batch, ctx);
  expect([...result.explicitAcks].sort()).toEqual(["m0", "m1", "m2", "m3"]);
  expect(receiver.received.length).toBe(before + 4);
  for (const [db, ids] of [[dbHere, here], [dbAway, away]] as const) {
    expect(db.ops.map((op) => op.kind)).toEqual(["statement", "batch", "batch"]);
    expect(db.ops[1].sql.filter(isClaim)).toHaveLength(2);
    expect(db.ops[2].sql.filter(isAttempt)).toHaveLength(2);
    for (const id of ids) {
      const row = await (db === dbHere ? env : envOf(OTHER_SHARD)).DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(id).first<{ status: string }>();
      expect(row!.status).toBe("delivered");
    }
  }
});

it("two deliveries of one object to a per_object endpoint in one batch, the later one first: sent once each, in the object's order", async () => {
  const { first, second } = await orderedPair();
  await env.DB.prepare("UPDATE webhook_deliveries SET waiting_for = NULL WHERE id = ?").bind(second).run();
  const before = receiver.received.length;
  const { acked, retried } = await runQueue([second, first], env.DB);
  expect(retried).toEqual([]);
  expect(acked).toEqual(["m0", "m1"]);
  // The later one waited; the earlier one's record woke it (through the real queue).
  await waitFor(async () => expect((await deliveryRow(second))!.status).toBe("delivered"), 8_000);
  const sent = receiver.received.slice(before).filter((r) => r.url.endsWith("/ordered")).map((r) => (JSON.parse(r.body) as { type: string }).type);
  expect(sent).toEqual(["customer.created", "customer.updated"]);
  expect(await attempts(first)).toBe(2);
  expect(await attempts(second)).toBe(2);
});

it("the same delivery twice in a batch whose shared claims batch fails: sent again one by one, the delivery is claimed and sent once, both messages acked", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery()];
  const before = receiver.received.length;
  const db = faultyD1(env.DB, { kind: "fail_before_commit", on: "any", when: (op) => op.sql.filter(isClaim).length > 1 });
  const { acked, retried } = await runQueue([ids[0], ids[1], ids[0]], db);
  expect(db.fired).toHaveLength(1);
  expect(retried).toEqual([]);
  expect(acked).toEqual(["m0", "m1", "m2"]);
  expect(receiver.received.length).toBe(before + 2);
  for (const id of ids) {
    expect((await deliveryRow(id))!.status).toBe("delivered");
    expect(await attempts(id)).toBe(2);
  }
});

// Last in the file: the purge runs a year ahead over this shard.
it("a purge between the batch's read and its claims: the pending deliveries and their events stay, each sent and recorded once", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery()];
  let purged = false;
  const db = faultyD1(env.DB, [], {
    gate: async (op) => {
      if (purged || !op.sql.some(isClaim)) return;
      purged = true;
      await purgeExpiredEvents(env, Date.now() + 400 * 86_400_000, 1000);
    },
  });
  const before = receiver.received.length;
  const { acked, retried } = await runQueue(ids, db);
  expect(purged).toBe(true);
  expect(retried).toEqual([]);
  expect(acked).toEqual(["m0", "m1"]);
  expect(receiver.received.length).toBe(before + 2);
  for (const id of ids) {
    expect((await deliveryRow(id))!.status).toBe("delivered");
    expect(await countOf("SELECT count(*) AS n FROM delivery_attempts WHERE delivery_id = ? AND attempt_number = 2", id)).toBe(1);
  }
});
