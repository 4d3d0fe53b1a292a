// The events feed is ordered by commit: every event takes its place in its account's feed when it
// commits (events.feed_position), whatever time its id carries. So a reader that pages with the
// cursors the feed gave it never skips an event, even one whose work began long before a newer
// event committed (a slow first charge, a renewal chunk that commits its events at its end).
import { applyD1Migrations } from "cloudflare:test";
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { EXIT, run, type CliIo } from "@tender/client/cli";
import { useClock } from "../../src/lib/clock";
import { faultyD1, sqlMatches } from "../support/faults";
import { BASE, call, fetchWith, signup, type Account } from "../support/http";
import { createUser } from "../support/fixtures";
import { waitFor } from "../support/wait";
import { workerFetch } from "../client/support";

afterEach(() => useClock());

type FeedEvent = { id: string; type: string; object_id: string | null; payload: Record<string, unknown> };
const page = async (acct: Account, query: string) => {
  const res = await call(`/api/events?${query}`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body as { data: FeedEvent[]; has_more: boolean };
};

/**
 * The wall clock, which the test moves forward by hand. Each starts an hour past the one before:
 * ids made in this isolate never go back in time, and an earlier test's clock ran ahead.
 */
let start = 0;
function handClock() {
  let ahead = (start += 3_600_000);
  useClock({ now: () => Date.now() + ahead });
  return { advance: (ms: number) => (ahead += ms) };
}

/** The time (ms) in a Tender id: 10 base32 characters after the prefix. */
const idTime = (id: string) => [...id.slice(4, 14)].reduce((ms, char) => ms * 32 + "0123456789abcdefghjkmnpqrstvwxyz".indexOf(char), 0);

/**
 * A user created through the API whose write batch (the user, its customer.created event) is held
 * on its way to D1 until `release()`: the event's id is made when the request began, and the event
 * commits when it is released. So a slow commit (a renewal chunk that writes its events at its
 * end, a first charge that waits on the processor) looks to the feed.
 */
function slowCommit(acct: Account, name: string) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const batchHeld = new Promise<void>((resolve) => (held = resolve));
  const db = faultyD1(env.DB, [], {
    gate: async (op) => {
      if (op.kind !== "batch" || !sqlMatches(op, /insert into "events"/i)) return;
      held();
      await released;
    },
  });
  // In the test's own context (not through exports), so that the test can hold the request's batch.
  const request = fetchWith({ DB: db }, "/api/users", { key: acct.key, json: { name, email: "late@example.com" } });
  return { batchHeld, release, request };
}

