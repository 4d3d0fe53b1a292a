// The x-codeSamples of /openapi.json (src/routes/code-samples.ts), as the committed snapshot the
// client is generated from has them: every operation that takes a key has one, and each compiles
// against @tender/client's types, so a sample that names a wrong path, parameter or body field
// (or leaves out a required one) fails here.
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const CLIENT = join(ROOT, "clients", "typescript");
const document = JSON.parse(readFileSync(join(CLIENT, "openapi.json"), "utf8"));

const operations = Object.entries(document.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
  Object.entries(item)
    .filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method))
    .map(([method, operation]) => ({ path, method, operation })),
);

describe("x-codeSamples", () => {
  it("every operation that takes a key has an @tender/client sample calling it; public ones have none", () => {
    for (const { path, method, operation } of operations) {
      const samples = operation["x-codeSamples"];
      if (operation.security?.length === 0) {
        expect(samples, `${method} ${path}`).toBeUndefined();
        continue;
      }
      expect(samples, `${method} ${path}`).toHaveLength(1);
      expect(samples[0]).toMatchObject({ lang: "TypeScript", label: "@tender/client" });
      expect(samples[0].source).toContain(`await tender.${method.toUpperCase()}(${JSON.stringify(path)}`);
    }
  });

  it("each sample compiles against the client's types", () => {
    const dir = join(CLIENT, `.code-samples-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    try {
      const files = operations
        .filter(({ operation }) => operation["x-codeSamples"])
        .map(({ operation }, i) => {
          const file = `sample-${i}.ts`;
          writeFileSync(join(dir, file), `${operation["x-codeSamples"][0].source}\nexport {};\n`);
          return file;
        });
      expect(files.length).toBeGreaterThan(40);
      writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ extends: "../tsconfig.json", include: files }));
      const tsc = spawnSync(join(ROOT, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", dir], { cwd: ROOT, encoding: "utf8" });
      expect(tsc.stdout + tsc.stderr).toBe("");
      expect(tsc.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
