// Moving an account to another shard (DESIGN.md "Accounts over many databases"; README "Shards").
//
// 1. Pause: the account's keys are paused on its shard (api_keys.paused_at). Every query and write
//    batch checks that its key is live (src/db/scope.ts), so from that commit on no request reads or
//    writes the account there: each answers 503 account_moving with Retry-After.
// 2. Copy: every row of the account, table by table, goes to the target shard, which first loses
//    any rows of the account a failed earlier move left there. The target's copy of the account row
//    points back at the source (moved_to), so the target's cron leaves the copy alone meanwhile, and
//    a credential naming the target finds the account where it still lives.
// 3. Prove: each table's rows of the account, on both shards, are counted and hashed (SHA-256 of
//    the rows in primary-key order). A difference (background work on the source wrote meanwhile:
//    a delivery attempt, a renewal) copies that table again; three rounds at most.
// 4. Switch: one batch on the source, guarded by each table's count as proven, points the account
//    at the target and deletes its rows there, except the account row and its keys and tokens, which
//    stay paused as pointers. Then one batch on the target makes the copy the account (moved_to
//    NULL) and unpauses its keys. A credential issued before the move names the source; the source
//    sends it on (src/auth/credentials.ts), so it keeps working.
//
// Background work on the source between the last proof and the switch (a renewal claimed in that
// window) is not lost money: every charge, payout and refund is sent with a reference derived from
// what it settles, so the target's cron, redoing it, gets the processor's first answer back.
// A move that stops half-way leaves the account paused; running the command again finishes it.
import { sql } from "drizzle-orm";
import { type Db, createDb } from "../db/client";
import { BATCH_GUARD_SQL, rawStatement, runBatch } from "../db/batch";
import type { Bindings, RuntimeBindings } from "../env";
import { isShard, shardEnv, shardNumbers } from "../db/shards";
import { sha256Hex } from "../lib/crypto";
import { ApiError, invalidRequest, notFound } from "../lib/errors";
import { forgetAccount } from "../auth/credentials";

/**
 * Every table holding an account's rows, parents before children (the order rows are inserted in;
 * deletes go in reverse). A table added to the schema must be added here: test/shards/move.test.ts
 * fails until it is.
 */
export const ACCOUNT_TABLES = [
  "accounts",
  "api_keys",
  "access_tokens",
  "dashboard_sessions",
  "processor_connections",
  "processor_events",
  "idempotency_keys",
  "request_ids",
  "test_clocks",
  "users",
  "events",
  "webhook_endpoints",
  "webhook_deliveries",
  "delivery_attempts",
  "payouts",
  "payments",
  "refunds",
  "plans",
  "coupons",
  "subscriptions",
  "subscription_periods",
  "coupon_redemptions",
  "usage_records",
  "invoices",
  "invoice_lines",
  "invoice_items",
  "proration_charges",
] as const;

/** What stays on the source after a move: the account row and what a credential is looked up by. */
const POINTERS = new Set(["accounts", "api_keys", "access_tokens"]);

/** Tables shared by every account of a shard, never copied. */
export const SHARD_TABLES = ["batch_guards", "job_runs", "d1_migrations", "_cf_KV", "_cf_METADATA", "sqlite_sequence"];

const PAGE = 500;
const STATEMENTS_PER_BATCH = 50;
/** D1 binds at most 100 values per statement. */
const MAX_BOUND = 100;
const ROUNDS = 3;

export interface TableProof {
  table: string;
  rows: number;
  sha256: string;
}

export interface MoveResult {
  account_id: string;
  from_shard: number;
  to_shard: number;
  /** Each table's rows of the account and their hash, equal on both shards when the switch was made. */
  tables: TableProof[];
  /** Copies made: 1, or more when background work wrote on the source meanwhile. */
  rounds: number;
  /** The account was already on the target: the command finished a move that had stopped after its switch. */
  finished_only?: boolean;
}

interface Shape {
  columns: string[];
  key: string[];
}

const shapes = new Map<string, Shape>();

/** The table's stored columns (generated ones are left out: they cannot be inserted) and its primary key. */
async function shapeOf(db: Db, table: string): Promise<Shape> {
  let shape = shapes.get(table);
  if (!shape) {
    const { results } = await db.$client
      .prepare("SELECT name, hidden, pk FROM pragma_table_xinfo(?) ORDER BY cid")
      .bind(table)
      .all<{ name: string; hidden: number; pk: number }>();
    const stored = results.filter((c) => c.hidden === 0);
    const key = stored.filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk).map((c) => c.name);
    shape = { columns: stored.map((c) => c.name), key: key.length > 0 ? key : ["rowid"] };
    shapes.set(table, shape);
  }
  return shape;
}

