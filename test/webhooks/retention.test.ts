// Retention (issue 35): GET/PATCH /api/account's event_retention_days, and the cron's purge of
// events, deliveries and attempts older than it (src/webhooks/retention.ts), walked with the
// replaceable clock.
import { OTHER_SHARD, env, envOf } from "../support/env";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { useClock } from "../../src/lib/clock";
import { newId } from "../../src/domain/ids";
import { purgeExpiredEvents } from "../../src/webhooks/retention";
import { runScheduled } from "../../src/cron";
import { type Account, call, fetchWith, signup, withEnv } from "../support/http";
import { recordingQueue } from "../support/faults";
import { RECEIVER_ORIGIN, installReceiver } from "../support/receiver";

const DAY = 24 * 60 * 60 * 1000;
let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => (receiver = installReceiver()));
afterEach(() => {
  receiver.restore();
  useClock();
});
const at = (ms: number) => useClock({ now: () => ms });

/** `n` events about no object, written as the outbox writes them (next feed place), at `time`. */
async function oldEvents(acct: Account, n: number, time: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = newId("event", time);
    await env.DB.prepare(
      `INSERT INTO events (id, account_id, livemode, type, payload, object_id, sequence, feed_position, created_at)
       VALUES (?, ?, 0, 'webhook.test', '{}', NULL, NULL, (SELECT COALESCE(MAX(feed_position), 0) + 1 FROM events WHERE account_id = ?), ?)`,
    )
      .bind(id, acct.id, acct.id, new Date(time).toISOString())
      .run();
    ids.push(id);
  }
  return ids;
}

