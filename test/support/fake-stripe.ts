// A fake Stripe for the connector's tests (in-process, through the SDK's injectable fetch) and for
// `npm run fake-stripe` (scripts/fake-stripe.ts serves it on 127.0.0.1:12111 for `npm run dev`).
//
// It answers as Stripe does for the operations Tender uses, and no other:
//  - every request is checked against Stripe's OpenAPI document (test/support/stripe-spec.ts) and
//    refused as Stripe refuses an unknown or missing parameter; every answer is checked against
//    it too, and both results are recorded;
//  - its objects are Stripe's published fixtures (test/fixtures/stripe/fixtures.json) with only
//    ids, amounts, statuses, links between objects and metadata set;
//  - idempotency as Stripe's: a key is scoped to the account (the platform, or `Stripe-Account`);
//    the same key with the same parameters replays the first answer (`Idempotent-Replayed: true`),
//    with other parameters it answers 400 idempotency_error; an answer refused before the
//    request ran (an invalid parameter, a 429, a 500) is not kept. `forgetIdempotencyKeys()` is
//    Stripe's 24 hours passing;
//  - Stripe's test cards decide a card's behaviour (4242… succeeds, 4000000000000002 declines,
//    …9995 insufficient funds, …0069 expired, …0119 processing error, 4000002760003184 and
//    4000000000003220 need authentication, 4000000000000341 is saved but declines every charge);
//  - `tokenize()` (and POST /_fake/payment_methods) is Stripe.js: a card becomes a PaymentMethod;
//  - GET /v3/ serves a stand-in for Stripe.js (test/support/fake-stripe-js.ts) for STRIPE_JS_URL;
//  - `authenticate()` (and POST /_fake/payment_intents/{id}/authenticate { outcome }) is the payer
//    finishing Stripe.js's 3-D Secure challenge (handleNextAction): complete or fail, with its event;
//  - faults on demand: answer 429, 409 or 500 N times; succeed, then drop the connection (the
//    caller sees a network error: "timeout after success"); decline or ask for authentication;
//  - events signed with the SDK's generateTestHeaderStringAsync, delivered to a URL late, twice,
//    or out of order.
// Plain TypeScript run by both workerd (vitest) and Node (type stripping): relative imports carry
// `.ts`, type-only imports say so.
import Stripe from "stripe";
import { type FormValue, type StripeSpec, checkObject, checkRequest, checkResponse } from "./stripe-spec.ts";
import { FAKE_STRIPE_JS } from "./fake-stripe-js.ts";

// ---------------------------------------------------------------------------------------------
// Types

/** A Stripe object as JSON. */
type Obj = Record<string, any>;

export interface StripeFixtures {
  source: string;
  resources: Record<string, Obj>;
}

export interface RecordedRequest {
  seq: number;
  method: string;
  /** Where the request was sent (host:port). */
  host: string;
  path: string;
  /** The `Stripe-Version` header. */
  apiVersion: string | null;
  /** `POST /v1/payment_intents`, or null when Stripe's document has no such operation. */
  operation: string | null;
  params: Record<string, FormValue>;
  idempotencyKey: string | null;
  stripeAccount: string | null;
  status: number;
  replayed: boolean;
  /** What Stripe's document says is wrong with the request (empty when it is right). */
  violations: string[];
  /** What Stripe's document says is wrong with the fake's answer (empty when it is right). */
  answerViolations: string[];
  /** The fault the fake injected, if any. */
  fault: "429" | "409" | "500" | "timeout_after_success" | null;
}

/** A way a card behaves, as Stripe's test cards do. */
export type CardBehaviour =
  | "succeed"
  | "generic_decline"
  | "insufficient_funds"
  | "expired_card"
  | "processing_error"
  | "authentication_required"
  | "decline_charges";

export type FaultRule =
  /** Answer this status (429, 409, 500) instead of running the request, `times` times. */
  | { kind: "status"; status: 429 | 409 | 500; operation?: string; times?: number; retryAfter?: number }
  /** Run the request, then drop the connection: the caller never sees the answer. */
  | { kind: "timeout_after_success"; operation?: string; times?: number }
  /** The next charges (PaymentIntents, SetupIntents) behave so, whatever the card. */
  | { kind: "card"; behaviour: CardBehaviour; operation?: string; times?: number }
  /** The next PaymentIntents stay `processing`, and read as `then` afterwards. */
  | { kind: "processing"; then: "succeeded" | "requires_payment_method" | "processing"; times?: number }
  /** The next refunds are created `pending`. */
  | { kind: "refund_pending"; times?: number }
  /** The next payouts are refused (400) with this code. */
  | { kind: "payout_refused"; code: string; times?: number };

export interface ConnectedAccountOptions {
  transfers?: "active" | "inactive" | "pending";
  payoutsEnabled?: boolean;
  /** Debit cards of the account (its external accounts), e.g. { last4: "4242", expMonth: 12, expYear: 2030 }. */
  cards?: { last4: string; expMonth: number; expYear: number; currency?: string; funding?: "debit" | "credit"; brand?: string }[];
}

export interface DeliveryOptions {
  url: string;
  secret: string;
  /** Which events (default: every event not yet delivered). */
  events?: Obj[];
  /** Send each twice. */
  twice?: boolean;
  /** Send newest first instead of in order. */
  reverse?: boolean;
  /** Wait this long before sending (a late event). */
  delayMs?: number;
  /** The signature's timestamp, in seconds (default now): an old one is outside the tolerance. */
  timestamp?: number;
}

export interface FakeStripeOptions {
  spec: StripeSpec;
  fixtures: StripeFixtures;
  /** Sends events (default: the global fetch). */
  deliver?: (url: string, init: RequestInit) => Promise<Response>;
  /** The fake's clock, in ms (default Date.now). */
  now?: () => number;
  /** Objects created less than this many seconds ago are not found by the Search API yet (Stripe: about 60). */
  searchLagSeconds?: number;
}

// ---------------------------------------------------------------------------------------------
// Helpers

const TEST_CARDS: Record<string, CardBehaviour> = {
  "4242424242424242": "succeed",
  "5555555555554444": "succeed",
  "4000056655665556": "succeed",
  "4000000000000002": "generic_decline",
  "4000000000009995": "insufficient_funds",
  "4000000000000069": "expired_card",
  "4000000000000119": "processing_error",
  "4000002760003184": "authentication_required",
  "4000000000003220": "authentication_required",
  "4000000000000341": "decline_charges",
};

const DECLINES: Record<Exclude<CardBehaviour, "succeed">, { code: string; decline_code?: string; message: string }> = {
  generic_decline: { code: "card_declined", decline_code: "generic_decline", message: "Your card was declined." },
  decline_charges: { code: "card_declined", decline_code: "generic_decline", message: "Your card was declined." },
  insufficient_funds: { code: "card_declined", decline_code: "insufficient_funds", message: "Your card has insufficient funds." },
  expired_card: { code: "expired_card", decline_code: "expired_card", message: "Your card has expired." },
  processing_error: { code: "processing_error", decline_code: "processing_error", message: "An error occurred while processing your card. Try again in a little bit." },
  authentication_required: {
    code: "authentication_required",
    decline_code: "authentication_required",
    message: "Your card was declined. This transaction requires authentication.",
  },
};

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
function randomId(prefix: string, length = 24): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  return `${prefix}_${[...bytes].map((b) => ALPHABET[b % ALPHABET.length]).join("")}`;
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value));

