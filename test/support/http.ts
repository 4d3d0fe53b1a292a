// Calls the Worker the way a client does: over fetch, with JSON bodies and bearer credentials; the
// Worker called with a hand-made environment; and the shapes its answers must have.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { TEST_SHARD, env } from "./env";
import { expect } from "vitest";
import type { Bindings } from "../../src/env";
import { CURRENT_API_VERSION } from "../../src/domain/api-versions";
import worker from "../../src/index";

export const BASE = "http://127.0.0.1:8787";

export interface CallOptions {
  method?: string;
  body?: unknown;
  /** Sent as is, for malformed-body tests. */
  rawBody?: BodyInit;
  key?: string;
  /** Extra headers; one set to undefined is not sent (a default of call's left out). */
  headers?: Record<string, string | undefined>;
  idempotencyKey?: string;
}

export interface CallResult<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export async function call<T = any>(path: string, options: CallOptions = {}): Promise<CallResult<T>> {
  // Sign-up places the account on this file's shard (test/support/env.ts) unless the test says otherwise.
  // Development answers carry their D1 usage when asked (roundTrips below reads it).
  const headers: Record<string, string> = Object.fromEntries(
    Object.entries({ "tender-shard": String(TEST_SHARD), "tender-d1-usage": "on", ...options.headers }).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.idempotencyKey) headers["idempotency-key"] = options.idempotencyKey;
  let body: BodyInit | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const response = await exports.default.fetch(`${BASE}${path}`, {
    method: options.method ?? (body !== undefined ? "POST" : "GET"),
    headers,
    body,
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  return { status: response.status, body: parsed as T, headers: response.headers, text };
}

export interface Account {
  id: string;
  /** A key of the account: the test-mode secret key sign-up answered, unless a test says otherwise. */
  key: string;
}

/**
 * The API version the suite's accounts are pinned to: 2026-11-22, the last before a test-mode
 * payout needed `recipient_id` (2026-11-27). The suite's payouts follow the interface document's
 * sample (a card, no recipient), which that version keeps working; every other answer is the same
 * in both. Tests of a newer version sign up with `{ apiVersion: CURRENT_API_VERSION }` or send
 * Tender-Version (test/payments/payouts.test.ts).
 */
export const SUITE_API_VERSION = "2026-11-22";

let signups = 0;
/** Signs up; `key` is the test-mode secret key, `liveKey` the live-mode one. The account is pinned to `apiVersion`. */
export async function signup(name = "Acme", { apiVersion = SUITE_API_VERSION }: { apiVersion?: string } = {}): Promise<Account & { liveKey: string }> {
  signups++;
  const res = await call("/api/accounts", { body: { name, email: `owner${signups}@acme.test` } });
  expect(res.status).toBe(201);
  // Before the keys' first authenticated call, so no isolate has their credential cached yet.
  if (apiVersion !== CURRENT_API_VERSION) await env.DB.prepare("UPDATE accounts SET api_version = ? WHERE id = ?").bind(apiVersion, res.body.id).run();
  return { id: res.body.id, key: res.body.api_key, liveKey: res.body.live_api_key };
}

/** The Worker's environment with `overrides` (a failing D1, a recording queue, ...). */
export const withEnv = (overrides: Partial<Bindings>) => ({ ...env, ...overrides }) as Bindings;

/** Runs the Worker's fetch with `overrides` on its environment (a failing or dropping queue). */
export async function fetchWith(overrides: Partial<typeof env> & Partial<Bindings>, path: string, init: RequestInit & { key?: string; json?: unknown } = {}) {
  const headers = new Headers(init.headers);
  if (!headers.has("tender-shard")) headers.set("tender-shard", String(TEST_SHARD));
  if (!headers.has("tender-d1-usage")) headers.set("tender-d1-usage", "on");
  if (init.key) headers.set("authorization", `Bearer ${init.key}`);
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers.set("content-type", "application/json");
  }
  const ctx = createExecutionContext();
  const response = await worker.fetch(
    new Request(`${BASE}${path}`, { method: init.method ?? (body !== undefined ? "POST" : "GET"), headers, body }) as never,
    { ...env, ...overrides },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  const text = await response.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body: parsed, headers: response.headers, text } as CallResult;
}

// ---------------------------------------------------------------------------------------------
// Answers

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** The D1 round trips the Worker reports it made for this request. */
/**
 * A development answer's D1 usage header (`round-trips`, `rows-read`, `rows-written`,
 * `statements-built`), as a number. Absent (the request did not ask with Tender-D1-Usage) is an
 * error, never 0.
 */
export function d1Usage(res: { headers: Headers }, name: "round-trips" | "rows-read" | "rows-written" | "statements-built"): number {
  const value = res.headers.get(`tender-d1-${name}`);
  if (value === null) throw new Error(`The answer has no Tender-D1-${name} header: the request must send Tender-D1-Usage.`);
  return Number(value);
}

export const roundTrips = (res: { headers: Headers }) => d1Usage(res, "round-trips");

/** Asserts the documented error shape with this status, type (and code), and returns the error object. */
export function expectError(res: CallResult, status: number, type: string, code?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ error: { type, message: expect.any(String), request_id: expect.any(String) } });
  if (code) expect(res.body.error.code).toBe(code);
  expect(res.headers.get("request-id")).toBe(res.body.error.request_id);
  return res.body.error as { type: string; code: string; message: string; param?: string; request_id: string };
}

/** The documented error shape, whatever the error, with a Request-Id header equal to its request_id. */
export function expectErrorShape(res: CallResult, context: string) {
  expect(res.body, `${context}: ${res.status} ${res.text.slice(0, 300)}`).toMatchObject({
    error: { type: expect.any(String), code: expect.any(String), message: expect.any(String), request_id: expect.stringMatching(/^req_/) },
  });
  expect(res.headers.get("request-id"), context).toBe(res.body.error.request_id);
  expect(res.headers.get("content-type"), context).toMatch(/^application\/json/);
}

export function expectWwwAuthenticate(res: CallResult) {
  expect(res.headers.get("www-authenticate")).toMatch(/^Bearer\b/);
}

/**
 * A browser's request to a hosted page: no key; a form is posted form-encoded; redirects are not
 * followed (their Location is given).
 */
export async function browse(url: string, form?: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await exports.default.fetch(url.startsWith("http") ? url : `${BASE}${url}`, {
    method: form ? "POST" : "GET",
    redirect: "manual",
    ...(form ? { body: new URLSearchParams(form), headers: { "content-type": "application/x-www-form-urlencoded", ...headers } } : { headers }),
  });
  return { status: res.status, text: await res.text(), headers: res.headers, location: res.headers.get("location") };
}
