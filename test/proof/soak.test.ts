// The soak (issue 35): mixed writes on one account (customers created and updated, payouts and
// their settlement, charges and refunds and their settlement), every third first attempt failing,
// delivered to three endpoints that take every event: one plain, one per_object, one throttled
// (rate_limit 2), and, while deliveries are still going, a recovery of the throttled endpoint over
// the first part of the run and one of the per_object endpoint over all of it. Then: every event
// reached every endpoint with exactly one 2xx, each (event, endpoint) was sent once, or twice when
// its first attempt failed (a recovery sends a missed event once and never one already
// acknowledged), every request is recorded as one attempt, and the throttled endpoint never had
// more than its limit in any 10-second window (5% over at most).
//
// The real local D1, delivery and job queues and Durable Objects; only the receiver is simulated.
// The background clock is Tender's replaceable clock (useClock), a day ahead of real time so that
// no alarm fires by itself: the test walks it to the next due retry or slot, runs the endpoints'
// alarms (which put the due deliveries on the real queue) and, at each step, a second consumer of
// every pending delivery at once (duplicates of what the alarms and the recoveries enqueue, as
// the sweeper would send), and the cron now and then. Send times are counted in that clock.
import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import worker from "../../src/index";
import { useClock } from "../../src/lib/clock";
import { type WebhookRetryScheduler, schedulerFor } from "../../src/webhooks/scheduler";
import { env } from "../support/env";
import { type Account, call, signup } from "../support/http";
import { chargeCard, createPayout, createUser } from "../support/fixtures";
import { RECEIVER_ORIGIN } from "../support/receiver";
import { runCron } from "../support/queue";

/** Deliveries per second of the throttled endpoint, and so at most 10 × this in any 10 seconds. */
const RATE_LIMIT = 2;
const WINDOW_MS = 10_000;
const ALLOWED_PER_WINDOW = Math.floor(RATE_LIMIT * (WINDOW_MS / 1000) * 1.05);
const USERS = 12;
const PAYOUTS = 4;
const CHARGES = 2;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Request {
  path: string;
  eventId: string;
  attempt: number;
  status: number;
  /** The background clock when it came. */
  at: number;
}

let now = 0;
const requests: Request[] = [];
let restoreFetch: () => void;

/**
 * The receiver: the first request of every third (endpoint, event) it sees, counted per endpoint,
 * fails (a 500; on the plain endpoint every sixth is a 503, which also puts it on the throttled
 * path for a while); every other request is answered 200. The throttled endpoint gets no overload
 * answer, so it runs at its rate_limit, and the windows below measure the limit itself.
 */
function installSoakReceiver() {
  const seen = new Set<string>();
  const firsts = new Map<string, number>();
  const original = globalThis.fetch;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(RECEIVER_ORIGIN)) return original(input, init);
    const path = new URL(request.url).pathname;
    const eventId = request.headers.get("webhook-id")!;
    let status = 200;
    if (!seen.has(`${path} ${eventId}`)) {
      seen.add(`${path} ${eventId}`);
      const n = (firsts.get(path) ?? 0) + 1;
      firsts.set(path, n);
      if (n % 3 === 0) status = path === "/plain" && n % 6 === 0 ? 503 : 500;
    }
    await request.text();
    requests.push({ path, eventId, attempt: Number(request.headers.get("tender-delivery-attempt")), status, at: now });
    return new Response(status === 200 ? "ok" : `status ${status}`, { status });
  });
  return () => spy.mockRestore();
}

/** The most requests in any `windowMs` (half-open windows, in the background clock). */
function busiestWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i] - sorted[j] >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

const iso = (ms: number) => new Date(ms).toISOString();

async function register(acct: Account, path: string, extra: Record<string, unknown> = {}) {
  const res = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events: ["*"], ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  status: string;
  attempt_count: number;
  next_attempt_at: number | null;
}

