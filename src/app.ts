// Builds the API: middleware in order, every route, the OpenAPI document and the reference.
import { OpenAPIHono } from "@hono/zod-openapi";
import { HTTPException } from "hono/http-exception";
import type { AppEnv } from "./context";
import { ApiError, CredentialNotLive, internalError } from "./lib/errors";
import { explainDeadCredential } from "./auth/credentials";
import { requestContext, REQUEST_ID_HEADER } from "./middleware/request";
import { registerRoutes } from "./routes";
import { validationHook } from "./routes/openapi";
import { registerDashboard } from "./dashboard";
import { registerHostedPages } from "./pages";
import { DOCS_SCRIPT_PATH, docsPage } from "./routes/docs-page";
import { docsScript } from "./routes/docs-script";
import { favicon } from "./routes/favicon";
import { CURRENT_API_VERSION } from "./domain/api-versions";
import { containsCardNumber, withoutCardNumbers } from "./domain/cards";
import { closestRoute, type KnownRoute } from "./lib/did-you-mean";
import { withCodeSamples } from "./routes/code-samples";
import { withVersionRequirements } from "./routes/version-requirements";
import type { Context } from "hono";

/** The reference's introduction (/docs shows it first): what Tender is and a first call. */
const GETTING_STARTED = [
  "Payments API: request ids, user profiles, payouts, payments and refunds, subscription plans and subscriptions, signed webhooks. Every object belongs to test mode or live mode (its livemode): a test key (sk_test_…) sees and touches test-mode objects only, a live key (sk_live_…) live-mode objects only. Amounts are integers in the currency's smallest unit. Errors share one shape: { error: { type, code, message, param?, request_id } }.",
  "",
  "## Getting started",
  "",
  "1. Sign up with `POST /api/accounts` (`{ \"name\", \"email\" }`; open on `npm run dev`, behind the admin token when deployed). The answer's `api_key` (`sk_test_…`) is shown once.",
  "2. Press **Authorize** and paste the key: every call on this page is then made with it, as `Authorization: Bearer sk_test_…`.",
  "3. Create a user (`POST /api/users`), then pay them out (`POST /payout` with the test card `4242424242424242`): it is `pending`, then `paid` a few seconds later.",
  "4. Register a webhook endpoint (`POST /api/webhooks`) to receive `payout.paid` and every other event, signed.",
  "",
  "Each operation shows its call through the typed client, `@tender/client` (`npm pack -w @tender/client`; the README says how to install it), beside curl. Writes take an `Idempotency-Key`; the client sends one for you.",
].join("\n");

export function newApp() {
  // A refused field answers the error shape with its written message (src/routes/openapi.ts).
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  app.onError(async (error, c) => {
    const requestId = c.get("requestId") ?? "unknown";
    let apiError: ApiError;
    // A key that failed a check: revoked (401), or paused while its account moves shards (503).
    if (error instanceof CredentialNotLive && c.var.db) apiError = await explainDeadCredential(c.var.db, error).catch(() => error);
    else if (error instanceof ApiError) apiError = error;
    else if (error instanceof HTTPException && error.status < 500) {
      // Hono's own checks (the route's media-type gate) answer in the shared shape and codes.
      const unsupportedMedia = error.status === 415;
      apiError = new ApiError(
        error.status as 400,
        "invalid_request_error",
        unsupportedMedia ? "unsupported_media_type" : "invalid_request",
        unsupportedMedia ? "Request bodies must be JSON, sent with Content-Type: application/json." : error.message || "The request could not be processed.",
      );
    } else {
      // The error itself goes to the log with the request id; the caller only gets the id.
      console.error(JSON.stringify({ request_id: requestId, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error), stack: (error as Error)?.stack }));
      apiError = internalError();
    }
    // A message or param that quotes what the caller sent (a header, a path id, a cursor) never
    // repeats a card number in it.
    const body = apiError.body(requestId);
    body.error.message = withoutCardNumbers(body.error.message);
    if (body.error.param !== undefined && containsCardNumber(body.error.param)) delete body.error.param;
    const response = c.json(body, apiError.status);
    for (const [name, value] of Object.entries(apiError.headers)) response.headers.set(name, value);
    response.headers.set(REQUEST_ID_HEADER, requestId);
    return response;
  });

  // The routes a wrong guess is compared with: every method and path the router serves.
  let known: KnownRoute[] | undefined;
  app.notFound((c) => {
    known ??= app.routes.filter((r) => r.method !== "ALL");
    const { pathname } = new URL(c.req.url);
    const meant = closestRoute(c.req.method, pathname, known);
    const hint = meant ? `Did you mean ${meant}?` : "See /docs.";
    throw new ApiError(404, "invalid_request_error", "route_not_found", `No route for ${c.req.method} ${pathname}. ${hint}`);
  });

  app.use("*", requestContext);
  // Authentication is declared per route, by apiRoute (src/routes/openapi.ts): every route needs a
  // bearer credential unless it is declared `public` (sign-up and the token exchange, which check
  // their own), and the OpenAPI document says the same, from the same flag.

  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "An API key (sk_test_…, rk_test_…) or an access token from POST /oauth/token.",
  });
  registerRoutes(app);

  // The document names the origin that served it as its server (a PORT change, or a deployed
  // host, shows there), so a client built from it calls the Tender it came from.
  app.get("/openapi.json", (c) => c.json(withCodeSamples(withVersionRequirements(app.getOpenAPI31Document(documentConfig(c))))));
  const documentConfig = (c: Context) => ({
    openapi: "3.1.0",
    info: {
      title: "Tender API",
      // The API version this document describes (src/domain/api-versions.ts); the client pins it.
      version: CURRENT_API_VERSION,
      description: GETTING_STARTED,
    },
    servers: [{ url: new URL(c.req.url).origin, description: "The Tender that served this document." }],
  });
  app.get("/docs", docsPage);
  app.get(DOCS_SCRIPT_PATH, docsScript);
  app.get("/favicon.ico", favicon);
  // HTML pages for people (src/dashboard/), outside the OpenAPI document.
  registerDashboard(app);
  // Pages for payers (src/pages/): the 3-D Secure challenge, checkout, the hosted invoice.
  registerHostedPages(app);
  return app;
}

