import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { call, expectError, expectWwwAuthenticate, signup } from "../support/http";
import { createKey, mintToken } from "../support/fixtures";
import { countRows } from "../support/db";

const JSON_TYPE = { "content-type": "application/json" };
const user = { name: "Ada", email: "ada@example.com" };

describe("400 invalid request", () => {
  it("malformed JSON answers invalid_json", async () => {
    const acct = await signup();
    for (const rawBody of ['{"name": "Ada",', "{'name': 'Ada'}", "nope"]) {
      expectError(await call("/api/users", { key: acct.key, rawBody, headers: JSON_TYPE }), 400, "invalid_request_error", "invalid_json");
    }
  });

  it("a JSON body that is not an object answers 400", async () => {
    const acct = await signup();
    for (const body of [[user], "Ada", 42, null]) {
      expectError(await call("/api/users", { key: acct.key, body }), 400, "invalid_request_error", "parameter_invalid");
    }
  });

  it("a missing body answers 400 naming the first required field", async () => {
    const acct = await signup();
    const error = expectError(await call("/api/users", { key: acct.key, method: "POST" }), 400, "invalid_request_error", "parameter_missing");
    expect(error.param).toBe("name");
  });

  it("an Idempotency-Key longer than 255 characters answers 400", async () => {
    const acct = await signup();
    expectError(await call("/api/users", { key: acct.key, body: user, idempotencyKey: "k".repeat(256) }), 400, "invalid_request_error", "idempotency_key_invalid");
    expect((await call("/api/users", { key: acct.key, body: user, idempotencyKey: "k".repeat(255) })).status).toBe(201);
  });
});

describe("decimal amounts are refused by the body middleware, for any route", () => {
  it("a top-level amount of 100.00 answers 400 amount_not_integer naming 10000", async () => {
    const acct = await signup();
    const res = await call("/api/users", { key: acct.key, rawBody: '{"name":"Ada","email":"ada@example.com","amount": 100.00}', headers: JSON_TYPE });
    const error = expectError(res, 400, "invalid_request_error", "amount_not_integer");
    expect(error.param).toBe("amount");
    expect(error.message).toContain("100.00");
    expect(error.message).toMatch(/\b10000\b/);
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });

  it("names the integer in the currency's own minor unit: 100 for JPY, 100000 for KWD", async () => {
    const acct = await signup();
    const jpy = expectError(
      await call("/api/request-id", { key: acct.key, rawBody: '{"purpose":"x","amount":100.00,"currency":"jpy"}', headers: JSON_TYPE }),
      400,
      "invalid_request_error",
      "amount_not_integer",
    );
    expect(jpy.message).toMatch(/send 100\b/);
    expect(jpy.message).not.toContain("10000");
    const upper = expectError(
      await call("/api/users", { key: acct.key, rawBody: '{"amount":12.5,"currency":"JPY"}', headers: JSON_TYPE }),
      400,
      "invalid_request_error",
      "amount_not_integer",
    );
    expect(upper.message).toContain("12.5");
    const kwd = expectError(
      await call("/api/users", { key: acct.key, rawBody: '{"amount":1.5,"currency":"kwd"}', headers: JSON_TYPE }),
      400,
      "invalid_request_error",
      "amount_not_integer",
    );
    expect(kwd.message).toMatch(/\b1500\b/);
  });

  it("an integer amount, or 100.00 outside the amount field, passes the middleware", async () => {
    const acct = await signup();
    expect((await call("/api/request-id", { key: acct.key, rawBody: '{"purpose":"x","metadata":{"amount":10000}}', headers: JSON_TYPE })).status).toBe(201);
    expect((await call("/api/request-id", { key: acct.key, rawBody: '{"purpose":"x","metadata":{"amount":100.00}}', headers: JSON_TYPE })).status).toBe(201);
  });
});

