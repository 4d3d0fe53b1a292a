// Attacks on ordered delivery (ordering: per_object) and on the per-object sequence: lost
// wake-ups, races between a successor's check and its predecessor's end, duplicate and concurrent
// messages, endpoints disabled, deleted or switched while deliveries wait, redeliveries, test
// events, the 24-hour window, and tenants. Deliveries are enqueued into a recording queue and run
// by hand (processDelivery), so every interleaving is chosen by the test; the clock is a test
// clock, ahead of the wall clock, so no retry alarm fires on its own.
import { env } from "../support/env";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { DELIVERY_WINDOW_MS } from "../../src/domain/webhook-retry-schedule";
import { useClock } from "../../src/lib/clock";
import { processDelivery } from "../../src/webhooks/consumer";
import { deliveryIdOf } from "../../src/webhooks/outbox";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { deliveryRow } from "../support/db";
import { faultyD1, gate, recordingQueue, throwingQueue } from "../support/faults";
import { type Account, call, expectError, fetchWith, signup, withEnv } from "../support/http";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";

const receiver = installReceiver();
afterAll(() => receiver.restore());

// The test clock starts a day ahead of the wall clock and only moves forward, so retries that the
// scheduler arms (at clock time) never fire during the run: the tests run every attempt by hand.
let now = Date.now() + 86_400_000;
beforeEach(() => {
  now = Math.max(now, Date.now() + 86_400_000) + 1000;
  useClock({ now: () => now });
  receiver.answer(200);
});
afterEach(() => {
  useClock();
  receiver.answer(200);
});

const HALF = () => 0.5;
let paths = 0;

interface Setup {
  acct: Account;
  queue: ReturnType<typeof recordingQueue>;
  /** The Worker's environment with the recording queue: wake-ups land there, not on the real queue. */
  e: ReturnType<typeof withEnv>;
  api: (path: string, init?: { method?: string; json?: unknown }) => ReturnType<typeof fetchWith>;
  endpoint: { id: string; ordering: string };
  path: string;
}

async function setup(ordering: "per_object" | "none" = "per_object", acct?: Account): Promise<Setup> {
  acct ??= await signup();
  const queue = recordingQueue();
  const api = (path: string, init: { method?: string; json?: unknown } = {}) => fetchWith({ DELIVERY_QUEUE: queue }, path, { key: acct!.key, ...init });
  const path = `/attack-${++paths}`;
  const res = await api("/api/webhooks", { json: { url: `${RECEIVER_ORIGIN}${path}`, events: ["customer.created", "customer.updated"], ordering } });
  expect(res.status, res.text).toBe(201);
  return { acct, queue, e: withEnv({ DELIVERY_QUEUE: queue }), api, endpoint: res.body, path };
}

