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
  /** The selected fields of a drizzle select, in order; absent for a hand-written statement. */
  fields?: readonly unknown[];
  /** Runs on its own; absent for a hand-written statement, which then runs its D1 statement. */
  execute?(values?: Values): unknown;
}

/**
 * A built query as one statement of a drizzle batch: drizzle's batch asks each item for its
 * prepared form, then binds `params` to `stmt` and maps the result with `mapResult`.
 */
export function batchItem(query: { sql: string; params: unknown[] }, stmt: D1PreparedStatement, mapResult: PreparedForm["mapResult"]): Statement {
  const built = { getQuery: () => query, stmt, mapResult };
  return { _prepare: () => built } as unknown as Statement;
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
  /** all() has seen a row of this statement whose columns it can map by position (they never change). */
  private columnsMappable = false;

  constructor(private readonly form: PreparedForm) {
    const query = form.getQuery();
    this.sql = query.sql;
    this.slots = query.params.map(slotOf);
  }

  private params(values: Values): unknown[] {
    return this.slots.map((slot) => slot(values));
  }

  /** The statement with `values`, as one statement of a batch; its batch result is mapped as drizzle maps the query's. */
  with(values: Values = {}): Statement & { readonly result?: R } {
    const { form } = this;
    return batchItem({ sql: this.sql, params: this.params(values) }, form.stmt, (result, isFromBatch) => form.mapResult(result, isFromBatch));
  }

  /**
   * Runs on its own through D1's all(), whose result reports the rows read (drizzle's own execute
   * goes through raw(), which does not), mapped as drizzle maps the query's batch result: each row
   * keyed by column name, then read by position. A query whose columns share a name (one collapses)
   * or have an integer-like name (it moves first) cannot be mapped so, and is refused.
   */
  async all(values: Values = {}): Promise<R> {
    const result = (await this.form.stmt.bind(...this.params(values)).all()) as D1Result<Record<string, unknown>>;
    const [row] = result.results;
    if (row !== undefined && !this.columnsMappable) {
      const names = Object.keys(row);
      const expected = this.form.fields?.length ?? names.length;
      if (names.length !== expected || names.some((name) => /^(0|[1-9]\d*)$/.test(name))) {
        throw new Error(`PreparedStatement.all() cannot map columns [${names.join(", ")}] by position (${expected} expected): name them apart, or use execute().`);
      }
      this.columnsMappable = true;
    }
    return this.form.mapResult(result, true) as R;
  }

  /** Runs on its own: one round trip. */
  async execute(values: Values = {}): Promise<R> {
    if (this.form.execute) return (await this.form.execute(values)) as R;
    return (await this.form.stmt.bind(...this.params(values)).run()) as R;
  }
}

type Preparable = { prepare(): { execute(values?: Values): unknown } };
type ResultOf<Q extends Preparable> = Awaited<ReturnType<ReturnType<Q["prepare"]>["execute"]>>;

/**
 * `make(db, arg)`, run once per database instance (one per binding per isolate, src/db/client.ts)
 * and per `keyOf(arg)`: later calls with an equal key get the first call's value.
 */
function oncePerDatabase<A, V>(make: (db: Db, arg: A) => V, keyOf: (arg: A) => unknown = (arg) => arg): (db: Db, arg: A) => V {
  const made = new WeakMap<Db, Map<unknown, V>>();
  return (db, arg) => {
    let byKey = made.get(db);
    if (!byKey) made.set(db, (byKey = new Map()));
    const key = keyOf(arg);
    let value = byKey.get(key);
    if (value === undefined) byKey.set(key, (value = make(db, arg)));
    return value;
  };
}

/** `make(db)`, run once per database instance. */
const oncePer = <V>(make: (db: Db) => V) => {
  const byKey = oncePerDatabase((db, _arg: null) => make(db));
  return (db: Db) => byKey(db, null);
};

/**
 * A statement prepared once per isolate and per shape (`keyOf(shape)`: a table, which filters a
 * list has): `build` runs the first time only.
 */
export const preparedBy = <S, Q extends Preparable>(build: (db: Db, shape: S) => Q, keyOf?: (shape: S) => unknown) =>
  oncePerDatabase((db, shape: S) => new PreparedStatement<ResultOf<Q>>(build(db, shape).prepare() as unknown as PreparedForm), keyOf);

/** A statement prepared once per isolate. */
export const prepared = <Q extends Preparable>(build: (db: Db) => Q) =>
  oncePer((db) => new PreparedStatement<ResultOf<Q>>(build(db).prepare() as unknown as PreparedForm));

/** A hand-written SQL statement, built: its query (SQL text and parameters) and its D1 statement. */
export function builtRaw(db: Db, query: SQL) {
  const built = db.run(query).getQuery();
  return { query: built, stmt: db.$client.prepare(built.sql) };
}

/**
 * A hand-written SQL statement in prepared form: drizzle's `db.run(sql)` has no D1 statement of its
 * own. Its result is D1's (`{ results, meta }`).
 */
function rawForm(db: Db, query: SQL): PreparedStatement<D1Result> {
  const { query: built, stmt } = builtRaw(db, query);
  return new PreparedStatement({ getQuery: () => built, stmt, mapResult: (result) => result });
}

/** A hand-written SQL statement prepared once per isolate and per shape. */
export const preparedRawBy = <S>(build: (shape: S) => SQL) => oncePerDatabase((db, shape: S) => rawForm(db, build(shape)));

/** A hand-written SQL statement prepared once per isolate. */
export const preparedRaw = (build: () => SQL) => oncePer((db) => rawForm(db, build()));

/** Which columns an insert into a table sets. */
interface InsertShape {
  table: SQLiteTable;
  columns: string[];
}
const preparedInsert = preparedBy(
  (db, { table, columns }: InsertShape) => db.insert(table).values(Object.fromEntries(columns.map((column) => [column, sql.placeholder(column)]))),
  ({ table, columns }) => `${getTableName(table)}|${columns.join(",")}`,
);

/**
 * An INSERT of one row into `table`, prepared once per isolate for each set of columns given:
 * the row's values are bound (encoded as their columns encode them: JSON, booleans).
 */
export function insertRow<T extends SQLiteTable>(db: Db, table: T, row: T["$inferInsert"]): Statement {
  const values = Object.fromEntries(Object.entries(row).filter(([, value]) => value !== undefined));
  return preparedInsert(db, { table, columns: Object.keys(values) }).with(values);
}