describe("a feed ordered by commit", () => {
  it("an event committed 60 s after a newer one comes after the newer one's cursor (ending_before), and pages never skip or repeat it", async () => {
    const acct = await signup();
    await createUser(acct, { name: "Early Bird" });
    const time = handClock();

    // A user's creation begins (its event gets an id of this moment); its batch waits on the way to D1.
    const slow = slowCommit(acct, "Late Comer");
    await slow.batchHeld;
    time.advance(30_000);
    // Meanwhile a newer event commits, and a reader catches up to it.
    const newer = await createUser(acct, { name: "Grace Hopper" });
    const seen = await page(acct, "limit=1");
    expect(seen.data[0]).toMatchObject({ type: "customer.created", object_id: newer.id });
    const cursor = seen.data[0].id;

    // It commits 60 s after the newer event did: its event id is 30 s older than the cursor's.
    time.advance(60_000);
    slow.release();
    const late = await slow.request;
    expect(late.status, late.text).toBe(201);

    const after = await page(acct, `ending_before=${cursor}`);
    expect(after.data.map((e) => e.object_id)).toEqual([late.body.id]);
    expect(after.has_more).toBe(false);
    expect(idTime(cursor) - idTime(after.data[0].id), "the late event's id is 30 s older than the cursor's: only its commit puts it after").toBeGreaterThanOrEqual(30_000);

    // Newest first: the late event is at the top, above the event it committed after.
    const top = await page(acct, "limit=3");
    expect(top.data.map((e) => e.object_id)).toEqual([late.body.id, newer.id, expect.stringMatching(/^usr_/)]);
    // Walking back from the top with starting_after, and forward from the oldest with
    // ending_before, each visits every event of the feed exactly once.
    const all = await page(acct, "limit=100");
    const backward: string[] = [];
    for (let next: string | undefined; ; ) {
      const p = await page(acct, `limit=2${next ? `&starting_after=${next}` : ""}`);
      backward.push(...p.data.map((e) => e.id));
      if (!p.has_more) break;
      next = p.data.at(-1)!.id;
    }
    expect(backward).toEqual(all.data.map((e) => e.id));
    const forward: string[] = [];
    for (let next = all.data.at(-1)!.id; ; ) {
      const p = await page(acct, `limit=2&ending_before=${next}`);
      forward.push(...p.data.map((e) => e.id).reverse());
      if (!p.has_more) break;
      next = p.data[0].id;
    }
    expect(forward).toEqual(all.data.map((e) => e.id).reverse().slice(1));
  });

  it("tender listen forwards an event committed 60 s after a newer one it has already forwarded", { timeout: 30_000 }, async () => {
    const acct = await signup();
    await createUser(acct, { name: "Early Bird" });
    const time = handClock();
    const forwarded: { id: string; objectId: string }[] = [];
    const stop = new AbortController();
    const err: string[] = [];
    const io: CliIo = {
      env: { TENDER_API_URL: BASE, TENDER_API_KEY: acct.key },
      stdout: () => {},
      stderr: (line) => void err.push(line),
      fetch: workerFetch().fetch,
      sleep: async () => {},
      signal: stop.signal,
      forward: async (request) => {
        const body = (await request.json()) as { id: string; data: { id: string } };
        forwarded.push({ id: body.id, objectId: body.data.id });
        return new Response(null, { status: 200 });
      },
    };
    // `tender listen --forward-to http://localhost:3000/webhooks --interval 20`, parsed: workerd has
    // no node:util parseArgs (the parsing itself is tested in Node, test/node/cli.test.ts).
    const listening = run({ command: "listen", args: [], flags: { "forward-to": "http://localhost:3000/webhooks", interval: 20 } }, io);
    try {
      await waitFor(() => expect(err.join("\n")).toContain("Ready."), 5000, 10);

      const slow = slowCommit(acct, "Late Comer");
      await slow.batchHeld;
      time.advance(30_000);
      const newer = await createUser(acct, { name: "Grace Hopper" });
      await waitFor(() => expect(forwarded.map((f) => f.objectId)).toEqual([newer.id]), 5000, 10);

      time.advance(60_000);
      slow.release();
      const late = await slow.request;
      expect(late.status).toBe(201);
      await waitFor(() => expect(forwarded.map((f) => f.objectId)).toEqual([newer.id, late.body.id]), 5000, 10);
      // A few more polls: nothing is forwarded twice.
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(forwarded).toHaveLength(2);
      expect(idTime(forwarded[0].id) - idTime(forwarded[1].id), "the late event's id is 30 s older than the one forwarded before it").toBeGreaterThanOrEqual(30_000);
    } finally {
      stop.abort();
    }
    expect(await listening).toBe(EXIT.ok);
  });
});

