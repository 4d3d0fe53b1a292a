// Atomic writes on D1: one db.batch([...]) per state change. A batch cannot branch, so its
// preconditions are guard statements that abort it (see migrations/0001_batch_guards.sql), and
// its invariants are CHECK and UNIQUE constraints. Failures map to API errors by name.
import { type SQL, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";
import { ApiError } from "../lib/errors";
import { batchItem, builtRaw, preparedRaw, type Statement } from "./prepared";

export type { Statement };

/**
 * A hand-written SQL statement for a batch. drizzle's `db.run(sql)` cannot take part in a D1
 * batch when it has parameters (its prepared form has no D1 statement), so this supplies one.
 * Its batch result is D1's own: `{ results, meta }`. Hot ones are prepared once (src/db/prepared.ts).
 */
export function rawStatement(db: Db, query: SQL): Statement {
  const { query: built, stmt } = builtRaw(db, query);
  return batchItem(built, stmt, (result) => result);
}

/** SQL that aborts the batch with `reason` unless `condition` holds when it runs. */
export const BATCH_GUARD_SQL = (reason: string, condition: SQL) => sql`INSERT INTO batch_guards (reason) SELECT ${reason} WHERE NOT (${condition})`;

/** A statement that aborts the batch with `reason` unless `condition` holds when it runs. */
export const guard = (db: Db, reason: string, condition: SQL): Statement => rawStatement(db, BATCH_GUARD_SQL(reason, condition));

/** A statement that aborts the batch with `reason` unless a row of `table` matches `where` when it runs. */
export const guardExists = (db: Db, reason: string, table: SQLiteTable, where: SQL | undefined): Statement =>
  guard(db, reason, sql`EXISTS (SELECT 1 FROM ${table} WHERE ${where})`);

/** A statement that does nothing: keeps a batch's positions when an optional statement is left out. */
export const noop = (db: Db): Statement => preparedNoop(db).with();
// Bound to a parameter: drizzle's batch builds a statement without parameters again every time.
const preparedNoop = preparedRaw(() => sql`SELECT 1 WHERE ${0}`);

/**
 * Maps a failed batch to an API error. Keys are guard reasons or constraint names (a CHECK's
 * name, or a unique index's `table.column` text as SQLite reports it).
 */
export type FailureMap = Record<string, () => ApiError>;

export function failureReason(error: unknown): string | undefined {
  const message = error instanceof Error ? `${error.message} ${String((error as { cause?: unknown }).cause ?? "")}` : "";
  const guardMatch = /batch_guard:([a-z_]+)/.exec(message);
  if (guardMatch) return guardMatch[1];
  const checkMatch = /CHECK constraint failed: ([a-z_]+)/.exec(message);
  if (checkMatch) return checkMatch[1];
  const uniqueMatch = /UNIQUE constraint failed: ([a-z_.]+(?:, [a-z_.]+)*)/.exec(message);
  if (uniqueMatch) return `unique:${uniqueMatch[1]}`;
  return undefined;
}

export async function runBatch(db: Db, statements: Statement[], failures: FailureMap = {}) {
  if (statements.length === 0) return [];
  try {
    return await db.batch(statements as [Statement, ...Statement[]]);
  } catch (error) {
    const reason = failureReason(error);
    const mapped = reason ? failures[reason] : undefined;
    if (mapped) throw mapped();
    throw error;
  }
}
