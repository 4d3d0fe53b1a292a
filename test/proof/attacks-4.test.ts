// Fourth-round attacks on 254353d: statements prepared once per isolate (src/db/prepared.ts) and
// materialized on the request's own D1 session (src/db/client.ts), list filters as [column, value]
// tuples (src/routes/reads.ts), and PATCH /subscription-plans/{id} and DELETE /subscriptions/{id}
// answering (and storing) the committed row (src/middleware/stored-answers.ts).
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { type Account, type CallResult, call, expectError, fetchWith, roundTrips, signup } from "../support/http";
import { faultyD1, recordingQueue, sqlMatches } from "../support/faults";
import { chargeCard, createKey, createPlan, createUser, mintToken, payoutWithoutSettlement, subscribed, warm } from "../support/fixtures";
import { CARDS, payoutBody } from "../support/cards";
import { changes, eventsOf, notificationsOf, one, quiesce, snapshot } from "../support/db";
import { makeDue } from "../support/clock";
import { runCron } from "../support/queue";
import { installReceiver } from "../support/receiver";
import { RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { createDb } from "../../src/db/client";
import { insertRow } from "../../src/db/prepared";
import { requestIds } from "../../src/db/schema";

let restoreReceiver: (() => void) | undefined;
afterEach(() => {
  restoreReceiver?.();
  restoreReceiver = undefined;
});

const ids = (res: CallResult) => (res.body.data as { id: string }[]).map((o) => o.id);
const dbIds = async (sql: string, ...binds: unknown[]) =>
  (await env.DB.prepare(sql).bind(...binds).all<{ id: string }>()).results.map((r) => r.id);
const qs = (params: Record<string, string | undefined>) => {
  const entries = Object.entries(params).filter(([, v]) => v !== undefined) as [string, string][];
  return entries.length ? `?${new URLSearchParams(entries).toString()}` : "";
};
const record = (accountId: string, key: string) =>
  env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(accountId, key).first<Record<string, any>>();

// ---------------------------------------------------------------------------------------------

describe("one prepared statement, many requests at once", () => {
  it("three accounts hammering reads by id, lists, 404s and inserts at once: every answer is the caller's own", async () => {
    const accounts = await Promise.all(["A", "B", "C"].map((n) => signup(n)));
    const data = [] as { acct: Account; users: string[]; plan: string; payouts: string[] }[];
    for (const [i, acct] of accounts.entries()) {
      const users = [(await createUser(acct, { name: `U${i} one`, email: `u${i}a@example.com` })).id, (await createUser(acct, { name: `U${i} two`, email: `u${i}b@example.com` })).id];
      const plan = (await createPlan(acct, { name: `Plan of ${i}` })).id;
      const payouts = [(await payoutWithoutSettlement(acct, { amount: 1000 + i, recipient_id: users[0] })).id, (await payoutWithoutSettlement(acct, { amount: 2000 + i })).id];
      data.push({ acct, users, plan, payouts });
    }
    type Check = () => Promise<void>;
    const checks: Check[] = [];
    for (let round = 0; round < 3; round++) {
      for (const [i, mine] of data.entries()) {
        const other = data[(i + 1) % data.length];
        const key = mine.acct.key;
        checks.push(
          async () => {
            const r = await call(`/api/users/${mine.users[round % 2]}`, { key });
            expect(r.status, r.text).toBe(200);
            expect(r.body.id).toBe(mine.users[round % 2]);
          },
          async () => {
            const r = await call(`/api/users/${other.users[0]}`, { key });
            expectError(r, 404, "not_found_error", "resource_missing");
          },
          async () => {
            const r = await call(`/payouts/${other.payouts[0]}`, { key });
            expect(r.status).toBe(404);
          },
          async () => {
            const r = await call(`/subscription-plans/${mine.plan}`, { key });
            expect(r.status).toBe(200);
            expect(r.body.name).toBe(`Plan of ${i}`);
          },
          async () => {
            const r = await call(`/payouts?recipient_id=${mine.users[0]}&status=pending`, { key });
            expect(r.status, r.text).toBe(200);
            expect(ids(r)).toEqual([mine.payouts[0]]);
          },
          async () => {
            const r = await call(`/payouts?recipient_id=${other.users[0]}`, { key });
            expect(ids(r)).toEqual([]);
          },
          async () => {
            const r = await call("/api/users?limit=100", { key });
            const own = await dbIds("SELECT id FROM users WHERE account_id = ? ORDER BY id DESC", mine.acct.id);
            // Users may be inserted meanwhile by this same storm: every id listed is the account's own.
            for (const id of ids(r)) expect(own.includes(id) || id.startsWith("usr_"), id).toBe(true);
            for (const id of ids(r)) {
              const row = await env.DB.prepare("SELECT account_id FROM users WHERE id = ?").bind(id).first<{ account_id: string }>();
              expect(row?.account_id).toBe(mine.acct.id);
            }
          },
          async () => {
            const email = `storm-${i}-${round}@example.com`;
            const r = await call("/api/users", { key, body: { name: `Storm ${i}`, email }, idempotencyKey: `storm-${round}` });
            expect(r.status, r.text).toBe(201);
            const row = await one<{ account_id: string; email: string }>("SELECT account_id, email FROM users WHERE id = ?", r.body.id);
            expect(row).toEqual({ account_id: mine.acct.id, email });
          },
          async () => {
            const r = await call("/api/events?type=customer.created&limit=100", { key });
            for (const e of r.body.data) expect(e.data.id.startsWith("usr_")).toBe(true);
            for (const id of ids(r)) {
              const row = await one<{ account_id: string }>("SELECT account_id FROM events WHERE id = ?", id);
              expect(row.account_id).toBe(mine.acct.id);
            }
          },
        );
      }
    }
    await Promise.all(checks.map((check) => check()));
    // Each account's idempotency records are its own: the same key names three different users.
    for (const mine of data) {
      const users = await dbIds("SELECT id FROM users WHERE account_id = ? AND email LIKE 'storm-%'", mine.acct.id);
      expect(users).toHaveLength(3);
    }
  }, 120_000);
});

// ---------------------------------------------------------------------------------------------

describe("list filters: every combination, compared with the rows", () => {
  it("payouts by status × recipient_id, payments by subscription_id × user_id, subscriptions by user_id × status, refunds by payment_id: two accounts at once", async () => {
    const build = async (name: string) => {
      const acct = await signup(name);
      const u1 = (await createUser(acct, { name: "Rec One", email: "r1@example.com" })).id;
      const u2 = (await createUser(acct, { name: "Rec Two", email: "r2@example.com" })).id;
      for (const recipient of [u1, u1, u2, undefined, undefined]) await payoutWithoutSettlement(acct, recipient ? { recipient_id: recipient } : {});
      const toCancel = (await payoutWithoutSettlement(acct, { recipient_id: u1 })).id;
      const canceled = await call(`/payouts/${toCancel}/cancel`, { key: acct.key, method: "POST" });
      expect(canceled.status, canceled.text).toBe(200);
      const plan = (await createPlan(acct)).id;
      const s1 = (await subscribed(acct, u1, plan)).id;
      const s2 = (await subscribed(acct, u2, plan)).id;
      const s3 = (await subscribed(acct, u2, plan)).id;
      expect((await call(`/subscriptions/${s3}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
      await chargeCard(acct, null);
      await chargeCard(acct, { id: u1, email: "r1@example.com" });
      return { acct, u1, u2, s1, s2, s3 };
    };
    const [a, b] = [await build("A"), await build("B")];
    const ghost = "usr_00000000000000000000000000";
    const one_ = async (fx: Awaited<ReturnType<typeof build>>) => {
      const { acct, u1, u2, s1, s2 } = fx;
      const checks: Promise<void>[] = [];
      for (const status of [undefined, "pending", "canceled", "paid"]) {
        for (const recipient of [undefined, u1, u2, ghost]) {
          checks.push(
            (async () => {
              const res = await call(`/payouts${qs({ status, recipient_id: recipient, limit: "100" })}`, { key: acct.key });
              expect(res.status, res.text).toBe(200);
              const where = ["account_id = ?", ...(status ? ["status = ?"] : []), ...(recipient ? ["recipient_id = ?"] : [])].join(" AND ");
              const expected = await dbIds(`SELECT id FROM payouts WHERE ${where} ORDER BY id DESC`, acct.id, ...[status, recipient].filter((v) => v !== undefined));
              expect(ids(res), `status=${status} recipient=${recipient}`).toEqual(expected);
            })(),
          );
        }
      }
      for (const sub of [undefined, s1, s2, ghost]) {
        for (const user of [undefined, u1, u2, ghost]) {
          checks.push(
            (async () => {
              const res = await call(`/payments${qs({ subscription_id: sub, user_id: user, limit: "100" })}`, { key: acct.key });
              expect(res.status, res.text).toBe(200);
              const where = ["account_id = ?", ...(sub ? ["subscription_id = ?"] : []), ...(user ? ["user_id = ?"] : [])].join(" AND ");
              const expected = await dbIds(`SELECT id FROM payments WHERE ${where} ORDER BY id DESC`, acct.id, ...[sub, user].filter((v) => v !== undefined));
              expect(ids(res), `subscription=${sub} user=${user}`).toEqual(expected);
            })(),
          );
        }
      }
      for (const user of [undefined, u1, u2, ghost]) {
        for (const status of [undefined, "active", "canceled", "past_due"]) {
          checks.push(
            (async () => {
              const res = await call(`/subscriptions${qs({ user_id: user, status, limit: "100" })}`, { key: acct.key });
              expect(res.status, res.text).toBe(200);
              const where = ["account_id = ?", ...(user ? ["user_id = ?"] : []), ...(status ? ["status = ?"] : [])].join(" AND ");
              const expected = await dbIds(`SELECT id FROM subscriptions WHERE ${where} ORDER BY id DESC`, acct.id, ...[user, status].filter((v) => v !== undefined));
              expect(ids(res), `user=${user} status=${status}`).toEqual(expected);
            })(),
          );
        }
      }
      await Promise.all(checks);
      // Sanity: the combinations are not all empty.
      expect((await call(`/payouts?status=pending&recipient_id=${u1}`, { key: acct.key })).body.data).toHaveLength(2);
      expect((await call(`/payouts?status=canceled&recipient_id=${u1}`, { key: acct.key })).body.data).toHaveLength(1);
      expect((await call(`/payments?user_id=${u2}`, { key: acct.key })).body.data).toHaveLength(2);
    };
    await Promise.all([one_(a), one_(b)]);
  }, 120_000);

  it("events by type × object_id; webhook endpoints without the deleted ones; deliveries by status; a test delivery reaches its endpoint only", async () => {
    const receiver = installReceiver();
    restoreReceiver = receiver.restore;
    receiver.answer(500);
    const acct = await signup();
    const other = await signup("Other");
    const u1 = (await createUser(acct, { name: "Ev One", email: "e1@example.com" })).id;
    const u2 = (await createUser(acct, { name: "Ev Two", email: "e2@example.com" })).id;
    expect((await call(`/api/users/${u1}`, { key: acct.key, method: "PUT", body: { name: "Ev One+", email: "e1@example.com" } })).status).toBeLessThan(300);
    await createUser(other, { name: "Other One", email: "o1@example.com" });
    const types = [undefined, "customer.created", "customer.updated", "payout.paid"];
    const objects = [undefined, u1, u2, "usr_00000000000000000000000000"];
    for (const type of types) {
      for (const objectId of objects) {
        const res = await call(`/api/events${qs({ type, object_id: objectId, limit: "100" })}`, { key: acct.key });
        expect(res.status, res.text).toBe(200);
        const where = ["account_id = ?", ...(type ? ["type = ?"] : []), ...(objectId ? ["object_id = ?"] : [])].join(" AND ");
        const expected = await dbIds(`SELECT id FROM events WHERE ${where} ORDER BY id DESC`, acct.id, ...[type, objectId].filter((v) => v !== undefined));
        expect(ids(res), `type=${type} object_id=${objectId}`).toEqual(expected);
      }
    }
    const created = await call(`/api/events?type=customer.created&object_id=${u1}`, { key: acct.key });
    expect(created.body.data).toHaveLength(1);
    expect(created.body.data[0]).toMatchObject({ object_id: u1, sequence: 1 });

    // Endpoints: two live, one deleted.
    const mk = async (events: string[]) => (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/a4`, events } })).body.id as string;
    const all = await mk(["*"]);
    const one2 = await mk(["payout.paid"]);
    const gone = await mk(["customer.created"]);
    expect((await call(`/api/webhooks/${gone}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const listed = await call("/api/webhooks?limit=100", { key: acct.key });
    expect(ids(listed)).toEqual([one2, all]);
    const page = await call(`/api/webhooks?limit=1&starting_after=${one2}`, { key: acct.key });
    expect(ids(page)).toEqual([all]);
    expect(page.body.has_more).toBe(false);

    // A test event goes to the endpoint named only (its own delivery insert, src/webhooks/outbox.ts).
    const test = await call(`/api/webhooks/${one2}/test`, { key: acct.key, method: "POST" });
    expect(test.status, test.text).toBe(202);
    const deliveries = (await env.DB.prepare("SELECT endpoint_id, account_id FROM webhook_deliveries WHERE event_id = ?").bind(test.body.event_id).all()).results;
    expect(deliveries).toEqual([{ endpoint_id: one2, account_id: acct.id }]);
    // A customer event goes to the "*" endpoint only (the batch's fanOutDeliveries).
    const u3 = (await createUser(acct, { name: "Ev Three", email: "e3@example.com" })).id;
    const ev = await one<{ id: string }>("SELECT id FROM events WHERE object_id = ? AND type = 'customer.created'", u3);
    const toAll = (await env.DB.prepare("SELECT endpoint_id FROM webhook_deliveries WHERE event_id = ?").bind(ev.id).all()).results;
    expect(toAll).toEqual([{ endpoint_id: all }]);
    for (const status of [undefined, "pending", "delivered", "failed"]) {
      for (const endpoint of [all, one2]) {
        const res = await call(`/api/webhooks/${endpoint}/deliveries${qs({ status, limit: "100" })}`, { key: acct.key });
        expect(res.status, res.text).toBe(200);
        const expected = await dbIds(
          `SELECT id FROM webhook_deliveries WHERE account_id = ? AND endpoint_id = ?${status ? " AND status = ?" : ""} ORDER BY id DESC`,
          acct.id,
          endpoint,
          ...(status ? [status] : []),
        );
        expect(ids(res), `${endpoint} status=${status}`).toEqual(expected);
      }
    }
    // Another account's endpoint id: 404, not an empty list.
    expect((await call(`/api/webhooks/${all}/deliveries`, { key: other.key })).status).toBe(404);
  }, 60_000);

  // Found as a defect of 254353d, now fixed: an empty `type` or `object_id` (`?type=`) means "no
  // filter", as before the list filters became tuples (src/routes/events/index.ts listEvents).
  it("GET /api/events?type= and ?object_id= (empty values) answer as without the parameter, as before the commit", async () => {
    const acct = await signup();
    await createUser(acct);
    const plain = await call("/api/events", { key: acct.key });
    expect(plain.body.data.length).toBeGreaterThan(0);
    const emptyType = await call("/api/events?type=", { key: acct.key });
    const emptyObject = await call("/api/events?object_id=", { key: acct.key });
    expect(emptyType.status).toBe(200);
    expect(ids(emptyType)).toEqual(ids(plain));
    expect(ids(emptyObject)).toEqual(ids(plain));
  });

  it("pagination on prepared pages: limit 1 both ways, limit 100, has_more at every step, cursors at the ends", async () => {
    const acct = await signup();
    const other = await signup("Other");
    for (let i = 0; i < 7; i++) {
      await createUser(acct, { name: `Page ${i}`, email: `p${i}@example.com` });
      await createUser(other, { name: `Noise ${i}`, email: `n${i}@example.com` });
    }
    const expected = await dbIds("SELECT id FROM users WHERE account_id = ? ORDER BY id DESC", acct.id);
    expect(expected).toHaveLength(7);
    // Forward with limit 1.
    const forward: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const res = await call(`/api/users${qs({ limit: "1", starting_after: cursor })}`, { key: acct.key });
      expect(res.status, res.text).toBe(200);
      forward.push(...ids(res));
      expect(res.body.has_more, `step ${i}`).toBe(forward.length < expected.length);
      if (!res.body.has_more) break;
      cursor = ids(res)[0];
    }
    expect(forward).toEqual(expected);
    // Backward with limit 1 from the oldest.
    const backward: string[] = [];
    cursor = expected[expected.length - 1];
    for (let i = 0; i < 10; i++) {
      const res: CallResult = await call(`/api/users${qs({ limit: "1", ending_before: cursor })}`, { key: acct.key });
      expect(res.status, res.text).toBe(200);
      if (res.body.data.length === 0) break;
      backward.push(...ids(res));
      expect(res.body.has_more).toBe(backward.length < expected.length - 1);
      cursor = ids(res)[0];
    }
    expect(backward).toEqual(expected.slice(0, -1).reverse());
    // ending_before with limit 3: the three just newer than the cursor, newest first.
    const before3 = await call(`/api/users?limit=3&ending_before=${expected[5]}`, { key: acct.key });
    expect(ids(before3)).toEqual(expected.slice(2, 5));
    expect(before3.body.has_more).toBe(true);
    const all = await call("/api/users?limit=100", { key: acct.key });
    expect(ids(all)).toEqual(expected);
    expect(all.body.has_more).toBe(false);
    const exact = await call("/api/users?limit=7", { key: acct.key });
    expect(exact.body.has_more).toBe(false);
    const six = await call("/api/users?limit=6", { key: acct.key });
    expect(six.body.has_more).toBe(true);
    expect(ids(await call(`/api/users?ending_before=${expected[0]}`, { key: acct.key }))).toEqual([]);
    expect(ids(await call(`/api/users?starting_after=${expected[6]}`, { key: acct.key }))).toEqual([]);
    // A cursor of another account's user pages through this account's own users only.
    const foreign = (await dbIds("SELECT id FROM users WHERE account_id = ? ORDER BY id DESC", other.id))[3];
    const viaForeign = await call(`/api/users?limit=100&starting_after=${foreign}`, { key: acct.key });
    expect(ids(viaForeign)).toEqual(expected.filter((id) => id < foreign));
  }, 60_000);

  it("JSON and boolean columns come back decoded the same from a prepared list page (batch mapping) as from a read by id", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const tiered = await createPlan(acct, { pricing_model: "graduated", price: undefined, tiers: [{ up_to: 2, unit_price: 3, flat_price: 1 }, { up_to: null, unit_price: 2 }] });
    const fixed = await createPlan(acct, { description: null });
    expect((await call(`/subscription-plans/${tiered.id}`, { key: acct.key, method: "PATCH", body: { active: false } })).status).toBe(200);
    const sub = await subscribed(acct, user.id, fixed.id);
    expect((await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    await createKey(acct, ["users:read", "plans:write"], "decoded");
    const rid = await call("/api/request-id", { key: acct.key, body: { purpose: "decode", metadata: { a: 1, b: "two", c: true, d: null } } });
    expect(rid.status, rid.text).toBe(201);
    for (const [list, item] of [
      ["/subscription-plans?limit=100", "/subscription-plans/"],
      ["/subscriptions?limit=100", "/subscriptions/"],
      ["/api/keys?limit=100", "/api/keys/"],
      ["/api/request-id?limit=100", "/api/request-id/"],
      ["/api/users?limit=100", "/api/users/"],
    ]) {
      const page = await call(list, { key: acct.key });
      expect(page.status, page.text).toBe(200);
      expect(page.body.data.length).toBeGreaterThan(0);
      for (const entry of page.body.data) {
        const one_ = await call(`${item}${entry.id}`, { key: acct.key });
        expect(one_.status).toBe(200);
        expect(entry, `${item}${entry.id}`).toEqual(one_.body);
      }
    }
    const plans = (await call("/subscription-plans", { key: acct.key })).body.data;
    expect(plans.find((p: any) => p.id === tiered.id)).toMatchObject({ active: false, tiers: tiered.tiers });
    expect(plans.find((p: any) => p.id === fixed.id)).toMatchObject({ active: true, tiers: null, description: null });
    expect((await call("/subscriptions", { key: acct.key })).body.data[0]).toMatchObject({ id: sub.id, cancel_at_period_end: true, canceled_at: null });
    expect((await call("/api/request-id", { key: acct.key })).body.data[0].metadata).toEqual({ a: 1, b: "two", c: true, d: null });
  });

  it("hostile filter values and cursors are bound, never spliced: they change no result", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await payoutWithoutSettlement(acct, { recipient_id: user.id });
    const hostile = ["' OR '1'='1", "x') OR 1=1 --", "%", "_", "usr_%", "\\", "\u0000", "NULL", "null"];
    for (const value of hostile) {
      const v = encodeURIComponent(value);
      for (const path of [`/payouts?recipient_id=${v}`, `/api/events?object_id=${v}`, `/subscriptions?user_id=${v}`, `/payments?user_id=${v}`, `/refunds?payment_id=${v}`]) {
        const res = await call(path, { key: acct.key });
        expect(res.status, `${path}: ${res.text}`).toBe(200);
        expect(res.body.data, path).toEqual([]);
      }
      // The events' type is a closed set: a value outside it is refused before any query runs.
      const byType = await call(`/api/events?type=${v}`, { key: acct.key });
      expect(byType.status, byType.text).toBe(400);
      expect(byType.body.error).toMatchObject({ code: "parameter_invalid", param: "type" });
      for (const path of [`/api/users?starting_after=${v}`, `/api/users?ending_before=${v}`]) {
        const res = await call(path, { key: acct.key });
        expect(res.status, path).toBe(400);
      }
      const byId = await call(`/api/users/${v}`, { key: acct.key });
      expect([400, 404], `${value}: ${byId.text}`).toContain(byId.status);
    }
    // A cursor that has the prefix but SQL in its tail.
    const sneaky = await call(`/api/users?starting_after=${encodeURIComponent("usr_' OR 1=1 --")}`, { key: acct.key });
    expect([200, 400]).toContain(sneaky.status);
    if (sneaky.status === 200) expect(ids(sneaky)).toEqual(ids(await call("/api/users", { key: acct.key })).filter((id) => id < "usr_' OR 1=1 --"));
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------

describe("a revoked key, with its lookup cached", () => {
  it("revoked through the API by another key, or behind this isolate's back: every read, list, 404, write and replay answers 401", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const scopes = ["users:write", "plans:write", "subscriptions:write", "payouts:read", "events:read"];
    const viaApi = await createKey(acct, scopes, "api-revoked");
    const behind = await createKey(acct, scopes, "db-revoked");
    const token = await mintToken(behind.secret);
    for (const k of [viaApi.secret, behind.secret, token]) {
      await warm(k);
      expect((await call(`/subscription-plans/${plan.id}`, { key: k })).status).toBe(200);
    }
    const stored = await call(`/subscription-plans/${plan.id}`, { key: behind.secret, method: "PATCH", body: { name: "Before" }, idempotencyKey: "rev-patch" });
    expect(stored.status, stored.text).toBe(200);

    expect((await call(`/api/keys/${viaApi.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), behind.id).run();

    const before = await snapshot();
    for (const k of [viaApi.secret, behind.secret, token]) {
      const attempts: [string, Parameters<typeof call>[1]][] = [
        [`/api/users/${user.id}`, {}],
        ["/api/users/usr_00000000000000000000000000", {}],
        ["/api/users?limit=5", {}],
        [`/subscriptions?user_id=${user.id}&status=active`, {}],
        ["/payouts?status=pending", {}],
        ["/api/events?type=customer.created", {}],
        [`/subscription-plans/${plan.id}`, {}],
        ["/api/users", { body: { name: "Ghost", email: "ghost@example.com" } }],
        ["/api/users", { body: { name: "Ghost", email: "ghost@example.com" }, idempotencyKey: "rev-user" }],
        [`/subscription-plans/${plan.id}`, { method: "PATCH", body: { name: "After" } }],
        [`/subscription-plans/${plan.id}`, { method: "PATCH", body: { name: "Before" }, idempotencyKey: "rev-patch" }],
        ["/subscription-plans/plan_00000000000000000000000000", { method: "PATCH", body: { name: "After" } }],
        [`/subscriptions/${sub.id}`, { method: "DELETE" }],
        [`/subscriptions/${sub.id}?at_period_end=true`, { method: "DELETE", idempotencyKey: "rev-cancel" }],
        ["/subscriptions/sub_00000000000000000000000000", { method: "DELETE" }],
        ["/payout", { body: payoutBody() }],
      ];
      for (const [path, options] of attempts) {
        const res = await call(path, { ...options, key: k });
        expect(res.status, `${options?.method ?? (options?.body ? "POST" : "GET")} ${path}: ${res.text}`).toBe(401);
      }
    }
    expect(changes(before, await snapshot())).toEqual({});
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("active");
  }, 60_000);
});

describe("sessions", () => {
  it("read-your-writes with Tender-Consistency: the bookmark of a write gives a read that sees it, on the prepared read by id and list", async () => {
    const acct = await signup();
    await warm(acct.key);
    for (let i = 0; i < 3; i++) {
      const created = await call("/api/users", { key: acct.key, body: { name: `RYW ${i}`, email: `ryw${i}@example.com` } });
      expect(created.status).toBe(201);
      const bookmark = created.headers.get("tender-consistency");
      expect(bookmark).toMatch(/^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/);
      const [read, list] = await Promise.all([
        call(`/api/users/${created.body.id}`, { key: acct.key, headers: { "tender-consistency": bookmark! } }),
        call("/api/users?limit=1", { key: acct.key, headers: { "tender-consistency": bookmark! } }),
      ]);
      expect(read.status, read.text).toBe(200);
      expect(read.body).toEqual(created.body);
      expect(ids(list)).toEqual([created.body.id]);
      // The read answers a bookmark too, no older than the one sent.
      expect(read.headers.get("tender-consistency")! >= bookmark!).toBe(true);
    }
    expect((await call("/api/users", { key: acct.key, headers: { "tender-consistency": "nope" } })).status).toBe(400);
  });
});

// ---------------------------------------------------------------------------------------------

describe("PATCH /subscription-plans/{id} and DELETE /subscriptions/{id} with an Idempotency-Key", () => {
  it("five identical PATCHes and five identical cancels at once: one change, one event, one answer (or 409 in use)", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    await warm(acct.key);
    const patches = await Promise.all(
      Array.from({ length: 5 }, () => call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Burst", active: false }, idempotencyKey: "burst-plan" })),
    );
    const cancels = await Promise.all(
      Array.from({ length: 5 }, () => call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "burst-cancel" })),
    );
    for (const batch of [patches, cancels]) {
      const ok = batch.filter((r) => r.status === 200);
      expect(ok.length).toBeGreaterThan(0);
      for (const r of batch) {
        if (r.status !== 200) expectError(r, 409, "invalid_request_error", "idempotency_key_in_use");
      }
      expect(new Set(ok.map((r) => r.text)).size, ok.map((r) => r.text).join("\n")).toBe(1);
      expect(ok.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
    }
    const planNow = await call(`/subscription-plans/${plan.id}`, { key: acct.key });
    expect(planNow.text).toBe(patches.find((r) => r.status === 200)!.text);
    const subNow = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(subNow.text).toBe(cancels.find((r) => r.status === 200)!.text);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_canceled:canceled"]);
    expect(await one<{ n: number }>("SELECT count(*) AS n FROM subscription_periods WHERE subscription_id = ? AND status = 'uncollectible'", sub.id)).toEqual({ n: 0 });

    // Changed again; the replays still give the first answers, byte for byte.
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Later", active: true, description: null } })).status).toBe(200);
    const replayPlan = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Burst", active: false }, idempotencyKey: "burst-plan" });
    expect(replayPlan.headers.get("idempotent-replayed")).toBe("true");
    expect(replayPlan.text).toBe(planNow.text);
    const replayCancel = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "burst-cancel" });
    expect(replayCancel.text).toBe(subNow.text);
  }, 60_000);

  it("same key, other request: 422 and nothing written; a replay under an older Tender-Version works; no replay shows the processor token or card fingerprint", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, { pricing_model: "volume", price: undefined, tiers: [{ up_to: 5, unit_price: 7 }, { up_to: null, unit_price: 6.5, flat_price: 1 }] });
    const sub = await subscribed(acct, user.id, plan.id);
    const sub2 = await subscribed(acct, user.id, plan.id);
    const first = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { description: "v1" }, idempotencyKey: "k-plan" });
    expect(first.status).toBe(200);
    expect(first.body.tiers).toEqual(plan.tiers);
    const cancel = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: "k-sub" });
    expect(cancel.status).toBe(200);
    const before = await snapshot();
    const refusals = [
      await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { description: "v2" }, idempotencyKey: "k-plan" }),
      await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { description: "v1", active: true }, idempotencyKey: "k-plan" }),
      await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "k-sub" }),
      await call(`/subscriptions/${sub2.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: "k-sub" }),
      await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: "k-plan" }),
    ];
    for (const r of refusals) expectError(r, 422, "idempotency_error", "idempotency_key_reused");
    expect(changes(before, await snapshot())).toEqual({});

    for (const version of ["2026-11-01", "2026-11-22"]) {
      const p = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { description: "v1" }, idempotencyKey: "k-plan", headers: { "tender-version": version } });
      expect(p.status, p.text).toBe(200);
      expect(p.headers.get("tender-version")).toBe(version);
      expect(p.body).toEqual(first.body);
      const s = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: "k-sub", headers: { "tender-version": version } });
      expect(s.status, s.text).toBe(200);
      expect(s.body).toEqual(cancel.body);
    }
    const secrets = await one<{ processor_token: string; card_fingerprint: string }>("SELECT processor_token, card_fingerprint FROM subscriptions WHERE id = ?", sub.id);
    const replay = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: "k-sub" });
    for (const text of [replay.text, cancel.text, (await record(acct.id, "k-sub"))!.response_body as string]) {
      expect(text).not.toContain(secrets.processor_token);
      expect(text).not.toContain(secrets.card_fingerprint);
      expect(text).not.toMatch(/processor_?token|fingerprint/i);
    }
    expect(replay.text).toBe(cancel.text);
  }, 60_000);

  it("names and descriptions that look like stored-row tags, quotes, backslashes, emoji, control characters and long text: the replay is the live answer byte for byte", async () => {
    const acct = await signup();
    const plan = await createPlan(acct);
    const nasty = [
      '{"$row":"plan"}',
      '{"$row":"subscription","row":{}}',
      'quote " backslash \\ slash / tab \t newline \n',
      "emoji 🚀👩‍👩‍👧 and ünïcødé ∑",
      "nul \u0000 and bell \u0007 and del \u007f and ls \u2028",
      "x".repeat(200),
      "é".repeat(200),
    ];
    for (const [i, name] of nasty.entries()) {
      const description = i % 2 === 0 ? null : `${name} `.repeat(4).slice(0, 1000);
      const body = { name, description, active: i % 3 !== 0 };
      const live = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body, idempotencyKey: `nasty-${i}` });
      expect(live.status, live.text).toBe(200);
      expect(live.body).toMatchObject({ name: name.trim(), description, active: body.active });
      const read = await call(`/subscription-plans/${plan.id}`, { key: acct.key });
      expect(read.text, name).toBe(live.text);
      const replay = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body, idempotencyKey: `nasty-${i}` });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.text, name).toBe(live.text);
    }
    // Objects whose own answers carry such text, stored as plain JSON: replayed as they were.
    for (const [i, name] of nasty.slice(0, 3).entries()) {
      const user = await call("/api/users", { key: acct.key, body: { name, email: "tag@example.com" }, idempotencyKey: `nasty-user-${i}` });
      expect(user.status, user.text).toBe(201);
      const again = await call("/api/users", { key: acct.key, body: { name, email: "tag@example.com" }, idempotencyKey: `nasty-user-${i}` });
      expect(again.status, again.text).toBe(201);
      expect(again.text).toBe(user.text);
      const rid = await call("/api/request-id", { key: acct.key, body: { purpose: name.slice(0, 50), metadata: { $row: "plan", row: name } }, idempotencyKey: `nasty-rid-${i}` });
      expect(rid.status, rid.text).toBe(201);
      const ridAgain = await call("/api/request-id", { key: acct.key, body: { purpose: name.slice(0, 50), metadata: { $row: "plan", row: name } }, idempotencyKey: `nasty-rid-${i}` });
      expect(ridAgain.text).toBe(rid.text);
    }
  }, 60_000);

  it("an expired record is replaced: the same key on a later PATCH applies it and stores the new row; cancel at period end's notification is a well-formed envelope in sequence", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const first = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "One" }, idempotencyKey: "exp-plan" });
    expect(first.status).toBe(200);
    await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE account_id = ? AND key = ?").bind(Date.now() - 1000, acct.id, "exp-plan").run();
    const second = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Two" }, idempotencyKey: "exp-plan" });
    expect(second.status, second.text).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(second.body.name).toBe("Two");
    const replay = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "Two" }, idempotencyKey: "exp-plan" });
    expect(replay.text).toBe(second.text);
    expectError(await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { name: "One" }, idempotencyKey: "exp-plan" }), 422, "idempotency_error");

    const sub = await subscribed(acct, user.id, plan.id);
    await warm(acct.key);
    const cape = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE" });
    expect(cape.status).toBe(200);
    const undo = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: false } });
    expect(undo.status, undo.text).toBe(200);
    const now = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    expect(now.status).toBe(200);
    const rows = (await env.DB.prepare("SELECT type, payload, sequence FROM events WHERE object_id = ? ORDER BY sequence").bind(sub.id).all<{ type: string; payload: string; sequence: number }>()).results;
    expect(rows.map((r) => [r.type, r.sequence])).toEqual([
      ["subscription_created", 1],
      ["subscription_updated", 2],
      ["subscription_updated", 3],
      ["subscription_canceled", 4],
    ]);
    for (const r of rows) {
      const body = JSON.parse(r.payload);
      // The same text as JSON.stringify of the same object: key order and formatting as the other notifications.
      expect(JSON.stringify(body)).toBe(r.payload);
      expect(Object.keys(body)).toEqual(["id", "type", "data", "created_at", "object_id", "sequence", "livemode", "event", "subscription_id", "status", "timestamp"]);
      expect(typeof body.status).toBe("string");
    }
    expect(rows.map((r) => JSON.parse(r.payload).status)).toEqual(["active", "active", "active", "canceled"]);
  });

  it("warm requests on the prepared paths are one round trip: filtered lists, an empty page, a 404, a PATCH of a plan and both cancels", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub1 = await subscribed(acct, user.id, plan.id);
    const sub2 = await subscribed(acct, user.id, plan.id);
    await warm(acct.key);
    const trips = (r: CallResult) => roundTrips(r);
    for (const path of [
      `/payments?subscription_id=${sub1.id}&user_id=${user.id}`,
      "/payouts?status=paid&recipient_id=usr_00000000000000000000000000",
      `/api/events?type=subscription_created&object_id=${sub1.id}`,
      `/subscriptions?user_id=${user.id}&status=active&limit=1&starting_after=${sub2.id}`,
      "/api/webhooks",
      "/subscriptions/sub_00000000000000000000000000",
      `/subscription-plans/${plan.id}`,
    ]) {
      const r = await call(path, { key: acct.key });
      expect(r.status, `${path}: ${r.text}`).toBeLessThan(500);
      expect(trips(r), path).toBe(1);
    }
    for (const [path, method, body] of [
      [`/subscription-plans/${plan.id}`, "PATCH", { name: "RT" }],
      [`/subscriptions/${sub1.id}?at_period_end=true`, "DELETE", undefined],
      [`/subscriptions/${sub2.id}`, "DELETE", undefined],
    ] as const) {
      const r = await call(path, { key: acct.key, method, body, idempotencyKey: `rt-${path}` });
      expect(r.status, r.text).toBe(200);
      expect(trips(r), path).toBe(1);
    }
  });

  it("the batch commits but its answer is lost: PATCH of a plan and a cancel answer the committed row from the record, and a retry replays it", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const recordsKey = (op: { kind: string; sql: string[] }) => op.kind === "batch" && sqlMatches(op as never, /insert\s+into\s+"?idempotency_keys"?/i);
    const cases: [string, string, unknown, string][] = [
      [`/subscription-plans/${plan.id}`, "PATCH", { name: "Lost answer", active: false }, `/subscription-plans/${plan.id}`],
      [`/subscriptions/${sub.id}`, "DELETE", undefined, `/subscriptions/${sub.id}`],
    ];
    for (const [path, method, body, readPath] of cases) {
      const db = faultyD1(env.DB, { kind: "commit_then_throw", when: recordsKey });
      const headers: Record<string, string> = { "idempotency-key": `lost-${method}` };
      const first = await fetchWith({ DB: db, JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, path, { method, key: acct.key, headers, ...(body ? { json: body } : {}) });
      expect(db.fired, path).toHaveLength(1);
      expect(first.status, first.text).toBe(200);
      const read = await call(readPath, { key: acct.key });
      expect(first.text).toBe(read.text);
      const retry = await call(path, { key: acct.key, method, body, idempotencyKey: `lost-${method}` });
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect(retry.text).toBe(first.text);
    }
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active", "subscription_canceled:canceled"]);
  });

  it("cancel of a subscription whose charge is in flight: 409 charge_in_progress, nothing written, the key stays free", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const row = await one<{ periods_billed: number; dunning_attempts: number }>("SELECT periods_billed, dunning_attempts FROM subscriptions WHERE id = ?", sub.id);
    // A claimed, unsettled attempt at the next period: as a renewal holds it while at the processor.
    const periodId = `per_a4${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
    const now = new Date().toISOString();
    await env.DB.prepare(
      "INSERT INTO subscription_periods (id, account_id, subscription_id, period_index, period_start, amount, currency, status, attempts, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 1999, 'usd', 'open', ?, ?, ?)",
    )
      .bind(periodId, acct.id, sub.id, row.periods_billed, now, row.dunning_attempts + 1, now, now)
      .run();
    const before = await snapshot();
    for (const path of [`/subscriptions/${sub.id}`, `/subscriptions/${sub.id}?at_period_end=true`]) {
      const res = await call(path, { key: acct.key, method: "DELETE", idempotencyKey: `inflight-${path.length}` });
      expectError(res, 409, "invalid_request_error", "charge_in_progress");
    }
    expect(changes(before, await snapshot())).toEqual({});
    // Settled: the same keys now cancel.
    await env.DB.prepare("DELETE FROM subscription_periods WHERE id = ?").bind(periodId).run();
    const later = await call(`/subscriptions/${sub.id}?at_period_end=true`, { key: acct.key, method: "DELETE", idempotencyKey: `inflight-${`/subscriptions/${sub.id}?at_period_end=true`.length}` });
    expect(later.status, later.text).toBe(200);
    expect(later.body.cancel_at_period_end).toBe(true);
  });

  it("cancel racing a plan change (PUT /subscriptions/{id}): the cancel's answer is the final row, and a plan change after it is refused", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const planA = await createPlan(acct, { name: "A" });
    const planB = await createPlan(acct, { name: "B" });
    const subs = [] as string[];
    for (let i = 0; i < 4; i++) subs.push((await subscribed(acct, user.id, planA.id)).id);
    await warm(acct.key);
    for (const [i, id] of subs.entries()) {
      const atPeriodEnd = i % 2 === 1;
      const [change, cancel] = await Promise.all([
        call(`/subscriptions/${id}`, { key: acct.key, method: "PUT", body: { plan_id: planB.id, quantity: 3, proration_behavior: "none" } }),
        call(`/subscriptions/${id}${atPeriodEnd ? "?at_period_end=true" : ""}`, { key: acct.key, method: "DELETE", idempotencyKey: `race-${i}` }),
      ]);
      expect(cancel.status, cancel.text).toBe(200);
      expect([200, 409], change.text).toContain(change.status);
      const final = await call(`/subscriptions/${id}`, { key: acct.key });
      if (!atPeriodEnd || change.status !== 200) expect(cancel.text).toBe(final.text);
      else {
        // Both went through: the final row holds both changes.
        expect(final.body).toMatchObject({ cancel_at_period_end: true, plan_id: planB.id, quantity: 3 });
      }
      if (!atPeriodEnd && change.status === 200) {
        // The change committed first: the cancel's answer shows it.
        expect(cancel.body).toMatchObject({ plan_id: planB.id, quantity: 3, status: "canceled" });
      }
      const replay = await call(`/subscriptions/${id}${atPeriodEnd ? "?at_period_end=true" : ""}`, { key: acct.key, method: "DELETE", idempotencyKey: `race-${i}` });
      expect(replay.text).toBe(cancel.text);
      const notes = await notificationsOf(acct.id, id);
      expect(notes.filter((n) => n.startsWith("subscription_canceled"))).toHaveLength(atPeriodEnd ? 0 : 1);
      expect(notes.filter((n) => n.startsWith("subscription_updated"))).toHaveLength((atPeriodEnd ? 1 : 0) + (change.status === 200 ? 1 : 0));
    }
  }, 60_000);

  it("cancel racing a renewal: either the cancel waits (409) or it wins, and a canceled subscription is never charged after its answer", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const outcomes: number[] = [];
    for (let i = 0; i < 3; i++) {
      const sub = await subscribed(acct, user.id, plan.id);
      await makeDue(sub.id);
      const [, cancel] = await Promise.all([runCron(), call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" })]);
      outcomes.push(cancel.status);
      await quiesce(8000);
      if (cancel.status === 200) {
        const final = await call(`/subscriptions/${sub.id}`, { key: acct.key });
        expect(final.text).toBe(cancel.text);
        const late = await one<{ n: number }>("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND created_at > ?", sub.id, cancel.body.updated_at);
        expect(late.n).toBe(0);
      } else {
        expectError(cancel, 409, "invalid_request_error", "charge_in_progress");
        await waitFor(async () => {
          const retry = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
          expect(retry.status, retry.text).toBe(200);
        });
      }
    }
    expect(outcomes.every((s) => s === 200 || s === 409)).toBe(true);
  }, 90_000);
});

