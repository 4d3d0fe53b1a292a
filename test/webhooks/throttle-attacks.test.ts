// Issue 35's review: attacks on the endpoint throttle (rate_limit, the endpoint's Durable Object,
// overload answers) by a reviewer who did not write it. The background clock is moved by hand (a
// day ahead, so no alarm fires by itself); the real local D1, queue and Durable Object.
import { runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { useClock } from "../../src/lib/clock";
import { processDelivery } from "../../src/webhooks/consumer";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { type WebhookRetryScheduler, schedulerFor } from "../../src/webhooks/scheduler";
import { env } from "../support/env";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveryRow } from "../support/db";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
let now = Date.now();
let sentAt: number[] = [];
beforeEach(() => {
  receiver = installReceiver();
  now = Date.now() + 24 * 3600_000;
  sentAt = [];
  useClock({ now: () => now });
});
afterEach(() => {
  receiver.restore();
  useClock();
});

function answer(status: number | (() => number), headers: Record<string, string> = {}) {
  receiver.answer(() => {
    sentAt.push(now);
    const code = typeof status === "number" ? status : status();
    return new Response(code === 200 ? "ok" : `status ${code}`, { status: code, headers });
  });
}

async function register(acct: Account, body: Record<string, unknown> = {}) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/hook`, events: ["customer.created"], ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; rate_limit: number | null };
}

async function deliveriesOf(endpointId: string) {
  return (await env.DB.prepare("SELECT * FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY id").bind(endpointId).all<Record<string, any>>()).results;
}
const attemptsOf = async (deliveryId: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM delivery_attempts WHERE delivery_id = ?").bind(deliveryId).first<{ n: number }>())!.n;

describe("removing a rate_limit", () => {
  it("PATCH rate_limit null lets the waiting deliveries go now, not at the slots the old limit gave them", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    answer(200);
    for (let i = 0; i < 6; i++) await createUser(acct, { name: `User ${i}` });
    const stub = schedulerFor(env, hook.id);
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(5), 8000, 25);
    const start = now;
    // Each waiting delivery shows its slot, one a second.
    const waiting = (await deliveriesOf(hook.id)).filter((d) => d.status === "pending");
    expect(waiting.map((d) => d.next_attempt_at - start).sort((a, b) => a - b)).toEqual([1000, 2000, 3000, 4000, 5000]);
    const removed = await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: null } });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.rate_limit).toBeNull();
    // No limit any more: the object hands them back now, and each goes now.
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt - start))).toEqual([0, 0, 0, 0, 0]);
    for (const d of waiting) expect(await processDelivery(env, d.id)).toBe("delivered");
    expect(sentAt).toEqual(Array(6).fill(start));
  });
});

describe("a throttled delivery sent again by its alarm and by the sweeper", () => {
  it("goes once, is recorded once, and takes one slot", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    answer(200);
    await createUser(acct, { name: "First" });
    await createUser(acct, { name: "Second" });
    const stub = schedulerFor(env, hook.id);
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(1), 8000, 25);
    const [waiting] = (await deliveriesOf(hook.id)).filter((d) => d.status === "pending");
    // Its slot came long ago and the alarm was lost: the sweeper re-enqueues it, and the alarm fires too.
    now = waiting.next_attempt_at + 10 * 60_000 - 1;
    expect(await sweepDeliveries(env)).toBeGreaterThanOrEqual(1);
    const outcomes = await Promise.all([processDelivery(env, waiting.id), processDelivery(env, waiting.id), processDelivery(env, waiting.id)]);
    expect(outcomes.filter((o) => o === "delivered")).toHaveLength(1);
    expect(await deliveryRow(waiting.id)).toMatchObject({ status: "delivered", attempt_count: 1 });
    expect(await attemptsOf(waiting.id)).toBe(1);
    expect(sentAt).toHaveLength(2);
    const permits = await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.permits().filter((p) => p.key.startsWith(waiting.id)));
    expect(permits.length).toBeLessThanOrEqual(1);
  });
});

describe("a receiver's Retry-After out of bounds", () => {
  for (const [header, pausedFor] of [
    ["31536000", 3600_000],
    ["Fri, 27 Nov 2099 09:00:00 GMT", 3600_000],
    ["-5", 0],
    ["soon", 0],
    ["1.5", 0],
    ["99999999999999999999999", 3600_000],
  ] as const) {
    it(`Retry-After: ${header} pauses the endpoint ${pausedFor / 1000} s at most, and the delivery's next attempt stays inside its 24 hours`, async () => {
      const acct = await signup();
      const hook = await register(acct, { rate_limit: 10 });
      answer(429, { "Retry-After": header });
      await createUser(acct);
      const [delivery] = await deliveriesOf(hook.id);
      await waitFor(async () => expect((await deliveryRow(delivery.id))!.attempt_count).toBe(1), 8000, 25);
      const row = (await deliveryRow(delivery.id))!;
      expect(row.status).toBe("pending");
      expect(row.next_attempt_at - now).toBeLessThanOrEqual(Math.max(pausedFor, 10_000));
      expect(row.next_attempt_at).toBeLessThan(row.first_attempt_at + 24 * 3600_000);
      const state = await runInDurableObject(schedulerFor(env, hook.id), (o: WebhookRetryScheduler) => o.throttleState());
      expect(state.pausedUntil - now).toBeLessThanOrEqual(pausedFor);
      const endpoint = (await env.DB.prepare("SELECT slowed_until FROM webhook_endpoints WHERE id = ?").bind(hook.id).first<{ slowed_until: number }>())!;
      expect(endpoint.slowed_until - now).toBeLessThanOrEqual(Math.max(pausedFor, 60_000));
    });
  }
});

describe("a throttled endpoint disabled and enabled again", () => {
  it("the slots of the deliveries its disabling ended are given up: a new event after enabling goes now, not behind them", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    answer(200);
    for (let i = 0; i < 6; i++) await createUser(acct, { name: `Waiting ${i}` });
    const stub = schedulerFor(env, hook.id);
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(5), 8000, 25);
    const start = now;
    expect((await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    expect((await deliveriesOf(hook.id)).filter((d) => d.status === "pending")).toEqual([]);
    now += 2000;
    expect((await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { status: "active" } })).status).toBe(200);
    const user = await createUser(acct, { name: "After Enabling" });
    const event = (await env.DB.prepare("SELECT id FROM events WHERE object_id = ? AND type = 'customer.created'").bind(user.id).first<{ id: string }>())!;
    const id = `dlv_${event.id.slice(4)}${hook.id.slice(4)}`;
    await waitFor(async () => expect((await deliveryRow(id))!.status).toBe("delivered"), 8000, 25);
    expect(sentAt).toEqual([start, start + 2000]);
  });
});
