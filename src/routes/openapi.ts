// Shared OpenAPI pieces: the error schema, the documented error answers, the validation hook
// that turns a refused field into the error shape, and a route factory that gives every route its
// security, its errors, its scope check and its strict input.
import { createRoute, z, type Hook, type RouteConfig } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context";
import { invalidRequest } from "../lib/errors";
import { dropMoneyClaim } from "../processor/in-flight";
import { containsCardNumber } from "../domain/cards";
import { authenticated, requireScope } from "../middleware/auth";
import { type ClaimReads, idempotency } from "../middleware/idempotency";
import { apiVersion } from "../middleware/version";
import { documentedCardFields, jsonBody } from "../middleware/body";
import type { Scope } from "../auth/scopes";
import { queryObject } from "./shared";

export const ErrorSchema = z
  .object({
    error: z.object({
      type: z.enum([
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "idempotency_error",
        "card_error",
        "rate_limit_error",
        "api_error",
      ]),
      code: z.string().openapi({ example: "parameter_invalid" }),
      message: z.string(),
      param: z.string().optional(),
      decline_code: z.string().optional(),
      payment_id: z.string().optional().openapi({ description: "On a declined payment (402): the failed payment Tender kept." }),
      request_id: z.string(),
    }),
  })
  .openapi("Error");

const errorContent = (description: string) => ({ description, content: { "application/json": { schema: ErrorSchema } } });

export const ERRORS = {
  400: errorContent(
    "Invalid request: an unknown field or query parameter (parameter_unknown), a missing one (parameter_missing), a value of the wrong type, length, range or set (parameter_invalid), malformed JSON, or a decimal sent for an integer amount. `param` names the field by its path.",
  ),
  401: errorContent("Missing, malformed, expired or revoked credential. Carries WWW-Authenticate: Bearer."),
  402: errorContent("The card was declined."),
  403: errorContent("The credential lacks the scope this operation needs."),
  404: errorContent("No such object in this account and mode (another account's id, or the other mode's, answers 404 too)."),
  409: errorContent("Conflict with the object's state, or the same Idempotency-Key is still in flight."),
  413: errorContent("Body larger than 1 MB."),
  415: errorContent("Body is not JSON."),
  422: errorContent("Idempotency-Key reused with different parameters."),
  429: errorContent("Rate limited; see Retry-After."),
  500: errorContent("Server error, with a generic message."),
  503: errorContent("The account is being moved to another shard (account_moving): nothing was changed; retry after Retry-After seconds."),
} as const;

type Status = keyof typeof ERRORS;
const READ_ERRORS: Status[] = [400, 401, 403, 404, 429, 500, 503];
const WRITE_ERRORS: Status[] = [400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503];

const versionField = z
  .string()
  .optional()
  .openapi({ description: "The API version to answer in (YYYY-MM-DD); without it, the account's pinned version. Every answer names the version used in Tender-Version. An unknown version answers 400 api_version_invalid.", example: "2026-11-22" });

export const idempotencyHeader = z.object({
  "tender-version": versionField,
  "idempotency-key": z
    .string({ error: "Idempotency-Key must be at most 255 characters." })
    .max(255)
    .optional()
    .openapi({ description: "Makes the request safe to retry for 24 hours: a retry replays the first answer. Keys are per mode: the same key in test and live mode is two keys." }),
});

/** Reads accept the bookmark of an earlier answer (src/middleware/request.ts checks its form). */
export const consistencyHeader = z.object({
  "tender-version": versionField,
  "tender-consistency": z
    .string()
    .optional()
    .openapi({ description: "The Tender-Consistency header of an earlier answer: this read is then at least as fresh (read your own writes from any region)." }),
});

export const idParam = (name: string, example: string) =>
  z.object({ id: z.string({ error: `id must be the ${name}'s id, of at most 100 characters.` }).max(100).openapi({ param: { name: "id", in: "path" }, description: `The ${name}'s id.`, example }) });

type Options = Omit<RouteConfig, "security"> & {
  scope?: Scope;
  extraErrors?: Status[];
  public?: boolean;
  /** Also accept an application/x-www-form-urlencoded body (the OAuth token endpoint). */
  acceptForm?: boolean;
  /**
   * Money moves at the processor before this route's batch commits: its Idempotency-Key is
   * claimed before it runs. Other routes record the key in their own batch (one round trip). A
   * function decides per request (after the credential and the body are read): POST /payments
   * claims first except for a test-mode saved card, whose outcome the batch itself records.
   */
  claimFirst?: boolean | ((c: Context<AppEnv>) => boolean);
  /** With claimFirst: reads made in the same batch as the key's claim (ClaimReads, src/middleware/idempotency.ts). */
  claimReads?: ClaimReads;
  /**
   * Unknown parameters are ignored instead of refused: the OAuth token endpoint only, as RFC 6749
   * §3.2 requires. Every other route refuses an unknown body field or query parameter.
   */
  ignoreUnknownParameters?: boolean;
};

