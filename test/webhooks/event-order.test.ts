// Events in order: each event names its object and its place among that object's events,
// assigned in the change's own batch (gap-free, in commit order, even under concurrent writes).
// Deliveries carry it as Tender-Sequence; the feed shows and filters by object_id.
import { env } from "../support/env";
import { afterAll, describe, expect, it } from "vitest";
import { processDelivery } from "../../src/webhooks/consumer";
import { call, expectError, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { droppingQueue } from "../support/queue";
import { fetchWith } from "../support/http";
import { payoutBody } from "../support/cards";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";
import { waitFor } from "../support/wait";

const receiver = installReceiver();
afterAll(() => receiver.restore());

const feed = async (key: string, objectId: string) =>
  (await call(`/api/events?object_id=${objectId}&limit=100`, { key })).body.data as { type: string; object_id: string; sequence: number; payload: Record<string, unknown> }[];

describe("a sequence per object", () => {
  it("a payout's events count 1, 2 in order; the envelope carries the sequence; the feed filters by object_id", async () => {
    const acct = await signup();
    const created = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody({ amount: 1200 }) });
    expect(created.status).toBe(201);
    const canceled = await call(`/payouts/${created.body.id}/cancel`, { key: acct.key, method: "POST" });
    expect(canceled.status).toBe(200);
    const events = (await feed(acct.key, created.body.id)).reverse();
    expect(events.map((e) => [e.type, e.object_id, e.sequence])).toEqual([
      ["payout.created", created.body.id, 1],
      ["payout.canceled", created.body.id, 2],
    ]);
    expect(events.map((e) => e.payload.sequence)).toEqual([1, 2]);
    // Another object's events are not in that feed.
    expect(await feed(acct.key, "po_00000000000000000000000000")).toEqual([]);
  });

  it("concurrent updates of one user get places 2 to 11, each once, with no gap", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: `Ada ${i}`, email: "ada@example.com" } })),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const events = await feed(acct.key, user.id);
    expect(events.map((e) => e.sequence).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    // Newest first, so sequence follows the events' own order.
    expect(events.map((e) => e.sequence)).toEqual([11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
  });

  it("50 concurrent changes to one subscription produce sequences 1..51, gap-free, in commit order", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Seats", price: 5, currency: "usd", interval: "month" } })).body;
    const sub = (await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2035, cvv: "123" } })).body;
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: i + 1, proration_behavior: "none" } })),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const events = await feed(acct.key, sub.id);
    // Newest first: the feed's order (the events' commit order) is the sequence's order.
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 51 }, (_, i) => 51 - i));
  });

  it("a subscription's notifications count in its own sequence", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 9.99, currency: "usd", interval: "month" } })).body;
    const sub = (await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2035, cvv: "123" } })).body;
    await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    const events = (await feed(acct.key, sub.id)).reverse();
    expect(events.map((e) => [e.type, e.sequence])).toEqual([
      ["subscription_created", 1],
      ["subscription_updated", 2],
      ["subscription_canceled", 3],
    ]);
    // The payment is its own object.
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect((await feed(acct.key, payment.id)).map((e) => [e.type, e.sequence])).toEqual([["payment.completed", 1]]);
  });

  it("deliveries carry Tender-Sequence: <object_id>/<sequence>", async () => {
    const acct = await signup();
    await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/order`, events: ["customer.created", "customer.updated"] } });
    const user = await createUser(acct);
    await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Ada K", email: "ada@example.com" } });
    await waitFor(() => expect(receiver.received.filter((r) => r.url.endsWith("/order"))).toHaveLength(2));
    const sequences = receiver.received.filter((r) => r.url.endsWith("/order")).map((r) => r.headers["tender-sequence"]).sort();
    expect(sequences).toEqual([`${user.id}/1`, `${user.id}/2`]);
  });

  it("the catalog names the object each event type is about", async () => {
    const acct = await signup();
    const types = (await call("/api/event-types", { key: acct.key })).body.data as { type: string; object: string }[];
    const objectOf = Object.fromEntries(types.map((t) => [t.type, t.object]));
    expect(objectOf).toMatchObject({
      "payment.completed": "payment",
      "refund.initiated": "refund",
      "customer.updated": "user",
      "payout.paid": "payout",
      subscription_renewal: "subscription",
    });
  });
});

describe("ordered delivery per endpoint (ordering: per_object)", () => {
  const deliveryOf = async (eventType: string, objectId: string, endpointId: string) =>
    (await env.DB.prepare(
      "SELECT d.* FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE e.type = ? AND e.object_id = ? AND d.endpoint_id = ?",
    )
      .bind(eventType, objectId, endpointId)
      .first<Record<string, any>>())!;

  it("is opt-in, shown on the endpoint, and validated", async () => {
    const acct = await signup();
    const plain = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/plain`, events: ["customer.created"] } });
    expect(plain.body.ordering).toBe("none");
    const ordered = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/o`, events: ["customer.created"], ordering: "per_object" } });
    expect(ordered.body.ordering).toBe("per_object");
    const patched = await call(`/api/webhooks/${plain.body.id}`, { key: acct.key, method: "PATCH", body: { ordering: "per_object" } });
    expect(patched.body.ordering).toBe("per_object");
    expect((await call(`/api/webhooks/${plain.body.id}`, { key: acct.key })).body.ordering).toBe("per_object");
    const bad = expectError(await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/x`, events: ["customer.created"], ordering: "fifo" } }), 400, "invalid_request_error");
    expect(bad.param).toBe("ordering");
  });

  it("with ordering off, a later event about an object goes out while an earlier one is still failing", async () => {
    const acct = await signup();
    let failNext = true;
    receiver.answer(() => {
      const status = failNext ? 500 : 200;
      failNext = false;
      return new Response(status === 200 ? "ok" : "down", { status });
    });
    try {
      const endpoint = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/unordered`, events: ["customer.created", "customer.updated"] } })).body;
      const ada = await createUser(acct, { name: "Ada" });
      await waitFor(async () => expect((await deliveryOf("customer.created", ada.id, endpoint.id)).attempt_count).toBe(1));
      await call(`/api/users/${ada.id}`, { key: acct.key, method: "PUT", body: { name: "Ada K", email: "ada@example.com" } });
      await waitFor(async () => expect((await deliveryOf("customer.updated", ada.id, endpoint.id)).status).toBe("delivered"));
      expect((await deliveryOf("customer.created", ada.id, endpoint.id)).status).toBe("pending");
    } finally {
      receiver.answer(200);
    }
  });

  it("a failing delivery holds back only its object's later ones, which go out in order once it is delivered", async () => {
    const acct = await signup();
    let failNext = true;
    receiver.answer(() => {
      const status = failNext ? 500 : 200;
      failNext = false;
      return new Response(status === 200 ? "ok" : "down", { status });
    });
    try {
      const endpoint = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/ordered`, events: ["customer.created", "customer.updated"], ordering: "per_object" } })).body;
      const ada = await createUser(acct, { name: "Ada" });
      const created = await waitFor(async () => {
        const row = await deliveryOf("customer.created", ada.id, endpoint.id);
        expect(row.attempt_count).toBe(1);
        return row;
      });
      expect(created.status).toBe("pending");
      await call(`/api/users/${ada.id}`, { key: acct.key, method: "PUT", body: { name: "Ada K", email: "ada@example.com" } });
      // The update waits for the failed creation, and says so in the delivery log.
      const updated = await waitFor(async () => {
        const row = await deliveryOf("customer.updated", ada.id, endpoint.id);
        expect(row.waiting_for).toBe(created.id);
        return row;
      });
      expect(updated.attempt_count).toBe(0);
      const log = (await call(`/api/webhooks/${endpoint.id}/deliveries`, { key: acct.key })).body.data as { id: string; waiting_for: string | null }[];
      expect(log.find((d) => d.id === updated.id)!.waiting_for).toBe(created.id);
      // Another object is not held back.
      const bob = await createUser(acct, { name: "Bob" });
      await waitFor(async () => expect((await deliveryOf("customer.created", bob.id, endpoint.id)).status).toBe("delivered"));
      // The creation's retry succeeds; the update goes out after it.
      await env.DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?").bind(Date.now() - 1, created.id).run();
      expect(await processDelivery(env, created.id)).toBe("delivered");
      await waitFor(async () => expect((await deliveryOf("customer.updated", ada.id, endpoint.id)).status).toBe("delivered"));
      const adaOk = receiver.received.filter((r) => r.url.endsWith("/ordered") && r.headers["tender-sequence"]?.startsWith(`${ada.id}/`));
      expect(adaOk.map((r) => r.headers["tender-sequence"])).toEqual([`${ada.id}/1`, `${ada.id}/1`, `${ada.id}/2`]);
    } finally {
      receiver.answer(200);
    }
  });

  it("once the held delivery ends failed after its window, the next goes out: nothing waits forever", async () => {
    const acct = await signup();
    const endpoint = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/window`, events: ["customer.created", "customer.updated"], ordering: "per_object" } })).body;
    const ada = await createUser(acct, { name: "Ada" });
    const created = await waitFor(async () => {
      const row = await deliveryOf("customer.created", ada.id, endpoint.id);
      expect(row.status).toBe("delivered");
      return row;
    });
    // Make the creation pending again with its window over, then emit an update.
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending', first_attempt_at = ?, next_attempt_at = ? WHERE id = ?")
      .bind(Date.now() - 25 * 3_600_000, Date.now() + 3_600_000, created.id)
      .run();
    await call(`/api/users/${ada.id}`, { key: acct.key, method: "PUT", body: { name: "Ada K", email: "ada@example.com" } });
    const updated = await waitFor(async () => {
      const row = await deliveryOf("customer.updated", ada.id, endpoint.id);
      expect(row.waiting_for).toBe(created.id);
      return row;
    });
    await env.DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?").bind(Date.now() - 1, created.id).run();
    expect(await processDelivery(env, created.id)).toBe("failed");
    await waitFor(async () => expect((await deliveryOf("customer.updated", ada.id, endpoint.id)).status).toBe("delivered"));
    expect(updated.status).toBe("pending");
  });
});