const ownerColumn = (table: string) => (table === "accounts" ? "id" : "account_id");
const quoted = (name: string) => `"${name}"`;

/** The account's rows of `table`, in primary-key order, as arrays of column values. */
async function rowsOf(db: Db, table: string, accountId: string): Promise<unknown[][]> {
  const { columns, key } = await shapeOf(db, table);
  const rows: unknown[][] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await db.$client
      .prepare(`SELECT ${columns.map(quoted).join(", ")} FROM ${quoted(table)} WHERE ${ownerColumn(table)} = ? ORDER BY ${key.map(quoted).join(", ")} LIMIT ${PAGE} OFFSET ${offset}`)
      .bind(accountId)
      .raw();
    rows.push(...page);
    if (page.length < PAGE) return rows;
  }
}

async function proofOf(table: string, rows: unknown[][]): Promise<TableProof> {
  return { table, rows: rows.length, sha256: await sha256Hex(rows.map((r) => JSON.stringify(r)).join("\n")) };
}

/** Where the account's row is on each shard: absent, home (moved_to NULL), or pointing elsewhere. */
async function whereIs(env: RuntimeBindings | Bindings, accountId: string) {
  return Promise.all(
    shardNumbers(env).map(async (shard) => {
      const row = await createDb(shardEnv(env, shard).DB).$client.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(accountId).first<{ moved_to: number | null }>();
      return { shard, present: row !== null, movedTo: row?.moved_to ?? null };
    }),
  );
}

const dbOf = (env: RuntimeBindings | Bindings, shard: number) => createDb(shardEnv(env, shard).DB);

/** The copy becomes the account on `shard`: it points nowhere and its keys are unpaused. */
async function finishOn(db: Db, accountId: string) {
  await runBatch(db, [
    rawStatement(db, sql`UPDATE accounts SET moved_to = NULL WHERE id = ${accountId}`),
    rawStatement(db, sql`UPDATE api_keys SET paused_at = NULL WHERE account_id = ${accountId}`),
  ]);
}

/**
 * Moves the account to shard `to`, or finishes a move that stopped. See the top of this file. This
 * isolate forgets the account's cached credentials; another isolate's cached one fails its first
 * query's key check on the old shard, answers 503 with Retry-After once, and is looked up again.
 */
export async function moveAccount(env: RuntimeBindings | Bindings, accountId: string, to: number, now: string): Promise<MoveResult> {
  try {
    return await move(env, accountId, to, now);
  } finally {
    forgetAccount(accountId);
  }
}

async function move(env: RuntimeBindings | Bindings, accountId: string, to: number, now: string): Promise<MoveResult> {
  if (!isShard(env, to)) throw invalidRequest("shard_invalid", `to_shard must name a shard this Tender binds: 0 to ${shardNumbers(env).length - 1}.`, "to_shard");
  const places = await whereIs(env, accountId);
  const homes = places.filter((p) => p.present && p.movedTo === null);
  const target = places[to];
  if (homes.length === 0) {
    // Stopped between the two halves of the switch: the source points at the target and the target back.
    const source = places.find((p) => p.present && p.movedTo === to);
    if (source && target.present && target.movedTo === source.shard) {
      await finishOn(dbOf(env, to), accountId);
      return { account_id: accountId, from_shard: source.shard, to_shard: to, tables: [], rounds: 0, finished_only: true };
    }
    throw notFound("account", accountId, "account_id");
  }
  const from = homes[0].shard;
  if (from === to) {
    // Already there (its keys are unpaused if a move stopped after its switch).
    await finishOn(dbOf(env, to), accountId);
    return { account_id: accountId, from_shard: from, to_shard: to, tables: [], rounds: 0, finished_only: true };
  }
  const source = dbOf(env, from);
  const dest = dbOf(env, to);

  await source.$client.prepare("UPDATE api_keys SET paused_at = ? WHERE account_id = ? AND paused_at IS NULL").bind(now, accountId).run();
  try {
    await clearOn(dest, accountId);
    let pending: string[] = [...ACCOUNT_TABLES];
    let proofs = new Map<string, TableProof>();
    let rounds = 0;
    while (pending.length > 0) {
      if (++rounds > ROUNDS) throw new ApiError(409, "invalid_request_error", "move_unsettled", `The account's rows kept changing on shard ${from} during ${ROUNDS} copies (${pending.join(", ")}). Its keys are paused; run the move again.`);
      for (const table of [...pending].reverse()) await dest.$client.prepare(`DELETE FROM ${quoted(table)} WHERE ${ownerColumn(table)} = ?`).bind(accountId).run();
      for (const table of pending) {
        const rows = await rowsOf(source, table, accountId);
        await insertRows(dest, table, table === "accounts" ? pointingBack(rows, await shapeOf(source, table), from) : rows);
      }
      const checked = await Promise.all(ACCOUNT_TABLES.map(async (table) => [await proofOf(table, await rowsOf(source, table, accountId)), await proofOf(table, await comparable(dest, table, accountId))] as const));
      proofs = new Map(checked.map(([s]) => [s.table, s]));
      pending = checked.filter(([s, d]) => s.rows !== d.rows || s.sha256 !== d.sha256).map(([s]) => s.table);
    }
    await switchSource(source, accountId, to, [...proofs.values()]);
    await finishOn(dest, accountId);
    return { account_id: accountId, from_shard: from, to_shard: to, tables: [...proofs.values()], rounds };
  } catch (error) {
    // Nothing switched: the account stays where it was. Its copy is dropped and its keys unpaused.
    const switched = (await whereIs(env, accountId))[from].movedTo !== null;
    if (!switched) {
      await clearOn(dest, accountId).catch(() => undefined);
      await source.$client.prepare("UPDATE api_keys SET paused_at = NULL WHERE account_id = ?").bind(accountId).run().catch(() => undefined);
    }
    throw error;
  }
}

