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
  sessions?: Sessions;
}
const inProgress = new AsyncLocalStorage<InProgress>();

/**
 * The D1 sessions of a request: one per database it touches (a request reads its account's shard
 * only, src/db/shards.ts), each opened on first use with the request's constraint.
 */
export class Sessions {
  private readonly opened = new Map<D1Database, D1DatabaseSession>();
  constructor(private readonly constraint: string) {}
  on(binding: D1Database): D1DatabaseSession {
    let session = this.opened.get(binding);
    if (!session) this.opened.set(binding, (session = binding.withSession(this.constraint)));
    return session;
  }
  /** The bookmark reached on `binding`, if the request used it. */
  bookmarkOf(binding: D1Database | undefined): string | null {
    return (binding && this.opened.get(binding)?.getBookmark()) ?? null;
  }
}

/** Runs `work` with its D1 round trips and rows counted into `usage`, and its queries in `sessions`. */
export function countingInto<T>(usage: D1Usage, work: () => Promise<T>, sessions?: Sessions): Promise<T> {
  return inProgress.run({ usage, sessions }, work);
}

// Building drizzle with a schema walks the whole schema (its relational config), which cost a
// sixth of a GET /health's CPU when done per request. One instance per binding per isolate.
const instances = new WeakMap<D1Database, Db>();

export function createDb(d1: D1Database): Db {
  let db = instances.get(d1);
  if (!db) instances.set(d1, (db = build(d1)));
  return db;
}

export interface D1Usage {
  /** Round trips: one per query, one per batch. */
  count: number;
  rowsRead: number;
  rowsWritten: number;
  /**
   * Statements whose SQL text was handed to the binding during the work: built by drizzle's query
   * builder, or prepared for the first time. A request on prepared statements only (src/db/prepared.ts) builds none.
   */
  statementsBuilt: number;
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
 * A statement of the wrapped binding: its SQL text and bound values, sent on the session of the
 * request in progress when it runs (not when it was prepared). So a statement prepared once per
 * isolate (src/db/prepared.ts) serves every request, each on its own session.
 */
class RoutedStatement {
  constructor(
    private readonly wrapper: CountingD1,
    readonly sql: string,
    private readonly values: unknown[] = [],
  ) {}
  bind(...values: unknown[]): RoutedStatement {
    return new RoutedStatement(this.wrapper, this.sql, values);
  }
  /** The binding's own statement, on the session of the request in progress. */
  materialize(): D1PreparedStatement {
    return this.wrapper.route().prepare(this.sql).bind(...this.values);
  }
  private async send<T>(method: "all" | "raw" | "run" | "first", args: unknown[]): Promise<T> {
    const usage = this.wrapper.current();
    usage.count++;
    const statement = this.materialize() as unknown as Record<string, (...a: unknown[]) => Promise<T>>;
    const result = await statement[method](...args);
    return method === "run" || method === "all" ? (addMeta(usage, result) as T) : result;
  }
  all(...args: unknown[]) { return this.send("all", args); }
  raw(...args: unknown[]) { return this.send("raw", args); }
  run(...args: unknown[]) { return this.send("run", args); }
  first(...args: unknown[]) { return this.send("first", args); }
}

interface CountingD1 {
  current(): D1Usage;
  /** Where queries go: the request's session on this binding, else the binding itself. */
  route(): D1Database | D1DatabaseSession;
}

/**
 * Wraps the D1 binding so that every round trip (one query, or one batch) is counted, with the
 * rows read and written that D1 reports in each result's meta, into the usage of the request in
 * progress, and runs on the request's session. In development the counts are reported in
 * `Tender-D1-*` response headers to a request that asks (src/middleware/request.ts), which the
 * tests and the bench do.
 */
function countingD1(d1: D1Database): D1Database {
  const idle: D1Usage = { count: 0, rowsRead: 0, rowsWritten: 0, statementsBuilt: 0 };
  const wrapper: CountingD1 = {
    current: () => inProgress.getStore()?.usage ?? idle,
    route: () => inProgress.getStore()?.sessions?.on(d1) ?? d1,
  };
  const materialize = (s: D1PreparedStatement) => (s instanceof RoutedStatement ? s.materialize() : s);
  return new Proxy(d1, {
    get(target, prop) {
      if (prop === "prepare") {
        return (query: string) => {
          wrapper.current().statementsBuilt++;
          return new RoutedStatement(wrapper, query) as unknown as D1PreparedStatement;
        };
      }
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          const usage = wrapper.current();
          usage.count++;
          return addMeta(usage, await wrapper.route().batch(statements.map(materialize)));
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
