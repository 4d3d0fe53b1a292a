// POST /api/events/{id}/redeliver: without a body it sends the event again only where it was not
// delivered (a failed delivery, or an active subscribed endpoint that never had one), and says why
// it left each other delivery alone; with endpoint_id it sends it to that endpoint whatever the
// state of its delivery there.
import { env } from "../support/env";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { deliveryRow } from "../support/db";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

async function register(acct: Account, path: string, events = ["customer.created"]) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events } });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

const deliveryOf = (eventId: string, endpointId: string) => `dlv_${eventId.slice(4)}${endpointId.slice(4)}`;
const sentTo = (path: string) => receiver.received.filter((r) => r.url === `${RECEIVER_ORIGIN}${path}`);

/** An account's customer.created event, delivered (200) to each endpoint registered before it. */
async function deliveredEvent(acct: Account, paths: string[]) {
  const endpoints = Object.fromEntries(await Promise.all(paths.map(async (path) => [path, await register(acct, path)] as const)));
  const user = await createUser(acct);
  const event = (await call(`/api/events?type=customer.created&limit=1`, { key: acct.key })).body.data[0] as { id: string; object_id: string };
  expect(event.object_id).toBe(user.id);
  for (const id of Object.values(endpoints)) {
    await waitFor(async () => expect((await deliveryRow(deliveryOf(event.id, id)))?.status).toBe("delivered"), 8000, 25);
  }
  return { event: event.id, endpoints };
}

const redeliver = (acct: Account, eventId: string, body: object = {}, idempotencyKey?: string) =>
  call(`/api/events/${eventId}/redeliver`, { key: acct.key, body, idempotencyKey });

