import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema";

export type Db = ReturnType<typeof createDb>;

export function createDb(d1: D1Database) {
  return drizzle(d1, { schema });
}

const QUERY_METHODS = new Set(["all", "raw", "run", "first"]);

export interface D1Usage {
  /** Round trips: one per query, one per batch. */
  count: number;
  rowsRead: number;
  rowsWritten: number;
}

function addMeta(usage: D1Usage, result: unknown) {
  for (const item of Array.isArray(result) ? result : [result]) {
    const meta = (item as { meta?: { rows_read?: number; rows_written?: number } } | null)?.meta;
    usage.rowsRead += meta?.rows_read ?? 0;
    usage.rowsWritten += meta?.rows_written ?? 0;
  }
  return result;
}

/**
 * Wraps the D1 binding so that every round trip (one query, or one batch) is counted, with the
 * rows read and written that D1 reports in each result's meta. In development the counts are
 * reported in `Tender-D1-*` response headers, which the tests and the bench read.
 */
export function countingD1(d1: D1Database, counter: D1Usage): D1Database {
  const originals = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        if (typeof prop === "string" && QUERY_METHODS.has(prop)) {
          return async (...args: unknown[]) => {
            counter.count++;
            const result = await value.apply(target, args);
            return prop === "run" || prop === "all" ? addMeta(counter, result) : result;
          };
        }
        return value.bind(target);
      },
    });
    originals.set(proxy, statement);
    return proxy;
  };
  return new Proxy(d1, {
    get(target, prop) {
      if (prop === "prepare") return (query: string) => wrap(target.prepare(query));
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          counter.count++;
          return addMeta(counter, await target.batch(statements.map((s) => originals.get(s) ?? s)));
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
