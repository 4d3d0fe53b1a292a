// The processor connection: live mode's card processor, the account's own Stripe account.
// PUT connects (or replaces) it after checking the key with Stripe; GET reads it; DELETE removes
// it. A connection removed, or replaced by another Stripe account's, is retired (its secrets kept
// only to settle Stripe's later events: src/processor/connections.ts). Only the live secret key manages it. The secret key and the webhook signing secrets are
// stored encrypted (src/processor/connections.ts) and never answered, logged or kept in an
// idempotency record (their fingerprint enters the request hash as a keyed hash only).
import type { OpenAPIHono } from "@hono/zod-openapi";
import { type SQL, and, eq, sql } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import { ensureLive } from "../../auth/credentials";
import { guard } from "../../db/batch";
import { processorConnections, retiredProcessorConnections } from "../../db/schema";
import type { AppEnv } from "../../context";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { ApiError, conflict, invalidRequest } from "../../lib/errors";
import { type ConnectionRow, readConnection, retireConnection, ringOf, sealSecrets } from "../../processor/connections";
import { verifyStripeKeyFor } from "../../processor";
import { moneyInFlightFailures, noMoneyInFlight } from "../../processor/in-flight";
import { withLiveKey } from "../reads";
import { commitAndRespond } from "../write-path";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { ConnectProcessorBody, DeletedProcessorConnectionSchema, ProcessorConnectionSchema, serializeConnection, webhookUrlOf } from "./schema";

const tags = ["Processor"];

/** Only the live secret key manages live mode's processor: not a test key, a restricted key or a token. */
const liveSecretKeyOnly = createMiddleware<AppEnv>(async (c, next) => {
  const { auth } = c.var;
  // A refusal says something about the key: a key revoked meanwhile (still cached here) gets its 401 first.
  if (!auth.livemode || auth.credential !== "secret_key") await ensureLive(c.var.db, auth);
  if (!auth.livemode) {
    throw new ApiError(
      403,
      "permission_error",
      "livemode_required",
      "The processor connection belongs to live mode (test mode always uses the sandbox): use the account's live secret key (sk_live_…).",
    );
  }
  if (auth.credential !== "secret_key") {
    throw new ApiError(
      403,
      "permission_error",
      "live_secret_key_required",
      "Only the account's live secret key (sk_live_…) manages the processor connection: not a restricted key, nor an access token.",
    );
  }
  return next();
});

const AUTH_NOTE = "Live secret key only: a test-mode credential answers 403 livemode_required, a live restricted key or access token 403 live_secret_key_required.";

const connect = apiRoute({
  method: "put",
  path: "/api/processor",
  tags,
  operationId: "connectProcessor",
  summary: "Connect live mode to your Stripe account",
  description:
    "Connects (or replaces) live mode's card processor: your Stripe account, with its publishable key for Stripe.js and the hosted pages. Card numbers are taken in live mode only with raw_card_data true. The key is checked with Stripe first (GET /v1/account); a key Stripe refuses answers 400 processor_key_invalid, and a Stripe test key outside development 400 processor_key_not_live. " +
    "The secret key and the webhook signing secrets are stored encrypted and never answered (only the key's last 4 characters). Point Stripe's webhook endpoints (your account's, and a Connect one for payouts) at the answer's webhook_url. " +
    "Replacing the connection with a key of another Stripe account answers 409 processor_in_use while live subscriptions, payouts or refunds depend on the connected one, or a live payment is being made through it at that moment, or one whose outcome at Stripe is unknown awaits the retry of its Idempotency-Key (at most 10 minutes) (with Retry-After); otherwise the connected one is retired (its secrets kept, encrypted, only to settle Stripe's later events about what was made through it). " +
    AUTH_NOTE,
  middleware: [liveSecretKeyOnly],
  request: jsonBodyOf(ConnectProcessorBody),
  responses: { 200: json(ProcessorConnectionSchema, "The connection.") },
});

const read = apiRoute({
  method: "get",
  path: "/api/processor",
  tags,
  operationId: "getProcessor",
  summary: "Read the processor connection",
  description: `The live-mode processor connection; 404 when there is none, whose message names the webhook_url to create Stripe's two endpoints at before connecting. ${AUTH_NOTE}`,
  middleware: [liveSecretKeyOnly],
  responses: { 200: json(ProcessorConnectionSchema, "The connection.") },
});

