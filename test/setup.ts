import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";

await applyD1Migrations(env.DB, (env as unknown as { TEST_MIGRATIONS: Parameters<typeof applyD1Migrations>[1] }).TEST_MIGRATIONS);

// Property and fuzz tests run with a fixed seed, so a run is reproducible and CI is stable.
// To explore other inputs, change the seed (a failure prints the seed and path to replay it).
fc.configureGlobal({ seed: 20261121 });
