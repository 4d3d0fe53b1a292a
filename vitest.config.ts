import { execFileSync } from "node:child_process";
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { readFileSync } from "node:fs";
import { defineConfig, type Plugin } from "vitest/config";

// The workerd projects test @tender/client from its TypeScript source, not from the dist/ build
// that Node and outside users get (the TypeScript configs say the same with the "tender-source"
// export condition).
const clientSource = (file: string) => path.join(import.meta.dirname, "clients", "typescript", "src", file);
const CLIENT_SOURCE = {
  alias: [
    { find: /^@tender\/client$/, replacement: clientSource("index.ts") },
    { find: /^@tender\/client\/cli$/, replacement: clientSource("cli.ts") },
  ],
};

// The stripe package ships its ESM build with `//# sourceMappingURL` comments whose maps name
// TypeScript sources it does not ship: Vite warned once per file (about 200 lines a run). Its
// modules are loaded without that comment, so no map is looked for.
const stripeWithoutSourceMaps: Plugin = {
  name: "stripe-without-source-maps",
  enforce: "pre",
  load(id) {
    if (!/[\\/]node_modules[\\/]stripe[\\/].*\.js$/.test(id)) return null;
    return { code: readFileSync(id.split("?")[0], "utf8").replace(/^\/\/# sourceMappingURL=.*$/m, ""), map: null };
  },
};

// A workerd test makes many requests through the real local D1, queues and Durable Objects; on a
// 2-core machine running two test files at once, the longest billing scenarios take 3-4 s. The
// limit is there to catch a hang, not to time anything (benchmarks live in bench/).
const WORKERD_TEST_TIMEOUT = 15_000;

// Two runs of the same Worker: the development configuration (most tests), and production
// (ENVIRONMENT=production from wrangler.toml) for what only holds there: HTTPS enforcement,
// HSTS, guarded sign-up, and refusing private webhook targets.
export default defineConfig(async () => {
  // The Worker bundles the /docs script packed by this (wrangler.toml [[rules]]): a run of vitest
  // alone, before any `npm test` or `npm run dev`, packs it too.
  execFileSync(process.execPath, [path.join(import.meta.dirname, "scripts", "copy-assets.mjs")], { stdio: "inherit" });
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
          // The origin the tests call (test/support/http.ts BASE): hosted invoice URLs start with it.
          PUBLIC_URL: "http://127.0.0.1:8787",
          ...(environment === "production" ? { ADMIN_TOKEN: "test-admin-token", CARD_FINGERPRINT_SECRET: "test-fingerprint-secret" } : {}),
        },
      },
    });
  return {
    test: {
      projects: [
        {
          plugins: [worker("development"), stripeWithoutSourceMaps],
          resolve: CLIENT_SOURCE,
          test: { name: "development", testTimeout: WORKERD_TEST_TIMEOUT, setupFiles: ["./test/setup.ts"], include: ["test/**/*.test.ts"], exclude: ["test/production/**", "test/browser/**", "test/node/**"] },
        },
        {
          plugins: [worker("production"), stripeWithoutSourceMaps],
          resolve: CLIENT_SOURCE,
          test: { name: "production", testTimeout: WORKERD_TEST_TIMEOUT, setupFiles: ["./test/setup.ts"], include: ["test/production/**/*.test.ts"] },
        },
        // The dashboard in headless Chromium (playwright-core) against `wrangler dev`: in Node, not
        // in workerd. Skipped, with a message, when no Chromium is found (test/browser/harness.ts).
        {
          test: { name: "browser", environment: "node", include: ["test/browser/**/*.test.ts"], testTimeout: 180_000, hookTimeout: 240_000 },
        },
        // What runs in Node, on what the Worker serves or ships: `npm run dev` (migrations, wrangler
        // dev, the cron every minute), the README's shell walk-through against it, @tender/client
        // under the system's own Node, @redocly/cli's lint of the served /openapi.json and tsc on
        // the client (test/node/).
        {
          test: { name: "node", environment: "node", include: ["test/node/**/*.test.ts"], globalSetup: ["./test/node/global-setup.ts"], testTimeout: 180_000, hookTimeout: 240_000 },
        },
      ],
    },
  };
});