const disconnect = apiRoute({
  method: "delete",
  path: "/api/processor",
  tags,
  operationId: "disconnectProcessor",
  summary: "Disconnect the processor",
  description:
    "Removes the connection: live requests that move money then answer 400 livemode_unavailable and GET answers 404. Its secrets are kept, encrypted, only to verify and settle Stripe's later events about what was made through it (a payout that fails after it was paid has its transfer reversed), never to move new money. " +
    `While live subscriptions (active or past due), payouts or refunds still depend on it, or a live payment is being made through it at that moment (or one whose outcome at Stripe is unknown awaits the retry of its Idempotency-Key, at most 10 minutes), answers 409 processor_in_use (the latter with Retry-After). ${AUTH_NOTE}`,
  middleware: [liveSecretKeyOnly],
  responses: { 200: json(DeletedProcessorConnectionSchema, "The connection was removed.") },
});

const IN_USE = "processor_in_use";
const MISSING = "processor_missing";
const CONNECT_SECRET_NEEDED = "connect_webhook_secret_required";

// Stripe's endpoints must exist before connecting (connecting asks for their signing secrets), so the
// answer that says there is no connection names the URL they point at.
const noConnection = (webhookUrl?: string) =>
  new ApiError(
    404,
    "not_found_error",
    "resource_missing",
    `This account has no processor connection: connect your Stripe account with PUT /api/processor.${webhookUrl ? ` First create Stripe's two webhook endpoints (your account's, and a Connect one for payouts) at ${webhookUrl}: connecting asks for their signing secrets.` : ""}`,
  );

/** SQL: live money of the account depends on its connection (subscriptions to renew, payouts or refunds to settle). */
const liveMoneyInFlight = (accountId: string): SQL => sql`(
  EXISTS (SELECT 1 FROM subscriptions WHERE account_id = ${accountId} AND livemode = 1 AND status IN ('trialing', 'active', 'past_due'))
  OR EXISTS (SELECT 1 FROM payouts WHERE account_id = ${accountId} AND livemode = 1 AND status = 'pending')
  OR EXISTS (SELECT 1 FROM refunds WHERE account_id = ${accountId} AND livemode = 1 AND status = 'pending'))`;

const inUse = (what: string) =>
  conflict(
    IN_USE,
    `${what} while live subscriptions (active or past due), payouts or refunds depend on the connected Stripe account. Cancel them, or let them settle, first.`,
  );

/** Stripe did not answer the key check: nothing was stored. */
const stripeUnavailable = () =>
  new ApiError(500, "api_error", "processor_unavailable", "Stripe did not answer when the key was checked, so nothing was stored. Retry in a moment.");

