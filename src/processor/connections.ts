// An account's processor connection (live mode's Stripe account), as stored: the secrets sealed
// with the PROCESSOR_ENCRYPTION_KEY ring (src/lib/secret-box.ts), each bound to its account and
// field. This module is the one place that seals and opens them; nothing else reads the columns.
//
// Retirement: a connection removed (DELETE) or replaced by another Stripe account's (PUT) is
// retired, not forgotten: its sealed values move, as they are, to retired_processor_connections,
// where they serve only to verify and settle Stripe's events about objects made through it (a
// payout that fails days later has its transfer reversed with its key), never new money.
//
// Rotation: rows (live and retired) whose values name a key id other than the ring's first are
// sealed again under it by the cron (reencryptConnections), walked page by page in key order so
// that every row is reached; a row that cannot be opened is reported and skipped. Each row is
// written in one conditional UPDATE that only applies while the row is as it was read.
import { and, asc, eq, gt, or, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { createDb } from "../db/client";
import { processorConnections, retiredProcessorConnections } from "../db/schema";
import { rawStatement, type Statement } from "../db/batch";
import { type Bindings, ProcessorEncryptionKeyMissing, processorEncryptionKeys } from "../env";
import { isoTime } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { type KeyRing, KeyRingInvalid, keyRing, open, seal, sealedKeyId } from "../lib/secret-box";

export type ConnectionRow = typeof processorConnections.$inferSelect;
export type RetiredConnectionRow = typeof retiredProcessorConnections.$inferSelect;
/** What opening a connection's secrets needs, live or retired: the same sealed columns. */
type SealedRow = Pick<ConnectionRow, "accountId" | "secretKeyEncrypted" | "webhookSecretEncrypted" | "connectWebhookSecretEncrypted">;

/** The fields sealed, by their name in the additional data. */
type SealedField = "secret_key" | "webhook_secret" | "connect_webhook_secret";

const context = (accountId: string, field: SealedField) => `processor_connections:${accountId}:${field}`;

/** The secrets of a connection, in clear: only ever held in memory for the call that needs them. */
export interface ConnectionSecrets {
  secretKey: string;
  webhookSecret: string;
  connectWebhookSecret: string | null;
}

/**
 * The key ring, or a 500 that says what is wrong with the configuration (never a key): no key
 * outside development, or a malformed one. Nothing is ever stored in clear instead.
 */
export async function ringOf(env: Bindings): Promise<KeyRing> {
  try {
    return await keyRing(processorEncryptionKeys(env));
  } catch (error) {
    if (error instanceof ProcessorEncryptionKeyMissing || error instanceof KeyRingInvalid) {
      console.error(JSON.stringify({ message: "processor secrets unavailable", error: error.message }));
      const missing = error instanceof ProcessorEncryptionKeyMissing;
      throw new ApiError(
        500,
        "api_error",
        missing ? "processor_encryption_key_missing" : "processor_encryption_key_invalid",
        missing
          ? "This Tender cannot store or read processor secrets: its PROCESSOR_ENCRYPTION_KEY secret is not set. Nothing was stored."
          : "This Tender cannot store or read processor secrets: its PROCESSOR_ENCRYPTION_KEY secret is malformed. Nothing was stored.",
      );
    }
    throw error;
  }
}

/** The sealed columns of a connection's secrets, for its account. */
export async function sealSecrets(env: Bindings, accountId: string, secrets: ConnectionSecrets) {
  const ring = await ringOf(env);
  return {
    secretKeyEncrypted: await seal(ring, secrets.secretKey, context(accountId, "secret_key")),
    secretKeyLast4: secrets.secretKey.slice(-4),
    webhookSecretEncrypted: await seal(ring, secrets.webhookSecret, context(accountId, "webhook_secret")),
    connectWebhookSecretEncrypted: secrets.connectWebhookSecret === null ? null : await seal(ring, secrets.connectWebhookSecret, context(accountId, "connect_webhook_secret")),
  };
}

/** Opens a stored connection's secrets. */
export async function openSecrets(env: Bindings, row: SealedRow): Promise<ConnectionSecrets> {
  const ring = await ringOf(env);
  return {
    secretKey: await open(ring, row.secretKeyEncrypted, context(row.accountId, "secret_key")),
    webhookSecret: await open(ring, row.webhookSecretEncrypted, context(row.accountId, "webhook_secret")),
    connectWebhookSecret:
      row.connectWebhookSecretEncrypted === null ? null : await open(ring, row.connectWebhookSecretEncrypted, context(row.accountId, "connect_webhook_secret")),
  };
}

/** The account's connection row, or null. */
export async function readConnection(db: Db, accountId: string): Promise<ConnectionRow | null> {
  const [row] = await db.select().from(processorConnections).where(eq(processorConnections.accountId, accountId)).limit(1);
  return row ?? null;
}

/**
 * The statement that retires the account's connection as the batch finds it (kept in the
 * caller's batch, before the DELETE or the upsert that replaces it): its sealed values, as they
 * are, under (account, Stripe account). `unlessAccount`: only if it is of another Stripe account
 * (a PUT with the same account's rolled key retires nothing). A connection of that Stripe account
 * retired before is replaced by the newer secrets.
 */
export function retireConnection(db: Db, accountId: string, now: number, unlessAccount?: string): Statement {
  const c = processorConnections;
  const other = unlessAccount === undefined ? sql`` : sql` AND ${c.processorAccount} <> ${unlessAccount}`;
  return rawStatement(
    db,
    sql`INSERT INTO ${retiredProcessorConnections} (account_id, livemode, provider, processor_account, secret_key_encrypted, secret_key_last4,
          webhook_secret_encrypted, connect_webhook_secret_encrypted, created_at, updated_at, retired_at)
        SELECT ${c.accountId}, 1, ${c.provider}, ${c.processorAccount}, ${c.secretKeyEncrypted}, ${c.secretKeyLast4},
          ${c.webhookSecretEncrypted}, ${c.connectWebhookSecretEncrypted}, ${c.createdAt}, ${c.updatedAt}, ${isoTime(now)}
        FROM ${c} WHERE ${c.accountId} = ${accountId}${other}
        ON CONFLICT (account_id, processor_account) DO UPDATE SET provider = excluded.provider,
          secret_key_encrypted = excluded.secret_key_encrypted, secret_key_last4 = excluded.secret_key_last4,
          webhook_secret_encrypted = excluded.webhook_secret_encrypted, connect_webhook_secret_encrypted = excluded.connect_webhook_secret_encrypted,
          updated_at = excluded.updated_at, retired_at = excluded.retired_at`,
  );
}

/** A connection an event may be verified against: the live one, or a retired one. */
export interface EventConnection {
  processorAccount: string;
  retired: boolean;
  row: SealedRow;
}

/** Every connection the account has had that its Stripe events may be signed for: the live one first. */
export async function eventConnections(db: Db, accountId: string): Promise<EventConnection[]> {
  const [live, retired] = await db.batch([
    db.select().from(processorConnections).where(eq(processorConnections.accountId, accountId)).limit(1),
    db.select().from(retiredProcessorConnections).where(eq(retiredProcessorConnections.accountId, accountId)).orderBy(asc(retiredProcessorConnections.processorAccount)),
  ]);
  return [
    ...live.map((row) => ({ processorAccount: row.processorAccount, retired: false, row })),
    ...retired.map((row) => ({ processorAccount: row.processorAccount, retired: true, row })),
  ];
}

/**
 * The connection of one Stripe account of this Tender account: the live one when it is that
 * account's (its newest key), else the retired one. Only for settling what was made through it.
 */
export async function connectionThrough(db: Db, accountId: string, processorAccount: string): Promise<SealedRow | null> {
  const live = await readConnection(db, accountId);
  if (live && live.processorAccount === processorAccount) return live;
  const [retired] = await db
    .select()
    .from(retiredProcessorConnections)
    .where(and(eq(retiredProcessorConnections.accountId, accountId), eq(retiredProcessorConnections.processorAccount, processorAccount)))
    .limit(1);
  return retired ?? null;
}

/** Rows read per page of a re-encryption run. */
export const REENCRYPT_BATCH = 50;

/** SQL: some value of the row was sealed with a key other than `currentId`. */
const sealedWithOtherKey = (currentId: string, table: typeof processorConnections | typeof retiredProcessorConnections) => {
  const prefix = `${currentId}:`;
  const other = (column: SQLiteColumn) => sql`substr(${column}, 1, ${prefix.length}) <> ${prefix}`;
  return or(
    other(table.secretKeyEncrypted),
    other(table.webhookSecretEncrypted),
    sql`(${table.connectWebhookSecretEncrypted} IS NOT NULL AND ${other(table.connectWebhookSecretEncrypted)})`,
  );
};

export interface ReencryptResult {
  /** Rows sealed again under the ring's first key. */
  resealed: number;
  /** Rows that could not be opened (a key id no longer in the ring), reported and left as they are. */
  skipped: number;
}

/**
 * The cron task of a key rotation: seals again, under the ring's first key, the connections
 * (live and retired) that name another key id. Rows are walked in key order, a page of `pageSize`
 * at a time after the last one seen, so a row that cannot be opened never hides the ones after it.
 * Each row is updated only if it still holds the values read (a PUT that replaced it meanwhile
 * wrote values under the current key already).
 */
export async function reencryptConnections(env: Bindings, now: number, pageSize = REENCRYPT_BATCH): Promise<ReencryptResult> {
  const text = (() => {
    try {
      return processorEncryptionKeys(env);
    } catch {
      // No key ring outside development: nothing can have been sealed, nothing to rotate.
      return null;
    }
  })();
  const result: ReencryptResult = { resealed: 0, skipped: 0 };
  if (text === null) return result;
  const ring = await keyRing(text);
  const db = createDb(env.DB);
  const unopened: string[] = [];

  /** Opens and seals one row again; null (reported) when it cannot be opened. */
  const resealed = async (row: SealedRow, table: string) => {
    try {
      return await sealSecrets(env, row.accountId, await openSecrets(env, row));
    } catch (error) {
      // A value sealed with a key no longer in the ring. (The error names key ids and fields, never a secret.)
      console.error(JSON.stringify({ message: "processor connection not re-encrypted", table, account: row.accountId, error: String(error) }));
      unopened.push(row.accountId);
      return null;
    }
  };

  // Live connections: one per account, keyed by account.
  for (let after = ""; ; ) {
    const rows = await db
      .select()
      .from(processorConnections)
      .where(and(gt(processorConnections.accountId, after), sealedWithOtherKey(ring.currentId, processorConnections)))
      .orderBy(asc(processorConnections.accountId))
      .limit(pageSize);
    for (const row of rows) {
      const sealed = await resealed(row, "processor_connections");
      if (!sealed) continue;
      const updated = await db
        .update(processorConnections)
        .set({ ...sealed, updatedAt: isoTime(now) })
        .where(
          and(
            eq(processorConnections.accountId, row.accountId),
            eq(processorConnections.secretKeyEncrypted, row.secretKeyEncrypted),
            eq(processorConnections.webhookSecretEncrypted, row.webhookSecretEncrypted),
          ),
        )
        .returning({ accountId: processorConnections.accountId });
      result.resealed += updated.length;
    }
    if (rows.length < pageSize) break;
    after = rows[rows.length - 1].accountId;
  }

  // Retired connections: keyed by (account, Stripe account).
  const retired = retiredProcessorConnections;
  for (let after = { accountId: "", processorAccount: "" }; ; ) {
    const rows = await db
      .select()
      .from(retired)
      .where(
        and(
          or(gt(retired.accountId, after.accountId), and(eq(retired.accountId, after.accountId), gt(retired.processorAccount, after.processorAccount))),
          sealedWithOtherKey(ring.currentId, retired),
        ),
      )
      .orderBy(asc(retired.accountId), asc(retired.processorAccount))
      .limit(pageSize);
    for (const row of rows) {
      const sealed = await resealed(row, "retired_processor_connections");
      if (!sealed) continue;
      const { secretKeyLast4: _last4, ...values } = sealed;
      const updated = await db
        .update(retired)
        .set(values)
        .where(
          and(
            eq(retired.accountId, row.accountId),
            eq(retired.processorAccount, row.processorAccount),
            eq(retired.secretKeyEncrypted, row.secretKeyEncrypted),
            eq(retired.webhookSecretEncrypted, row.webhookSecretEncrypted),
          ),
        )
        .returning({ accountId: retired.accountId });
      result.resealed += updated.length;
    }
    if (rows.length < pageSize) break;
    const last = rows[rows.length - 1];
    after = { accountId: last.accountId, processorAccount: last.processorAccount };
  }

  result.skipped = unopened.length;
  if (unopened.length > 0) {
    console.error(JSON.stringify({ message: "processor connections left under a key no longer in the ring", count: unopened.length, accounts: [...new Set(unopened)].slice(0, 100) }));
  }
  return result;
}

/** The key ids a connection's values were sealed with (for tests and operators). */
export const sealedKeyIds = (row: SealedRow) =>
  [row.secretKeyEncrypted, row.webhookSecretEncrypted, row.connectWebhookSecretEncrypted].filter((v): v is string => v !== null).map(sealedKeyId);
