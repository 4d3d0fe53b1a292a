// Which processor serves a request or a background job, by the mode and account of what it acts
// on: test mode is the sandbox, always; live mode is the account's processor connection (its
// Stripe account, PUT /api/processor), or none, which a request answers with a clear 400.
// Background work (settlement, renewals, dunning, claims) asks with the row's own account and
// mode, never by the shape of a token.
import type { Context } from "hono";
import type { AppEnv } from "../context";
import type { Db } from "../db/client";
import type { Tenant } from "../db/scope";
import type { Bindings } from "../env";
import { clock } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { type ConnectionRow, connectionThrough, openSecrets, readConnection } from "./connections";
import { sandboxProcessor } from "./sandbox";
import { type KeyCheck, stripeProcessorFor } from "./stripe";
import type { StripeClientOptions } from "./stripe-client";
import type { Processor } from "./types";

/**
 * Tests wrap the sandbox (to count calls, inject a timeout after success, or decline) the same
 * way `useClock` replaces the background clock; production never calls this.
 */
let wrapSandbox: ((processor: Processor) => Processor) | null = null;
export function useProcessor(wrapper?: (processor: Processor) => Processor) {
  wrapSandbox = wrapper ?? null;
}

/**
 * Tests give the Stripe connector their fake Stripe's fetch, and a sleep that does not wait
 * between retries; production never calls this (the connector then uses the global fetch).
 */
let stripeClientOptions: StripeClientOptions = {};
export function useStripeClient(options: StripeClientOptions = {}) {
  stripeClientOptions = options;
}

export const livemodeUnavailable = () =>
  new ApiError(
    400,
    "invalid_request_error",
    "livemode_unavailable",
    "Live mode has no card processor for this account: connect your Stripe account with PUT /api/processor (a live secret key, sk_live_…), or use a test-mode key.",
  );

/**
 * Card numbers in live mode on a connection without raw card data access: Stripe refuses them
 * (and they would put whoever runs Tender in PCI DSS SAQ D scope).
 */
export const rawCardDataUnavailable = () =>
  new ApiError(
    400,
    "invalid_request_error",
    "raw_card_data_unavailable",
    "Live mode does not take card numbers on this processor connection: let the payer type the card into the hosted checkout page (POST /checkout/sessions), or into Stripe.js on your own page with your publishable key, and send the PaymentMethod it makes (pm_…) to POST /api/users/{id}/payment-methods as processor_token; then pay with payment_method: \"pmt_…\". Only a Stripe account granted raw card data access may connect with \"raw_card_data\": true (PUT /api/processor).",
    "card_number",
  );

/** The processor of an account in a mode: the sandbox in test mode; in live mode the connection's, or null without one. */
export async function processorOf(env: Bindings, db: Db, tenant: Tenant): Promise<Processor | null> {
  if (!tenant.livemode) return wrapSandbox ? wrapSandbox(sandboxProcessor) : sandboxProcessor;
  const connection = await readConnection(db, tenant.accountId);
  if (!connection) return null;
  return connectedProcessor(env, connection);
}

async function connectedProcessor(env: Bindings, connection: ConnectionRow): Promise<Processor> {
  const { secretKey } = await openSecrets(env, connection);
  // The connector decides when Stripe may have forgotten a key (24 hours) by Tender's clock.
  return stripeProcessorFor(env, secretKey, { now: () => clock.now(), ...stripeClientOptions });
}

/**
 * The Stripe connector of one Stripe account this Tender account has been connected to (the live
 * connection, or a retired one), or null. Only for settling what was made through it (reversing a
 * failed payout's transfer), never for new money: new money goes through processorFor.
 */
export async function processorThrough(env: Bindings, db: Db, accountId: string, processorAccount: string): Promise<Processor | null> {
  const connection = await connectionThrough(db, accountId, processorAccount);
  if (!connection) return null;
  const { secretKey } = await openSecrets(env, connection);
  return stripeProcessorFor(env, secretKey, { now: () => clock.now(), ...stripeClientOptions });
}

/** Checks a Stripe secret key with Stripe (GET /v1/account) before it is stored. */
export function verifyStripeKeyFor(env: Bindings, secretKey: string): Promise<KeyCheck> {
  return stripeProcessorFor(env, secretKey, { now: () => clock.now(), ...stripeClientOptions }).verifyKey();
}

/** processorOf, or 400 livemode_unavailable when live mode has no connection. */
export async function processorFor(env: Bindings, db: Db, tenant: Tenant): Promise<Processor> {
  const processor = await processorOf(env, db, tenant);
  if (!processor) throw livemodeUnavailable();
  return processor;
}

/** The processor for a request: the caller's account and mode. */
export const processorForRequest = (c: Context<AppEnv>): Promise<Processor> => processorFor(c.env, c.var.db, c.var.auth);

/**
 * The processor for a request that sends card numbers (the card fields): in live mode only on a
 * connection made with raw_card_data true, else 400 raw_card_data_unavailable. Test mode always.
 */
export async function processorForCardFields(c: Context<AppEnv>): Promise<Processor> {
  const { env, var: { db, auth } } = c;
  if (!auth.livemode) return processorFor(env, db, auth);
  const connection = await readConnection(db, auth.accountId);
  if (!connection) throw livemodeUnavailable();
  if (!connection.rawCardData) throw rawCardDataUnavailable();
  return connectedProcessor(env, connection);
}

/**
 * For background work over many rows: each (account, mode) is looked up once. Null for a live
 * account without a connection (its rows are left as they are, and said so in the log).
 */
export function processorResolver(env: Bindings, db: Db): (tenant: Tenant) => Promise<Processor | null> {
  const known = new Map<string, Promise<Processor | null>>();
  return (tenant) => {
    const key = `${tenant.accountId}:${tenant.livemode ? "live" : "test"}`;
    let processor = known.get(key);
    if (!processor) {
      processor = processorOf(env, db, tenant);
      known.set(key, processor);
      processor.then(
        (found) => {
          if (!found) console.error(JSON.stringify({ message: "live-mode work skipped: the account has no processor connection", account: tenant.accountId }));
        },
        () => known.delete(key),
      );
    }
    return processor;
  };
}
