// Tenant scoping. Every query filters on the caller's account, and carries a check that the
// caller's key is still live, so a revoked key fails at once even when its lookup was cached,
// at no extra round trip. An empty answer is then told apart from revocation by keyIsLive()
// (src/auth/credentials.ts turns a dead key into the 401).
import { type SQL, type Placeholder, and, eq, isNull, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";
import { apiKeys } from "./schema";
import { BATCH_GUARD_SQL, type Statement } from "./batch";
import { prepared, preparedRaw } from "./prepared";

/** Who is asking: the account, and the API key behind the credential. */
export interface Caller {
  accountId: string;
  keyId: string;
}

/** A caller as a prepared statement's placeholders (src/db/prepared.ts), given by `callerValues`. */
export type CallerSlots = { [K in keyof Caller]: Caller[K] | Placeholder };
export const callerPlaceholders: CallerSlots = { accountId: sql.placeholder("accountId"), keyId: sql.placeholder("keyId") };
export const callerValues = (auth: Caller) => ({ accountId: auth.accountId, keyId: auth.keyId });

// Written with plain names: drizzle's relational queries re-alias interpolated columns.
export const liveCredential = (auth: CallerSlots): SQL =>
  sql`EXISTS (SELECT 1 FROM api_keys AS live_key WHERE live_key.id = ${auth.keyId} AND live_key.revoked_at IS NULL)`;

export function owned(table: { accountId: SQLiteColumn }, auth: CallerSlots, ...conditions: (SQL | undefined)[]): SQL {
  return and(eq(table.accountId, auth.accountId), liveCredential(auth), ...conditions) as SQL;
}

export const CREDENTIAL_REVOKED = "credential_revoked";

const credentialGuardStatement = preparedRaw(() => BATCH_GUARD_SQL(CREDENTIAL_REVOKED, liveCredential(callerPlaceholders)));

/** The first statement of every request's write batch. */
export const credentialGuard = (db: Db, auth: Caller): Statement => credentialGuardStatement(db).with(callerValues(auth));

const liveKey = prepared((db) =>
  db.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, sql.placeholder("keyId")), isNull(apiKeys.revokedAt))),
);

/** The key behind a credential if it is still live, as a batch statement: its result is empty when not. */
export const liveKeyStatement = (db: Db, keyId: string): Statement => liveKey(db).with({ keyId });

/** Whether the key still exists unrevoked: asked when a scoped read came back empty. */
export async function keyIsLive(db: Db, keyId: string): Promise<boolean> {
  return (await liveKey(db).execute({ keyId })).length > 0;
}
