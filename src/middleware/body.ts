// Every request body is JSON of at most 1 MB. Reads the body once, with the limit enforced on
// the stream, so a chunked body without Content-Length cannot slip past it.
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context";
import { ApiError, invalidRequest } from "../lib/errors";
import { decimalLiteral, parseJson } from "../lib/json";
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

const tooLarge = () =>
  new ApiError(413, "invalid_request_error", "body_too_large", `The request body is larger than ${MAX_BODY_BYTES} bytes.`);

async function readLimited(request: Request): Promise<string> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw tooLarge();
  if (!request.body) return "";
  // With a declared length within the limit, the runtime holds the body to it: read it whole.
  if (request.headers.has("content-length")) {
    const bytes = await request.arrayBuffer();
    if (bytes.byteLength > MAX_BODY_BYTES) throw tooLarge();
    return new TextDecoder().decode(bytes);
  }
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_BODY_BYTES) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
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

/** Fields whose job is to carry card data: exempt from the free-text card scan, at any depth. */
const CARD_FIELDS = new Set(["card_number", "cvv"]);
const CARD_IN_TEXT = "looks like a card number. Card numbers are accepted only in card_number; never put one in free text.";

/**
 * Refuses a body in which any string or whole-number value, or any object key, other than the
 * card fields holds a card number: free text (a purpose, a description, a name, metadata) is stored in clear. Runs
 * before the route's handler, so nothing is written. The error names the field by its path (the
 * way validation errors join zod paths) and never echoes the value. The body nests at most
 * MAX_JSON_DEPTH levels, so the recursion stays shallow.
 */
function refuseCardNumbersInText(value: unknown, path: string[] = []) {
  // A JSON number is stored as its digits too (metadata values may be numbers); amounts are
  // bounded elsewhere and are not cards.
  const number = typeof value === "number" && Number.isSafeInteger(value) && !MINOR_UNIT_FIELDS.includes(path[path.length - 1] ?? "");
  if (typeof value === "string" || number) {
    if (containsCardNumber(String(value))) {
      const param = path.join(".");
      throw invalidRequest("card_number_in_text", param ? `${param}: ${CARD_IN_TEXT}` : `The request body ${CARD_IN_TEXT}`, param || undefined);
    }
    return;
  }
  if (typeof value !== "object" || value === null) return;
  if (Array.isArray(value)) {
    value.forEach((item, index) => refuseCardNumbersInText(item, [...path, String(index)]));
    return;
  }
  for (const key of Object.keys(value)) {
    if (containsCardNumber(key)) {
      const param = path.join(".");
      throw invalidRequest(
        "card_number_in_text",
        param ? `${param}: a field name ${CARD_IN_TEXT}` : `A field name in the request body ${CARD_IN_TEXT}`,
        param || undefined,
      );
    }
    if (CARD_FIELDS.has(key)) continue;
    refuseCardNumbersInText((value as Record<string, unknown>)[key], [...path, key]);
  }
}

export const jsonBody = (options: { allowForm?: boolean } = {}) =>
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
        refuseCardNumbersInText(body);
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
