// Tenant scoping. Every query filters on the caller's account and mode (test or live: each mode
// sees only its own objects, so the other mode's id answers 404 as another account's does), and
// carries a check that the caller's key is still live, so a revoked key fails at once even when
// its lookup was cached, at no extra round trip. An empty answer is then told apart from
// revocation by keyIsLive() (src/auth/credentials.ts turns a dead key into the 401).
import { type SQL, type Placeholder, and, eq, isNull, sql } from "drizzle-orm";
import { type SQLiteColumn, alias } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";
import { apiKeys } from "./schema";
import { BATCH_GUARD_SQL, type Statement } from "./batch";
import { prepared, preparedRaw } from "./prepared";

/**
 * Whose objects these are: an account, in one mode. A request's caller is one; so is every row
 * (`accountId`, `livemode`), which is how background work writes in the mode of what it handles.
 */
export interface Tenant {
  accountId: string;
  /** true: live mode; false: test mode. */
  livemode: boolean;
}

/** Who is asking: the account and mode, and the API key behind the credential. */
export interface Caller extends Tenant {
  keyId: string;
}

/** A caller as a prepared statement's placeholders (src/db/prepared.ts), given by `callerValues`. */
export type CallerSlots = { [K in keyof Caller]: Caller[K] | Placeholder };
export const callerPlaceholders: CallerSlots = {
  accountId: sql.placeholder("accountId"),
  livemode: sql.placeholder("livemode"),
  keyId: sql.placeholder("keyId"),
};
// The mode is bound as SQLite stores it (drizzle binds a placeholder compared with eq() as given).
export const callerValues = (auth: Caller) => ({ accountId: auth.accountId, livemode: auth.livemode ? 1 : 0, keyId: auth.keyId });

/** A table of an account's objects: every one has both columns. */
export type TenantColumns = { accountId: SQLiteColumn; livemode: SQLiteColumn };

/** SQL: the row of `table` belongs to this account and mode (no key check: background work, guards). */
export const ownedBy = (table: TenantColumns, tenant: Tenant | CallerSlots): SQL =>
  and(eq(table.accountId, tenant.accountId), eq(table.livemode, tenant.livemode)) as SQL;

// Written with plain names: drizzle's relational queries re-alias interpolated columns.
// A key paused while its account moves to another shard (src/accounts/move.ts) is not live either.
export const liveCredential = (auth: CallerSlots): SQL =>
  sql`EXISTS (SELECT 1 FROM api_keys AS live_key WHERE live_key.id = ${auth.keyId} AND live_key.revoked_at IS NULL AND live_key.paused_at IS NULL)`;

/**
 * SQL: the account of `accountId` lives on this shard, not a copy being made of it, nor moved away
 * (src/accounts/move.ts). The cron's selections of work take only such accounts' rows.
 */
export const livesHere = (accountId: SQLiteColumn): SQL => sql`NOT EXISTS (SELECT 1 FROM accounts AS elsewhere WHERE elsewhere.id = ${accountId} AND elsewhere.moved_to IS NOT NULL)`;

/** SQL: the `livemode` column as a JSON boolean, for answers and event data built in SQL (json_object). */
export const livemodeJsonSql = (column: SQLiteColumn | SQL = sql.raw("livemode")): SQL => sql`json(CASE WHEN ${column} THEN 'true' ELSE 'false' END)`;

export function owned(table: TenantColumns, auth: CallerSlots, ...conditions: (SQL | undefined)[]): SQL {
  return and(eq(table.accountId, auth.accountId), eq(table.livemode, auth.livemode), liveCredential(auth), ...conditions) as SQL;
}

export const CREDENTIAL_REVOKED = "credential_revoked";

const credentialGuardStatement = preparedRaw(() => BATCH_GUARD_SQL(CREDENTIAL_REVOKED, liveCredential(callerPlaceholders)));

/**
 * SQL for a route's keyGuard (commit() in src/routes/write-path.ts): the caller's key is live, as
 * credentialGuard checks, and `condition` (the route's precondition, over callerPlaceholders and its
 * own placeholders) holds, both when the batch runs, in one statement; the key is refused first
 * (CREDENTIAL_REVOKED), then `reason`. Prepare it once per isolate (preparedRaw).
 */
export function keyAndConditionGuardSql(reason: string, condition: SQL): SQL {
  const live = liveCredential(callerPlaceholders);
  return sql`INSERT INTO batch_guards (reason) SELECT CASE WHEN ${live} THEN ${reason} ELSE ${CREDENTIAL_REVOKED} END WHERE NOT (${live} AND ${condition})`;
}

/** The first statement of every request's write batch. */
export const credentialGuard = (db: Db, auth: Caller): Statement => credentialGuardStatement(db).with(callerValues(auth));

/** The API keys table under the name the key checks give it (`live_key`). */
export const liveKeyTable = alias(apiKeys, "live_key");

/** SQL: `keys` (api_keys, or liveKeyTable) holds the key `keyId`, unrevoked and not paused. */
export const liveKeyIs = (keys: Record<"id" | "revokedAt" | "pausedAt", SQLiteColumn>, keyId: string | Placeholder): SQL =>
  and(eq(keys.id, keyId), isNull(keys.revokedAt), isNull(keys.pausedAt)) as SQL;

const liveKey = prepared((db) => db.select({ id: apiKeys.id }).from(apiKeys).where(liveKeyIs(apiKeys, sql.placeholder("keyId"))));

/** The key behind a credential if it is still live, as a batch statement: its result is empty when not. */
export const liveKeyStatement = (db: Db, keyId: string): Statement => liveKey(db).with({ keyId });

/** Whether the key still exists unrevoked: asked when a scoped read came back empty. */
export async function keyIsLive(db: Db, keyId: string): Promise<boolean> {
  return (await liveKey(db).execute({ keyId })).length > 0;
}
