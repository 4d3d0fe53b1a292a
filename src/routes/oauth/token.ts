// RFC 6749 client-credentials grant: an API key is exchanged for a short-lived access token
// whose scopes are no wider than the key's.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { ACCESS_TOKEN_TTL_SECONDS, authenticate, generateAccessToken } from "../../auth/credentials";
import { SCOPES, scopesWithin } from "../../auth/scopes";
import { runBatch } from "../../db/batch";
import { accessTokens } from "../../db/schema";
import { credentialGuard } from "../../db/scope";
import { newId } from "../../domain/ids";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { sha256Hex } from "../../lib/crypto";
import { ApiError, authenticationError, invalidRequest } from "../../lib/errors";
import { apiRoute, json } from "../openapi";
import { openShard } from "../../middleware/auth";

// Not strict: RFC 6749 §3.2 has the token endpoint ignore parameters it does not recognise.
const TokenRequest = z
  .object(
    {
      grant_type: z.string({ error: 'grant_type must be "client_credentials".' }).openapi({ example: "client_credentials" }),
      scope: z
        .string({ error: "scope must be a string of space-separated scopes, at most 2,000 characters." })
        .max(2000)
        .optional()
        .openapi({ description: "Space-separated scopes; defaults to all of the key's.", example: "users:read payouts:write" }),
      client_id: z.string({ error: "client_id must be a string of at most 200 characters." }).max(200).optional(),
      client_secret: z
        .string({ error: "client_secret must be an API key, a string of at most 200 characters." })
        .max(200)
        .optional()
        .openapi({ description: "The API key, when not sent in the Authorization header." }),
    },
    { error: "The request body must be a JSON object or a form." },
  )
  .openapi("TokenRequest");

const TokenResponse = z
  .object({
    access_token: z.string().openapi({ example: "at_test_…" }),
    token_type: z.literal("Bearer"),
    expires_in: z.number().int().openapi({ example: ACCESS_TOKEN_TTL_SECONDS }),
    scope: z.string(),
  })
  .openapi("TokenResponse");

const route = apiRoute({
  method: "post",
  path: "/oauth/token",
  tags: ["Authentication"],
  operationId: "createAccessToken",
  summary: "Exchange an API key for an access token",
  description:
    "The OAuth 2.0 client-credentials grant (RFC 6749 §4.4). Authenticate with the API key as 'Authorization: Bearer <key>', as HTTP Basic (the key as the password), or as client_secret in the body. The body may be form-encoded or JSON. Errors use Tender's error shape, with the RFC's error name as the code.",
  public: true,
  acceptForm: true,
  ignoreUnknownParameters: true,
  request: {
    body: {
      required: false,
      content: { "application/x-www-form-urlencoded": { schema: TokenRequest }, "application/json": { schema: TokenRequest } },
    },
  },
  responses: { 200: json(TokenResponse, "A bearer access token.") },
});

const invalidClient = () =>
  authenticationError("invalid_client", "Client authentication failed: send a valid, unrevoked API key (not an access token).");

function clientSecret(header: string | undefined, body: { client_secret?: string }): string | undefined {
  if (header) {
    const bearer = /^Bearer +(\S+)$/i.exec(header);
    if (bearer) return bearer[1];
    const basic = /^Basic +(\S+)$/i.exec(header);
    if (basic) {
      try {
        const decoded = atob(basic[1]);
        return decodeURIComponent(decoded.slice(decoded.indexOf(":") + 1));
      } catch {
        return undefined;
      }
    }
    return undefined;
  }
  return body.client_secret;
}

export function registerOauth(app: OpenAPIHono<AppEnv>) {
  app.openapi(route, async function createAccessToken(c) {
    const fromJson = c.req.valid("json") as Partial<z.infer<typeof TokenRequest>>;
    const body = (fromJson.grant_type !== undefined ? fromJson : c.req.valid("form")) as Partial<z.infer<typeof TokenRequest>>;
    if (body.grant_type !== "client_credentials") {
      throw invalidRequest("unsupported_grant_type", "Only grant_type=client_credentials is supported.", "grant_type");
    }
    const secret = clientSecret(c.req.header("authorization"), body);
    if (!secret || !/^(sk|rk)_/.test(secret)) throw invalidClient();
    const auth = await authenticate(c.env, secret, clock.now()).catch((error) => {
      // A key whose account is being moved between shards: 503, retry later; anything else is not a client.
      if (error instanceof ApiError && error.status === 503) throw error;
      throw invalidClient();
    });
    // RFC 6749 §3.3: an empty scope is the same as none sent (the key's own scopes).
    const listed = body.scope?.split(/\s+/).filter(Boolean) ?? [];
    const requested = listed.length > 0 ? listed : auth.scopes;
    const unknown = requested.find((s) => s !== "*" && !(SCOPES as readonly string[]).includes(s));
    if (unknown) throw invalidRequest("invalid_scope", `Unknown scope '${unknown}'.`, "scope");
    if (!scopesWithin(auth.scopes, requested)) {
      throw new ApiError(400, "invalid_request_error", "invalid_scope", "The requested scope is wider than the key's.", "scope");
    }
    const now = clock.now();
    const token = generateAccessToken(auth.mode, auth.shard);
    openShard(c, auth.shard);
    const db = c.var.db;
    await runBatch(db, [
      credentialGuard(db, auth),
      db.insert(accessTokens).values({
        id: newId("accessToken", now),
        accountId: auth.accountId,
        keyId: auth.keyId,
        hash: await sha256Hex(token),
        scopes: requested,
        createdAt: isoTime(now),
        expiresAt: isoTime(now + ACCESS_TOKEN_TTL_SECONDS * 1000),
      }),
    ], { credential_revoked: invalidClient });
    c.header("Cache-Control", "no-store");
    return c.json({ access_token: token, token_type: "Bearer" as const, expires_in: ACCESS_TOKEN_TTL_SECONDS, scope: requested.join(" ") }, 200);
  });
}
