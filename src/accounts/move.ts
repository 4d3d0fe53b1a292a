// Moving an account to another shard (DESIGN.md "Accounts over many databases"; README "Shards").
//
// 1. Claim and pause, in one batch on the account's shard: the move takes the account's move claim
//    (accounts.move_token, until move_until: one move of an account at a time) and pauses its keys
//    (api_keys.paused_at). Every query and write batch checks that its key is live
//    (src/db/scope.ts), so from that commit on no new request reads or writes the account: each
//    answers 503 account_moving with Retry-After. Stripe's events for it answer 503 too, so Stripe
//    sends them again later.
// 2. Drain: the move waits `drainMs`, then until no request of the account has money at the
//    processor (src/processor/in-flight.ts: a request takes a claim, with its key check, before it
//    charges, and its commit, which is written whatever became of the key, ends it), however long
//    that takes: such a record lands on the source before the copy is taken. Other writes carry
//    their key check, so a paused key refuses them; the drain is only a courtesy to them.
// 3. Copy: every row of the account goes to the target shard, table by table and page by page (so
//    a large account is never held whole in memory): the target's rows of the account are deleted
//    first (a failed earlier move's), but for the pointers a credential is looked up by (an earlier
//    move away from it left them), which are made equal by deleting what the source has not and
//    upserting the rest, so a row a credential is looked up by is never missing there. The target's copy of the account row points back at the
//    source (moved_to), so the target's cron leaves the copy alone and a credential naming the
//    target finds the account where it still lives. The send leases of its payouts and refunds
//    (job_runs) go with them: a payout handed to the processor stays uncancelable.
// 4. Prove: each table's rows of the account, on both shards, are counted and hashed (SHA-256 of
//    each page of rows in primary-key order, then of those hashes). A difference (background work on the source wrote meanwhile:
//    a delivery attempt, a renewal) copies that table again; three rounds at most.
// 5. Switch: one batch on the source, guarded by the claim and by each table's count and latest
//    updated_at as proven, points the account at the target. Then one batch on the target makes
//    the copy the account (moved_to NULL) and unpauses its keys. Last, the source's rows of the
//    account are deleted page by page, except the account row and its keys and tokens, which stay
//    paused as pointers. A credential issued
//    before the move names the source; the source sends it on (src/auth/credentials.ts).
//
// Background work on the source between the last proof and the switch that the switch's guard does
// not see is not lost money: every charge, payout and refund is sent with a reference derived from
// what it settles, so the target's cron, redoing it, gets the processor's first answer back.
// A move that fails before its switch puts everything back (the account unpaused where it was, the
// target holding at most pointers back to it). One whose switch's outcome is unknown leaves the
// account paused: the same command finishes it. Moving an account to the shard it is on unpauses
// it (a move that died mid-copy is abandoned so, once its claim ran out).
import { type SQL, sql } from "drizzle-orm";
import { type Db, createDb } from "../db/client";
import { BATCH_GUARD_SQL, rawStatement, runBatch } from "../db/batch";
import type { Bindings, RuntimeBindings } from "../env";
import { isShard, shardEnv, shardNumbers } from "../db/shards";
import { randomToken, sha256Hex } from "../lib/crypto";
import { ApiError, invalidRequest, notFound } from "../lib/errors";
import { forgetAccount } from "../auth/credentials";
import { MONEY_CLAIM_LEASE_MS, claimsInFlight, noClaimsInFlight } from "../processor/in-flight";

/**
 * Every table holding an account's rows, parents before children (the order rows are upserted in;
 * deletes go in reverse). A table added to the schema must be added here: test/shards/move.test.ts
 * fails until it is.
 */
