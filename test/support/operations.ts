// The operations of the OpenAPI document as the running Worker serves it, the scope each one
// needs, and how to fill one in: its {id} from the fixtures (fixtures.ts `seed`) and a body it
// accepts, so a refusal in a test is about what the test changed.
import { expect } from "vitest";
import { SCOPES } from "../../src/auth/scopes";
import { PROOF_CARD, cardFields, payoutBody } from "./cards";
import { type Fixtures, PAYMENT_METHOD_OF, RECOVERY_OF } from "./fixtures";
import { type Account, call } from "./http";
import { connectStripe } from "./live";
import { RECEIVER_ORIGIN } from "./receiver";

// ---------------------------------------------------------------------------------------------
// The OpenAPI document

export interface Operation {
  method: "get" | "post" | "put" | "patch" | "delete";
  path: string;
  operationId: string;
  /** No bearer credential (the document gives the operation no `security`). */
  isPublic: boolean;
  /** The document gives the operation a request body. */
  hasBody: boolean;
  /** Query parameter names. */
  query: string[];
  /** Whether the path has an {id}. */
  hasId: boolean;
}

export const label = (op: Operation) => `${op.method.toUpperCase()} ${op.path}`;

/**
 * Stripe's webhook route (POST /processor-webhooks/stripe/{account_id}) is in the document, but no
 * Tender caller calls it: Stripe does, authenticated by its signature over the raw body, and every
 * refusal is a 400 (DESIGN.md). The sweeps leave it out (operations() without the option); its
 * own proofs are test/live/stripe-webhooks.test.ts (refusals change nothing, any body, any order).
 */
export const PROCESSOR_WEBHOOKS = new Set(["receiveStripeEvent"]);

/**
 * Operations only the account's live secret key may call (the processor connection): a test
 * credential answers 403 livemode_required, a live restricted key or token 403
 * live_secret_key_required, whatever scopes it holds. They need no scope (the secret key holds all).
 */
export const LIVE_SECRET_KEY_ONLY = new Set(["connectProcessor", "getProcessor", "disconnectProcessor"]);

/**
 * Operations only a secret key (either mode's) may call: the account itself (GET and PATCH
 * /api/account). A restricted key or an access token answers 403 secret_key_required, whatever
 * scopes it holds. They need no scope.
 */
export const SECRET_KEY_ONLY = new Set(["getAccount", "updateAccount"]);

/**
 * The credential a sweep sends `op` with, for an account made by signup(): its test secret key,
 * or, for the processor connection, its live secret key (after connecting Stripe first when the
 * operation needs a connection to act on). Connecting reaches Stripe: install the fake Stripe
 * (test/support/live.ts installFakeStripe) in a file that sweeps those operations.
 */
export async function credentialFor(op: Operation, acct: Account & { liveKey: string }): Promise<string> {
  if (!LIVE_SECRET_KEY_ONLY.has(op.operationId)) return acct.key;
  if (op.operationId !== "connectProcessor") await connectStripe(acct);
  return acct.liveKey;
}

/** Every operation of GET /openapi.json, as the running Worker documents it (Stripe's webhook route only when asked). */
export async function operations(options: { includeProcessorWebhooks?: boolean } = {}): Promise<Operation[]> {
  const res = await call("/openapi.json");
  expect(res.status).toBe(200);
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(res.body.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
      ops.push({
        method: method as Operation["method"],
        path,
        operationId: op.operationId,
        isPublic: !op.security || op.security.length === 0,
        hasBody: Boolean(op.requestBody),
        query: (op.parameters ?? []).filter((p: any) => p.in === "query").map((p: any) => p.name),
        hasId: path.includes("{id}"),
      });
    }
  }
  return options.includeProcessorWebhooks ? ops : ops.filter((op) => !PROCESSOR_WEBHOOKS.has(op.operationId));
}

/**
 * The scope each operation needs. The OpenAPI document does not expose it (apiRoute keeps
 * `scope` out of the generated operation), so it is written here from the route files; the
 * security suite checks this table against the document (every operation, nothing extra) and
 * against the running Worker (the scope alone is enough; every other scope is not).
 */
