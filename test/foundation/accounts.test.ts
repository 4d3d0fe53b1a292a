import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, expectError } from "../helpers";
import { ISO_MS, sha256Hex } from "./support";

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