export const ACCOUNT_TABLES = [
  "accounts",
  "api_keys",
  "access_tokens",
  "dashboard_sessions",
  "processor_connections",
  "retired_processor_connections",
  "processor_events",
  "idempotency_keys",
  "request_ids",
  "test_clocks",
  "users",
  "events",
  "webhook_endpoints",
  "webhook_deliveries",
  "delivery_attempts",
  "webhook_recoveries",
  "payouts",
  "payments",
  "payment_methods",
  "checkout_sessions",
  "portal_sessions",
  "refunds",
  "plans",
  "coupons",
  "tax_rates",
  "subscriptions",
  "subscription_periods",
  "coupon_redemptions",
  "usage_records",
  "invoices",
  "invoice_lines",
  "credit_notes",
  "customer_balance_transactions",
  "invoice_items",
  "proration_charges",
  "money_claims",
] as const;

/** What stays on the source after a move: the account row and what a credential is looked up by. */
const POINTERS = new Set<string>(["accounts", "api_keys", "access_tokens"]);

/** Tables shared by every account of a shard, never copied whole (job_runs: only the account's send leases). */
export const SHARD_TABLES = ["batch_guards", "job_runs", "d1_migrations", "_cf_KV", "_cf_METADATA", "sqlite_sequence"];

/** A courtesy wait for requests under way when the keys are paused; money at the processor is waited for by its claims, however long (waitForMoneyInFlight). */
export const DEFAULT_DRAIN_MS = 65_000;
/** How long a move's claim lasts past its drain: a move that died is taken over after it. */
const CLAIM_MS = 5 * 60_000;
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
  /** Nothing was copied: a move that had stopped after its switch was finished, or the account was unpaused where it is. */
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
    if (key.length === 0) throw new Error(`${table} has no primary key: a move cannot copy it`);
    shape = { columns: stored.map((c) => c.name), key };
    shapes.set(table, shape);
  }
  return shape;
}

const ownerColumn = (table: string) => (table === "accounts" ? "id" : "account_id");
const quoted = (name: string) => `"${name}"`;
const owner = (table: string, accountId: string) => sql.raw(`${quoted(table)}.${ownerColumn(table)} = '${accountId.replaceAll("'", "''")}'`);

/**
 * The account's rows of `table` in primary-key order, as arrays of column values, a page at a time
 * (keyset paging: each page starts after the last key of the one before), so a large account is
 * never held whole in memory.
 */
async function forEachPage(db: Db, table: string, accountId: string, visit: (rows: unknown[][]) => Promise<void> | void): Promise<void> {
  const { columns, key } = await shapeOf(db, table);
  const keys = key.map(quoted).join(", ");
  const at = key.map((k) => columns.indexOf(k));
  const select = `SELECT ${columns.map(quoted).join(", ")} FROM ${quoted(table)} WHERE ${ownerColumn(table)} = ?`;
  let after: unknown[] | null = null;
  for (;;) {
    const page: unknown[][] = await db.$client
      .prepare(`${select}${after ? ` AND (${keys}) > (${key.map(() => "?").join(", ")})` : ""} ORDER BY ${keys} LIMIT ${PAGE}`)
      .bind(accountId, ...(after ?? []))
      .raw();
    if (page.length > 0) await visit(page);
    if (page.length < PAGE) return;
    after = at.map((i) => page[page.length - 1][i]);
  }
}

/** All of the account's rows of `table`: for the small tables a credential is looked up by. */
async function rowsOf(db: Db, table: string, accountId: string): Promise<unknown[][]> {
  const rows: unknown[][] = [];
  await forEachPage(db, table, accountId, (page) => void rows.push(...page));
  return rows;
}

interface Proven {
  proof: TableProof;
  /** What the switch re-checks on the source: the latest updated_at (when the table has one). */
  latest: unknown;
  hasUpdatedAt: boolean;
}

/**
 * The proof of the account's rows of `table` on `db`, page by page: the SHA-256 of each page's rows
 * (JSON, one line each), then of those hashes in order. `map` adjusts a row before it is hashed.
 */
