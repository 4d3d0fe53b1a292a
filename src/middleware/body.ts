// Every request body is JSON of at most 1 MB. Reads the body once, with the limit enforced on
// the stream, so a chunked body without Content-Length cannot slip past it.
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context";
import { ApiError, invalidRequest } from "../lib/errors";
import { z } from "@hono/zod-openapi";
import { decimalLiteral, numberSource, parseJson } from "../lib/json";
import { CURRENCY_EXPONENTS, normalizeCurrency, suggestMinorUnits } from "../domain/money";
import { containsCardNumber } from "../domain/cards";

export const MAX_BODY_BYTES = 1024 * 1024;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i;
/** Fields that are integers in the currency's smallest unit, as the interface defines `amount`. */
const MINOR_UNIT_FIELDS = ["amount"];

/**
 * Containers nested deeper than this are refused before parsing. No request body nests more than
 * a few levels, and every recursive walk of a body (the parse with its reviver, the idempotency
 * fingerprint) must stay far from the stack limit: ~2000 levels overflowed it (a 500).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `text` opens more than `max` arrays or objects inside one another (strings skipped). */
function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // a backslash escapes the next character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return false;
}

/** One decoder for every body: decode() without `stream` keeps no state between calls. */
const utf8 = new TextDecoder();

const tooLarge = (limit = MAX_BODY_BYTES) =>
  new ApiError(413, "invalid_request_error", "body_too_large", `The request body is larger than ${limit} bytes.`);

export async function readLimited(request: Request, limit = MAX_BODY_BYTES): Promise<string> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  if (!request.body) return "";
  // With a declared length within the limit, the runtime holds the body to it: read it whole.
  if (request.headers.has("content-length")) {
    const bytes = await request.arrayBuffer();
    if (bytes.byteLength > limit) throw tooLarge(limit);
    return utf8.decode(bytes);
  }
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return utf8.decode(bytes);
}

function refuseDecimalAmounts(body: unknown) {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return;
  for (const field of MINOR_UNIT_FIELDS) {
    const source = decimalLiteral(body, field);
    if (source === undefined) continue;
    const currency = normalizeCurrency(String((body as Record<string, unknown>).currency ?? ""));
    const exponent = currency ? CURRENCY_EXPONENTS[currency] : 2;
    const meant = suggestMinorUnits(source, exponent);
    const unit = currency ? `${currency.toUpperCase()}, which has ${exponent} decimal places` : "a currency with 2 decimal places";
    throw invalidRequest(
      "amount_not_integer",
      `${field} must be an integer in the currency's smallest unit, but ${source} was sent.` +
        (meant !== undefined ? ` For ${unit}, send ${meant}.` : ""),
      field,
    );
  }
}

/** The fields whose job is to carry card data, exempt from the card scan where a route documents them. */
const CARD_FIELDS = ["card_number", "cvv"] as const;
const CARD_IN_TEXT = "looks like a card number. Card numbers are accepted only in card_number; never put one in free text.";

/**
 * The card fields a route's request body documents at its top level (none for a route that takes
 * no card): the only places a card number is accepted. Pass the route's `request.body`.
 */
export function documentedCardFields(body: unknown): ReadonlySet<string> {
  const schema = (body as { content?: Record<string, { schema?: unknown }> } | undefined)?.content?.["application/json"]?.schema;
  const shape: Record<string, unknown> = schema instanceof z.ZodObject ? schema.shape : {};
  return new Set(CARD_FIELDS.filter((field) => field in shape));
}

/**
 * The texts a value would be stored as, or was sent as: a string itself; a JSON number as its
 * digits and as its source text (a 19-digit number is past 2^53, and `4.2e15` is stored as digits).
 */
function textsOf(value: unknown, holder: unknown, key: string | number | undefined): string[] {
  if (typeof value === "string") return [value];
  if (typeof value !== "number") return [];
  const source = key === undefined ? undefined : numberSource(holder, key);
  return source === undefined ? [String(value)] : [String(value), source];
}

