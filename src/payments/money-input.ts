// Request fields for money: an integer amount in the currency's smallest unit, and an ISO 4217
// code in any case. A decimal literal for `amount` never gets here: the body middleware refuses
// it with a message naming the integer meant.
import { z } from "@hono/zod-openapi";
import { MAX_AMOUNT, MIN_AMOUNT, normalizeCurrency } from "../domain/money";
import { invalidRequest } from "../lib/errors";

const amountMessage = `amount must be a whole number from ${MIN_AMOUNT} to ${MAX_AMOUNT}, in the currency's smallest unit (cents for USD).`;

export const AmountField = z
  .number({ error: amountMessage })
  .int({ error: amountMessage })
  .min(MIN_AMOUNT, { error: amountMessage })
  .max(MAX_AMOUNT, { error: amountMessage })
  .openapi({ description: "An integer in the currency's smallest unit: 1000 is 10.00 USD, 1000 JPY, 1.000 KWD.", example: 1000 });

export const CurrencyField = z
  .string({ error: 'currency must be an ISO 4217 code such as "usd".' })
  .max(10)
  .openapi({ description: "An ISO 4217 code, in any case; answers show it lowercase.", example: "usd" });

/** The lowercase code of a known currency, or the 400 `currency_invalid`. */
export function readCurrency(code: string, param = "currency"): string {
  const currency = normalizeCurrency(code);
  if (currency === undefined) {
    throw invalidRequest("currency_invalid", `${param} must be an ISO 4217 code such as "usd"; ${JSON.stringify(code)} is not one.`, param);
  }
  return currency;
}
