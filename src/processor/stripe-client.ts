// The Stripe SDK as the connector uses it on Workers: one client per connection (its secret key,
// and in development another host), the fetch HTTP client and the SubtleCrypto provider, the API
// version pinned, and one retry rule for every request: 429, 409 and 5xx answers are retried with
// backoff and the SAME Idempotency-Key; an answer that never came (a timeout, a dropped
// connection) is thrown as an unknown outcome for the caller's claim machinery to retry.
import Stripe from "stripe";

/** The API version stripe@23.1.0 is pinned to (its own `Stripe.API_VERSION`; a test checks). */
export const STRIPE_API_VERSION = "2026-10-28.endive";

/** A connection to one Stripe account, as the processor connection stores it. */
export interface StripeConnection {
  secretKey: string;
  /** Another host for the API (a local fake Stripe); see stripeApiBase. */
  apiBase?: string;
}

export interface StripeClientOptions {
  /** The fetch the SDK sends with (tests pass the fake Stripe's). Default: the global fetch. */
  fetch?: typeof fetch;
  /** Waits between retries (tests pass one that does not wait). */
  sleep?: (ms: number) => Promise<void>;
  /** Retries of a 429, 409 or 5xx answer after the first try (default 3). */
  maxRetries?: number;
  /** How long one request may take before it counts as a timeout (default 20 s). */
  timeoutMs?: number;
  /** The clock (ms), for deciding when a retry comes too late for Stripe's 24 h keys. */
  now?: () => number;
}

/**
 * `STRIPE_API_BASE` is honoured only when `ENVIRONMENT=development`, so that tests and a local
 * fake can stand in for Stripe; anywhere else the connector always talks to api.stripe.com.
 */
export function stripeApiBase(env: { ENVIRONMENT: string; STRIPE_API_BASE?: string }): string | undefined {
  if (env.ENVIRONMENT !== "development" || !env.STRIPE_API_BASE) return undefined;
  return env.STRIPE_API_BASE;
}

export function newStripeClient(connection: StripeConnection, options: StripeClientOptions = {}): Stripe {
  const base = connection.apiBase ? new URL(connection.apiBase) : null;
  return new Stripe(connection.secretKey, {
    apiVersion: STRIPE_API_VERSION,
    httpClient: Stripe.createFetchHttpClient(options.fetch ?? ((input, init) => fetch(input, init))),
    // Retries are made by stripeRequest below, where the rule and the key are visible and tested.
    maxNetworkRetries: 0,
    timeout: options.timeoutMs ?? 20_000,
    telemetry: false,
    ...(base
      ? { host: base.hostname, port: base.port || (base.protocol === "http:" ? "80" : "443"), protocol: base.protocol === "http:" ? "http" : "https" }
      : {}),
  });
}

/** Signs and verifies Stripe webhook payloads with Web Crypto. */
export const stripeCrypto = Stripe.createSubtleCryptoProvider();

/** The answer never came: Stripe may or may not have done it. The caller retries with the same reference. */
export class StripeOutcomeUnknown extends Error {
  constructor(
    readonly request: string,
    cause: unknown,
  ) {
    const detail = cause instanceof Stripe.errors.StripeError ? `${cause.type}${cause.statusCode ? ` ${cause.statusCode}` : ""}` : "no answer";
    super(`Stripe ${request}: ${detail}; the outcome is unknown, retry with the same reference`, { cause });
    this.name = "StripeOutcomeUnknown";
  }
}

/** Stripe refused the request in a way no retry changes (a bad key, a bug in the parameters). */
export class StripeRequestRefused extends Error {
  constructor(
    readonly request: string,
    readonly error: InstanceType<typeof Stripe.errors.StripeError>,
  ) {
    super(`Stripe ${request} refused: ${error.type}${error.code ? ` ${error.code}` : ""}: ${error.message}`);
    this.name = "StripeRequestRefused";
  }
}

export type StripeError = InstanceType<typeof Stripe.errors.StripeError>;
export const isStripeError = (error: unknown): error is StripeError => error instanceof Stripe.errors.StripeError;

const RETRY_BASE_MS = 250;
const RETRY_MAX_MS = 4_000;

/** Whether an answer says "try again": rate limits, lock conflicts and Stripe's own errors. */
const retryable = (error: StripeError) => {
  const status = error.statusCode ?? 0;
  if (error.headers?.["stripe-should-retry"] === "false") return false;
  return status === 429 || status === 409 || status >= 500;
};

function retryDelay(error: StripeError, retry: number): number {
  const after = Number(error.headers?.["retry-after"]);
  const backoff = Math.min(RETRY_BASE_MS * 2 ** retry, RETRY_MAX_MS);
  return Number.isFinite(after) && after > 0 ? Math.min(after * 1000, RETRY_MAX_MS) : backoff;
}

const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Makes one Stripe request. `send` must send the same request every time (the same parameters and
 * Idempotency-Key), so a retry after a 429 or 5xx is the same request to Stripe. A Stripe error
 * that is an answer (a decline, an invalid request) is thrown as the SDK's error for the caller to
 * map; what stays unknown is thrown as StripeOutcomeUnknown.
 */
export async function stripeRequest<T>(label: string, options: StripeClientOptions, send: () => Promise<T>): Promise<T> {
  const maxRetries = options.maxRetries ?? 3;
  const sleep = options.sleep ?? wait;
  for (let retry = 0; ; retry++) {
    try {
      return await send();
    } catch (error) {
      if (error instanceof Stripe.errors.StripeConnectionError) throw new StripeOutcomeUnknown(label, error);
      // Anything else that is not Stripe's answer is a fault of the code before sending: say so.
      if (!isStripeError(error)) throw error;
      if (!retryable(error)) throw error;
      if (retry >= maxRetries) throw new StripeOutcomeUnknown(label, error);
      await sleep(retryDelay(error, retry));
    }
  }
}
