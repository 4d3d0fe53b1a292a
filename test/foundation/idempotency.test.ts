import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { createKey, createUser, mintToken } from "../support/fixtures";
import { countRows } from "../support/db";

const ada = { name: "Ada", email: "ada@example.com" };

describe("Idempotency-Key", () => {
  it("20 concurrent POST /api/users with one key create exactly one user; every 2xx has its id", async () => {
    const acct = await signup();
    const answers = await Promise.all(Array.from({ length: 20 }, () => call("/api/users", { key: acct.key, body: ada, idempotencyKey: "create-ada" })));
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
    expect(await countRows("events", "account_id = ? AND type = 'customer.created'", acct.id)).toBe(1);
    const created = answers.filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((r) => r.body.id)).size).toBe(1);
    // Exactly one answer did the work; every other 2xx is a replay of it.
    expect(created.filter((r) => r.headers.get("idempotent-replayed") !== "true")).toHaveLength(1);
    for (const res of answers.filter((r) => r.status !== 201)) expectError(res, 409, "invalid_request_error", "idempotency_key_in_use");
    const [user] = (await call("/api/users", { key: acct.key })).body.data;
    expect(user.id).toBe(created[0].body.id);
  });

  it("a retry replays the first status and body with Idempotent-Replayed: true", async () => {
    const acct = await signup();
    const first = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "replay-me" });
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "replay-me" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("request-id")).toMatch(/^req_/);
    expect(again.headers.get("request-id")).not.toBe(first.headers.get("request-id"));
    // The same body with its keys in another order is the same request.
    const reordered = await call("/api/users", { key: acct.key, body: { email: ada.email, name: ada.name }, idempotencyKey: "replay-me" });
    expect(reordered.headers.get("idempotent-replayed")).toBe("true");
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
  });

  it("a PUT retry replays the committed user, and changes nothing more", async () => {
    const acct = await signup();
    const created = await createUser(acct);
    const put = { key: acct.key, method: "PUT", body: { name: "Ada King", email: "king@example.com" }, idempotencyKey: "put-1" };
    const first = await call(`/api/users/${created.id}`, put);
    expect(first.status).toBe(200);
    const again = await call(`/api/users/${created.id}`, put);
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(await countRows("events", "account_id = ? AND type = 'customer.updated'", acct.id)).toBe(1);
  });

  it("the same key with different parameters answers 422, and the first answer still replays", async () => {
    const acct = await signup();
    const first = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "k-422" });
    const error = expectError(
      await call("/api/users", { key: acct.key, body: { ...ada, name: "Grace" }, idempotencyKey: "k-422" }),
      422,
      "idempotency_error",
      "idempotency_key_reused",
    );
    expect(error.message).toMatch(/different/);
    // Another path is another request too.
    expectError(await call("/api/request-id", { key: acct.key, body: { purpose: "x" }, idempotencyKey: "k-422" }), 422, "idempotency_error", "idempotency_key_reused");
    const replay = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "k-422" });
    expect(replay.body).toEqual(first.body);
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
  });

  it("a key still in flight answers 409 idempotency_key_in_use", async () => {
    const acct = await signup();
    const first = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "in-flight" });
    expect(first.status).toBe(201);
    // Put the record back into the state a running request holds it in.
    await env.DB.prepare(
      "UPDATE idempotency_keys SET status = 'in_flight', response_status = NULL, response_body = NULL, locked_at = ? WHERE account_id = ? AND key = 'in-flight'",
    )
      .bind(Date.now(), acct.id)
      .run();
    expectError(await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "in-flight" }), 409, "invalid_request_error", "idempotency_key_in_use");
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(1);
  });

  it("a claim left in flight for over a minute (its request died) is taken over by the retry", async () => {
    const acct = await signup();
    await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "stale" });
    await env.DB.prepare(
      "UPDATE idempotency_keys SET status = 'in_flight', response_status = NULL, response_body = NULL, locked_at = ? WHERE account_id = ? AND key = 'stale'",
    )
      .bind(Date.now() - 61_000, acct.id)
      .run();
    const retry = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "stale" });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    // A stale claim for different parameters is not taken over.
    await env.DB.prepare("UPDATE idempotency_keys SET status = 'in_flight', locked_at = ? WHERE account_id = ? AND key = 'stale'")
      .bind(Date.now() - 61_000, acct.id)
      .run();
    expectError(await call("/api/users", { key: acct.key, body: { ...ada, name: "Other" }, idempotencyKey: "stale" }), 422, "idempotency_error", "idempotency_key_reused");
  });

  it("a key used for a request that failed validation is released: the corrected request goes through", async () => {
    const acct = await signup();
    expectError(await call("/api/users", { key: acct.key, body: { name: "Ada", email: "nope" }, idempotencyKey: "fix-me" }), 400, "invalid_request_error", "parameter_invalid");
    expect(await countRows("idempotency_keys", "account_id = ? AND key = 'fix-me'", acct.id)).toBe(0);
    const fixed = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "fix-me" });
    expect(fixed.status, fixed.text).toBe(201);
    expect(fixed.headers.get("idempotent-replayed")).toBeNull();
    const replay = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "fix-me" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.id).toBe(fixed.body.id);
  });

  it("a key used for a 404 or a 403 is released too", async () => {
    const acct = await signup();
    const missing = "/api/users/usr_00000000000000000000000000";
    expectError(await call(missing, { key: acct.key, method: "PUT", body: ada, idempotencyKey: "nf" }), 404, "not_found_error", "resource_missing");
    const user = await createUser(acct);
    expect((await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: ada, idempotencyKey: "nf" })).status).toBe(200);
  });

  it("a credential of the account without the route's scope gets 403, not the stored answer", async () => {
    const acct = await signup();
    const first = await call("/api/users", { key: acct.key, body: ada, idempotencyKey: "scoped" });
    expect(first.status).toBe(201);
    const other = await createKey(acct, ["request_ids:write"]);
    const res = await call("/api/users", { key: other.secret, body: ada, idempotencyKey: "scoped" });
    expectError(res, 403, "permission_error", "missing_scope");
    expect(res.text).not.toContain(first.body.id);
    const token = await mintToken(acct.key, "users:read");
    expectError(await call("/api/users", { key: token, body: ada, idempotencyKey: "scoped" }), 403, "permission_error", "missing_scope");
  });

  it("keys are scoped to the account: another account's same key is a new request", async () => {
    const a = await signup();
    const b = await signup();
    const fromA = await call("/api/users", { key: a.key, body: ada, idempotencyKey: "shared" });
    const fromB = await call("/api/users", { key: b.key, body: ada, idempotencyKey: "shared" });
    expect(fromB.status).toBe(201);
    expect(fromB.headers.get("idempotent-replayed")).toBeNull();
    expect(fromB.body.id).not.toBe(fromA.body.id);
  });

  it("a replayed POST /api/keys does not reveal the secret, and no secret is stored", async () => {
    const acct = await signup();
    const body = { name: "ci", scopes: ["users:read"] };
    const first = await call("/api/keys", { key: acct.key, body, idempotencyKey: "new-key" });
    expect(first.status).toBe(201);
    expect(first.body.secret).toMatch(/^rk_test_/);
    const replay = await call("/api/keys", { key: acct.key, body, idempotencyKey: "new-key" });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    const { secret, ...rest } = first.body;
    expect(replay.body).toEqual({ ...rest, secret: null });
    expect(replay.text).not.toContain(secret);
    // The test secret key and the one restricted key made (the live secret key is the other mode's).
    expect(await countRows("api_keys", "account_id = ? AND mode = 'test'", acct.id)).toBe(2);

    const { results } = await env.DB.prepare("SELECT * FROM idempotency_keys").all();
    expect(results.length).toBeGreaterThan(0);
    expect(JSON.stringify(results)).not.toContain(secret);
    expect(JSON.stringify(results)).not.toContain(secret.slice(8));
    // The key still works: the replay did not mint or change anything.
    expect((await call("/api/users", { key: secret })).status).toBe(200);
  });

  it("a DELETE retry replays the revocation", async () => {
    const acct = await signup();
    const key = (await call("/api/keys", { key: acct.key, body: { scopes: ["users:read"] } })).body;
    const first = await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "revoke" });
    const again = await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE", idempotencyKey: "revoke" });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
  });
});
