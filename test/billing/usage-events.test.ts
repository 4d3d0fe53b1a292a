// Usage events at volume (issue 37): POST /usage-events takes up to 100 events a call, each
// accepted or rejected on its own, deduplicated by the caller's id for 35 days across calls (two
// concurrent calls included), with one insert statement a call; the period's close bills exactly
// their sum; the cron forgets ids after 35 days (src/billing/usage-events.ts).
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { advance, createClock } from "../support/clock";
import { useClock } from "../../src/lib/clock";
import { forgetUsageEventIds } from "../../src/billing/usage-events";

const START = "2026-05-01T00:00:00.000Z";
afterEach(() => useClock());

async function metered(plan: Record<string, unknown> = { price: 0.01 }, acct?: Account) {
  const account = acct ?? (await signup("Events Co"));
  const clock = await createClock(account, START);
  const user = await createUser(account, { testClock: clock.id });
  const res = await call("/subscription-plans", { key: account.key, body: { name: "Events", currency: "usd", interval: "month", usage_type: "metered", ...plan } });
  expect(res.status, res.text).toBe(201);
  const sub = await subscribed(account, user.id, res.body.id);
  return { acct: account, clock, user, plan: res.body, sub };
}

const send = (acct: Account, events: unknown, idempotencyKey?: string, key = acct.key) => call("/usage-events", { key, body: { events }, idempotencyKey });

const rowCount = async (accountId: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n, COALESCE(SUM(quantity), 0) AS q FROM usage_records WHERE account_id = ?").bind(accountId).first<{ n: number; q: number }>())!;

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  return (res.body.data as Record<string, any>[]).reverse();
}

