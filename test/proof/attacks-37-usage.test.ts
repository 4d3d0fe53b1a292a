// Issue 37's usage events attacked by a reviewer who did not write them: ids reused after 35 days
// while the cron's forgetting is behind, a retried call's duplicates against the period's room, the
// same id in two accounts and in the other mode, the period's boundary, a renewal's claim racing a
// call (both orders), and quantities past what a number holds. What must hold: each accepted
// quantity is counted exactly once in its period's invoice, and an id counts once for 35 days only.
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createUser, subscribed } from "../support/fixtures";
import { advance, createClock } from "../support/clock";
import { readBillableRows } from "../support/renewal-rows";
import { useClock } from "../../src/lib/clock";
import { prepareUsageEvents, parseAnswer } from "../../src/billing/usage-events";
import { usageOfOpenPeriods } from "../../src/billing/usage";
import { claimOf, claimPeriod } from "../../src/billing/periods";
import { runBatch } from "../../src/db/batch";
import { createDb } from "../../src/db/client";

const START = "2026-05-01T00:00:00.000Z";
const DAY = 24 * 60 * 60 * 1000;
afterEach(() => useClock());

async function metered(plan: Record<string, unknown> = { price: 0.01 }, acct?: Account & { liveKey: string }) {
  const account = acct ?? (await signup("Events Co"));
  const clock = await createClock(account, START);
  const user = await createUser(account, { testClock: clock.id });
  const res = await call("/subscription-plans", { key: account.key, body: { name: "Events", currency: "usd", interval: "month", usage_type: "metered", ...plan } });
  expect(res.status, res.text).toBe(201);
  const sub = await subscribed(account, user.id, res.body.id);
  return { acct: account, clock, user, plan: res.body, sub };
}

const send = (acct: Account, events: unknown, idempotencyKey?: string) => call("/usage-events", { key: acct.key, body: { events }, idempotencyKey });

const usageOf = async (subscriptionId: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n, COALESCE(SUM(quantity), 0) AS q FROM usage_records WHERE subscription_id = ?").bind(subscriptionId).first<{ n: number; q: number }>())!;

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  return (res.body.data as Record<string, any>[]).reverse();
}

