// Webhook delivery end to end: the real local D1, queue and retry Durable Object; only the
// receiver is simulated (test/support/receiver.ts) and the background clock is moved by hand.
import { runDurableObjectAlarm, runInDurableObject, createExecutionContext, createMessageBatch, getQueueResult, createScheduledController } from "cloudflare:test";
import { env } from "../support/env";
import worker from "../../src/index";
import { Webhook } from "standardwebhooks";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createHmac } from "node:crypto";
import { useClock } from "../../src/lib/clock";
import { DELIVERY_WINDOW_MS } from "../../src/domain/webhook-retry-schedule";
import { processDelivery } from "../../src/webhooks/consumer";
import { schedulerFor, type WebhookRetryScheduler } from "../../src/webhooks/scheduler";
import { type Account, call, expectError, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveriesOfEvent, deliveryRow } from "../support/db";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
let now = Date.now();
beforeEach(() => {
  receiver = installReceiver();
  now = Date.now();
  useClock({ now: () => now });
});
afterEach(() => {
  receiver.restore();
  useClock();
});

async function register(acct: Account, events: string[] = ["customer.created", "customer.updated"], path = "/hook") {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; secret: string };
}

async function eventFor(acct: Account, type: string) {
  const res = await call(`/api/events?type=${type}&limit=1`, { key: acct.key });
  expect(res.status).toBe(200);
  return res.body.data[0] as { id: string };
}

/** Walks one retry: move the clock to the next attempt, fire the endpoint's alarm, wait for the attempt. */
async function nextRetry(endpointId: string, deliveryId: string) {
  const before = await deliveryRow(deliveryId);
  expect(before!.status).toBe("pending");
  now = before!.next_attempt_at;
  expect(await runDurableObjectAlarm(schedulerFor(env, endpointId))).toBe(true);
  await waitFor(async () => expect((await deliveryRow(deliveryId))!.attempt_count).toBe(before!.attempt_count + 1), 8000, 25);
  return (await deliveryRow(deliveryId))!;
}

