// D1 round trips per request, from the development-only Tender-D1-Round-Trips header.
import { describe, expect, it } from "vitest";
import { call, roundTrips, signup } from "../helpers";
import { createUser, warm } from "./support";

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
    const user = await createUser(acct.key);
    await warm(acct.key);
    const res = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(res.status).toBe(200);
    expect(roundTrips(res)).toBe(1);
  });

  it("an authenticated request with a cached key that fails validation makes no round trip", async () => {
    const acct = await signup();
    await warm(acct.key);
    const res = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "not-an-email" } });
    expect(res.status).toBe(400);
    expect(roundTrips(res)).toBe(0);
  });

  it("other paths, for reference: uncached key +1, Idempotency-Key +1, empty list +1", async () => {
    const acct = await signup();
    const cold = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    expect(roundTrips(cold)).toBe(2);
    const withKey = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" }, idempotencyKey: "rt" });
    expect(roundTrips(withKey)).toBe(2);
    const replay = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" }, idempotencyKey: "rt" });
    expect(roundTrips(replay)).toBe(2);
    const put = await call(`/api/users/${cold.body.id}`, { key: acct.key, method: "PUT", body: { name: "Ada K", email: "ada@example.com" } });
    expect(roundTrips(put)).toBe(1);
    expect(roundTrips(await call("/api/users", { key: acct.key }))).toBe(1);
    expect(roundTrips(await call("/api/request-id", { key: acct.key }))).toBe(2);
    expect(roundTrips(await call("/health"))).toBe(0);
  });
});
