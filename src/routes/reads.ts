// Tenant-scoped reads. The scope check rides in each query (src/db/scope.ts), and the read runs in
// one batch with a check that the caller's key is live, so a 404 or an empty list costs one round
// trip too and is told apart from "your key was just revoked". `found` is for rows read otherwise
// (a join, which drizzle cannot map inside a batch): only its empty answer costs a second query.
import type { Context } from "hono";
import { type SQL, and, eq, isNull } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { apiKeys } from "../db/schema";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { owned } from "../db/scope";
import { ensureLive, forgetKey, revokedCredential } from "../auth/credentials";
import type { AppEnv } from "../context";
import { notFound } from "../lib/errors";
import { type ListQuery, type Page, paginate } from "./pagination";

export async function found<T>(c: Context<AppEnv>, row: T | undefined, resource: string, id: string, param = "id"): Promise<T> {
  if (row !== undefined) return row;
  await ensureLive(c.var.db, c.var.auth);
  throw notFound(resource, id, param);
}

/** The key behind the credential, if it is still live: read in the same batch as the data. */
const liveKeyQuery = (c: Context<AppEnv>) =>
  c.var.db.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, c.var.auth.keyId), isNull(apiKeys.revokedAt)));

/**
 * Runs a read and the check that the caller's key is live in one batch: one round trip, and an
 * empty answer is already told apart from a revoked key (401).
 */
export async function withLiveKey<R>(c: Context<AppEnv>, query: BatchItem<"sqlite"> & PromiseLike<R>): Promise<R> {
  const [result, live] = (await c.var.db.batch([query, liveKeyQuery(c)])) as [R, unknown[]];
  if (live.length === 0) {
    forgetKey(c.var.auth.keyId);
    throw revokedCredential();
  }
  return result;
}

/**
 * One object of the caller's account (a `select … limit 1`: drizzle's relational findFirst cannot
 * map an empty result inside a batch), read with the key check in one round trip; 404 when absent.
 */
export async function readOne<R>(
  c: Context<AppEnv>,
  query: BatchItem<"sqlite"> & PromiseLike<R[]>,
  resource: string,
  id: string,
  param = "id",
): Promise<R> {
  const [row] = await withLiveKey(c, query);
  if (row === undefined) throw notFound(resource, id, param);
  return row;
}

export async function listOwned<Row, T>(
  c: Context<AppEnv>,
  options: {
    table: SQLiteTable & { accountId: SQLiteColumn };
    id: SQLiteColumn;
    query: ListQuery;
    filters?: (SQL | undefined)[];
    validCursor: (id: string) => boolean;
    serialize: (row: Row) => T;
  },
): Promise<Page<T>> {
  return paginate(c.var.db, {
    ...options,
    where: owned(options.table, c.var.auth, ...(options.filters ?? [])),
    run: (query) => withLiveKey(c, query),
  });
}