/** The 400 for a card number in the value at `path`, or (`inKey`) in a field name of the object there. */
function refused(path: (string | number)[], inKey: boolean) {
  const param = path.join(".");
  const subject = inKey ? (param ? `${param}: a field name` : "A field name in the request body") : param ? `${param}:` : "The request body";
  return invalidRequest("card_number_in_text", `${subject} ${CARD_IN_TEXT}`, param || undefined);
}

/**
 * Refuses a body in which any value (a string, or a JSON number), or any object key, holds a card
 * number anywhere but in the route's documented card fields at the top level of the body: free
 * text (a purpose, a description, a name, metadata) is stored in clear, and a key named like a card
 * field below the top level (`metadata.card_number`) or an `amount` is no exception (no valid
 * amount has the 13 digits of a card number: amounts stop at 11). Runs before the route's handler,
 * so nothing is written, and before the idempotency middleware, so no record is kept. The error
 * names the field by its path (the way validation errors join zod paths) and never echoes the
 * value. The body nests at most MAX_JSON_DEPTH levels, so the recursion stays shallow.
 */
function refuseCardNumbersInText(
  value: unknown,
  cardFields: ReadonlySet<string>,
  path: (string | number)[] = [],
  holder?: unknown,
  key?: string | number,
) {
  if (textsOf(value, holder, key).some(containsCardNumber)) throw refused(path, false);
  if (typeof value !== "object" || value === null) return;
  if (Array.isArray(value)) {
    value.forEach((item, index) => refuseCardNumbersInText(item, cardFields, [...path, index], value, index));
    return;
  }
  for (const [field, item] of Object.entries(value)) {
    if (containsCardNumber(field)) throw refused(path, true);
    // A card field of the top-level body, holding what a card field holds (text or a number).
    if (path.length === 0 && cardFields.has(field) && (typeof item === "string" || typeof item === "number")) continue;
    refuseCardNumbersInText(item, cardFields, [...path, field], value, field);
  }
}

/** `cardFields`: the top-level card fields the route's body documents (documentedCardFields). */
export const jsonBody = (options: { allowForm?: boolean; cardFields?: ReadonlySet<string> } = {}) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS") return next();
    const text = await readLimited(c.req.raw);
    const contentType = c.req.header("content-type") ?? "";
    let body: unknown = undefined;
    if (text.trim() !== "") {
      if (options.allowForm && /^application\/x-www-form-urlencoded/i.test(contentType)) {
        const params = new URLSearchParams(text);
        body = Object.fromEntries(params);
        const form = new FormData();
        for (const [key, value] of params) form.append(key, value);
        c.req.bodyCache.formData = form as never;
        // A form is scanned as a JSON body is: a card number in it is never answered back.
        refuseCardNumbersInText(body, new Set());
      } else if (!JSON_TYPE.test(contentType)) {
        throw new ApiError(
          415,
          "invalid_request_error",
          "unsupported_media_type",
          `Request bodies must be JSON, sent with Content-Type: application/json${contentType ? `, not ${contentType}` : ""}.`,
        );
      } else {
        if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
          throw invalidRequest("invalid_json", `The request body nests arrays or objects more than ${MAX_JSON_DEPTH} levels deep.`);
        }
        try {
          body = parseJson(text);
        } catch {
          throw invalidRequest("invalid_json", "The request body is not valid JSON.");
        }
        refuseCardNumbersInText(body, options.cardFields ?? new Set());
        refuseDecimalAmounts(body);
      }
    }
    c.set("jsonBody", body);
    // The route validators read the body through c.req.json(); hand them this parse, so the body
    // is read once and the decimal sources stay attached to the objects the handlers see.
    c.req.json = async <T>() => body as T;
    c.req.bodyCache.json = Promise.resolve(body);
    return next();
  });