/** A write whose deliveries are queued to a recording queue: nothing is sent (the test sets their states). */
const quietly = (path: string, key: string, json: unknown, method = "POST") => fetchWith({ DELIVERY_QUEUE: recordingQueue() }, path, { key, json, method });
async function createUser(acct: Account, { name = "Ada" }: { name?: string } = {}): Promise<{ id: string }> {
  const res = await quietly("/api/users", acct.key, { name, email: "a@example.com" });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

const countEvents = async (accountId: string) => (await env.DB.prepare("SELECT COUNT(*) AS n FROM events WHERE account_id = ?").bind(accountId).first<{ n: number }>())!.n;

describe("GET and PATCH /api/account", () => {
  it("answers the caller's account with event_retention_days 30 by default, and never its keys", async () => {
    const acct = await signup("Retention reader");
    const res = await call("/api/account", { key: acct.key });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: acct.id, object: "account", name: "Retention reader", event_retention_days: 30 });
    expect(res.text).not.toContain("sk_");
    expect(Object.keys(res.body).sort()).toEqual(["address", "business_name", "created_at", "email", "event_retention_days", "id", "invoice_footer", "name", "object", "tax_id"]);
  });

  it("sets event_retention_days from 1 to 365; either mode's secret key sees it", async () => {
    const acct = await signup();
    for (const days of [1, 365, 7]) {
      const res = await call("/api/account", { key: acct.key, method: "PATCH", body: { event_retention_days: days } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.event_retention_days).toBe(days);
    }
    expect((await call("/api/account", { key: acct.liveKey })).body.event_retention_days).toBe(7);
    const row = await env.DB.prepare("SELECT event_retention_days AS d FROM accounts WHERE id = ?").bind(acct.id).first<{ d: number }>();
    expect(row!.d).toBe(7);
  });

  it.each([0, 366, -1, 1.5, "30", null, 1e9])("refuses event_retention_days %s with 400 naming the field, and changes nothing", async (value) => {
    const acct = await signup();
    const res = await call("/api/account", { key: acct.key, method: "PATCH", body: { event_retention_days: value } });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", param: "event_retention_days" });
    expect(typeof res.body.error.request_id).toBe("string");
    expect((await call("/api/account", { key: acct.key })).body.event_retention_days).toBe(30);
  });

  it("refuses an unknown field, a restricted key (403) and no credential (401)", async () => {
    const acct = await signup();
    const unknown = await call("/api/account", { key: acct.key, method: "PATCH", body: { event_retention: 3 } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.param).toBe("event_retention");
    const key = await call("/api/keys", { key: acct.key, body: { name: "reader", scopes: ["users:read"] } });
    expect(key.status, key.text).toBe(201);
    for (const res of [await call("/api/account", { key: key.body.secret }), await call("/api/account", { key: key.body.secret, method: "PATCH", body: { event_retention_days: 2 } })]) {
      expect(res.status, res.text).toBe(403);
      expect(res.body.error.code).toBe("secret_key_required");
    }
    expect((await call("/api/account")).status).toBe(401);
    expect((await call("/api/account", { key: acct.key })).body.event_retention_days).toBe(30);
  });
});

describe("an account's move", () => {
  it("carries event_retention_days to the new shard, where the purge follows it", async () => {
    const acct = await signup();
    expect((await call("/api/account", { key: acct.key, method: "PATCH", body: { event_retention_days: 3 } })).status).toBe(200);
    const t0 = Date.UTC(2026, 6, 1);
    await oldEvents(acct, 3, t0);
    const moved = await call(`/api/accounts/${acct.id}/move`, { body: { to_shard: OTHER_SHARD, drain_seconds: 0 } });
    expect(moved.status, moved.text).toBe(200);
    expect((await call("/api/account", { key: acct.key })).body.event_retention_days).toBe(3);
    const row = await envOf(OTHER_SHARD).DB.prepare("SELECT event_retention_days AS d FROM accounts WHERE id = ?").bind(acct.id).first<{ d: number }>();
    expect(row!.d).toBe(3);
    // The source shard's rows are no longer its to purge; the new shard's purge deletes by its 3 days.
    await purgeExpiredEvents(envOf(OTHER_SHARD), t0 + 4 * DAY, 100);
    const left = await envOf(OTHER_SHARD).DB.prepare("SELECT COUNT(*) AS n FROM events WHERE account_id = ?").bind(acct.id).first<{ n: number }>();
    expect(left!.n).toBe(1);
  });
});

describe("the purge", () => {
  it("deletes old events with their deliveries and attempts (ids then 404), keeps young ones, pending ones and each object's and mode's newest", async () => {
    const t0 = Date.UTC(2026, 0, 1);
    at(t0);
    const acct = await signup();
    const endpoint = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/hook`, events: ["*"] } });
    expect(endpoint.status, endpoint.text).toBe(201);
    const user = await createUser(acct);
    for (const name of ["B", "C", "D"]) expect((await quietly(`/api/users/${user.id}`, acct.key, { name, email: "a@example.com" }, "PUT")).status).toBe(200);
    const events = (await env.DB.prepare("SELECT id, sequence FROM events WHERE account_id = ? AND object_id = ? ORDER BY sequence").bind(acct.id, user.id).all<{ id: string; sequence: number }>()).results;
    expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4]);
    // Every delivery delivered, with an attempt, but event 2's: still pending (a retry or a redelivery).
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'delivered' WHERE account_id = ?").bind(acct.id).run();
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending' WHERE event_id = ?").bind(events[1].id).run();
    const deliveries = (await env.DB.prepare("SELECT id, event_id FROM webhook_deliveries WHERE account_id = ?").bind(acct.id).all<{ id: string; event_id: string }>()).results;
    expect(deliveries.length).toBe(4);
    for (const d of deliveries) {
      await env.DB.prepare("INSERT INTO delivery_attempts (id, delivery_id, account_id, livemode, attempt_number, attempted_at, status_code, duration_ms) VALUES (?, ?, ?, 0, 1, ?, 200, 5)")
        .bind(newId("attempt", t0), d.id, acct.id, new Date(t0).toISOString())
        .run();
    }

    // 29 days on: nothing is old enough yet.
    at(t0 + 29 * DAY);
    expect(await purgeExpiredEvents(env, t0 + 29 * DAY)).toMatchObject({ events: 0 });

    // 31 days on, with a young event of another user.
    const now = t0 + 31 * DAY;
    at(now);
    const young = await createUser(acct, { name: "Young" });
    for (let run = 0; run < 5; run++) await purgeExpiredEvents(env, now);
    const left = (await env.DB.prepare("SELECT id, object_id, sequence FROM events WHERE account_id = ? ORDER BY feed_position").bind(acct.id).all<{ id: string; object_id: string; sequence: number }>()).results;
    expect(left.map((e) => [e.object_id, e.sequence])).toEqual([
      [user.id, 2],
      [user.id, 4],
      [young.id, 1],
    ]);
    for (const gone of [events[0], events[2]]) {
      const res = await call(`/api/events/${gone.id}`, { key: acct.key });
      expect(res.status).toBe(404);
      expect(res.body.error.type).toBe("not_found_error");
      const d = deliveries.find((x) => x.event_id === gone.id)!;
      expect(await env.DB.prepare("SELECT 1 FROM webhook_deliveries WHERE id = ?").bind(d.id).first()).toBeNull();
      expect(await env.DB.prepare("SELECT 1 FROM delivery_attempts WHERE delivery_id = ?").bind(d.id).first()).toBeNull();
    }
    expect((await call(`/api/events/${events[1].id}`, { key: acct.key })).status).toBe(200);
    // The pending delivery done: its event goes at the next run.
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'delivered' WHERE event_id = ?").bind(events[1].id).run();
    expect(await purgeExpiredEvents(env, now)).toEqual({ events: 1, deliveries: 1, attempts: 1 });
    // The next event of the object still takes sequence 5, and the next feed place the account's MAX + 1.
    expect((await quietly(`/api/users/${user.id}`, acct.key, { name: "E", email: "a@example.com" }, "PUT")).status).toBe(200);
    const newest = await env.DB.prepare("SELECT sequence, feed_position FROM events WHERE account_id = ? AND object_id = ? ORDER BY sequence DESC LIMIT 1").bind(acct.id, user.id).first<{ sequence: number; feed_position: number }>();
    expect(newest!.sequence).toBe(5);
  });

  it("follows each account's own retention", async () => {
    const t0 = Date.UTC(2026, 1, 1);
    const [short, long] = [await signup(), await signup()];
    expect((await call("/api/account", { key: short.key, method: "PATCH", body: { event_retention_days: 1 } })).status).toBe(200);
    expect((await call("/api/account", { key: long.key, method: "PATCH", body: { event_retention_days: 365 } })).status).toBe(200);
    await oldEvents(short, 4, t0);
    await oldEvents(long, 4, t0);
    await purgeExpiredEvents(env, t0 + 2 * DAY, 100);
    expect(await countEvents(short.id)).toBe(1);
    expect(await countEvents(long.id)).toBe(4);
    await purgeExpiredEvents(env, t0 + 366 * DAY, 100);
    expect(await countEvents(long.id)).toBe(1);
  });

  it("works a page a run: more rows than a page take several runs, each bounded", async () => {
    const t0 = Date.UTC(2025, 0, 1);
    const acct = await signup();
    await oldEvents(acct, 26, t0);
    const runs: number[] = [];
    for (;;) {
      const { events } = await purgeExpiredEvents(env, t0 + 40 * DAY, 10);
      if (events === 0) break;
      expect(events).toBeLessThanOrEqual(10);
      runs.push(events);
    }
    expect(runs.reduce((a, b) => a + b, 0)).toBe(25);
    expect(runs.length).toBeGreaterThanOrEqual(3);
    expect(await countEvents(acct.id)).toBe(1);
  });

  it("two purges at once delete each row once and leave what the retention keeps", async () => {
    const t0 = Date.UTC(2025, 2, 1);
    const acct = await signup();
    const ids = await oldEvents(acct, 30, t0);
    const results = await Promise.all([purgeExpiredEvents(env, t0 + 40 * DAY, 100), purgeExpiredEvents(env, t0 + 40 * DAY, 100)]);
    expect(results[0].events + results[1].events).toBe(29);
    const left = (await env.DB.prepare("SELECT id FROM events WHERE account_id = ?").bind(acct.id).all<{ id: string }>()).results;
    expect(left.map((r) => r.id)).toEqual([ids[29]]);
  });

  it("keeps the feed in order across a purge: a listener's cursor still works and never skips a live event", async () => {
    const t0 = Date.UTC(2025, 3, 1);
    at(t0);
    const acct = await signup();
    const old = await oldEvents(acct, 5, t0);
    // The listener's cursor: the newest event it saw.
    const first = await call("/api/events?limit=1", { key: acct.key });
    expect(first.body.data[0].id).toBe(old[4]);
    const cursor = first.body.data[0].id;
    at(t0 + 40 * DAY);
    expect((await purgeExpiredEvents(env, t0 + 40 * DAY, 100)).events).toBe(4);
    const fresh = await createUser(acct);
    const after = await call(`/api/events?ending_before=${cursor}&limit=100`, { key: acct.key });
    expect(after.status, after.text).toBe(200);
    expect(after.body.data.map((e: { object_id: string }) => e.object_id)).toEqual([fresh.id]);
    const feed = await call("/api/events?limit=100", { key: acct.key });
    expect(feed.body.data.map((e: { id: string }) => e.id)).toEqual([after.body.data[0].id, cursor]);
  });

  it("a redelivery that makes an old event's delivery pending between the page's read and its delete keeps the event (the batch checks again)", async () => {
    const t0 = Date.UTC(2025, 5, 1);
    at(t0);
    const acct = await signup();
    expect((await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/race`, events: ["*"] } })).status).toBe(201);
    const [target] = await oldEvents(acct, 2, t0);
    await env.DB.prepare("INSERT INTO webhook_deliveries (id, account_id, livemode, event_id, endpoint_id, status, created_at, updated_at) SELECT ?, ?, 0, ?, id, 'delivered', ?, ? FROM webhook_endpoints WHERE account_id = ?")
      .bind(newId("delivery", t0), acct.id, target, new Date(t0).toISOString(), t0, acct.id)
      .run();
    // The racing redelivery commits just before the purge's batch.
    const racing = new Proxy(env.DB, {
      get(target_, prop) {
        if (prop === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending' WHERE event_id = ?").bind(target).run();
            return env.DB.batch(statements);
          };
        }
        const value = Reflect.get(target_, prop);
        return typeof value === "function" ? value.bind(target_) : value;
      },
    });
    // (Other tests' accounts on this shard may lose events of their own in this run.)
    const result = await purgeExpiredEvents(withEnv({ DB: racing }), t0 + 40 * DAY, 100);
    expect(result.deliveries).toBe(0);
    expect(await countEvents(acct.id)).toBe(2);
    expect(await env.DB.prepare("SELECT status FROM webhook_deliveries WHERE event_id = ?").bind(target).first()).toEqual({ status: "pending" });
    expect((await call(`/api/events/${target}`, { key: acct.key })).status).toBe(200);
  });

  it("leaves an account alone while its move runs (the move proves its copy by the rows' hash)", async () => {
    const t0 = Date.UTC(2025, 6, 1);
    const acct = await signup();
    await oldEvents(acct, 3, t0);
    const now = t0 + 40 * DAY;
    await env.DB.prepare("UPDATE accounts SET move_token = 'mv', move_until = ? WHERE id = ?").bind(now + 60_000, acct.id).run();
    await purgeExpiredEvents(env, now, 100);
    expect(await countEvents(acct.id)).toBe(3);
    // A move whose claim ran out (it died) no longer holds the purge back.
    await purgeExpiredEvents(env, now + 120_000, 100);
    expect(await countEvents(acct.id)).toBe(1);
  });

  it("the cron runs the purge on its shard, and a second run changes nothing", async () => {
    const t0 = Date.UTC(2025, 4, 1);
    const acct = await signup();
    await oldEvents(acct, 3, t0);
    const now = t0 + 40 * DAY;
    at(now);
    for (let run = 0; run < 2; run++) {
      const ctx = createExecutionContext();
      await runScheduled(withEnv({ JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }) as never, now, ctx).catch(() => undefined);
      await waitOnExecutionContext(ctx);
      expect(await countEvents(acct.id)).toBe(1);
    }
  });
});
