import { applyD1Migrations } from "cloudflare:test";
import { env as runtime } from "cloudflare:workers";
import fc from "fast-check";
import { shardEnv, shardNumbers } from "../src/db/shards";

// Every shard gets the migrations, as `npm run dev` and the deploy apply them (src/db/shards.ts).
const migrations = (runtime as unknown as { TEST_MIGRATIONS: Parameters<typeof applyD1Migrations>[1] }).TEST_MIGRATIONS;
for (const shard of shardNumbers(runtime as never)) await applyD1Migrations(shardEnv(runtime as never, shard).DB, migrations);

// Property and fuzz tests run with a fixed seed, so a run is reproducible and CI is stable.
// To explore other inputs, change the seed (a failure prints the seed and path to replay it).
fc.configureGlobal({ seed: 20261121 });
