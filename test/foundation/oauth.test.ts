import { TEST_SHARD, env } from "../support/env";
import { describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../../src/lib/crypto";
import { call, expectError, expectWwwAuthenticate, signup } from "../support/http";
import { createKey, mintToken, secretKeyId, warm } from "../support/fixtures";
import { countRows } from "../support/db";

const FORM = { "content-type": "application/x-www-form-urlencoded" };
const TOKEN = /^at_test_[0-9A-Za-z]{40}$/;

function expectTokenAnswer(res: Awaited<ReturnType<typeof call>>, scope: string) {
  expect(res.status, res.text).toBe(200);
  expect(res.body).toEqual({ access_token: expect.stringMatching(TOKEN), token_type: "Bearer", expires_in: 900, scope });
  expect(res.headers.get("cache-control")).toBe("no-store");
}

describe("POST /oauth/token", () => {
  it("exchanges a key sent as Bearer, with a JSON body, for a working bearer token", async () => {
    const acct = await signup();
    const res = await call("/oauth/token", { body: { grant_type: "client_credentials" }, headers: { authorization: `Bearer ${acct.key}` } });
    expectTokenAnswer(res, "*");
    const created = await call("/api/users", { key: res.body.access_token, body: { name: "Ada", email: "ada@example.com" } });
    expect(created.status, created.text).toBe(201);
    const read = await call(`/api/users/${created.body.id}`, { key: acct.key });
    expect(read.body).toEqual(created.body);
  });

  it("accepts a form-encoded body", async () => {
    const acct = await signup();
    const res = await call("/oauth/token", {
      rawBody: "grant_type=client_credentials&scope=users%3Aread",
      headers: { ...FORM, authorization: `Bearer ${acct.key}` },
    });
    expectTokenAnswer(res, "users:read");
    expect((await call("/api/users", { key: res.body.access_token })).status).toBe(200);
  });

  it("an empty scope is the same as none sent (RFC 6749 §3.3): the key's own scopes, never a token that can do nothing", async () => {
    const acct = await signup();
    for (const init of [
      { rawBody: "grant_type=client_credentials&scope=", headers: { ...FORM, authorization: `Bearer ${acct.key}` } },
      { body: { grant_type: "client_credentials", scope: "  " }, headers: { authorization: `Bearer ${acct.key}` } },
    ]) {
      const res = await call("/oauth/token", init);
      expectTokenAnswer(res, "*");
      expect((await call("/api/users", { key: res.body.access_token })).status).toBe(200);
    }
  });

  it("accepts HTTP Basic client authentication with the key as the password", async () => {
    const acct = await signup();
    const basic = btoa(`${encodeURIComponent("tender")}:${encodeURIComponent(acct.key)}`);
    const res = await call("/oauth/token", { rawBody: "grant_type=client_credentials", headers: { ...FORM, authorization: `Basic ${basic}` } });
    expectTokenAnswer(res, "*");
    expect((await call("/api/users", { key: res.body.access_token })).status).toBe(200);
  });

  it("accepts the key as client_secret in the body, JSON or form", async () => {
    const acct = await signup();
    expectTokenAnswer(await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: acct.key } }), "*");
    expectTokenAnswer(
      await call("/oauth/token", { rawBody: `grant_type=client_credentials&client_id=x&client_secret=${acct.key}`, headers: FORM }),
      "*",
    );
  });

  it("narrows the scope: the token can do what it was granted and gets 403 for the rest", async () => {
    const acct = await signup();
    const token = await mintToken(acct.key, "users:read request_ids:write");
    expect((await call("/api/users", { key: token })).status).toBe(200);
    expect((await call("/api/request-id", { key: token, body: { purpose: "checkout" } })).status).toBe(201);
    expectError(await call("/api/users", { key: token, body: { name: "Ada", email: "ada@example.com" } }), 403, "permission_error", "missing_scope");
    expectError(await call("/api/keys", { key: token }), 403, "permission_error", "missing_scope");
  });

  it("a restricted key's token defaults to the key's scopes and cannot be widened", async () => {
    const acct = await signup();
    const key = await createKey(acct, ["users:read"]);
    const res = await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: key.secret } });
    expectTokenAnswer(res, "users:read");
    const wider = expectError(
      await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: key.secret, scope: "users:write" } }),
      400,
      "invalid_request_error",
      "invalid_scope",
    );
    expect(wider.param).toBe("scope");
    expectError(
      await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: key.secret, scope: "*" } }),
      400,
      "invalid_request_error",
      "invalid_scope",
    );
  });

  it("answers 400 for an unknown scope or grant type", async () => {
    const acct = await signup();
    expectError(
      await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: acct.key, scope: "users:fly" } }),
      400,
      "invalid_request_error",
      "invalid_scope",
    );
    const grant = expectError(
      await call("/oauth/token", { body: { grant_type: "password", client_secret: acct.key } }),
      400,
      "invalid_request_error",
      "unsupported_grant_type",
    );
    expect(grant.param).toBe("grant_type");
  });

  it("answers 401 invalid_client with WWW-Authenticate for no, unknown, malformed or token credentials", async () => {
    const acct = await signup();
    const token = await mintToken(acct.key);
    const attempts = [
      { body: { grant_type: "client_credentials" } },
      { body: { grant_type: "client_credentials", client_secret: "sk_test_00000000000000000000000000000000" } },
      { body: { grant_type: "client_credentials" }, headers: { authorization: "Basic !!!" } },
      { body: { grant_type: "client_credentials" }, headers: { authorization: `Bearer ${token}` } },
    ];
    for (const attempt of attempts) {
      const res = await call("/oauth/token", attempt);
      expectError(res, 401, "authentication_error", "invalid_client");
      expectWwwAuthenticate(res);
    }
  });

  it("a key revoked elsewhere while cached here cannot mint a token", async () => {
    const acct = await signup();
    const key = await createKey(acct, ["users:read"]);
    await warm(key.secret);
    await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), key.id).run();
    const res = await call("/oauth/token", { body: { grant_type: "client_credentials", client_secret: key.secret } });
    expectError(res, 401, "authentication_error", "invalid_client");
    expect(await countRows("access_tokens", "key_id = ?", key.id)).toBe(0);
  });

  it("stores only the token's hash", async () => {
    const acct = await signup();
    const token = await mintToken(acct.key);
    const row = await env.DB.prepare("SELECT * FROM access_tokens WHERE hash = ?").bind(await sha256Hex(token)).first<Record<string, unknown>>();
    expect(row).not.toBeNull();
    expect(JSON.stringify(row)).not.toContain(token);
    expect(Date.parse(row!.expires_at as string) - Date.parse(row!.created_at as string)).toBe(900_000);
  });
});

