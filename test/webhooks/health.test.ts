// Endpoint health (src/webhooks/health.ts): an endpoint whose every attempt failed for 5 days is
// disabled ("failing"), a 410 at once ("gone"), a person ("manual"); webhook_endpoint.disabled and
// webhook_delivery.exhausted go to the account's other endpoints only, once each; a disabled
// endpoint's pending deliveries stop, and enabling it sends none of them again. The real local D1,
// queue and Durable Object; only the receivers are simulated, and the clock is moved by hand (a
// year ahead, so that no retry alarm comes due while a test runs: each attempt is made by hand).
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import worker from "../../src/index";
import { useClock } from "../../src/lib/clock";
import { DELIVERY_WINDOW_MS } from "../../src/domain/webhook-retry-schedule";
import { processDelivery } from "../../src/webhooks/consumer";
import { WEBHOOK_PAYLOADS } from "../../src/routes/events/payloads";
import { env } from "../support/env";
import { type Account, call, expectError, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveriesOfEvent, deliveryRow, eventsOf, one } from "../support/db";
import { waitFor } from "../support/wait";

const ORIGIN = "https://health.example.com";
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

/** Receivers by path: each answers its own status (200 unless told), and keeps what it got. */
let answers: Record<string, number>;
let received: { path: string; body: any }[];
let now: number;
/** This test's receivers live under /<tag>: a delivery a test before it made late is not counted. */
let tag: string;
beforeEach(() => {
  answers = {};
  received = [];
  tag = crypto.randomUUID().slice(0, 8);
  const original = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(ORIGIN)) return original(input, init);
    const full = new URL(request.url).pathname;
    if (!full.startsWith(`/${tag}/`)) return new Response("ok");
    const path = full.slice(tag.length + 1);
    received.push({ path, body: JSON.parse(await request.text()) });
    const status = answers[path] ?? 200;
    return new Response(`status ${status}`, { status });
  });
  now = Date.now() + 365 * DAY;
  useClock({ now: () => now });
});
afterEach(() => {
  vi.restoreAllMocks();
  useClock();
});

