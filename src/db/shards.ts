// Accounts over many D1 databases (DESIGN.md "Accounts over many databases"). wrangler.toml binds
// DB_0 … DB_{n-1}; every row of an account lives on one of them, its shard. Code works on a
// shard's view of the environment (`shardEnv`): the runtime's bindings with `DB` set to that
// shard's database, `SHARD` to its number, and both queues tagging every message they send with
// it, so the consumer of a message opens the same shard again. A request gets its view once its
// credential names the shard (src/middleware/auth.ts); the cron, the queue consumers and the retry
// scheduler make one for each shard or message.
import type { Bindings, RuntimeBindings } from "../env";
import { BASE62, randomUnit } from "../lib/crypto";
import { ApiError } from "../lib/errors";

/** Every binding the runtime gives, by name (DB_0, DB_1, …). */
type Named = Record<string, unknown>;

const RUNTIME: unique symbol = Symbol("tender.runtimeBindings");

const counts = new WeakMap<object, number>();

/** How many shards the environment binds: DB_0 … DB_{n-1}, without a gap. */
export function shardCount(env: RuntimeBindings | Bindings): number {
  const runtime = runtimeOf(env);
  let count = counts.get(runtime);
  if (count === undefined) {
    count = 0;
    while ((runtime as unknown as Named)[`DB_${count}`] !== undefined) count++;
    if (count === 0) throw new Error("No D1 shard is bound: wrangler.toml must declare DB_0 (and DB_1, …).");
    counts.set(runtime, count);
  }
  return count;
}

export const shardNumbers = (env: RuntimeBindings | Bindings): number[] => Array.from({ length: shardCount(env) }, (_, n) => n);

/** Whether `n` names a shard this environment binds. */
export const isShard = (env: RuntimeBindings | Bindings, n: number): boolean => Number.isInteger(n) && n >= 0 && n < shardCount(env);

function runtimeOf(env: RuntimeBindings | Bindings): RuntimeBindings {
  return ((env as { [RUNTIME]?: RuntimeBindings })[RUNTIME] ?? env) as RuntimeBindings;
}

/** Messages on a shard's queues say which shard they are about. */
export interface ShardTagged {
  shard?: number;
}

/**
 * The environment to handle a message in: its shard's. A message without one (sent before shards
 * existed) is about the shard of the environment it is handled in: DB_0's, for the runtime's.
 */
export function messageEnv(env: RuntimeBindings | Bindings, body: unknown): Bindings {
  const shard = (body as ShardTagged | null)?.shard;
  return shardEnv(env, typeof shard === "number" ? shard : ((env as Partial<Bindings>).SHARD ?? 0));
}

/** A queue whose every message carries `shard`. */
function taggedQueue(queue: Queue, shard: number): Queue {
  const tag = (body: unknown) => ({ ...(body as object), shard });
  return {
    send: (body: unknown, options?: QueueSendOptions) => queue.send(tag(body), options),
    sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) =>
      queue.sendBatch(Array.from(messages, (message) => ({ ...message, body: tag(message.body) })), options),
    metrics: () => queue.metrics(),
  } as Queue;
}

const views = new WeakMap<object, Bindings[]>();

/**
 * The environment of one shard: `DB` is its database, `SHARD` its number, and the queues tag what
 * they send. Made once per runtime environment and shard. An environment already of that shard is
 * returned as it is; another shard's view is seen through to the runtime's (an in-process dashboard
 * request carries its principal on a copy, kept here).
 */
export function shardEnv(env: RuntimeBindings | Bindings, shard: number): Bindings {
  if ((env as Partial<Bindings>).SHARD === shard) return env as Bindings;
  if (!isShard(env, shard)) throw new Error(`No shard ${shard}: this environment binds ${shardCount(env)}.`);
  const runtime = runtimeOf(env);
  const extra = env === runtime ? undefined : Object.getOwnPropertySymbols(env).filter((s) => s !== RUNTIME);
  if (extra && extra.length > 0) return makeView(runtime, shard, Object.fromEntries(extra.map((s) => [s, (env as never)[s]])));
  let byShard = views.get(runtime);
  if (!byShard) views.set(runtime, (byShard = []));
  return (byShard[shard] ??= makeView(runtime, shard));
}

