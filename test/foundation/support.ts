// Shared steps of the foundation suite, built on test/helpers.ts: keys, tokens and direct D1 reads.
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { sha256Hex } from "../../src/lib/crypto";
import { type Account, type CallResult, call } from "../helpers";

export { sha256Hex };

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Creates a restricted key with `scopes` using `key`, and returns the created key's answer. */
export async function createKey(key: string, scopes: string[], name = "test key") {
  const res = await call("/api/keys", { key, body: { name, scopes } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; secret: string; prefix: string; scopes: string[] };
}

/** Exchanges an API key for an access token (Bearer client authentication, JSON body). */
export async function mintToken(key: string, scope?: string): Promise<string> {
  const res = await call("/oauth/token", {
    body: { grant_type: "client_credentials", ...(scope ? { scope } : {}) },
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.access_token;
}

/** The id of the account's default secret key, as GET /api/keys shows it. */
export async function secretKeyId(account: Account): Promise<string> {
  const res = await call("/api/keys?limit=100", { key: account.key });
  expect(res.status).toBe(200);
  return res.body.data.find((k: { kind: string }) => k.kind === "secret").id;
}

/** Uses the credential once, so the per-isolate credential cache holds it. */
export async function warm(key: string) {
  const res = await call("/api/users?limit=1", { key });
  expect(res.status, res.text).toBe(200);
}

export const countRows = async (table: string, where = "1 = 1", ...binds: unknown[]) =>
  Number((await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${where}`).bind(...binds).first<{ n: number }>())!.n);

export function expectWwwAuthenticate(res: CallResult) {
  expect(res.headers.get("www-authenticate")).toMatch(/^Bearer\b/);
}

export const createUser = async (key: string, name = "Ada Lovelace", email = "ada@example.com") => {
  const res = await call("/api/users", { key, body: { name, email } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; name: string; email: string };
};
