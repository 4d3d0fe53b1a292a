// Tenant scoping. Every query filters on the caller's account, and carries a check that the
// caller's key is still live, so a revoked key fails at once even when its lookup was cached,
// at no extra round trip. An empty answer is then told apart from revocation by keyIsLive()
// (src/auth/credentials.ts turns a dead key into the 401).
import { type SQL, and, eq, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";
import { apiKeys } from "./schema";
import { guard, type Statement } from "./batch";

/** Who is asking: the account, and the API key behind the credential. */
export interface Caller {
  accountId: string;
  keyId: string;
}

// Written with plain names: drizzle's relational queries re-alias interpolated columns.
export const liveCredential = (auth: Caller): SQL =>
  sql`EXISTS (SELECT 1 FROM api_keys AS live_key WHERE live_key.id = ${auth.keyId} AND live_key.revoked_at IS NULL)`;

export function owned(table: { accountId: SQLiteColumn }, auth: Caller, ...conditions: (SQL | undefined)[]): SQL {
  return and(eq(table.accountId, auth.accountId), liveCredential(auth), ...conditions) as SQL;
}

export const CREDENTIAL_REVOKED = "credential_revoked";

/** The first statement of every request's write batch. */
export const credentialGuard = (db: Db, auth: Caller): Statement => guard(db, CREDENTIAL_REVOKED, liveCredential(auth));

/** Whether the key still exists unrevoked: asked when a scoped read came back empty. */
export async function keyIsLive(db: Db, keyId: string): Promise<boolean> {
  const row = await db.query.apiKeys.findFirst({ columns: { revokedAt: true }, where: eq(apiKeys.id, keyId) });
  return row !== undefined && row.revokedAt === null;
}