/** The account's rows on the target as the source holds them: the copy's row points back, so undo that for the proof. */
async function comparable(db: Db, table: string, accountId: string): Promise<unknown[][]> {
  const rows = await rowsOf(db, table, accountId);
  if (table !== "accounts") return rows;
  const at = (await shapeOf(db, table)).columns.indexOf("moved_to");
  return rows.map((r) => r.map((v, i) => (i === at ? null : v)));
}

function pointingBack(rows: unknown[][], shape: Shape, from: number): unknown[][] {
  const at = shape.columns.indexOf("moved_to");
  return rows.map((r) => r.map((v, i) => (i === at ? from : v)));
}

async function clearOn(db: Db, accountId: string) {
  await runBatch(db, [...ACCOUNT_TABLES].reverse().map((table) => rawStatement(db, sql.raw(`DELETE FROM ${quoted(table)} WHERE ${ownerColumn(table)} = '${accountId.replaceAll("'", "''")}'`))));
}

async function insertRows(db: Db, table: string, rows: unknown[][]) {
  if (rows.length === 0) return;
  const { columns } = await shapeOf(db, table);
  const perStatement = Math.max(1, Math.floor(MAX_BOUND / columns.length));
  const placeholders = `(${columns.map(() => "?").join(", ")})`;
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = rows.slice(i, i + perStatement);
    statements.push(
      db.$client.prepare(`INSERT INTO ${quoted(table)} (${columns.map(quoted).join(", ")}) VALUES ${chunk.map(() => placeholders).join(", ")}`).bind(...chunk.flat()),
    );
  }
  for (let i = 0; i < statements.length; i += STATEMENTS_PER_BATCH) await db.$client.batch(statements.slice(i, i + STATEMENTS_PER_BATCH));
}

export const MOVE_CHANGED = "move_source_changed";

/**
 * On the source, in one batch: each table still holds the rows counted in the proof, the account
 * points at the target, and its rows go, but for the account row and its keys and tokens.
 */
async function switchSource(db: Db, accountId: string, to: number, proofs: TableProof[]) {
  const owner = (table: string) => `${ownerColumn(table)} = '${accountId.replaceAll("'", "''")}'`;
  await runBatch(
    db,
    [
      ...proofs.map((p) => rawStatement(db, BATCH_GUARD_SQL(MOVE_CHANGED, sql.raw(`(SELECT count(*) FROM ${quoted(p.table)} WHERE ${owner(p.table)}) = ${p.rows}`)))),
      rawStatement(db, sql`UPDATE accounts SET moved_to = ${to} WHERE id = ${accountId} AND moved_to IS NULL`),
      ...[...ACCOUNT_TABLES].reverse().filter((t) => !POINTERS.has(t)).map((table) => rawStatement(db, sql.raw(`DELETE FROM ${quoted(table)} WHERE ${owner(table)}`))),
    ],
    {
      [MOVE_CHANGED]: () =>
        new ApiError(409, "invalid_request_error", "move_unsettled", "The account's rows changed on its shard just before the switch. Nothing was switched and its keys are unpaused; run the move again."),
    },
  );
}