async function prove(db: Db, table: string, accountId: string, map: (row: unknown[]) => unknown[] = (row) => row): Promise<Proven> {
  const shape = await shapeOf(db, table);
  const at = shape.columns.indexOf("updated_at");
  let latest: unknown = null;
  let rows = 0;
  const pages: string[] = [];
  await forEachPage(db, table, accountId, async (page) => {
    rows += page.length;
    if (at >= 0) for (const row of page) if (row[at] !== null && (latest === null || (row[at] as number | string) > (latest as number | string))) latest = row[at];
    pages.push(await sha256Hex(page.map((row) => JSON.stringify(map(row))).join("\n")));
  });
  return { proof: { table, rows, sha256: await sha256Hex(pages.join("\n")) }, latest, hasUpdatedAt: at >= 0 };
}

export interface Place {
  shard: number;
  present: boolean;
  movedTo: number | null;
  /** A move's claim on this row lasts until then (epoch ms), if any. */
  moveUntil: number | null;
}

/**
 * Where the account's row is on each shard: absent, home (moved_to NULL), or pointing elsewhere,
 * and whether a move claims it. Asked of every shard at once (Stripe's events find their account so too).
 */
export async function whereIs(env: RuntimeBindings | Bindings, accountId: string): Promise<Place[]> {
  return Promise.all(
    shardNumbers(env).map(async (shard) => {
      const row = await dbOf(env, shard).$client.prepare("SELECT moved_to, move_until FROM accounts WHERE id = ?").bind(accountId).first<{ moved_to: number | null; move_until: number | null }>();
      return { shard, present: row !== null, movedTo: row?.moved_to ?? null, moveUntil: row?.move_until ?? null };
    }),
  );
}

const dbOf = (env: RuntimeBindings | Bindings, shard: number) => createDb(shardEnv(env, shard).DB);

export const MOVE_CLAIMED = "move_claimed";
export const MOVE_CHANGED = "move_source_changed";

const inProgress = () =>
  new ApiError(409, "invalid_request_error", "move_in_progress", "Another move of this account is in progress (or one stopped less than five minutes ago). Nothing was changed; run it again once that one has ended.");

/** SQL: this move holds the account's claim on this shard. */
const holds = (accountId: string, token: string) => sql`EXISTS (SELECT 1 FROM accounts WHERE id = ${accountId} AND move_token = ${token})`;

/** Takes the account's move claim on `db` (its row there as `where` says), or answers 409: one move at a time. */
async function claim(db: Db, accountId: string, token: string, now: number, where: SQL, extra: ReturnType<typeof rawStatement>[] = [], leaseMs = CLAIM_MS) {
  await runBatch(
    db,
    [
      rawStatement(db, sql`UPDATE accounts SET move_token = ${token}, move_until = ${now + leaseMs} WHERE id = ${accountId} AND ${where} AND (move_token IS NULL OR move_until <= ${now})`),
      rawStatement(db, BATCH_GUARD_SQL(MOVE_CLAIMED, holds(accountId, token))),
      ...extra,
    ],
    { [MOVE_CLAIMED]: inProgress },
  );
}

class ClaimLost extends Error {}

/** Extends the move's claim before each step of a long copy; throws ClaimLost when another move took it meanwhile. */
async function keepClaim(db: Db, accountId: string, token: string, now: number) {
  const { meta } = await db.$client.prepare("UPDATE accounts SET move_until = ? WHERE id = ? AND move_token = ?").bind(now + CLAIM_MS, accountId, token).run();
  if ((meta.changes ?? 0) === 0) throw new ClaimLost();
}

/** Ends the claim on `db` and makes the account live there: home (moved_to NULL) and its keys unpaused. */
async function finishOn(db: Db, accountId: string, token: string) {
  await runBatch(db, [
    rawStatement(db, BATCH_GUARD_SQL(MOVE_CLAIMED, holds(accountId, token))),
    rawStatement(db, sql`UPDATE accounts SET moved_to = NULL, move_token = NULL, move_until = NULL WHERE id = ${accountId}`),
    rawStatement(db, sql`UPDATE api_keys SET paused_at = NULL WHERE account_id = ${accountId}`),
  ], { [MOVE_CLAIMED]: inProgress });
}

export interface MoveOptions {
  /** How long to wait after pausing before copying (DEFAULT_DRAIN_MS). */
  drainMs?: number;
  now?: () => number;
}

