// Issue 35's review: attacks on webhook operations (recovery, endpoint health, throttle) by a
// reviewer who did not write them. Each test here failed on the code as merged, or proves an
// attack that found nothing. The real local D1, queues and Durable Objects; only receivers are simulated.
import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { env } from "../support/env";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { schedulerFor } from "../../src/webhooks/scheduler";

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