describe("usage event ids", () => {
  it("an id older than 35 days counts again even when the cron has not forgotten it yet (it forgets 500 a run; a busy account sends more)", async () => {
    const { acct, sub } = await metered();
    expect((await send(acct, [{ id: "reused", subscription_id: sub.id, quantity: 1 }])).body.accepted).toBe(1);
    const sentAt = Date.now();
    // 34 days on it is still a duplicate.
    useClock({ now: () => sentAt + 34 * DAY });
    expect((await send(acct, [{ id: "reused", subscription_id: sub.id, quantity: 1 }])).body).toMatchObject({ accepted: 0, duplicates: 1 });
    // 35 days and a second on, with no forgetting run: a new event, counted.
    useClock({ now: () => sentAt + 35 * DAY + 1000 });
    expect((await send(acct, [{ id: "reused", subscription_id: sub.id, quantity: 2 }])).body).toEqual({ livemode: false, accepted: 1, duplicates: 0, rejected: [] });
    // And remembered afresh: the same id again is a duplicate of the new one.
    expect((await send(acct, [{ id: "reused", subscription_id: sub.id, quantity: 2 }])).body).toMatchObject({ accepted: 0, duplicates: 1 });
    // A bad event under an id forgotten meanwhile is rejected, not answered as a duplicate.
    expect((await send(acct, [{ id: "e-old", subscription_id: sub.id, quantity: 1 }])).body.accepted).toBe(1);
    useClock({ now: () => sentAt + 71 * DAY });
    expect((await send(acct, [{ id: "e-old", subscription_id: sub.id, quantity: -1 }])).body).toMatchObject({ accepted: 0, duplicates: 0, rejected: [{ index: 0, code: "parameter_invalid" }] });
    expect(await usageOf(sub.id)).toEqual({ n: 3, q: 4 });
  });

  it("a retried call's duplicates (and an id twice in one call) take none of the period's room", async () => {
    // 99,999 units is the most a period at 10,000.00 can bill.
    const { acct, sub } = await metered({ price: 10_000 });
    expect((await send(acct, [{ id: "x", subscription_id: sub.id, quantity: 60_000 }])).body.accepted).toBe(1);
    // The reply was lost; the client sends x again with a new event: 60,000 + 30,000 fits.
    const retried = await send(acct, [
      { id: "x", subscription_id: sub.id, quantity: 60_000 },
      { id: "y", subscription_id: sub.id, quantity: 30_000 },
    ]);
    expect(retried.body).toEqual({ livemode: false, accepted: 1, duplicates: 1, rejected: [] });
    // z twice in one call counts once: 90,000 + 5,000 + 4,000 = 99,000 fits.
    const twice = await send(acct, [
      { id: "z", subscription_id: sub.id, quantity: 5_000 },
      { id: "z", subscription_id: sub.id, quantity: 5_000 },
      { id: "w", subscription_id: sub.id, quantity: 4_000 },
    ]);
    expect(twice.body).toEqual({ livemode: false, accepted: 2, duplicates: 1, rejected: [] });
    // The room is still enforced: 99,000 + 1,000 is beyond it.
    expect((await send(acct, [{ id: "v", subscription_id: sub.id, quantity: 1_000 }])).body.rejected).toMatchObject([{ index: 0, code: "usage_too_large" }]);
    expect(await usageOf(sub.id)).toEqual({ n: 4, q: 99_000 });
  });

  it("the same id in two accounts, and in the other mode, are independent events", async () => {
    const a = await metered();
    const b = await metered();
    const events = (sub: string) => [{ id: "shared-1", subscription_id: sub, quantity: 3 }];
    const [ra, rb] = await Promise.all([send(a.acct, events(a.sub.id)), send(b.acct, events(b.sub.id))]);
    expect(ra.body).toMatchObject({ accepted: 1, duplicates: 0 });
    expect(rb.body).toMatchObject({ accepted: 1, duplicates: 0 });
    // A live-mode record of the same account under the same id (as a live call would write) does
    // not make the test-mode one a duplicate.
    await env.DB.prepare(
      "INSERT INTO usage_records (id, account_id, livemode, subscription_id, period_index, quantity, action, timestamp, created_at, event_id) VALUES ('ur_live_probe', ?, 1, 'sub_live_probe', 0, 1, 'increment', ?, ?, 'shared-2')",
    )
      .bind(a.acct.id, START, new Date().toISOString())
      .run();
    expect((await send(a.acct, [{ id: "shared-2", subscription_id: a.sub.id, quantity: 4 }])).body).toMatchObject({ accepted: 1, duplicates: 0 });
    expect(await usageOf(a.sub.id)).toEqual({ n: 2, q: 7 });
    expect(await usageOf(b.sub.id)).toEqual({ n: 1, q: 3 });
  });

  it("a lost reply retried with its Idempotency-Key replays the answer; retried without one, every event is a duplicate; the invoice counts each once", async () => {
    const { acct, clock, sub } = await metered({ price: 0.01 });
    const batch = Array.from({ length: 100 }, (_, i) => ({ id: `lost-${i}`, subscription_id: sub.id, quantity: i }));
    const first = await send(acct, batch, "lost-reply-1");
    expect(first.body).toMatchObject({ accepted: 100, duplicates: 0 });
    const replay = await send(acct, batch, "lost-reply-1");
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(first.body);
    expect((await send(acct, batch)).body).toMatchObject({ accepted: 0, duplicates: 100 });
    expect((await send(acct, batch, "lost-reply-2")).body).toMatchObject({ accepted: 0, duplicates: 100 });
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    // 0 + 1 + … + 99 = 4,950 units at 1 cent.
    expect((await invoicesOf(acct, sub.id))[0].lines).toMatchObject([{ type: "usage", quantity: 4950, amount: 4950 }]);
  });
});