/**
 * Moves the account to shard `to`, or finishes a move that stopped. See the top of this file. This
 * isolate forgets the account's cached credentials; another isolate's cached one fails its first
 * query's key check on the old shard, answers 503 with Retry-After once, and is looked up again.
 */
export async function moveAccount(env: RuntimeBindings | Bindings, accountId: string, to: number, options: MoveOptions = {}): Promise<MoveResult> {
  try {
    return await move(env, accountId, to, options);
  } finally {
    forgetAccount(accountId);
  }
}

async function move(env: RuntimeBindings | Bindings, accountId: string, to: number, options: MoveOptions): Promise<MoveResult> {
  const now = options.now ?? Date.now;
  if (!isShard(env, to)) throw invalidRequest("shard_invalid", `to_shard must name a shard this Tender binds: 0 to ${shardNumbers(env).length - 1}.`, "to_shard");
  const token = randomToken(24);
  const places = await whereIs(env, accountId);
  const homes = places.filter((p) => p.present && p.movedTo === null);
  const target = places[to];
  if (homes.length === 0) {
    // Stopped between the two halves of the switch: the source points at the target and the target back.
    const source = target.present && target.movedTo !== null ? places[target.movedTo] : undefined;
    if (!source?.present || source.movedTo !== to) {
      throw notFound("account", accountId, "account_id");
    }
    // The move that switched still holds its claim on the source until it has finished: wait for it.
    if (source.moveUntil !== null && source.moveUntil > now()) throw inProgress();
    const dest = dbOf(env, to);
    await claim(dest, accountId, token, now(), sql`moved_to = ${source.shard}`);
    await finishOn(dest, accountId, token);
    await deleteAllButPointers(dbOf(env, source.shard), accountId);
    return { account_id: accountId, from_shard: source.shard, to_shard: to, tables: [], rounds: 0, finished_only: true };
  }
  const from = homes[0].shard;
  const source = dbOf(env, from);
  if (from === to) {
    // Already there: unpause it (a move that stopped before its switch, once its claim ran out).
    await claim(source, accountId, token, now(), sql`moved_to IS NULL`);
    await finishOn(source, accountId, token);
    return { account_id: accountId, from_shard: from, to_shard: to, tables: [], rounds: 0, finished_only: true };
  }
  const dest = dbOf(env, to);
  const pausedAt = new Date(now()).toISOString();
  const drainMs = options.drainMs ?? DEFAULT_DRAIN_MS;
  shapes.clear(); // read again for each move: a migration may have added a column since
  await claim(
    source,
    accountId,
    token,
    now(),
    sql`moved_to IS NULL`,
    [rawStatement(source, sql`UPDATE api_keys SET paused_at = ${pausedAt} WHERE account_id = ${accountId} AND paused_at IS NULL`)],
    drainMs + CLAIM_MS,
  );
  let switchTried = false;
  let switched = false;
  try {
    if (drainMs > 0) await new Promise((resolve) => setTimeout(resolve, drainMs));
    await waitForMoneyInFlight(source, accountId, from, now, () => keepClaim(source, accountId, token, now()));
    let pending: string[] = [...ACCOUNT_TABLES];
    let proofs = new Map<string, Proven>();
    let sendLeases = 0;
    let rounds = 0;
    while (pending.length > 0) {
      if (++rounds > ROUNDS) throw new ApiError(409, "invalid_request_error", "move_unsettled", `The account's rows kept changing on shard ${from} during ${ROUNDS} copies (${pending.join(", ")}). Nothing was switched and its keys are unpaused; run the move again.`);
      const keep = () => keepClaim(source, accountId, token, now());
      await copyTables(source, dest, accountId, pending, from, keep);
      await keep();
      sendLeases = await copySendLeases(source, dest, accountId);
      const checked: (readonly [Proven, TableProof])[] = [];
      for (const table of ACCOUNT_TABLES) {
        await keep();
        const compared = await asCompared(source, table);
        checked.push([await prove(source, table, accountId, compared), (await prove(dest, table, accountId, compared)).proof] as const);
      }
      proofs = new Map(checked.map(([s]) => [s.proof.table, s]));
      pending = checked.filter(([s, d]) => s.proof.rows !== d.rows || s.proof.sha256 !== d.sha256).map(([s]) => s.proof.table);
    }
    switchTried = true;
    await switchSource(source, accountId, to, token, [...proofs.values()], sendLeases, now());
    switched = true;
    await finishOn(dest, accountId, token);
    // The source's claim ends only now: until then no other run may finish this move, or undo it.
    await source.$client.prepare("UPDATE accounts SET move_token = NULL, move_until = NULL WHERE id = ? AND move_token = ?").bind(accountId, token).run();
    await repointOthers(env, accountId, from, to);
    await deleteAllButPointers(source, accountId);
    return { account_id: accountId, from_shard: from, to_shard: to, tables: [...proofs.values()].map((p) => p.proof), rounds };
  } catch (error) {
    // The claim ran out and another move took it: that move owns the account and both shards now.
    if (error instanceof ClaimLost) throw inProgress();
    // A switch refused by its own guards (409) is known not to have committed.
    if (!switchTried || (!switched && error instanceof ApiError)) {
      // Nothing was switched: the account stays where it was, unpaused. The target keeps pointers
      // back to it at most (the account row and its keys and tokens, paused), never a copy.
      await deleteAllButPointers(dest, accountId);
      await finishOn(source, accountId, token).catch(() => undefined);
    } else {
      // The switch's outcome is unknown: the account stays paused; the same command finishes it.
      // Its claim is let go at once, on both shards, so that command need not wait for it.
      for (const db of [source, dest]) await db.$client.prepare("UPDATE accounts SET move_until = 0 WHERE id = ? AND move_token = ?").bind(accountId, token).run().catch(() => undefined);
    }
    throw error;
  }
}

