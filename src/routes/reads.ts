// Tenant-scoped reads (the caller's account, in the caller's mode). The scope check rides in each
// query (src/db/scope.ts), and the read carries a check that the caller's key is live (a read by
// id joins it in its one statement; a list runs in one batch with it), so a 404 or an empty list
// costs one round trip too and is told apart from "your key was just revoked". `found` is for rows
// read otherwise (a join, which drizzle cannot map inside a batch): only its empty answer costs a
// second query.
//
// A read by id and a list page are prepared statements (src/db/prepared.ts), one per table and
// shape of filters, built once per isolate.
import type { Context } from "hono";
import { type SQL, and, asc, desc, eq, getTableName, gt, isNull, lt, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { BatchItem } from "drizzle-orm/batch";
import type { Statement } from "../db/batch";
import { callerPlaceholders, callerValues, liveKeyIs, liveKeyStatement, liveKeyTable, owned, ownedBy } from "../db/scope";
import { preparedBy } from "../db/prepared";
import { ensureLive, revokedCredential } from "../auth/credentials";
import type { AppEnv } from "../context";
import { notFound } from "../lib/errors";
import { type ListQuery, type Page, type PageDirection, paginate } from "./pagination";

/** A table of an account's objects (in one mode each), with time-ordered ids. */
export type OwnedTable = SQLiteTable & { id: SQLiteColumn; accountId: SQLiteColumn; livemode: SQLiteColumn };

export async function found<T>(c: Context<AppEnv>, row: T | undefined, resource: string, id: string, param = "id"): Promise<T> {
  if (row !== undefined) return row;
  await ensureLive(c.var.db, c.var.auth);
  throw notFound(resource, id, param);
}

/** A read for a batch: a drizzle query, or a prepared statement bound to its values. */
type Read<R> = (BatchItem<"sqlite"> & PromiseLike<R>) | (Statement & { readonly result?: R });

/**
 * Runs a read and the check that the caller's key is live in one batch: one round trip, and an
 * empty answer is already told apart from a revoked key (401).
 */
export async function withLiveKey<R>(c: Context<AppEnv>, query: Read<R>): Promise<R> {
  const [result] = await withLiveKeyAll<[R]>(c, [query]);
  return result;
}

/** withLiveKey for several reads, all in the one batch. */
export async function withLiveKeyAll<R extends unknown[]>(c: Context<AppEnv>, queries: { [K in keyof R]: Read<R[K]> }): Promise<R> {
  const results = (await c.var.db.batch([...(queries as Read<unknown>[]), liveKeyStatement(c.var.db, c.var.auth.keyId)] as unknown as [Statement])) as unknown[];
  const live = results.pop() as unknown[];
  if (live.length === 0) throw revokedCredential(c.var.auth.keyId);
  return results as R;
}

/**
 * One object of the caller's account (a `select … limit 1`: drizzle's relational findFirst cannot
 * map an empty result inside a batch), read with the key check in one round trip; 404 when absent.
 */
export async function readOne<R>(
  c: Context<AppEnv>,
  query: Read<R[]>,
  resource: string,
  id: string,
  param = "id",
): Promise<R> {
  const [row] = await withLiveKey(c, query);
  if (row === undefined) throw notFound(resource, id, param);
  return row;
}

/**
 * A read by id in one statement: the caller's key, if live, left-joined to the object. No row: the
 * key is dead; a row without the object: it is not the caller's (or does not exist). A batch of two
 * statements (the read, then the key) cost more CPU (bench/RESULTS.md, "readpath").
 */
const byId = preparedBy((db, table: OwnedTable) =>
  db
    .select({ object: table })
    .from(liveKeyTable)
    .leftJoin(table, and(eq(table.id, sql.placeholder("id")), ownedBy(table, callerPlaceholders)))
    .where(liveKeyIs(liveKeyTable, callerPlaceholders.keyId))
    .limit(1),
);

/** The caller's object `id` of `table`, in one round trip; 404 when absent, 401 when the key is no longer live. */
export async function readById<T extends OwnedTable>(c: Context<AppEnv>, table: T, id: string, resource: string, param = "id"): Promise<T["$inferSelect"]> {
  const [found] = (await byId(c.var.db, table).all({ ...callerValues(c.var.auth), id })) as { object: T["$inferSelect"] | null }[];
  if (found === undefined) throw revokedCredential(c.var.auth.keyId);
  if (found.object === null) throw notFound(resource, id, param);
  return found.object;
}

/**
 * An equality filter of a list: absent (undefined, no condition), a value, or null (IS NULL).
 * Only which filters are present shapes the prepared statement; their values are bound.
 */
export type ListFilter = readonly [SQLiteColumn, string | null | undefined];

/** The shape of a list page's statement: its table, direction, and the filters present. */
interface ListShape {
  table: OwnedTable;
  direction: PageDirection;
  /** The filters present: their columns, and whether each is IS NULL. */
  filters: { column: SQLiteColumn; isNull: boolean }[];
}

const listPage = preparedBy(
  (db, { table, direction, filters }: ListShape) => {
    const conditions: SQL[] = filters.map(({ column, isNull: nullOnly }, i) => (nullOnly ? isNull(column) : eq(column, sql.placeholder(`f${i}`))));
    if (direction === "after") conditions.push(lt(table.id, sql.placeholder("cursor")));
    if (direction === "before") conditions.push(gt(table.id, sql.placeholder("cursor")));
    return db
      .select()
      .from(table)
      .where(owned(table, callerPlaceholders, ...conditions))
      .orderBy(direction === "before" ? asc(table.id) : desc(table.id))
      .limit(sql.placeholder("limit"));
  },
  ({ table, direction, filters }) => `${getTableName(table)}|${direction}|${filters.map(({ column, isNull: nullOnly }) => `${column.name}${nullOnly ? " null" : ""}`).join(",")}`,
);

/** A page of the caller's objects of `table`, newest first, with the key check, in one round trip. */
export async function listOwned<T extends OwnedTable, Item>(
  c: Context<AppEnv>,
  options: {
    table: T;
    query: ListQuery;
    filters?: ListFilter[];
    validCursor: (id: string) => boolean;
    serialize: (row: T["$inferSelect"]) => Item;
  },
): Promise<Page<Item>> {
  const filters = options.filters ?? [];
  return paginate({
    query: options.query,
    validCursor: options.validCursor,
    serialize: options.serialize,
    fetch: (direction, cursor, limit) => {
      const present = filters.filter(([, value]) => value !== undefined);
      const values: Record<string, unknown> = { ...callerValues(c.var.auth), cursor, limit };
      present.forEach(([, value], i) => (values[`f${i}`] = value));
      const shape = { table: options.table, direction, filters: present.map(([column, value]) => ({ column, isNull: value === null })) };
      return withLiveKey(c, listPage(c.var.db, shape).with(values) as Statement & { result?: T["$inferSelect"][] });
    },
  });
}
