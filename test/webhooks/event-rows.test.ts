// A run of a batch's events is written by one statement (src/webhooks/outbox.ts, eventRowsInsert):
// each event still takes the next place among its object's events and in its account's feed, in
// the order the batch emits them, around events written by statements of their own, and its
// payload is the envelope (or notification) its own insert would have built.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import { MAX_RUN_CHARS, commitWrites, emitEvent } from "../../src/webhooks/outbox";
import { env } from "../support/env";
import { faultyD1, recordingQueue, writesTo } from "../support/faults";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { signup } from "../support/http";

interface EventRow {
  id: string;
  account_id: string;
  type: string;
  object_id: string;
  sequence: number;
  feed_position: number;
  payload: string;
}

const eventsOf = async (ids: string[]) =>
  (await env.DB.prepare(`SELECT id, account_id, type, object_id, sequence, feed_position, payload FROM events WHERE id IN (${ids.map(() => "?").join(",")})`)
    .bind(...ids)
    .all<EventRow>()).results;

it("takes each event's places in emission order, across accounts and objects and around an event with its own statement", async () => {
  const [a, b] = await Promise.all([signup("Event rows A"), signup("Event rows B")]);
  const user = await createUser(b);
  const plan = await createPlan(b);
  const sub = await subscribed(b, user.id, plan.id);
  const db = createDb(env.DB);
  const tenantA = { accountId: a.id, livemode: false };
  const tenantB = { accountId: b.id, livemode: false };
  const before = await env.DB.prepare("SELECT COALESCE(MAX(feed_position), 0) AS n FROM events WHERE account_id = ?").bind(b.id).first<{ n: number }>();
  const subBefore = await env.DB.prepare("SELECT COALESCE(MAX(sequence), 0) AS n FROM events WHERE object_id = ?").bind(sub.id).first<{ n: number }>();
  const at = Date.now();
  const object = `obj_${crypto.randomUUID()}`;
  const emitted = [
    emitEvent(db, tenantA, { type: "customer.created", data: { id: object, n: 1 } }, at),
    emitEvent(db, tenantB, { type: "subscription_renewal", subscriptionId: sub.id, status: "success" }, at),
    // Its own statement: data read by SQL, not a registered source.
    emitEvent(db, tenantA, { type: "customer.updated", dataSql: sql`json_object('id', ${object}, 'n', 2)`, objectId: object }, at),
    emitEvent(db, tenantA, { type: "customer.updated", data: { id: object, n: 3 } }, at),
    emitEvent(db, tenantB, { type: "subscription_updated", subscriptionId: sub.id, status: "active" }, at),
  ];
  expect(emitted.map((e) => e.row !== undefined)).toEqual([true, true, false, true, true]);
  await commitWrites({ db, queue: recordingQueue() }, { statements: [], events: emitted });

  const rows = new Map((await eventsOf(emitted.map((e) => e.id))).map((r) => [r.id, r]));
  const [first, renewal, own, third, updated] = emitted.map((e) => rows.get(e.id)!);
  // The object's places, in emission order, the middle one taken by the event's own statement.
  expect([first, own, third].map((r) => r.sequence)).toEqual([1, 2, 3]);
  expect([first, own, third].map((r) => JSON.parse(r.payload).data.n)).toEqual([1, 2, 3]);
  // Account A's feed: three consecutive places, in emission order.
  expect(own.feed_position).toBe(first.feed_position + 1);
  expect(third.feed_position).toBe(first.feed_position + 2);
  // Account B's feed and the subscription's places continue from what was there.
  expect([renewal.feed_position, updated.feed_position]).toEqual([before!.n + 1, before!.n + 2]);
  expect([renewal.sequence, updated.sequence]).toEqual([subBefore!.n + 1, subBefore!.n + 2]);

  // Payloads: the envelope, and the notification with the subscription as committed.
  const envelope = JSON.parse(third.payload);
  expect(Object.keys(envelope)).toEqual(["id", "type", "data", "created_at", "object_id", "sequence", "livemode"]);
  expect(envelope).toEqual({ id: third.id, type: "customer.updated", data: { id: object, n: 3 }, created_at: new Date(at).toISOString(), object_id: object, sequence: 3, livemode: false });
  const notification = JSON.parse(renewal.payload);
  expect(Object.keys(notification)).toEqual(["id", "type", "data", "created_at", "object_id", "sequence", "livemode", "event", "subscription_id", "status", "timestamp"]);
  expect(notification).toMatchObject({
    id: renewal.id,
    type: "subscription_renewal",
    object_id: sub.id,
    sequence: subBefore!.n + 1,
    livemode: false,
    event: "subscription_renewal",
    subscription_id: sub.id,
    status: "success",
    timestamp: new Date(at).toISOString(),
  });
  const read = await env.DB.prepare("SELECT status FROM subscriptions WHERE id = ?").bind(sub.id).first<{ status: string }>();
  // Stored as the committed row, for the subscription's one serializer when the body is read (src/webhooks/payload.ts).
  expect(notification.data.$row).toBe("subscription");
  expect(notification.data.row).toMatchObject({ id: sub.id, status: read!.status });
});