const deliveriesOf = async (accountId: string) =>
  (await env.DB.prepare("SELECT id, event_id, endpoint_id, status, attempt_count, next_attempt_at FROM webhook_deliveries WHERE account_id = ?").bind(accountId).all<DeliveryRow>()).results;

let batches = 0;
/** One more consumer: a queue batch of these deliveries (up to 100 a batch), none of them retried. */
async function consume(deliveryIds: string[]) {
  for (let i = 0; i < deliveryIds.length; i += 100) {
    const batch = createMessageBatch(
      "tender-webhook-deliveries",
      deliveryIds.slice(i, i + 100).map((id, n) => ({ id: `soak-${++batches}-${n}`, timestamp: new Date(), attempts: 1, body: { deliveryId: id, shard: env.SHARD } })),
    );
    const ctx = createExecutionContext();
    await worker.queue(batch as MessageBatch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.retryMessages, "a delivery message failed").toEqual([]);
  }
}

beforeAll(() => {
  restoreFetch = installSoakReceiver();
  now = Math.ceil((Date.now() + 24 * 3600_000) / 1000) * 1000;
  useClock({ now: () => now });
});
afterAll(() => {
  restoreFetch();
  useClock();
});

describe("the soak", () => {
  it("mixed writes, every third first attempt failing, a throttled endpoint and two recoveries during it: every event to every endpoint, one 2xx each, nothing sent twice, the limit held", { timeout: 240_000 }, async () => {
    const acct = await signup("Soak");
    const plain = await register(acct, "/plain");
    const ordered = await register(acct, "/ordered", { ordering: "per_object" });
    const throttled = await register(acct, "/throttled", { rate_limit: RATE_LIMIT });
    const endpoints = [plain, ordered, throttled];
    const pathOf = new Map([
      [plain, "/plain"],
      [ordered, "/ordered"],
      [throttled, "/throttled"],
    ]);
    const stubs = endpoints.map((id) => schedulerFor(env, id));
    const start = now;

    // The writes, 50 ms of the clock apart; the first half's events are the throttled endpoint's
    // recovery range. Their first attempts go out on the real queue as they are written.
    const writes: (() => Promise<unknown>)[] = [];
    const users: { id: string; email: string }[] = [];
    for (let i = 0; i < USERS; i++) {
      writes.push(async () => users.push(await createUser(acct, { name: `Soak User${i}`, email: `soak${i}@example.com` })));
      if (i % 2 === 1) writes.push(async () => {
        const user = users[i - 1];
        const res = await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: `Soak Renamed${i}`, email: user.email } });
        expect(res.status, res.text).toBe(200);
      });
      if (i % 3 === 2 && i / 3 < PAYOUTS) writes.push(() => createPayout(acct, { description: `Soak payout ${i}` }));
    }
    const payments: string[] = [];
    for (let i = 0; i < CHARGES; i++) {
      writes.push(async () => {
        const charged = await chargeCard(acct, { id: users[i].id, email: users[i].email }, { amount: 5000 + i });
        expect(charged.succeeded).toBe(true);
        payments.push(charged.payment.id);
      });
    }
    for (let i = 0; i < CHARGES; i++) {
      writes.push(async () => {
        const res = await call("/refunds", { key: acct.key, body: { payment_id: payments[i], amount: 1000 } });
        expect(res.status, res.text).toBe(201);
      });
    }
    let mid = 0;
    for (const [n, write] of writes.entries()) {
      if (n === Math.floor(writes.length / 2)) mid = now;
      await write();
      now += 50;
    }

    // Walk the clock. Two seconds after the last write (first attempts made, the failed ones
    // waiting for their retry 4 to 6 s later, the throttled endpoint's backlog still waiting for
    // its slots), the recoveries start.
    const recoveries: { endpoint: string; id: string; missedAtStart: string[]; deliveredAtStart: string[] }[] = [];
    const startRecovery = async (endpoint: string, since: number, until: number) => {
      const rows = (await deliveriesOf(acct.id)).filter((d) => d.endpoint_id === endpoint);
      const inRange = new Set(
        (await env.DB.prepare("SELECT id FROM events WHERE account_id = ? AND created_at >= ? AND created_at < ?").bind(acct.id, iso(since), iso(until)).all<{ id: string }>()).results.map((e) => e.id),
      );
      const res = await call(`/api/webhooks/${endpoint}/recover`, { key: acct.key, body: { since: iso(since), until: iso(until) } });
      expect(res.status, res.text).toBe(202);
      recoveries.push({
        endpoint,
        id: res.body.id,
        missedAtStart: rows.filter((d) => inRange.has(d.event_id) && d.status !== "delivered").map((d) => d.event_id),
        deliveredAtStart: rows.filter((d) => inRange.has(d.event_id) && d.status === "delivered").map((d) => d.event_id),
      });
    };
    const settled = async () =>
      (await env.DB.prepare("SELECT (SELECT count(*) FROM payouts WHERE account_id = ?1 AND status = 'pending') + (SELECT count(*) FROM refunds WHERE account_id = ?1 AND status = 'pending') AS n").bind(acct.id).first<{ n: number }>())!.n === 0;
    const recoveriesDone = async () => {
      for (const r of recoveries) {
        const res = await call(`/api/webhooks/${r.endpoint}/recoveries/${r.id}`, { key: acct.key });
        if (res.body.status !== "done") return false;
      }
      return recoveries.length === 2;
    };
    const deadline = Date.now() + 180_000;
    for (let step = 0; ; step++) {
      expect(Date.now() < deadline, "the soak did not finish within 3 minutes").toBe(true);
      if (recoveries.length === 0 && now >= start + writes.length * 50 + 2000) {
        await startRecovery(throttled, start, mid);
        await startRecovery(ordered, start, now);
        // Their jobs run on the real job queue while the clock stands still: the deliveries they
        // queue race the endpoints' own retries and slots, not a clock already past them.
        for (const until = Date.now() + 30_000; !(await recoveriesDone()) && Date.now() < until; ) await sleep(50);
      }
      // The endpoints' alarms whose earliest retry or slot is due.
      const due = await Promise.all(stubs.map((stub) => runInDurableObject(stub, (o: WebhookRetryScheduler) => o.pending().map((p) => p.dueAt))));
      for (const [i, times] of due.entries()) if (times.length > 0 && Math.min(...times) <= now) await runDurableObjectAlarm(stubs[i]);
      // And every pending delivery, due or not, through a second consumer.
      const pending = (await deliveriesOf(acct.id)).filter((d) => d.status === "pending");
      await consume(pending.map((d) => d.id));
      if (step % 10 === 0) await runCron(now);
      if (pending.length === 0 && recoveries.length === 2 && (await settled()) && (await recoveriesDone())) break;
      const next = [...due.flat(), ...pending.map((d) => d.next_attempt_at ?? 0)].filter((t) => t > now);
      if (next.length > 0) now = Math.min(...next);
      else if (recoveries.length === 0) now += 1000;
      else await sleep(50); // Waiting for the real queues (a recovery's job, a settlement).
    }

    // Whatever is still on the real queues lands, then every delivery comes once more, as a
    // duplicated message would: nothing more is sent.
    await sleep(1000);
    for (const stub of stubs) await runDurableObjectAlarm(stub);
    const sentBefore = requests.length;
    await consume((await deliveriesOf(acct.id)).map((d) => d.id));
    await sleep(500);
    expect(requests.length, "a duplicate message sent an event again").toBe(sentBefore);

    // Nothing lost: every event of the account reached every endpoint, with one 2xx.
    const events = (await env.DB.prepare("SELECT id FROM events WHERE account_id = ?").bind(acct.id).all<{ id: string }>()).results.map((e) => e.id);
    expect(events.length).toBeGreaterThanOrEqual(USERS + USERS / 2 + 2 * PAYOUTS + 2 * CHARGES);
    const rows = await deliveriesOf(acct.id);
    for (const endpoint of endpoints) {
      const path = pathOf.get(endpoint)!;
      const own = rows.filter((d) => d.endpoint_id === endpoint);
      expect(own.map((d) => d.event_id).sort(), `${path}: a delivery for every event`).toEqual([...events].sort());
      expect(own.filter((d) => d.status !== "delivered"), `${path}: every delivery delivered`).toEqual([]);
      for (const eventId of events) {
        const sent = requests.filter((r) => r.path === path && r.eventId === eventId);
        const acknowledged = sent.filter((r) => r.status >= 200 && r.status < 300);
        expect(acknowledged, `${path} ${eventId}: one 2xx`).toHaveLength(1);
        // Sent once, or twice when the first attempt failed: never again after its 2xx.
        expect(sent.length, `${path} ${eventId}: sent ${sent.length} times`).toBe(sent[0].status === 200 ? 1 : 2);
        expect(sent.at(-1)!.status, `${path} ${eventId}: nothing after the 2xx`).toBe(200);
      }
    }
    // Every request recorded as exactly one attempt, numbered 1, 2, ...; one 2xx per delivery.
    const attempts = (
      await env.DB.prepare(
        "SELECT a.delivery_id, a.attempt_number, a.status_code, d.event_id, d.endpoint_id FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.account_id = ? ORDER BY a.delivery_id, a.attempt_number",
      )
        .bind(acct.id)
        .all<{ delivery_id: string; attempt_number: number; status_code: number; event_id: string; endpoint_id: string }>()
    ).results;
    expect(attempts.length, "attempts recorded = requests received").toBe(requests.length);
    for (const row of rows) {
      const own = attempts.filter((a) => a.delivery_id === row.id);
      expect(own.map((a) => a.attempt_number), row.id).toEqual(own.map((_, i) => i + 1));
      expect(own.filter((a) => a.status_code === 200), row.id).toHaveLength(1);
    }

    // The throttled endpoint: never over its limit in any 10 seconds, and the limit was reached
    // (the backlog really waited for its budget).
    const throttledTimes = requests.filter((r) => r.path === "/throttled").map((r) => r.at);
    expect(busiestWindow(throttledTimes, WINDOW_MS), "sends in the busiest 10 s").toBeLessThanOrEqual(ALLOWED_PER_WINDOW);
    expect(busiestWindow(throttledTimes, WINDOW_MS), "the backlog ran at the limit").toBeGreaterThanOrEqual(RATE_LIMIT * 8);
    // The unthrottled endpoints were not held to it.
    expect(busiestWindow(requests.filter((r) => r.path === "/plain").map((r) => r.at), WINDOW_MS)).toBeGreaterThan(ALLOWED_PER_WINDOW);

    // The recoveries: done, and each raced the endpoint's own work: events it missed (failed and
    // waiting for a retry, or waiting for a slot) and events already acknowledged in its range.
    expect(recoveries).toHaveLength(2);
    for (const r of recoveries) {
      const res = await call(`/api/webhooks/${r.endpoint}/recoveries/${r.id}`, { key: acct.key });
      expect(res.body.status).toBe("done");
      expect(r.missedAtStart.length, `${pathOf.get(r.endpoint)}: events still missed when the recovery started`).toBeGreaterThan(0);
      expect(r.deliveredAtStart.length, `${pathOf.get(r.endpoint)}: events acknowledged before the recovery`).toBeGreaterThan(0);
      expect(res.body.total).toBe(r.missedAtStart.length + r.deliveredAtStart.length);
      expect(res.body.sent).toBeLessThanOrEqual(r.missedAtStart.length);
      expect(res.body.sent).toBeGreaterThan(0);
    }
    // Some failed first attempts were retried by a recovery rather than their own schedule: the
    // retry of a missed event at the recovery's start went once, as attempt 2.
    const retriedMissed = recoveries.flatMap((r) => r.missedAtStart.map((e) => requests.filter((q) => q.path === pathOf.get(r.endpoint) && q.eventId === e)));
    expect(retriedMissed.some((sent) => sent.length === 2 && sent[1].attempt === 2)).toBe(true);
  });
});
