// Who a one-off payment charges: its user and, when it names one, the user's saved card, read in
// ONE statement with the check that the caller's key is live (the key's row, left-joined to the
// user and to the card, each scoped to the caller's account and mode). A claim-first request reads
// it in the same batch as its Idempotency-Key's claim (src/middleware/idempotency.ts, claimReads):
// the claim and the payer cost one round trip, and the charge still comes after the claim.
//
// A test-mode payment with a saved card may take its payer from this isolate's memory instead
// (rememberPayer, cachedPayer): the payment's own batch then carries keyAndPayerStillAsRead, which aborts
// it (PAYER_CHANGED) unless the user and card are still there, of this account and mode, the card
// the user's and attached, as they were read. So the memory only ever saves the read: a request
// it would let through that the read would refuse writes nothing, and is read again.
import type { Context } from "hono";
import { and, eq, sql } from "drizzle-orm";
import type { AppEnv } from "../context";
import type { Statement } from "../db/batch";
import { paymentMethods, users } from "../db/schema";
import { callerPlaceholders, callerValues, keyAndConditionGuardSql, liveKeyIs, liveKeyTable, ownedBy } from "../db/scope";
import { preparedBy, preparedRaw } from "../db/prepared";
import type { Tenant } from "../db/scope";
import { hasPrefix } from "../domain/ids";
import type { CardBrand } from "../domain/cards";
import { invalidRequest, notFound } from "../lib/errors";
import { revokedCredential } from "../auth/credentials";
import type { SavedCard } from "./methods";

/** The payer's row: the user's and the card's columns, each named apart (D1 keys a batch row by name). */
interface PayerRow {
  userId: string | null;
  userEmail: string | null;
  cardId: string | null;
  cardUserId: string | null;
  cardDetachedAt: string | null;
  cardToken: string | null;
  cardBrand: string | null;
  cardLast4: string | null;
  cardExpMonth: number | null;
  cardExpYear: number | null;
  cardFingerprint: string | null;
}

const payerRead = preparedBy(
  (db, _shape: null) =>
    db
      .select({
        userId: sql<string | null>`${users.id}`.as("payer_user_id"),
        userEmail: sql<string | null>`${users.email}`.as("payer_user_email"),
        cardId: sql<string | null>`${paymentMethods.id}`.as("payer_card_id"),
        cardUserId: sql<string | null>`${paymentMethods.userId}`.as("payer_card_user_id"),
        cardDetachedAt: sql<string | null>`${paymentMethods.detachedAt}`.as("payer_card_detached_at"),
        cardToken: sql<string | null>`${paymentMethods.processorToken}`.as("payer_card_token"),
        cardBrand: sql<string | null>`${paymentMethods.cardBrand}`.as("payer_card_brand"),
        cardLast4: sql<string | null>`${paymentMethods.cardLast4}`.as("payer_card_last4"),
        cardExpMonth: sql<number | null>`${paymentMethods.cardExpMonth}`.as("payer_card_exp_month"),
        cardExpYear: sql<number | null>`${paymentMethods.cardExpYear}`.as("payer_card_exp_year"),
        cardFingerprint: sql<string | null>`${paymentMethods.cardFingerprint}`.as("payer_card_fingerprint"),
      })
      .from(liveKeyTable)
      .leftJoin(users, and(eq(users.id, sql.placeholder("userId")), ownedBy(users, callerPlaceholders)))
      .leftJoin(paymentMethods, and(eq(paymentMethods.id, sql.placeholder("cardId")), ownedBy(paymentMethods, callerPlaceholders)))
      .where(liveKeyIs(liveKeyTable, callerPlaceholders.keyId))
      .limit(1),
);

/** Which payer a request names: its user_id and, if any, its saved card's id. */
export interface PayerIds {
  userId: string;
  cardId?: string;
}

/** The payer read for `ids` as one statement of a batch (its result: no row when the key is dead). */
export const payerStatement = (c: Context<AppEnv>, ids: PayerIds): Statement & { readonly result?: PayerRow[] } =>
  payerRead(c.var.db, null).with({ ...callerValues(c.var.auth), userId: ids.userId, cardId: ids.cardId ?? null }) as Statement & { readonly result?: PayerRow[] };

/** A payer read made ahead (in the claim's batch), for the ids it was made for. */
export interface PayerPreread {
  ids: PayerIds;
  rows: unknown;
}

export interface Payer {
  user: { id: string; email: string };
  saved?: SavedCard;
}

/**
 * The user and saved card of a payment, answered as the separate reads answered: 401 for a key no
 * longer live; 404 naming user_id for a user not of this account and mode; 404 naming
 * payment_method for a card not of this account, mode or user; 400 payment_method_detached for a
 * detached card. Uses `preread` when it was made for these same ids, else reads (one round trip).
 */