describe("POST /api/events/{id}/redeliver without endpoint_id: only where the event was not delivered", () => {
  it("re-sends a failed delivery and sends to a subscribed endpoint that never had one; leaves a delivered one, one still being tried, a disabled endpoint's and an unsubscribed one's alone, and says why", async () => {
    const acct = await signup();
    const { event, endpoints } = await deliveredEvent(acct, ["/ok", "/gave-up", "/retrying", "/disabled", "/unsubscribed"]);
    // The states a delivery can be in by now: its 24-hour window ended (failed), still retrying, on
    // an endpoint since disabled.
    const failed = deliveryOf(event, endpoints["/gave-up"]);
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'failed', last_error = 'retry_window_ended' WHERE id = ?").bind(failed).run();
    const retrying = deliveryOf(event, endpoints["/retrying"]);
    const retryAt = Date.now() + 3_600_000;
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', attempt_count = 3, next_attempt_at = ? WHERE id = ?").bind(retryAt, retrying).run();
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'failed', last_error = 'endpoint_disabled' WHERE id = ?").bind(deliveryOf(event, endpoints["/disabled"])).run();
    expect((await call(`/api/webhooks/${endpoints["/disabled"]}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'failed', last_error = 'retry_window_ended' WHERE id = ?").bind(deliveryOf(event, endpoints["/unsubscribed"])).run();
    expect((await call(`/api/webhooks/${endpoints["/unsubscribed"]}`, { key: acct.key, method: "PATCH", body: { events: ["payout.paid"] } })).status).toBe(200);
    const later = await register(acct, "/later"); // subscribed after the event: never had it
    await register(acct, "/other-type", ["payout.paid"]); // not subscribed to the type
    const before = receiver.received.length;

    const res = await redeliver(acct, event, {}, "redeliver-missing");
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({
      object: "redelivery",
      livemode: false,
      event_id: event,
      deliveries: [failed, deliveryOf(event, later)].sort(),
      skipped: [
        { delivery_id: deliveryOf(event, endpoints["/ok"]), endpoint_id: endpoints["/ok"], reason: "already_delivered" },
        { delivery_id: retrying, endpoint_id: endpoints["/retrying"], reason: "in_progress" },
        { delivery_id: deliveryOf(event, endpoints["/disabled"]), endpoint_id: endpoints["/disabled"], reason: "endpoint_disabled" },
        { delivery_id: deliveryOf(event, endpoints["/unsubscribed"]), endpoint_id: endpoints["/unsubscribed"], reason: "endpoint_unsubscribed" },
      ].sort((a, b) => a.delivery_id.localeCompare(b.delivery_id)),
    });
    await waitFor(() => expect(receiver.received.length - before).toBe(2), 8000, 25);
    await new Promise((resolve) => setTimeout(resolve, 200)); // nothing else arrives
    expect(receiver.received.slice(before).map((r) => r.url).sort()).toEqual([`${RECEIVER_ORIGIN}/gave-up`, `${RECEIVER_ORIGIN}/later`]);
    expect(receiver.received.slice(before).every((r) => r.headers["webhook-id"] === event)).toBe(true);
    expect(sentTo("/ok")).toHaveLength(1);
    // The delivery still being tried keeps its schedule and its attempt count.
    expect(await deliveryRow(retrying)).toMatchObject({ status: "pending", attempt_count: 3, next_attempt_at: retryAt });
    expect((await deliveryRow(failed))!).toMatchObject({ status: "delivered", attempt_count: 2 });

    // A replay answers what the first request answered.
    const replay = await redeliver(acct, event, {}, "redeliver-missing");
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(res.body);
  });

  it("an event delivered everywhere: 202 with no delivery queued, each endpoint listed as already delivered, and nothing sent", async () => {
    const acct = await signup();
    const { event, endpoints } = await deliveredEvent(acct, ["/a", "/b"]);
    const before = receiver.received.length;
    const res = await redeliver(acct, event);
    expect(res.status, res.text).toBe(202);
    expect(res.body.deliveries).toEqual([]);
    expect(res.body.skipped).toEqual(
      Object.values(endpoints)
        .map((id) => ({ delivery_id: deliveryOf(event, id), endpoint_id: id, reason: "already_delivered" }))
        .sort((a, b) => a.delivery_id.localeCompare(b.delivery_id)),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.received.length).toBe(before);
    for (const id of Object.values(endpoints)) expect(await deliveryRow(deliveryOf(event, id))).toMatchObject({ status: "delivered", attempt_count: 1 });
  });

  it("an event no endpoint is subscribed to: 202 with nothing queued and nothing skipped", async () => {
    const acct = await signup();
    await createUser(acct);
    const event = (await call("/api/events?limit=1", { key: acct.key })).body.data[0].id;
    const res = await redeliver(acct, event);
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({ object: "redelivery", livemode: false, event_id: event, deliveries: [], skipped: [] });
  });
});

describe("POST /api/events/{id}/redeliver with endpoint_id: that endpoint, whatever its state", () => {
  it("re-sends to an endpoint that already answered 2xx, and to one still being tried (now, with a fresh window)", async () => {
    const acct = await signup();
    const { event, endpoints } = await deliveredEvent(acct, ["/ok", "/retrying", "/untouched"]);
    const retrying = deliveryOf(event, endpoints["/retrying"]);
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', attempt_count = 3, first_attempt_at = ?, next_attempt_at = ? WHERE id = ?")
      .bind(Date.now() - 60_000, Date.now() + 3_600_000, retrying)
      .run();
    for (const path of ["/ok", "/retrying"]) {
      const res = await redeliver(acct, event, { endpoint_id: endpoints[path] });
      expect(res.status, res.text).toBe(202);
      expect(res.body).toEqual({ object: "redelivery", livemode: false, event_id: event, deliveries: [deliveryOf(event, endpoints[path])], skipped: [] });
    }
    await waitFor(() => expect(sentTo("/ok")).toHaveLength(2), 8000, 25);
    await waitFor(() => expect(sentTo("/retrying")).toHaveLength(2), 8000, 25);
    expect(sentTo("/ok")[1].headers["webhook-id"]).toBe(event);
    expect(sentTo("/untouched")).toHaveLength(1);
    // Attempt numbers carry on, so each attempt keeps a number of its own.
    await waitFor(async () => expect(await deliveryRow(retrying)).toMatchObject({ status: "delivered", attempt_count: 4 }), 8000, 25);
    expect(await deliveryRow(deliveryOf(event, endpoints["/ok"]))).toMatchObject({ status: "delivered", attempt_count: 2 });
  });

  it("an endpoint that is disabled, deleted, another account's or unknown answers 404 and changes nothing", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const { event, endpoints } = await deliveredEvent(acct, ["/a", "/b"]);
    expect((await call(`/api/webhooks/${endpoints["/a"]}`, { key: acct.key, method: "PATCH", body: { status: "disabled" } })).status).toBe(200);
    expect((await call(`/api/webhooks/${endpoints["/b"]}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const theirs = await register(other, "/theirs");
    for (const endpoint of [endpoints["/a"], endpoints["/b"], theirs, "whk_00000000000000000000000000"]) {
      const res = await redeliver(acct, event, { endpoint_id: endpoint });
      expect(res.status, res.text).toBe(404);
      expect(res.body.error).toMatchObject({ type: "not_found_error", param: "endpoint_id" });
    }
    const before = receiver.received.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.received.length).toBe(before);
  });
});
