// D1 round trips per request, from the development-only Tender-D1-Round-Trips header.
import { describe, expect, it } from "vitest";
import { call, roundTrips, signup } from "../support/http";
import { createUser, warm } from "../support/fixtures";

describe("D1 round trips", () => {
  it("POST /api/users with a cached key is one round trip: one batch", async () => {
    const acct = await signup();
    await warm(acct.key);
    const res = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    expect(res.status).toBe(201);
    expect(roundTrips(res)).toBe(1);
  });

  it("GET /api/users/{id} with a cached key is one round trip", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await warm(acct.key);
    const res = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(res.status).toBe(200);
    expect(roundTrips(res)).toBe(1);
  });

  it("development answers report D1 usage when the request asks with Tender-D1-Usage, and only then", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await warm(acct.key);
    const asked = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(asked.status).toBe(200);
    expect(asked.headers.get("tender-d1-round-trips")).toBe("1");
    expect(Number(asked.headers.get("tender-d1-rows-read"))).toBeGreaterThan(0);
    expect(asked.headers.get("tender-d1-rows-written")).toBe("0");
    expect(asked.headers.get("tender-d1-statements-built")).toBe("0");
    const plain = await call(`/api/users/${user.id}`, { key: acct.key, headers: { "tender-d1-usage": undefined } });
    expect(plain.status).toBe(200);
    expect(plain.body).toEqual(asked.body);
    for (const name of ["round-trips", "rows-read", "rows-written", "statements-built"]) expect(plain.headers.get(`tender-d1-${name}`)).toBeNull();
    // The shard is still named, asked or not.
    expect(plain.headers.get("tender-shard")).toBe(asked.headers.get("tender-shard"));
  });

  it("an authenticated request with a cached key that fails validation makes no round trip", async () => {
    const acct = await signup();
    await warm(acct.key);
    const res = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "not-an-email" } });
    expect(res.status).toBe(400);
    expect(roundTrips(res)).toBe(0);
  });

  it("other paths: uncached key +1, Idempotency-Key +1 (as ceilings); an empty list and a 404 are one round trip", async () => {
    const acct = await signup();
    const cold = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    expect(cold.status).toBe(201);
    expect(roundTrips(cold)).toBeLessThanOrEqual(2);
    const withKey = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" }, idempotencyKey: "rt" });
    expect(withKey.status).toBe(201);
    expect(roundTrips(withKey)).toBeLessThanOrEqual(2);
    const replay = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" }, idempotencyKey: "rt" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(roundTrips(replay)).toBeLessThanOrEqual(2);
    const put = await call(`/api/users/${cold.body.id}`, { key: acct.key, method: "PUT", body: { name: "Ada K", email: "ada@example.com" } });
    expect(put.status).toBe(200);
    expect(roundTrips(put)).toBeLessThanOrEqual(1);
    const list = await call("/api/users", { key: acct.key });
    expect(list.body.data.length).toBeGreaterThan(0);
    expect(roundTrips(list)).toBeLessThanOrEqual(1);
    const emptyList = await call("/api/request-id", { key: acct.key });
    expect(emptyList.body.data).toEqual([]);
    expect(roundTrips(emptyList)).toBe(1);
    // A 404 is one round trip too: the read by id and the key check are one statement.
    const missing = await call("/api/users/usr_00000000000000000000000000", { key: acct.key });
    expect(missing.status).toBe(404);
    expect(roundTrips(missing)).toBe(1);
    expect(roundTrips(await call("/health"))).toBe(0);
  });
});
