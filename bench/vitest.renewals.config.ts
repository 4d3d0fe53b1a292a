// `npx vitest run --config bench/vitest.renewals.config.ts`: the renewal benchmark, inside workerd
// against local D1, like the tests; never part of `npm test`.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

const root = path.join(import.meta.dirname, "..");

export default defineConfig(async () => {
  // The Worker bundles the /docs script packed by this (wrangler.toml [[rules]]): a run of vitest
  // alone, before any `npm test` or `npm run dev`, packs it too.
  execFileSync(process.execPath, [path.join(root, "scripts", "copy-assets.mjs")], { stdio: "inherit" });
  const migrations = await readD1Migrations(path.join(root, "migrations"));
  return {
    root,
    plugins: [
      cloudflareTest({
        wrangler: { configPath: path.join(root, "wrangler.toml") },
        miniflare: { bindings: { TEST_MIGRATIONS: migrations, ENVIRONMENT: "development" } },
      }),
    ],
    test: {
      setupFiles: [path.join(root, "test/setup.ts")],
      include: ["bench/renewals.bench.ts"],
      testTimeout: 600_000,
    },
  };
});