async function register(acct: Pick<Account, "key">, path: string, events: string[]) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${ORIGIN}/${tag}${path}`, events } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string };
}

const endpointRow = (id: string) => one<Record<string, any>>("SELECT * FROM webhook_endpoints WHERE id = ?", id);
const typesAt = (path: string) => received.filter((r) => r.path === path).map((r) => r.body.type as string);

/** A user is created now, and its customer.created delivery to the endpoint has had its first attempt. */
async function eventAttempted(acct: Account, endpointId: string) {
  const user = await createUser(acct);
  const event = (await eventsOf(acct.id, "customer.created")).find((e) => e.body.data.id === user.id)!;
  const delivery = (await deliveriesOfEvent(event.id)).find((d) => d.endpoint_id === endpointId)!;
  await waitFor(async () => expect((await deliveryRow(delivery.id))!.attempt_count).toBeGreaterThanOrEqual(1), 8000, 25);
  return { event, delivery: (await deliveryRow(delivery.id))! };
}

/** Two endpoints: /failing takes customer events, /ops takes the health events. */
async function setup(failingStatus = 500) {
  const acct = await signup();
  const failing = await register(acct, "/failing", ["customer.created"]);
  const ops = await register(acct, "/ops", ["webhook_endpoint.disabled", "webhook_delivery.exhausted"]);
  answers["/failing"] = failingStatus;
  return { acct, failing, ops };
}

describe("the 5-day rule", () => {
  it("an endpoint failing every attempt for 4 days 23 hours stays active; its next failure after 5 days disables it (failing)", async () => {
    const { acct, failing } = await setup();
    const start = now;
    const first = await eventAttempted(acct, failing.id);
    expect(first.delivery.status).toBe("pending");
    expect(await endpointRow(failing.id)).toMatchObject({ status: "active", failing_since: start, disabled_reason: null });

    now = start + 4 * DAY + 23 * HOUR;
    await eventAttempted(acct, failing.id);
    expect(await endpointRow(failing.id)).toMatchObject({ status: "active", failing_since: start });
    expect((await call(`/api/webhooks/${failing.id}`, { key: acct.key })).body).toMatchObject({ status: "active", disabled_reason: null, disabled_at: null });

    now = start + 5 * DAY + 60_000;
    const last = await eventAttempted(acct, failing.id);
    const read = await call(`/api/webhooks/${failing.id}`, { key: acct.key });
    expect(read.body).toMatchObject({ status: "disabled", disabled_reason: "failing", disabled_at: new Date(now).toISOString() });
    // The attempt that disabled it ended its delivery with the others still pending: none is tried again.
    expect((await deliveryRow(last.delivery.id))!).toMatchObject({ status: "failed", attempt_count: 1 });
    expect((await deliveryRow(first.delivery.id))!).toMatchObject({ status: "failed", attempt_count: 1, last_error: "endpoint_disabled" });
  });

  it("a 2xx in between starts the 5 days again", async () => {
    const { acct, failing } = await setup();
    const start = now;
    await eventAttempted(acct, failing.id);
    now = start + 2 * DAY;
    answers["/failing"] = 200;
    await eventAttempted(acct, failing.id);
    expect((await endpointRow(failing.id)).failing_since).toBeNull();
    answers["/failing"] = 500;
    now = start + 3 * DAY;
    await eventAttempted(acct, failing.id);
    now = start + 5 * DAY + 60_000;
    await eventAttempted(acct, failing.id);
    expect(await endpointRow(failing.id)).toMatchObject({ status: "active", failing_since: start + 3 * DAY });
    now = start + 8 * DAY + 60_000;
    await eventAttempted(acct, failing.id);
    expect(await endpointRow(failing.id)).toMatchObject({ status: "disabled", disabled_reason: "failing" });
  });
});

describe("webhook_endpoint.disabled", () => {
  it("goes to the account's other endpoints that take it, never to the disabled one, once; its data is the endpoint without its secret", async () => {
    const { acct, failing } = await setup();
    const everything = await register(acct, "/everything", ["*"]);
    const start = now;
    await eventAttempted(acct, failing.id);
    now = start + 5 * DAY + 60_000;
    const last = await eventAttempted(acct, failing.id);
    // A redelivered message of the attempt that disabled it, and another failure: no second event.
    await processDelivery(env, last.delivery.id);
    const read = await call(`/api/webhooks/${failing.id}`, { key: acct.key });
    const events = await eventsOf(acct.id, "webhook_endpoint.disabled");
    expect(events).toHaveLength(1);
    expect(events[0].body).toMatchObject({ type: "webhook_endpoint.disabled", object_id: failing.id, data: read.body });
    expect(JSON.stringify(events[0].body)).not.toContain("whsec_");
    expect(WEBHOOK_PAYLOADS["webhook_endpoint.disabled"].parse(events[0].body)).toEqual(events[0].body);
    await waitFor(() => expect(typesAt("/ops")).toEqual(["webhook_endpoint.disabled"]), 8000, 25);
    await waitFor(() => expect(typesAt("/everything")).toContain("webhook_endpoint.disabled"), 8000, 25);
    expect(typesAt("/failing")).not.toContain("webhook_endpoint.disabled");
    expect((await deliveriesOfEvent(events[0].id)).map((d) => d.endpoint_id).sort()).toEqual([everything.id, (await opsOf(acct)).id].sort());
    // The feed shows it, about the endpoint.
    const feed = await call(`/api/events?object_id=${failing.id}`, { key: acct.key });
    expect(feed.body.data.map((e: any) => e.type)).toEqual(["webhook_endpoint.disabled"]);
  });

  it("a 410 disables at once (gone), with the event to the other endpoints", async () => {
    const { acct, failing } = await setup(410);
    const { delivery } = await eventAttempted(acct, failing.id);
    expect((await deliveryRow(delivery.id))!.status).toBe("failed");
    expect((await call(`/api/webhooks/${failing.id}`, { key: acct.key })).body).toMatchObject({
      status: "disabled",
      disabled_reason: "gone",
      disabled_at: new Date(now).toISOString(),
    });
    await waitFor(() => expect(typesAt("/ops")).toEqual(["webhook_endpoint.disabled"]), 8000, 25);
    expect(typesAt("/failing")).toEqual(["customer.created"]);
  });

  it("PATCH status disabled is manual; again keeps its reason and time and sends nothing more; active clears both", async () => {
    const { acct, failing } = await setup();
    await eventAttempted(acct, failing.id);
    const disabledAt = new Date(now).toISOString();
    const patched = await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "disabled" } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ status: "disabled", disabled_reason: "manual", disabled_at: disabledAt });
    await waitFor(() => expect(typesAt("/ops")).toEqual(["webhook_endpoint.disabled"]), 8000, 25);

    now += HOUR;
    const again = await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "disabled" } });
    expect(again.body).toMatchObject({ status: "disabled", disabled_reason: "manual", disabled_at: disabledAt });
    expect(await eventsOf(acct.id, "webhook_endpoint.disabled")).toHaveLength(1);

    const enabled = await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "active" } });
    expect(enabled.body).toMatchObject({ status: "active", disabled_reason: null, disabled_at: null });
    // Enabled: healthy from now on, so its next failure does not disable it on the spot.
    expect((await endpointRow(failing.id)).failing_since).toBeNull();
  });

  it("PATCH with an unknown status answers 400 naming status", async () => {
    const { acct, failing } = await setup();
    const res = await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "paused" } });
    expectError(res, 400, "invalid_request_error");
    expect(res.body.error.param).toBe("status");
    const reason = await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "disabled", disabled_reason: "failing" } });
    expectError(reason, 400, "invalid_request_error");
    expect((await endpointRow(failing.id)).status).toBe("active");
  });
});

describe("a disabled endpoint's deliveries", () => {
  it("its pending delivery is not attempted, nor counted as a failure; enabling it does not resend it", async () => {
    const { acct, failing } = await setup();
    const { delivery } = await eventAttempted(acct, failing.id);
    expect(delivery).toMatchObject({ status: "pending", attempt_count: 1 });
    const failingSince = (await endpointRow(failing.id)).failing_since;
    expect((await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "disabled" } })).status).toBe(200);
    expect(await deliveryRow(delivery.id)).toMatchObject({ status: "failed", attempt_count: 1, last_error: "endpoint_disabled", next_attempt_at: null });

    // Its retry comes due (the scheduler's message): nothing is sent.
    now += HOUR;
    const sent = received.length;
    expect(await processDelivery(env, delivery.id)).toBe("skipped");
    expect(received).toHaveLength(sent);
    expect(await endpointRow(failing.id)).toMatchObject({ failing_since: failingSince });

    expect((await call(`/api/webhooks/${failing.id}`, { method: "PATCH", key: acct.key, body: { status: "active" } })).status).toBe(200);
    expect(await processDelivery(env, delivery.id)).toBe("skipped");
    expect(received).toHaveLength(sent);
    expect(await deliveryRow(delivery.id)).toMatchObject({ status: "failed", attempt_count: 1 });
    // No exhaustion either: its window did not end, it was stopped.
    expect(await eventsOf(acct.id, "webhook_delivery.exhausted")).toHaveLength(0);
  });
});

describe("webhook_delivery.exhausted", () => {
  it("is emitted once when the last attempt of the 24 hours fails, even when the message comes again; to the other endpoints only", async () => {
    const { acct, failing } = await setup();
    const { event, delivery } = await eventAttempted(acct, failing.id);
    now = delivery.first_attempt_at + DELIVERY_WINDOW_MS - 60_000;
    expect(await processDelivery(env, delivery.id)).toBe("failed");
    expect(await processDelivery(env, delivery.id)).toBe("skipped");
    const exhausted = await eventsOf(acct.id, "webhook_delivery.exhausted");
    expect(exhausted).toHaveLength(1);
    const listed = await call(`/api/webhooks/${failing.id}/deliveries`, { key: acct.key });
    const shown = listed.body.data.find((d: any) => d.id === delivery.id);
    expect(shown).toMatchObject({ status: "failed", attempt_count: 2 });
    expect(exhausted[0].body).toMatchObject({ type: "webhook_delivery.exhausted", object_id: failing.id, data: { ...shown, event_id: event.id, event_type: "customer.created" } });
    expect(WEBHOOK_PAYLOADS["webhook_delivery.exhausted"].parse(exhausted[0].body)).toEqual(exhausted[0].body);
    await waitFor(() => expect(typesAt("/ops")).toEqual(["webhook_delivery.exhausted"]), 8000, 25);
    expect(typesAt("/failing")).not.toContain("webhook_delivery.exhausted");
  });

  it("is emitted once when messages come after the window ended, twice in one queue batch", async () => {
    const { acct, failing } = await setup();
    const { delivery } = await eventAttempted(acct, failing.id);
    now = delivery.first_attempt_at + DELIVERY_WINDOW_MS + 60_000;
    const batch = createMessageBatch("tender-webhook-deliveries", [
      { id: "m1", timestamp: new Date(), attempts: 1, body: { deliveryId: delivery.id } },
      { id: "m2", timestamp: new Date(), attempts: 1, body: { deliveryId: delivery.id } },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks.sort()).toEqual(["m1", "m2"]);
    expect(await processDelivery(env, delivery.id)).toBe("skipped");
    expect(await deliveryRow(delivery.id)).toMatchObject({ status: "failed", last_error: "retry_window_ended", attempt_count: 1 });
    const exhausted = await eventsOf(acct.id, "webhook_delivery.exhausted");
    expect(exhausted).toHaveLength(1);
    expect(exhausted[0].body.data).toMatchObject({ id: delivery.id, status: "failed", attempt_count: 1, event_type: "customer.created" });
    await waitFor(() => expect(typesAt("/ops")).toEqual(["webhook_delivery.exhausted"]), 8000, 25);
  });

  it("POST /api/webhooks/{id}/test with exhaust (test mode only) ends the test delivery unsent and emits it, once", async () => {
    const acct = await signup();
    const target = await register(acct, "/target", ["customer.created"]);
    await register(acct, "/ops", ["webhook_delivery.exhausted"]);
    const res = await call(`/api/webhooks/${target.id}/test`, { method: "POST", key: acct.key, body: { exhaust: true }, idempotencyKey: "exhaust-1" });
    expect(res.status, res.text).toBe(202);
    expect(await deliveryRow(res.body.delivery_id)).toMatchObject({ status: "failed", attempt_count: 0, last_error: "retry_window_ended" });
    const replay = await call(`/api/webhooks/${target.id}/test`, { method: "POST", key: acct.key, body: { exhaust: true }, idempotencyKey: "exhaust-1" });
    expect(replay.body).toEqual(res.body);
    const exhausted = await eventsOf(acct.id, "webhook_delivery.exhausted");
    expect(exhausted).toHaveLength(1);
    expect(exhausted[0].body).toMatchObject({ object_id: target.id, data: { id: res.body.delivery_id, event_id: res.body.event_id, event_type: "webhook.test", status: "failed", attempts: [] } });
    expect(WEBHOOK_PAYLOADS["webhook_delivery.exhausted"].parse(exhausted[0].body)).toEqual(exhausted[0].body);
    await waitFor(() => expect(typesAt("/ops")).toEqual(["webhook_delivery.exhausted"]), 8000, 25);
    expect(typesAt("/target")).toEqual([]);

    const live = await register({ ...acct, key: acct.liveKey }, "/live", ["*"]);
    const refused = await call(`/api/webhooks/${live.id}/test`, { method: "POST", key: acct.liveKey, body: { exhaust: true } });
    expectError(refused, 400, "invalid_request_error", "livemode_not_allowed");
    expect(refused.body.error.param).toBe("exhaust");
    const bad = await call(`/api/webhooks/${target.id}/test`, { method: "POST", key: acct.key, body: { exhaust: "yes" } });
    expectError(bad, 400, "invalid_request_error");
    expect(bad.body.error.param).toBe("exhaust");
  });

  it("a health event's own delivery that runs out emits none (two failing endpoints cannot feed each other)", async () => {
    const acct = await signup();
    const a = await register(acct, "/a", ["*"]);
    await register(acct, "/b", ["*"]);
    answers["/a"] = 500;
    answers["/b"] = 500;
    await call(`/api/webhooks/${a.id}`, { method: "PATCH", key: acct.key, body: { status: "disabled" } });
    const [disabled] = await eventsOf(acct.id, "webhook_endpoint.disabled");
    const [delivery] = await deliveriesOfEvent(disabled.id);
    await waitFor(async () => expect((await deliveryRow(delivery.id))!.attempt_count).toBe(1), 8000, 25);
    now = (await deliveryRow(delivery.id))!.first_attempt_at + DELIVERY_WINDOW_MS + 60_000;
    expect(await processDelivery(env, delivery.id)).toBe("failed");
    expect(await eventsOf(acct.id, "webhook_delivery.exhausted")).toHaveLength(0);
  });
});

async function opsOf(acct: Account) {
  const list = await call("/api/webhooks", { key: acct.key });
  return list.body.data.find((e: any) => e.url.endsWith("/ops")) as { id: string };
}
