// Calls the Worker the way a client does: over fetch, with JSON bodies and bearer credentials.
import { exports } from "cloudflare:workers";
import { expect } from "vitest";

export const BASE = "http://127.0.0.1:8787";

export interface CallOptions {
  method?: string;
  body?: unknown;
  /** Sent as is, for malformed-body tests. */
  rawBody?: BodyInit;
  key?: string;
  headers?: Record<string, string>;
  idempotencyKey?: string;
}

export interface CallResult<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export async function call<T = any>(path: string, options: CallOptions = {}): Promise<CallResult<T>> {
  const headers: Record<string, string> = { ...options.headers };
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
  key: string;
}

let signups = 0;
export async function signup(name = "Acme"): Promise<Account> {
  signups++;
  const res = await call("/api/accounts", { body: { name, email: `owner${signups}@acme.test` } });
  expect(res.status).toBe(201);
  return { id: res.body.id, key: res.body.api_key };
}

/** Asserts the documented error shape and returns the error object. */
export function expectError(res: CallResult, status: number, type: string, code?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ error: { type, message: expect.any(String), request_id: expect.any(String) } });
  if (code) expect(res.body.error.code).toBe(code);
  expect(res.headers.get("request-id")).toBe(res.body.error.request_id);
  return res.body.error as { type: string; code: string; message: string; param?: string; request_id: string };
}

export const roundTrips = (res: CallResult) => Number(res.headers.get("tender-d1-round-trips"));