describe("POST /usage-events", () => {
  it("accepts each event on its own, counts a repeated id once (in the call and in a later call), and bills the exact sum at the period's close", async () => {
    const { acct, clock, sub } = await metered({ price: 0.01 });
    await advance(acct, clock.id, "2026-05-10T00:00:00.000Z");
    const first = await send(acct, [
      { id: "e1", subscription_id: sub.id, quantity: 5 },
      { id: "e2", subscription_id: sub.id, quantity: 7, timestamp: "2026-05-02T10:00:00Z" },
      { id: "e1", subscription_id: sub.id, quantity: 5 },
      { id: "e3", subscription_id: sub.id, quantity: 11 },
    ]);
    expect(first.status, first.text).toBe(200);
    // e1, e2, e3 in (5 + 7 + 11 = 23); the second e1 is a duplicate.
    expect(first.body).toEqual({ livemode: false, accepted: 3, duplicates: 1, rejected: [] });
    const second = await send(acct, [
      { id: "e2", subscription_id: sub.id, quantity: 7, timestamp: "2026-05-02T10:00:00Z" },
      { id: "e4", subscription_id: sub.id, quantity: 100 },
    ]);
    expect(second.body).toEqual({ livemode: false, accepted: 1, duplicates: 1, rejected: [] });
    expect(await rowCount(acct.id)).toEqual({ n: 4, q: 123 });
    // The usage route's records count too, once: 123 + 77 = 200 units at 1 cent.
    expect((await call(`/subscriptions/${sub.id}/usage`, { key: acct.key, body: { quantity: 77 } })).status).toBe(201);
    const listed = await call(`/subscriptions/${sub.id}/usage`, { key: acct.key });
    expect(listed.body.data[0]).toMatchObject({ total_usage: 200, records: 5, invoiced: false });

    await advance(acct, clock.id, "2026-06-01T00:01:00.000Z");
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ status: "paid", total: 200, period_start: START });
    expect(invoice.lines).toMatchObject([{ type: "usage", quantity: 200, amount: 200 }]);
    // The invoiced period now rejects its events; the new one takes them; a retried id stays a duplicate.
    const after = await send(acct, [
      { id: "e5", subscription_id: sub.id, quantity: 1, timestamp: "2026-05-20T00:00:00Z" },
      { id: "e6", subscription_id: sub.id, quantity: 2 },
      { id: "e4", subscription_id: sub.id, quantity: 100, timestamp: "2026-05-20T00:00:00Z" },
    ]);
    expect(after.body).toEqual({
      livemode: false,
      accepted: 1,
      duplicates: 1,
      rejected: [{ index: 0, code: "usage_period_closed", message: expect.stringContaining("2026-05-01T00:00:00.000Z"), param: "timestamp" }],
    });
  });

  it("rejects each bad event with its code and takes the rest", async () => {
    const { acct, clock, sub } = await metered({ price: 10_000 });
    await advance(acct, clock.id, "2026-05-10T00:00:00.000Z");
    const licensedPlan = await createPlan(acct, { price: 5 });
    const licensed = await subscribed(acct, (await createUser(acct)).id, licensedPlan.id);
    const other = await metered({ price: 1 });
    const canceled = await metered({ price: 1 }, acct);
    expect((await call(`/subscriptions/${canceled.sub.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const res = await send(acct, [
      { id: "ok1", subscription_id: sub.id, quantity: 3 },
      { id: "b1", subscription_id: "sub_nope", quantity: 1 },
      { id: "b2", subscription_id: other.sub.id, quantity: 1 },
      { id: "b3", subscription_id: licensed.id, quantity: 1 },
      { id: "b4", subscription_id: sub.id, quantity: -1 },
      { id: "b5", subscription_id: sub.id, quantity: 1.5 },
      { id: "b6", subscription_id: sub.id, quantity: "1" },
      { id: "b7", subscription_id: sub.id, quantity: 1, timestamp: "2026-05-10T00:05:01Z" },
      { id: "b8", subscription_id: sub.id, quantity: 1, timestamp: "yesterday" },
      { id: "b9", subscription_id: sub.id, quantity: 1, timestamp: "2026-04-30T00:00:00Z" },
      { id: "b10", subscription_id: canceled.sub.id, quantity: 1 },
      { id: "b11", subscription_id: sub.id, quantity: 100_000 },
      { id: "ok2", subscription_id: sub.id, quantity: 4, timestamp: "2026-05-10T00:05:00Z" },
      { id: "b12", subscription_id: sub.id, quantity: 99_993 },
    ]);
    expect(res.status, res.text).toBe(200);
    expect(res.body.accepted).toBe(2);
    expect(res.body.duplicates).toBe(0);
    expect(res.body.rejected.map((r: any) => [r.index, r.code, r.param])).toEqual([
      [1, "resource_missing", "subscription_id"],
      [2, "resource_missing", "subscription_id"],
      [3, "subscription_not_metered", "subscription_id"],
      [4, "parameter_invalid", "quantity"],
      [5, "parameter_invalid", "quantity"],
      [6, "parameter_invalid", "quantity"],
      [7, "timestamp_in_future", "timestamp"],
      [8, "parameter_invalid", "timestamp"],
      [9, "parameter_invalid", "timestamp"],
      [10, "subscription_canceled", "subscription_id"],
      // 99,999 units is the most a period at 10,000.00 can bill; 100,000 alone is beyond it.
      [11, "usage_too_large", "quantity"],
      // 3 + 4 are in; 99,993 more make 100,000, beyond it (checked in the insert, against the call's own).
      [13, "usage_too_large", "quantity"],
    ]);
    // Another account's subscription reads as missing, never naming it as someone's.
    expect(res.body.rejected[1].message).toBe(`No such subscription: ${other.sub.id}`);
    expect(await rowCount(acct.id)).toEqual({ n: 2, q: 7 });
    expect(await rowCount(other.acct.id)).toEqual({ n: 0, q: 0 });
  });

  it("a subscription set to cancel at its period's end: an event in the period after (5 minutes ahead) is rejected by the insert's own check, the rest go in", async () => {
    const { acct, clock, sub } = await metered();
    await advance(acct, clock.id, "2026-05-31T23:58:00.000Z");
    const set = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: true } });
    expect(set.status, set.text).toBe(200);
    const res = await send(acct, [
      { id: "last", subscription_id: sub.id, quantity: 4 },
      { id: "after", subscription_id: sub.id, quantity: 5, timestamp: "2026-06-01T00:02:00Z" },
    ]);
    expect(res.body).toEqual({
      livemode: false,
      accepted: 1,
      duplicates: 0,
      rejected: [{ index: 1, code: "usage_period_closed", message: expect.stringContaining("after the subscription ends"), param: "timestamp" }],
    });
    expect(await rowCount(acct.id)).toEqual({ n: 1, q: 4 });
  });

  it("a call reads its period's records once, not once per event (D1's rows read, as the development header says)", async () => {
    const { acct, sub } = await metered();
    const call100 = (n: number) => send(acct, Array.from({ length: 100 }, (_, i) => ({ id: `r${n}-${i}`, subscription_id: sub.id, quantity: 1 })));
    for (let n = 0; n < 10; n++) expect((await call100(n)).body.accepted).toBe(100);
    const res = await call100(10);
    expect(res.body.accepted).toBe(100);
    // 1,000 records in the period: summed once that is about 1,000 rows and the call's own few
    // hundred; summed per event it would be 100 × 1,000.
    expect(Number(res.headers.get("tender-d1-rows-read"))).toBeLessThan(5_000);
  });

  it("a live key does not reach a test-mode subscription: rejected per event as missing", async () => {
    const { acct, sub } = await metered();
    const res = await send(acct, [{ id: "x", subscription_id: sub.id, quantity: 1 }], undefined, (acct as any).liveKey);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ accepted: 0, duplicates: 0, rejected: [{ index: 0, code: "resource_missing" }] });
    expect(await rowCount(acct.id)).toEqual({ n: 0, q: 0 });
  });

  it("answers 400 for a body of the wrong shape, an empty list or 101 events, and writes nothing", async () => {
    const { acct, sub } = await metered();
    const ok = (i: number) => ({ id: `ev${i}`, subscription_id: sub.id, quantity: 1 });
    const cases: [unknown, string][] = [
      [Array.from({ length: 101 }, (_, i) => ok(i)), "events"],
      [[], "events"],
      ["nope", "events"],
      [{ id: "a" }, "events"],
      [[ok(1), "not an object"], "events.1"],
      [[ok(1), { subscription_id: sub.id, quantity: 1 }], "events.1.id"],
      [[ok(1), { id: "x".repeat(256), subscription_id: sub.id, quantity: 1 }], "events.1.id"],
      [[ok(1), { id: "", subscription_id: sub.id, quantity: 1 }], "events.1.id"],
      [[ok(1), { id: "y", subscription_id: sub.id, quantity: 1, colour: "red" }], "events.1.colour"],
      [[ok(1), { id: "y", subscription_id: sub.id }], "events.1.quantity"],
      [[ok(1), { id: "y", quantity: 1 }], "events.1.subscription_id"],
    ];
    for (const [events, param] of cases) {
      const res = await send(acct, events);
      expectError(res, 400, "invalid_request_error");
      expect(res.body.error.param, JSON.stringify(events).slice(0, 80)).toBe(param);
    }
    expect((await call("/usage-events", { key: acct.key, body: [ok(1)] })).status).toBe(400);
    expect(await rowCount(acct.id)).toEqual({ n: 0, q: 0 });
    // 100 is the most a call takes.
    const hundred = await send(acct, Array.from({ length: 100 }, (_, i) => ok(i)));
    expect(hundred.body).toEqual({ livemode: false, accepted: 100, duplicates: 0, rejected: [] });
    expect(await rowCount(acct.id)).toEqual({ n: 100, q: 100 });
  });

  it("two concurrent calls carrying the same ids count each once", async () => {
    const { acct, sub } = await metered();
    const events = Array.from({ length: 50 }, (_, i) => ({ id: `c${i}`, subscription_id: sub.id, quantity: i + 1 }));
    const [a, b] = await Promise.all([send(acct, events), send(acct, [...events].reverse())]);
    expect(a.status, a.text).toBe(200);
    expect(b.status, b.text).toBe(200);
    expect(a.body.accepted + b.body.accepted).toBe(50);
    expect(a.body.duplicates + b.body.duplicates).toBe(50);
    // 1 + 2 + … + 50 = 1,275.
    expect(await rowCount(acct.id)).toEqual({ n: 50, q: 1275 });
  });

  it("an Idempotency-Key replays the first answer; without one, the ids still count once", async () => {
    const { acct, sub } = await metered();
    const events = [{ id: "k1", subscription_id: sub.id, quantity: 2 }, { id: "k2", subscription_id: "sub_nope", quantity: 2 }];
    const first = await send(acct, events, "batch-1");
    expect(first.body).toEqual({ livemode: false, accepted: 1, duplicates: 0, rejected: [{ index: 1, code: "resource_missing", message: "No such subscription: sub_nope", param: "subscription_id" }] });
    const replay = await send(acct, events, "batch-1");
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(first.body);
    expect((await send(acct, events)).body).toMatchObject({ accepted: 0, duplicates: 1 });
    expect(await rowCount(acct.id)).toEqual({ n: 1, q: 2 });
  });

  it("the cron forgets ids after 35 days: the usage stays, and the id may be used again", async () => {
    const { acct, sub } = await metered();
    const day = 24 * 60 * 60 * 1000;
    expect((await send(acct, [{ id: "old", subscription_id: sub.id, quantity: 1 }])).body.accepted).toBe(1);
    const sentAt = Date.now();
    // 34 days on, the id is remembered; 35 days and a second on, it is forgotten (one page a run, idempotent).
    expect(await forgetUsageEventIds(env, sentAt + 34 * day)).toBe(0);
    expect((await send(acct, [{ id: "old", subscription_id: sub.id, quantity: 1 }])).body.duplicates).toBe(1);
    // (The file's other tests wrote ids too: a page a run, until none is left; a further run forgets nothing.)
    expect(await forgetUsageEventIds(env, sentAt + 35 * day + 1000)).toBeGreaterThanOrEqual(1);
    while ((await forgetUsageEventIds(env, sentAt + 35 * day + 1000)) > 0);
    expect(await forgetUsageEventIds(env, sentAt + 35 * day + 1000)).toBe(0);
    const remembered = await env.DB.prepare("SELECT event_id FROM usage_records WHERE account_id = ?").bind(acct.id).all<{ event_id: string | null }>();
    expect(remembered.results).toEqual([{ event_id: null }]);
    useClock({ now: () => sentAt + 35 * day + 2000 });
    expect((await send(acct, [{ id: "old", subscription_id: sub.id, quantity: 1 }])).body.accepted).toBe(1);
    expect(await rowCount(acct.id)).toEqual({ n: 2, q: 2 });
  });

  it("forgets a page a run: more ids than a page take more runs", async () => {
    const { acct, sub } = await metered();
    const day = 24 * 60 * 60 * 1000;
    await send(acct, Array.from({ length: 5 }, (_, i) => ({ id: `p${i}`, subscription_id: sub.id, quantity: 1 })));
    const later = Date.now() + 36 * day;
    let runs = 0;
    while ((await forgetUsageEventIds(env, later, 2)) > 0) runs++;
    expect(runs).toBeGreaterThanOrEqual(3);
    const left = await env.DB.prepare("SELECT COUNT(*) AS n FROM usage_records WHERE account_id = ? AND event_id IS NOT NULL").bind(acct.id).first<{ n: number }>();
    expect(left!.n).toBe(0);
  });
});
