// Hot paths run on statements prepared once per isolate (src/db/prepared.ts): after the first
// request of a kind, no statement is built for it. Read from the development-only
// Tender-D1-Statements-Built header, which counts SQL texts handed to the D1 binding per request.
import { describe, expect, it } from "vitest";
import { call, d1Usage, roundTrips, signup } from "../support/http";
import { createKey, createUser, warm } from "../support/fixtures";
import { CARDS } from "../support/cards";

const built = (res: { headers: Headers }) => d1Usage(res, "statements-built");
const PAYOUT = { amount: 1250, currency: "usd", payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2031, cvv: "123" };

describe("prepared statements on the hot paths", () => {
  it("the counter sees statements as they are built: a list shape builds on first use only, and a replay builds with the query builder", async () => {
    const acct = await signup();
    await warm(acct.key);
    // The event feed filtered by type and object: a per-request query (not prepared) would build
    // again; a prepared shape builds on its first use only.
    const first = await call("/api/events?type=payout.paid&object_id=po_none", { key: acct.key });
    expect(first.status).toBe(200);
    expect(built(first)).toBeGreaterThan(0);
    const again = await call("/api/events?type=payout.paid&object_id=po_none", { key: acct.key });
    expect(built(again)).toBe(0);
    // The replay of a stored answer is not a hot path: it reads the record with the query builder.
    const once = await call("/payout", { key: acct.key, body: PAYOUT, idempotencyKey: "prep-replay" });
    expect(once.status).toBe(201);
    const replay = await call("/payout", { key: acct.key, body: PAYOUT, idempotencyKey: "prep-replay" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(built(replay)).toBeGreaterThan(0);
  });

  it("a payout with an Idempotency-Key, a user created and read, lists and a 404 build no statement once warm", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await warm(acct.key);
    // First use in this isolate may prepare; every later request binds values only.
    for (const round of [1, 2]) {
      const payout = await call("/payout", { key: acct.key, body: PAYOUT, idempotencyKey: `prep-${round}` });
      const created = await call("/api/users", { key: acct.key, body: { name: "Grace", email: `grace${round}@example.com` }, idempotencyKey: `prep-user-${round}` });
      const read = await call(`/api/users/${user.id}`, { key: acct.key });
      const list = await call("/api/users?limit=2", { key: acct.key });
      const next = await call(`/api/users?limit=2&starting_after=${list.body.data[1].id}`, { key: acct.key });
      const missing = await call("/api/users/usr_00000000000000000000000000", { key: acct.key });
      const payouts = await call("/payouts?status=pending", { key: acct.key });
      expect([payout.status, created.status, read.status, list.status, next.status, missing.status, payouts.status]).toEqual([201, 201, 200, 200, 200, 404, 200]);
      expect(created.body).toMatchObject({ name: "Grace", email: `grace${round}@example.com` });
      expect(read.body).toMatchObject({ id: user.id, email: user.email });
      expect(list.body.data.map((u: { id: string }) => u.id)).toHaveLength(2);
      expect(payouts.body.data.map((p: { id: string }) => p.id)).toContain(payout.body.id);
      if (round === 2) {
        for (const res of [payout, created, read, list, next, missing, payouts]) {
          expect(built(res), res.headers.get("request-id") ?? "").toBe(0);
          expect(roundTrips(res)).toBe(1);
        }
      }
    }
  });

  it("a payout to a recipient (the bench's request floor) builds no statement once warm, and its recipient is still checked in the batch", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const other = await createUser(await signup("Other"));
    await warm(acct.key);
    for (const round of [1, 2]) {
      const payout = await call("/payout", { key: acct.key, body: { ...PAYOUT, recipient_id: user.id }, idempotencyKey: `prep-recipient-${round}` });
      expect(payout.status, payout.text).toBe(201);
      expect(payout.body.recipient_id).toBe(user.id);
      if (round === 2) {
        expect(built(payout)).toBe(0);
        expect(roundTrips(payout)).toBe(1);
      }
    }
    // Another account's user is not a recipient of this one: 404 from the batch's guard, nothing written.
    const foreign = await call("/payout", { key: acct.key, body: { ...PAYOUT, recipient_id: other.id }, idempotencyKey: "prep-recipient-foreign" });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toMatchObject({ code: "resource_missing", param: "recipient_id" });
    const listed = await call(`/payouts?recipient_id=${other.id}`, { key: acct.key });
    expect(listed.body.data).toEqual([]);
  });

  it("an uncached API key is looked up with a prepared statement", async () => {
    const acct = await signup();
    await warm(acct.key);
    // A restricted key: its scopes, a JSON column, are bound through the column's encoder.
    const { secret: fresh, scopes } = await createKey(acct, ["users:read"]);
    expect(scopes).toEqual(["users:read"]);
    const res = await call("/api/users", { key: fresh });
    expect(res.status).toBe(200);
    expect(roundTrips(res)).toBe(2); // the lookup, then the page with its key check
    expect(built(res)).toBe(0);
    expect((await call("/api/users", { key: fresh, body: { name: "Ada", email: "ada@example.com" } })).status).toBe(403);
  });

  it("one prepared statement serves each request with its own values: two accounts never see each other's rows", async () => {
    const a = await signup("A");
    const b = await signup("B");
    const userA = await createUser(a);
    const userB = await createUser(b);
    const [readA, readB, crossA, crossB] = await Promise.all([
      call(`/api/users/${userA.id}`, { key: a.key }),
      call(`/api/users/${userB.id}`, { key: b.key }),
      call(`/api/users/${userB.id}`, { key: a.key }),
      call(`/api/users/${userA.id}`, { key: b.key }),
    ]);
    expect([readA.body.id, readB.body.id]).toEqual([userA.id, userB.id]);
    expect([crossA.status, crossB.status]).toEqual([404, 404]);
    const [listA, listB] = await Promise.all([call("/api/users", { key: a.key }), call("/api/users", { key: b.key })]);
    expect(listA.body.data.map((u: { id: string }) => u.id)).toEqual([userA.id]);
    expect(listB.body.data.map((u: { id: string }) => u.id)).toEqual([userB.id]);
  });
});