async function newUser(s: Setup, name = "Ada") {
  const res = await s.api("/api/users", { json: { name, email: `${name.toLowerCase()}@example.com` } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string };
}

async function updateUser(s: Setup, id: string, name: string) {
  const res = await s.api(`/api/users/${id}`, { method: "PUT", json: { name, email: "ada@example.com" } });
  expect(res.status, res.text).toBe(200);
}

/** The endpoint's deliveries about one object, by sequence. */
async function chain(objectId: string, endpointId: string) {
  const rows = await env.DB.prepare(
    "SELECT d.*, e.sequence FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE e.object_id = ? AND d.endpoint_id = ? ORDER BY e.sequence",
  )
    .bind(objectId, endpointId)
    .all<Record<string, any>>();
  return rows.results;
}

const queued = (s: Setup) => (s.queue.sent as { deliveryId: string }[]).map((m) => m.deliveryId);
const takeQueued = (s: Setup) => (s.queue.sent as { deliveryId: string }[]).splice(0).map((m) => m.deliveryId);

/** Runs every queued message (and what they enqueue) until the queue is empty; no sweeper. */
async function drain(s: Setup, { concurrent = false, duplicate = false } = {}) {
  for (let round = 0; round < 100; round++) {
    const ids = takeQueued(s);
    if (ids.length === 0) return;
    const all = duplicate ? ids.flatMap((id) => [id, id]) : ids;
    if (concurrent) await Promise.all(all.map((id) => processDelivery(s.e, id, HALF)));
    else for (const id of all) await processDelivery(s.e, id, HALF);
  }
  throw new Error("the queue never drained");
}

/** The Tender-Sequence headers the endpoint received, in order of receipt. */
const sequencesAt = (s: Setup, objectId?: string) =>
  receiver.received
    .filter((r) => r.url.endsWith(s.path))
    .map((r) => r.headers["tender-sequence"])
    .filter((h) => objectId === undefined || h?.startsWith(`${objectId}/`));

/** A user with a creation (1) that failed its first attempt, and an update (2) that waits for it. */
async function heldBehindFailure(s: Setup) {
  const user = await newUser(s);
  await updateUser(s, user.id, "Ada K");
  takeQueued(s);
  const [first, second] = await chain(user.id, s.endpoint.id);
  receiver.answer(500);
  expect(await processDelivery(s.e, first.id, HALF)).toBe("scheduled");
  receiver.answer(200);
  expect(await processDelivery(s.e, second.id, HALF)).toBe("waiting");
  expect((await deliveryRow(second.id))!.waiting_for).toBe(first.id);
  return { user, first: (await deliveryRow(first.id))!, second: (await deliveryRow(second.id))! };
}

describe("wake-ups", () => {
  it("a successor that saw its predecessor pending, but records the wait after the predecessor ended, is still woken", async () => {
    const s = await setup();
    const user = await newUser(s);
    await updateUser(s, user.id, "Ada K");
    takeQueued(s);
    const [first, second] = await chain(user.id, s.endpoint.id);

    // Hold the successor between its check (the creation is pending) and its write of waiting_for.
    const reached = gate();
    const release = gate();
    let held = false;
    const gated = faultyD1(env.DB, [], {
      gate: async (op) => {
        if (!held && op.sql.some((q) => /^update "webhook_deliveries" set "waiting_for"/i.test(q))) {
          held = true;
          reached.open();
          await release.opened;
        }
      },
    });
    const successor = processDelivery(withEnv({ DELIVERY_QUEUE: s.queue, DB: gated }), second.id, HALF);
    await reached.opened;
    // Meanwhile the creation goes out and ends: nobody is recorded as waiting for it yet.
    expect(await processDelivery(s.e, first.id, HALF)).toBe("delivered");
    release.open();
    await successor;

    // Without any sweeper run, the update must still go out, after the creation.
    await drain(s);
    expect((await deliveryRow(second.id))!.status).toBe("delivered");
    expect(sequencesAt(s, user.id)).toEqual([`${user.id}/1`, `${user.id}/2`]);
  });

  it("a wake-up whose enqueue failed is made again when the queue retries the predecessor's message", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    now = first.next_attempt_at;
    // The retry is delivered, but the queue refuses the wake-up: the message throws, and the queue
    // will retry it (handleDeliveryBatch calls message.retry()).
    await expect(processDelivery(withEnv({ DELIVERY_QUEUE: throwingQueue() }), first.id, HALF)).rejects.toThrow(/queue unavailable/);
    expect((await deliveryRow(first.id))!.status).toBe("delivered");
    // The retried message finds the delivery ended; its successor must be woken now, not in a minute.
    expect(await processDelivery(s.e, first.id, HALF)).toBe("skipped");
    expect(queued(s)).toContain(second.id);
    await drain(s);
    expect((await deliveryRow(second.id))!.status).toBe("delivered");
  });

  it("a predecessor failed because its endpoint was disabled wakes its successors, and no ended delivery claims to wait", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    // Disabled the way endpoints were before disabling ended their pending deliveries in the same
    // batch (src/webhooks/health.ts): the consumer ends each as its message comes, and wakes the next.
    await env.DB.prepare("UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'manual' WHERE id = ?").bind(s.endpoint.id).run();
    now = first.next_attempt_at;
    expect(await processDelivery(s.e, first.id, HALF)).toBe("skipped");
    expect((await deliveryRow(first.id))!).toMatchObject({ status: "failed", last_error: "endpoint_disabled" });
    expect(queued(s)).toContain(second.id);
    await drain(s);
    const log = (await call(`/api/webhooks/${s.endpoint.id}/deliveries`, { key: s.acct.key })).body.data as { id: string; status: string; waiting_for: string | null }[];
    expect(log.find((d) => d.id === second.id)).toMatchObject({ status: "failed", waiting_for: null });
    expect(log.find((d) => d.id === first.id)).toMatchObject({ status: "failed", waiting_for: null });
  });

  it("a predecessor that ends failed while its successor's wake-up message is lost: the sweeper sends the successor", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    // The last attempt falls after the window: the creation fails, and its wake-up is lost.
    now = first.first_attempt_at + DELIVERY_WINDOW_MS + 1;
    await env.DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?").bind(now - 1, first.id).run();
    expect(await processDelivery(s.e, first.id, HALF)).toBe("failed");
    takeQueued(s);
    expect((await deliveryRow(second.id))!.status).toBe("pending");
    now += 61_000;
    expect(await sweepDeliveries(s.e)).toBeGreaterThanOrEqual(1);
    expect(queued(s)).toContain(second.id);
    await drain(s);
    expect((await deliveryRow(second.id))!).toMatchObject({ status: "delivered", waiting_for: null });
    expect(sequencesAt(s).filter((h) => h.endsWith("/2"))).toHaveLength(1);
  });
});

