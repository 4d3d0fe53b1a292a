import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/lib/crypto";
import { call, expectError, ISO_MS } from "../support/http";
import { newApp } from "../../src/app";

describe("POST /api/accounts", () => {
  it("signs up and returns a test-mode secret key that works at once", async () => {
    const res = await call("/api/accounts", { body: { name: "Acme Ltd", email: "owner@acme.test" } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ object: "account", name: "Acme Ltd", email: "owner@acme.test" });
    expect(res.body.id).toMatch(/^acct_[0-9a-z]{26}$/);
    expect(res.body.created_at).toMatch(ISO_MS);
    expect(res.body.api_key).toMatch(/^sk_test_[0-9A-Za-z]{32}$/);
    expect(res.headers.get("request-id")).toMatch(/^req_/);

    const users = await call("/api/users", { key: res.body.api_key });
    expect(users.status, users.text).toBe(200);
    expect(users.body).toEqual({ object: "list", data: [], has_more: false });
  });

  it("stores only the key's hash, never the key", async () => {
    const res = await call("/api/accounts", { body: { name: "Hash Co", email: "hash@acme.test" } });
    const row = await env.DB.prepare("SELECT * FROM api_keys WHERE account_id = ?").bind(res.body.id).first<Record<string, unknown>>();
    expect(row!.hash).toBe(await sha256Hex(res.body.api_key));
    expect(JSON.stringify(row)).not.toContain(res.body.api_key);
  });

  it("each sign-up gets its own account and key", async () => {
    const a = await call("/api/accounts", { body: { name: "A", email: "a@acme.test" } });
    const b = await call("/api/accounts", { body: { name: "B", email: "b@acme.test" } });
    expect(a.body.id).not.toBe(b.body.id);
    expect(a.body.api_key).not.toBe(b.body.api_key);
  });

  it("answers 400 with the param for a missing name or a bad email", async () => {
    const missing = expectError(await call("/api/accounts", { body: { email: "x@acme.test" } }), 400, "invalid_request_error", "parameter_missing");
    expect(missing.param).toBe("name");
    const bad = expectError(await call("/api/accounts", { body: { name: "X", email: "not-an-email" } }), 400, "invalid_request_error", "parameter_invalid");
    expect(bad.param).toBe("email");
  });

  it("answers 400 invalid_json for malformed JSON and 415 for a non-JSON body", async () => {
    expectError(
      await call("/api/accounts", { rawBody: '{"name": "X",', headers: { "content-type": "application/json" } }),
      400,
      "invalid_request_error",
      "invalid_json",
    );
    expectError(
      await call("/api/accounts", { rawBody: "name=X", headers: { "content-type": "text/plain" } }),
      415,
      "invalid_request_error",
      "unsupported_media_type",
    );
  });
});

describe("outside development", () => {
  // The same app, served with a production environment: sign-up needs ADMIN_TOKEN, HTTPS only.
  const production = { ...env, ENVIRONMENT: "production", ADMIN_TOKEN: "admin-secret-token-for-tests" };
  const app = newApp();
  async function send(url: string, init: RequestInit = {}) {
    const ctx = createExecutionContext();
    const response = await app.fetch(new Request(url, init), production, ctx);
    await waitOnExecutionContext(ctx);
    return { status: response.status, headers: response.headers, body: (await response.json()) as any };
  }
  const signupInit = (authorization?: string): RequestInit => ({
    method: "POST",
    headers: { "content-type": "application/json", "tender-d1-usage": "on", ...(authorization ? { authorization } : {}) },
    body: JSON.stringify({ name: "Prod", email: "prod@acme.test" }),
  });

  it("sign-up needs Authorization: Bearer <ADMIN_TOKEN>", async () => {
    const none = await send("https://api.tender.test/api/accounts", signupInit());
    expect(none.status).toBe(401);
    expect(none.body.error).toMatchObject({ type: "authentication_error", code: "missing_credential" });
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const wrong = await send("https://api.tender.test/api/accounts", signupInit("Bearer not-the-admin-token"));
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe("invalid_admin_token");
    const right = await send("https://api.tender.test/api/accounts", signupInit(`Bearer ${production.ADMIN_TOKEN}`));
    expect(right.status).toBe(201);
    expect(right.body.api_key).toMatch(/^sk_test_/);
    expect(right.headers.get("strict-transport-security")).toMatch(/max-age=\d+/);
    expect(right.headers.get("tender-d1-round-trips")).toBeNull();
  });

  it("refuses plain HTTP with 400 https_required", async () => {
    const res = await send("http://api.tender.test/health");
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "https_required" });
    expect(res.headers.get("request-id")).toBe(res.body.error.request_id);
  });
});
