// Review of the gathered delivery batches (src/db/gathered.ts, handleDeliveryBatch in
// src/webhooks/consumer.ts): failures of a shared batch, duplicates and ordered endpoints in one
// queue batch. Real local D1 through the fault wrapper of test/support/faults.ts; only the
// receiver is faked.
import { env as runtime } from "cloudflare:workers";
import { createMessageBatch } from "cloudflare:test";
import { afterEach, beforeEach, expect, it } from "vitest";
import { TEST_SHARD, env } from "../support/env";
import { handleDeliveryBatch } from "../../src/webhooks/consumer";
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

/** A customer.created delivery to a new unordered endpoint, delivered, then pending again as a redelivery leaves it. */
async function pendingDelivery() {
  const acct = await signup();
  const hook = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/other`, events: ["customer.created"] } })).body as { id: string };
  await createUser(acct, { name: "Ada" });
  const id = await deliveryOf(hook.id, "customer.created");
  await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = NULL, next_attempt_at = NULL, lease_until = NULL, delivered_at = NULL WHERE id = ?").bind(id).run();
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
