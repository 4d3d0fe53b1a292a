// The events feed is ordered by commit: every event takes its place in its account's feed when it
// commits (events.feed_position), whatever time its id carries. So a reader that pages with the
// cursors the feed gave it never skips an event, even one whose work began long before a newer
// event committed (a slow first charge, a renewal chunk that commits its events at its end).
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { EXIT, main, type CliIo } from "@tender/client/cli";
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
    const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", "20"], io);
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