describe("401 authentication", () => {
  it("missing, malformed, unknown and revoked credentials answer 401 with WWW-Authenticate: Bearer", async () => {
    const acct = await signup();
    const revoked = await createKey(acct, ["users:read"]);
    await call(`/api/keys/${revoked.id}`, { key: acct.key, method: "DELETE" });
    const cases: [Record<string, string>, string][] = [
      [{}, "missing_credential"],
      [{ authorization: "Basic x" }, "malformed_credential"],
      [{ authorization: "Bearer" }, "malformed_credential"],
      [{ authorization: acct.key }, "malformed_credential"],
      [{ authorization: "Bearer sk_test_00000000000000000000000000000000" }, "invalid_api_key"],
      [{ authorization: "Bearer not-a-key" }, "invalid_api_key"],
      // One character changed (to one it is not already: a random key can end in either).
      [{ authorization: `Bearer ${acct.key.slice(0, -1)}${acct.key.endsWith("X") ? "Y" : "X"}` }, "invalid_api_key"],
      [{ authorization: `Bearer ${revoked.secret}` }, "invalid_api_key"],
    ];
    for (const [headers, code] of cases) {
      for (const request of [{ headers }, { headers, body: user }]) {
        const res = await call("/api/users", request);
        expectError(res, 401, "authentication_error", code);
        expectWwwAuthenticate(res);
      }
    }
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });

  it("the scheme name is case-insensitive", async () => {
    const acct = await signup();
    expect((await call("/api/users", { headers: { authorization: `bearer ${acct.key}` } })).status).toBe(200);
  });
});

describe("403 permission", () => {
  it("a restricted key or token without the scope answers 403 missing_scope, and writes nothing", async () => {
    const acct = await signup();
    const reader = await createKey(acct, ["users:read"]);
    const token = await mintToken(acct.key, "request_ids:read");
    for (const key of [reader.secret, token]) {
      const error = expectError(await call("/api/users", { key, body: user }), 403, "permission_error", "missing_scope");
      expect(error.message).toContain("users:write");
    }
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });

  it("the scope is checked before the body is read", async () => {
    const acct = await signup();
    const reader = await createKey(acct, ["users:read"]);
    expectError(await call("/api/users", { key: reader.secret, rawBody: "{not json", headers: JSON_TYPE }), 403, "permission_error", "missing_scope");
    expectError(await call("/api/users", { key: reader.secret, rawBody: "x", headers: { "content-type": "text/plain" } }), 403, "permission_error", "missing_scope");
  });

  it("creating a key with scopes wider than the caller's answers 403", async () => {
    const acct = await signup();
    const token = await mintToken(acct.key, "keys:write");
    expectError(await call("/api/keys", { key: token, body: { scopes: ["users:read"] } }), 403, "permission_error", "scope_exceeds_caller");
    expect((await call("/api/keys", { key: token, body: { scopes: ["keys:read"] } })).status).toBe(201);
  });
});

describe("404 not found", () => {
  it("an unknown route answers 404 route_not_found in the error shape", async () => {
    const acct = await signup();
    const error = expectError(await call("/api/nothing-here", { key: acct.key }), 404, "invalid_request_error", "route_not_found");
    expect(error.message).toContain("/api/nothing-here");
    expectError(await call("/api/users/usr_00000000000000000000000000", { key: acct.key, method: "DELETE" }), 404, "invalid_request_error", "route_not_found");
  });

  it("a route close to a real one names the real one, with the caller's own ids in it", async () => {
    const acct = await signup();
    const message = async (path: string, method = "GET", body?: unknown) =>
      expectError(await call(path, { key: acct.key, method, body }), 404, "invalid_request_error", "route_not_found").message;
    expect(await message("/payouts", "POST", {})).toBe("No route for POST /payouts. Did you mean POST /payout?");
    expect(await message("/api/user/usr_123")).toBe("No route for GET /api/user/usr_123. Did you mean GET /api/users/usr_123?");
    expect(await message("/subscription-plan")).toBe("No route for GET /subscription-plan. Did you mean GET /subscription-plans?");
    // The right path under a method it does not take: the method it takes.
    expect(await message("/api/request-id", "PUT", {})).toMatch(/^No route for PUT \/api\/request-id\. Did you mean (GET|POST) \/api\/request-id\?$/);
    // Nothing close: the reference.
    expect(await message("/api/nothing-here")).toBe("No route for GET /api/nothing-here. See /docs.");
  });

  it("an unknown id answers 404 resource_missing", async () => {
    const acct = await signup();
    expectError(await call("/api/users/usr_00000000000000000000000000", { key: acct.key }), 404, "not_found_error", "resource_missing");
  });
});

