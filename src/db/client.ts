import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema";

export type Db = ReturnType<typeof createDb>;

export function createDb(d1: D1Database) {
  return drizzle(d1, { schema });
}

const QUERY_METHODS = new Set(["all", "raw", "run", "first"]);

/**
 * Wraps the D1 binding so that every round trip (one query, or one batch) is counted. The
 * count is reported in the `Tender-D1-Round-Trips` header in development, and by the bench.
 */
export function countingD1(d1: D1Database, counter: { count: number }): D1Database {
  const originals = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        if (typeof prop === "string" && QUERY_METHODS.has(prop)) {
          return (...args: unknown[]) => {
            counter.count++;
            return value.apply(target, args);
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
        return (statements: D1PreparedStatement[]) => {
          counter.count++;
          return target.batch(statements.map((s) => originals.get(s) ?? s));
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