function luhn(number: string): boolean {
  let sum = 0;
  for (let i = 0; i < number.length; i++) {
    let digit = Number(number[number.length - 1 - i]);
    if (i % 2 === 1) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return number.length >= 12 && sum % 10 === 0;
}

const brandOf = (number: string) => (number.startsWith("4") ? "visa" : /^5[1-5]/.test(number) ? "mastercard" : /^3[47]/.test(number) ? "amex" : "unknown");

/** A Stripe error answer. */
function stripeError(status: number, error: Obj): FakeAnswer {
  return { status, body: { error: { message: "", ...error } } };
}

const missing = (what: string, id: string, param?: string) =>
  stripeError(404, { type: "invalid_request_error", code: "resource_missing", message: `No such ${what}: '${id}'`, ...(param ? { param } : {}) });

const invalid = (code: string, message: string, param?: string) => stripeError(400, { type: "invalid_request_error", code, message, ...(param ? { param } : {}) });

interface FakeAnswer {
  status: number;
  body: Obj;
  headers?: Record<string, string>;
}

const str = (value: FormValue | undefined): string | undefined => (typeof value === "string" ? value : undefined);
const int = (value: FormValue | undefined): number | undefined => (typeof value === "string" ? Number(value) : undefined);
const bool = (value: FormValue | undefined): boolean => value === "true";
const metadataOf = (value: FormValue | undefined): Record<string, string> =>
  value && typeof value === "object" && !Array.isArray(value) ? (Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === "string")) as Record<string, string>) : {};

/** The bits of Stripe's search language the connector uses: `metadata['k']:'v'` and `field:'v'`, joined by AND. */
function searchMatcher(query: string): ((object: Obj) => boolean) | null {
  const clauses = query.split(/\s+AND\s+/);
  const tests: ((object: Obj) => boolean)[] = [];
  for (const clause of clauses) {
    const meta = /^metadata\['([^']+)'\]:'([^']*)'$/.exec(clause.trim());
    const field = /^([a-z_]+):'([^']*)'$/.exec(clause.trim());
    if (meta) tests.push((object) => object.metadata?.[meta[1]] === meta[2]);
    else if (field) tests.push((object) => String(object[field[1]]) === field[2]);
    else return null;
  }
  return (object) => tests.every((test) => test(object));
}

// ---------------------------------------------------------------------------------------------
// The fake

export class FakeStripe {
  readonly spec: StripeSpec;
  readonly fixtures: StripeFixtures;
  readonly requests: RecordedRequest[] = [];
  readonly platformAccount: string;
  /** The mode of the key of the last request (Stripe's objects and events are of their key's mode). */
  livemode = false;

  readonly customers = new Map<string, Obj>();
  readonly paymentMethods = new Map<string, Obj>();
  readonly paymentIntents = new Map<string, Obj>();
  readonly setupIntents = new Map<string, Obj>();
  readonly charges = new Map<string, { id: string; paymentIntent: string; amount: number; refunded: number }>();
  readonly refunds = new Map<string, Obj>();
  readonly transfers = new Map<string, Obj>();
  readonly reversals = new Map<string, Obj>();
  readonly payouts = new Map<string, Obj>();
  readonly accounts = new Map<string, Obj>();
  readonly externalAccounts = new Map<string, Obj[]>();
  readonly disputes = new Map<string, Obj>();
  /** Every event, in the order it happened. */
  readonly events: Obj[] = [];
  /** Balances of the platform and each connected account, by currency (minor units). */
  readonly balances = new Map<string, Map<string, number>>();
  /** Keys Stripe would answer 401 to (any other `sk_test_`/`sk_live_`/`rk_` key is accepted). */
  readonly rejectedKeys = new Set<string>();

  private readonly behaviours = new Map<string, CardBehaviour>();
  private idempotency = new Map<string, { fingerprint: string; answer: FakeAnswer }>();
  private faults: { rule: FaultRule; left: number }[] = [];
  private delivered = new Set<string>();
  private webhookEndpoint: { url: string; secret: string } | null = null;
  private readonly deliverFn: (url: string, init: RequestInit) => Promise<Response>;
  private readonly clock: () => number;
  private readonly searchLagSeconds: number;
  private seq = 0;
  private objectSeq = 0;

  constructor(options: FakeStripeOptions) {
    this.spec = options.spec;
    this.fixtures = options.fixtures;
    this.deliverFn = options.deliver ?? ((url, init) => fetch(url, init));
    this.clock = options.now ?? Date.now;
    this.searchLagSeconds = options.searchLagSeconds ?? 0;
    this.platformAccount = randomId("acct", 16);
    this.accounts.set(this.platformAccount, this.object("account", { id: this.platformAccount, charges_enabled: true, payouts_enabled: true, details_submitted: true }));
    this.credit(this.platformAccount, "usd", 100_000_000);
    this.credit(this.platformAccount, "eur", 100_000_000);
  }

  // ---- what tests see and say ----------------------------------------------------------------