/** Pauses between looks at the account's money claims while a move waits for them (ms). */
const CLAIM_POLL_MS = 200;

/**
 * Waits until no request of the account has money at the processor whose record is not written yet
 * (src/processor/in-flight.ts): its claim was taken before the pause committed, so its commit,
 * which carries no key check, lands here, before anything is copied. However long a processor call
 * takes (retries, Retry-After waits), the move waits; only a claim whose lease ran out (its worker
 * died) is not waited for, and its late commit, should it come, is refused once the account has
 * moved (the request's retry then records it where the account lives).
 */
async function waitForMoneyInFlight(db: Db, accountId: string, from: number, now: () => number, keep: () => Promise<void>) {
  const started = Date.now();
  for (;;) {
    const { count } = await claimsInFlight(db, accountId, now());
    if (count === 0) return;
    // A clock held still (a test's) never lets a lease run out: real time bounds the wait too.
    if (Date.now() - started > MONEY_CLAIM_LEASE_MS) {
      throw new ApiError(409, "invalid_request_error", "move_unsettled", `A payment of the account stayed at the processor on shard ${from} for longer than a claim lasts. Nothing was switched and its keys are unpaused; run the move again.`);
    }
    await keep();
    await new Promise((resolve) => setTimeout(resolve, CLAIM_POLL_MS));
  }
}

/**
 * A row as the proof compares it: the account row's move bookkeeping is left out (the copy's row
 * points back at the source, and the source's claim is extended while the copy runs).
 */
async function asCompared(db: Db, table: string): Promise<(row: unknown[]) => unknown[]> {
  if (table !== "accounts") return (row) => row;
  const { columns } = await shapeOf(db, table);
  const left = new Set(["moved_to", "move_until"].map((c) => columns.indexOf(c)));
  return (row) => row.map((v, i) => (left.has(i) ? null : v));
}

/**
 * Makes the target's rows of `tables` the source's. Nothing reads the account's rows on the target
 * but for the pointers a credential is looked up by (the account row, its keys and tokens): every
 * other table's rows there are deleted, children first, then the source's are copied page by page.
 * The pointer tables, which are small, are made equal without a gap: the rows the source has not
 * are deleted, the source's upserted (the account row pointing back at the source).
 */