function makeView(runtime: RuntimeBindings, shard: number, extra: object = {}): Bindings {
  const named = runtime as unknown as Named;
  return {
    ...runtime,
    ...extra,
    [RUNTIME]: runtime,
    DB: named[`DB_${shard}`] as D1Database,
    SHARD: shard,
    DELIVERY_QUEUE: taggedQueue(runtime.DELIVERY_QUEUE, shard),
    JOB_QUEUE: taggedQueue(runtime.JOB_QUEUE, shard),
  } as Bindings;
}

/**
 * What `find` finds on any shard, asked of every shard side by side: for a hosted page, whose URL
 * names no shard (it must outlive an account's move). `find` looks only where the object's account
 * lives (src/db/scope.ts `livesHere`), so at most one shard answers; null when none does.
 */
export async function findOnAnyShard<T>(env: RuntimeBindings | Bindings, find: (shard: Bindings) => Promise<T | null>): Promise<T | null> {
  const found = await Promise.all(shardNumbers(env).map((n) => find(shardEnv(env, n))));
  return found.find((f) => f !== null) ?? null;
}

/** Runs `work` on every shard side by side; every shard runs even when another fails. */
export async function onEveryShard(env: RuntimeBindings | Bindings, work: (shard: Bindings) => Promise<void>): Promise<void> {
  const results = await Promise.allSettled(shardNumbers(env).map((n) => work(shardEnv(env, n))));
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed.length === 1) throw failed[0].reason;
  if (failed.length > 1) throw new AggregateError(failed.map((f) => f.reason), `${failed.length} shards failed`);
}

/**
 * Where sign-up places a new account: uniformly at random among the shards SIGNUP_SHARDS names
 * ("1,2"; empty or absent: every shard), so a full shard is closed by leaving it out. `asked` is a
 * development request's Tender-Shard header, which chooses any bound shard.
 */
export function signupShard(env: RuntimeBindings | Bindings, asked?: string): number {
  if (asked !== undefined) {
    const shard = /^\d{1,2}$/.test(asked.trim()) ? Number(asked.trim()) : -1;
    if (!isShard(env, shard)) {
      throw new ApiError(400, "invalid_request_error", "shard_invalid", `Tender-Shard must name a shard this Tender binds: 0 to ${shardCount(env) - 1}.`);
    }
    return shard;
  }
  const open = openShards(env);
  return open[Math.floor(randomUnit() * open.length)];
}

const openShardLists = new WeakMap<object, number[]>();

function openShards(env: RuntimeBindings | Bindings): number[] {
  const runtime = runtimeOf(env);
  let open = openShardLists.get(runtime);
  if (!open) {
    const listed = (env.SIGNUP_SHARDS ?? "").split(",").map((s) => s.trim()).filter(Boolean);
    open = listed.length === 0 ? shardNumbers(env) : listed.map(Number);
    const unbound = listed.filter((s, i) => !isShard(env, open![i]));
    if (unbound.length > 0) throw new Error(`SIGNUP_SHARDS names shards that are not bound: ${unbound.join(", ")}.`);
    openShardLists.set(runtime, open);
  }
  return open;
}

// ---------------------------------------------------------------------------------------------
// Credentials name their shard: the first of a key's (or access token's, or dashboard session
// token's) random characters is the shard's number in base 62. So a request opens its database
// with no lookup. A credential made before shards existed has a random first character: one not
// found on the shard it seems to name is looked for on DB_0, where every account then lived.

export const MAX_SHARDS = BASE62.length;

export const shardChar = (shard: number): string => {
  if (!Number.isInteger(shard) || shard < 0 || shard >= MAX_SHARDS) throw new RangeError(`A shard is 0 to ${MAX_SHARDS - 1}, not ${shard}.`);
  return BASE62[shard];
};

/** The shard the character names (or -1). */
export const shardOfChar = (char: string): number => BASE62.indexOf(char);

/**
 * Where to look for what a credential's character names, in order: that shard if it is bound, then
 * DB_0, where everything made before shards existed lives (such a credential names a random shard).
 */
export const shardsNamedBy = (env: RuntimeBindings | Bindings, char: string): number[] => {
  const named = shardOfChar(char);
  return [...(isShard(env, named) ? [named] : []), ...(named !== 0 ? [0] : [])];
};
