// One webhook shape: every event is { id, type, data, created_at, object_id, sequence }. A
// subscription notification keeps the interface document's fields at the top level as well
// (event, subscription_id, status, timestamp), and its data is the subscription as the API
// returned it at that change.
import { createHmac } from "node:crypto";
import { env } from "../support/env";
import { Webhook } from "standardwebhooks";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { cardFields } from "../support/cards";
import { createUser } from "../support/fixtures";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

const ENVELOPE = ["id", "type", "data", "created_at", "object_id", "sequence", "livemode"];
const NOTIFICATION = [...ENVELOPE, "event", "subscription_id", "status", "timestamp"];

describe("the webhook envelope", () => {
  it("subscription notifications carry type and data (the subscription as the API answered that change) beside the document's fields", async () => {
    const acct = await signup();
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/all`, events: ["*"] } });
    expect(hook.status).toBe(201);
    const user = await createUser(acct);
    const plan = await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 19.99, currency: "usd", interval: "month" } });
    const created = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.body.id, ...cardFields() } });
    expect(created.status, created.text).toBe(201);
    const sub = created.body.id as string;
    const updated = await call(`/subscriptions/${sub}`, { key: acct.key, method: "PUT", body: { quantity: 3 } });
    expect(updated.status, updated.text).toBe(200);
    const canceled = await call(`/subscriptions/${sub}`, { key: acct.key, method: "DELETE" });
    expect(canceled.status, canceled.text).toBe(200);

    const notifications = await waitFor(() => {
      const bodies = receiver.received.map((r) => JSON.parse(r.body)).filter((b) => b.subscription_id === sub);
      expect(bodies).toHaveLength(3);
      return bodies.sort((a, b) => a.sequence - b.sequence);
    }, 8000, 25);
    expect(notifications.map((n) => [n.type, n.event, n.status, n.sequence])).toEqual([
      ["subscription_created", "subscription_created", "active", 1],
      ["subscription_updated", "subscription_updated", "active", 2],
      ["subscription_canceled", "subscription_canceled", "canceled", 3],
    ]);
    for (const n of notifications) {
      expect(Object.keys(n)).toEqual(NOTIFICATION);
      expect(n).toMatchObject({ object_id: sub, subscription_id: sub, timestamp: n.created_at });
    }
    // The subscription exactly as each change answered it (the PUT answers a part of it).
    expect(notifications[0].data).toEqual(created.body);
    expect(notifications[1].data).toMatchObject({ ...updated.body, quantity: 3, object: "subscription" });
    expect(notifications[2].data).toEqual(canceled.body);
    expect((await call(`/subscriptions/${sub}`, { key: acct.key })).body).toEqual(canceled.body);

    // Every other event has the envelope too, and every body is signed as it was delivered.
    const secret = hook.body.secret as string;
    for (const got of receiver.received) {
      const body = JSON.parse(got.body);
      expect(Object.keys(body).slice(0, ENVELOPE.length), body.type).toEqual(ENVELOPE);
      expect(got.headers["x-signature"]).toBe(createHmac("sha256", secret).update(got.body).digest("hex"));
      expect(new Webhook(secret).verify(got.body, got.headers)).toEqual(body);
    }
    expect(receiver.received.map((r) => JSON.parse(r.body).type).sort()).toEqual(
      ["customer.created", "payment.completed", "subscription_canceled", "subscription_created", "subscription_updated", "invoice.created", "invoice.finalized", "invoice.paid"].sort(),
    );
    // The feed shows the same bodies: payload is what was delivered, data its data.
    const feed = (await call(`/api/events?object_id=${sub}`, { key: acct.key })).body.data as { id: string; payload: unknown; data: unknown }[];
    for (const event of feed) {
      const delivered = receiver.received.find((r) => r.headers["webhook-id"] === event.id)!;
      expect(event.payload).toEqual(JSON.parse(delivered.body));
      expect(event.data).toEqual(JSON.parse(delivered.body).data);
    }
  });

  it("a notification's stored row keeps no processor token or card fingerprint", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 5, currency: "usd", interval: "month" } });
    const created = await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.body.id, ...cardFields() } });
    expect(created.status).toBe(201);
    const row = await env.DB.prepare("SELECT processor_token, card_fingerprint FROM subscriptions WHERE id = ?").bind(created.body.id).first<{ processor_token: string; card_fingerprint: string }>();
    const payload = await env.DB.prepare("SELECT payload FROM events WHERE object_id = ? AND type = 'subscription_created'").bind(created.body.id).first<string>("payload");
    expect(payload).toContain(created.body.id);
    expect(payload).not.toContain(row!.processor_token);
    expect(payload).not.toContain(row!.card_fingerprint);
  });
});