export async function readPayer(c: Context<AppEnv>, ids: PayerIds, preread?: PayerPreread): Promise<Payer> {
  if (!hasPrefix(ids.userId, "user")) throw notFound("user", ids.userId, "user_id");
  const reusable = preread && preread.ids.userId === ids.userId && preread.ids.cardId === ids.cardId;
  const rows = (reusable ? preread.rows : await c.var.db.batch([payerStatement(c, ids)] as unknown as [Statement]).then(([r]) => r)) as PayerRow[];
  const [row] = rows;
  if (row === undefined) throw revokedCredential(c.var.auth.keyId);
  if (row.userId === null || row.userEmail === null) throw notFound("user", ids.userId, "user_id");
  const user = { id: row.userId, email: row.userEmail };
  if (ids.cardId === undefined) return { user };
  if (row.cardId === null || row.cardUserId !== user.id) throw notFound("payment_method", ids.cardId, "payment_method");
  if (row.cardDetachedAt !== null) {
    throw invalidRequest(
      "payment_method_detached",
      `Payment method ${ids.cardId} was detached (${row.cardDetachedAt}) and can be charged no more: save the card again (POST /api/users/${user.id}/payment-methods).`,
      "payment_method",
    );
  }
  return {
    user,
    saved: {
      id: row.cardId,
      token: row.cardToken!,
      summary: { brand: row.cardBrand as CardBrand, last4: row.cardLast4!, exp_month: row.cardExpMonth!, exp_year: row.cardExpYear! },
      fingerprint: row.cardFingerprint!,
    },
  };
}

/** Guard reason: the payer is no longer as it was read (a user or card gone, moved, detached, changed). */
export const PAYER_CHANGED = "payer_changed";

/**
 * The guard of a payment's batch: the user (of this account and mode, with the email the payment's
 * event names) and the saved card (the same account and mode, the user's, attached, with the token
 * that was charged) are still as they were read. Prepared once per isolate.
 */
const payerAsRead = () =>
  sql`EXISTS (SELECT 1 FROM ${users} JOIN ${paymentMethods} ON ${paymentMethods.id} = ${sql.placeholder("cardId")} AND ${paymentMethods.userId} = ${users.id}
      AND ${paymentMethods.accountId} = ${users.accountId} AND ${paymentMethods.livemode} = ${users.livemode}
      AND ${paymentMethods.detachedAt} IS NULL AND ${paymentMethods.processorToken} = ${sql.placeholder("token")}
      WHERE ${users.id} = ${sql.placeholder("userId")} AND ${users.accountId} = ${sql.placeholder("accountId")} AND ${users.livemode} = ${sql.placeholder("livemode")}
      AND ${users.email} = ${sql.placeholder("email")})`;

/**
 * The same, with the caller's key (what credentialGuard checks, and refused first: 401 before a
 * changed payer) in one statement: the batch's keyGuard, as the payout's recipient rides with its key.
 */
const keyAndPayerGuard = preparedRaw(() => keyAndConditionGuardSql(PAYER_CHANGED, payerAsRead()));

/**
 * The statement that aborts a batch unless the caller's key is live (CREDENTIAL_REVOKED) and `payer`
 * (with its saved card) is still as read (PAYER_CHANGED): given to commit() as its keyGuard.
 */
export const keyAndPayerStillAsRead = (c: Context<AppEnv>, payer: Payer & { saved: SavedCard }): Statement =>
  keyAndPayerGuard(c.var.db).with({
    ...callerValues(c.var.auth),
    userId: payer.user.id,
    email: payer.user.email,
    cardId: payer.saved.id,
    token: payer.saved.token,
  });

/**
 * Payers read in this isolate, by account, mode, user and card: what a saved card's payment takes
 * from memory (never trusted alone: its batch carries keyAndPayerStillAsRead). Bounded: the oldest entry
 * goes first.
 */
const rememberedPayers = new Map<string, Payer & { saved: SavedCard }>();
const REMEMBERED_PAYERS = 1000;
const payerKey = (tenant: Tenant, ids: PayerIds) => `${tenant.accountId}:${tenant.livemode ? "live" : "test"}:${ids.userId}:${ids.cardId ?? ""}`;

export function cachedPayer(tenant: Tenant, ids: PayerIds): (Payer & { saved: SavedCard }) | undefined {
  return rememberedPayers.get(payerKey(tenant, ids));
}

export function rememberPayer(tenant: Tenant, ids: PayerIds, payer: Payer & { saved: SavedCard }): void {
  const key = payerKey(tenant, ids);
  rememberedPayers.delete(key);
  if (rememberedPayers.size >= REMEMBERED_PAYERS) rememberedPayers.delete(rememberedPayers.keys().next().value!);
  rememberedPayers.set(key, payer);
}

export function forgetPayer(tenant: Tenant, ids: PayerIds): void {
  rememberedPayers.delete(payerKey(tenant, ids));
}
