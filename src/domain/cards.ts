import { hmacSha256Hex } from "../lib/crypto";
/**
 * Card validation primitives. Pure: no I/O, the clock is passed in as `now`.
 *
 * Nothing in this module ever puts a card number or CVV (or any part of them)
 * into a message or error: every message is a fixed English sentence that
 * contains no digits at all.
 */

export type CardBrand = "visa" | "mastercard" | "amex" | "discover" | "diners" | "jcb" | "unionpay" | "unknown";

const PAN_PATTERN = /^[0-9]{12,19}$/;

/** Luhn (mod 10) check. Only ASCII digits, 12 to 19 of them; anything else is false. */
export function luhnValid(pan: string): boolean {
  if (typeof pan !== "string" || !PAN_PATTERN.test(pan)) return false;
  let sum = 0;
  let double = false;
  for (let i = pan.length - 1; i >= 0; i--) {
    let d = pan.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

function prefixIn(pan: string, length: number, low: number, high: number): boolean {
  if (pan.length < length) return false;
  const p = Number(pan.slice(0, length));
  return p >= low && p <= high;
}

/**
 * Brand from the IIN (leading digits). Expects digits only; anything else is "unknown".
 * visa 4; mastercard 51-55, 2221-2720; amex 34, 37; discover 6011, 644-649, 65;
 * diners 36, 300-305, 38-39; jcb 3528-3589; unionpay 62.
 */
export function detectBrand(pan: string): CardBrand {
  if (typeof pan !== "string" || !/^[0-9]+$/.test(pan)) return "unknown";
  if (pan.startsWith("4")) return "visa";
  if (prefixIn(pan, 2, 51, 55) || prefixIn(pan, 4, 2221, 2720)) return "mastercard";
  if (pan.startsWith("34") || pan.startsWith("37")) return "amex";
  if (pan.startsWith("6011") || prefixIn(pan, 3, 644, 649) || pan.startsWith("65")) return "discover";
  if (prefixIn(pan, 4, 3528, 3589)) return "jcb";
  if (pan.startsWith("36") || prefixIn(pan, 3, 300, 305) || prefixIn(pan, 2, 38, 39)) return "diners";
  if (pan.startsWith("62")) return "unionpay";
  return "unknown";
}

/** Required CVV length: 4 for American Express, 3 otherwise. */
export function cvvLength(brand: CardBrand): 3 | 4 {
  return brand === "amex" ? 4 : 3;
}

/**
 * A card is valid through the last millisecond of its expiry month in UTC,
 * i.e. it is expired from 00:00:00.000Z on the first day of the next month.
 * Throws RangeError for a month outside 1..12 or a non-integer year.
 */
export function isExpired(expMonth: number, expYear: number, now: Date): boolean {
  if (!Number.isInteger(expMonth) || expMonth < 1 || expMonth > 12) {
    throw new RangeError("Expiration month must be an integer from 1 to 12.");
  }
  if (!Number.isInteger(expYear) || expYear < 100) {
    throw new RangeError("Expiration year must be a full (four-digit) year.");
  }
  // Date.UTC months are 0-based, so `expMonth` is already the following month (12 rolls over).
  const firstInstantExpired = Date.UTC(expYear, expMonth, 1);
  return now.getTime() >= firstInstantExpired;
}

/**
 * HMAC-SHA256 (Web Crypto) of the card number's digits keyed with the UTF-8
 * bytes of `key`, as lowercase hex. Spaces and dashes in `pan` are ignored, so
 * "4242 4242 4242 4242" and "4242424242424242" share a fingerprint.
 * Throws (without echoing the input) if `pan` has other non-digits or `key` is empty.
 */
export async function cardFingerprint(pan: string, key: string): Promise<string> {
  const digits = typeof pan === "string" ? pan.replace(/[ -]/g, "") : "";
  if (!/^[0-9]+$/.test(digits)) throw new TypeError("Card number must consist of digits.");
  if (typeof key !== "string" || key.length === 0) throw new TypeError("Fingerprint key must be a non-empty string.");
  return hmacSha256Hex(key, digits);
}

export interface CardInput {
  card_number: string;
  expiration_month: number;
  expiration_year: number;
  cvv: string;
}

export interface CardSummary {
  brand: CardBrand;
  last4: string;
  exp_month: number;
  exp_year: number;
}

export type CardCheck =
  | { ok: true; pan: string; summary: CardSummary }
  | {
      ok: false;
      code: "invalid_number" | "invalid_expiry_month" | "invalid_expiry_year" | "expired_card" | "invalid_cvc";
      param: "card_number" | "expiration_month" | "expiration_year" | "cvv";
      message: string;
    };

const BRAND_LABELS: Record<CardBrand, string | undefined> = {
  visa: "Visa",
  mastercard: "Mastercard",
  amex: "American Express",
  discover: "Discover",
  diners: "Diners Club",
  jcb: "JCB",
  unionpay: "UnionPay",
  unknown: undefined,
};

/** Fixed, digit-free messages: they can never echo any part of a card number or CVV. */
export const CARD_MESSAGES = {
  invalid_number: "The card number is not a valid card number.",
  invalid_expiry_month: "The expiration month must be a whole number from one (January) to twelve (December).",
  invalid_expiry_year: "The expiration year must be a full four-digit year in the twenty-first century.",
  expired_card: "The card has expired.",
} as const;

function cvvMessage(brand: CardBrand): string {
  const count = cvvLength(brand) === 4 ? "four" : "three";
  const label = BRAND_LABELS[brand];
  return label ? `The CVV must be ${count} digits for ${label} cards.` : `The CVV must be ${count} digits.`;
}

/**
 * Validates raw card input in this order: number, expiration month,
 * expiration year, expiry against `now`, CVV. Returns the normalized PAN
 * (spaces and dashes removed) and a non-sensitive summary on success.
 */
export function checkCard(input: CardInput, now: Date): CardCheck {
  const rawNumber: unknown = input.card_number;
  const pan = typeof rawNumber === "string" ? rawNumber.replace(/[ -]/g, "") : "";
  if (!luhnValid(pan)) {
    return { ok: false, code: "invalid_number", param: "card_number", message: CARD_MESSAGES.invalid_number };
  }

  const month: unknown = input.expiration_month;
  if (typeof month !== "number" || !Number.isInteger(month) || month < 1 || month > 12) {
    return { ok: false, code: "invalid_expiry_month", param: "expiration_month", message: CARD_MESSAGES.invalid_expiry_month };
  }

  const year: unknown = input.expiration_year;
  if (typeof year !== "number" || !Number.isInteger(year) || year < 2000 || year > 2099) {
    return { ok: false, code: "invalid_expiry_year", param: "expiration_year", message: CARD_MESSAGES.invalid_expiry_year };
  }

  if (isExpired(month, year, now)) {
    return { ok: false, code: "expired_card", param: "expiration_year", message: CARD_MESSAGES.expired_card };
  }

  const brand = detectBrand(pan);
  const cvv: unknown = input.cvv;
  if (typeof cvv !== "string" || cvv.length !== cvvLength(brand) || !/^[0-9]+$/.test(cvv)) {
    return { ok: false, code: "invalid_cvc", param: "cvv", message: cvvMessage(brand) };
  }

  return {
    ok: true,
    pan,
    summary: { brand, last4: pan.slice(-4), exp_month: month, exp_year: year },
  };
}

/** A UUID, in any case: 32 hex digits in 8-4-4-4-12 groups. Never a card, however its digits fall. */
const UUID_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/**
 * What may stand between two digits of a card number as people (and hostile callers) write one:
 * up to three of any space (no-break and tab included), any dash, a dot or an underscore.
 */
const SEPARATOR = "[\\s\\p{Pd}._]";
/** Maximal runs of digits, two of which may be separated by SEPARATOR characters. */
const DIGIT_RUN = new RegExp(`[0-9](?:${SEPARATOR}{0,3}[0-9])*`, "gu");
const SEPARATORS = new RegExp(`${SEPARATOR}+`, "u");

/** The value (0-9) of a Unicode decimal digit: Unicode encodes each script's digits 0 to 9 in a row. */
function digitValue(digit: string): number {
  let cp = digit.codePointAt(0)!;
  let steps = 0;
  while (steps < 100 && /\p{Nd}/u.test(String.fromCodePoint(cp - 1))) {
    cp--;
    steps++;
  }
  return steps % 10;
}

/**
 * The text as its reader sees its digits: compatibility forms folded (NFKC: fullwidth and
 * mathematical digits, superscripts), every script's decimal digits as ASCII, and invisible
 * characters (zero-width spaces, soft hyphens, combining marks) dropped. ASCII text is its own.
 */
function readableDigits(text: string): string {
  if (/^[\x00-\x7f]*$/.test(text)) return text;
  return text
    .normalize("NFKC")
    .replace(/[\p{Cf}\p{M}]/gu, "")
    .replace(/\p{Nd}/gu, (d) => (d >= "0" && d <= "9" ? d : String(digitValue(d))));
}

const isCard = (digits: string) => digits.length >= 13 && digits.length <= 19 && luhnValid(digits) && detectBrand(digits) !== "unknown";

/**
 * Whether a run of digit groups holds a card number: the whole run; one of its groups alone (a
 * card written plain beside other numbers, "4242424242424242 12 27"); or its leading groups,
 * the first of 4 digits as card numbers are grouped, followed by nothing but groups of at most 3
 * digits, 7 in all (an expiry and a CVV: "4242 4242 4242 4242 12/27", "... 4242 123").
 */
function runHoldsCard(run: string): boolean {
  const groups = run.split(SEPARATORS);
  if (isCard(groups.join(""))) return true;
  if (groups.length === 1) return false;
  if (groups.some(isCard)) return true;
  if (groups[0].length !== 4) return false;
  for (let k = groups.length - 1; k > 1; k--) {
    const rest = groups.slice(k);
    if (rest.some((g) => g.length > 3) || rest.join("").length > 7) break;
    if (isCard(groups.slice(0, k).join(""))) return true;
  }
  return false;
}

/**
 * Whether free text holds something that is plausibly a card number, as a reader would read it
 * (readableDigits): a maximal run of 13 to 19 digits (separated by spaces, dashes, dots or
 * underscores, or not at all) that passes Luhn and starts with a card brand's prefix, or such a
 * number followed by its expiry or CVV (runHoldsCard). Windows inside longer runs are not
 * scanned otherwise, so a 25-digit reference or an IBAN is not a card; UUIDs are skipped whole.
 * Pure, and it reports only a boolean: never the number found.
 */
export function containsCardNumber(text: string): boolean {
  if (typeof text !== "string") return false;
  const readable = readableDigits(text);
  // Quick exit: fewer than 13 digits in all can hold no card number.
  let digitCount = 0;
  for (let i = 0; i < readable.length && digitCount < 13; i++) {
    const ch = readable.charCodeAt(i);
    if (ch >= 48 && ch <= 57) digitCount++;
  }
  if (digitCount < 13) return false;
  const scanned = readable.replace(UUID_TEXT, "_");
  for (const match of scanned.matchAll(DIGIT_RUN)) {
    if (match[0].length >= 13 && runHoldsCard(match[0])) return true;
  }
  return false;
}

/** Spans of text that may be read as digits (any script) with what may separate them. */
const DIGIT_LIKE_SPAN = /[\p{Nd}\p{No}](?:[\s\p{Pd}._\p{Cf}\p{M}]{0,8}[\p{Nd}\p{No}])*/gu;

/**
 * `text` with every card number in it replaced by "[card number]", for a message that quotes
 * what a caller sent; when a card number would still be read in it, a sentence that quotes
 * nothing. The number found is never returned.
 */
export function withoutCardNumbers(text: string): string {
  if (!containsCardNumber(text)) return text;
  const redacted = text.replace(DIGIT_LIKE_SPAN, (span) => (containsCardNumber(span) ? "[card number]" : span));
  return containsCardNumber(redacted) ? "The request holds something that looks like a card number, which is not repeated here." : redacted;
}
