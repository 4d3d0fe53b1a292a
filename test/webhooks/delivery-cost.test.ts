// What one delivery costs in round trips to D1 (issue 35's delivery speed): counted on the real
// local D1 through the recording wrapper of test/support/faults.ts (nothing is faked but the
// receiver). No timing: the number of round trips is what the consumer controls.
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env as runtime } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TEST_SHARD, env } from "../support/env";
import worker from "../../src/index";
import { handleDeliveryBatch, processDelivery } from "../../src/webhooks/consumer";
import { createDb } from "../../src/db/client";
import { rawStatement } from "../../src/db/batch";
import { gatherBatches } from "../../src/db/gathered";
import { sql } from "drizzle-orm";
import { call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { countOf, deliveryRow, one } from "../support/db";
import { faultyD1 } from "../support/faults";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

/** A customer.created delivery to a new endpoint, delivered once by the queue, then pending again as a redelivery leaves it. */
async function pendingDelivery(ordering: "none" | "per_object" = "none") {
  const acct = await signup();
  const hook = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/cost`, events: ["customer.created"], ordering } })).body as { id: string };
  const user = await createUser(acct, { name: "Ada" });
  const { id } = await waitFor(async () => {
    const row = await one<{ id: string; status: string }>(
      "SELECT d.id, d.status FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.endpoint_id = ? AND e.object_id = ?",
      hook.id,
      user.id,
    );
    expect(row?.status).toBe("delivered");
    return row;
  });
  await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, lease_until = NULL, delivered_at = NULL WHERE id = ?")
    .bind(id)
    .run();
  return id;
}

it.each([
  ["none", 3],
  ["per_object", 4],
] as const)("a first attempt that gets a 2xx (ordering %s) takes %i round trips: the read, (on an ordered endpoint, the look for an earlier pending one,) the claim, and one batch that records it and reads who waited", async (ordering, trips) => {
  const id = await pendingDelivery(ordering);
  const db = faultyD1(env.DB);
  const before = receiver.received.length;
  expect(await processDelivery({ ...env, DB: db }, id)).toBe("delivered");
  expect(receiver.received.length).toBe(before + 1);
  expect((await deliveryRow(id))!.status).toBe("delivered");
  expect(db.ops.map((op) => op.kind)).toEqual([...Array(trips - 1).fill("statement"), "batch"]);
  // The batch ends with the read of the deliveries waiting for this one (an object's event).
  expect(db.ops.at(-1)!.sql.at(-1)).toMatch(/^select .*"waiting_for"/i);
});

/** The runtime's bindings with this shard's database recorded: the consumer opens each message's shard. */
const recordedEnv = (db: D1Database) => ({ ...(runtime as unknown as Record<string, unknown>), [`DB_${TEST_SHARD}`]: db });

const messages = (ids: string[]) =>
  createMessageBatch(
    "tender-webhook-deliveries",
    ids.map((deliveryId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { deliveryId, shard: TEST_SHARD } })),
  );

const isClaim = (s: string) => /^update "webhook_deliveries" set "attempt_count"/i.test(s);
const isAttempt = (s: string) => /^\s*insert into "delivery_attempts"/i.test(s);

it("a queue batch reads its deliveries in one statement, claims them in one batch and records them in one batch", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery(), await pendingDelivery()];
  const db = faultyD1(env.DB);
  const batch = messages(ids);
  const before = receiver.received.length;
  // The records wait for every attempt still out however long it takes (the 20 ms cap is not what is tested here).
  await handleDeliveryBatch(batch, recordedEnv(db) as never, 60_000);
  expect(receiver.received.length).toBe(before + 3);
  for (const id of ids) expect((await deliveryRow(id))!.status).toBe("delivered");
  expect(db.ops.map((op) => op.kind)).toEqual(["statement", "batch", "batch"]);
  expect(db.ops[1].sql.filter(isClaim)).toHaveLength(3);
  expect(db.ops[2].sql.filter(isAttempt)).toHaveLength(3);
});

it("a queue batch with an ordered endpoint and a duplicate message: one read, every claim and record made once, the duplicate sends nothing", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery("per_object"), await pendingDelivery()];
  const db = faultyD1(env.DB);
  const before = receiver.received.length;
  // The first delivery twice: the second message finds it claimed, or delivered, and sends nothing.
  const batch = messages([...ids, ids[0]]);
  const ctx = createExecutionContext();
  await worker.queue(batch, recordedEnv(db) as never, ctx);
  const result = await getQueueResult(batch, ctx);
  expect(result.explicitAcks.sort()).toEqual(["m0", "m1", "m2", "m3"]);
  expect(receiver.received.length).toBe(before + 3);
  for (const id of ids) expect((await deliveryRow(id))!.status).toBe("delivered");
  const reads = db.ops.filter((op) => op.kind === "statement" && /^select .* from "webhook_deliveries" inner join "events"/i.test(op.sql[0]) && !/"sequence" </.test(op.sql[0]));
  expect(reads).toHaveLength(1);
  const statements = db.ops.flatMap((op) => op.sql);
  expect(statements.filter(isClaim)).toHaveLength(4);
  expect(statements.filter(isAttempt)).toHaveLength(3);
  // The unordered deliveries and the duplicate claim together; the ordered one looks for an earlier
  // delivery first, and claims with them or after them.
  expect(db.ops.filter((op) => op.sql.some(isClaim)).length).toBeLessThanOrEqual(2);
  expect(db.ops.some((op) => op.sql.filter(isClaim).length >= 3)).toBe(true);
});

it("a gathered record batch that fails is sent again one delivery at a time: every attempt is recorded once", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery(), await pendingDelivery()];
  const db = faultyD1(env.DB, { kind: "fail_before_commit", when: (op) => op.sql.filter(isAttempt).length > 1 });
  const before = receiver.received.length;
  await handleDeliveryBatch(messages(ids), recordedEnv(db) as never, 60_000);
  expect(db.fired).toHaveLength(1);
  expect(receiver.received.length).toBe(before + 3);
  for (const id of ids) {
    expect((await deliveryRow(id))!.status).toBe("delivered");
    // The first attempt (before the delivery was made pending again) and this one.
    expect(await countOf("SELECT count(*) AS n FROM delivery_attempts WHERE delivery_id = ?", id)).toBe(2);
  }
});

describe("gatherBatches", () => {
  const select = (db: ReturnType<typeof createDb>, n: number) => rawStatement(db, sql`SELECT ${n} AS n`);
  const value = (result: unknown) => (result as { results: { n: number }[] }).results[0].n;

  it("sends the holders' statements as one batch once every holder is in it or has left, each getting its own results", async () => {
    const d1 = faultyD1(env.DB);
    const db = createDb(d1);
    const gathering = gatherBatches(db, 60_000);
    const [a, b, c] = [gathering.ticket(), gathering.ticket(), gathering.ticket()];
    const ran = Promise.all([a.run([select(db, 1), select(db, 2)]), b.run([select(db, 3)])]);
    c.leave();
    const [first, second] = await ran;
    expect(first.map(value)).toEqual([1, 2]);
    expect(second.map(value)).toEqual([3]);
    expect(d1.ops.map((op) => [op.kind, op.sql.length])).toEqual([["batch", 3]]);
  });

  it("does not wait longer than its linger for a holder that never comes", async () => {
    const d1 = faultyD1(env.DB);
    const db = createDb(d1);
    const gathering = gatherBatches(db, 30);
    const [a, b] = [gathering.ticket(), gathering.ticket()];
    gathering.ticket(); // never runs, never leaves
    const results = await Promise.all([a.run([select(db, 1)]), b.run([select(db, 2)])]);
    expect(results.map((r) => value(r[0]))).toEqual([1, 2]);
    expect(d1.ops.map((op) => [op.kind, op.sql.length])).toEqual([["batch", 2]]);
  });

  it("a shared batch that fails reaches only the holder whose own statements fail", async () => {
    const d1 = faultyD1(env.DB);
    const db = createDb(d1);
    const gathering = gatherBatches(db, 60_000);
    const [a, b] = [gathering.ticket(), gathering.ticket()];
    const good = a.run([select(db, 1)]);
    const bad = b.run([rawStatement(db, sql`SELECT * FROM no_such_table`)]);
    expect(value((await good)[0])).toBe(1);
    await expect(bad).rejects.toThrow(/no such table/);
    expect(d1.ops.map((op) => [op.kind, op.sql.length])).toEqual([["batch", 2], ["batch", 1], ["batch", 1]]);
  });
});
