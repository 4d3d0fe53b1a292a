import { describe, expect, it } from "vitest";
import { call, signup, roundTrips } from "../helpers";

describe("smoke", () => {
  it("creates a user", async () => {
    const acct = await signup();
    const res = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    expect(res.status, res.text).toBe(201);
    console.log(res.body, roundTrips(res));
    const put = await call(`/api/users/${res.body.id}`, { method: "PUT", key: acct.key, body: { name: "Ada L", email: "ada@example.com" }, idempotencyKey: "k1" });
    console.log(put.status, put.body, roundTrips(put));
    const again = await call(`/api/users/${res.body.id}`, { method: "PUT", key: acct.key, body: { name: "Ada L", email: "ada@example.com" }, idempotencyKey: "k1" });
    console.log(again.status, again.text, again.headers.get("idempotent-replayed"));
    const get = await call(`/api/users/${res.body.id}`, { key: acct.key });
    console.log(get.status, get.body, roundTrips(get));
  });
});