  /** The SDK's fetch: runs the request here, and drops the connection when told to. */
  readonly fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const { response, drop } = await this.serve(new Request(input, init));
    if (drop) throw new TypeError("Network connection lost: no answer (the fake Stripe dropped the connection after running the request)");
    return response;
  };

  /** Faults for the requests to come (added to the ones not used up). */
  inject(...rules: FaultRule[]): void {
    this.faults.push(...rules.map((rule) => ({ rule, left: rule.times ?? 1 })));
  }

  /** Faults not used up yet. */
  pendingFaults(): FaultRule[] {
    return this.faults.filter((f) => f.left > 0).map((f) => f.rule);
  }

  /** Stripe's 24 hours pass: every Idempotency-Key is forgotten. */
  forgetIdempotencyKeys(): void {
    this.idempotency = new Map();
  }

  /** A connected account of the platform that a Tender user can be linked to. */
  createConnectedAccount(options: ConnectedAccountOptions = {}): string {
    const id = randomId("acct", 16);
    const transfers = options.transfers ?? "active";
    this.accounts.set(
      id,
      this.object("account", {
        id,
        type: "custom",
        capabilities: { transfers, card_payments: "inactive" },
        charges_enabled: false,
        payouts_enabled: options.payoutsEnabled ?? true,
        details_submitted: true,
        email: null,
        metadata: {},
        external_accounts: { object: "list", data: [], has_more: false, url: `/v1/accounts/${id}/external_accounts` },
      }),
    );
    const cards = (options.cards ?? [{ last4: "4242", expMonth: 12, expYear: 2030 }]).map((card, index) =>
      this.object("card", {
        id: randomId("card"),
        account: id,
        customer: null,
        last4: card.last4,
        exp_month: card.expMonth,
        exp_year: card.expYear,
        brand: card.brand ?? "Visa",
        currency: card.currency ?? "usd",
        funding: card.funding ?? "debit",
        default_for_currency: index === 0,
        available_payout_methods: ["standard", "instant"],
        status: "new",
        fingerprint: randomId("fp", 16).slice(3),
        metadata: {},
      }),
    );
    this.externalAccounts.set(id, cards);
    return id;
  }

  /** Settles a pending payout at the recipient's bank: `payout.paid`, or `payout.failed` (money back in the account). */
  settlePayout(id: string, status: "paid" | "failed" | "canceled", failureCode = "account_closed"): Obj {
    const payout = this.payouts.get(id);
    if (!payout) throw new Error(`no payout ${id}`);
    payout.status = status;
    if (status !== "paid") {
      payout.failure_code = status === "failed" ? failureCode : null;
      payout.failure_message = status === "failed" ? `The payout failed (${failureCode}).` : null;
      this.credit(payout._account, payout.currency, payout.amount);
    }
    return this.emit(`payout.${status}`, payout, payout._account);
  }

  /** Settles a pending refund: `refund.updated` and `charge.refund.updated`. */
  settleRefund(id: string, status: "succeeded" | "failed" | "canceled"): Obj[] {
    const refund = this.refunds.get(id);
    if (!refund) throw new Error(`no refund ${id}`);
    refund.status = status;
    if (status !== "succeeded") {
      if (status === "failed") refund.failure_reason = "declined";
      const charge = this.charges.get(refund.charge);
      if (charge) charge.refunded -= refund.amount;
    }
    return [this.emit("refund.updated", refund), this.emit("charge.refund.updated", refund)];
  }

  /**
   * The payer finishes (or fails) the 3-D Secure challenge Stripe.js opened for a PaymentIntent in
   * requires_action: `complete` authorizes it (capture_method manual: requires_capture,
   * `payment_intent.amount_capturable_updated`) or charges it (`payment_intent.succeeded`); `fail`
   * leaves it requires_payment_method with last_payment_error payment_intent_authentication_failure
   * (`payment_intent.payment_failed`). Answers the event, or null when the intent was not waiting.
   */
  authenticate(paymentIntentId: string, outcome: "complete" | "fail"): Obj | null {
    const intent = this.paymentIntents.get(paymentIntentId);
    if (!intent) throw new Error(`no PaymentIntent ${paymentIntentId}`);
    if (intent.status !== "requires_action") return null;
    intent.next_action = null;
    if (outcome === "fail") {
      intent.status = "requires_payment_method";
      intent.last_payment_error = {
        type: "invalid_request_error",
        code: "payment_intent_authentication_failure",
        message: "The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again.",
      };
      return this.emit("payment_intent.payment_failed", intent);
    }
    if (intent.capture_method === "manual") {
      intent.status = "requires_capture";
      intent.amount_capturable = intent.amount;
      return this.emit("payment_intent.amount_capturable_updated", intent);
    }
    this.charge(intent);
    return this.emit("payment_intent.succeeded", intent);
  }

  /**
   * The payer finishes (or fails) the 3-D Secure challenge Stripe.js opened for a SetupIntent in
   * requires_action: `complete` sets the card up (on its customer; `setup_intent.succeeded`);
   * `fail` leaves it requires_payment_method with last_setup_error
   * (`setup_intent.setup_failed`). Answers the event, or null when the intent was not waiting.
   */
  authenticateSetup(setupIntentId: string, outcome: "complete" | "fail"): Obj | null {
    const intent = this.setupIntents.get(setupIntentId);
    if (!intent) throw new Error(`no SetupIntent ${setupIntentId}`);
    if (intent.status !== "requires_action") return null;
    intent.next_action = null;
    if (outcome === "fail") {
      intent.status = "requires_payment_method";
      intent.last_setup_error = {
        type: "invalid_request_error",
        code: "setup_intent_authentication_failure",
        message: "The latest attempt to set up the payment method has failed because authentication failed.",
      };
      return this.emit("setup_intent.setup_failed", intent);
    }
    intent.status = "succeeded";
    const method = intent.payment_method ? this.paymentMethods.get(intent.payment_method) : undefined;
    if (method && intent.customer) method.customer = intent.customer;
    return this.emit("setup_intent.succeeded", intent);
  }

  /** The holder disputes a payment: `charge.dispute.created`. */
  openDispute(paymentIntentId: string, reason = "fraudulent"): Obj {
    const intent = this.paymentIntents.get(paymentIntentId);
    if (!intent || !intent.latest_charge) throw new Error(`no charged PaymentIntent ${paymentIntentId}`);
    const dispute = this.object("dispute", {
      id: randomId("dp"),
      amount: intent.amount,
      currency: intent.currency,
      charge: intent.latest_charge,
      payment_intent: intent.id,
      reason,
      status: "needs_response",
      metadata: {},
      balance_transactions: [],
      is_charge_refundable: false,
    });
    this.disputes.set(dispute.id, dispute);
    return this.emit("charge.dispute.created", dispute);
  }

  /** An event about an object Tender never made, for the "ignore" paths. */
  emitForeign(type: string, object: Obj, account?: string): Obj {
    return this.emit(type, object, account);
  }

  /** Sends events, signed with the SDK's generateTestHeaderStringAsync, to a URL. */
  async deliverEvents(options: DeliveryOptions): Promise<{ eventId: string; type: string; status: number | "network_error" }[]> {
    if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
    let events = options.events ?? this.events.filter((event) => !this.delivered.has(event.id));
    if (options.reverse) events = [...events].reverse();
    const results: { eventId: string; type: string; status: number | "network_error" }[] = [];
    for (const event of events) {
      for (let copy = 0; copy < (options.twice ? 2 : 1); copy++) {
        const payload = JSON.stringify(event, null, 2);
        const signature = await Stripe.webhooks.generateTestHeaderStringAsync({
          payload,
          secret: options.secret,
          timestamp: options.timestamp ?? Math.floor(this.clock() / 1000),
          cryptoProvider: Stripe.createSubtleCryptoProvider(),
        });
        try {
          const response = await this.deliverFn(options.url, {
            method: "POST",
            headers: { "Content-Type": "application/json; charset=utf-8", "Stripe-Signature": signature, "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)" },
            body: payload,
          });
          await response.body?.cancel();
          results.push({ eventId: event.id, type: event.type, status: response.status });
        } catch {
          results.push({ eventId: event.id, type: event.type, status: "network_error" });
        }
      }
      this.delivered.add(event.id);
    }
    return results;
  }

  /** Objects of a kind, optionally filtered: what tests count. */
  count(kind: "paymentIntents" | "setupIntents" | "refunds" | "transfers" | "reversals" | "payouts" | "customers" | "paymentMethods", where: (o: Obj) => boolean = () => true): number {
    return [...this[kind].values()].filter(where).length;
  }

  /** The requests Stripe's document finds fault with, or whose answers it does. */
  specViolations(): string[] {
    return this.requests.flatMap((r) => [
      ...r.violations.map((v) => `${r.method} ${r.path}: ${v}`),
      ...r.answerViolations.map((v) => `answer to ${r.method} ${r.path}: ${v}`),
    ]);
  }

  /** Balance of the platform or a connected account. */
  balance(account: string, currency: string): number {
    return this.balances.get(account)?.get(currency) ?? 0;
  }

  // ---- HTTP -----------------------------------------------------------------------------------

  /** Answers one request. `drop`: the request ran, but the caller must not see the answer. */
  async serve(request: Request): Promise<{ response: Response; drop: boolean }> {
    const url = new URL(request.url);
    // The Stripe.js stand-in (test/support/fake-stripe-js.ts), for STRIPE_JS_URL=<this origin>/v3/.
    if (request.method === "GET" && (url.pathname === "/v3/" || url.pathname === "/v3")) {
      return { response: new Response(FAKE_STRIPE_JS, { headers: { "Content-Type": "text/javascript; charset=utf-8", "Access-Control-Allow-Origin": "*" } }), drop: false };
    }
    if (url.pathname.startsWith("/_fake/")) {
      // A hosted page's stand-in Stripe.js tokenizes from the page's origin: readable cross-origin.
      const answer = await this.admin(request, url);
      const headers = new Headers(answer.headers);
      headers.set("Access-Control-Allow-Origin", "*");
      return { response: new Response(answer.body, { status: answer.status, headers }), drop: false };
    }
    const body = request.method === "GET" ? "" : new TextDecoder().decode(await request.arrayBuffer());
    const checked = checkRequest(this.spec, { method: request.method, url: url.pathname + url.search, body });
    const record: RecordedRequest = {
      seq: ++this.seq,
      method: request.method,
      host: url.host,
      path: url.pathname,
      apiVersion: request.headers.get("Stripe-Version"),
      operation: checked.operation,
      params: checked.params,
      idempotencyKey: request.headers.get("Idempotency-Key"),
      stripeAccount: request.headers.get("Stripe-Account"),
      status: 0,
      replayed: false,
      violations: checked.violations,
      answerViolations: [],
      fault: null,
    };
    this.requests.push(record);
    const answer = this.answer(request, record, checked.pathParams);
    record.status = answer.status;
    const sent = strip(answer.body);
    if (record.operation) record.answerViolations = checkResponse(this.spec, record.operation, answer.status, sent);
    const drop = record.fault === null && answer.status < 500 && this.takeFault(record, "timeout_after_success") !== null;
    if (drop) record.fault = "timeout_after_success";
    const headers = new Headers({ "Content-Type": "application/json", "Request-Id": randomId("req", 14), "Stripe-Version": Stripe.API_VERSION, ...answer.headers });
    if (record.replayed) headers.set("Idempotent-Replayed", "true");
    return { response: new Response(JSON.stringify(sent), { status: answer.status, headers }), drop };
  }

  private answer(request: Request, record: RecordedRequest, pathParams: Record<string, string>): FakeAnswer {
    const auth = /^Bearer (\S+)$/.exec(request.headers.get("Authorization") ?? "")?.[1] ?? "";
    if (!/^(sk|rk)_(test|live)_\w+$/.test(auth) || this.rejectedKeys.has(auth)) {
      return stripeError(401, { type: "invalid_request_error", message: `Invalid API Key provided: ${auth.slice(0, 8)}****${auth.slice(-4)}` });
    }
    // Objects and events are of the mode of the key that last called, as Stripe's are of the key's.
    this.livemode = /^(sk|rk)_live_/.test(auth);
    if (!record.operation) {
      return stripeError(404, { type: "invalid_request_error", message: `Unrecognized request URL (${record.method}: ${record.path}).` });
    }
    if (record.violations.length > 0) {
      const first = record.violations[0];
      const code = /required, missing/.test(first) ? "parameter_missing" : /unknown parameter/.test(first) ? "parameter_unknown" : "parameter_invalid";
      return invalid(code, `Invalid request (Stripe's document): ${record.violations.join("; ")}`, first.split(":")[0]);
    }
    const status = this.takeFault(record, "status");
    if (status && status.kind === "status") {
      record.fault = String(status.status) as "429" | "409" | "500";
      const error =
        status.status === 429
          ? { type: "invalid_request_error", code: "rate_limit", message: "Too many requests hit the API too quickly." }
          : status.status === 409
            ? { type: "idempotency_error", message: "There is currently another in-progress request using this Idempotency-Key. Please try again later." }
            : { type: "api_error", message: "An unknown error occurred." };
      return { ...stripeError(status.status, error), headers: status.retryAfter ? { "Retry-After": String(status.retryAfter) } : undefined };
    }
    const scope = record.stripeAccount ?? this.platformAccount;
    if (record.stripeAccount && !this.accounts.has(record.stripeAccount)) {
      return stripeError(403, { type: "invalid_request_error", code: "account_invalid", message: `The provided key does not have access to account '${record.stripeAccount}' (or that account does not exist).` });
    }
    if (record.method === "POST" && record.idempotencyKey) {
      const stored = this.idempotency.get(`${scope} ${record.idempotencyKey}`);
      const fingerprint = `${record.operation} ${record.path} ${JSON.stringify(record.params)}`;
      if (stored) {
        if (stored.fingerprint !== fingerprint) {
          return stripeError(400, {
            type: "idempotency_error",
            message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${record.idempotencyKey}' if you meant to execute a different request.`,
          });
        }
        record.replayed = true;
        return clone(stored.answer);
      }
      const answer = this.run(record, pathParams, scope);
      this.idempotency.set(`${scope} ${record.idempotencyKey}`, { fingerprint, answer: clone(answer) });
      return answer;
    }
    return this.run(record, pathParams, scope);
  }

  private takeFault(record: RecordedRequest, kind: FaultRule["kind"]): FaultRule | null {
    const found = this.faults.find(
      (f) => f.left > 0 && f.rule.kind === kind && (!("operation" in f.rule) || !f.rule.operation || f.rule.operation === record.operation),
    );
    if (!found) return null;
    found.left--;
    return found.rule;
  }

  private takeRule<K extends FaultRule["kind"]>(kind: K, operation: string): Extract<FaultRule, { kind: K }> | null {
    const found = this.faults.find((f) => f.left > 0 && f.rule.kind === kind && (!("operation" in f.rule) || !f.rule.operation || f.rule.operation === operation));
    if (!found) return null;
    found.left--;
    return found.rule as Extract<FaultRule, { kind: K }>;
  }

  // ---- the operations -------------------------------------------------------------------------

  private run(record: RecordedRequest, pathParams: Record<string, string>, account: string): FakeAnswer {
    const p = record.params;
    switch (record.operation) {
      case "GET /v1/account":
        return { status: 200, body: this.accounts.get(this.platformAccount)! };
      case "GET /v1/customers/search":
        return this.search("customers", this.customers, str(p.query) ?? "", int(p.limit));
      case "POST /v1/customers":
        return this.createCustomer(p);
      case "POST /v1/payment_methods":
        return this.createPaymentMethod(p);
      case "POST /v1/payment_methods/{payment_method}/attach":
        return this.attachPaymentMethod(pathParams.payment_method, p);
      case "POST /v1/payment_methods/{payment_method}/detach":
        return this.detachPaymentMethod(pathParams.payment_method);
      case "POST /v1/payment_intents":
        return this.createPaymentIntent(p);
      case "GET /v1/payment_intents/search":
        return this.search("payment_intents", this.paymentIntents, str(p.query) ?? "", int(p.limit));
      case "GET /v1/payment_intents/{intent}": {
        const intent = this.paymentIntents.get(pathParams.intent);
        if (!intent) return missing("payment_intent", pathParams.intent, "intent");
        if (intent._then && intent._then !== "processing") {
          if (intent._then === "succeeded") this.charge(intent);
          else {
            intent.status = intent._then;
            intent.last_payment_error = { type: "card_error", ...DECLINES.generic_decline };
          }
          delete intent._then;
        }
        return { status: 200, body: intent };
      }
      case "POST /v1/payment_intents/{intent}/capture": {
        const intent = this.paymentIntents.get(pathParams.intent);
        if (!intent) return missing("payment_intent", pathParams.intent, "intent");
        if (intent.status !== "requires_capture") {
          return invalid("payment_intent_unexpected_state", `This PaymentIntent could not be captured because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be captured: requires_capture.`);
        }
        const amount = int(p.amount_to_capture) ?? intent.amount_capturable;
        if (amount > intent.amount_capturable) return invalid("amount_too_large", `The amount to capture (${amount}) is greater than amount_capturable (${intent.amount_capturable}).`, "amount_to_capture");
        this.charge(intent, amount);
        intent.amount_capturable = 0;
        return { status: 200, body: intent };
      }
      case "POST /v1/payment_intents/{intent}/cancel": {
        const intent = this.paymentIntents.get(pathParams.intent);
        if (!intent) return missing("payment_intent", pathParams.intent, "intent");
        if (intent.status === "succeeded" || intent.status === "canceled" || intent.status === "processing") {
          return invalid("payment_intent_unexpected_state", `You cannot cancel this PaymentIntent because it has a status of ${intent.status}.`);
        }
        const waited = intent.status === "requires_action";
        intent.status = "canceled";
        intent.amount_capturable = 0;
        intent.next_action = null;
        intent.canceled_at = Math.floor(Date.now() / 1000);
        intent.cancellation_reason = str(p.cancellation_reason) ?? null;
        // Sent for every cancel at Stripe; the fake sends it for an intent that waited for its payer only, which the older tests never had.
        if (waited) this.emit("payment_intent.canceled", intent);
        return { status: 200, body: intent };
      }
      case "POST /v1/setup_intents":
        return this.createSetupIntent(p);
      case "GET /v1/setup_intents/{intent}": {
        const intent = this.setupIntents.get(pathParams.intent);
        if (!intent) return missing("setup_intent", pathParams.intent, "intent");
        // expand[]=payment_method: the PaymentMethod whole, as Stripe expands it.
        const expand = Array.isArray(p.expand) ? p.expand : [];
        if (expand.includes("payment_method") && intent.payment_method) return { status: 200, body: { ...intent, payment_method: this.paymentMethods.get(intent.payment_method) ?? intent.payment_method } };
        return { status: 200, body: intent };
      }
      case "GET /v1/setup_intents":
        return this.list("/v1/setup_intents", [...this.setupIntents.values()].filter((s) => !p.customer || s.customer === p.customer), p);
      case "POST /v1/refunds":
        return this.createRefund(p);
      case "GET /v1/refunds":
        return this.list("/v1/refunds", [...this.refunds.values()].filter((r) => !p.payment_intent || r.payment_intent === p.payment_intent), p);
      case "GET /v1/accounts/{account}": {
        const found = this.accounts.get(pathParams.account);
        if (!found || pathParams.account === this.platformAccount) {
          return stripeError(403, { type: "invalid_request_error", code: "account_invalid", message: `The provided key does not have access to account '${pathParams.account}' (or that account does not exist).` });
        }
        return { status: 200, body: found };
      }
      case "GET /v1/accounts/{account}/external_accounts": {
        if (!this.accounts.has(pathParams.account)) return missing("account", pathParams.account, "account");
        return this.list(`/v1/accounts/${pathParams.account}/external_accounts`, this.externalAccounts.get(pathParams.account) ?? [], p);
      }
      case "POST /v1/transfers":
        return this.createTransfer(p);
      case "GET /v1/transfers":
        return this.list(
          "/v1/transfers",
          [...this.transfers.values()].filter((t) => (!p.transfer_group || t.transfer_group === p.transfer_group) && (!p.destination || t.destination === p.destination)),
          p,
        );
      case "POST /v1/transfers/{id}/reversals":
        return this.reverseTransfer(pathParams.id, p);
      case "POST /v1/payouts":
        return this.createPayout(p, account);
      case "GET /v1/payouts": {
        const created = p.created;
        const since = created && typeof created === "object" && !Array.isArray(created) ? Number(str(created.gte) ?? 0) : 0;
        return this.list("/v1/payouts", [...this.payouts.values()].filter((o) => o._account === account && o.created >= since), p);
      }
      default:
        return invalid("fake_unsupported", `The fake Stripe does not serve ${record.operation}`);
    }
  }

  private createCustomer(p: Record<string, FormValue>): FakeAnswer {
    const customer = this.object("customer", {
      id: randomId("cus", 14),
      email: str(p.email) ?? null,
      metadata: metadataOf(p.metadata),
      discount: null,
      invoice_settings: { ...this.fixtures.resources.customer.invoice_settings, default_payment_method: null },
    });
    this.customers.set(customer.id, customer);
    return { status: 200, body: customer };
  }

  private createPaymentMethod(p: Record<string, FormValue>): FakeAnswer {
    const card = p.card as Record<string, string>;
    const number = (card.number ?? "").replace(/\s/g, "");
    if (!/^\d{12,19}$/.test(number) || !luhn(number)) {
      return stripeError(402, { type: "card_error", code: "incorrect_number", message: "Your card number is incorrect.", param: "card[number]" });
    }
    const expMonth = Number(card.exp_month);
    const expYear = Number(card.exp_year);
    const now = new Date(this.clock());
    if (expMonth < 1 || expMonth > 12) return stripeError(402, { type: "card_error", code: "invalid_expiry_month", message: "Your card's expiration month is invalid.", param: "card[exp_month]" });
    if (expYear < now.getUTCFullYear() || (expYear === now.getUTCFullYear() && expMonth < now.getUTCMonth() + 1)) {
      return stripeError(402, { type: "card_error", code: "invalid_expiry_year", message: "Your card's expiration year is invalid.", param: "card[exp_year]" });
    }
    const fixture = this.fixtures.resources.payment_method;
    const method = this.object("payment_method", {
      id: randomId("pm"),
      type: "card",
      customer: null,
      metadata: metadataOf(p.metadata),
      billing_details: { ...fixture.billing_details, email: null, name: null, phone: null, address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null } },
      card: {
        ...fixture.card,
        brand: brandOf(number),
        display_brand: brandOf(number),
        last4: number.slice(-4),
        exp_month: expMonth,
        exp_year: expYear,
        funding: "credit",
        fingerprint: randomId("fp", 16).slice(3),
        checks: { address_line1_check: null, address_postal_code_check: null, cvc_check: card.cvc ? "pass" : null },
        generated_from: null,
      },
    });
    // The fake keeps the behaviour of the card, never its number.
    this.behaviours.set(method.id, TEST_CARDS[number] ?? "succeed");
    this.paymentMethods.set(method.id, method);
    return { status: 200, body: method };
  }

  /**
   * What Stripe.js does in the payer's browser with the publishable key: the card becomes a
   * PaymentMethod (pm_…) on no customer, its number never reaching the merchant. Not an API call.
   */
  tokenize(card: { number: string; expMonth?: number; expYear?: number; cvc?: string }): string {
    const year = new Date(this.clock()).getUTCFullYear() + 3;
    const answer = this.createPaymentMethod({ type: "card", card: { number: card.number, exp_month: String(card.expMonth ?? 12), exp_year: String(card.expYear ?? year), cvc: card.cvc ?? "123" } });
    if (answer.status !== 200) throw new Error(`the fake Stripe.js refused the card: ${JSON.stringify(answer.body)}`);
    return answer.body.id as string;
  }

  private attachPaymentMethod(id: string, p: Record<string, FormValue>): FakeAnswer {
    const method = this.paymentMethods.get(id);
    if (!method) return missing("PaymentMethod", id, "payment_method");
    const customerId = str(p.customer)!;
    if (!this.customers.has(customerId)) return missing("customer", customerId, "customer");
    if (method.customer && method.customer !== customerId) {
      return invalid("payment_method_unexpected_state", "The payment method you provided has already been attached to a customer.");
    }
    method.customer = customerId;
    return { status: 200, body: method };
  }

  private detachPaymentMethod(id: string): FakeAnswer {
    const method = this.paymentMethods.get(id);
    if (!method) return missing("PaymentMethod", id, "payment_method");
    if (!method.customer) {
      return invalid("payment_method_unexpected_state", "The payment method you provided is not attached to a customer so detachment is impossible.");
    }
    method.customer = null;
    return { status: 200, body: method };
  }

  /** The behaviour of a charge or a setup: a fault told to the fake, else the card's own. */
  private behaviourOf(paymentMethod: string, operation: string): CardBehaviour {
    return this.takeRule("card", operation)?.behaviour ?? this.behaviours.get(paymentMethod) ?? "succeed";
  }

  private createPaymentIntent(p: Record<string, FormValue>): FakeAnswer {
    const amount = int(p.amount)!;
    const currency = str(p.currency)!.toLowerCase();
    const customerId = str(p.customer) ?? null;
    const methodId = str(p.payment_method) ?? null;
    if (customerId && !this.customers.has(customerId)) return missing("customer", customerId, "customer");
    const method = methodId ? this.paymentMethods.get(methodId) : undefined;
    if (methodId && !method) return missing("payment_method", methodId, "payment_method");
    if (method?.customer && method.customer !== customerId) {
      return invalid("payment_method_invalid_parameter", `The PaymentMethod ${methodId} belongs to another Customer.`, "payment_method");
    }
    const offSession = p.off_session === "true";
    if (offSession && method && method.customer !== customerId) {
      return invalid("payment_method_invalid_parameter", "An off-session payment needs a PaymentMethod saved on the Customer.", "payment_method");
    }
    if (amount < 50) return invalid("amount_too_small", "Amount must be at least $0.50 usd", "amount");
    const auto = p.automatic_payment_methods as Record<string, string> | undefined;
    if (bool(p.confirm) && !str(p.return_url) && auto?.allow_redirects !== "never") {
      return invalid("payment_intent_invalid_parameter", "You must provide a return_url when confirming a PaymentIntent that may redirect.", "return_url");
    }
    const intent = this.object("payment_intent", {
      id: randomId("pi"),
      amount,
      amount_capturable: 0,
      amount_received: 0,
      currency,
      customer: customerId,
      payment_method: methodId,
      metadata: metadataOf(p.metadata),
      automatic_payment_methods: auto ? { enabled: true, allow_redirects: auto.allow_redirects ?? "always" } : null,
      setup_future_usage: str(p.setup_future_usage) ?? null,
      status: "requires_payment_method",
      last_payment_error: null,
      next_action: null,
      latest_charge: null,
      canceled_at: null,
      client_secret: null as string | null,
      transfer_data: null,
      processing: null,
      payment_method_types: ["card"],
      confirmation_method: "automatic",
    });
    // What Stripe.js needs to run the intent's next action in the payer's browser.
    intent.client_secret = `${intent.id}_secret_${randomId("", 24).slice(1)}`;
    if (str(p.capture_method) === "manual") intent.capture_method = "manual";
    this.paymentIntents.set(intent.id, intent);
    if (!bool(p.confirm) || !methodId) return { status: 200, body: intent };

    const processing = this.takeRule("processing", "POST /v1/payment_intents");
    if (processing) {
      intent.status = "processing";
      intent._then = processing.then;
      return { status: 200, body: intent };
    }
    const behaviour = this.behaviourOf(methodId, "POST /v1/payment_intents");
    const decline = behaviour === "succeed" ? null : behaviour;
    if (behaviour === "authentication_required" && !offSession && !bool(p.error_on_requires_action)) {
      intent.status = "requires_action";
      intent.next_action = { type: "use_stripe_sdk", use_stripe_sdk: {} };
      return { status: 200, body: intent };
    }
    if (decline) {
      const error = { type: "card_error", ...DECLINES[decline], charge: randomId("ch"), payment_method: method };
      intent.status = "requires_payment_method";
      intent.last_payment_error = { ...error, payment_method: undefined };
      return stripeError(402, { ...error, payment_intent: intent });
    }
    // capture_method manual: authorized, the amount held until it is captured or canceled.
    if (str(p.capture_method) === "manual") {
      intent.capture_method = "manual";
      intent.status = "requires_capture";
      intent.amount_capturable = intent.amount;
      return { status: 200, body: intent };
    }
    this.charge(intent);
    // Saved on the customer once the payment succeeded, as Stripe does with setup_future_usage.
    if (intent.setup_future_usage && customerId && method) method.customer = customerId;
    return { status: 200, body: intent };
  }

  /** A PaymentIntent succeeds: its charge, and the money in the platform's balance. */
  private charge(intent: Obj, amount: number = intent.amount) {
    intent.status = "succeeded";
    intent.amount_received = amount;
    intent.latest_charge = randomId("ch");
    this.charges.set(intent.latest_charge, { id: intent.latest_charge, paymentIntent: intent.id, amount, refunded: 0 });
    this.credit(this.platformAccount, intent.currency, amount);
  }

  private createSetupIntent(p: Record<string, FormValue>): FakeAnswer {
    const customerId = str(p.customer) ?? null;
    const methodId = str(p.payment_method) ?? null;
    if (customerId && !this.customers.has(customerId)) return missing("customer", customerId, "customer");
    const method = methodId ? this.paymentMethods.get(methodId) : undefined;
    if (methodId && !method) return missing("payment_method", methodId, "payment_method");
    const intent = this.object("setup_intent", {
      id: randomId("seti"),
      customer: customerId,
      payment_method: methodId,
      metadata: metadataOf(p.metadata),
      usage: str(p.usage) ?? "off_session",
      status: "requires_payment_method",
      last_setup_error: null,
      next_action: null,
      client_secret: null as string | null,
      latest_attempt: null,
      automatic_payment_methods: { enabled: true, allow_redirects: "never" },
      payment_method_types: ["card"],
    });
    intent.client_secret = `${intent.id}_secret_${randomId("", 24).slice(1)}`;
    this.setupIntents.set(intent.id, intent);
    if (!bool(p.confirm) || !methodId) return { status: 200, body: intent };
    const behaviour = this.behaviourOf(methodId, "POST /v1/setup_intents");
    if (behaviour === "authentication_required") {
      intent.status = "requires_action";
      intent.next_action = { type: "use_stripe_sdk", use_stripe_sdk: {} };
      return { status: 200, body: intent };
    }
    // A card that declines charges can still be saved, as Stripe's 4000000000000341.
    if (behaviour !== "succeed" && behaviour !== "decline_charges") {
      const error = { type: "card_error", ...DECLINES[behaviour] };
      intent.last_setup_error = error;
      return stripeError(402, { ...error, setup_intent: intent });
    }
    intent.status = "succeeded";
    if (method && customerId) method.customer = customerId;
    return { status: 200, body: intent };
  }

  private createRefund(p: Record<string, FormValue>): FakeAnswer {
    const intentId = str(p.payment_intent) ?? "";
    const intent = this.paymentIntents.get(intentId);
    if (!intent) return missing("payment_intent", intentId, "payment_intent");
    const charge = intent.latest_charge ? this.charges.get(intent.latest_charge) : undefined;
    if (!charge || intent.status !== "succeeded") return invalid("charge_not_refundable", `PaymentIntent ${intentId} has no successful charge to refund.`, "payment_intent");
    const left = charge.amount - charge.refunded;
    if (left <= 0) return invalid("charge_already_refunded", `Charge ${charge.id} has already been refunded.`);
    const amount = int(p.amount) ?? left;
    if (amount > left) return invalid("amount_too_large", `Refund amount (${amount}) is greater than unrefunded amount on charge (${left})`, "amount");
    const pending = this.takeRule("refund_pending", "POST /v1/refunds");
    charge.refunded += amount;
    const refund = this.object("refund", {
      id: randomId("re"),
      amount,
      currency: intent.currency,
      charge: charge.id,
      payment_intent: intent.id,
      metadata: metadataOf(p.metadata),
      status: pending ? "pending" : "succeeded",
      balance_transaction: null,
      reason: null,
    });
    this.refunds.set(refund.id, refund);
    return { status: 200, body: refund };
  }

  private createTransfer(p: Record<string, FormValue>): FakeAnswer {
    const destination = str(p.destination) ?? "";
    const account = this.accounts.get(destination);
    if (!account || destination === this.platformAccount) return invalid("account_invalid", `No such destination: '${destination}'`, "destination");
    if (account.capabilities?.transfers !== "active") {
      return invalid("insufficient_capabilities_for_transfer", "Your destination account needs to have at least one of the following capabilities enabled: transfers, crypto_transfers, legacy_payments", "destination");
    }
    const amount = int(p.amount)!;
    const currency = str(p.currency)!.toLowerCase();
    if (this.balance(this.platformAccount, currency) < amount) {
      return invalid("balance_insufficient", "You have insufficient available funds in your Stripe account.");
    }
    this.credit(this.platformAccount, currency, -amount);
    this.credit(destination, currency, amount);
    const id = randomId("tr");
    const transfer = this.object("transfer", {
      id,
      amount,
      currency,
      destination,
      destination_payment: randomId("py", 14),
      transfer_group: str(p.transfer_group) ?? null,
      metadata: metadataOf(p.metadata),
      amount_reversed: 0,
      reversed: false,
      reversals: { object: "list", data: [], has_more: false, url: `/v1/transfers/${id}/reversals` },
      source_transaction: null,
    });
    this.transfers.set(id, transfer);
    return { status: 200, body: transfer };
  }

  private reverseTransfer(id: string, p: Record<string, FormValue>): FakeAnswer {
    const transfer = this.transfers.get(id);
    if (!transfer) return missing("transfer", id, "id");
    const left = transfer.amount - transfer.amount_reversed;
    const amount = int(p.amount) ?? left;
    if (left <= 0 || amount > left) return invalid("transfer_already_reversed", `Transfer ${id} has already been reversed.`);
    if (this.balance(transfer.destination, transfer.currency) < amount) {
      return invalid("balance_insufficient", `The destination account ${transfer.destination} has insufficient funds to reverse this transfer.`);
    }
    this.credit(transfer.destination, transfer.currency, -amount);
    this.credit(this.platformAccount, transfer.currency, amount);
    const reversal = this.object("transfer_reversal", { id: randomId("trr"), amount, currency: transfer.currency, transfer: id, metadata: metadataOf(p.metadata) });
    this.reversals.set(reversal.id, reversal);
    transfer.amount_reversed += amount;
    transfer.reversed = transfer.amount_reversed >= transfer.amount;
    transfer.reversals.data.unshift(reversal);
    return { status: 200, body: reversal };
  }

  private createPayout(p: Record<string, FormValue>, account: string): FakeAnswer {
    const amount = int(p.amount)!;
    const currency = str(p.currency)!.toLowerCase();
    const destination = str(p.destination);
    const card = (this.externalAccounts.get(account) ?? []).find((c) => c.id === destination);
    if (destination && !card) return missing("external account", destination, "destination");
    const refused = this.takeRule("payout_refused", "POST /v1/payouts");
    if (refused) return invalid(refused.code, `The payout was refused (${refused.code}).`, "destination");
    if (this.balance(account, currency) < amount) return invalid("balance_insufficient", "You have insufficient funds in your Stripe account for this transfer.");
    this.credit(account, currency, -amount);
    const payout = this.object("payout", {
      id: randomId("po"),
      amount,
      currency,
      destination: destination ?? null,
      method: str(p.method) ?? "standard",
      metadata: metadataOf(p.metadata),
      status: "pending",
      type: "card",
      automatic: false,
      failure_code: null,
      failure_message: null,
      balance_transaction: null,
      reconciliation_status: "not_applicable",
      arrival_date: Math.floor(this.clock() / 1000) + 86_400,
      original_payout: null,
      reversed_by: null,
      description: null,
      statement_descriptor: null,
      source_type: "card",
    });
    payout._account = account;
    this.payouts.set(payout.id, payout);
    return { status: 200, body: payout };
  }

  // ---- lists, search, objects, events -----------------------------------------------------------

  /** Stripe's list: newest first, `limit` (default 10) and `starting_after`. */
  private list(url: string, items: Obj[], p: Record<string, FormValue>): FakeAnswer {
    const sorted = [...items].sort((a, b) => (b.created ?? 0) - (a.created ?? 0) || (b._seq ?? 0) - (a._seq ?? 0));
    const after = str(p.starting_after);
    const start = after ? sorted.findIndex((item) => item.id === after) + 1 : 0;
    const limit = int(p.limit) ?? 10;
    const page = sorted.slice(start, start + limit);
    return { status: 200, body: { object: "list", data: page, has_more: start + limit < sorted.length, url } };
  }

  private search(kind: string, items: Map<string, Obj>, query: string, limit = 10): FakeAnswer {
    const matches = searchMatcher(query);
    if (!matches) return invalid("search_query_invalid", `The fake Stripe does not understand the query: ${query}`, "query");
    const indexedBefore = Math.floor(this.clock() / 1000) - this.searchLagSeconds;
    const found = [...items.values()].filter((item) => item.created <= indexedBefore && matches(item)).slice(0, limit);
    return { status: 200, body: { object: "search_result", data: found, has_more: false, next_page: null, url: `/v1/${kind}/search` } };
  }

  /** A Stripe fixture with the given fields set, created now. */
  private object(resource: string, fields: Obj): Obj {
    const fixture = this.fixtures.resources[resource];
    if (!fixture) throw new Error(`no Stripe fixture for ${resource}`);
    const created = Math.floor(this.clock() / 1000);
    return { ...clone(fixture), ...("created" in fixture ? { created } : {}), ...("livemode" in fixture ? { livemode: this.livemode } : {}), ...fields, _seq: ++this.objectSeq };
  }

  private credit(account: string, currency: string, amount: number) {
    const balances = this.balances.get(account) ?? new Map<string, number>();
    balances.set(currency, (balances.get(currency) ?? 0) + amount);
    this.balances.set(account, balances);
  }

  private emit(type: string, object: Obj, account?: string): Obj {
    const event = this.object("event", {
      id: randomId("evt"),
      type,
      api_version: Stripe.API_VERSION,
      data: { object: strip(clone(object)) },
      livemode: this.livemode,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      ...(account && account !== this.platformAccount ? { account } : {}),
    });
    delete event._seq;
    const problems: string[] = [];
    checkObject(this.spec, this.spec.components.schemas.event, event, "event", problems, 1);
    const schema = this.spec.components.schemas[object.object];
    if (schema) checkObject(this.spec, schema, event.data.object, "event.data.object", problems, 1);
    if (problems.length > 0) throw new Error(`the fake's ${type} event does not match Stripe's document: ${problems.join("; ")}`);
    this.events.push(event);
    if (this.webhookEndpoint) void this.deliverEvents({ ...this.webhookEndpoint, events: [event] });
    return event;
  }

  // ---- control over HTTP (for scripts/fake-stripe.ts) ------------------------------------------

  private async admin(request: Request, url: URL): Promise<Response> {
    const json = (body: unknown, status = 200) => new Response(JSON.stringify(body, null, 2), { status, headers: { "Content-Type": "application/json" } });
    const input = request.method === "POST" ? ((await request.json().catch(() => ({}))) as Obj) : {};
    const path = url.pathname.replace(/^\/_fake/, "");
    try {
      if (request.method === "GET" && path === "/state") {
        const values = (map: Map<string, Obj>) => [...map.values()].map(strip);
        return json({
          platform_account: this.platformAccount,
          customers: values(this.customers),
          payment_intents: values(this.paymentIntents),
          setup_intents: values(this.setupIntents),
          refunds: values(this.refunds),
          transfers: values(this.transfers),
          payouts: values(this.payouts),
          events: this.events.map((e) => ({ id: e.id, type: e.type, delivered: this.delivered.has(e.id) })),
          spec_violations: this.specViolations(),
          requests: this.requests.length,
        });
      }
      if (request.method === "POST" && path === "/accounts") return json({ id: this.createConnectedAccount(input as ConnectedAccountOptions) });
      // What Stripe.js would make in the browser: { number, exp_month?, exp_year? } -> { id: "pm_…" }.
      if (request.method === "POST" && path === "/payment_methods") {
        return json({ id: this.tokenize({ number: String(input.number ?? ""), expMonth: input.exp_month ? Number(input.exp_month) : undefined, expYear: input.exp_year ? Number(input.exp_year) : undefined }) });
      }
      if (request.method === "POST" && path === "/faults") {
        this.inject(...(Array.isArray(input) ? input : [input]) as FaultRule[]);
        return json({ pending: this.pendingFaults() });
      }
      if (request.method === "POST" && path === "/forget-idempotency-keys") {
        this.forgetIdempotencyKeys();
        return json({ forgotten: true });
      }
      if (request.method === "POST" && path === "/webhook-endpoint") {
        this.webhookEndpoint = input.url ? { url: String(input.url), secret: String(input.secret) } : null;
        return json({ webhook_endpoint: this.webhookEndpoint ? { url: this.webhookEndpoint.url } : null });
      }
      if (request.method === "POST" && path === "/events/deliver") {
        const results = await this.deliverEvents({
          url: String(input.url),
          secret: String(input.secret),
          twice: Boolean(input.twice),
          reverse: Boolean(input.reverse),
          delayMs: Number(input.delay_ms ?? 0),
          ...(input.timestamp ? { timestamp: Number(input.timestamp) } : {}),
        });
        return json({ delivered: results });
      }
      const settle = /^\/(payouts|refunds)\/([^/]+)\/settle$/.exec(path);
      if (request.method === "POST" && settle) {
        // The object's Stripe id, or the Tender id it carries as metadata.tender_reference.
        const map = settle[1] === "payouts" ? this.payouts : this.refunds;
        const id = map.has(settle[2]) ? settle[2] : [...map.values()].find((o) => o.metadata?.tender_reference === settle[2])?.id ?? settle[2];
        const events = settle[1] === "payouts" ? [this.settlePayout(id, input.status ?? "paid", input.failure_code)] : this.settleRefund(id, input.status ?? "succeeded");
        return json({ events: events.map((e) => ({ id: e.id, type: e.type })) });
      }
      // What Stripe.js's handleNextAction ends with: the payer completed or failed the challenge.
      const authenticate = /^\/payment_intents\/([^/]+)\/authenticate$/.exec(path);
      if (request.method === "POST" && authenticate) {
        const event = this.authenticate(authenticate[1], input.outcome === "fail" ? "fail" : "complete");
        return json({ event: event ? { id: event.id, type: event.type } : null, payment_intent: strip(this.paymentIntents.get(authenticate[1])!) });
      }
      const authenticateSetup = /^\/setup_intents\/([^/]+)\/authenticate$/.exec(path);
      if (request.method === "POST" && authenticateSetup) {
        const event = this.authenticateSetup(authenticateSetup[1], input.outcome === "fail" ? "fail" : "complete");
        return json({ event: event ? { id: event.id, type: event.type } : null, setup_intent: strip(this.setupIntents.get(authenticateSetup[1])!) });
      }
      if (request.method === "POST" && path === "/disputes") {
        const event = this.openDispute(String(input.payment_intent), input.reason);
        return json({ event: { id: event.id, type: event.type } });
      }
      return json({ error: `no fake control ${request.method} ${path}` }, 404);
    } catch (error) {
      return json({ error: error instanceof Error ? error.message : String(error) }, 400);
    }
  }
}

/** The fake's own bookkeeping fields (`_seq`, `_account`, `_then`) never leave it. */
function strip(object: Obj): Obj {
  if (Array.isArray(object)) return object.map(strip);
  if (!object || typeof object !== "object") return object;
  const out: Obj = {};
  for (const [key, value] of Object.entries(object)) {
    if (!key.startsWith("_")) out[key] = value && typeof value === "object" ? strip(value) : value;
  }
  return out;
}
