// The deliveries of a batch's events are made by one statement (src/webhooks/outbox.ts,
// fanOutDeliveries): a renewal chunk settles many subscriptions of many accounts in one batch, and
// each event must still reach exactly the endpoints of its own account and mode subscribed to its type.
import { env } from "../support/env";
import { afterEach, beforeEach, expect, it } from "vitest";
import { renewChunk } from "../../src/billing/renewals";
import { useClock } from "../../src/lib/clock";
import { processDelivery } from "../../src/webhooks/consumer";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { type Account, call, signup, withEnv } from "../support/http";
import { faultyD1, recordingQueue, writesTo } from "../support/faults";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { makeDue } from "../support/clock";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => (receiver = installReceiver()));
afterEach(() => {
  receiver.restore();
  useClock();
});

async function register(acct: Account, events: string[], path: string) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string };
}

interface Row {
  event_id: string;
  type: string;
  endpoint_id: string;
  account_id: string;
  livemode: number;
  delivery_created: string;
  event_created: string;
  status: string;
}

async function deliveriesOf(accountId: string, since: string): Promise<Row[]> {
  const { results } = await env.DB.prepare(
    `SELECT d.event_id, e.type, d.endpoint_id, d.account_id, d.livemode, d.created_at AS delivery_created, e.created_at AS event_created, d.status
     FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE e.account_id = ? AND e.created_at >= ? ORDER BY e.feed_position, d.endpoint_id`,
  )
    .bind(accountId, since)
    .all<Row>();
  return results;
}

it("one chunk's settlements over two accounts: every event reaches its own account's subscribed endpoints once, and no other", async () => {
  const accounts = await Promise.all([signup("Fan out A"), signup("Fan out B")]);
  const setups = await Promise.all(
    accounts.map(async (acct) => {
      const user = await createUser(acct);
      const plan = await createPlan(acct);
      const subs = [await subscribed(acct, user.id, plan.id), await subscribed(acct, user.id, plan.id)];
      const all = await register(acct, ["*"], "/all");
      const paidOnly = await register(acct, ["invoice.paid"], "/paid");
      const unrelated = await register(acct, ["customer.created"], "/customers");
      return { acct, subs, all, paidOnly, unrelated };
    }),
  );
  const since = new Date().toISOString();
  for (const s of setups) for (const sub of s.subs) await makeDue(sub.id);

  // One chunk, both accounts' subscriptions interleaved: one settlement batch.
  const ids = [setups[0].subs[0].id, setups[1].subs[0].id, setups[0].subs[1].id, setups[1].subs[1].id];
  expect(await renewChunk(env, ids)).toEqual(["renewed", "renewed", "renewed", "renewed"]);

  for (const s of setups) {
    const rows = await deliveriesOf(s.acct.id, since);
    const events = await env.DB.prepare("SELECT id, type FROM events WHERE account_id = ? AND created_at >= ?").bind(s.acct.id, since).all<{ id: string; type: string }>();
    // Each renewal emits five events (the payment, the renewal, and the invoice created, finalized and paid).
    expect(events.results).toHaveLength(10);
    const toAll = rows.filter((r) => r.endpoint_id === s.all.id);
    const toPaid = rows.filter((r) => r.endpoint_id === s.paidOnly.id);
    expect(toAll.map((r) => r.event_id).sort()).toEqual(events.results.map((e) => e.id).sort());
    expect(toPaid.map((r) => r.type)).toEqual(["invoice.paid", "invoice.paid"]);
    // Nothing to the endpoint of another type, and nothing to another account's endpoints.
    expect(rows.filter((r) => r.endpoint_id !== s.all.id && r.endpoint_id !== s.paidOnly.id)).toEqual([]);
    for (const r of rows) {
      expect(r.account_id).toBe(s.acct.id);
      expect(r.livemode).toBe(0);
      // A delivery is made when its event is.
      expect(r.delivery_created).toBe(r.event_created);
    }
  }
  // Every delivery is sent: the receiver gets each account's 12 (10 to "*", 2 to invoice.paid).
  await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(24);
});

it("a chunk's settlement batch that commits and loses its answer: every event keeps its one delivery, and the sweeper sends each once", async () => {
  const accounts = await Promise.all([signup("Lost answer A"), signup("Lost answer B")]);
  const setups = await Promise.all(
    accounts.map(async (acct) => {
      const user = await createUser(acct);
      const plan = await createPlan(acct);
      const subs = [await subscribed(acct, user.id, plan.id), await subscribed(acct, user.id, plan.id)];
      return { acct, subs, all: await register(acct, ["*"], "/all") };
    }),
  );
  const since = new Date().toISOString();
  for (const s of setups) for (const sub of s.subs) await makeDue(sub.id);
  const ids = [setups[0].subs[0].id, setups[1].subs[0].id, setups[0].subs[1].id, setups[1].subs[1].id];

  // The chunk's one settlement batch commits, then throws; each settlement alone is then refused
  // (already settled) and skipped, so nothing is enqueued now.
  const faulty = faultyD1(env.DB, { kind: "commit_then_throw", when: (o) => writesTo(o, "payments") });
  const queue = recordingQueue();
  await renewChunk(withEnv({ DB: faulty, DELIVERY_QUEUE: queue }), ids);
  expect(faulty.fired).toHaveLength(1);
  expect(queue.sent).toEqual([]);
  const eventIds: string[] = [];
  for (const s of setups) {
    const events = (await env.DB.prepare("SELECT id FROM events WHERE account_id = ? AND created_at >= ?").bind(s.acct.id, since).all<{ id: string }>()).results;
    expect(events).toHaveLength(10);
    const rows = await deliveriesOf(s.acct.id, since);
    expect(rows.map((r) => r.event_id).sort()).toEqual(events.map((e) => e.id).sort());
    for (const r of rows) expect([r.endpoint_id, r.account_id]).toEqual([s.all.id, s.acct.id]);
    eventIds.push(...events.map((e) => e.id));
  }

  // The sweeper finds the deliveries the lost answer never enqueued, each once; a second sweep finds none.
  const start = Date.now();
  useClock({ now: () => start + 120_000 });
  const swept = recordingQueue();
  await sweepDeliveries(withEnv({ DELIVERY_QUEUE: swept }));
  const sweptIds = swept.sent.map((body) => (body as { deliveryId: string }).deliveryId);
  expect(new Set(sweptIds).size).toBe(20);
  expect(sweptIds).toHaveLength(20);
  for (const id of sweptIds) await processDelivery(env, id);
  useClock({ now: () => start + 240_000 });
  const again = recordingQueue();
  await sweepDeliveries(withEnv({ DELIVERY_QUEUE: again }));
  expect(again.sent).toEqual([]);
  const received = receiver.received.map((r) => (JSON.parse(r.body) as { id: string }).id);
  expect(received.sort()).toEqual(eventIds.sort());
});
