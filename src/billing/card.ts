// New payment details on a subscription update: the card fields are optional there, but come
// all together or not at all. Validation itself is src/payments/card-input.ts.
import { CardFields, type CardFieldsInput } from "../payments/card-input";
import { invalidRequest } from "../lib/errors";

export const OptionalCardFields = {
  payment_method: CardFields.payment_method.optional(),
  card_number: CardFields.card_number.optional(),
  expiration_month: CardFields.expiration_month.optional(),
  expiration_year: CardFields.expiration_year.optional(),
  cvv: CardFields.cvv.optional(),
};

const CARD_KEYS = ["payment_method", "card_number", "expiration_month", "expiration_year", "cvv"] as const;

/** The card of a partial body when any card field was sent; a 400 naming the first missing one when only some were. */
export function cardInBody(body: Partial<CardFieldsInput>): CardFieldsInput | null {
  if (CARD_KEYS.every((key) => body[key] === undefined)) return null;
  const missing = CARD_KEYS.find((key) => body[key] === undefined);
  if (missing) {
    throw invalidRequest("parameter_missing", `${missing}: this parameter is required when new payment details are sent.`, missing);
  }
  return body as CardFieldsInput;
}
