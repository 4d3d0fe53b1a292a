// Events in order: each event names its object and its place among that object's events,
// assigned in the change's own batch (gap-free, in commit order, even under concurrent writes).
// Deliveries carry it as Tender-Sequence; the feed shows and filters by object_id.
import { afterAll, describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
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
