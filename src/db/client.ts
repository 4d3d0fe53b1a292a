import { AsyncLocalStorage } from "node:async_hooks";
import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema";

const build = (d1: D1Database) => drizzle(countingD1(d1), { schema });
export type Db = ReturnType<typeof build>;

/**
 * The request (or job) in progress: its D1 usage, counted by the instrumented binding, and its D1
 * session (the Sessions API), through which every query of the request runs, so that a replica
 * answers plain reads and every read is at least as fresh as the session's bookmark.
 */
interface InProgress {
  usage: D1Usage;
  session?: { binding: D1Database; session: D1DatabaseSession };
}
const inProgress = new AsyncLocalStorage<InProgress>();

/** Runs `work` with its D1 round trips and rows counted into `usage`, and its queries in `session`. */
export function countingInto<T>(usage: D1Usage, work: () => Promise<T>, session?: InProgress["session"]): Promise<T> {
  return inProgress.run({ usage, session }, work);
}

// Building drizzle with a schema walks the whole schema (its relational config), which cost a
// sixth of a GET /health's CPU when done per request. One instance per binding per isolate.
const instances = new WeakMap<D1Database, Db>();

export function createDb(d1: D1Database): Db {
  let db = instances.get(d1);
  if (!db) instances.set(d1, (db = build(d1)));
  return db;
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
 * rows read and written that D1 reports in each result's meta, into the usage of the request in
 * progress. In development the counts are reported in `Tender-D1-*` response headers, which the
 * tests and the bench read.
 */
function countingD1(d1: D1Database): D1Database {
  const idle: D1Usage = { count: 0, rowsRead: 0, rowsWritten: 0 };
  const current = () => inProgress.getStore()?.usage ?? idle;
  /** Where queries go: the request's session on this binding, else the binding itself. */
  const route = (): D1Database | D1DatabaseSession => {
    const session = inProgress.getStore()?.session;
    return session && session.binding === d1 ? session.session : d1;
  };
  const originals = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        if (typeof prop === "string" && QUERY_METHODS.has(prop)) {
          return async (...args: unknown[]) => {
            const usage = current();
            usage.count++;
            const result = await value.apply(target, args);
            return prop === "run" || prop === "all" ? addMeta(usage, result) : result;
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
      if (prop === "prepare") return (query: string) => wrap(route().prepare(query));
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          const usage = current();
          usage.count++;
          return addMeta(usage, await route().batch(statements.map((s) => originals.get(s) ?? s)));
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
