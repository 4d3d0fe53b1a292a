// @tender/client's TypeScript, its examples included, compiles against the types generated from
// /openapi.json (src/schema.d.ts): the README's receiver switches over every event type, so a
// type added to the document's webhooks section fails here until the receiver handles it.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

describe("@tender/client", () => {
  it("typechecks (tsc -p clients/typescript), examples included", () => {
    const tsc = spawnSync(join(ROOT, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", join(ROOT, "clients", "typescript")], { cwd: ROOT, encoding: "utf8" });
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.status).toBe(0);
  });
});
