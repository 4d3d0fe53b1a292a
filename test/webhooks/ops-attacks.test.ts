// Issue 35's review: attacks on webhook operations (recovery, endpoint health, throttle) by a
// reviewer who did not write them. Each test here failed on the code as merged, or proves an
// attack that found nothing. The real local D1, queues and Durable Objects; only receivers are simulated.
import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, call, fetchWith, signup } from "../support/http";
import { droppingQueue } from "../support/queue";
import { recoverPage } from "../../src/webhooks/operations/recovery";
import { createUser } from "../support/fixtures";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { schedulerFor } from "../../src/webhooks/scheduler";
import { useClock } from "../../src/lib/clock";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const iso = (ms: number) => new Date(ms).toISOString();
const deliveryOf = (eventId: string, endpointId: string) => `dlv_${eventId.slice(4)}${endpointId.slice(4)}`;

async function register(acct: Account, path: string, events: string[]) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events } });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

/** The receiver's requests to `path` since `from`: each event's id and type. */
const receivedAt = (path: string, from = 0) =>
  receiver.received
    .slice(from)
    .filter((r) => r.url === `${RECEIVER_ORIGIN}${path}`)
    .map((r) => {
      const body = JSON.parse(r.body) as { id: string; type: string };
      return { id: body.id, type: body.type };
    });

