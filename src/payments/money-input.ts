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

/** ISO 4217's codes that name no currency a card is charged in (src/domain/money.ts leaves them out). */
const NOT_MONEY: Record<string, string> = {
  xts: "testing (codes reserved for tests)",
  xxx: "no currency",
  xau: "gold",
  xag: "silver",
  xpt: "platinum",
  xpd: "palladium",
  xdr: "the IMF's special drawing rights",
  xsu: "the SUCRE unit of account",
  xua: "the ADB unit of account",
  xba: "a bond market unit",
  xbb: "a bond market unit",
  xbc: "a bond market unit",
  xbd: "a bond market unit",
};

/** The lowercase code of a known currency, or the 400 `currency_invalid`. */
export function readCurrency(code: string, param = "currency"): string {
  const currency = normalizeCurrency(code);
  if (currency === undefined) {
    const special = NOT_MONEY[code.toLowerCase()];
    const why = special ? `${JSON.stringify(code)} is ISO 4217's code for ${special}, not a currency money is charged in` : `${JSON.stringify(code)} is not one`;
    throw invalidRequest("currency_invalid", `${param} must be an ISO 4217 code such as "usd"; ${why}.`, param);
  }
  return currency;
}
