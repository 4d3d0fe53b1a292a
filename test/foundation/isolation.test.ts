import { describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { createKey, createUser, mintToken, secretKeyId } from "../support/fixtures";
import { countRows } from "../support/db";

async function twoAccounts() {
  const a = await signup("Account A");
  const b = await signup("Account B");
  const userA = await createUser(a, { name: "Alice", email: "alice@a.test" });
  const ridA = (await call("/api/request-id", { key: a.key, body: { purpose: "a-only", metadata: { secret: "a" } } })).body;
  const keyA = await createKey(a, ["users:read"]);
  return { a, b, userA, ridA, keyA };
}

describe("tenant isolation", () => {
  it("account B cannot read, update or list A's users", async () => {
    const { a, b, userA } = await twoAccounts();
    const read = expectError(await call(`/api/users/${userA.id}`, { key: b.key }), 404, "not_found_error", "resource_missing");
    expect(read.message).not.toContain("Alice");
    expectError(
      await call(`/api/users/${userA.id}`, { key: b.key, method: "PUT", body: { name: "Mallory", email: "m@b.test" } }),
      404,
      "not_found_error",
      "resource_missing",
    );
    expect((await call(`/api/users/${userA.id}`, { key: a.key })).body).toEqual(userA);
    expect(await countRows("events", "type = 'customer.updated'")).toBe(0);

    const list = await call("/api/users", { key: b.key });
    expect(list.body).toEqual({ object: "list", data: [], has_more: false });
    // A's id as a cursor does not open A's data either.
    const paged = await call(`/api/users?ending_before=usr_00000000000000000000000000`, { key: b.key });
    expect(paged.body.data).toEqual([]);
  });

  it("B's users are its own, and A's list does not show them", async () => {
    const { a, b, userA } = await twoAccounts();
    const userB = await createUser(b, { name: "Bob", email: "bob@b.test" });
    expect((await call("/api/users", { key: a.key })).body.data.map((u: { id: string }) => u.id)).toEqual([userA.id]);
    expect((await call("/api/users", { key: b.key })).body.data.map((u: { id: string }) => u.id)).toEqual([userB.id]);
    expectError(await call(`/api/users/${userB.id}`, { key: a.key }), 404, "not_found_error", "resource_missing");
  });

  it("account B cannot read or list A's request ids", async () => {
    const { b, ridA } = await twoAccounts();
    expectError(await call(`/api/request-id/${ridA.id}`, { key: b.key }), 404, "not_found_error", "resource_missing");
    const list = await call("/api/request-id", { key: b.key });
    expect(list.body).toEqual({ object: "list", data: [], has_more: false });
  });

  it("account B cannot read, list or revoke A's keys", async () => {
    const { a, b, keyA } = await twoAccounts();
    expectError(await call(`/api/keys/${keyA.id}`, { key: b.key }), 404, "not_found_error", "resource_missing");
    expectError(await call(`/api/keys/${await secretKeyId(a)}`, { key: b.key }), 404, "not_found_error", "resource_missing");
    const list = await call("/api/keys", { key: b.key });
    expect(list.body.data.map((k: { id: string }) => k.id)).toEqual([await secretKeyId(b)]);

    expectError(await call(`/api/keys/${keyA.id}`, { key: b.key, method: "DELETE" }), 404, "not_found_error", "resource_missing");
    expectError(await call(`/api/keys/${await secretKeyId(a)}`, { key: b.key, method: "DELETE" }), 404, "not_found_error", "resource_missing");
    expect((await call(`/api/keys/${keyA.id}`, { key: a.key })).body.revoked_at).toBeNull();
    expect((await call("/api/users", { key: keyA.secret })).status).toBe(200);
    expect((await call("/api/users", { key: a.key })).status).toBe(200);
  });

  it("B's access token is held to B's account as well", async () => {
    const { b, userA, ridA } = await twoAccounts();
    const token = await mintToken(b.key);
    expectError(await call(`/api/users/${userA.id}`, { key: token }), 404, "not_found_error", "resource_missing");
    expectError(await call(`/api/request-id/${ridA.id}`, { key: token }), 404, "not_found_error", "resource_missing");
    expect((await call("/api/users", { key: token })).body.data).toEqual([]);
  });
});