describe("a disabled endpoint recovered later", () => {
  it("enable then recover: each missed event arrives once, and never the health events about the endpoint itself", async () => {
    const acct = await signup();
    const since = iso(Date.now() - 1000);
    // Takes every event type: the health events about it are of its account and mode.
    const endpoint = await register(acct, "/star", ["*"]);
    receiver.answer(500);
    await createUser(acct, { name: "Before One" });
    await createUser(acct, { name: "Before Two" });
    const customers = async () =>
      (await env.DB.prepare("SELECT id FROM events WHERE account_id = ? AND type = 'customer.created' ORDER BY feed_position").bind(acct.id).all<{ id: string }>()).results.map((r) => r.id);
    const tried = await customers();
    expect(tried).toHaveLength(2);
    for (const id of tried) {
      await waitFor(async () => {
        const row = await env.DB.prepare("SELECT attempt_count FROM webhook_deliveries WHERE id = ?").bind(deliveryOf(id, endpoint)).first<{ attempt_count: number }>();
        expect(row?.attempt_count ?? 0).toBeGreaterThanOrEqual(1);
      }, 8000, 25);
    }
    // Disabled by hand: its pending deliveries end; webhook_endpoint.disabled is written (about it, to nobody).
    const disabled = await call(`/api/webhooks/${endpoint}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } });
    expect(disabled.status, disabled.text).toBe(200);
    const about = await env.DB.prepare("SELECT id FROM events WHERE object_id = ? AND type = 'webhook_endpoint.disabled'").bind(endpoint).all<{ id: string }>();
    expect(about.results).toHaveLength(1);
    // An event while it is disabled: no delivery to it at all.
    await createUser(acct, { name: "While Disabled" });
    const all = await customers();
    expect(all).toHaveLength(3);

    receiver.answer(200);
    const before = receiver.received.length;
    const enabled = await call(`/api/webhooks/${endpoint}`, { key: acct.key, method: "PATCH", body: { status: "active" } });
    expect(enabled.status, enabled.text).toBe(200);
    await sleep(200);
    // Enabling sends nothing.
    expect(receivedAt("/star", before)).toEqual([]);
    const res = await call(`/api/webhooks/${endpoint}/recover`, { key: acct.key, body: { since } });
    expect(res.status, res.text).toBe(202);
    const done = await waitFor(async () => {
      const r = await call(`/api/webhooks/${endpoint}/recoveries/${res.body.id}`, { key: acct.key });
      expect(r.body.status).toBe("done");
      return r.body;
    }, 10_000, 50);
    await waitFor(() => expect(receivedAt("/star", before).length).toBeGreaterThanOrEqual(3), 8000, 25);
    // The endpoint's own retries, scheduled by the failures, fall due: nothing more goes.
    await runDurableObjectAlarm(schedulerFor(env, endpoint));
    await sleep(400);
    const got = receivedAt("/star", before);
    expect(got.map((g) => g.type)).toEqual(["customer.created", "customer.created", "customer.created"]);
    expect(got.map((g) => g.id)).toEqual(all);
    expect(done).toMatchObject({ total: 3, sent: 3 });
    // No delivery of an event about this endpoint was ever made to it.
    const own = await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id WHERE d.endpoint_id = ? AND ev.object_id = ?")
      .bind(endpoint, endpoint)
      .first<{ n: number }>();
    expect(own!.n).toBe(0);
  });
});

describe("hostile recovery ranges and ids", () => {
  it("a date that is not on the calendar (November 31, February 30, 24:00), since equal to until, or a huge string: 400 naming the field; nothing recorded", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/hostile", ["customer.created"]);
    // A fixed clock: every case's dates lie inside the 30-day retention and before now.
    const at = Date.parse("2026-12-15T12:00:00Z");
    useClock({ now: () => at });
    try {
      const cases: [object, string][] = [
        [{ since: "2026-11-31T00:00:00Z" }, "since"],
        [{ since: "2026-12-01T00:00:00Z", until: "2026-11-31T10:00:00Z" }, "until"],
        [{ since: "2026-11-20T00:00:00Z", until: "2026-12-01T24:00:00Z" }, "until"],
        [{ since: "2026-11-20T00:00:00+24:00" }, "since"],
        [{ since: "2026-11-20T00:00:00Z", until: "2026-11-20T00:00:00Z" }, "since"],
        [{ since: "2026-11-20T00:00:00Z", until: "2026-11-20T01:00:00+01:00" }, "since"],
        [{ since: "2".repeat(100_000) }, "since"],
      ];
      for (const [body, param] of cases) {
        const res = await call(`/api/webhooks/${endpoint}/recover`, { key: acct.key, body });
        expect(res.status, `${JSON.stringify(body).slice(0, 120)}: ${res.text.slice(0, 300)}`).toBe(400);
        expect(res.body.error, JSON.stringify(body).slice(0, 120)).toMatchObject({ type: "invalid_request_error", param });
        expect(res.text.length).toBeLessThan(2000);
      }
    } finally {
      useClock();
    }
    expect(await env.DB.prepare("SELECT count(*) AS n FROM webhook_recoveries WHERE endpoint_id = ?").bind(endpoint).first<{ n: number }>()).toEqual({ n: 0 });
  });

  it("a deleted endpoint, and a recovery read through another endpoint of the same account, answer 404", async () => {
    const acct = await signup();
    const first = await register(acct, "/first", ["customer.created"]);
    const second = await register(acct, "/second", ["customer.created"]);
    const res = await call(`/api/webhooks/${first}/recover`, { key: acct.key, body: { since: iso(Date.now() - 60_000) } });
    expect(res.status, res.text).toBe(202);
    expect((await call(`/api/webhooks/${second}/recoveries/${res.body.id}`, { key: acct.key })).status).toBe(404);
    expect((await call(`/api/webhooks/${second}/recoveries`, { key: acct.key })).body.data).toEqual([]);
    expect((await call(`/api/webhooks/${second}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const gone = await call(`/api/webhooks/${second}/recover`, { key: acct.key, body: { since: iso(Date.now() - 60_000) } });
    expect(gone.status, gone.text).toBe(404);
    expect(gone.body.error).toMatchObject({ type: "not_found_error", param: "id" });
  });
});

describe("an endpoint disabled or deleted while its recovery runs", () => {
  it("the recovery ends done with what it sent; the rest is not sent, and what it queued ends with the endpoint's other pending deliveries", async () => {
    const acct = await signup();
    const since = iso(Date.now() - 1000);
    const endpoint = await register(acct, "/midway", ["customer.created"]);
    const other = await register(acct, "/midway-deleted", ["customer.created"]);
    // Both endpoints missed four events: they never had a delivery (disabled meanwhile).
    for (const id of [endpoint, other]) expect((await call(`/api/webhooks/${id}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    for (const name of ["Mid One", "Mid Two", "Mid Three", "Mid Four"]) await createUser(acct, { name });
    for (const id of [endpoint, other]) expect((await call(`/api/webhooks/${id}`, { key: acct.key, method: "PATCH", body: { status: "active" } })).status).toBe(200);
    const held = (id: string) => fetchWith({ JOB_QUEUE: droppingQueue(), DELIVERY_QUEUE: droppingQueue() }, `/api/webhooks/${id}/recover`, { key: acct.key, json: { since } });
    const a = await held(endpoint);
    const b = await held(other);
    expect([a.status, b.status]).toEqual([202, 202]);
    // One page of two for the first (its messages held: nothing goes before the disable); then it
    // is disabled, and the other deleted before its first page.
    const quiet = { ...env, DELIVERY_QUEUE: droppingQueue() };
    expect(await recoverPage(quiet, a.body.id, 2)).toEqual({ more: true });
    expect((await call(`/api/webhooks/${endpoint}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    expect((await call(`/api/webhooks/${other}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expect(await recoverPage(quiet, a.body.id, 2)).toEqual({ more: false });
    expect(await recoverPage(quiet, b.body.id, 2)).toEqual({ more: false });
    const rows = await env.DB.prepare("SELECT id, status, total, sent FROM webhook_recoveries WHERE id IN (?, ?) ORDER BY endpoint_id = ? DESC").bind(a.body.id, b.body.id, endpoint).all();
    expect(rows.results).toEqual([
      { id: a.body.id, status: "done", total: 2, sent: 2 },
      { id: b.body.id, status: "done", total: 0, sent: 0 },
    ]);
    // The first page's two deliveries ended with the endpoint; no delivery to the deleted one.
    const deliveries = await env.DB.prepare("SELECT endpoint_id, status FROM webhook_deliveries WHERE endpoint_id IN (?, ?)").bind(endpoint, other).all<{ endpoint_id: string; status: string }>();
    expect(deliveries.results).toEqual([
      { endpoint_id: endpoint, status: "failed" },
      { endpoint_id: endpoint, status: "failed" },
    ]);
    await sleep(300);
    expect(receivedAt("/midway")).toEqual([]);
    expect(receivedAt("/midway-deleted")).toEqual([]);
  });

  it("a recovery id of the wrong shape or length answers 400 naming rcv_id, never echoing it whole", async () => {
    const acct = await signup();
    const endpoint = await register(acct, "/ids", ["customer.created"]);
    const huge = "rcv_" + "x".repeat(5000);
    const res = await call(`/api/webhooks/${endpoint}/recoveries/${huge}`, { key: acct.key });
    expect(res.status, res.text.slice(0, 300)).toBe(400);
    expect(res.body.error.param).toBe("rcv_id");
    expect(res.text).not.toContain("x".repeat(200));
    expect((await call(`/api/webhooks/${endpoint}/recoveries/rcv_nope`, { key: acct.key })).status).toBe(404);
  });
});

describe("a health event redelivered without endpoint_id", () => {
  it("goes to the account's other endpoints that take it, never to the endpoint it is about (enabled again)", async () => {
    const acct = await signup();
    const star = await register(acct, "/star-redeliver", ["*"]);
    const ops = await register(acct, "/ops-redeliver", ["webhook_endpoint.disabled"]);
    expect((await call(`/api/webhooks/${star}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    expect((await call(`/api/webhooks/${star}`, { key: acct.key, method: "PATCH", body: { status: "active" } })).status).toBe(200);
    const event = (await env.DB.prepare("SELECT id FROM events WHERE object_id = ? AND type = 'webhook_endpoint.disabled'").bind(star).first<{ id: string }>())!;
    await waitFor(async () => {
      const row = await env.DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(deliveryOf(event.id, ops)).first<{ status: string }>();
      expect(row?.status).toBe("delivered");
    }, 8000, 25);
    // The ops endpoint had it; the enabled endpoint never had it, and must not get it now.
    const res = await call(`/api/events/${event.id}/redeliver`, { key: acct.key, body: {} });
    expect(res.status, res.text).toBe(202);
    expect(res.body.deliveries).toEqual([]);
    await sleep(300);
    expect(receivedAt("/star-redeliver")).toEqual([]);
    expect(await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE endpoint_id = ?").bind(star).first()).toBeNull();
  });
});
