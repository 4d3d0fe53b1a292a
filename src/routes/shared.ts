// Field schemas used by several resources, and the strict objects every request is made of.
//
// Every validation message is a sentence written for its field, carried by the field's schema
// (zod's `error` parameter, which answers for the schema's own checks as well): the schema is the
// one home of its message. The validation hook (src/routes/openapi.ts) turns the first issue into
// the error shape. A field without a written message fails test/foundation/messages.test.ts.
import { z } from "@hono/zod-openapi";
import { containsCardNumber } from "../domain/cards";
import { closest } from "../lib/did-you-mean";
import { invalidRequest } from "../lib/errors";

export const timestamp = (description: string) =>
  z.string().openapi({ description: `${description} ISO 8601 UTC with milliseconds.`, example: "2026-11-21T12:00:00.000Z" });

// ---------------------------------------------------------------------------------------------
// Writing messages

/** "a, b or c". */
export function listOf(values: readonly string[], conjunction: "or" | "and"): string {
  if (values.length <= 1) return values.join("");
  return `${values.slice(0, -1).join(", ")} ${conjunction} ${values[values.length - 1]}`;
}

/** A value the caller sent, quoted in a message: short text and scalars only, never a card number. */
export function quoted(input: unknown): string {
  if (typeof input === "string") return input.length <= 40 && !containsCardNumber(input) ? JSON.stringify(input) : "the value sent";
  if (typeof input === "number") return containsCardNumber(String(input)) ? "the number sent" : String(input);
  if (typeof input === "boolean" || input === null) return String(input);
  if (Array.isArray(input)) return "a list";
  return typeof input === "object" ? "an object" : "nothing";
}

/** A field name as a message shows it: a name that looks like a card number is not repeated. */
const shownName = (name: string) => (containsCardNumber(name) ? "(a name that looks like a card number)" : name);

interface UnknownKeysIssue {
  code: "unrecognized_keys";
  keys: string[];
  path?: PropertyKey[];
  inst?: unknown;
}

/** "Unknown field descripton. Did you mean description?", or the fields the object takes. */
function unknownKeys(issue: UnknownKeysIssue, noun: "field" | "query parameter"): string {
  const shape = (issue.inst as { _zod: { def: { shape: Record<string, unknown> } } })._zod.def.shape;
  const known = Object.keys(shape);
  const prefix = (issue.path ?? []).map(String);
  const at = (key: string) => shownName([...prefix, key].join("."));
  const [first, ...others] = issue.keys;
  const head = others.length ? `Unknown ${noun}s ${listOf(issue.keys.map(at), "and")}.` : `Unknown ${noun} ${at(first)}.`;
  const meant = closest(first, known);
  if (meant) return `${head} Did you mean ${at(meant)}?`;
  const owner = prefix.length ? prefix.join(".") : "This request";
  return known.length ? `${head} ${owner} takes ${listOf(known, "and")}.` : `${head} ${owner} takes no ${noun}s.`;
}

// ---------------------------------------------------------------------------------------------
// Strict objects

/**
 * A JSON request body, or an object inside one. A field it does not define answers 400
 * `parameter_unknown` (the document says `additionalProperties: false`): a typo is never dropped.
 */
export const bodyObject = <S extends z.ZodRawShape>(shape: S, notAnObject = "The request body must be a JSON object.") =>
  z.strictObject(shape, {
    error: (issue) =>
      issue.code === "unrecognized_keys" ? unknownKeys(issue as UnknownKeysIssue, "field") : issue.code === "invalid_type" ? notAnObject : undefined,
  });

/** A route's query string: a parameter it does not define answers 400 `parameter_unknown`, as Stripe does. */
export const queryObject = <S extends z.ZodRawShape>(shape: S) =>
  z.strictObject(shape, {
    error: (issue) => (issue.code === "unrecognized_keys" ? unknownKeys(issue as UnknownKeysIssue, "query parameter") : undefined),
  });

// ---------------------------------------------------------------------------------------------
// Fields

/** Text of `min` to `max` characters; `trim` strips spaces first, so blank text is too short. */
export function textField(field: string, max: number, { min = 0, trim = false }: { min?: number; trim?: boolean } = {}) {
  const length = min > 0 ? `of ${min} to ${max} characters` : `of at most ${max} characters`;
  const text = z.string({ error: `${field} must be a string ${length}${trim && min > 0 ? ", not only spaces" : ""}.` });
  const trimmed = trim ? text.trim() : text;
  return (min > 0 ? trimmed.min(min) : trimmed).max(max);
}

/** The id of an object, sent in a body or a query: its form is checked where it is looked up. */
export const idField = (field: string, kind: string, example: string) =>
  z.string({ error: `${field} must be the id of ${kind}, such as ${example}.` }).max(100).openapi({ example });

/** A value of a closed set; the message names every allowed value and the one sent. */
export const closedSet = <const T extends readonly [string, ...string[]]>(field: string, values: T) =>
  z.enum(values, { error: (issue) => `${field} must be ${listOf(values, "or")}; ${quoted(issue.input)} is not one.` });

/** A list filter over a closed set. An empty value (`?status=`, an HTML form's "any") filters nothing. */
export const closedSetFilter = <const T extends readonly [string, ...string[]]>(field: string, values: T, description: string) =>
  z
    .preprocess((value) => (value === "" ? undefined : value), closedSet(field, values).optional())
    .openapi({ description: `${description} An empty value filters nothing.` });

export const booleanField = (field: string) => z.boolean({ error: `${field} must be true or false.` });

/** A whole number from `min` to `max`. */
export const wholeNumber = (field: string, min: number, max: number) =>
  z.number({ error: `${field} must be a whole number from ${min} to ${max}.` }).int().min(min).max(max);

/** Every object's mode: true in live mode, false in test mode. */
export const livemodeField = z
  .boolean()
  .openapi({ description: "true for an object of live mode, false for test mode. Each mode sees only its own objects.", example: false });

export const nameField = textField("name", 200, { min: 1, trim: true }).openapi({ example: "Ada Lovelace" });

const EMAIL = "email must be an e-mail address such as ada@example.com, of at most 254 characters.";
export const emailField = z
  .string({ error: EMAIL })
  .trim()
  .max(254)
  .pipe(z.email({ error: EMAIL }))
  .openapi({ type: "string", format: "email", example: "ada@example.com" });

/** An instant sent as ISO 8601 text with its offset (`2027-01-31T23:59:59Z`): epoch ms, or a 400 naming `param`. */
export function instantField(text: string, param: string): number {
  const at = onTheCalendar(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(at)) throw invalidRequest("parameter_invalid", `${param} must be a date and time in ISO 8601 with its offset, such as 2027-01-31T23:59:59Z; "${text.slice(0, 40)}" is not one.`, param);
  return at;
}

/**
 * ISO 8601 with its offset, on the calendar: Date.parse alone rolls November 31 over to December 1
 * and takes 24:00 as the next day's midnight; both are refused here.
 */
function onTheCalendar(text: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?(?:Z|[+-](\d{2}):(\d{2}))$/.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((part) => (part === undefined ? 0 : Number(part)));
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 59 && offsetHours <= 23 && offsetMinutes <= 59;
}

/** instantField, which must be after `now` (a test clock's for billing times). */
export function futureInstant(text: string, param: string, now: number): number {
  const at = instantField(text, param);
  if (at <= now) throw invalidRequest("parameter_invalid", `${param} must be in the future.`, param);
  return at;
}
