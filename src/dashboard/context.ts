// The dashboard's Hono environment (the API's request id and database, plus the signed-in session,
// the parsed form of a POST and the in-process API client) and the types its modules share, so
// that session.ts and api.ts depend on this file and not on each other.
import type { AppEnv, Auth } from "../context";

export type Mode = Auth["mode"];

/** A key a session holds: enough to name it on the page (its prefix), never enough to use it. */
export interface SessionKey {
  id: string;
  name: string | null;
  prefix: string;
  restricted: boolean;
}

export interface DashboardSession {
  tokenHash: string;
  /** The acting key's credential: its account, mode and scopes. Every read and action runs as it. */
  auth: Auth;
  accountName: string;
  keyName: string | null;
  keyPrefix: string;
  /** The keys the session holds, by mode: the one it was signed in with, and one added from the switch. A revoked key is absent. */
  keys: Partial<Record<Mode, SessionKey>>;
  /** Set on the request where the acting mode's key was found revoked and the session moved to the other mode. */
  modeEnded?: Mode;
  expiresAt: number;
  /** The hidden field every form of this session carries. */
  csrfToken: string;
}

export interface ApiErrorBody {
  type: string;
  code: string;
  message: string;
  param?: string;
  request_id: string;
}

export type ApiAnswer<T> =
  | { ok: true; status: number; body: T; requestId: string | null; raw: { bytes: ArrayBuffer; headers: Headers } }
  | { ok: false; status: number; error: ApiErrorBody };

export interface ApiCall {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** Sent as Idempotency-Key; the dashboard's forms carry one generated when the page was rendered. */
  idempotencyKey?: string;
  /** The Accept header (application/json unless said): an invoice's PDF is asked for as application/pdf. */
  accept?: string;
}

/** The in-process API client (src/dashboard/api.ts): a request to the API's route, as the session's key. */
export type Api = <T>(path: string, call?: ApiCall) => Promise<ApiAnswer<T>>;

export type DashEnv = {
  Bindings: AppEnv["Bindings"];
  Variables: AppEnv["Variables"] & {
    session?: DashboardSession;
    /** A POST's form fields (application/x-www-form-urlencoded or multipart), read once. */
    form: Record<string, string | string[]>;
    api: Api;
    /** The D1 bookmark to read at least as fresh as (the session's last action). */
    bookmark?: string;
  };
};
