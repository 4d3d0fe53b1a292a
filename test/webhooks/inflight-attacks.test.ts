// Issue 35's review: an endpoint disabled while one of its deliveries is in flight (the receiver has
// the request and has not answered yet), then enabled and recovered, or purged meanwhile. The real
// local D1, queue and Durable Object; the receiver is simulated and answers when the test says; the
// clock is moved by hand, a year ahead, so no retry alarm comes due by itself.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { useClock } from "../../src/lib/clock";
import { processDelivery } from "../../src/webhooks/consumer";
import { purgeExpiredEvents } from "../../src/webhooks/retention";
import { recoverPage } from "../../src/webhooks/operations/recovery";
import { env } from "../support/env";
import { type Account, call, fetchWith, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveryRow } from "../support/db";
import { droppingQueue } from "../support/queue";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";

const DAY = 24 * 60 * 60 * 1000;
let receiver: ReturnType<typeof installReceiver>;
let now: number;
beforeEach(() => {
  receiver = installReceiver();
  now = Date.now() + 365 * DAY;
  useClock({ now: () => now });
});
afterEach(() => {
  receiver.restore();
  useClock();
});

/** The receiver holds the next request until `release(status)`. */
function holdNext() {
  let release!: (status: number) => void;
  const answered = new Promise<number>((resolve) => (release = resolve));
  receiver.answer((async () => new Response("held", { status: await answered })) as unknown as () => Response);
  return { release };
}

