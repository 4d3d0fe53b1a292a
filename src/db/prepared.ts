// Hot statements, prepared once per isolate. Each is written as a drizzle query with placeholders
// (`sql.placeholder`) and built on first use with drizzle's `.prepare()`: later requests only bind
// their values to it, so no query builder runs and no SQL text is assembled per request. The
// statement it holds is the wrapped binding's (src/db/client.ts), which runs on the D1 session of
// the request in progress, so one prepared statement serves every request.
//
// A prepared statement runs on its own (`execute`), or as one statement of a batch (`with`):
// drizzle's batch takes only query builders, so `with` hands it the built query with its values.
import { type SQL, Param, Placeholder, getTableName, is, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";
import type { BatchItem } from "drizzle-orm/batch";

/** One statement of a D1 batch (src/db/batch.ts). */
export type Statement = BatchItem<"sqlite">;

export type Values = Record<string, unknown>;

/** What drizzle's `.prepare()` gives, as far as binding and mapping go. */
interface PreparedForm {
  getQuery(): { sql: string; params: unknown[] };
  stmt: D1PreparedStatement;
  mapResult(result: unknown, isFromBatch?: boolean): unknown;
  execute(values?: Values): unknown;
}

/** How each parameter gets its value: a fixed value, or a placeholder's value (encoded for its column). */
type Slot = (values: Values) => unknown;

function slotOf(param: unknown): Slot {
  const needed = (name: string) => (values: Values) => {
    if (!(name in values)) throw new Error(`No value for placeholder "${name}" was provided`);
    return values[name];
  };
  if (is(param, Placeholder)) return needed(param.name);
  if (is(param, Param) && is(param.value, Placeholder)) {
    const value = needed(param.value.name);
    const encoder = param.encoder;
    // As drizzle binds a value: null is NULL, never encoded (a JSON column would store 'null').
    return (values) => {
      const given = value(values);
      return given === null ? null : encoder.mapToDriverValue(given);
    };
  }
  return () => param;
}

export class PreparedStatement<R = unknown> {
  private readonly sql: string;
  private readonly slots: Slot[];

  constructor(private readonly form: PreparedForm) {
    const query = form.getQuery();
    this.sql = query.sql;
    this.slots = query.params.map(slotOf);
  }

  /** The statement with `values`, as one statement of a batch; its batch result is mapped as drizzle maps the query's. */
  with(values: Values = {}): Statement & { readonly result?: R } {
    const query = { sql: this.sql, params: this.slots.map((slot) => slot(values)) };
    const { form } = this;
    const built = { getQuery: () => query, stmt: form.stmt, mapResult: (result: unknown, isFromBatch?: boolean) => form.mapResult(result, isFromBatch) };
    return { _prepare: () => built } as unknown as Statement;
  }

  /** Runs on its own: one round trip. */
  execute(values: Values = {}): Promise<R> {
    return Promise.resolve(this.form.execute(values) as R);
  }
}

type Preparable = { prepare(): { execute(values?: Values): unknown } };
type ResultOf<Q extends Preparable> = Awaited<ReturnType<ReturnType<Q["prepare"]>["execute"]>>;

/** `make(db, key)`, run once per database instance (one per binding per isolate, src/db/client.ts) and `key`. */
function oncePerDatabase<K, V>(make: (db: Db, key: K) => V): (db: Db, key: K) => V {
  const made = new WeakMap<Db, Map<K, V>>();
  return (db, key) => {
    let byKey = made.get(db);
    if (!byKey) made.set(db, (byKey = new Map()));
    let value = byKey.get(key);
    if (value === undefined) byKey.set(key, (value = make(db, key)));
    return value;
  };
}

/** A statement prepared once per isolate and per `key` (a table, a shape of filters): `build` runs the first time only. */
export const preparedBy = <K, Q extends Preparable>(build: (db: Db, key: K) => Q) =>
  oncePerDatabase((db, key: K) => new PreparedStatement<ResultOf<Q>>(build(db, key).prepare() as unknown as PreparedForm));

/** A statement prepared once per isolate. */
export function prepared<Q extends Preparable>(build: (db: Db) => Q): (db: Db) => PreparedStatement<ResultOf<Q>> {
  const byKey = preparedBy((db, _key: null) => build(db));
  return (db) => byKey(db, null);
}

/**
 * A hand-written SQL statement in prepared form: drizzle's `db.run(sql)` has no D1 statement of its
 * own. Its result is D1's (`{ results, meta }`).
 */
export function rawForm(db: Db, query: SQL): PreparedStatement<D1Result> {
  const built = db.run(query).getQuery();
  const stmt = db.$client.prepare(built.sql);
  return new PreparedStatement({
    getQuery: () => built,
    stmt,
    mapResult: (result) => result,
    execute: (values = {}) => stmt.bind(...built.params.map((param) => slotOf(param)(values))).run(),
  });
}

/** A hand-written SQL statement prepared once per isolate and per `key`. */
export const preparedRawBy = <K>(build: (key: K) => SQL) => oncePerDatabase((db, key: K) => rawForm(db, build(key)));

/** A hand-written SQL statement prepared once per isolate. */
export function preparedRaw(build: () => SQL): (db: Db) => PreparedStatement<D1Result> {
  const byKey = preparedRawBy((_key: null) => build());
  return (db) => byKey(db, null);
}

interface InsertShape {
  table: SQLiteTable;
  columns: string[];
}
const insertShapes = new Map<string, InsertShape>();
const preparedInsert = preparedBy((db, { table, columns }: InsertShape) =>
  db.insert(table).values(Object.fromEntries(columns.map((column) => [column, sql.placeholder(column)]))),
);

/**
 * An INSERT of one row into `table`, prepared once per isolate for each set of columns given:
 * the row's values are bound (encoded as their columns encode them: JSON, booleans).
 */
export function insertRow<T extends SQLiteTable>(db: Db, table: T, row: T["$inferInsert"]): Statement {
  const values = Object.fromEntries(Object.entries(row).filter(([, value]) => value !== undefined));
  const columns = Object.keys(values);
  const key = `${getTableName(table)}|${columns.join(",")}`;
  let shape = insertShapes.get(key);
  if (!shape) insertShapes.set(key, (shape = { table, columns }));
  return preparedInsert(db, shape).with(values);
}