describe("order under concurrency", () => {
  it("duplicate and concurrent messages for whole chains never send an object's events out of order, and none is left waiting", async () => {
    const s = await setup();
    const users = [await newUser(s, "Ada"), await newUser(s, "Bob"), await newUser(s, "Cy")];
    for (let i = 0; i < 6; i++) for (const u of users) await updateUser(s, u.id, `Name ${i}`);
    // Every message twice, in reverse order of creation, all at once; then whatever they enqueue.
    const ids = takeQueued(s).reverse();
    await Promise.all(ids.flatMap((id) => [processDelivery(s.e, id, HALF), processDelivery(s.e, id, HALF)]));
    await drain(s, { concurrent: true, duplicate: true });
    for (const u of users) {
      expect((await chain(u.id, s.endpoint.id)).map((d) => d.status)).toEqual(Array(7).fill("delivered"));
      expect(sequencesAt(s, u.id)).toEqual(Array.from({ length: 7 }, (_, i) => `${u.id}/${i + 1}`));
    }
  });

  it("each successor waits for its own predecessor: an end wakes only the next one; a later one run early waits again", async () => {
    const s = await setup();
    const { user, first, second } = await heldBehindFailure(s);
    await updateUser(s, user.id, "Ada L");
    takeQueued(s);
    const third = (await chain(user.id, s.endpoint.id))[2];
    expect(await processDelivery(s.e, third.id, HALF)).toBe("waiting");
    expect((await deliveryRow(third.id))!.waiting_for).toBe(second.id);
    now = first.next_attempt_at;
    expect(await processDelivery(s.e, first.id, HALF)).toBe("delivered");
    expect(queued(s)).toEqual([second.id]);
    // The third run early anyway (a sweeper's or a duplicate message): it waits for the second again.
    takeQueued(s);
    expect(await processDelivery(s.e, third.id, HALF)).toBe("waiting");
    expect((await deliveryRow(third.id))!.waiting_for).toBe(second.id);
    expect(await processDelivery(s.e, second.id, HALF)).toBe("delivered");
    expect(queued(s)).toEqual([third.id]);
    await drain(s);
    expect(sequencesAt(s, user.id)).toEqual([`${user.id}/1`, `${user.id}/1`, `${user.id}/2`, `${user.id}/3`]);
  });

  it("a chain of 12 held deliveries takes 11 wake-ups once its head is delivered, not one per waiting delivery per end", async () => {
    const s = await setup();
    const { user, first } = await heldBehindFailure(s);
    for (let i = 0; i < 10; i++) await updateUser(s, user.id, `Ada ${i}`);
    takeQueued(s);
    const held = (await chain(user.id, s.endpoint.id)).slice(1);
    expect(held).toHaveLength(11);
    for (const d of held) expect(await processDelivery(s.e, d.id, HALF)).toBe("waiting");
    now = first.next_attempt_at;
    expect(await processDelivery(s.e, first.id, HALF)).toBe("delivered");
    let wakeUps = 0;
    for (let round = 0; round < 50; round++) {
      const ids = takeQueued(s);
      if (ids.length === 0) break;
      // One woken at a time, the next in the chain (before, each end woke every delivery still waiting).
      expect(ids).toEqual([held[wakeUps].id]);
      wakeUps += ids.length;
      expect(await processDelivery(s.e, ids[0], HALF)).toBe("delivered");
    }
    expect(wakeUps).toBe(11);
    expect((await chain(user.id, s.endpoint.id)).map((d) => d.status)).toEqual(Array(12).fill("delivered"));
    expect(sequencesAt(s, user.id)).toEqual([`${user.id}/1`, ...Array.from({ length: 12 }, (_, i) => `${user.id}/${i + 1}`)]);
  });
});