export const SCOPE_OF: Record<string, (typeof SCOPES)[number]> = {
  createKey: "keys:write",
  listKeys: "keys:read",
  getKey: "keys:read",
  revokeKey: "keys:write",
  createRequestId: "request_ids:write",
  listRequestIds: "request_ids:read",
  getRequestId: "request_ids:read",
  createUser: "users:write",
  listUsers: "users:read",
  getUser: "users:read",
  updateUser: "users:write",
  listBalanceTransactions: "users:read",
  createCheckoutSession: "checkout_sessions:write",
  listCheckoutSessions: "checkout_sessions:read",
  getCheckoutSession: "checkout_sessions:read",
  expireCheckoutSession: "checkout_sessions:write",
  createPortalSession: "portal_sessions:write",
  listPortalSessions: "portal_sessions:read",
  getPortalSession: "portal_sessions:read",
  createPaymentMethod: "payment_methods:write",
  listPaymentMethods: "payment_methods:read",
  getPaymentMethod: "payment_methods:read",
  detachPaymentMethod: "payment_methods:write",
  setDefaultPaymentMethod: "payment_methods:write",
  createPayout: "payouts:write",
  listPayouts: "payouts:read",
  getPayout: "payouts:read",
  cancelPayout: "payouts:write",
  createPayment: "payments:write",
  capturePayment: "payments:write",
  cancelPayment: "payments:write",
  listPayments: "payments:read",
  getPayment: "payments:read",
  createRefund: "refunds:write",
  listRefunds: "refunds:read",
  getRefund: "refunds:read",
  createWebhook: "webhooks:write",
  listWebhooks: "webhooks:read",
  getWebhook: "webhooks:read",
  updateWebhook: "webhooks:write",
  deleteWebhook: "webhooks:write",
  rotateWebhookSecret: "webhooks:write",
  listWebhookDeliveries: "webhooks:read",
  testWebhook: "webhooks:write",
  recoverWebhook: "webhooks:write",
  getWebhookRecovery: "webhooks:read",
  listWebhookRecoveries: "webhooks:read",
  listEventTypes: "events:read",
  listEvents: "events:read",
  getEvent: "events:read",
  redeliverEvent: "events:write",
  createPlan: "plans:write",
  listPlans: "plans:read",
  getPlan: "plans:read",
  updatePlan: "plans:write",
  createSubscription: "subscriptions:write",
  listSubscriptions: "subscriptions:read",
  getSubscription: "subscriptions:read",
  updateSubscription: "subscriptions:write",
  cancelSubscription: "subscriptions:write",
  createTestClock: "test_clocks:write",
  listTestClocks: "test_clocks:read",
  getTestClock: "test_clocks:read",
  advanceTestClock: "test_clocks:write",
  listInvoices: "invoices:read",
  getInvoice: "invoices:read",
  getInvoicePdf: "invoices:read",
  voidInvoice: "invoices:write",
  payInvoice: "invoices:write",
  createCoupon: "coupons:write",
  listCoupons: "coupons:read",
  getCoupon: "coupons:read",
  deleteCoupon: "coupons:write",
  createTaxRate: "tax_rates:write",
  listTaxRates: "tax_rates:read",
  getTaxRate: "tax_rates:read",
  updateTaxRate: "tax_rates:write",
  createCreditNote: "credit_notes:write",
  listCreditNotes: "credit_notes:read",
  getCreditNote: "credit_notes:read",
  getCreditNotePdf: "credit_notes:read",
  voidCreditNote: "credit_notes:write",
  createUsageRecord: "subscriptions:write",
  listUsage: "subscriptions:read",
  createUsageEvents: "subscriptions:write",
};

/**
 * Operations whose Idempotency-Key is claimed before they run, because money moves at the
 * processor before their batch commits (apiRoute's `claimFirst`). Every other write records its
 * key in its own batch.
 */
export const CLAIM_FIRST = new Set(["createSubscription", "updateSubscription", "advanceTestClock", "payInvoice", "createPaymentMethod", "createPayment", "capturePayment", "cancelPayment"]);

/** Every scope except the resource's own read and write: what "lacks the route's scope" means. */
export const scopesWithout = (scope: string) => SCOPES.filter((s) => s.split(":")[0] !== scope.split(":")[0]);

// ---------------------------------------------------------------------------------------------
// Filling an operation in

/** Path prefix (before /{id}) -> the fixture that fills it. */
const ID_OF_PATH: [string, keyof Fixtures][] = [
  ["/api/keys/", "key"],
  ["/api/request-id/", "requestId"],
  ["/api/users/", "user"],
  ["/payouts/", "payout"],
  ["/payments/", "payment"],
  ["/checkout/sessions/", "checkoutSession"],
  ["/portal/sessions/", "portalSession"],
  ["/refunds/", "refund"],
  ["/api/webhooks/", "webhook"],
  ["/api/events/", "event"],
  ["/subscription-plans/", "plan"],
  ["/subscriptions/", "subscription"],
  ["/api/test-clocks/", "clock"],
  ["/invoices/", "invoice"],
  ["/coupons/", "coupon"],
  ["/tax-rates/", "taxRate"],
  ["/credit-notes/", "creditNote"],
];

/** Operations whose {id} is a particular fixture of its kind: usage is reported to a metered subscription, an authorization is captured or canceled. */
const ID_OF_OPERATION: Record<string, keyof Fixtures> = { createUsageRecord: "metered", listUsage: "metered", capturePayment: "authorization", cancelPayment: "authorization" };

/** The fixture id for an operation's {id}; fails for a path no fixture covers (a new resource). */
export function fixtureId(op: Operation, fx: Fixtures): string {
  const own = ID_OF_OPERATION[op.operationId];
  if (own) return fx[own];
  const match = ID_OF_PATH.find(([prefix]) => op.path.startsWith(`${prefix}{id}`));
  if (!match) throw new Error(`No fixture fills the {id} of ${label(op)}: add one to test/support/operations.ts`);
  return fx[match[1]];
}

