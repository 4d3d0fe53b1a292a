// An account's processor connection (live mode's Stripe account), as stored: the secrets sealed
// with the PROCESSOR_ENCRYPTION_KEY ring (src/lib/secret-box.ts), each bound to its account and
// field. This module is the one place that seals and opens them; nothing else reads the columns.
//
// Rotation: rows whose values name a key id other than the ring's first are sealed again under
// it by the cron (reencryptConnections), a bounded number per run, each row in one conditional
// UPDATE that only applies while the row is as it was read.
import { and, eq, or, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { createDb } from "../db/client";
import { processorConnections } from "../db/schema";
import { type Bindings, ProcessorEncryptionKeyMissing, processorEncryptionKeys } from "../env";
import { isoTime } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { type KeyRing, KeyRingInvalid, keyRing, open, seal, sealedKeyId } from "../lib/secret-box";

export type ConnectionRow = typeof processorConnections.$inferSelect;

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
export async function openSecrets(env: Bindings, row: ConnectionRow): Promise<ConnectionSecrets> {
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

/** Rows sealed again per cron run at the most. */
export const REENCRYPT_BATCH = 50;

/** SQL: some value of the row was sealed with a key other than `currentId`. */
const sealedWithOtherKey = (currentId: string) => {
  const prefix = `${currentId}:`;
  const other = (column: SQLiteColumn) => sql`substr(${column}, 1, ${prefix.length}) <> ${prefix}`;
  return or(
    other(processorConnections.secretKeyEncrypted),
    other(processorConnections.webhookSecretEncrypted),
    sql`(${processorConnections.connectWebhookSecretEncrypted} IS NOT NULL AND ${other(processorConnections.connectWebhookSecretEncrypted)})`,
  );
};

/**
 * The cron task of a key rotation: seals again, under the ring's first key, the connections that
 * name another key id. Each row is updated only if it still holds the values read (a PUT that
 * replaced it meanwhile wrote values under the current key already). Returns the rows re-sealed.
 */
export async function reencryptConnections(env: Bindings, now: number, limit = REENCRYPT_BATCH): Promise<number> {
  const text = (() => {
    try {
      return processorEncryptionKeys(env);
    } catch {
      // No key ring outside development: nothing can have been sealed, nothing to rotate.
      return null;
    }
  })();
  if (text === null) return 0;
  const ring = await keyRing(text);
  const db = createDb(env.DB);
  const rows = await db.select().from(processorConnections).where(sealedWithOtherKey(ring.currentId)).limit(limit);
  let done = 0;
  for (const row of rows) {
    let sealed: Awaited<ReturnType<typeof sealSecrets>>;
    try {
      sealed = await sealSecrets(env, row.accountId, await openSecrets(env, row));
    } catch (error) {
      // A value sealed with a key no longer in the ring: said once per run, and the others go on.
      // (The error names key ids and fields, never a secret.)
      console.error(JSON.stringify({ message: "processor connection not re-encrypted", account: row.accountId, error: String(error) }));
      continue;
    }
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
    done += updated.length;
  }
  return done;
}

/** The key ids a connection's values were sealed with (for tests and operators). */
export const sealedKeyIds = (row: ConnectionRow) =>
  [row.secretKeyEncrypted, row.webhookSecretEncrypted, row.connectWebhookSecretEncrypted].filter((v): v is string => v !== null).map(sealedKeyId);