describe("endpoints changed while deliveries wait", () => {
  it("switching ordering off releases a waiting delivery at once, while its predecessor still fails", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    expect((await s.api(`/api/webhooks/${s.endpoint.id}`, { method: "PATCH", json: { ordering: "none" } })).body.ordering).toBe("none");
    // No sweeper run: the PATCH itself released it.
    expect(queued(s)).toContain(second.id);
    expect((await deliveryRow(second.id))!.waiting_for).toBeNull();
    await drain(s);
    expect((await deliveryRow(second.id))!.status).toBe("delivered");
    expect((await deliveryRow(first.id))!.status).toBe("pending");
  });

  it("switching ordering on while a later delivery retries: it waits, and ends failed (not pending) once both windows are over", async () => {
    const s = await setup("none");
    const user = await newUser(s);
    await updateUser(s, user.id, "Ada K");
    takeQueued(s);
    const [first, second] = await chain(user.id, s.endpoint.id);
    receiver.answer(500);
    expect(await processDelivery(s.e, first.id, HALF)).toBe("scheduled");
    expect(await processDelivery(s.e, second.id, HALF)).toBe("scheduled");
    expect((await s.api(`/api/webhooks/${s.endpoint.id}`, { method: "PATCH", json: { ordering: "per_object" } })).body.ordering).toBe("per_object");
    receiver.answer(200);
    now = Math.max((await deliveryRow(first.id))!.next_attempt_at, (await deliveryRow(second.id))!.next_attempt_at);
    expect(await processDelivery(s.e, second.id, HALF)).toBe("waiting");
    // The first's window runs out without another attempt; the second's too.
    now = (await deliveryRow(first.id))!.first_attempt_at + DELIVERY_WINDOW_MS + 60_000;
    expect(await processDelivery(s.e, first.id, HALF)).toBe("failed");
    await drain(s);
    expect((await deliveryRow(second.id))!).toMatchObject({ status: "failed", last_error: "retry_window_ended", waiting_for: null });
    expect(sequencesAt(s, user.id).filter((h) => h.endsWith("/2"))).toHaveLength(1);
  });

  it("a deleted endpoint's waiting and held deliveries both end failed: nothing stays pending", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    expect((await s.api(`/api/webhooks/${s.endpoint.id}`, { method: "DELETE" })).status).toBe(200);
    now = first.next_attempt_at + 61_000;
    await sweepDeliveries(s.e);
    await processDelivery(s.e, first.id, HALF);
    await drain(s);
    expect((await deliveryRow(first.id))!.status).toBe("failed");
    expect((await deliveryRow(second.id))!.status).toBe("failed");
    expect(sequencesAt(s).filter((h) => h.endsWith("/2"))).toEqual([]);
  });

  it("waiting_for names a delivery of the same endpoint; an unordered endpoint of the same account does not wait", async () => {
    const acct = await signup();
    const a = await setup("per_object", acct);
    const b = await setup("per_object", acct);
    const c = await setup("none", acct);
    const user = await newUser(a);
    await updateUser(a, user.id, "Ada K");
    const [a1, a2] = await chain(user.id, a.endpoint.id);
    const [b1, b2] = await chain(user.id, b.endpoint.id);
    const [c1, c2] = await chain(user.id, c.endpoint.id);
    receiver.answer(500);
    await processDelivery(a.e, a1.id, HALF);
    await processDelivery(c.e, c1.id, HALF);
    receiver.answer(200);
    expect(await processDelivery(b.e, b1.id, HALF)).toBe("delivered");
    expect(await processDelivery(b.e, b2.id, HALF)).toBe("delivered");
    expect(await processDelivery(c.e, c2.id, HALF)).toBe("delivered");
    expect(await processDelivery(a.e, a2.id, HALF)).toBe("waiting");
    expect((await deliveryRow(a2.id))!.waiting_for).toBe(a1.id);
    expect(a1.endpoint_id).toBe(a.endpoint.id);
  });
});