export function registerProcessor(app: OpenAPIHono<AppEnv>) {
  app.openapi(connect, async function connectProcessor(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    // A Tender that cannot encrypt says so before the key travels anywhere.
    await ringOf(c.env);
    const check = await verifyStripeKeyFor(c.env, body.secret_key).catch((error: unknown) => {
      // The name and message of Stripe's error, or of the network's: neither holds the key.
      console.error(JSON.stringify({ request_id: c.var.requestId, message: "Stripe key check failed", error: error instanceof Error ? `${error.name}: ${error.message}` : "unknown" }));
      throw stripeUnavailable();
    });
    if (!check.valid) throw invalidRequest("processor_key_invalid", check.message, "secret_key");
    if (!check.livemode && !isDevelopment(c.env)) {
      throw invalidRequest(
        "processor_key_not_live",
        "This is a Stripe test-mode key: live mode moves real money, so it needs your Stripe account's live secret key (sk_live_…). Tender's test mode needs no Stripe key.",
        "secret_key",
      );
    }
    if (body.publishable_key !== undefined && body.publishable_key.startsWith("pk_live_") !== body.secret_key.startsWith(`${body.secret_key.slice(0, 2)}_live_`)) {
      throw invalidRequest("publishable_key_mismatch", "publishable_key and secret_key must be of the same Stripe mode: pk_live_… with a live secret key, pk_test_… with a test one.", "publishable_key");
    }
    const existing = await readConnection(db, auth.accountId);
    // Omitted on a replacement, each keeps the connection's own (a rolled key changes neither).
    const publishableKey = body.publishable_key ?? existing?.publishableKey ?? null;
    const rawCardData = body.raw_card_data ?? existing?.rawCardData ?? false;
    const sealed = await sealSecrets(c.env, auth.accountId, {
      secretKey: body.secret_key,
      webhookSecret: body.webhook_secret,
      connectWebhookSecret: body.connect_webhook_secret ?? null,
    });
    const row: ConnectionRow = {
      accountId: auth.accountId,
      livemode: true,
      provider: body.provider,
      processorAccount: check.account,
      ...sealed,
      rawCardData,
      publishableKey,
      createdAt: existing?.createdAt ?? isoTime(now),
      updatedAt: isoTime(now),
    };
    const answer = serializeConnection(row, new URL(c.req.url).origin);
    return commitAndRespond(
      c,
      {
        statements: [
          // Another Stripe account would strand what the connected one holds (customers, cards,
          // transfers): refused while live money depends on it. The same account (a rolled key) is fine.
          guard(
            db,
            IN_USE,
            sql`NOT (EXISTS (SELECT 1 FROM processor_connections WHERE account_id = ${auth.accountId} AND processor_account <> ${check.account}) AND ${liveMoneyInFlight(auth.accountId)})`,
          ),
          noMoneyInFlight(db, auth.accountId, clock.now(), check.account),
          // Without a Connect secret, the payout.failed of a payout already made through this Stripe
          // account (one that was paid can still fail, days later) could never be verified: refused.
          ...(body.connect_webhook_secret === undefined
            ? [
                guard(
                  db,
                  CONNECT_SECRET_NEEDED,
                  sql`NOT EXISTS (SELECT 1 FROM payouts WHERE account_id = ${auth.accountId} AND livemode = 1 AND processor_account = ${check.account} AND status IN ('pending', 'paid'))`,
                ),
              ]
            : []),
          // Another Stripe account's key retires the connected one: its secrets are kept to settle
          // Stripe's later events about what was made through it (processor/connections.ts).
          retireConnection(db, auth.accountId, now, check.account),
          // A Stripe account connected again is live, not retired: its new secrets supersede the
          // retired ones, which (perhaps the reason it was disconnected) verify nothing any more.
          db
            .delete(retiredProcessorConnections)
            .where(and(eq(retiredProcessorConnections.accountId, auth.accountId), eq(retiredProcessorConnections.processorAccount, check.account))),
          db
            .insert(processorConnections)
            .values(row)
            .onConflictDoUpdate({ target: processorConnections.accountId, set: { provider: row.provider, processorAccount: row.processorAccount, ...sealed, rawCardData, publishableKey, updatedAt: row.updatedAt } }),
        ],
        events: [],
      },
      200,
      answer,
      {
        failures: {
          [IN_USE]: () => inUse(`This account is connected to Stripe account ${existing?.processorAccount ?? "another"}; it cannot be replaced by ${check.account}`),
          ...moneyInFlightFailures,
          [CONNECT_SECRET_NEEDED]: () =>
            invalidRequest(
              "connect_webhook_secret_required",
              `Live payouts were sent through Stripe account ${check.account}, and a paid one can still fail: Stripe's payout.failed is signed with the Connect endpoint's secret, so connect_webhook_secret is required. Nothing was changed.`,
              "connect_webhook_secret",
            ),
        },
      },
    );
  });

  app.openapi(read, async function getProcessor(c) {
    const { db, auth } = c.var;
    const [row] = await withLiveKey(c, db.select().from(processorConnections).where(eq(processorConnections.accountId, auth.accountId)).limit(1));
    if (!row) throw noConnection(webhookUrlOf(new URL(c.req.url).origin, auth.accountId));
    return c.json(serializeConnection(row, new URL(c.req.url).origin), 200);
  });

  app.openapi(disconnect, async function disconnectProcessor(c) {
    const { db, auth } = c.var;
    const [row] = await withLiveKey(c, db.select().from(processorConnections).where(eq(processorConnections.accountId, auth.accountId)).limit(1));
    if (!row) throw noConnection();
    const answer = { object: "processor_connection" as const, provider: row.provider, livemode: true as const, processor_account: row.processorAccount, deleted: true as const };
    const mine = eq(processorConnections.accountId, auth.accountId);
    return commitAndRespond(
      c,
      {
        statements: [
          guard(db, MISSING, sql`EXISTS (SELECT 1 FROM processor_connections WHERE ${mine})`),
          guard(db, IN_USE, sql`NOT ${liveMoneyInFlight(auth.accountId)}`),
          noMoneyInFlight(db, auth.accountId, clock.now()),
          // Retired, not forgotten: Stripe's later events about what was made through it still settle.
          retireConnection(db, auth.accountId, clock.now()),
          db.delete(processorConnections).where(mine),
        ],
        events: [],
      },
      200,
      answer,
      { failures: { [MISSING]: noConnection, [IN_USE]: () => inUse("The processor connection cannot be removed"), ...moneyInFlightFailures } },
    );
  });
}
