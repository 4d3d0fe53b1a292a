// The one error shape of the API: { error: { type, code, message, param?, request_id } }.
import type { ContentfulStatusCode } from "hono/utils/http-status";

export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "idempotency_error"
  | "card_error"
  | "rate_limit_error"
  | "api_error";

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly param?: string,
    readonly headers: Record<string, string> = {},
    /** Extra fields for the error object, such as a card error's decline_code. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }

  body(requestId: string) {
    return {
      error: {
        type: this.type,
        code: this.code,
        message: this.message,
        ...(this.param ? { param: this.param } : {}),
        ...this.extra,
        request_id: requestId,
      },
    };
  }
}

export const invalidRequest = (code: string, message: string, param?: string) =>
  new ApiError(400, "invalid_request_error", code, message, param);

export const notFound = (resource: string, id: string, param?: string) =>
  new ApiError(404, "not_found_error", "resource_missing", `No such ${resource}: '${id}'.`, param);

export const conflict = (code: string, message: string) => new ApiError(409, "invalid_request_error", code, message);

export const authenticationError = (code: string, message: string) =>
  new ApiError(401, "authentication_error", code, message, undefined, { "WWW-Authenticate": 'Bearer realm="tender"' });

/**
 * A credential whose key was found not live by a query's or batch's check (src/db/scope.ts):
 * revoked, or paused while its account moves between shards. The error handler asks which
 * (src/auth/credentials.ts explainDeadCredential) before answering.
 */
export class CredentialNotLive extends ApiError {
  constructor(readonly keyId: string) {
    super(401, "authentication_error", "api_key_revoked", "The API key behind this credential has been revoked.", undefined, { "WWW-Authenticate": 'Bearer realm="tender"' });
  }
}

/** The account is being moved to another shard: its keys answer this until the move ends. */
export const accountMoving = () =>
  new ApiError(503, "api_error", "account_moving", "This account is moving to another database and is paused for a moment. Nothing was changed; retry after the Retry-After seconds.", undefined, {
    "Retry-After": "2",
  });

export const permissionError = (scope: string) =>
  new ApiError(
    403,
    "permission_error",
    "missing_scope",
    `This credential does not have the '${scope}' scope needed for this request.`,
  );

export const internalError = () =>
  new ApiError(500, "api_error", "internal_error", "An unexpected error occurred. It has been logged; please retry later.");

/** A processor decline, as Stripe reports it: code names the kind, decline_code the reason. */
export const cardDeclined = (declineCode: string, message: string) =>
  new ApiError(
    402,
    "card_error",
    declineCode === "expired_card" || declineCode === "processing_error" ? declineCode : "card_declined",
    message,
    undefined,
    {},
    { decline_code: declineCode },
  );

/**
 * A card whose bank asks its holder to authenticate (3-D Secure) before it can be saved: an API
 * request has no holder to ask, so 402, naming the hosted checkout page (mode setup) as the way.
 */
export const authenticationRequiredToSave = (setupIntent: string, clientSecret: string | null) =>
  new ApiError(
    402,
    "card_error",
    "authentication_required",
    `The card's bank asks its holder to authenticate (3-D Secure) before the card can be saved for later charges (Stripe SetupIntent ${setupIntent}), and an API request has no holder to ask. Save it on a hosted checkout page instead (POST /checkout/sessions with mode "setup"), where the holder authenticates, or finish setup_intent with Stripe.js handleNextAction and send its id (seti_…) as processor_token; nothing was saved.`,
    "processor_token",
    {},
    // As Stripe's own card errors carry their intent: its client secret is for Stripe.js (handleNextAction), not a key.
    { decline_code: "authentication_required", setup_intent: { id: setupIntent, client_secret: clientSecret } },
  );

/** A card that fails validation (number, expiry, CVV): 400, with the field in `param`. */
export const invalidCard = (code: string, message: string, param: string) => new ApiError(400, "card_error", code, message, param);
