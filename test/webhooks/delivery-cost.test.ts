// What one delivery costs in round trips to D1 (issue 35's delivery speed): counted on the real
// local D1 through the recording wrapper of test/support/faults.ts (nothing is faked but the
// receiver). No timing: the number of round trips is what the consumer controls.
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env as runtime } from "cloudflare:workers";
import { afterEach, beforeEach, expect, it } from "vitest";
import { TEST_SHARD, env } from "../support/env";
import worker from "../../src/index";
import { processDelivery } from "../../src/webhooks/consumer";
import { call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveryRow, one } from "../support/db";
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

it("a queue batch reads its deliveries in one statement, then each is claimed and recorded on its own", async () => {
  const ids = [await pendingDelivery(), await pendingDelivery("per_object"), await pendingDelivery()];
  const db = faultyD1(env.DB);
  // The runtime's bindings with this shard's database recorded: the consumer opens each message's shard.
  const recorded = { ...(runtime as unknown as Record<string, unknown>), [`DB_${TEST_SHARD}`]: db };
  const before = receiver.received.length;
  const batch = createMessageBatch(
    "tender-webhook-deliveries",
    // The first delivery twice: the second message finds it claimed, or delivered, and sends nothing.
    [...ids, ids[0]].map((deliveryId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { deliveryId, shard: TEST_SHARD } })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch, recorded as never, ctx);
  const result = await getQueueResult(batch, ctx);
  expect(result.explicitAcks.sort()).toEqual(["m0", "m1", "m2", "m3"]);
  expect(receiver.received.length).toBe(before + 3);
  for (const id of ids) expect((await deliveryRow(id))!.status).toBe("delivered");
  const reads = db.ops.filter((op) => op.kind === "statement" && /^select .* from "webhook_deliveries" inner join "events"/i.test(op.sql[0]) && !/"sequence" </.test(op.sql[0]));
  expect(reads).toHaveLength(1);
  // Then per delivery sent: its claim and its batch (and the ordered endpoint's look for an earlier one).
  expect(db.ops.filter((op) => op.kind === "batch")).toHaveLength(3);
  expect(db.ops.filter((op) => /^update "webhook_deliveries" set "attempt_count"/i.test(op.sql[0]))).toHaveLength(4);
});
