// Card fields of a subscription request, and their validation. The PAN and CVV go to the
// processor and nowhere else: what is kept is the summary (brand, last4, expiry) and the keyed
// fingerprint. Messages never echo any part of the number (see src/domain/cards.ts).
import { z } from "@hono/zod-openapi";
import { cardFingerprint, checkCard, type CardSummary } from "../domain/cards";
import { cardFingerprintSecret, type Bindings } from "../env";
import { invalidRequest } from "../lib/errors";
import type { CardDetails } from "../processor/types";

export const CardFields = {
  payment_method: z
    .string()
    .trim()
    .min(1)
    .max(50)
    .optional()
    .openapi({ description: "The kind of payment method, e.g. `card`. Only cards are accepted.", example: "card" }),
  card_number: z.string().max(23).openapi({ description: "The card number. Never stored or echoed.", example: "4242424242424242" }),
  expiration_month: z.number().int().openapi({ description: "1 to 12.", example: 12 }),
  expiration_year: z.number().int().openapi({ description: "Four-digit year.", example: 2030 }),
  cvv: z.string().max(4).openapi({ description: "3 digits, or 4 for American Express. Never stored.", example: "123" }),
};

/** The card fields of a partial update: all four together, or none. */
export const OptionalCardFields = {
  payment_method: CardFields.payment_method,
  card_number: CardFields.card_number.optional(),
  expiration_month: CardFields.expiration_month.optional(),
  expiration_year: CardFields.expiration_year.optional(),
  cvv: CardFields.cvv.optional(),
};

export interface CardInputFields {
  card_number: string;
  expiration_month: number;
  expiration_year: number;
  cvv: string;
}

export interface ReadCard {
  card: CardDetails;
  summary: CardSummary;
  fingerprint: string;
}

const CARD_KEYS = ["card_number", "expiration_month", "expiration_year", "cvv"] as const;

/** The card of a partial body, when any card field was sent; a 400 when only some were. */
export function cardInBody(body: Partial<CardInputFields>): CardInputFields | null {
  const sent = CARD_KEYS.filter((key) => body[key] !== undefined);
  if (sent.length === 0) return null;
  const missing = CARD_KEYS.find((key) => body[key] === undefined);
  if (missing) {
    throw invalidRequest("parameter_missing", `${missing}: this parameter is required when new payment details are sent.`, missing);
  }
  return body as CardInputFields;
}

/** Validates the card (Luhn, expiry against `now`, CVV length) and fingerprints it, or throws a 400. */
export async function readCard(env: Bindings, body: CardInputFields, now: number): Promise<ReadCard> {
  const check = checkCard(body, new Date(now));
  if (!check.ok) throw invalidRequest(check.code, check.message, check.param);
  return {
    card: { number: check.pan, expMonth: check.summary.exp_month, expYear: check.summary.exp_year, cvv: body.cvv },
    summary: check.summary,
    fingerprint: await cardFingerprint(check.pan, cardFingerprintSecret(env)),
  };
}
