import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/lib/crypto";
import { call, expectError, expectWwwAuthenticate, ISO_MS, signup } from "../support/http";
import { createKey, mintToken, secretKeyId, warm } from "../support/fixtures";

describe("POST /api/keys", () => {
  it("creates a restricted rk_test_ key with its scopes, shown once with a recognisable prefix", async () => {
    const acct = await signup();
    const res = await call("/api/keys", { key: acct.key, body: { name: "reporting", scopes: ["users:read", "request_ids:write"] } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({
      object: "api_key",
      name: "reporting",
      kind: "restricted",
      mode: "test",
      scopes: ["users:read", "request_ids:write"],
      revoked_at: null,
    });
    expect(res.body.id).toMatch(/^key_[0-9a-z]{26}$/);
    expect(res.body.created_at).toMatch(ISO_MS);
    expect(res.body.secret).toMatch(/^rk_test_[0-9A-Za-z]{32}$/);
    expect(res.body.prefix).toBe(`${res.body.secret.slice(0, 12)}…${res.body.secret.slice(-4)}`);
    const row = await env.DB.prepare("SELECT hash FROM api_keys WHERE id = ?").bind(res.body.id).first<{ hash: string }>();
    expect(row!.hash).toBe(await sha256Hex(res.body.secret));
  });

  it("the restricted key works within its scopes and gets 403 outside them", async () => {
    const acct = await signup();
    const { secret } = await createKey(acct, ["users:read"]);
    const list = await call("/api/users", { key: secret });
    expect(list.status, list.text).toBe(200);
    const error = expectError(await call("/api/users", { key: secret, body: { name: "Ada", email: "ada@example.com" } }), 403, "permission_error", "missing_scope");
    expect(error.message).toContain("users:write");
    expectError(await call("/api/request-id", { key: secret }), 403, "permission_error", "missing_scope");
    expectError(await call("/api/keys", { key: secret }), 403, "permission_error", "missing_scope");
  });

  it("a write scope implies the matching read scope", async () => {
    const acct = await signup();
    const { secret } = await createKey(acct, ["users:write"]);
    expect((await call("/api/users", { key: secret })).status).toBe(200);
  });

  it("refuses with 403 scopes wider than the caller's", async () => {
    const acct = await signup();
    const { secret } = await createKey(acct, ["keys:write", "users:read"]);
    const narrower = await call("/api/keys", { key: secret, body: { scopes: ["users:read"] } });
    expect(narrower.status, narrower.text).toBe(201);
    const error = expectError(await call("/api/keys", { key: secret, body: { scopes: ["users:write"] } }), 403, "permission_error", "scope_exceeds_caller");
    expect(error.param).toBe("scopes");
  });

  it("answers 400 for an unknown scope, no scopes, or the '*' scope", async () => {
    const acct = await signup();
    for (const scopes of [["users:fly"], [], ["*"]]) {
      const error = expectError(await call("/api/keys", { key: acct.key, body: { scopes } }), 400, "invalid_request_error");
      expect(error.param).toMatch(/^scopes/);
    }
    const missing = expectError(await call("/api/keys", { key: acct.key, body: { name: "x" } }), 400, "invalid_request_error", "parameter_missing");
    expect(missing.param).toBe("scopes");
  });
});

describe("GET /api/keys and GET /api/keys/{id}", () => {
  it("lists the account's keys newest first and never shows a secret", async () => {
    const acct = await signup();
    const first = await createKey(acct, ["users:read"], "first");
    const second = await createKey(acct, ["request_ids:read"], "second");
    const res = await call("/api/keys", { key: acct.key });
    expect(res.status).toBe(200);
    expect(res.body.object).toBe("list");
    expect(res.body.has_more).toBe(false);
    expect(res.body.data.map((k: { id: string }) => k.id)).toEqual([second.id, first.id, await secretKeyId(acct)]);
    for (const key of res.body.data) {
      expect(key).not.toHaveProperty("secret");
      expect(key).not.toHaveProperty("hash");
      expect(key.prefix).toMatch(/^(sk|rk)_test_.{4}….{4}$/);
    }
    expect(res.text).not.toContain(first.secret);
    expect(res.text).not.toContain(second.secret);
    expect(res.text).not.toContain(acct.key);
  });

  it("reads one key by id, without its secret", async () => {
    const acct = await signup();
    const created = await createKey(acct, ["users:read"], "reader");
    const res = await call(`/api/keys/${created.id}`, { key: acct.key });
    expect(res.status).toBe(200);
    const { secret, ...shown } = created;
    expect(res.body).toEqual(shown);
    expect(res.text).not.toContain(secret);
  });

  it("answers 404 for an unknown key id", async () => {
    const acct = await signup();
    const error = expectError(await call("/api/keys/key_00000000000000000000000000", { key: acct.key }), 404, "not_found_error", "resource_missing");
    expect(error.param).toBe("id");
    expectError(await call("/api/keys/key_00000000000000000000000000", { key: acct.key, method: "DELETE" }), 404, "not_found_error", "resource_missing");
  });

  it("pages with limit and refuses a bad cursor", async () => {
    const acct = await signup();
    const a = await createKey(acct, ["users:read"]);
    const b = await createKey(acct, ["users:read"]);
    const page = await call("/api/keys?limit=1", { key: acct.key });
    expect(page.body.data.map((k: { id: string }) => k.id)).toEqual([b.id]);
    expect(page.body.has_more).toBe(true);
    const next = await call(`/api/keys?limit=1&starting_after=${b.id}`, { key: acct.key });
    expect(next.body.data.map((k: { id: string }) => k.id)).toEqual([a.id]);
    const error = expectError(await call("/api/keys?starting_after=usr_00000000000000000000000000", { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
    expect(error.param).toBe("starting_after");
  });
});

describe("DELETE /api/keys/{id}", () => {
  it("revokes a cached key from another key of the account: the very next request is 401", async () => {
    const acct = await signup();
    const victim = await createKey(acct, ["users:read"]);
    await warm(victim.secret);
    const res = await call(`/api/keys/${victim.id}`, { key: acct.key, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: victim.id, object: "api_key", kind: "restricted" });
    expect(res.body.revoked_at).toMatch(ISO_MS);
    expect(res.body).not.toHaveProperty("secret");

    const after = await call("/api/users", { key: victim.secret });
    expect(["api_key_revoked", "invalid_api_key"]).toContain(expectError(after, 401, "authentication_error").code);
    expectWwwAuthenticate(after);
    // The revocation shows on the key, and the revoking key still works.
    const shown = await call(`/api/keys/${victim.id}`, { key: acct.key });
    expect(shown.body.revoked_at).toBe(res.body.revoked_at);
  });

  it("a key can revoke itself, and is refused from its next request", async () => {
    const acct = await signup();
    const self = await createKey(acct, ["keys:write", "users:read"]);
    await warm(self.secret);
    const res = await call(`/api/keys/${self.id}`, { key: self.secret, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.revoked_at).toMatch(ISO_MS);
    const after = await call("/api/users", { key: self.secret });
    expect(["api_key_revoked", "invalid_api_key"]).toContain(expectError(after, 401, "authentication_error").code);
    expectWwwAuthenticate(after);
  });

  it("a restricted key revokes only keys within its own scopes: never the secret key or a wider key (403)", async () => {
    const acct = await signup();
    const admin = await createKey(acct, ["keys:write", "users:read"]);
    const wider = await createKey(acct, ["users:write", "payouts:write"]);
    const narrower = await createKey(acct, ["users:read"]);
    for (const target of [await secretKeyId(acct), wider.id]) {
      const refused = expectError(await call(`/api/keys/${target}`, { key: admin.secret, method: "DELETE" }), 403, "permission_error", "scope_exceeds_caller");
      expect(refused.param).toBe("id");
      expect((await call(`/api/keys/${target}`, { key: acct.key })).body.revoked_at).toBeNull();
    }
    // The secret key still works; a key inside the caller's scopes can be revoked.
    expect((await call("/api/users", { key: acct.key })).status).toBe(200);
    const res = await call(`/api/keys/${narrower.id}`, { key: admin.secret, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.revoked_at).toMatch(ISO_MS);
    // The secret key may revoke any key.
    expect((await call(`/api/keys/${wider.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
  });

  it("access tokens minted from a revoked key stop working at once", async () => {
    const acct = await signup();
    const key = await createKey(acct, ["users:read"]);
    const token = await mintToken(key.secret);
    await warm(token);
    expect((await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const after = await call("/api/users", { key: token });
    expect(["api_key_revoked", "invalid_api_key"]).toContain(expectError(after, 401, "authentication_error").code);
    expectWwwAuthenticate(after);
    // Nor can the revoked key mint a new one.
    expectError(
      await call("/oauth/token", { body: { grant_type: "client_credentials" }, headers: { authorization: `Bearer ${key.secret}` } }),
      401,
      "authentication_error",
      "invalid_client",
    );
  });

  describe("a revocation made elsewhere (another isolate, whose cache this one does not share)", () => {
    // Revoked straight in D1: this isolate's credential cache still holds the credential.
    async function cachedThenRevoked(useToken: boolean) {
      const acct = await signup();
      const key = await createKey(acct, ["users:write", "request_ids:write"]);
      const credential = useToken ? await mintToken(key.secret) : key.secret;
      await warm(credential);
      await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), key.id).run();
      return { acct, key, credential };
    }

    for (const useToken of [false, true]) {
      const kind = useToken ? "an access token" : "a key";
      it(`fails ${kind} at once on a read, a list and a write`, async () => {
        for (const request of [
          (k: string) => call("/api/users", { key: k }),
          (k: string) => call("/api/users/usr_00000000000000000000000000", { key: k }),
          (k: string) => call("/api/users", { key: k, body: { name: "Ada", email: "ada@example.com" } }),
          (k: string) => call("/api/request-id", { key: k, body: { purpose: "checkout" } }),
        ]) {
          const { credential } = await cachedThenRevoked(useToken);
          const res = await request(credential);
          expectError(res, 401, "authentication_error", "api_key_revoked");
          expectWwwAuthenticate(res);
          // From then on the credential is not known at all.
          expectError(await request(credential), 401, "authentication_error", "invalid_api_key");
        }
      });
    }

    it("a cached, revoked key cannot read a stored idempotent answer", async () => {
      const acct = await signup();
      const key = await createKey(acct, ["users:write"]);
      const body = { name: "Ada", email: "ada@example.com" };
      const first = await call("/api/users", { key: key.secret, body, idempotencyKey: "revoked-replay" });
      expect(first.status).toBe(201);
      await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), key.id).run();
      const replay = await call("/api/users", { key: key.secret, body, idempotencyKey: "revoked-replay" });
      expectError(replay, 401, "authentication_error", "api_key_revoked");
      expect(replay.text).not.toContain(first.body.id);
    });
  });

  it("revoking an already revoked key answers the key unchanged", async () => {
    const acct = await signup();
    const key = await createKey(acct, ["users:read"]);
    const first = await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE" });
    const second = await call(`/api/keys/${key.id}`, { key: acct.key, method: "DELETE" });
    expect(second.status).toBe(200);
    expect(second.body.revoked_at).toBe(first.body.revoked_at);
  });

  it("needs keys:write", async () => {
    const acct = await signup();
    const reader = await createKey(acct, ["keys:read"]);
    const target = await createKey(acct, ["users:read"]);
    expectError(await call(`/api/keys/${target.id}`, { key: reader.secret, method: "DELETE" }), 403, "permission_error", "missing_scope");
    expect((await call("/api/users", { key: target.secret })).status).toBe(200);
  });
});