describe("413 body too large", () => {
  it("a body over 1 MB with Content-Length answers 413", async () => {
    const acct = await signup();
    const big = JSON.stringify({ name: "Ada", email: "ada@example.com", padding: "x".repeat(1024 * 1024) });
    expectError(await call("/api/users", { key: acct.key, rawBody: big, headers: JSON_TYPE }), 413, "invalid_request_error", "body_too_large");
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });

  it("a chunked body over 1 MB without Content-Length answers 413", async () => {
    const acct = await signup();
    const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 40) return controller.close();
        sent++;
        controller.enqueue(sent === 1 ? new TextEncoder().encode('{"name":"Ada","email":"ada@example.com","padding":"') : chunk);
      },
    });
    const res = await call("/api/users", { key: acct.key, rawBody: stream, headers: JSON_TYPE });
    expectError(res, 413, "invalid_request_error", "body_too_large");
    // The limit is enforced while reading: the stream was not drained to its end.
    expect(sent).toBeLessThan(40);
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });

  it("a body just under 1 MB is read: it reaches validation, which names its unknown field", async () => {
    const acct = await signup();
    const prefix = '{"name":"Ada","email":"ada@example.com","padding":"';
    const body = `${prefix}${"x".repeat(1024 * 1024 - prefix.length - 2)}"}`;
    expect(new TextEncoder().encode(body).byteLength).toBe(1024 * 1024);
    const res = await call("/api/users", { key: acct.key, rawBody: body, headers: JSON_TYPE });
    expect(expectError(res, 400, "invalid_request_error", "parameter_unknown").param).toBe("padding");
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });
});

describe("415 unsupported media type", () => {
  it("a text/plain body answers 415, empty or not, and a form body outside /oauth/token too", async () => {
    const acct = await signup();
    for (const [rawBody, type] of [
      [JSON.stringify(user), "text/plain"],
      ["", "text/plain"],
      ["name=Ada&email=ada%40example.com", "application/x-www-form-urlencoded"],
    ]) {
      const error = expectError(
        await call("/api/users", { key: acct.key, method: "POST", rawBody, headers: { "content-type": type } }),
        415,
        "invalid_request_error",
        "unsupported_media_type",
      );
      expect(error.message).toContain("application/json");
    }
    expect(await countRows("users", "account_id = ?", acct.id)).toBe(0);
  });
});

describe("500 server error", () => {
  it("answers a generic message with the request id, never the internal error", async () => {
    const acct = await signup();
    // A stored row the code cannot read: its JSON metadata is corrupt.
    const id = "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b";
    await env.DB.prepare("INSERT INTO request_ids (id, account_id, purpose, metadata, created_at) VALUES (?, ?, 'x', '{broken', ?)")
      .bind(id, acct.id, new Date().toISOString())
      .run();
    const res = await call(`/api/request-id/${id}`, { key: acct.key });
    const error = expectError(res, 500, "api_error", "internal_error");
    expect(Object.keys(error).sort()).toEqual(["code", "message", "request_id", "type"]);
    expect(res.text).not.toMatch(/SyntaxError|JSON|at .*\.(ts|js)|stack|broken|request_ids/i);
  });
});
