// Tenant scoping. Every query filters on the caller's account, and carries a check that the
// caller's key is still live, so a revoked key fails at once even when its lookup was cached,
// at no extra round trip. An empty answer is then told apart from revocation by ensureLive().
import { type SQL, and, eq, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Auth } from "../lib/context";
import { forgetKey, revokedCredential } from "../auth/credentials";
import type { Db } from "./client";
import { apiKeys } from "./schema";
import { guard, type Statement } from "./batch";

// Written with plain names: drizzle's relational queries re-alias interpolated columns.
export const liveCredential = (auth: Auth): SQL =>
  sql`EXISTS (SELECT 1 FROM api_keys AS live_key WHERE live_key.id = ${auth.keyId} AND live_key.revoked_at IS NULL)`;

export function owned(table: { accountId: SQLiteColumn }, auth: Auth, ...conditions: (SQL | undefined)[]): SQL {
  return and(eq(table.accountId, auth.accountId), liveCredential(auth), ...conditions) as SQL;
}

export const CREDENTIAL_REVOKED = "credential_revoked";

/** The first statement of every request's write batch. */
export const credentialGuard = (db: Db, auth: Auth): Statement => guard(db, CREDENTIAL_REVOKED, liveCredential(auth));

/** Called when a scoped read came back empty: was it revocation, or really nothing there? */
export async function ensureLive(db: Db, auth: Auth): Promise<void> {
  const row = await db.query.apiKeys.findFirst({ columns: { revokedAt: true }, where: eq(apiKeys.id, auth.keyId) });
  if (!row || row.revokedAt) {
    forgetKey(auth.keyId);
    throw revokedCredential();
  }
}
