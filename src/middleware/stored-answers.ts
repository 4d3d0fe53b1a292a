// What an idempotency record keeps as its answer, and what a replay of it sends.
//
// Most writes store their answer's JSON, with every field that shows a secret once set to null.
// A write whose answer is an object it does not read before its batch (a PATCH of a plan, a
// cancel) stores the object's row instead, as the batch committed it (`rowAnswer`): the replay
// serializes that row with the same serializer as the live answer, so the answer has one home,
// and the write needs no read before its batch (one round trip). Columns that are not the
// caller's to see (a processor token) are left out of the stored row. A subscription
// notification's `data` is kept the same way (src/webhooks/payload.ts serializes it).
import { type SQL, getTableColumns, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";

/** Fields that show a secret once; a stored answer keeps them as null. */
const SECRET_FIELDS = new Set(["secret", "api_key", "live_api_key", "access_token"]);

/** The answer as stored for replays: the same JSON with every secret field set to null. */
export function withoutSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSecrets);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, SECRET_FIELDS.has(key) ? null : withoutSecrets(field)]));
}

interface RowAnswerSpec {
  table: SQLiteTable;
  serialize: (row: never) => unknown;
}
const rowAnswers = new Map<string, RowAnswerSpec>();
const ROW_TAG = '{"$row":';

/** A kind of answer stored as its row: see rowAnswer. */
export interface RowAnswer<Row, Json> {
  serialize: (row: Row) => Json;
  /** SQL for the record's answer: the row `where` finds when the batch runs this statement. */
  stored: (where: SQL) => SQL;
}

/**
 * The answer of `kind` is `serialize(row)` of a row of `table`. Defined once per kind, at module
 * level, so every replay finds it.
 */
export function rowAnswer<T extends SQLiteTable, Row extends T["$inferSelect"], Json>(
  kind: string,
  table: T,
  serialize: (row: Row) => Json,
  omit: (keyof Row & string)[] = [],
): RowAnswer<Row, Json> {
  if (rowAnswers.has(kind)) throw new Error(`row answer ${kind} defined twice`);
  rowAnswers.set(kind, { table, serialize: serialize as (row: never) => unknown });
  const columns = Object.entries(getTableColumns(table)).filter(([key]) => !omit.includes(key as keyof Row & string));
  const rowJson = sql.join(
    columns.map(([key, column]) => sql`${sql.raw(`'${key}'`)}, ${column}`),
    sql`, `,
  );
  return {
    serialize,
    stored: (where) => sql`(SELECT json_object('$row', ${sql.raw(`'${kind}'`)}, 'row', json_object(${rowJson})) FROM ${table} WHERE ${where})`,
  };
}

/** A row as `stored` keeps it: `{ "$row": kind, "row": { column: value } }`. */
export interface StoredRow {
  $row: string;
  row: Record<string, unknown>;
}

export const isStoredRow = (value: unknown): value is StoredRow =>
  typeof value === "object" && value !== null && typeof (value as StoredRow).$row === "string" && typeof (value as StoredRow).row === "object";

/** A stored row, serialized by its kind's one serializer (its columns decoded as drizzle reads them). */
export function serializeStoredRow({ $row: kind, row }: StoredRow): unknown {
  const spec = rowAnswers.get(kind);
  if (!spec) throw new Error(`stored row of unknown kind ${kind}`);
  const decoded: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(getTableColumns(spec.table))) {
    const value = row[key];
    decoded[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return spec.serialize(decoded as never);
}

/** The text a replay sends: a stored row serialized as its live answer was, any other answer as stored. */
export function replayText(stored: string): string {
  if (!stored.startsWith(ROW_TAG)) return stored;
  return JSON.stringify(withoutSecrets(serializeStoredRow(JSON.parse(stored) as StoredRow)));
}
