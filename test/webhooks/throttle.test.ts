// Endpoint throttle (issue 35): rate_limit per endpoint, held by the endpoint's Durable Object
// across every consumer; waiting is not an attempt; a receiver's overload answer slows the
// endpoint and its Retry-After pauses it. The real local D1, queue and Durable Object; only the
// receiver is simulated, and the background clock (which the Durable Object reads too) is moved
// by hand, so the windows are counted in that clock, never timed. The clock starts a day ahead of
// real time, so that no alarm the object arms fires by itself during a test: the test runs them.
import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import worker from "../../src/index";
import { DELIVERY_WINDOW_MS } from "../../src/domain/webhook-retry-schedule";
import { UNLIMITED_BASE_RATE } from "../../src/domain/webhook-throttle";
import { useClock } from "../../src/lib/clock";
import { processDelivery } from "../../src/webhooks/consumer";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { type WebhookRetryScheduler, schedulerFor } from "../../src/webhooks/scheduler";
import { env } from "../support/env";
import { type Account, call, expectError, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveriesOfEvent, deliveryRow } from "../support/db";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
let now = Date.now();
/** The background clock's time of each request the receiver got. */
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

/** The receiver answers `status` (with `headers`), noting the background clock's time of each request. */
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

/** The most requests the receiver got in any `windowMs` (half-open windows, in the background clock). */
function busiestWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i] - sorted[j] >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe("rate_limit on the endpoint", () => {
  it("is taken on create and PATCH, shown on reads, null by default and when removed", async () => {
    const acct = await signup();
    const plain = await register(acct);
    expect(plain.rate_limit).toBeNull();
    const hook = await register(acct, { rate_limit: 25 });
    expect(hook.rate_limit).toBe(25);
    expect((await call(`/api/webhooks/${hook.id}`, { key: acct.key })).body.rate_limit).toBe(25);
    const patched = await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: 1000 } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.rate_limit).toBe(1000);
    // A PATCH of another field leaves it as it is.
    const other = await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { ordering: "per_object" } });
    expect(other.body.rate_limit).toBe(1000);
    const removed = await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: null } });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.rate_limit).toBeNull();
    const list = await call("/api/webhooks", { key: acct.key });
    expect(list.body.data.map((w: { rate_limit: number | null }) => w.rate_limit)).toEqual([null, null]);
  });

  it("refuses a rate_limit that is not a whole number from 1 to 1000 with a 400 naming it, on create and PATCH", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 10 });
    for (const bad of [0, -1, 1001, 2.5, "10", true, 1e9]) {
      const created = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/hook`, events: ["customer.created"], rate_limit: bad } });
      expect(expectError(created, 400, "invalid_request_error").param, `create ${JSON.stringify(bad)}`).toBe("rate_limit");
      const patched = await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: bad } });
      const error = expectError(patched, 400, "invalid_request_error");
      expect(error.param, `PATCH ${JSON.stringify(bad)}`).toBe("rate_limit");
      expect(error.message).toMatch(/rate_limit/);
    }
    expect((await call(`/api/webhooks/${hook.id}`, { key: acct.key })).body.rate_limit).toBe(10);
  });
});

describe("the budget", () => {
  it("an endpoint without a rate_limit never asks its Durable Object: today's path", async () => {
    const acct = await signup();
    const hook = await register(acct);
    answer(200);
    await createUser(acct);
    await createUser(acct, { name: "Bob Lee" });
    await waitFor(async () => expect((await deliveriesOf(hook.id)).map((d) => d.status)).toEqual(["delivered", "delivered"]), 8000, 25);
    expect(await runInDurableObject(schedulerFor(env, hook.id), (o: WebhookRetryScheduler) => o.permits())).toEqual([]);
  });

  it("two consumers at once never exceed the limit in any 10-second window, and every event goes once", { timeout: 60_000 }, async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 2 });
    answer(200);
    for (let i = 0; i < 24; i++) await createUser(acct, { name: `User ${i}` });
    const stub = schedulerFor(env, hook.id);
    // The real queue sent the first two; the others wait in the object for their slots.
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(22), 8000, 25);
    expect(sentAt).toHaveLength(2);
    // Walk the clock in quarter seconds; at each step two queue batches carrying every pending
    // delivery run at once, as two consumers would.
    for (let step = 0; step < 80; step++) {
      const pending = (await deliveriesOf(hook.id)).filter((d) => d.status === "pending").map((d) => d.id);
      if (pending.length === 0) break;
      const batches = [0, 1].map((n) =>
        createMessageBatch("tender-webhook-deliveries", pending.map((id, i) => ({ id: `s${step}-c${n}-${i}`, timestamp: new Date(), attempts: 1, body: { deliveryId: id } }))),
      );
      const contexts = batches.map(() => createExecutionContext());
      await Promise.all(batches.map((batch, n) => worker.queue(batch, env, contexts[n])));
      const results = await Promise.all(batches.map((batch, n) => getQueueResult(batch, contexts[n])));
      for (const result of results) expect(result.retryMessages).toEqual([]);
      now += 250;
    }
    expect((await deliveriesOf(hook.id)).every((d) => d.status === "delivered")).toBe(true);
    expect(sentAt).toHaveLength(24);
    expect(new Set(receiver.received.map((r) => JSON.parse(r.body).id)).size).toBe(24);
    expect(busiestWindow(sentAt, 10_000)).toBeLessThanOrEqual(20);
    expect(busiestWindow(sentAt, 1000)).toBeLessThanOrEqual(2);
    for (const d of await deliveriesOf(hook.id)) expect(d.attempt_count).toBe(1);
  });

  it("the object's slots: any number of callers at once get at most rate_limit a second, a duplicate keeps its slot", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 5 });
    const stub = schedulerFor(env, hook.id);
    const start = now;
    const permits = await Promise.all(Array.from({ length: 60 }, (_, i) => stub.acquire(`dlv_fake${i}`, 1, 5)));
    expect(permits.filter((p) => p.go)).toHaveLength(5);
    const slots = permits.map((p) => p.at);
    expect(busiestWindow(slots, 1000)).toBe(5);
    expect(busiestWindow(slots, 10_000)).toBe(50);
    expect(Math.max(...slots) - start).toBeLessThan(12_000);
    // Asking again for the same attempt answers the same slot, and takes no other.
    const again = await stub.acquire("dlv_fake59", 1, 5);
    expect(again.at).toBe(permits[59].at);
    expect((await stub.permits()).length).toBe(60);
    // Those that wait are scheduled for their slot.
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(55);
    await runInDurableObject(stub, async (o: WebhookRetryScheduler) => {
      for (const p of o.pending()) await o.cancel(p.deliveryId);
    });
  });

  it("a slot used late counts where it was used: the next one waits until that second is over", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    const stub = schedulerFor(env, hook.id);
    const start = now;
    expect(await stub.acquire("dlv_a", 1, 1)).toMatchObject({ go: true, at: start });
    expect(await stub.acquire("dlv_b", 1, 1)).toMatchObject({ go: false, at: start + 1000 });
    expect(await stub.acquire("dlv_c", 1, 1)).toMatchObject({ go: false, at: start + 2000 });
    // b's message comes 900 ms late (a slow queue): it goes, and c, on time, waits a second after it.
    now = start + 1900;
    expect((await stub.acquire("dlv_b", 1, 1)).go).toBe(true);
    now = start + 2000;
    expect(await stub.acquire("dlv_c", 1, 1)).toMatchObject({ go: false, at: start + 2900 });
    now = start + 2899;
    expect((await stub.acquire("dlv_c", 1, 1)).go).toBe(false);
    now = start + 2900;
    expect((await stub.acquire("dlv_c", 1, 1)).go).toBe(true);
    await runInDurableObject(stub, async (o: WebhookRetryScheduler) => {
      for (const p of o.pending()) await o.cancel(p.deliveryId);
    });
  });

  it("waiting for budget is not an attempt: the delivery stays pending, unattempted, its window unstarted", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    answer(200);
    for (let i = 0; i < 3; i++) await createUser(acct, { name: `User ${i}` });
    await waitFor(async () => expect((await deliveriesOf(hook.id)).filter((d) => d.status === "delivered")).toHaveLength(1), 8000, 25);
    const stub = schedulerFor(env, hook.id);
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(2), 8000, 25);
    const waiting = (await deliveriesOf(hook.id)).filter((d) => d.status !== "delivered");
    for (const d of waiting) {
      expect(d).toMatchObject({ status: "pending", attempt_count: 0, first_attempt_at: null, last_status_code: null });
      expect(await attemptsOf(d.id)).toBe(0);
      expect(await processDelivery(env, d.id)).toBe("scheduled");
    }
    expect(sentAt).toHaveLength(1);
    const due = await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt));
    expect(due).toEqual([now + 1000, now + 2000]);
    // The API shows when each goes; the sweeper leaves them alone until then.
    expect((await deliveriesOf(hook.id)).map((d) => d.next_attempt_at).filter(Boolean).sort()).toEqual(due);
    now += 61_000;
    expect(await sweepDeliveries(env)).toBe(0);
    now -= 61_000;
    const read = await call(`/api/webhooks/${hook.id}/deliveries?status=pending`, { key: acct.key });
    expect(read.body.data.map((d: { next_attempt_at: string }) => Date.parse(d.next_attempt_at)).sort()).toEqual(due);
    // Their slots come: each goes at its own, as its first attempt.
    const slots = await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending());
    for (const { deliveryId, dueAt } of slots) {
      now = dueAt;
      expect(await processDelivery(env, deliveryId)).toBe("delivered");
      expect(await deliveryRow(deliveryId)).toMatchObject({ status: "delivered", attempt_count: 1 });
    }
    expect(sentAt.slice(1)).toEqual(due);
  });

  it("a rate_limit raised by PATCH gives the waiting deliveries their slots again at the new rate; lowered, it spreads them", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    answer(200);
    for (let i = 0; i < 6; i++) await createUser(acct, { name: `User ${i}` });
    const stub = schedulerFor(env, hook.id);
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().length)).toBe(5), 8000, 25);
    const start = now;
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt - start))).toEqual([1000, 2000, 3000, 4000, 5000]);
    // Raised to 2 a second.
    const raised = await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: 2 } });
    expect(raised.status, raised.text).toBe(200);
    // The first second already holds the one delivery sent: one more now, then two a second.
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt - start))).toEqual([0, 1000, 1000, 2000, 2000]);
    // Lowered to 1 again: one a second after the two already given for now.
    await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: 1 } });
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt - start))).toEqual([0, 1000, 2000, 3000, 4000]);
    // Raised to 1000: every waiting delivery goes now, though each still shows its old slot.
    await call(`/api/webhooks/${hook.id}`, { key: acct.key, method: "PATCH", body: { rate_limit: 1000 } });
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt - start))).toEqual([0, 0, 0, 0, 0]);
    for (const d of (await deliveriesOf(hook.id)).filter((d) => d.status === "pending")) expect(await processDelivery(env, d.id)).toBe("delivered");
    expect(sentAt).toEqual(Array(6).fill(start));
  });

  it("a retry that waits for budget past its 24-hour window still goes: the window is judged when it fell due", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 1 });
    answer(() => (sentAt.length === 1 ? 500 : 200));
    await createUser(acct);
    const [delivery] = await deliveriesOf(hook.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    const failed = (await deliveryRow(delivery.id))!;
    const stub = schedulerFor(env, hook.id);
    await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.cancel(delivery.id));
    // The retry falls due in the window's last millisecond, when another delivery took this second.
    now = failed.first_attempt_at + DELIVERY_WINDOW_MS;
    expect((await stub.acquire("dlv_other", 1, 1)).go).toBe(true);
    expect(await processDelivery(env, delivery.id)).toBe("throttled");
    expect(await deliveryRow(delivery.id)).toMatchObject({ status: "pending", attempt_count: 1, first_attempt_at: failed.first_attempt_at });
    // Its slot comes after the window's end: it goes all the same, as attempt 2.
    now += 1000;
    expect(await processDelivery(env, delivery.id)).toBe("delivered");
    expect(await deliveryRow(delivery.id)).toMatchObject({ status: "delivered", attempt_count: 2 });
    // Without a slot held, a message that comes after the window still ends the delivery (unchanged).
  });
});

describe("a receiver's overload answer", () => {
  it("a 429 with Retry-After pauses the endpoint: its next attempt, of another delivery, waits until then", async () => {
    const acct = await signup();
    const hook = await register(acct);
    answer(() => (sentAt.length === 1 ? 429 : 200), { "Retry-After": "30" });
    const started = now;
    await createUser(acct);
    const [first] = await deliveriesOf(hook.id);
    await waitFor(async () => expect((await deliveryRow(first.id))!.last_status_code).toBe(429), 8000, 25);
    // An attempt all the same, and the delivery's own retry honours the Retry-After.
    const row = (await deliveryRow(first.id))!;
    expect(row.attempt_count).toBe(1);
    expect(row.next_attempt_at - started).toBeGreaterThanOrEqual(30_000);
    const endpoint = await env.DB.prepare("SELECT slowed_until FROM webhook_endpoints WHERE id = ?").bind(hook.id).first<{ slowed_until: number }>();
    expect(endpoint!.slowed_until).toBeGreaterThanOrEqual(started + 30_000);
    // Another event for the endpoint, a second later: it waits for the pause, without an attempt.
    now += 1000;
    await createUser(acct, { name: "Bob Lee" });
    const second = (await deliveriesOf(hook.id)).find((d) => d.id !== first.id)!;
    const stub = schedulerFor(env, hook.id);
    await waitFor(async () => expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.deliveryId))).toContain(second.id), 8000, 25);
    expect(await processDelivery(env, second.id)).toBe("scheduled");
    expect(sentAt).toHaveLength(1);
    expect(await deliveryRow(second.id)).toMatchObject({ status: "pending", attempt_count: 0 });
    const slot = await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().find((p) => p.deliveryId === second.id)!.dueAt);
    expect(slot).toBeGreaterThanOrEqual(started + 30_000);
    expect((await deliveryRow(second.id))!.next_attempt_at).toBe(slot);
    now = slot - 1;
    expect(await processDelivery(env, second.id)).toBe("scheduled");
    now = slot;
    expect(await processDelivery(env, second.id)).toBe("delivered");
    expect(sentAt).toEqual([started, slot]);
  });

  it("honours a Retry-After given as an HTTP date on a 503, for the endpoint's next attempt", async () => {
    const acct = await signup();
    const hook = await register(acct, { rate_limit: 100 });
    // Whole seconds: an HTTP date has no milliseconds.
    now = Math.ceil(now / 1000) * 1000;
    const until = now + 45_000;
    answer(() => (sentAt.length === 1 ? 503 : 200), { "Retry-After": new Date(until).toUTCString() });
    await createUser(acct);
    const [first] = await deliveriesOf(hook.id);
    await waitFor(async () => expect((await deliveryRow(first.id))!.last_status_code).toBe(503), 8000, 25);
    const state = await runInDurableObject(schedulerFor(env, hook.id), (o: WebhookRetryScheduler) => o.throttleState());
    expect(state.pausedUntil).toBe(until);
    await createUser(acct, { name: "Bob Lee" });
    const second = (await deliveriesOf(hook.id)).find((d) => d.id !== first.id)!;
    await waitFor(async () => expect((await deliveryRow(second.id))!.next_attempt_at).toBe(until), 8000, 25);
    expect(sentAt).toHaveLength(1);
    now = until;
    expect(await processDelivery(env, second.id)).toBe("delivered");
  });

  it("a 502 without Retry-After halves the endpoint's rate for a while", async () => {
    const acct = await signup();
    const hook = await register(acct);
    answer(502);
    await createUser(acct);
    const [first] = await deliveriesOf(hook.id);
    await waitFor(async () => expect((await deliveryRow(first.id))!.last_status_code).toBe(502), 8000, 25);
    const stub = schedulerFor(env, hook.id);
    // The endpoint has no rate_limit: it is slowed from UNLIMITED_BASE_RATE to half of it, for a minute.
    const permits = await Promise.all(Array.from({ length: UNLIMITED_BASE_RATE }, (_, i) => stub.acquire(`dlv_fake${i}`, 1, null)));
    expect(permits.filter((p) => p.go)).toHaveLength(UNLIMITED_BASE_RATE / 2);
    await runInDurableObject(stub, async (o: WebhookRetryScheduler) => {
      for (const p of o.pending()) await o.cancel(p.deliveryId);
    });
  });
});