it("an invoice's events read it at their stage in the batch that writes it, and number places like any other", async () => {
  const acct = await signup("Event rows invoices");
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id);
  const { results } = await env.DB.prepare(
    "SELECT type, sequence, payload FROM events WHERE account_id = ? AND type LIKE 'invoice.%' ORDER BY feed_position",
  )
    .bind(acct.id)
    .all<{ type: string; sequence: number; payload: string }>();
  expect(results.map((r) => r.type)).toEqual(["invoice.created", "invoice.finalized", "invoice.paid"]);
  expect(results.map((r) => r.sequence)).toEqual([1, 2, 3]);
  const [created, finalized, paid] = results.map((r) => JSON.parse(r.payload).data);
  expect(created).toMatchObject({ object: "invoice", status: "draft", number: null, subscription_id: sub.id, amount_paid: 0, payment_id: null });
  expect(finalized).toMatchObject({ status: "open", number: paid.number, amount_paid: 0, payment_id: null });
  expect(paid).toMatchObject({ status: "paid", amount_paid: paid.total });
  expect(paid.number).toEqual(expect.any(String));
  expect(paid.lines).toHaveLength(1);
});

it("writes the same payload text as an event's own statement does, for JSON data of every kind and for a notification", async () => {
  const acct = await signup("Event rows payloads");
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id);
  const db = createDb(env.DB);
  const tenant = { accountId: acct.id, livemode: false };
  const at = Date.now();
  const datas: unknown[] = [
    { id: "obj_1", nested: { list: [1, 2.5, -3e21, null, true, false], text: "naïve \u2028 \"quoted\" \\ émoji 🙂 <tag> &amp;" }, empty: {}, none: [] },
    { id: "obj_2", big: 9007199254740991, small: 1e-7, zero: 0, negative: -0 },
    { id: "obj_3", long: "x".repeat(5000) },
  ];
  // The same event twice: as a row of the run, and (data given as SQL) by its own statement.
  const pairs = datas.map((data) => [
    emitEvent(db, tenant, { type: "customer.updated", data }, at),
    emitEvent(db, tenant, { type: "customer.updated", dataSql: sql`json(${JSON.stringify(data)})`, objectId: (data as { id: string }).id }, at),
  ]);
  pairs.push([
    emitEvent(db, tenant, { type: "subscription_renewal", subscriptionId: sub.id, status: "success" }, at),
    emitEvent(db, tenant, { type: "subscription_renewal", subscriptionId: sub.id, status: sql`${"success"}` }, at),
  ]);
  for (const [row, own] of pairs) {
    expect(row.row).toBeDefined();
    expect(own.row).toBeUndefined();
  }
  await commitWrites({ db, queue: recordingQueue() }, { statements: [], events: pairs.flat() });
  const stored = new Map((await eventsOf(pairs.flat().map((e) => e.id))).map((r) => [r.id, r]));
  for (const [row, own] of pairs) {
    const a = stored.get(row.id)!;
    const b = stored.get(own.id)!;
    // The same text but for the event's id and its place among its object's events.
    const normalize = (r: EventRow) => r.payload.replaceAll(r.id, "<id>").replace(`"sequence":${r.sequence},`, `"sequence":<n>,`);
    expect(b.sequence).toBe(a.sequence + 1);
    expect(normalize(a)).toBe(normalize(b));
  }
});

it("splits a run whose rows outgrow one bound string, the places still in emission order", async () => {
  const acct = await signup("Event rows split");
  const recorded = faultyD1(env.DB);
  const db = createDb(recorded);
  const tenant = { accountId: acct.id, livemode: false };
  const object = `obj_${crypto.randomUUID()}`;
  const at = Date.now();
  // Each event's row is over a third of a run's budget: three events make two runs.
  const big = "é".repeat(Math.ceil(MAX_RUN_CHARS / 3));
  const emitted = [1, 2, 3].map((n) => emitEvent(db, tenant, { type: "customer.updated", data: { id: object, n, big } }, at));
  await commitWrites({ db, queue: recordingQueue() }, { statements: [], events: emitted });
  const [batch] = recorded.ops.filter((op) => op.kind === "batch");
  expect(batch.sql.filter((text) => writesTo({ ...batch, sql: [text] }, "events"))).toHaveLength(2);
  const rows = new Map((await eventsOf(emitted.map((e) => e.id))).map((r) => [r.id, r]));
  const stored = emitted.map((e) => rows.get(e.id)!);
  expect(stored.map((r) => r.sequence)).toEqual([1, 2, 3]);
  expect(stored.map((r) => r.feed_position - stored[0].feed_position)).toEqual([0, 1, 2]);
  expect(stored.map((r) => JSON.parse(r.payload).data.n)).toEqual([1, 2, 3]);
  expect(JSON.parse(stored[2].payload).data.big).toBe(big);
});

it("refuses an event whose data source was never registered, when it is emitted", () => {
  const db = createDb(env.DB);
  expect(() => emitEvent(db, { accountId: "acct_x", livemode: false }, { type: "invoice.created", source: "invoice:drafts", objectId: "in_x" }, Date.now())).toThrow(
    "unknown event data source invoice:drafts",
  );
});