/** The value at `path` of the request as sent (undefined where a field is missing). */
function valueAt(data: unknown, path: PropertyKey[]): unknown {
  let value = data;
  for (const key of path) {
    if (typeof value !== "object" || value === null || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * Turns a refused request into the error shape: an unknown field first (a typo also makes the
 * field it meant look missing), else the first issue. The message is the field's own, written
 * beside its schema (src/routes/shared.ts); `param` is the field's path, e.g. `tiers.1.up_to`.
 */
export const validationHook: Hook<unknown, AppEnv, string, undefined> = (result) => {
  if (result.success) return;
  const issues = result.error.issues;
  const issue = issues.find((i) => i.code === "unrecognized_keys") ?? issues[0];
  if (issue.code === "unrecognized_keys") {
    const param = [...issue.path, issue.keys[0]].map(String).join(".");
    // A query parameter named like a card number is not repeated (bodies never get here with one).
    throw invalidRequest("parameter_unknown", issue.message, containsCardNumber(param) ? undefined : param);
  }
  const param = issue.path.length ? issue.path.map(String).join(".") : undefined;
  const sent = (result as { data?: unknown }).data;
  if (valueAt(sent, issue.path) === undefined) {
    throw invalidRequest("parameter_missing", param ? `${param} is required.` : issue.message, param);
  }
  throw invalidRequest("parameter_invalid", issue.message, param);
};

/** A route without a query string takes none: any parameter is unknown. */
const NO_QUERY = queryObject({});

/** A write that documents no body takes none: a field sent is unknown, as in a body that has fields. */
const noBody = createMiddleware<AppEnv>(async (c, next) => {
  const body = c.get("jsonBody");
  if (body === undefined || body === null) return next();
  if (typeof body !== "object" || Array.isArray(body)) throw invalidRequest("parameter_invalid", "This request takes no body: send none, or {}.");
  const [first] = Object.keys(body);
  if (first !== undefined) throw invalidRequest("parameter_unknown", `Unknown field ${first}. This request takes no body.`, first);
  return next();
});

/**
 * A claim-first route's money claim that its commit did not end (a refusal, a decline it threw, a
 * failure) ends with the request, unless the outcome is unknown under an Idempotency-Key: the
 * processor may have moved the money, so the claim stays (until its retry takes it over and
 * commits, or its lease ends), and the connection cannot be removed or swapped meanwhile.
 */
const releaseMoneyClaim = createMiddleware<AppEnv>(async (c, next) => {
  try {
    await next();
  } finally {
    const claim = c.var.moneyClaim;
    if (claim?.held && c.var.idempotency?.state !== "unknown") await dropMoneyClaim(c.var.db, claim);
  }
});

/** The idempotency middleware of a route: claim-first, in-batch, or chosen per request. */
function keyMiddleware(claimFirst: boolean | ((c: Context<AppEnv>) => boolean), claimReads: ClaimReads | undefined): MiddlewareHandler<AppEnv> {
  if (typeof claimFirst === "boolean") return idempotency({ claimFirst, claimReads });
  const first = idempotency({ claimFirst: true, claimReads });
  const inBatch = idempotency({ claimFirst: false });
  return createMiddleware<AppEnv>((c, next) => (claimFirst(c) ? first(c, next) : inBatch(c, next)));
}

/** A documented route: bearer security, the shared error answers, and its scope check. */
export function apiRoute<R extends Options>(options: R) {
  const { scope, extraErrors = [], public: isPublic, acceptForm, claimFirst = false, claimReads, ignoreUnknownParameters = false, ...config } = options;
  const write = config.method !== "get";
  const statuses = new Set<Status>([...(write ? WRITE_ERRORS : READ_ERRORS), ...extraErrors]);
  if (isPublic) {
    statuses.delete(403);
    statuses.delete(429);
    statuses.delete(503);
  }
  const responses = { ...config.responses } as Record<string | number, unknown>;
  for (const status of [...statuses].sort()) responses[status] ??= ERRORS[status];
  // Order: the credential (every route but a public one: this flag is the one place that decides,
  // and the document's `security` follows it), then the API version, then the scope (a credential that may not make the
  // request learns nothing from its body or from a stored answer), then the body (JSON, at most
  // 1 MB; none where the route documents none), then idempotency.
  const middleware = [
    ...(isPublic ? [] : [authenticated, apiVersion]),
    ...(scope ? [requireScope(scope)] : []),
    ...(write ? [jsonBody({ allowForm: acceptForm, cardFields: documentedCardFields(config.request?.body) })] : []),
    ...(write && !config.request?.body && !ignoreUnknownParameters ? [noBody] : []),
    ...(write && !isPublic ? [keyMiddleware(claimFirst, claimReads)] : []),
    ...(claimFirst ? [releaseMoneyClaim] : []),
    ...((config.middleware as MiddlewareHandler[] | undefined) ?? []),
  ];
  const query = config.request?.query ?? (ignoreUnknownParameters ? undefined : NO_QUERY);
  const request = isPublic
    ? { ...config.request, query }
    : { ...config.request, query, headers: config.request?.headers ?? (write ? idempotencyHeader : consistencyHeader) };
  return createRoute({
    ...config,
    request,
    middleware,
    responses,
    security: isPublic ? [] : [{ bearerAuth: [] }],
  } as RouteConfig) as unknown as R;
}

export const json = <T extends z.ZodTypeAny>(schema: T, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

export const jsonBodyOf = <T extends z.ZodTypeAny>(schema: T) => ({
  body: { required: true as const, content: { "application/json": { schema } } },
});
