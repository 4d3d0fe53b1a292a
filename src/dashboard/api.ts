// The dashboard's way to the data: every read and every action is a Request to the API's own
// route (GET /payouts, POST /payouts/{id}/cancel, …), run in process through the app's fetch with
// the session's key as the internal principal (src/auth/principal.ts). Validation, scopes,
// idempotency, events and tenant scoping are therefore the API's, unchanged; the dashboard writes
// nothing to D1 but its own session rows. Answers come back parsed, errors in the API's shape.
import type { Context } from "hono";
import { withPrincipal } from "../auth/principal";
import { CURRENT_API_VERSION } from "../domain/api-versions";
import { CONSISTENCY_HEADER } from "../middleware/request";
import type { ApiAnswer, ApiCall, ApiErrorBody, DashEnv } from "./context";

export type { Api, ApiAnswer, ApiCall, ApiErrorBody } from "./context";



export interface Page<T> {
  object: "list";
  data: T[];
  has_more: boolean;
}

/** What the dashboard needs of the app: its fetch. */
export interface InProcessApp {
  fetch(request: Request, env: any, ctx?: any): Response | Promise<Response>;
}


/** The D1 bookmark of the session's last action, so the page after it reads at least that fresh. */
export const BOOKMARK_COOKIE = "tender_dashboard_bookmark";

export function apiClient(app: InProcessApp, c: Context<DashEnv>) {
  return async function api<T>(path: string, call: ApiCall = {}): Promise<ApiAnswer<T>> {
    const session = c.var.session;
    if (!session) throw new Error("api() needs a session");
    const url = new URL(path, c.req.url);
    for (const [name, value] of Object.entries(call.query ?? {})) if (value !== undefined && value !== "") url.searchParams.set(name, String(value));
    const headers = new Headers({ accept: call.accept ?? "application/json", "tender-version": CURRENT_API_VERSION });
    const bookmark = c.var.bookmark;
    if (bookmark) headers.set(CONSISTENCY_HEADER, bookmark);
    if (call.idempotencyKey) headers.set("idempotency-key", call.idempotencyKey);
    let body: string | undefined;
    if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers.set("content-type", "application/json");
    }
    const method = call.method ?? (body === undefined ? "GET" : "POST");
    const response = await app.fetch(new Request(url, { method, headers, body }), withPrincipal(c.env, session.auth), c.executionCtx);
    const reached = response.headers.get(CONSISTENCY_HEADER);
    if (method !== "GET" && reached) c.set("bookmark", reached);
    const bytes = await response.arrayBuffer();
    const text = new TextDecoder().decode(bytes);
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (response.ok) return { ok: true, status: response.status, body: parsed as T, requestId: response.headers.get("request-id"), raw: { bytes, headers: response.headers } };
    const error = (parsed as { error?: ApiErrorBody } | null)?.error;
    return {
      ok: false,
      status: response.status,
      error: error ?? { type: "api_error", code: "unexpected_answer", message: text.slice(0, 300) || `HTTP ${response.status}`, request_id: response.headers.get("request-id") ?? "unknown" },
    };
  };
}