/** The path with its {id}, a user's saved card (seeded) as its {pm_id}, and an endpoint's recovery (seeded) as its {rcv_id}. */
export const pathWith = (op: Operation, id: string) =>
  op.path
    .replace("{id}", encodeURIComponent(id))
    .replace("{pm_id}", PAYMENT_METHOD_OF.get(id) ?? "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w")
    .replace("{rcv_id}", RECOVERY_OF.get(id) ?? "rcv_01jd2x4k5m6n7p8q9r0s1t2v3w");

/** A recovery's start: the same on every call (a retry with one Idempotency-Key sends the same body), inside the retention. */
const RECOVER_SINCE = new Date(Date.now() - 60_000).toISOString();

/** A body each mutating operation accepts (given the fixtures), so a refusal is about something else. */
export function validBody(op: Operation, fx: Fixtures): unknown {
  const bodies: Record<string, () => unknown> = {
    createAccount: () => ({ name: "Proof", email: "proof@example.com" }),
    createAccessToken: () => ({ grant_type: "client_credentials" }),
    createKey: () => ({ name: "proof key", scopes: ["users:read"] }),
    revokeKey: () => undefined,
    createRequestId: () => ({ purpose: "proof", metadata: { order: "A-1" } }),
    updateAccount: () => ({ event_retention_days: 30 }),
    createUser: () => ({ name: "Grace Hopper", email: "grace@example.com" }),
    updateUser: () => ({ name: "Grace B. Hopper", email: "grace@example.com" }),
    createPaymentMethod: () => ({ processor_token: "pm_card_visa" }),
    expireCheckoutSession: () => undefined,
    createCheckoutSession: () => ({ mode: "payment", amount: 1234, currency: "usd", user_id: fx.user, success_url: "https://shop.example.com/ok", cancel_url: "https://shop.example.com/cart" }),
    detachPaymentMethod: () => undefined,
    setDefaultPaymentMethod: () => undefined,
    createPortalSession: () => ({ user_id: fx.user, return_url: "https://shop.example.com/account" }),
    createPayout: () => payoutBody({ amount: 1234 }, PROOF_CARD.pan, PROOF_CARD.cvv),
    cancelPayout: () => undefined,
    createPayment: () => ({ amount: 1234, currency: "usd", user_id: fx.user, capture_method: "manual", ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) }),
    capturePayment: () => ({ amount: 100 }),
    cancelPayment: () => ({ cancellation_reason: "requested_by_customer" }),
    createRefund: () => ({ payment_id: fx.payment, amount: 1 }),
    createWebhook: () => ({ url: `${RECEIVER_ORIGIN}/proof`, events: ["payout.paid"] }),
    updateWebhook: () => ({ status: "active" }),
    deleteWebhook: () => undefined,
    rotateWebhookSecret: () => undefined,
    testWebhook: () => ({}),
    recoverWebhook: () => ({ since: RECOVER_SINCE }),
    redeliverEvent: () => ({}),
    createPlan: () => ({ name: "Basic", price: 5, currency: "usd", interval: "month" }),
    updatePlan: () => ({ name: "Basic+" }),
    createSubscription: () => ({ user_id: fx.user, plan_id: fx.plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) }),
    updateSubscription: () => ({ quantity: 2, proration_behavior: "none" }),
    cancelSubscription: () => undefined,
    createTestClock: () => ({ frozen_time: "2030-01-01T00:00:00.000Z", name: "proof" }),
    advanceTestClock: () => ({ frozen_time: "2030-02-01T00:00:00.000Z" }),
    // A well-formed body: a sweep that sends it with the live secret key reaches Stripe's key check.
    connectProcessor: () => ({ provider: "stripe", secret_key: `sk_live_${"P".repeat(32)}`, webhook_secret: `whsec_${"p".repeat(32)}`, connect_webhook_secret: `whsec_${"c".repeat(32)}` }),
    disconnectProcessor: () => undefined,
    voidInvoice: () => undefined,
    payInvoice: () => undefined,
    createCoupon: () => ({ name: "Proof 20", percent_off: 20, duration: "repeating", duration_in_months: 2 }),
    deleteCoupon: () => undefined,
    createTaxRate: () => ({ display_name: "VAT", percentage: "20", inclusive: false }),
    updateTaxRate: () => ({ display_name: "VAT (standard)" }),
    // 0.01 of the open invoice, to the user's balance (a refund needs a paid invoice).
    createCreditNote: () => ({ invoice_id: fx.creditedInvoice, amount: 1, refund: false, reason: "order_change" }),
    voidCreditNote: () => undefined,
    createUsageRecord: () => ({ quantity: 7 }),
    // The same body each time (a retry under one Idempotency-Key sends it): a repeated id is a duplicate, written once.
    createUsageEvents: () => ({ events: [{ id: `proof-${fx.metered}`, subscription_id: fx.metered, quantity: 7 }] }),
    // Its path names no fixture ({account_id}, not {id}): a sweep's move finds no account (404).
    moveAccount: () => ({ to_shard: 1 }),
  };
  if (!Object.hasOwn(bodies, op.operationId)) throw new Error(`No valid body for ${op.operationId}: add one to test/support/operations.ts`);
  return bodies[op.operationId]();
}