describe("expired access tokens", () => {
  it("refuses a token whose expiry has passed (row written with a past expires_at)", async () => {
    const acct = await signup();
    const keyId = await secretKeyId(acct);
    const token = `at_test_${TEST_SHARD}${"E".repeat(39)}`; // names the shard its row is written to
    const past = Date.now() - 60_000;
    await env.DB.prepare(
      "INSERT INTO access_tokens (id, account_id, key_id, hash, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
      .bind("atk_00000000000000000000000001", acct.id, keyId, await sha256Hex(token), '["*"]', new Date(past - 900_000).toISOString(), new Date(past).toISOString())
      .run();
    const res = await call("/api/users", { key: token });
    expectError(res, 401, "authentication_error", "token_expired");
    expectWwwAuthenticate(res);
  });

  it("refuses a minted token once its expiry passes, even while it is cached", async () => {
    const acct = await signup();
    const mintedAt = Date.now();
    const token = await mintToken(acct.key);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      // 20 s before expiry the token works, and is cached (the cache keeps a lookup for 30 s)...
      vi.setSystemTime(mintedAt + 880_000);
      await warm(token);
      // ...and 1 s after expiry the cached lookup itself refuses it.
      vi.setSystemTime(mintedAt + 901_000);
      const res = await call("/api/users", { key: token });
      expectError(res, 401, "authentication_error", "token_expired");
      expectWwwAuthenticate(res);
    } finally {
      vi.useRealTimers();
    }
  });

  it("refuses a minted token whose stored expiry was moved into the past", async () => {
    const acct = await signup();
    const token = await mintToken(acct.key);
    await env.DB.prepare("UPDATE access_tokens SET expires_at = ? WHERE hash = ?").bind(new Date(Date.now() - 1000).toISOString(), await sha256Hex(token)).run();
    expectError(await call("/api/users", { key: token }), 401, "authentication_error", "token_expired");
  });
});
