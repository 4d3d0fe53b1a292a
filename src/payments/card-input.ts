// The card fields a request carries (payouts, subscriptions), validated into what the processor
// needs and what Tender may keep. The PAN and CVV leave this module only inside `card`, which is
// handed to the processor and never stored: rows keep `summary` and `fingerprint`.
import { z } from "@hono/zod-openapi";
import { type CardSummary, cardFingerprint, checkCard } from "../domain/cards";
import { type Bindings, cardFingerprintSecret } from "../env";
import { invalidCard, invalidRequest } from "../lib/errors";
import type { CardDetails } from "../processor/types";

export const PAYMENT_METHODS = ["card"] as const;

/**
 * The request's card fields, to spread into a body schema: `bodyObject({ ...CardFields, ... })`.
 * Their messages never repeat what was sent: it may be a card number or a CVV.
 */
export const CardFields = {
  payment_method: z
    .string({ error: 'payment_method must be "card" (with the card fields) or a saved card\'s id (pmt_…).' })
    .max(100)
    .openapi({
      description:
        "`card` with the card fields below; or, where a saved card may be charged (subscriptions), the id of one of the user's payment methods (`pmt_…`, POST /api/users/{id}/payment-methods), sent without the card fields.",
      example: "card",
    }),
  card_number: z
    .string({ error: "card_number must be the card number as a string of digits (spaces and dashes allowed), at most 32 characters." })
    .max(32)
    .openapi({ description: "The card number (PAN). Checked with Luhn; never stored or echoed.", example: "4242424242424242" }),
  expiration_month: z.number({ error: "expiration_month must be a number from 1 to 12." }).openapi({ type: "integer", minimum: 1, maximum: 12, description: "Expiry month, 1 to 12.", example: 12 }),
  expiration_year: z.number({ error: "expiration_year must be a four-digit year, such as 2030." }).openapi({ type: "integer", description: "Four-digit expiry year; the card must not be expired.", example: 2030 }),
  cvv: z
    .string({ error: "cvv must be the card's security code as a string of digits: 3, or 4 for American Express." })
    .max(8)
    .openapi({ description: "Card security code: 3 digits, 4 for American Express. Never stored.", example: "123" }),
};

/** The card fields as an object schema, for a body that carries nothing else. */
export const CardFieldsSchema = z.object(CardFields);
export type CardFieldsInput = z.infer<typeof CardFieldsSchema>;

/** How every response shows a card: never more than this. */
export const CardSummarySchema = z
  .object({
    brand: z.string().openapi({ example: "visa" }),
    last4: z.string().openapi({ example: "4242" }),
    exp_month: z.number().int().openapi({ example: 12 }),
    exp_year: z.number().int().openapi({ example: 2030 }),
  })
  .openapi("Card");

export interface CardInput {
  /** For the processor only: holds the PAN and CVV. Never store, log or serialize it. */
  card: CardDetails;
  summary: CardSummary;
  /** HMAC of the PAN with CARD_FINGERPRINT_SECRET. */
  fingerprint: string;
}

/**
 * Validates a body's card fields (payment method, Luhn, expiry against `now`, CVV length) and
 * returns the card for the processor plus what may be stored. Throws the 400 to answer on a bad
 * card; its message never contains any part of the number or CVV.
 */
export async function readCard(env: Bindings, body: CardFieldsInput, now: Date | number): Promise<CardInput> {
  if (body.payment_method !== "card") {
    throw invalidRequest(
      "payment_method_invalid",
      "payment_method must be 'card' (with the card fields) or, where a saved card may be charged, a payment method's id (pmt_…).",
      "payment_method",
    );
  }
  const checked = checkCard(
    {
      card_number: body.card_number,
      expiration_month: body.expiration_month,
      expiration_year: body.expiration_year,
      cvv: body.cvv,
    },
    now instanceof Date ? now : new Date(now),
  );
  if (!checked.ok) throw invalidCard(checked.code, checked.message, checked.param);
  return {
    card: { number: checked.pan, expMonth: checked.summary.exp_month, expYear: checked.summary.exp_year, cvv: body.cvv },
    summary: checked.summary,
    fingerprint: await cardFingerprint(checked.pan, cardFingerprintSecret(env)),
  };
}

// New payment details on a subscription update: the card fields are optional there, but come
// all together or not at all.
export const OptionalCardFields = {
  payment_method: CardFields.payment_method.optional(),
  card_number: CardFields.card_number.optional(),
  expiration_month: CardFields.expiration_month.optional(),
  expiration_year: CardFields.expiration_year.optional(),
  cvv: CardFields.cvv.optional(),
};

const CARD_KEYS = ["payment_method", "card_number", "expiration_month", "expiration_year", "cvv"] as const;
/** The fields that carry the card itself (payment_method names the kind, or a saved card). */
const CARD_DATA_KEYS = ["card_number", "expiration_month", "expiration_year", "cvv"] as const;

/**
 * A body that names a saved card (payment_method "pmt_…") carries no card data: a 400 naming the
 * first card field sent beside it.
 */
export function assertNoCardData(body: Partial<CardFieldsInput>): void {
  const sent = CARD_DATA_KEYS.find((key) => body[key] !== undefined);
  if (sent) {
    throw invalidRequest("parameter_unexpected", `${sent}: payment_method names a saved card (pmt_…), so send no card fields with it.`, sent);
  }
}

/** The card of a partial body when any card field was sent; a 400 naming the first missing one when only some were. */
export function cardInBody(body: Partial<CardFieldsInput>): CardFieldsInput | null {
  if (CARD_KEYS.every((key) => body[key] === undefined)) return null;
  const missing = CARD_KEYS.find((key) => body[key] === undefined);
  if (missing) {
    throw invalidRequest("parameter_missing", `${missing}: this parameter is required when new payment details are sent.`, missing);
  }
  return body as CardFieldsInput;
}
