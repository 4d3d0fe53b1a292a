// Tenant-scoped reads. The scope check already rides in each query (src/db/scope.ts); an empty
// answer costs one more query, to tell "not there" from "your key was just revoked".
import type { Context } from "hono";
import type { SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { owned } from "../db/scope";
import { ensureLive } from "../auth/credentials";
import type { AppEnv } from "../context";
import { notFound } from "../lib/errors";
import { type ListQuery, type Page, paginate } from "./pagination";

export async function found<T>(c: Context<AppEnv>, row: T | undefined, resource: string, id: string, param = "id"): Promise<T> {
  if (row !== undefined) return row;
  await ensureLive(c.var.db, c.var.auth);
  throw notFound(resource, id, param);
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
  const page = await paginate(c.var.db, {
    ...options,
    where: owned(options.table, c.var.auth, ...(options.filters ?? [])),
  });
  if (page.data.length === 0) await ensureLive(c.var.db, c.var.auth);
  return page;
}
