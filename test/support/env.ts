// The environment the tests read and hand to the Worker: one shard's view of the runtime's bindings
// (src/db/shards.ts), so `env.DB` is that shard's database. Each test file runs on one shard, chosen
// from its path, so the suites between them run with accounts on both; sign-up in a test places its
// account there (test/support/http.ts sends the development Tender-Shard header). Tests about
// shards themselves use `shardEnv` for the other one.
import { env as runtime } from "cloudflare:workers";
import { expect } from "vitest";
import { shardEnv } from "../../src/db/shards";
import type { Bindings } from "../../src/env";

/**
 * The shard this test file's accounts live on: a bit of the FNV-1a hash of its path, one that gives
 * every directory of test files some of each shard.
 */
export const TEST_SHARD = (() => {
  const path = expect.getState().testPath;
  if (!path) throw new Error("test/support/env.ts needs the test file's path to choose its shard");
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(path.replace(/^.*\/test\//, "test/"))) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return (hash >>> 26) & 1 ? 1 : 0;
})();

/** The other shard: where a test puts an account that must not see this file's. */
export const OTHER_SHARD = 1 - TEST_SHARD;

export type TestEnv = typeof runtime & Bindings & Record<string, any>;

export const env = shardEnv(runtime as never, TEST_SHARD) as TestEnv;

/** The environment of `shard`, for tests that look at another shard's database. */
export const envOf = (shard: number) => shardEnv(runtime as never, shard) as TestEnv;