async function copyTables(source: Db, dest: Db, accountId: string, tables: string[], from: number, keep: () => Promise<void> = async () => {}) {
  for (const table of [...tables].reverse()) {
    if (POINTERS.has(table)) {
      const { columns, key } = await shapeOf(source, table);
      const keyOf = (row: unknown[]) => JSON.stringify(key.map((k) => row[columns.indexOf(k)]));
      const wanted = new Set((await rowsOf(source, table, accountId)).map(keyOf));
      const extra = (await rowsOf(dest, table, accountId)).filter((row) => !wanted.has(keyOf(row)));
      await deleteRows(dest, table, key, extra.map((row) => key.map((k) => row[columns.indexOf(k)])));
    } else await deleteAll(dest, table, accountId);
  }
  for (const table of tables) {
    await keep();
    const shape = await shapeOf(source, table);
    const at = shape.columns.indexOf("moved_to");
    await forEachPage(source, table, accountId, async (page) => {
      await upsertRows(dest, table, shape, table === "accounts" ? page.map((r) => r.map((v, i) => (i === at ? from : v))) : page);
      await keep();
    });
  }
}

/**
 * The account's rows on `db` but for the pointers, children first, page by page: the source's once
 * switched, or a failed move's copy on the target. Nothing reads them any more (the cron's
 * selections take only accounts that live there), so one left by a failure here is garbage, not a
 * second copy; a move to this shard deletes it before it copies.
 */
async function deleteAllButPointers(db: Db, accountId: string) {
  for (const table of [...ACCOUNT_TABLES].reverse()) if (!POINTERS.has(table)) await deleteAll(db, table, accountId).catch(() => undefined);
}

/** Deletes the account's rows of `table` on `db`, a page of rows per statement, so no statement runs long. */
async function deleteAll(db: Db, table: string, accountId: string) {
  for (;;) {
    const { meta } = await db.$client
      .prepare(`DELETE FROM ${quoted(table)} WHERE rowid IN (SELECT rowid FROM ${quoted(table)} WHERE ${ownerColumn(table)} = ? LIMIT ${PAGE * 4})`)
      .bind(accountId)
      .run();
    if ((meta.changes ?? 0) < PAGE * 4) return;
  }
}

/** The account's payouts' and refunds' send leases and markers (job_runs): a payout handed to the processor stays uncancelable. */
async function copySendLeases(source: Db, dest: Db, accountId: string): Promise<number> {
  const { results } = await source.$client
    .prepare(
      `SELECT key, created_at, lease_until, expires_at FROM job_runs WHERE key IN (
        SELECT 'payout_send:' || id FROM payouts WHERE account_id = ?1 UNION ALL SELECT 'refund_send:' || id FROM refunds WHERE account_id = ?1)`,
    )
    .bind(accountId)
    .all<{ key: string; created_at: string; lease_until: number | null; expires_at: number }>();
  const shape = await shapeOf(source, "job_runs");
  await upsertRows(dest, "job_runs", shape, results.map((r) => shape.columns.map((c) => (r as Record<string, unknown>)[c] ?? null)));
  return results.length;
}

/** SQL: the send leases and markers of the account's payouts and refunds on this shard, counted. */
const sendLeaseCount = (accountId: string) =>
  sql`(SELECT count(*) FROM job_runs WHERE key IN (SELECT 'payout_send:' || id FROM payouts WHERE account_id = ${accountId} UNION ALL SELECT 'refund_send:' || id FROM refunds WHERE account_id = ${accountId}))`;