describe("usage events at the period's edges", () => {
  it("an event at the period's last millisecond is in it; one at its end is in the next, up to 5 minutes ahead of the clock", async () => {
    const { acct, clock, sub } = await metered();
    await advance(acct, clock.id, "2026-05-31T23:58:00.000Z");
    const res = await send(acct, [
      { id: "last-ms", subscription_id: sub.id, quantity: 1, timestamp: "2026-05-31T23:59:59.999Z" },
      { id: "at-end", subscription_id: sub.id, quantity: 10, timestamp: "2026-06-01T00:00:00Z" },
      { id: "ahead-5m", subscription_id: sub.id, quantity: 100, timestamp: "2026-06-01T00:03:00Z" },
      { id: "ahead-5m1s", subscription_id: sub.id, quantity: 1000, timestamp: "2026-06-01T00:03:01Z" },
      { id: "at-start", subscription_id: sub.id, quantity: 10_000, timestamp: START },
    ]);
    expect(res.body).toMatchObject({ accepted: 4, duplicates: 0, rejected: [{ index: 3, code: "timestamp_in_future" }] });
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const [may] = await invoicesOf(acct, sub.id);
    expect(may.lines).toMatchObject([{ type: "usage", quantity: 10_001, amount: 10_001 }]);
    await advance(acct, clock.id, "2026-07-01T00:01:00.000Z");
    const [, june] = await invoicesOf(acct, sub.id);
    expect(june.lines).toMatchObject([{ type: "usage", quantity: 110, amount: 110 }]);
  });

  it("a renewal's claim racing a call: events the claim did not read make it lose; events checked before the claim but written after it are rejected, never lost", async () => {
    const { acct, clock, sub } = await metered();
    await advance(acct, clock.id, "2026-05-31T23:59:00.000Z");
    expect((await send(acct, [{ id: "r1", subscription_id: sub.id, quantity: 3 }])).body.accepted).toBe(1);
    const db = createDb(env.DB);
    const tenant = { accountId: acct.id, livemode: false };
    // (1) The run reads the usage; a call lands; the claim, priced without it, must not hold.
    const [row] = await readBillableRows(sub.id);
    const read = await usageOfOpenPeriods(db, [row.sub]);
    expect((await send(acct, [{ id: "r2", subscription_id: sub.id, quantity: 4 }])).body.accepted).toBe(1);
    const [claimed] = await runBatch(db, [claimPeriod(db, { ...row, usage: read.get(sub.id) }, "renewal", Date.parse("2026-06-01T00:00:01Z"), Date.now())]);
    expect(claimOf(claimed)).toBeNull();
    // (2) A call checks its events in the Worker (the period open), then the run claims and
    // invoices the period, then the call's statement runs: rejected, not lost, not counted.
    const late = await prepareUsageEvents(db, tenant, [{ id: "r3", subscription_id: sub.id, quantity: 5, timestamp: "2026-05-31T23:59:30Z" }], Date.now());
    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const results = await runBatch(db, [...late.statements, late.answer]);
    expect(parseAnswer(results[results.length - 1])).toMatchObject({ accepted: 0, duplicates: 0, rejected: [{ index: 0, code: "usage_period_closed" }] });
    expect((await invoicesOf(acct, sub.id))[0].lines).toMatchObject([{ type: "usage", quantity: 7, amount: 7 }]);
    expect(await usageOf(sub.id)).toEqual({ n: 2, q: 7 });
  });

  it("quantities past 1,000,000,000, past 2^53 or not whole are rejected each on its own; 0 is taken", async () => {
    const { acct, sub } = await metered();
    const res = await call("/usage-events", {
      key: acct.key,
      rawBody: `{"events":[{"id":"q0","subscription_id":"${sub.id}","quantity":0},{"id":"q1","subscription_id":"${sub.id}","quantity":9007199254740993},{"id":"q2","subscription_id":"${sub.id}","quantity":1e21},{"id":"q3","subscription_id":"${sub.id}","quantity":1000000001},{"id":"q4","subscription_id":"${sub.id}","quantity":1000000000}]}`,
      headers: { "content-type": "application/json" },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.rejected.map((r: any) => [r.index, r.code])).toEqual([
      [1, "parameter_invalid"],
      [2, "parameter_invalid"],
      [3, "parameter_invalid"],
    ]);
    expect(await usageOf(sub.id)).toEqual({ n: 2, q: 1_000_000_000 });
  });
});