describe("signed deliveries", () => {
  it("signs with X-Signature (hex HMAC of the body keyed with the whole secret) and Standard Webhooks", async () => {
    const acct = await signup();
    const hook = await register(acct);
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const user = await createUser(acct, { name: "Ada" });
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    const got = receiver.received[0];
    const body = JSON.parse(got.body);
    expect(body).toMatchObject({ type: "customer.created", data: { id: user.id, object: "user", name: "Ada" } });
    expect(body.id).toMatch(/^evt_/);
    expect(body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // The interface document's receiver: hex HMAC-SHA256 over the exact body, keyed with the secret string.
    expect(got.headers["x-signature"]).toBe(createHmac("sha256", hook.secret).update(got.body).digest("hex"));
    // The standardwebhooks library verifies webhook-id / webhook-timestamp / webhook-signature.
    const verified = new Webhook(hook.secret).verify(got.body, got.headers);
    expect(verified).toEqual(body);
    expect(got.headers["webhook-id"]).toBe(body.id);
    expect(got.headers["user-agent"]).toMatch(/^Tender-Webhooks\//);
    expect(got.headers["tender-delivery-attempt"]).toBe("1");
    // A tampered body fails both checks.
    expect(() => new Webhook(hook.secret).verify(got.body.replace("Ada", "Eve"), got.headers)).toThrow();
    expect(createHmac("sha256", hook.secret).update(got.body.replace("Ada", "Eve")).digest("hex")).not.toBe(got.headers["x-signature"]);
  });

  it("only sends the types an endpoint subscribed to", async () => {
    const acct = await signup();
    await register(acct, ["customer.updated"]);
    const user = await createUser(acct);
    await call(`/api/users/${user.id}`, { method: "PUT", key: acct.key, body: { name: "Ada B", email: "adab@example.com" } });
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    expect(JSON.parse(receiver.received[0].body)).toMatchObject({ type: "customer.updated", data: { name: "Ada B", email: "adab@example.com" } });
    const created = await eventFor(acct, "customer.created");
    expect(await deliveriesOfEvent(created.id)).toHaveLength(0);
  });

  it("during a rotation both secrets sign; X-Signature uses the new secret", async () => {
    const acct = await signup();
    const hook = await register(acct);
    const rotated = await call(`/api/webhooks/${hook.id}/rotate-secret`, { method: "POST", key: acct.key });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).not.toBe(hook.secret);
    await createUser(acct);
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    const got = receiver.received[0];
    expect(got.headers["webhook-signature"].split(" ")).toHaveLength(2);
    expect(() => new Webhook(hook.secret).verify(got.body, got.headers)).not.toThrow();
    expect(() => new Webhook(rotated.body.secret).verify(got.body, got.headers)).not.toThrow();
    expect(got.headers["x-signature"]).toBe(createHmac("sha256", rotated.body.secret).update(got.body).digest("hex"));
    // After 24 hours the old secret stops signing.
    now += 24 * 60 * 60 * 1000 + 60_000;
    const user = await createUser(acct, { name: "Bob" });
    void user;
    await waitFor(() => expect(receiver.received).toHaveLength(2), 8000, 25);
    const later = receiver.received[1];
    expect(later.headers["webhook-signature"].split(" ")).toHaveLength(1);
    // (Its timestamp is on the moved clock, so check the signature by hand rather than with the library's tolerance.)
    const signed = `${later.headers["webhook-id"]}.${later.headers["webhook-timestamp"]}.${later.body}`;
    const sign = (secret: string) => `v1,${createHmac("sha256", Buffer.from(secret.slice(6), "base64")).update(signed).digest("base64")}`;
    expect(later.headers["webhook-signature"]).toBe(sign(rotated.body.secret));
  });
});

describe("retries", () => {
  it("retries a receiver that fails twice, with growing gaps and the same webhook-id, until it answers 200", async () => {
    const acct = await signup();
    const hook = await register(acct);
    receiver.answer(500, 500, 200);
    await createUser(acct);
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    const event = await eventFor(acct, "customer.created");
    const [delivery] = await deliveriesOfEvent(event.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    const first = (await deliveryRow(delivery.id))!;
    const firstGap = first.next_attempt_at - first.first_attempt_at;
    expect(firstGap).toBeGreaterThan(0);
    expect(firstGap).toBeLessThanOrEqual(10_000);

    const second = await nextRetry(hook.id, delivery.id);
    expect(second.status).toBe("pending");
    const secondGap = second.next_attempt_at - now;
    expect(secondGap).toBeGreaterThan(firstGap);

    const third = await nextRetry(hook.id, delivery.id);
    expect(third.status).toBe("delivered");
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual([event.id, event.id, event.id]);
    expect(receiver.received.map((r) => r.headers["tender-delivery-attempt"])).toEqual(["1", "2", "3"]);

    const listed = await call(`/api/webhooks/${hook.id}/deliveries`, { key: acct.key });
    expect(listed.status).toBe(200);
    expect(listed.body.data[0]).toMatchObject({ id: delivery.id, status: "delivered", attempt_count: 3 });
    expect(listed.body.data[0].attempts.map((a: any) => a.status_code)).toEqual([500, 500, 200]);
    expect(listed.body.data[0].attempts[0]).toMatchObject({ attempt_number: 1, response_excerpt: "status 500", duration_ms: expect.any(Number) });
  });

  it("walks the whole 24-hour schedule to failed, then a manual redelivery succeeds", { timeout: 60_000 }, async () => {
    const acct = await signup();
    const hook = await register(acct);
    receiver.answer(503);
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    const [delivery] = await deliveriesOfEvent(event.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    let row = (await deliveryRow(delivery.id))!;
    const firstAttemptAt = row.first_attempt_at;
    while (row.status === "pending") row = await nextRetry(hook.id, delivery.id);
    expect(row.status).toBe("failed");
    const attempts = (await env.DB.prepare("SELECT attempted_at FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt_number").bind(delivery.id).all<{ attempted_at: string }>()).results;
    expect(attempts.length).toBeGreaterThanOrEqual(10);
    const offsets = attempts.map((a) => Date.parse(a.attempted_at) - firstAttemptAt);
    expect(offsets[offsets.length - 1]).toBeLessThanOrEqual(DELIVERY_WINDOW_MS);
    expect(offsets[offsets.length - 1]).toBeGreaterThan(DELIVERY_WINDOW_MS - 6 * 60 * 60 * 1000);
    // Gaps grow (with jitter), except the last, which may be pulled in to the window's end.
    for (let i = 2; i < offsets.length - 1; i++) expect(offsets[i] - offsets[i - 1]).toBeGreaterThanOrEqual((offsets[i - 1] - offsets[i - 2]) * 0.5);
    expect(await runInDurableObject(schedulerFor(env, hook.id), (o: WebhookRetryScheduler) => o.pending())).toEqual([]);

    // It stays visible, and can be redelivered by hand once the receiver is back.
    const failed = await call(`/api/webhooks/${hook.id}/deliveries?status=failed`, { key: acct.key });
    expect(failed.body.data.map((d: any) => d.id)).toEqual([delivery.id]);
    receiver.answer(200);
    const redo = await call(`/api/events/${event.id}/redeliver`, { method: "POST", key: acct.key, body: { endpoint_id: hook.id } });
    expect(redo.status, redo.text).toBe(202);
    expect(redo.body.deliveries).toEqual([delivery.id]);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.status).toBe("delivered"), 8000, 25);
    expect(receiver.received.at(-1)!.headers["webhook-id"]).toBe(event.id);
  });

  it("sends nothing later than 24 hours after the first attempt, however late the message arrives", async () => {
    const acct = await signup();
    await register(acct);
    receiver.answer(500);
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    const [delivery] = await deliveriesOfEvent(event.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    const row = (await deliveryRow(delivery.id))!;
    const sent = receiver.received.length;
    // A lost alarm, then a sweeper re-enqueue that lands after the window has closed.
    now = row.first_attempt_at + DELIVERY_WINDOW_MS + 60_000;
    expect(await processDelivery(env, delivery.id)).toBe("failed");
    expect(receiver.received).toHaveLength(sent);
    expect(await deliveryRow(delivery.id)).toMatchObject({ status: "failed", attempt_count: 1, last_error: "retry_window_ended" });
  });

  it("a 410 disables the endpoint and ends the delivery", async () => {
    const acct = await signup();
    const hook = await register(acct);
    receiver.answer(410);
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    await waitFor(async () => expect((await deliveriesOfEvent(event.id))[0].status).toBe("failed"), 8000, 25);
    const endpoint = await call(`/api/webhooks/${hook.id}`, { key: acct.key });
    expect(endpoint.body).toMatchObject({ status: "disabled", disabled_reason: "gone", disabled_at: expect.any(String) });
    // A disabled endpoint gets nothing more.
    await createUser(acct, { name: "Bob" });
    const bob = await eventFor(acct, "customer.created");
    expect(await deliveriesOfEvent(bob.id)).toHaveLength(0);
  });

  it("honours a 429's Retry-After, within bounds", async () => {
    const acct = await signup();
    await register(acct);
    receiver.answer(() => new Response("slow down", { status: 429, headers: { "Retry-After": "120" } }));
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    const [delivery] = await deliveriesOfEvent(event.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    const row = (await deliveryRow(delivery.id))!;
    expect(row.next_attempt_at - row.first_attempt_at).toBeGreaterThanOrEqual(120_000);
    expect(row.last_status_code).toBe(429);
  });

  it("records a network failure as an attempt and retries it", async () => {
    const acct = await signup();
    await register(acct);
    receiver.answer(() => {
      throw new TypeError("connection refused");
    });
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    const [delivery] = await deliveriesOfEvent(event.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    const attempt = await env.DB.prepare("SELECT * FROM delivery_attempts WHERE delivery_id = ?").bind(delivery.id).first<any>();
    expect(attempt).toMatchObject({ attempt_number: 1, status_code: null, error: expect.stringContaining("connection refused") });
  });
});

describe("no event is lost, none is double-booked", () => {
  it("the sweeper delivers an event whose enqueue was lost", async () => {
    const acct = await signup();
    const hook = await register(acct);
    // Commit an event and its delivery exactly as the outbox does, but never enqueue it.
    const eventId = "evt_01m7z2jhgtndxyq5k5csb5qaaa";
    const payload = JSON.stringify({ id: eventId, type: "customer.created", data: { id: "usr_x" }, created_at: new Date(now).toISOString() });
    const deliveryId = `dlv_${eventId.slice(4)}${hook.id.slice(4)}`;
    await env.DB.batch([
      env.DB.prepare("INSERT INTO events (id, account_id, type, payload, feed_position, created_at) VALUES (?, ?, 'customer.created', ?, 1, ?)").bind(eventId, acct.id, payload, new Date(now).toISOString()),
      env.DB.prepare("INSERT INTO webhook_deliveries (id, account_id, event_id, endpoint_id, status, attempt_count, created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?)").bind(deliveryId, acct.id, eventId, hook.id, new Date(now).toISOString(), now),
    ]);
    // A minute later the cron's sweeper finds it.
    now += 61_000;
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: now, cron: "* * * * *" }), env, ctx);
    await waitFor(async () => expect((await deliveryRow(deliveryId))!.status).toBe("delivered"), 8000, 25);
    expect(receiver.received.map((r) => r.body)).toEqual([payload]);
  });

  it("a duplicated queue message causes one attempt and one send", async () => {
    const acct = await signup();
    const hook = await register(acct, ["customer.created"]);
    void hook;
    // Stop the real queue from racing this test: register after the event exists, then add a delivery by redelivery.
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    const [delivery] = await deliveriesOfEvent(event.id);
    const batch = createMessageBatch("tender-webhook-deliveries", [
      { id: "m1", timestamp: new Date(), attempts: 1, body: { deliveryId: delivery.id } },
      { id: "m2", timestamp: new Date(), attempts: 1, body: { deliveryId: delivery.id } },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(["m1", "m2"]);
    expect(receiver.received).toHaveLength(1);
    const attempts = await env.DB.prepare("SELECT COUNT(*) AS n FROM delivery_attempts WHERE delivery_id = ?").bind(delivery.id).first<{ n: number }>();
    expect(attempts!.n).toBe(1);
    // The same message processed again, concurrently, after a reset to pending: one more send only.
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending' WHERE id = ?").bind(delivery.id).run();
    const outcomes = await Promise.all([processDelivery(env, delivery.id), processDelivery(env, delivery.id)]);
    expect(outcomes.sort()).toEqual(["delivered", "skipped"]);
    expect(receiver.received).toHaveLength(2);
  });

  it("an alarm whose enqueue throws keeps the retry and tries again", async () => {
    const acct = await signup();
    const hook = await register(acct);
    receiver.answer(500, 200);
    await createUser(acct);
    const event = await eventFor(acct, "customer.created");
    const [delivery] = await deliveriesOfEvent(event.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.next_attempt_at).not.toBeNull(), 8000, 25);
    const stub = schedulerFor(env, hook.id);
    const queue = env.DELIVERY_QUEUE;
    await runInDurableObject(stub, (o: WebhookRetryScheduler) => {
      (o as unknown as { env: object }).env = { ...env, DELIVERY_QUEUE: { sendBatch: async () => { throw new Error("queue unavailable"); } } };
    });
    now = (await deliveryRow(delivery.id))!.next_attempt_at;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.deliveryId))).toEqual([delivery.id]);
    await runInDurableObject(stub, (o: WebhookRetryScheduler) => {
      (o as unknown as { env: object }).env = { ...env, DELIVERY_QUEUE: queue };
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.status).toBe("delivered"), 8000, 25);
  });
});