describe("cursors and places", () => {
  it("a cursor that names no event of the account answers 400 invalid_cursor, whether it exists elsewhere or nowhere", async () => {
    const acct = await signup();
    const other = await signup("Other");
    await createUser(acct);
    await createUser(other);
    const theirs = (await page(other, "limit=1")).data[0].id;
    for (const [param, cursor] of [
      ["starting_after", theirs],
      ["ending_before", theirs],
      ["starting_after", "evt_00000000000000000000000000"],
    ]) {
      const res = await call(`/api/events?${param}=${cursor}`, { key: acct.key });
      expect(res.status, res.text).toBe(400);
      expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_cursor", param });
      expect(res.body.error.message).toContain(cursor);
    }
    // A cursor filtered out by the page's filter still places the page: it need not match it.
    const user = await createUser(acct, { name: "Filtered" });
    const first = (await page(acct, "limit=100")).data.at(-1)!;
    expect(first.type).toBe("customer.created");
    const updated = await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Filtered Again", email: user.email } });
    expect(updated.status).toBe(200);
    expect((await page(acct, `type=customer.updated&ending_before=${first.id}`)).data.map((e) => e.object_id)).toEqual([user.id]);
  });

  it("concurrent writes take places 1, 2, 3 … in the account's feed, each once, and the feed lists them in that order", async () => {
    const acct = await signup();
    await Promise.all(Array.from({ length: 12 }, (_, i) => createUser(acct, { name: `User${i}`, email: `u${i}@example.com` })));
    const { results } = await env.DB.prepare("SELECT id, feed_position FROM events WHERE account_id = ? ORDER BY feed_position").bind(acct.id).all<{ id: string; feed_position: number }>();
    expect(results.map((r) => r.feed_position)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect((await page(acct, "limit=100")).data.map((e) => e.id)).toEqual(results.map((r) => r.id).reverse());
    // Another account counts from 1 on its own.
    const other = await signup("Other");
    await createUser(other);
    expect(await env.DB.prepare("SELECT feed_position FROM events WHERE account_id = ?").bind(other.id).first("feed_position")).toBe(1);
  });

  it("an event cannot be written without a place, or in a place already taken", async () => {
    const acct = await signup();
    await createUser(acct);
    const insert = (id: string, position: number | null) =>
      env.DB.prepare("INSERT INTO events (id, account_id, type, payload, feed_position, created_at) VALUES (?, ?, 'customer.created', '{}', ?, ?)")
        .bind(id, acct.id, position, new Date().toISOString())
        .run();
    await expect(insert("evt_00000000000000000000000001", null)).rejects.toThrow(/NOT NULL/);
    await expect(insert("evt_00000000000000000000000002", 1)).rejects.toThrow(/UNIQUE/);
  });
});

describe("migration 0008_event_feed_order", () => {
  type Migrations = Parameters<typeof applyD1Migrations>[1];
  const scratch = () => (env as unknown as { MIGRATION_SCRATCH: D1Database }).MIGRATION_SCRATCH;
  const migrations = () => (env as unknown as { TEST_MIGRATIONS: Migrations }).TEST_MIGRATIONS;

  it("gives the events written before it their places in id order, per account, and keeps every column", async () => {
    const db = scratch();
    await applyD1Migrations(db, migrations().filter((m) => m.name < "0008"));
    // Written out of id order, for two accounts, as the previous schema stored them.
    const rows = [
      ["evt_01m80000000000000000000003", "acct_a", 3],
      ["evt_01m80000000000000000000001", "acct_b", 1],
      ["evt_01m80000000000000000000001a", "acct_a", null],
      ["evt_01m80000000000000000000002", "acct_a", 1],
      ["evt_01m80000000000000000000004", "acct_b", 2],
    ] as const;
    for (const [id, account, sequence] of rows) {
      await db
        .prepare("INSERT INTO events (id, account_id, type, payload, object_id, sequence, created_at) VALUES (?, ?, 'customer.updated', ?, ?, ?, '2026-11-01T00:00:00.000Z')")
        .bind(id, account, JSON.stringify({ id }), sequence === null ? null : `usr_${account}`, sequence)
        .run();
    }
    await applyD1Migrations(db, migrations().filter((m) => m.name.startsWith("0008")));
    const { results } = await db.prepare("SELECT id, account_id, payload, object_id, sequence, feed_position FROM events ORDER BY account_id, feed_position").all();
    expect(results).toEqual([
      { id: "evt_01m80000000000000000000001a", account_id: "acct_a", payload: JSON.stringify({ id: "evt_01m80000000000000000000001a" }), object_id: null, sequence: null, feed_position: 1 },
      { id: "evt_01m80000000000000000000002", account_id: "acct_a", payload: JSON.stringify({ id: "evt_01m80000000000000000000002" }), object_id: "usr_acct_a", sequence: 1, feed_position: 2 },
      { id: "evt_01m80000000000000000000003", account_id: "acct_a", payload: JSON.stringify({ id: "evt_01m80000000000000000000003" }), object_id: "usr_acct_a", sequence: 3, feed_position: 3 },
      { id: "evt_01m80000000000000000000001", account_id: "acct_b", payload: JSON.stringify({ id: "evt_01m80000000000000000000001" }), object_id: "usr_acct_b", sequence: 1, feed_position: 1 },
      { id: "evt_01m80000000000000000000004", account_id: "acct_b", payload: JSON.stringify({ id: "evt_01m80000000000000000000004" }), object_id: "usr_acct_b", sequence: 2, feed_position: 2 },
    ]);
    // The indexes came back with the table.
    const indexes = await db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND name NOT LIKE 'sqlite_%' ORDER BY name").all();
    expect(indexes.results.map((r) => r.name)).toEqual(["events_account_feed", "events_account_type_feed", "events_object_sequence"]);
  });
});
