// How a hosted page acts: through the API's own routes, in process, as the key that made its
// session (src/auth/principal.ts, as the dashboard does). Validation, idempotency, processor calls,
// money claims and events are therefore the API's, unchanged. Used by the checkout page and the
// customer portal.
import type { Context } from "hono";
import type { AppEnv, Auth } from "../context";
import { withPrincipal } from "../auth/principal";
import { CURRENT_API_VERSION } from "../domain/api-versions";

/** What the app is to a page: its fetch, for the API's routes in process. */
export interface InProcessApp {
  fetch(request: Request, env: any, ctx?: any): Response | Promise<Response>;
}

export interface ApiAnswer {
  status: number;
  body: any;
}

/** One API request in process, as `auth`: the route's Response as it is (a PDF, say). */
export async function apiResponse(app: InProcessApp, c: Context<AppEnv>, auth: Auth, method: string, path: string, body?: unknown, idempotencyKey?: string): Promise<Response> {
  const headers = new Headers({ accept: "application/json", "tender-version": CURRENT_API_VERSION });
  if (idempotencyKey) headers.set("idempotency-key", idempotencyKey);
  if (body !== undefined) headers.set("content-type", "application/json");
  return app.fetch(new Request(new URL(path, c.req.url), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }), withPrincipal(c.env, auth), c.executionCtx);
}

/** One API request in process, as `auth`: its status and its JSON. */
export async function callApi(app: InProcessApp, c: Context<AppEnv>, auth: Auth, method: string, path: string, body?: unknown, idempotencyKey?: string): Promise<ApiAnswer> {
  const response = await apiResponse(app, c, auth, method, path, body, idempotencyKey);
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: response.status, body: parsed };
}

/** A form posted from another site (it cannot know the page's secret, but a browser says where it came from). */
export function crossSite(c: Context<AppEnv>): boolean {
  const origin = c.req.header("origin");
  if (origin !== undefined && origin !== "null" && origin !== new URL(c.req.url).origin) return true;
  const site = c.req.header("sec-fetch-site");
  return site !== undefined && site !== "same-origin" && site !== "none";
}
