import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { createExecutionContext } from "cloudflare:test";
import worker from "../../src/index";
import { BASE, call } from "../support/http";

const METHODS = ["get", "post", "put", "patch", "delete"] as const;
// 503: the account is being moved to another shard (account_moving).
const READ_ERRORS = ["400", "401", "403", "404", "429", "500", "503"];
const WRITE_ERRORS = ["400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "503"];

describe("GET /health", () => {
  it("answers 200 ok without a credential and without touching the database", async () => {
    const res = await call("/health");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ok" });
    expect(res.headers.get("request-id")).toMatch(/^req_/);
    expect(res.headers.get("tender-d1-round-trips")).toBe("0");
  });
});

describe("GET /openapi.json", () => {
  it("is an OpenAPI 3.1 document with a bearer security scheme", async () => {
    const res = await call("/openapi.json");
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe("3.1.0");
    expect(res.body.info.title).toBeTruthy();
    expect(res.body.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    expect(res.body.components.schemas.Error).toBeDefined();
  });

  it("documents every foundation route", async () => {
    const { body } = await call("/openapi.json");
    const operations = Object.entries(body.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(operations).toEqual(
      expect.arrayContaining([
        "GET /health",
        "POST /api/accounts",
        "POST /oauth/token",
        "POST /api/keys",
        "GET /api/keys",
        "GET /api/keys/{id}",
        "DELETE /api/keys/{id}",
        "POST /api/request-id",
        "GET /api/request-id",
        "GET /api/request-id/{id}",
        "POST /api/users",
        "GET /api/users",
        "GET /api/users/{id}",
        "PUT /api/users/{id}",
      ]),
    );
  });

  it("documents the error answers of every operation, in the shared error shape", async () => {
    const { body } = await call("/openapi.json");
    let checked = 0;
    for (const [path, item] of Object.entries(body.paths as Record<string, Record<string, any>>)) {
      // The liveness check has no failure mode other than the service being down.
      if (path === "/health") continue;
      // Stripe's webhook route: every refusal is a 400 (DESIGN.md), never a 401, 404 or 409; 503 while the account moves shards.
      if (path === "/processor-webhooks/stripe/{account_id}") {
        expect(Object.keys(item.post.responses).sort(), path).toEqual(["200", "400", "413", "500", "503"]);
        expect(item.post.security, path).toEqual([]);
        continue;
      }
      for (const method of METHODS) {
        const operation = item[method];
        if (!operation) continue;
        checked++;
        const where = `${method.toUpperCase()} ${path}`;
        const secured = (operation.security ?? []).some((s: Record<string, unknown>) => "bearerAuth" in s);
        let expected = method === "get" ? READ_ERRORS : WRITE_ERRORS;
        // Sign-up and the token exchange authenticate themselves and are not rate limited per key.
        if (!secured) expected = expected.filter((s) => s !== "403" && s !== "429" && s !== "503");
        else expect(operation.security, where).toEqual([{ bearerAuth: [] }]);
        for (const status of expected) {
          const response = operation.responses[status];
          expect(response, `${where} documents ${status}`).toBeDefined();
          expect(response.content["application/json"].schema.$ref, `${where} ${status}`).toBe("#/components/schemas/Error");
        }
        expect(operation.operationId, where).toBeTruthy();
      }
    }
    expect(checked).toBeGreaterThanOrEqual(13);
  });

  it("marks every /api operation as needing the bearer credential", async () => {
    const { body } = await call("/openapi.json");
    for (const [path, item] of Object.entries(body.paths as Record<string, Record<string, any>>)) {
      // Sign-up and an account's move are the operator's: open in development, ADMIN_TOKEN elsewhere.
      if (!path.startsWith("/api/") || path === "/api/accounts" || path === "/api/accounts/{account_id}/move") continue;
      for (const method of METHODS) if (item[method]) expect(item[method].security, `${method} ${path}`).toEqual([{ bearerAuth: [] }]);
    }
  });
});

describe("GET /docs", () => {
  it("renders an HTML reference that loads /openapi.json", async () => {
    const res = await call("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<html/i);
    expect(res.text).toContain("/openapi.json");
  });

  it("loads no script from another origin: one script, from /docs/scalar.js, under a self-only CSP", async () => {
    const res = await call("/docs");
    const sources = [...res.text.matchAll(/<script[^>]*\ssrc="([^"]+)"/g)].map((m) => m[1]);
    expect(sources).toEqual(["/docs/scalar.js"]);
    // No inline code: the only other script element is the reference's configuration (no body).
    expect(res.text).toMatch(/<script id="api-reference" data-url="\/openapi.json" data-configuration="[^"]*"><\/script>/);
    expect(res.text).not.toMatch(/https?:\/\//);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/https?:|\*/);
  });

  it("serves the pinned reference script itself: gzipped as packed to a browser that accepts gzip, unpacked to any other client", async () => {
    const plain = await call("/docs/scalar.js");
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(plain.headers.get("x-content-type-options")).toBe("nosniff");
    expect(plain.text.length).toBeGreaterThan(1_000_000);
    expect(plain.text).toContain("data-configuration");

    // The Worker's own answer to a browser's request (its handler called as a function: a fetch()
    // would unpack it on the way in): the packed bytes, gzip's magic number first, under half the
    // script's size, which unpack to the same script.
    const request = new Request(`${BASE}/docs/scalar.js`, { headers: { "Accept-Encoding": "gzip, deflate, br" } });
    const gzipped = await worker.fetch(request as never, env as never, createExecutionContext());
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers.get("content-encoding")).toBe("gzip");
    expect(gzipped.headers.get("vary")).toBe("Accept-Encoding");
    const packed = new Uint8Array(await gzipped.arrayBuffer());
    expect([packed[0], packed[1]]).toEqual([0x1f, 0x8b]);
    expect(packed.length).toBeLessThan(plain.text.length / 2);
    const unpacked = await new Response(new Response(packed).body!.pipeThrough(new DecompressionStream("gzip"))).text();
    expect(unpacked).toBe(plain.text);
  });
});
