import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

// Two runs of the same Worker: the development configuration (most tests), and production
// (ENVIRONMENT=production from wrangler.toml) for what only holds there: HTTPS enforcement,
// HSTS, guarded sign-up, and refusing private webhook targets.
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  const worker = (environment: "development" | "production") =>
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        // An empty database for tests of a migration against rows written before it.
        d1Databases: { MIGRATION_SCRATCH: `migration-scratch-${environment}` },
        bindings: {
          TEST_MIGRATIONS: migrations,
          ENVIRONMENT: environment,
          ...(environment === "production" ? { ADMIN_TOKEN: "test-admin-token", CARD_FINGERPRINT_SECRET: "test-fingerprint-secret" } : {}),
        },
      },
    });
  return {
    test: {
      projects: [
        {
          plugins: [worker("development")],
          test: { name: "development", setupFiles: ["./test/setup.ts"], include: ["test/**/*.test.ts"], exclude: ["test/production/**", "test/browser/**", "test/node/**"] },
        },
        {
          plugins: [worker("production")],
          test: { name: "production", setupFiles: ["./test/setup.ts"], include: ["test/production/**/*.test.ts"] },
        },
        // The dashboard in headless Chromium (playwright-core) against `wrangler dev`: in Node, not
        // in workerd. Skipped, with a message, when no Chromium is found (test/browser/harness.ts).
        {
          test: { name: "browser", environment: "node", include: ["test/browser/**/*.test.ts"], testTimeout: 180_000, hookTimeout: 240_000 },
        },
        // Tools that run in Node, on what the Worker serves or ships: @redocly/cli's lint of the
        // served /openapi.json (against `wrangler dev`) and tsc on @tender/client.
        {
          test: { name: "node", environment: "node", include: ["test/node/**/*.test.ts"], testTimeout: 120_000, hookTimeout: 240_000 },
        },
      ],
    },
  };
});