describe("redeliveries and test events", () => {
  it("a redelivered old event neither waits for itself nor for later ones; a newer event waits behind it only while it is pending", async () => {
    const s = await setup();
    const user = await newUser(s);
    await updateUser(s, user.id, "Ada K");
    await drain(s);
    const [first, second] = await chain(user.id, s.endpoint.id);
    expect([first.status, second.status]).toEqual(["delivered", "delivered"]);

    const redo = await s.api(`/api/events/${first.event_id}/redeliver`, { json: { endpoint_id: s.endpoint.id } });
    expect(redo.status, redo.text).toBe(202);
    expect(takeQueued(s)).toEqual([first.id]);
    expect(await processDelivery(s.e, first.id, HALF)).toBe("delivered");

    // Redeliver the second, failing; a third waits for it and goes out right after it.
    await s.api(`/api/events/${second.event_id}/redeliver`, { json: { endpoint_id: s.endpoint.id } });
    takeQueued(s);
    receiver.answer(500);
    expect(await processDelivery(s.e, second.id, HALF)).toBe("scheduled");
    receiver.answer(200);
    await updateUser(s, user.id, "Ada L");
    const third = (await chain(user.id, s.endpoint.id))[2];
    takeQueued(s);
    expect(await processDelivery(s.e, third.id, HALF)).toBe("waiting");
    expect((await deliveryRow(third.id))!.waiting_for).toBe(second.id);
    now = (await deliveryRow(second.id))!.next_attempt_at;
    expect(await processDelivery(s.e, second.id, HALF)).toBe("delivered");
    await drain(s);
    expect((await deliveryRow(third.id))!.status).toBe("delivered");
    expect(sequencesAt(s, user.id)).toEqual([1, 2, 1, 2, 2, 3].map((n) => `${user.id}/${n}`));
  });

  it("a manual redelivery of a waiting delivery does not jump ahead of the one it waits for", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    const redo = await s.api(`/api/events/${second.event_id}/redeliver`, { json: { endpoint_id: s.endpoint.id } });
    expect(redo.status, redo.text).toBe(202);
    expect(takeQueued(s)).toEqual([second.id]);
    expect(await processDelivery(s.e, second.id, HALF)).toBe("waiting");
    expect(sequencesAt(s).filter((h) => h.endsWith("/2"))).toEqual([]);
    expect((await deliveryRow(second.id))!.waiting_for).toBe(first.id);
  });

  it("a test event to an ordered endpoint is neither held back by a failing object nor holds anything back", async () => {
    const s = await setup();
    const { first, second } = await heldBehindFailure(s);
    const test = await s.api(`/api/webhooks/${s.endpoint.id}/test`, { method: "POST" });
    expect(test.status, test.text).toBe(202);
    expect(await processDelivery(s.e, test.body.delivery_id, HALF)).toBe("delivered");
    const ping = receiver.received.filter((r) => r.url.endsWith(s.path)).at(-1)!;
    expect(JSON.parse(ping.body).type).toBe("webhook.test");
    expect(ping.headers["tender-sequence"]).toBeUndefined();
    expect((await deliveryRow(second.id))!.waiting_for).toBe(first.id);
  });
});

describe("the 24-hour window", () => {
  it("a delivery held behind one that fails for its whole 24-hour walk goes out once that one fails, in a window of its own", async () => {
    const s = await setup();
    const { user, first, second } = await heldBehindFailure(s);
    receiver.answer(500);
    let attempts = 1;
    for (;;) {
      const row = (await deliveryRow(first.id))!;
      if (row.status !== "pending") break;
      now = row.next_attempt_at;
      await processDelivery(s.e, first.id, HALF);
      attempts++;
      if ((await deliveryRow(first.id))!.status !== "pending") break;
      // The sweeper re-checks the waiting delivery: it keeps waiting, nothing of it is sent.
      now += 61_000;
      await sweepDeliveries(s.e);
      await drain(s);
      expect(attempts).toBeLessThan(40);
    }
    const ended = (await deliveryRow(first.id))!;
    expect(ended.status).toBe("failed");
    expect(sequencesAt(s, user.id)).toEqual(Array(attempts).fill(`${user.id}/1`));
    expect((await deliveryRow(second.id))!.attempt_count).toBe(0);
    receiver.answer(200);
    await drain(s);
    now += 61_000;
    await sweepDeliveries(s.e);
    await drain(s);
    const sent = (await deliveryRow(second.id))!;
    expect(sent).toMatchObject({ status: "delivered", waiting_for: null });
    expect(sent.first_attempt_at).toBeGreaterThan(first.first_attempt_at + DELIVERY_WINDOW_MS - 15 * 60_000);
    expect(sequencesAt(s, user.id).at(-1)).toBe(`${user.id}/2`);
  });
});

