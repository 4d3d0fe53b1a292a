// Saved cards: a payment method (pmt_…) is a card made the user's at the processor, from a
// processor token (Stripe.js's PaymentMethod in live mode, Stripe's test PaymentMethod names in
// test mode) or from the card fields (vaulted as a subscription's card is). Rows keep the token
// that charges it and what a response may show; never card data. Detaching keeps the row, so
// payments made with it still name it; a detached card charges nothing.
import type { Context } from "hono";
import { type SQL, eq, sql } from "drizzle-orm";
import type { AppEnv } from "../context";
import { guard, runBatch } from "../db/batch";
import { claimLease, releaseLease } from "../db/leases";
import { jobRuns, paymentMethods } from "../db/schema";
import { randomToken } from "../lib/crypto";
import { owned } from "../db/scope";
import { type CardBrand, type CardSummary, cardFingerprint } from "../domain/cards";
import { hmacSha256Hex } from "../lib/crypto";
import { hasPrefix } from "../domain/ids";
import { invalidRequest, notFound } from "../lib/errors";
import { readOne } from "../routes/reads";

export type PaymentMethodRow = typeof paymentMethods.$inferSelect;

/** What a subscription or a payment keeps of the saved card it charges. */
export interface SavedCard {
  id: string;
  token: string;
  summary: CardSummary;
  fingerprint: string;
}

/** The statuses in which a subscription may still charge its card: its payment method is in use. */
export const CHARGING_STATUSES = ["incomplete", "trialing", "active", "past_due"] as const;

/** SQL: a subscription that may still charge it names payment method `id`. */
export const paymentMethodInUse = (id: string): SQL =>
  sql`EXISTS (SELECT 1 FROM subscriptions WHERE payment_method_id = ${id} AND status IN ('incomplete', 'trialing', 'active', 'past_due'))`;

/** How long a request that charges a saved card holds it against a detach (its processor call fits well inside). */
export const SAVED_CARD_HOLD_MS = 2 * 60_000;
const holdPrefix = (id: string) => `payment_method_charge:${id}:`;

/** SQL: a request is charging payment method `id` for a subscription (it holds the card, holdSavedCard). */
export const paymentMethodCharging = (id: string, now: number): SQL =>
  sql`EXISTS (SELECT 1 FROM ${jobRuns} WHERE substr(${jobRuns.key}, 1, ${holdPrefix(id).length}) = ${holdPrefix(id)} AND ${jobRuns.leaseUntil} > ${now})`;

const SAVED_CARD_DETACHED = "payment_method_detached";

/**
 * Holds saved card `id` while a request charges it for a subscription, so that a detach meanwhile
 * answers 409 payment_method_in_use rather than leave the subscription on a detached card. One
 * batch: the card is still attached (else 400 payment_method_detached: a detach came first) and
 * this request's hold is taken. `release` gives it back (best effort: it runs out by itself).
 */
export async function holdSavedCard(c: Context<AppEnv>, id: string, now: number): Promise<{ release: () => Promise<void> }> {
  const { db } = c.var;
  const key = `${holdPrefix(id)}${randomToken(16)}`;
  await runBatch(db, [guard(db, SAVED_CARD_DETACHED, sql`EXISTS (SELECT 1 FROM ${paymentMethods} WHERE ${paymentMethods.id} = ${id} AND ${paymentMethods.detachedAt} IS NULL)`), claimLease(db, key, now, SAVED_CARD_HOLD_MS)], {
    [SAVED_CARD_DETACHED]: () => invalidRequest("payment_method_detached", `Payment method ${id} was detached meanwhile and can be charged no more.`, "payment_method"),
  });
  return {
    release: () =>
      releaseLease(db, key).catch((error) => {
        console.error(JSON.stringify({ message: "saved card hold not released; it runs out by itself", payment_method: id, error: String(error) }));
      }),
  };
}

/** The payment method field sent in place of the card fields: "pmt_…" (payment_method "card" means the card fields). */
export const isPaymentMethodId = (value: unknown): value is string => typeof value === "string" && value.startsWith("pmt_");

/**
 * The saved card `id` for a charge of `userId`: one of the caller's account and mode, and the
 * user's, else 404 (another account's, mode's or user's card is not there to this request); a
 * detached one answers 400 payment_method_detached.
 */
export async function savedCardFor(c: Context<AppEnv>, id: string, userId: string, param = "payment_method"): Promise<SavedCard> {
  const { db, auth } = c.var;
  if (!hasPrefix(id, "paymentMethod")) throw notFound("payment_method", id, param);
  const row = await readOne(c, db.select().from(paymentMethods).where(owned(paymentMethods, auth, eq(paymentMethods.id, id))).limit(1), "payment_method", id, param);
  if (row.userId !== userId) throw notFound("payment_method", id, param);
  if (row.detachedAt !== null) {
    throw invalidRequest(
      "payment_method_detached",
      `Payment method ${id} was detached (${row.detachedAt}) and can be charged no more: save the card again (POST /api/users/${userId}/payment-methods).`,
      param,
    );
  }
  return savedCardOf(row);
}

export const savedCardOf = (row: PaymentMethodRow): SavedCard => ({
  id: row.id,
  token: row.processorToken,
  // A brand as the processor named it (Stripe's card.brand: the same names as Tender's).
  summary: { brand: row.cardBrand as CardBrand, last4: row.cardLast4, exp_month: row.cardExpMonth, exp_year: row.cardExpYear },
  fingerprint: row.cardFingerprint,
});

/**
 * The keyed fingerprint of a card the processor tokenized: a test card's number is fingerprinted
 * as the card fields are (the same card, the same fingerprint); a processor's own fingerprint
 * (`stripe:…`) is keyed the same way, so neither is stored as it came.
 */
export const tokenizedCardFingerprint = (source: string, key: string): Promise<string> =>
  /^[0-9]+$/.test(source) ? cardFingerprint(source, key) : hmacSha256Hex(key, source);