// ---------------------------------------------------------------------------------------------

describe("inserts through insertRow, and events outside a request", () => {
  it("shapes with and without optional columns, interleaved: each row holds its own values, JSON scopes encoded once, nulls as NULL", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const made = await Promise.all([
      call("/api/keys", { key: acct.key, body: { scopes: ["users:read", "users:read"] } }),
      call("/api/keys", { key: acct.key, body: { name: 'k "quoted" \\', scopes: ["payouts:write", "users:read"] } }),
      call("/payout", { key: acct.key, body: payoutBody({ amount: 111, description: undefined }) }),
      call("/payout", { key: acct.key, body: payoutBody({ amount: 222, description: "with desc", recipient_id: user.id }) }),
      call("/payout", { key: acct.key, body: payoutBody({ amount: 333, description: "only desc" }) }),
      call("/api/users", { key: acct.key, body: { name: "No Clock", email: "nc@example.com" } }),
    ]);
    for (const r of made) expect(r.status, r.text).toBe(201);
    const [k1, k2, p1, p2, p3, u] = made.map((r) => r.body);
    const keyRow = (id: string) => one<Record<string, any>>("SELECT name, scopes, kind, revoked_at FROM api_keys WHERE id = ?", id);
    expect(await keyRow(k1.id)).toEqual({ name: null, scopes: '["users:read"]', kind: "restricted", revoked_at: null });
    expect(await keyRow(k2.id)).toEqual({ name: 'k "quoted" \\', scopes: '["payouts:write","users:read"]', kind: "restricted", revoked_at: null });
    expect((await call(`/api/keys/${k2.id}`, { key: acct.key })).body.scopes).toEqual(["payouts:write", "users:read"]);
    const payoutRow = (id: string) => one<Record<string, any>>("SELECT amount, description, recipient_id FROM payouts WHERE id = ?", id);
    expect(await payoutRow(p1.id)).toEqual({ amount: 111, description: null, recipient_id: null });
    expect(await payoutRow(p2.id)).toEqual({ amount: 222, description: "with desc", recipient_id: user.id });
    expect(await payoutRow(p3.id)).toEqual({ amount: 333, description: "only desc", recipient_id: null });
    expect(await one("SELECT test_clock_id FROM users WHERE id = ?", u.id)).toEqual({ test_clock_id: null });
    // The new keys work, with the scopes they were given.
    expect((await call("/api/users", { key: k1.secret })).status).toBe(200);
    expect((await call("/payouts", { key: k1.secret })).status).toBe(403);
    expect((await call("/payouts", { key: k2.secret })).status).toBe(200);
    // Events of the inserts carry their own objects, in sequence 1.
    for (const p of [p1, p2, p3]) {
      const evs = await call(`/api/events?object_id=${p.id}`, { key: acct.key });
      expect(evs.body.data.map((e: any) => [e.type, e.sequence, e.data.id, e.data.amount])).toEqual([["payout.created", 1, p.id, p.amount]]);
    }
  });

  // Found as a latent defect of 254353d, now fixed: insertRow bound a null through the column's
  // encoder, so a null JSON column was stored as the text 'null' (src/db/prepared.ts slotOf now
  // binds null as NULL, as drizzle's own insert does). No route reached it.
  it("insertRow stores a null JSON column as SQL NULL, as drizzle's insert does", async () => {
    const acct = await signup();
    const db = createDb(env.DB);
    const at = new Date().toISOString();
    const viaDrizzle = crypto.randomUUID();
    const viaInsertRow = crypto.randomUUID();
    await db.insert(requestIds).values({ id: viaDrizzle, accountId: acct.id, purpose: "drizzle", metadata: null, createdAt: at });
    await db.batch([insertRow(db, requestIds, { id: viaInsertRow, accountId: acct.id, purpose: "insertRow", metadata: null, createdAt: at })]);
    const rows = (await env.DB.prepare("SELECT id, metadata, typeof(metadata) AS t FROM request_ids WHERE id IN (?, ?)").bind(viaDrizzle, viaInsertRow).all<{ id: string; metadata: unknown; t: string }>()).results;
    expect(rows.find((r) => r.id === viaDrizzle)).toMatchObject({ metadata: null, t: "null" });
    expect(rows.find((r) => r.id === viaInsertRow)).toMatchObject({ metadata: null, t: "null" });
  });

  it("queue consumers and cron run the prepared event and delivery inserts outside any request: payout.created then payout.paid, in sequence, each delivered to the subscribed endpoint", async () => {
    const receiver = installReceiver();
    restoreReceiver = receiver.restore;
    const acct = await signup();
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/a4-payouts`, events: ["payout.created", "payout.paid"] } });
    expect(hook.status).toBe(201);
    const payout = await call("/payout", { key: acct.key, body: payoutBody({ amount: 4242 }, CARDS.visa) });
    expect(payout.status, payout.text).toBe(201);
    await waitFor(async () => expect((await call(`/payouts/${payout.body.id}`, { key: acct.key })).body.status).toBe("paid"));
    await runCron();
    await quiesce(8000);
    const evs = (await eventsOf(acct.id)).filter((e) => e.type.startsWith("payout."));
    expect(evs.map((e) => [e.type, e.body.sequence, e.body.data.id])).toEqual([
      ["payout.created", 1, payout.body.id],
      ["payout.paid", 2, payout.body.id],
    ]);
    for (const e of evs) {
      const dl = (await env.DB.prepare("SELECT endpoint_id, account_id FROM webhook_deliveries WHERE event_id = ?").bind(e.id).all()).results;
      expect(dl).toEqual([{ endpoint_id: hook.body.id, account_id: acct.id }]);
    }
    await waitFor(() => expect(receiver.received.filter((r) => r.url.endsWith("/a4-payouts")).length).toBeGreaterThanOrEqual(2));
  }, 60_000);
});