/** An endpoint taking customer.created, and one user whose delivery to it failed its first attempt. */
async function failedOnce(acct: Account) {
  const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/inflight`, events: ["customer.created"] } });
  expect(hook.status, hook.text).toBe(201);
  receiver.answer(500);
  const user = await createUser(acct);
  const delivery = (await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE endpoint_id = ?").bind(hook.body.id).first<{ id: string }>())!;
  await waitFor(async () => expect((await deliveryRow(delivery.id))!.attempt_count).toBe(1), 8000, 25);
  return { endpoint: hook.body.id as string, user, deliveryId: delivery.id };
}

/** Its next attempt falls due now, as a redelivery makes it (a fresh window). */
const dueNow = (deliveryId: string) =>
  env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = NULL, first_attempt_at = NULL WHERE id = ?").bind(deliveryId).run();

const patchStatus = (acct: Account, endpoint: string, status: string) => call(`/api/webhooks/${endpoint}`, { key: acct.key, method: "PATCH", body: { status } });

describe("an endpoint disabled while a delivery is in flight", () => {
  it("enabled and recovered at once, the delivery goes now: the failed attempt's lease does not hold it back", async () => {
    const acct = await signup();
    const { endpoint, deliveryId } = await failedOnce(acct);
    await dueNow(deliveryId);
    const held = holdNext();
    const inFlight = processDelivery(env, deliveryId);
    await waitFor(() => expect(receiver.received.length).toBe(2), 8000, 10);
    expect((await patchStatus(acct, endpoint, "disabled")).status).toBe(200);
    held.release(500);
    expect(await inFlight).toBe("skipped");
    expect(await deliveryRow(deliveryId)).toMatchObject({ status: "failed", last_error: "endpoint_disabled" });

    // A second later: enabled, and a recovery over its event (the job driven here).
    now += 1000;
    receiver.answer(200);
    expect((await patchStatus(acct, endpoint, "active")).status).toBe(200);
    const rcv = await fetchWith({ JOB_QUEUE: droppingQueue() }, `/api/webhooks/${endpoint}/recover`, { key: acct.key, json: { since: new Date(now - 60_000).toISOString() } });
    expect(rcv.status, rcv.text).toBe(202);
    expect(await recoverPage(env, rcv.body.id)).toEqual({ more: false });
    expect(await deliveryRow(deliveryId)).toMatchObject({ status: "pending" });
    // The recovery's message: sent now, not when the sweeper finds it a minute or more later.
    expect(await processDelivery(env, deliveryId)).toBe("delivered");
    expect(receiver.received).toHaveLength(3);
  });

  it("a purge meanwhile leaves no attempt of a deleted delivery behind: an event with an attempt in flight stays until it is recorded", async () => {
    const acct = await signup();
    expect((await call("/api/account", { key: acct.key, method: "PATCH", body: { event_retention_days: 1 } })).status).toBe(200);
    const { endpoint, user, deliveryId } = await failedOnce(acct);
    const eventId = (await deliveryRow(deliveryId))!.event_id as string;
    // A later event about the same user: the first is not its object's newest, nor the account's.
    const put = await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Later Name", email: "later@example.com" } });
    expect(put.status, put.text).toBe(200);
    // Two days on, the old event is redelivered: its attempt is in flight when the endpoint is disabled.
    now += 2 * DAY;
    await dueNow(deliveryId);
    const held = holdNext();
    const inFlight = processDelivery(env, deliveryId);
    await waitFor(() => expect(receiver.received.length).toBe(2), 8000, 10);
    expect((await patchStatus(acct, endpoint, "disabled")).status).toBe(200);
    await purgeExpiredEvents(env, now);
    held.release(500);
    await inFlight;
    const orphans = await env.DB.prepare("SELECT COUNT(*) AS n FROM delivery_attempts a WHERE a.account_id = ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id)")
      .bind(acct.id)
      .first<{ n: number }>();
    expect(orphans!.n).toBe(0);
    // Once the attempt is recorded and its lease is over, the purge takes the event with everything of it.
    now += 60_000;
    await purgeExpiredEvents(env, now);
    expect(await env.DB.prepare("SELECT id FROM events WHERE id = ?").bind(eventId).first()).toBeNull();
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM delivery_attempts WHERE delivery_id = ?").bind(deliveryId).first<{ n: number }>()).toEqual({ n: 0 });
  });
});

describe("the 5-day disable under two consumers and a redelivered message", () => {
  it("two failures of two deliveries at once, and one message twice: the endpoint is disabled once, with one webhook_endpoint.disabled and one delivery of it", async () => {
    const acct = await signup();
    const ops = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/ops`, events: ["webhook_endpoint.disabled"] } });
    expect(ops.status, ops.text).toBe(201);
    const first = await failedOnce(acct);
    await createUser(acct, { name: "Second User" });
    const second = (await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE endpoint_id = ? AND id <> ?").bind(first.endpoint, first.deliveryId).first<{ id: string }>())!;
    await waitFor(async () => expect((await deliveryRow(second.id))!.attempt_count).toBe(1), 8000, 25);
    // Five days of failing later, both fall due at once.
    now += 5 * DAY + 1;
    await dueNow(first.deliveryId);
    await dueNow(second.id);
    await Promise.all([processDelivery(env, first.deliveryId), processDelivery(env, second.id), processDelivery(env, first.deliveryId)]);
    now += 1;
    await processDelivery(env, second.id);
    const endpoint = (await env.DB.prepare("SELECT status, disabled_reason FROM webhook_endpoints WHERE id = ?").bind(first.endpoint).first())!;
    expect(endpoint).toEqual({ status: "disabled", disabled_reason: "failing" });
    const disabled = await env.DB.prepare("SELECT id FROM events WHERE object_id = ? AND type = 'webhook_endpoint.disabled'").bind(first.endpoint).all<{ id: string }>();
    expect(disabled.results).toHaveLength(1);
    const toOps = await env.DB.prepare("SELECT endpoint_id FROM webhook_deliveries WHERE event_id = ?").bind(disabled.results[0].id).all<{ endpoint_id: string }>();
    expect(toOps.results).toEqual([{ endpoint_id: ops.body.id }]);
    // Each delivery made one more attempt at the most, and none is left pending.
    for (const id of [first.deliveryId, second.id]) {
      const row = (await deliveryRow(id))!;
      expect(row.attempt_count).toBeLessThanOrEqual(2);
      expect(row.status).toBe("failed");
    }
  });
});