async function upsertRows(db: Db, table: string, { columns, key }: Shape, rows: unknown[][]) {
  if (rows.length === 0) return;
  const perStatement = Math.max(1, Math.floor(MAX_BOUND / columns.length));
  const placeholders = `(${columns.map(() => "?").join(", ")})`;
  const update = columns.filter((c) => !key.includes(c)).map((c) => `${quoted(c)} = excluded.${quoted(c)}`);
  const onConflict = `ON CONFLICT (${key.map(quoted).join(", ")}) DO ${update.length > 0 ? `UPDATE SET ${update.join(", ")}` : "NOTHING"}`;
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = rows.slice(i, i + perStatement);
    statements.push(
      db.$client.prepare(`INSERT INTO ${quoted(table)} (${columns.map(quoted).join(", ")}) VALUES ${chunk.map(() => placeholders).join(", ")} ${onConflict}`).bind(...chunk.flat()),
    );
  }
  for (let i = 0; i < statements.length; i += STATEMENTS_PER_BATCH) await db.$client.batch(statements.slice(i, i + STATEMENTS_PER_BATCH));
}

async function deleteRows(db: Db, table: string, key: string[], keys: unknown[][]) {
  if (keys.length === 0) return;
  const perStatement = Math.max(1, Math.floor(MAX_BOUND / key.length));
  const match = `(${key.map((k) => `${quoted(k)} = ?`).join(" AND ")})`;
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < keys.length; i += perStatement) {
    const chunk = keys.slice(i, i + perStatement);
    statements.push(db.$client.prepare(`DELETE FROM ${quoted(table)} WHERE ${chunk.map(() => match).join(" OR ")}`).bind(...chunk.flat()));
  }
  for (let i = 0; i < statements.length; i += STATEMENTS_PER_BATCH) await db.$client.batch(statements.slice(i, i + STATEMENTS_PER_BATCH));
}

/**
 * On the source, in one batch: the claim is still this move's, each table still holds the rows
 * counted in the proof with the same latest updated_at, the account points at the target, and its
 * rows go, but for the account row and its keys and tokens.
 */
async function switchSource(db: Db, accountId: string, to: number, token: string, proofs: Proven[], sendLeases: number, now: number) {
  const unchanged = ({ proof, latest, hasUpdatedAt }: Proven) => {
    const table = sql.raw(quoted(proof.table));
    const count = sql`(SELECT count(*) FROM ${table} WHERE ${owner(proof.table, accountId)}) = ${proof.rows}`;
    return hasUpdatedAt ? sql`${count} AND (SELECT max(updated_at) FROM ${table} WHERE ${owner(proof.table, accountId)}) IS ${latest}` : count;
  };
  await runBatch(
    db,
    [
      rawStatement(db, BATCH_GUARD_SQL(MOVE_CLAIMED, holds(accountId, token))),
      ...proofs.map((p) => rawStatement(db, BATCH_GUARD_SQL(MOVE_CHANGED, unchanged(p)))),
      // A payout handed to the processor after the copy (its send marker written here only) would be cancelable there.
      rawStatement(db, BATCH_GUARD_SQL(MOVE_CHANGED, sql`${sendLeaseCount(accountId)} = ${sendLeases}`)),
      // Money at the processor whose record is not written yet: never switched away from under it.
      rawStatement(db, BATCH_GUARD_SQL(MOVE_CHANGED, noClaimsInFlight(accountId, now))),
      rawStatement(db, sql`UPDATE accounts SET moved_to = ${to} WHERE id = ${accountId}`),
    ],
    {
      [MOVE_CLAIMED]: inProgress,
      [MOVE_CHANGED]: () =>
        new ApiError(409, "invalid_request_error", "move_unsettled", "The account's rows changed on its shard just before the switch. Nothing was switched and its keys are unpaused; run the move again."),
    },
  );
}

/** Pointers on other shards (from earlier moves) now point at the target: a credential takes one hop. */
async function repointOthers(env: RuntimeBindings | Bindings, accountId: string, from: number, to: number) {
  await Promise.all(
    shardNumbers(env)
      .filter((n) => n !== from && n !== to)
      .map((n) => dbOf(env, n).$client.prepare("UPDATE accounts SET moved_to = ? WHERE id = ? AND moved_to IS NOT NULL").bind(to, accountId).run().catch(() => undefined)),
  );
}