describe("management", () => {
  it("lists, reads, updates, tests and deletes endpoints; secrets are never shown again", async () => {
    const acct = await signup();
    const hook = await register(acct, ["*"]);
    const got = await call(`/api/webhooks/${hook.id}`, { key: acct.key });
    expect(got.body).toMatchObject({ id: hook.id, object: "webhook_endpoint", status: "active", events: ["*"] });
    expect(got.body.secret).toBeUndefined();
    const list = await call("/api/webhooks", { key: acct.key });
    expect(list.body).toMatchObject({ object: "list", has_more: false, data: [{ id: hook.id }] });
    expect(list.text).not.toContain("whsec_");

    const test = await call(`/api/webhooks/${hook.id}/test`, { method: "POST", key: acct.key });
    expect(test.status, test.text).toBe(202);
    await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
    const delivered = JSON.parse(receiver.received[0].body);
    expect(delivered).toMatchObject({ id: test.body.event_id, type: "webhook.test" });
    // The catch-up feed shows the same event: data as in the envelope, payload as delivered.
    const fromFeed = await call(`/api/events/${test.body.event_id}`, { key: acct.key });
    expect(fromFeed.body).toEqual({ id: delivered.id, object: "event", livemode: false, type: "webhook.test", created_at: delivered.created_at, object_id: null, sequence: null, data: delivered.data, payload: delivered });

    const patched = await call(`/api/webhooks/${hook.id}`, { method: "PATCH", key: acct.key, body: { events: ["customer.updated"], status: "disabled" } });
    expect(patched.body).toMatchObject({ events: ["customer.updated"], status: "disabled" });
    const types = await call("/api/event-types", { key: acct.key });
    expect(types.body.data.map((t: any) => t.type)).toEqual(expect.arrayContaining(["payment.completed", "payout.paid", "subscription_renewal"]));

    const removed = await call(`/api/webhooks/${hook.id}`, { method: "DELETE", key: acct.key });
    expect(removed.body).toEqual({ id: hook.id, object: "webhook_endpoint", livemode: false, deleted: true });
    expectError(await call(`/api/webhooks/${hook.id}`, { key: acct.key }), 404, "not_found_error", "resource_missing");
  });

  it("refuses bad registrations with clear 400s", async () => {
    const acct = await signup();
    const cases: [unknown, string][] = [
      [{ url: "http://example.com/hook", events: ["customer.created"] }, "url"],
      [{ url: "not a url", events: ["customer.created"] }, "url"],
      [{ url: "https://user:pw@example.com/", events: ["customer.created"] }, "url"],
      [{ url: "https://example.com/hook", events: ["customer.exploded"] }, "events.0"],
      [{ url: "https://example.com/hook", events: [] }, "events"],
      [{ url: "https://example.com/hook" }, "events"],
    ];
    for (const [body, param] of cases) {
      const error = expectError(await call("/api/webhooks", { key: acct.key, body }), 400, "invalid_request_error");
      expect(error.param, JSON.stringify(body)).toBe(param);
    }
    // Development allows a local receiver over http.
    const local = await call("/api/webhooks", { key: acct.key, body: { url: "http://127.0.0.1:9999/hook", events: ["customer.created"] } });
    expect(local.status).toBe(201);
  });

  it("keeps endpoints and events to their own account", async () => {
    const a = await signup("A");
    const b = await signup("B");
    const hook = await register(a);
    await createUser(a);
    const event = await eventFor(a, "customer.created");
    expectError(await call(`/api/webhooks/${hook.id}`, { key: b.key }), 404, "not_found_error");
    expectError(await call(`/api/webhooks/${hook.id}/deliveries`, { key: b.key }), 404, "not_found_error");
    expectError(await call(`/api/webhooks/${hook.id}`, { method: "DELETE", key: b.key }), 404, "not_found_error");
    expectError(await call(`/api/webhooks/${hook.id}/rotate-secret`, { method: "POST", key: b.key }), 404, "not_found_error");
    expectError(await call(`/api/events/${event.id}`, { key: b.key }), 404, "not_found_error");
    expectError(await call(`/api/events/${event.id}/redeliver`, { method: "POST", key: b.key }), 404, "not_found_error");
    expectError(await call(`/api/events/${event.id}/redeliver`, { method: "POST", key: a.key, body: { endpoint_id: (await register(b, ["customer.created"], "/b")).id } }), 404, "not_found_error");
    expect((await call("/api/events", { key: b.key })).body.data).toEqual([]);
    expect((await call("/api/webhooks", { key: b.key })).body.data.map((w: any) => w.id)).not.toContain(hook.id);
    // B's users never reach A's endpoint.
    await createUser(b, { name: "Bob" });
    await waitFor(() => expect(receiver.received.some((r) => r.url.endsWith("/b"))).toBe(true), 8000, 25);
    const toA = receiver.received.filter((r) => r.url.endsWith("/hook"));
    const toB = receiver.received.filter((r) => r.url.endsWith("/b"));
    expect(toB.some((r) => r.body.includes("bob@example.com"))).toBe(true);
    expect(toA.some((r) => r.body.includes("bob@example.com"))).toBe(false);
  });

  it("restricted keys need the webhook scopes", async () => {
    const acct = await signup();
    const key = await call("/api/keys", { key: acct.key, body: { scopes: ["users:read"] } });
    expectError(await call("/api/webhooks", { key: key.body.secret, body: { url: `${RECEIVER_ORIGIN}/h`, events: ["*"] } }), 403, "permission_error", "missing_scope");
    expectError(await call("/api/events", { key: key.body.secret }), 403, "permission_error", "missing_scope");
  });
});
