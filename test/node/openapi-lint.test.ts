// The OpenAPI document as `wrangler dev` serves it, checked in Node by the tools a client author
// would run on it: @redocly/cli's linter with its recommended rules (no error), and its servers
// entry (the origin that served it, here a port picked for this run). The Worker is started as
// the browser tests start it (test/browser/harness.ts).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type RunningWorker, startWorker } from "../browser/harness";

let worker: RunningWorker;
let document: { servers: { url: string }[]; paths: Record<string, Record<string, { security?: unknown[]; operationId?: string }>>; webhooks: Record<string, unknown> };
const dir = mkdtempSync(join(tmpdir(), "tender-openapi-lint-"));

beforeAll(async () => {
  worker = await startWorker();
  const res = await fetch(`${worker.origin}/openapi.json`);
  expect(res.status).toBe(200);
  document = await res.json();
  writeFileSync(join(dir, "openapi.json"), JSON.stringify(document, null, 2));
});
afterAll(async () => {
  await worker?.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Problem = { ruleId: string; severity: "error" | "warn"; message: string; location: { pointer: string }[] };

describe("/openapi.json as served", () => {
  it("passes `redocly lint` with the recommended rules, with no error", () => {
    const lint = spawnSync(join(ROOT, "node_modules", ".bin", "redocly"), ["lint", "--extends=recommended", "--format=json", "openapi.json"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
    });
    const report = JSON.parse(lint.stdout) as { totals: { errors: number; warnings: number }; problems: Problem[] };
    const errors = report.problems.filter((p) => p.severity === "error").map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    expect(errors).toEqual([]);
    expect(report.totals.errors).toBe(0);
    expect(lint.status, lint.stderr).toBe(0);
  });

  it("names the origin that served it as its server", () => {
    expect(worker.origin).not.toBe("http://127.0.0.1:8787");
    expect(document.servers.map((s) => s.url)).toEqual([worker.origin]);
  });

  it("declares security on every operation: the public ones (health, sign-up and an account's move, the token exchange, Stripe's signed webhooks) with security: []", () => {
    const open: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        expect(operation.security, `${method} ${path}`).toBeDefined();
        if (operation.security!.length === 0) open.push(`${method} ${path}`);
      }
    }
    // Stripe's webhooks carry no Tender credential: Stripe-Signature (the connection's signing secret) is checked instead.
    // Sign-up and an account's move are guarded by ADMIN_TOKEN outside development, as their descriptions say.
    expect(open.sort()).toEqual(["get /health", "post /api/accounts", "post /api/accounts/{account_id}/move", "post /oauth/token", "post /processor-webhooks/stripe/{account_id}"]);
  });
});