describe("cost", () => {
  it("no query of a delivery's processing (its end and wake-ups included) reads through the database's pending deliveries", async () => {
    const s = await setup();
    const { first } = await heldBehindFailure(s);
    const traced = faultyD1(env.DB);
    const e = withEnv({ DELIVERY_QUEUE: s.queue, DB: traced });
    now = first.next_attempt_at;
    expect(await processDelivery(e, first.id, HALF)).toBe("delivered");
    expect(await processDelivery(e, first.id, HALF)).toBe("skipped");
    await drain({ ...s, e });
    const statements = [...new Set(traced.ops.flatMap((op) => op.sql))].filter((q) => /^\s*(select|update)\b/i.test(q));
    expect(statements.length).toBeGreaterThan(3);
    for (const q of statements) {
      const binds = Array((q.match(/\?/g) ?? []).length).fill(null);
      const plan = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${q}`).bind(...binds).all<{ detail: string }>()).results.map((r) => r.detail);
      // A search by status alone (the sweeper's index) or a scan reads every pending delivery of
      // every account, on every delivery: an outage of one endpoint would slow all the others.
      expect(plan.filter((d) => /webhook_deliveries_pending \(status=\?\)$|^SCAN /.test(d)), q).toEqual([]);
    }
  });
});

describe("sequences and tenants", () => {
  it("a write whose batch fails takes no place: the next change takes the next number, no gap", async () => {
    const s = await setup();
    const user = await newUser(s);
    const failing = faultyD1(env.DB, { kind: "fail_before_commit", when: (op) => op.sql.some((q) => /insert into "?events"?/i.test(q)) });
    const res = await fetchWith({ DB: failing, DELIVERY_QUEUE: s.queue }, `/api/users/${user.id}`, { key: s.acct.key, method: "PUT", json: { name: "Lost", email: "ada@example.com" } });
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(failing.fired).toHaveLength(1);
    await updateUser(s, user.id, "Kept");
    await Promise.all([updateUser(s, user.id, "Kept 2"), updateUser(s, user.id, "Kept 3")]);
    const feed = (await call(`/api/events?object_id=${user.id}&limit=100`, { key: s.acct.key })).body.data as { sequence: number }[];
    expect(feed.map((e) => e.sequence)).toEqual([4, 3, 2, 1]);
  });

  it("another account sees neither the events of an object nor an endpoint's delivery log, and cannot redeliver them", async () => {
    const s = await setup();
    const { user, first } = await heldBehindFailure(s);
    const other = await signup("Mallory");
    expect((await call(`/api/events?object_id=${user.id}`, { key: other.key })).body.data).toEqual([]);
    expectError(await call(`/api/webhooks/${s.endpoint.id}/deliveries`, { key: other.key }), 404, "not_found_error");
    expect((await call(`/api/events/${first.event_id}/redeliver`, { key: other.key, body: {} })).status).toBe(404);
    // Mallory's own endpoint, named in a redelivery of Ada's event, is refused too.
    const mine = await setup("per_object", other);
    expect((await call(`/api/events/${first.event_id}/redeliver`, { key: other.key, body: { endpoint_id: mine.endpoint.id } })).status).toBe(404);
    expect(await chain(user.id, mine.endpoint.id)).toEqual([]);
    // And an id derived for Mallory's endpoint from Ada's event was never created.
    expect(await deliveryRow(deliveryIdOf(first.event_id, mine.endpoint.id))).toBeNull();
  });
});
