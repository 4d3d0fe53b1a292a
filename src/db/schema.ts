// The system of record. Every row belongs to one account; every query goes through the
// account-scoped helpers in src/db/scope.ts. Money columns are integers in minor units.
import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import type { OpenCharge } from "../domain/proration";
import type { PostalAddress, TaxIdValue } from "../domain/parties";
import type { TaxAmount, TaxRateValue } from "../domain/tax";

const createdAt = () => text("created_at").notNull();
// Test or live: every object belongs to one account AND one mode. Each mode's queries filter on
// it (src/db/scope.ts), and the indexes lead with (account_id, livemode), so neither mode reads the
// other's rows. Rows from before modes existed are test-mode rows (migration 0009).
const livemode = () => integer("livemode", { mode: "boolean" }).notNull().default(false);

export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  email: text("email").notNull(),
  /** The API version the account is pinned to (src/domain/api-versions.ts); accounts made before versions existed have the first. */
  apiVersion: text("api_version").notNull().default("2026-11-01"),
  createdAt: createdAt(),
  /**
   * Set on the shard an account was moved away from (src/accounts/move.ts): the shard it lives on
   * now. Its row and its keys' stay here, paused, so a credential naming this shard finds its way.
   */
  movedTo: integer("moved_to"),
  /** The move in progress (src/accounts/move.ts): one at a time, each holding this until moveUntil (epoch ms). */
  moveToken: text("move_token"),
  moveUntil: integer("move_until"),
  /** Days an event, its deliveries and their attempts are kept (src/webhooks/retention.ts): 1 to 365. */
  eventRetentionDays: integer("event_retention_days").notNull().default(30),
  // The seller as its invoices name it (PATCH /api/account; src/domain/parties.ts), copied onto an
  // invoice when it is finalized: the business name (else `name`), its postal address, its tax id
  // and the footer its invoices print. Null until set.
  businessName: text("business_name"),
  address: text("address", { mode: "json" }).$type<PostalAddress>(),
  taxId: text("tax_id"),
  invoiceFooter: text("invoice_footer"),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name"),
    kind: text("kind", { enum: ["secret", "restricted"] }).notNull(),
    mode: text("mode", { enum: ["test", "live"] }).notNull(),
    // The key's mode as every other table stores it, derived from `mode`: never written, never out of step.
    livemode: integer("livemode", { mode: "boolean" }).notNull().generatedAlwaysAs(sql`mode = 'live'`, { mode: "virtual" }),
    // The first characters of the key, shown so a user can tell keys apart. Never enough to use.
    prefix: text("prefix").notNull(),
    // SHA-256 of the whole key, hex. The key itself is never stored.
    hash: text("hash").notNull(),
    scopes: text("scopes", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    revokedAt: text("revoked_at"),
    /** Set while the account is being moved to another shard, and for good on the shard it left: the key answers 503 here. */
    pausedAt: text("paused_at"),
  },
  (t) => [uniqueIndex("api_keys_hash").on(t.hash), index("api_keys_account").on(t.accountId, t.livemode, t.id)],
);

export const accessTokens = sqliteTable(
  "access_tokens",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    keyId: text("key_id").notNull().references(() => apiKeys.id),
    hash: text("hash").notNull(),
    scopes: text("scopes", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [uniqueIndex("access_tokens_hash").on(t.hash), index("access_tokens_key").on(t.keyId), index("access_tokens_account").on(t.accountId, t.id)],
);

export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    key: text("key").notNull(),
    // SHA-256 over method, path and body, with card fields replaced by their keyed hash first.
    requestHash: text("request_hash").notNull(),
    // A random token per claim: only the request holding it may complete the record.
    claimToken: text("claim_token").notNull(),
    status: text("status", { enum: ["in_flight", "completed"] }).notNull(),
    responseStatus: integer("response_status"),
    responseBody: text("response_body"),
    createdAt: createdAt(),
    lockedAt: integer("locked_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.livemode, t.key] }), index("idempotency_keys_expiry").on(t.expiresAt)],
);

// Statements placed in a D1 batch to abort it when a precondition fails. A trigger (see the
// custom migration) raises the inserted reason as the error message, rolling back the batch.
export const batchGuards = sqliteTable("batch_guards", {
  reason: text("reason").notNull(),
});

export const requestIds = sqliteTable(
  "request_ids",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    purpose: text("purpose").notNull(),
    metadata: text("metadata", { mode: "json" }).$type<Record<string, unknown>>(),
    createdAt: createdAt(),
  },
  (t) => [index("request_ids_account").on(t.accountId, t.livemode, t.id)],
);

export const testClocks = sqliteTable(
  "test_clocks",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    name: text("name"),
    frozenTime: text("frozen_time").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("test_clocks_account").on(t.accountId, t.livemode, t.id)],
);

export const users = sqliteTable(
  "users",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    name: text("name").notNull(),
    email: text("email").notNull(),
    testClockId: text("test_clock_id"),
    // Live mode only: the Stripe connected account (acct_…) this user is paid out to (see
    // src/processor/types.ts PayoutRecipient). Null in test mode, where any card can be paid.
    stripeAccount: text("stripe_account"),
    // The buyer's postal address and tax ids (src/domain/parties.ts), which an invoice copies when it is finalized.
    address: text("address", { mode: "json" }).$type<PostalAddress>(),
    taxIds: text("tax_ids", { mode: "json" }).$type<TaxIdValue[]>().notNull().default(sql`'[]'`),
    // The saved card (pmt_…) the user chose as their default (Stripe's
    // invoice_settings.default_payment_method); cleared when that card is detached.
    defaultPaymentMethodId: text("default_payment_method_id"),
    // The customer balance (Stripe's `balance`), integer minor units of `currency`: negative is a
    // credit the user holds (credit notes with refund: false), which later invoices consume. Moved
    // only together with its ledger row (customer_balance_transactions), in one batch.
    balance: integer("balance").notNull().default(0),
    // The balance's currency, set by the first credit to it; a credit in another currency is refused.
    currency: text("currency"),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("users_account").on(t.accountId, t.livemode, t.id), index("users_test_clock").on(t.testClockId)],
);

export const events = sqliteTable(
  "events",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    type: text("type").notNull(),
    // The exact JSON body delivered to endpoints, built once when the event is emitted.
    payload: text("payload").notNull(),
    // The object the event is about (a user, payout, payment, refund or subscription), and the
    // event's place among that object's events: 1, 2, 3 … assigned in the change's own batch, so
    // gap-free and in commit order. Unique, so two events can never share a place.
    objectId: text("object_id"),
    sequence: integer("sequence"),
    // The event's place in its account's feed (GET /api/events): 1, 2, 3 … taken by the INSERT
    // itself as the account's MAX + 1, so in commit order (D1 has one writer), whatever time the
    // id carries. The feed orders and pages by it; unique, so two events never share a place.
    feedPosition: integer("feed_position").notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    // Unique per account: the feed's place is the account's MAX + 1, whatever the mode.
    uniqueIndex("events_account_feed").on(t.accountId, t.feedPosition),
    index("events_account_mode_feed").on(t.accountId, t.livemode, t.feedPosition),
    index("events_account_type_feed").on(t.accountId, t.livemode, t.type, t.feedPosition),
    uniqueIndex("events_object_sequence").on(t.objectId, t.sequence),
    // The retention purge (src/webhooks/retention.ts) reads each account's events older than its cutoff.
    index("events_account_created").on(t.accountId, t.createdAt),
  ],
);

export const webhookEndpoints = sqliteTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    url: text("url").notNull(),
    events: text("events", { mode: "json" }).$type<string[]>().notNull(),
    status: text("status", { enum: ["active", "disabled"] }).notNull(),
    // Why and when it was disabled (null while active): "failing" (every attempt failed for 5
    // days), "gone" (a 410), "manual" (PATCH or the dashboard). See src/webhooks/health.ts.
    disabledReason: text("disabled_reason", { enum: ["failing", "gone", "manual"] }),
    disabledAt: text("disabled_at"),
    // Epoch ms of the first failed attempt since the last 2xx (null after a 2xx, or on enable).
    failingSince: integer("failing_since"),
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousSecretExpiresAt: text("previous_secret_expires_at"),
    // "per_object": a delivery about an object waits while an earlier one about it is pending.
    ordering: text("ordering", { enum: ["none", "per_object"] }).notNull().default("none"),
    // Deliveries per second, 1-1000, held by the endpoint's Durable Object (src/webhooks/throttle.ts); NULL: none.
    rateLimit: integer("rate_limit"),
    // Epoch ms until which a receiver's overload answer (429, 502, 503, 504) slows the endpoint.
    slowedUntil: integer("slowed_until"),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
    deletedAt: text("deleted_at"),
  },
  (t) => [index("webhook_endpoints_account").on(t.accountId, t.livemode, t.id)],
);

export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    eventId: text("event_id").notNull(),
    endpointId: text("endpoint_id").notNull(),
    status: text("status", { enum: ["pending", "delivered", "failed"] }).notNull(),
    attemptCount: integer("attempt_count").notNull().default(0),
    // Epoch ms of the first attempt of the current window; the 24-hour window counts from it.
    firstAttemptAt: integer("first_attempt_at"),
    nextAttemptAt: integer("next_attempt_at"),
    // Epoch ms until which the attempt in flight holds the delivery: no other worker sends it.
    leaseUntil: integer("lease_until"),
    // On a per_object endpoint: the earlier delivery about the same object this one waits for.
    waitingFor: text("waiting_for"),
    lastStatusCode: integer("last_status_code"),
    lastError: text("last_error"),
    createdAt: createdAt(),
    updatedAt: integer("updated_at").notNull(),
    deliveredAt: text("delivered_at"),
  },
  (t) => [
    uniqueIndex("webhook_deliveries_event_endpoint").on(t.eventId, t.endpointId),
    index("webhook_deliveries_endpoint").on(t.endpointId, t.id),
    index("webhook_deliveries_pending").on(t.status, t.updatedAt),
    index("webhook_deliveries_account").on(t.accountId, t.livemode, t.status),
  ],
);

// A recovery of an endpoint (POST /api/webhooks/{id}/recover, src/webhooks/operations/recovery.ts):
// every event of the range [since, until) the endpoint takes with no 2xx to it is sent once more, by
// a job that goes through the account's feed a page at a time. `cursor` is the feed position of the
// last event it went through: each page's batch checks it and moves it on, so a duplicate message
// sends nothing twice. Two running recoveries of an endpoint never overlap (the route's batch guard).
export const webhookRecoveries = sqliteTable(
  "webhook_recoveries",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    endpointId: text("endpoint_id").notNull(),
    since: text("since").notNull(),
    until: text("until").notNull(),
    status: text("status", { enum: ["running", "done"] }).notNull(),
    total: integer("total").notNull().default(0),
    sent: integer("sent").notNull().default(0),
    cursor: integer("cursor").notNull().default(0),
    createdAt: createdAt(),
    // Epoch ms of the job's last page: the cron resumes a running recovery left alone too long.
    updatedAt: integer("updated_at").notNull(),
    completedAt: text("completed_at"),
  },
  (t) => [
    index("webhook_recoveries_endpoint").on(t.endpointId, t.status),
    index("webhook_recoveries_account").on(t.accountId, t.livemode, t.id),
    index("webhook_recoveries_running").on(t.status, t.updatedAt),
  ],
);

export const deliveryAttempts = sqliteTable(
  "delivery_attempts",
  {
    id: text("id").primaryKey(),
    deliveryId: text("delivery_id").notNull(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    attemptNumber: integer("attempt_number").notNull(),
    attemptedAt: text("attempted_at").notNull(),
    statusCode: integer("status_code"),
    durationMs: integer("duration_ms").notNull(),
    responseExcerpt: text("response_excerpt"),
    error: text("error"),
  },
  // A redelivered queue message cannot record the same attempt twice.
  (t) => [
    uniqueIndex("delivery_attempts_delivery_number").on(t.deliveryId, t.attemptNumber),
    index("delivery_attempts_account").on(t.accountId, t.livemode, t.attemptedAt),
  ],
);

const cardColumns = {
  cardBrand: text("card_brand").notNull(),
  cardLast4: text("card_last4").notNull(),
  cardExpMonth: integer("card_exp_month").notNull(),
  cardExpYear: integer("card_exp_year").notNull(),
  // HMAC of the PAN with CARD_FINGERPRINT_SECRET. The PAN and CVV are never stored.
  cardFingerprint: text("card_fingerprint").notNull(),
};

export const payouts = sqliteTable(
  "payouts",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    recipientId: text("recipient_id"),
    amount: integer("amount").notNull(),
    currency: text("currency").notNull(),
    description: text("description"),
    status: text("status", { enum: ["pending", "paid", "failed", "canceled"] }).notNull(),
    failureCode: text("failure_code"),
    failureMessage: text("failure_message"),
    ...cardColumns,
    // The processor's token for the destination card: never card data.
    processorToken: text("processor_token").notNull(),
    // Live mode: the Stripe account (the connection's `acct_…`) the payout was sent through, and
    // the processor's payout id once known. A Stripe event settles the payout only if it comes from
    // there and names that id (src/payments/processor-settlements.ts). Set by a trigger at insert.
    processorAccount: text("processor_account"),
    processorObject: text("processor_object"),
    date: text("date").notNull(),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("payouts_account").on(t.accountId, t.livemode, t.id),
    // The settlement sweep looks for payouts left pending.
    index("payouts_status").on(t.status, t.createdAt),
    check("payouts_amount_positive", sql`${t.amount} > 0`),
  ],
);

export const payments = sqliteTable(
  "payments",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    userId: text("user_id"),
    subscriptionId: text("subscription_id"),
    amount: integer("amount").notNull(),
    currency: text("currency").notNull(),
    // Subscription charges are completed or failed at once. A one-off payment (src/payments/intents.ts)
    // may first be requires_capture (authorized, manual capture) or requires_action (3-D Secure),
    // then completed, failed or canceled; refunds then make it partially_refunded or refunded.
    status: text("status", { enum: ["requires_action", "requires_capture", "completed", "failed", "canceled", "refunded", "partially_refunded"] }).notNull(),
    amountRefunded: integer("amount_refunded").notNull().default(0),
    // automatic: captured when confirmed (every subscription charge); manual: authorized, then captured by POST /payments/{id}/capture.
    captureMethod: text("capture_method", { enum: ["automatic", "manual"] }).notNull().default("automatic"),
    // What an authorization holds and a capture may still take (0 once captured, canceled or failed).
    amountCapturable: integer("amount_capturable").notNull().default(0),
    // What was captured: refunds take from this, never from the authorized amount.
    amountReceived: integer("amount_received").notNull().default(0),
    // The step the payer must take (3-D Secure: { type: "redirect_to_url", url }); null otherwise.
    nextAction: text("next_action", { mode: "json" }).$type<{ type: "redirect_to_url"; url: string }>(),
    // The 3-D Secure page's secret (src/pages/authenticate.tsx): part of next_action.url, compared
    // in constant time; never answered on its own. Null for a payment that never asked.
    pageSecret: text("page_secret"),
    // Where the payer returns after authenticating, with ?payment_id=… (POST /payments return_url).
    returnUrl: text("return_url"),
    // The saved payment method (pmt_…) charged; null when the card fields were sent.
    paymentMethodId: text("payment_method_id"),
    description: text("description"),
    metadata: text("metadata", { mode: "json" }).$type<Record<string, string>>(),
    // When an uncaptured authorization is canceled by the cron (7 days after it was made).
    captureBefore: text("capture_before"),
    canceledAt: text("canceled_at"),
    cancellationReason: text("cancellation_reason", { enum: ["requested_by_customer", "duplicate", "fraudulent", "abandoned", "expired"] }),
    failureCode: text("failure_code"),
    failureMessage: text("failure_message"),
    ...cardColumns,
    // The processor's reference for the charge, used to refund it.
    processorReference: text("processor_reference"),
    // Live mode: the Stripe account (the connection's `acct_…`) the charge was made through (a
    // trigger sets it at insert, from the connection), so that its events are taken from there only.
    processorAccount: text("processor_account"),
    // The idempotency key Tender sent the processor for this charge. Unique: one processor
    // charge is recorded as one payment, however many workers settle it.
    chargeReference: text("charge_reference"),
    // The invoice this charge was an attempt to pay (src/billing/invoices.ts): every attempt at
    // one billing period names the period's one invoice.
    invoiceId: text("invoice_id"),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("payments_charge_reference").on(t.chargeReference),
    index("payments_account").on(t.accountId, t.livemode, t.id),
    // Subscription charges only (partial): a one-off payment writes no entry here.
    index("payments_subscription").on(t.accountId, t.livemode, t.subscriptionId, t.id).where(sql`${t.subscriptionId} IS NOT NULL`),
    index("payments_user").on(t.accountId, t.livemode, t.userId, t.id),
    // A processor's dispute names the charge by the processor's own reference (a PaymentIntent).
    index("payments_processor_reference").on(t.accountId, t.livemode, t.processorReference),
    check("payments_amount_positive", sql`${t.amount} > 0`),
    // What the cron cancels (src/payments/intents.ts, expireAuthorizations): authorizations whose 7
    // days are over, and 3-D Secure payments their payer walked away from. Partial indexes, so that a
    // completed or failed payment (nearly every one) writes no entry; the cron's queries name the
    // status as a literal, which lets SQLite use them on every plan (a bound value only sometimes).
    index("payments_capture_due").on(t.captureBefore, t.id).where(sql`${t.status} = 'requires_capture'`),
    index("payments_action_waiting").on(t.createdAt, t.id).where(sql`${t.status} = 'requires_action'`),
    // The refunded total can never pass what was captured, whatever the concurrency.
    check("payments_refund_within_amount", sql`${t.amountRefunded} >= 0 AND ${t.amountRefunded} <= ${t.amountReceived}`),
    // A capture never takes more than was authorized.
    check("payments_received_within_amount", sql`${t.amountReceived} >= 0 AND ${t.amountReceived} <= ${t.amount}`),
    check("payments_capturable_within_amount", sql`${t.amountCapturable} >= 0 AND ${t.amountCapturable} <= ${t.amount}`),
  ],
);

// Saved cards (src/payments/methods.ts): a processor token (a Stripe PaymentMethod attached to the
// user's Stripe Customer, or a sandbox token) with what a response may show of the card. Never card
// data. Detaching keeps the row (payments made with it still name it), with detached_at set.
export const paymentMethods = sqliteTable(
  "payment_methods",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    userId: text("user_id").notNull(),
    type: text("type", { enum: ["card"] }).notNull(),
    ...cardColumns,
    // What charges it: a sandbox token, or stripe:cus_…:pm_… (src/processor/stripe-keys.ts).
    processorToken: text("processor_token").notNull(),
    // The processor reference it was attached under (its Idempotency-Key at the processor).
    attachReference: text("attach_reference").notNull(),
    createdAt: createdAt(),
    detachedAt: text("detached_at"),
  },
  (t) => [
    index("payment_methods_account").on(t.accountId, t.livemode, t.id),
    index("payment_methods_user").on(t.accountId, t.livemode, t.userId, t.id),
    // One attach at the processor is one payment method, however often its request is retried.
    uniqueIndex("payment_methods_attach_reference").on(t.accountId, t.livemode, t.attachReference),
  ],
);

// Hosted checkout sessions (src/payments/checkout.ts, src/pages/checkout.tsx): what a payer pays on
// Tender's page, reached by an unguessable page secret. Completed once (the batch that completes
// it is conditional on its status), it names what it made; unused at expires_at, the cron expires it.
export const checkoutSessions = sqliteTable(
  "checkout_sessions",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    // The API key that created it: the page acts as that key (a revoked key stops its open sessions).
    keyId: text("key_id").notNull(),
    // The page's secret, in the session's url; compared in constant time (src/pages/hosted.tsx).
    pageSecret: text("page_secret").notNull(),
    mode: text("mode", { enum: ["payment", "subscription", "setup"] }).notNull(),
    status: text("status", { enum: ["open", "complete", "expired"] }).notNull(),
    userId: text("user_id").notNull(),
    planId: text("plan_id"),
    // payment mode: what is charged, in minor units; null otherwise.
    amount: integer("amount"),
    currency: text("currency"),
    successUrl: text("success_url").notNull(),
    cancelUrl: text("cancel_url").notNull(),
    metadata: text("metadata", { mode: "json" }).$type<Record<string, string>>(),
    expiresAt: text("expires_at").notNull(),
    paymentId: text("payment_id"),
    subscriptionId: text("subscription_id"),
    paymentMethodId: text("payment_method_id"),
    // The page's attempts: a declined one advances it (the next charges under a new reference); a
    // submit holds the session until submit_until (epoch ms) while it is at the processor.
    attempt: integer("attempt").notNull().default(0),
    submitUntil: integer("submit_until"),
    // The saved card the current attempt charges, recorded before the charge, so that a submit
    // after an unknown outcome charges it again under the same reference (never a second card).
    attemptPaymentMethodId: text("attempt_payment_method_id"),
    createdAt: createdAt(),
    completedAt: text("completed_at"),
    expiredAt: text("expired_at"),
  },
  (t) => [
    index("checkout_sessions_account").on(t.accountId, t.livemode, t.id),
    index("checkout_sessions_expiry").on(t.status, t.expiresAt),
    check("checkout_sessions_amount", sql`${t.amount} IS NULL OR ${t.amount} > 0`),
  ],
);

// Customer portal sessions (src/pages/portal.tsx): a one-hour link to the hosted page where a user
// manages their subscriptions, invoices and cards. The page acts as the key that made it.
export const portalSessions = sqliteTable(
  "portal_sessions",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    // The API key that created it: the page acts as that key (a revoked key stops its sessions).
    keyId: text("key_id").notNull(),
    // The page's secret, in the session's url; compared in constant time (src/pages/hosted.tsx).
    pageSecret: text("page_secret").notNull(),
    userId: text("user_id").notNull(),
    returnUrl: text("return_url").notNull(),
    expiresAt: text("expires_at").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("portal_sessions_account").on(t.accountId, t.livemode, t.id)],
);

export const refunds = sqliteTable(
  "refunds",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    paymentId: text("payment_id").notNull(),
    amount: integer("amount").notNull(),
    currency: text("currency").notNull(),
    reason: text("reason"),
    status: text("status", { enum: ["pending", "succeeded", "failed"] }).notNull(),
    // Live mode: the Stripe account the refund was made through (its payment's: a trigger sets it
    // at insert), and Stripe's refund id once known.
    processorAccount: text("processor_account"),
    processorObject: text("processor_object"),
    createdAt: createdAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    index("refunds_account").on(t.accountId, t.livemode, t.id),
    index("refunds_payment").on(t.accountId, t.livemode, t.paymentId, t.id),
    index("refunds_status").on(t.status, t.createdAt),
    check("refunds_amount_positive", sql`${t.amount} > 0`),
  ],
);

export const plans = sqliteTable(
  "plans",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    name: text("name").notNull(),
    description: text("description"),
    currency: text("currency").notNull(),
    interval: text("interval", { enum: ["month", "year"] }).notNull(),
    pricingModel: text("pricing_model", { enum: ["fixed", "volume", "graduated"] }).notNull(),
    // Fixed plans: the price per interval in minor units. Tiered plans, and a fixed plan priced by
    // unit_amount_decimal: null.
    unitAmount: integer("unit_amount"),
    // A fixed plan's exact unit price in minor units with up to 12 decimals ("0.35"), when it was
    // given so (src/domain/decimal.ts); null otherwise.
    unitAmountDecimal: text("unit_amount_decimal"),
    // Tiered plans: [{ up_to, unit_amount, flat_amount, unit_amount_decimal? }] in minor units; a
    // tier priced by unit_amount_decimal has unit_amount null.
    tiers: text("tiers", { mode: "json" }).$type<{ up_to: number | null; unit_amount: number | null; flat_amount: number; unit_amount_decimal?: string }[]>(),
    active: integer("active", { mode: "boolean" }).notNull(),
    // Days of trial a new subscription gets (0–730), unless it gives its own; null for none.
    trialPeriodDays: integer("trial_period_days"),
    // licensed: the price × quantity, charged at each period's start. metered: the period's usage
    // (aggregated by aggregate_usage) priced through the plan, invoiced at the period's end.
    usageType: text("usage_type", { enum: ["licensed", "metered"] }).notNull().default("licensed"),
    aggregateUsage: text("aggregate_usage", { enum: ["sum", "max", "last_during_period"] }),
    // The tax rates its subscriptions' invoices carry unless a subscription gives its own: each
    // rate's id and what its tax needs (a rate's percentage and inclusive never change, so the copy
    // stays true; src/billing/tax.ts).
    defaultTaxRates: text("default_tax_rates", { mode: "json" }).$type<TaxRateValue[]>().notNull().default(sql`'[]'`),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("plans_account").on(t.accountId, t.livemode, t.id)],
);

export const subscriptions = sqliteTable(
  "subscriptions",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    userId: text("user_id").notNull(),
    planId: text("plan_id").notNull(),
    status: text("status", { enum: ["incomplete", "incomplete_expired", "trialing", "active", "past_due", "canceled"] }).notNull(),
    quantity: integer("quantity").notNull().default(1),
    ...cardColumns,
    // The processor's reusable token for the card, from the first charge: renewals charge it.
    processorToken: text("processor_token").notNull(),
    // The saved card (payment_methods) the subscription charges, when it was given one; null for
    // card fields. A payment method is not detached while a live subscription names it.
    paymentMethodId: text("payment_method_id"),
    startDate: text("start_date").notNull(),
    // The anchor from which every billing date is computed (Jan 31 -> Feb 28 -> Mar 31).
    billingAnchor: text("billing_anchor").notNull(),
    // Number of periods paid so far; the current period is [anchor + (n-1), anchor + n).
    periodsBilled: integer("periods_billed").notNull(),
    currentPeriodStart: text("current_period_start").notNull(),
    nextBillingDate: text("next_billing_date").notNull(),
    // Epoch ms of next_billing_date, or of the next dunning retry when past_due: the index the
    // renewal cron scans.
    dueAt: integer("due_at"),
    dunningAttempts: integer("dunning_attempts").notNull().default(0),
    cancelAtPeriodEnd: integer("cancel_at_period_end", { mode: "boolean" }).notNull().default(false),
    canceledAt: text("canceled_at"),
    // The discount (src/billing/coupons.ts): the coupon's API id, when it started, when it ends
    // (repeating only), and how many invoices it has discounted (a `once` coupon: one).
    couponId: text("coupon_id"),
    discountStart: text("discount_start"),
    discountEnd: text("discount_end"),
    discountUses: integer("discount_uses").notNull().default(0),
    // A trial (src/domain/trials.ts): when it started and ends (the billing anchor: the first period
    // starts there), when subscription_trial_will_end is due (epoch ms), and whether it was sent.
    trialStart: text("trial_start"),
    trialEnd: text("trial_end"),
    trialWillEndAt: integer("trial_will_end_at"),
    trialWillEndSent: integer("trial_will_end_sent", { mode: "boolean" }).notNull().default(false),
    // Proration (src/billing/prorations.ts): what the current period was charged since its last
    // change (src/domain/proration.ts OpenCharge, as JSON; null: the period's own charge), and the
    // proration items waiting for the next invoice (how many, and their sum in minor units).
    openCharge: text("open_charge", { mode: "json" }).$type<OpenCharge>(),
    pendingItems: integer("pending_items").notNull().default(0),
    pendingItemsAmount: integer("pending_items_amount").notNull().default(0),
    // A change scheduled for the next period (at_period_end): the plan and quantity its first claim
    // prices and its settlement makes the subscription's.
    pendingPlanId: text("pending_plan_id"),
    pendingQuantity: integer("pending_quantity"),
    // Its own tax rates (as plans.default_tax_rates), which win over the plan's; null: the plan's.
    defaultTaxRates: text("default_tax_rates", { mode: "json" }).$type<TaxRateValue[]>(),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("subscriptions_account").on(t.accountId, t.livemode, t.id),
    // A user's subscriptions, for the test clocks' joins from a user (whose mode they share).
    index("subscriptions_user").on(t.userId, t.id),
    index("subscriptions_account_user").on(t.accountId, t.livemode, t.userId, t.id),
    index("subscriptions_due").on(t.dueAt),
    index("subscriptions_payment_method").on(t.paymentMethodId),
    index("subscriptions_trial_notice").on(t.status, t.trialWillEndSent, t.trialWillEndAt),
    check("subscriptions_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

// One row per billed period of a subscription: the unique key makes "each period is charged
// at most once" hold even when renewal runs overlap or a queue message is redelivered.
export const subscriptionPeriods = sqliteTable(
  "subscription_periods",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    subscriptionId: text("subscription_id").notNull(),
    periodIndex: integer("period_index").notNull(),
    periodStart: text("period_start").notNull(),
    // What the period charges: its price less `discount` (integer minor units).
    amount: integer("amount").notNull(),
    discount: integer("discount").notNull().default(0),
    // A metered period's usage, aggregated when the period was claimed (null for a licensed one).
    usageQuantity: integer("usage_quantity"),
    // The subscription's pending proration items the claim priced in (how many, and their sum),
    // and the credit its invoice carries to the next one when the items took the total below zero.
    items: integer("items").notNull().default(0),
    itemsAmount: integer("items_amount").notNull().default(0),
    creditCarried: integer("credit_carried").notNull().default(0),
    // What the claim took from the user's balance (a credit, src/billing/credit-notes.ts) towards the
    // period's invoice, and the balance it found: `amount` less this is what the card is charged.
    // Taken by the claim's own batch (with its ledger row), so two claims never take the same credit.
    balanceApplied: integer("balance_applied").notNull().default(0),
    startingBalance: integer("starting_balance").notNull().default(0),
    // The exclusive tax on the period's invoice (src/domain/tax.ts), in `amount`: computed by its
    // claim from the lines its invoice will have, so the charge and the invoice agree.
    tax: integer("tax").notNull().default(0),
    // The percentage (basis points) the period's discount took off, when it was a percent_off
    // coupon's: a change prorated within the period discounts its charge line alike.
    percentOff: integer("percent_off"),
    // The final invoice of a subscription set to cancel at its period's end: what its last period
    // still owes (a metered period's usage, pending prorations). Its settlement cancels the
    // subscription instead of opening another period; its row, unique per (subscription, period),
    // makes it one invoice and one charge however many runs claim it.
    final: integer("final", { mode: "boolean" }).notNull().default(false),
    currency: text("currency").notNull(),
    // void: its invoice was voided (POST /invoices/{id}/void), so the period is never charged.
    status: text("status", { enum: ["open", "paid", "uncollectible", "void"] }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    paymentId: text("payment_id"),
    /**
     * What the claimed attempt charges, when it is not the subscription's vaulted card: the new card
     * of a past-due card update, vaulted before the claim (its processor token, the card's summary
     * and fingerprint; never the PAN). Null for a renewal or dunning attempt. The cron settles a
     * claim whose lease ran out by sending the same reference with this same token.
     */
    claimCard: text("claim_card", { mode: "json" }).$type<ClaimCard>(),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("subscription_periods_once").on(t.subscriptionId, t.periodIndex),
    index("subscription_periods_status").on(t.status, t.updatedAt),
    index("subscription_periods_account").on(t.accountId, t.id),
  ],
);

// Invoices (src/billing/invoices.ts): what each subscription charge is for. An invoice of a
// billing period is unique per (subscription, period): a dunning retry charges the same one.
// `number` is gap-free per account and mode: `number_sequence` is taken as the account and
// mode's MAX + 1 inside the statement that finalizes the invoice (D1 runs one write at a time,
// so in commit order), and a unique index proves no two invoices share one. A draft has none.
export const invoices = sqliteTable(
  "invoices",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    numberSequence: integer("number_sequence"),
    // <ACCOUNT PREFIX>-0001: the last 8 characters of the account id (random), upper-cased.
    number: text("number").generatedAlwaysAs(
      sql`CASE WHEN number_sequence IS NULL THEN NULL ELSE upper(substr(account_id, -8)) || '-' || printf('%04d', number_sequence) END`,
      { mode: "virtual" },
    ),
    status: text("status", { enum: ["draft", "open", "paid", "uncollectible", "void"] }).notNull(),
    subscriptionId: text("subscription_id"),
    // The billing period of the subscription it bills (subscription_periods.period_index), if one.
    periodIndex: integer("period_index"),
    userId: text("user_id"),
    currency: text("currency").notNull(),
    periodStart: text("period_start").notNull(),
    periodEnd: text("period_end").notNull(),
    subtotal: integer("subtotal").notNull(),
    discount: integer("discount").notNull().default(0),
    total: integer("total").notNull(),
    // The tax on it (src/domain/tax.ts), computed when it is made and never again: all of it, the
    // exclusive part (added to the total), and each rate's sum as the API answers it.
    tax: integer("tax").notNull().default(0),
    exclusiveTax: integer("exclusive_tax").notNull().default(0),
    totalTaxAmounts: text("total_tax_amounts", { mode: "json" }).$type<TaxAmount[]>().notNull().default(sql`'[]'`),
    amountPaid: integer("amount_paid").notNull().default(0),
    amountDue: integer("amount_due").notNull(),
    // The user's balance before and after this invoice took from it (Stripe's starting_balance and
    // ending_balance; negative is a credit): amount_due = total - (ending - starting).
    startingBalance: integer("starting_balance").notNull().default(0),
    endingBalance: integer("ending_balance").notNull().default(0),
    // The last payment attempted for it (the one that paid it, once paid).
    paymentId: text("payment_id"),
    // What the invoice says about its buyer and seller, copied when it is finalized (by the
    // statement that numbers it, src/billing/invoices.ts ISSUED_PARTIES) and never changed after:
    // a later rename of the user or the account never alters an issued invoice. Null on a draft,
    // which shows the live values until it is finalized.
    customerName: text("customer_name"),
    customerEmail: text("customer_email"),
    accountName: text("account_name"),
    accountEmail: text("account_email"),
    // The rest of the parties (DESIGN.md "Books that close"), copied by the same statement: the
    // buyer's address and tax ids, the seller's address, tax id (as a list, Stripe's
    // account_tax_ids) and the footer its invoices print.
    customerAddress: text("customer_address", { mode: "json" }).$type<PostalAddress>(),
    customerTaxIds: text("customer_tax_ids", { mode: "json" }).$type<TaxIdValue[]>().notNull().default(sql`'[]'`),
    accountAddress: text("account_address", { mode: "json" }).$type<PostalAddress>(),
    accountTaxIds: text("account_tax_ids", { mode: "json" }).$type<string[]>().notNull().default(sql`'[]'`),
    footer: text("footer"),
    // The coupon whose discount it carries, its name as it was when the invoice was made (null without a discount).
    couponId: text("coupon_id"),
    couponName: text("coupon_name"),
    // The test clock of its user when it was made (test mode only): its dates are that clock's.
    testClockId: text("test_clock_id"),
    // The hosted invoice page (src/pages/invoice.tsx): PUBLIC_URL, the invoice id and an unguessable
    // secret, written when the invoice is made; null when no PUBLIC_URL was set. The API shows it
    // while the invoice is open or paid.
    hostedInvoiceUrl: text("hosted_invoice_url"),
    createdAt: createdAt(),
    finalizedAt: text("finalized_at"),
    paidAt: text("paid_at"),
    voidedAt: text("voided_at"),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("invoices_number").on(t.accountId, t.livemode, t.numberSequence),
    uniqueIndex("invoices_period").on(t.subscriptionId, t.periodIndex),
    index("invoices_account").on(t.accountId, t.livemode, t.id),
    index("invoices_subscription").on(t.accountId, t.livemode, t.subscriptionId, t.id),
    index("invoices_user").on(t.accountId, t.livemode, t.userId, t.id),
    index("invoices_status").on(t.accountId, t.livemode, t.status, t.id),
    check("invoices_total", sql`${t.total} = ${t.subtotal} - ${t.discount} + ${t.exclusiveTax} AND ${t.discount} >= 0 AND ${t.amountDue} >= 0 AND ${t.amountPaid} >= 0`),
  ],
);

// Tax rates (src/routes/tax-rates): a percentage (ten-thousandths of a percent, 20% = 200000),
// inclusive or exclusive, that plans and subscriptions put on their invoices. Its percentage and
// inclusive never change (plans and subscriptions copy them); PATCH changes only its names and
// `active` (an inactive rate is refused on new plans and subscriptions; those holding it keep it).
export const taxRates = sqliteTable(
  "tax_rates",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    displayName: text("display_name").notNull(),
    percentage: integer("percentage").notNull(),
    inclusive: integer("inclusive", { mode: "boolean" }).notNull(),
    country: text("country"),
    state: text("state"),
    description: text("description"),
    active: integer("active", { mode: "boolean" }).notNull().default(true),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("tax_rates_account").on(t.accountId, t.livemode, t.id), check("tax_rates_percentage", sql`${t.percentage} BETWEEN 0 AND 1000000`)],
);

// Coupons (src/billing/coupons.ts): a discount a subscription can redeem. The API id is the
// caller's (`SUMMER20`) or generated (`co_…`), unique per account and mode; `pk` is time-ordered
// (lists are newest first). A coupon's value and duration never change; DELETE only stops new
// redemptions (`valid` false). `times_redeemed` counts redemptions, and the CHECK makes
// `max_redemptions` hold in the batch that redeems, however many redeem at once.
export const coupons = sqliteTable(
  "coupons",
  {
    pk: text("pk").primaryKey(),
    id: text("id").notNull(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    name: text("name").notNull(),
    // Hundredths of a percent (12.5% = 1250), or null for an amount_off coupon.
    percentOffBasisPoints: integer("percent_off_basis_points"),
    amountOff: integer("amount_off"),
    currency: text("currency"),
    duration: text("duration", { enum: ["once", "repeating", "forever"] }).notNull(),
    durationInMonths: integer("duration_in_months"),
    maxRedemptions: integer("max_redemptions"),
    redeemBy: text("redeem_by"),
    timesRedeemed: integer("times_redeemed").notNull().default(0),
    valid: integer("valid", { mode: "boolean" }).notNull().default(true),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
    deletedAt: text("deleted_at"),
  },
  (t) => [
    uniqueIndex("coupons_account_id").on(t.accountId, t.livemode, t.id),
    index("coupons_account").on(t.accountId, t.livemode, t.pk),
    check("coupons_redemptions", sql`${t.maxRedemptions} IS NULL OR ${t.timesRedeemed} <= ${t.maxRedemptions}`),
    check("coupons_value", sql`(${t.percentOffBasisPoints} IS NULL) <> (${t.amountOff} IS NULL) AND (${t.amountOff} IS NULL) = (${t.currency} IS NULL)`),
  ],
);

// One row per redemption of a coupon: by a subscription's creation (reserved under the first
// charge's reference before the card is charged, so a retry of the request reuses it) or update.
export const couponRedemptions = sqliteTable(
  "coupon_redemptions",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    couponPk: text("coupon_pk").notNull(),
    // The subscription that holds it; null while a creation's reservation awaits its charge.
    subscriptionId: text("subscription_id"),
    reference: text("reference").notNull(),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("coupon_redemptions_reference").on(t.reference), index("coupon_redemptions_account").on(t.accountId, t.id)],
);

// Usage of a metered subscription (POST /subscriptions/{id}/usage), in the billing period that
// holds its timestamp. A period's usage is read by the claim that invoices it, which also checks
// that no record arrived since (their count); a record for a period already claimed is refused.
export const usageRecords = sqliteTable(
  "usage_records",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    subscriptionId: text("subscription_id").notNull(),
    periodIndex: integer("period_index").notNull(),
    quantity: integer("quantity").notNull(),
    action: text("action", { enum: ["increment", "set"] }).notNull(),
    timestamp: text("timestamp").notNull(),
    createdAt: createdAt(),
    // The caller's id of a usage event (POST /usage-events), unique per account and mode while it
    // is remembered: set to null after 35 days (src/billing/usage-events.ts), the usage stays.
    eventId: text("event_id"),
  },
  (t) => [
    index("usage_records_period").on(t.subscriptionId, t.periodIndex, t.id),
    index("usage_records_account").on(t.accountId, t.id),
    check("usage_records_quantity", sql`${t.quantity} >= 0`),
    // A repeated event id is counted once, whichever call carries it (INSERT … ON CONFLICT DO NOTHING).
    uniqueIndex("usage_records_event").on(t.accountId, t.livemode, t.eventId),
    // The ids still remembered, oldest first: what the forgetting reads.
    index("usage_records_event_age").on(t.createdAt).where(sql`event_id IS NOT NULL`),
  ],
);

// An invoice's lines, in order. Read through their invoice (whose account and mode they share).
export const invoiceLines = sqliteTable(
  "invoice_lines",
  {
    id: text("id").primaryKey(),
    invoiceId: text("invoice_id").notNull(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    position: integer("position").notNull(),
    type: text("type", { enum: ["subscription", "proration", "usage", "credit"] }).notNull(),
    description: text("description").notNull(),
    quantity: integer("quantity").notNull(),
    // The exact unit price in minor units (up to 12 decimals), when the line has one.
    unitAmountDecimal: text("unit_amount_decimal"),
    // Integer minor units, rounded once (README: Decisions); negative for a credit.
    amount: integer("amount").notNull(),
    proration: integer("proration", { mode: "boolean" }).notNull().default(false),
    // Its tax per rate, [{ tax_rate, amount, inclusive }], rounded once when it was invoiced.
    taxAmounts: text("tax_amounts", { mode: "json" }).$type<TaxAmount[]>().notNull().default(sql`'[]'`),
    periodStart: text("period_start").notNull(),
    periodEnd: text("period_end").notNull(),
  },
  (t) => [uniqueIndex("invoice_lines_invoice").on(t.invoiceId, t.position), index("invoice_lines_account").on(t.accountId, t.id)],
);

// Invoice items (src/billing/prorations.ts): lines waiting for a subscription's next invoice: the
// credit and the charge of a prorated change, and a credit carried from an invoice whose total would
// have been negative. The settlement that issues the next invoice takes them (invoice_id).
export const invoiceItems = sqliteTable(
  "invoice_items",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    subscriptionId: text("subscription_id").notNull(),
    type: text("type", { enum: ["proration", "credit"] }).notNull(),
    description: text("description").notNull(),
    quantity: integer("quantity").notNull(),
    // Integer minor units, rounded once; negative for a credit.
    amount: integer("amount").notNull(),
    currency: text("currency").notNull(),
    periodStart: text("period_start").notNull(),
    periodEnd: text("period_end").notNull(),
    invoiceId: text("invoice_id"),
    createdAt: createdAt(),
  },
  (t) => [index("invoice_items_pending").on(t.subscriptionId, t.invoiceId, t.id), index("invoice_items_account").on(t.accountId, t.id)],
);

/** A change invoiced at once: what its settlement makes of the subscription once its invoice is paid. */
export interface ProrationChange {
  planId: string;
  quantity: number;
  openCharge: OpenCharge;
  /** The subscription's pending items after the invoice took them. */
  pendingItems: number;
  pendingItemsAmount: number;
  /** The change's own items (deleted on a decline); the older pending items go back to pending. */
  newItemIds: string[];
}

// The charge of a change with proration_behavior always_invoice (src/billing/proration-charges.ts):
// claimed in the batch that issues its invoice, charged, then settled: paid, and the change made;
// or declined, and nothing changed. A claim never settled (the request died, the processor never
// answered) is taken over by the cron once its lease ran out, with the same reference. While one
// is claimed the subscription takes no other change and is not renewed.
export const prorationCharges = sqliteTable(
  "proration_charges",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    subscriptionId: text("subscription_id").notNull(),
    invoiceId: text("invoice_id").notNull(),
    reference: text("reference").notNull(),
    amount: integer("amount").notNull(),
    currency: text("currency").notNull(),
    status: text("status", { enum: ["claimed", "paid", "declined"] }).notNull(),
    change: text("change", { mode: "json" }).$type<ProrationChange>().notNull(),
    paymentId: text("payment_id"),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("proration_charges_reference").on(t.reference),
    // One charge in flight per subscription.
    uniqueIndex("proration_charges_claimed").on(t.subscriptionId).where(sql`status = 'claimed'`),
    index("proration_charges_stale").on(t.status, t.updatedAt),
    index("proration_charges_account").on(t.accountId, t.id),
    check("proration_charges_amount", sql`${t.amount} > 0`),
  ],
);

/** A card a period attempt charges, vaulted at the processor: see subscriptionPeriods.claimCard. */
export interface ClaimCard {
  token: string;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  fingerprint: string;
}

// Background work is at-least-once: a job records its key here in the same batch as its effect,
// so a second run of the same job is refused by the unique key.
// A row can also be a lease (`lease_until`, epoch ms): the worker holding it is the only one that
// may call the processor for that key until it runs out. Rows expire (`expires_at`) in the cron.
export const jobRuns = sqliteTable(
  "job_runs",
  {
    key: text("key").primaryKey(),
    createdAt: createdAt(),
    leaseUntil: integer("lease_until"),
    expiresAt: integer("expires_at"),
  },
  (t) => [index("job_runs_expiry").on(t.expiresAt)],
);

// Dashboard sign-ins (src/dashboard/session.ts): an opaque token in a cookie, stored here only as
// its SHA-256. A session holds at most one API key per mode, both of its account (the key it was
// signed in with, and the other mode's key added from the mode switch); `livemode` says which one
// acts, and that one must be there. The lookup joins each key unrevoked on every request, so
// revoking a key ends its mode in the session at once; the session ends when it holds no live key,
// when it expires, or on sign-out (migration 0012).
export const dashboardSessions = sqliteTable(
  "dashboard_sessions",
  {
    tokenHash: text("token_hash").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    testKeyId: text("test_key_id").references(() => apiKeys.id),
    liveKeyId: text("live_key_id").references(() => apiKeys.id),
    // The mode the session acts in: the key of that mode acts.
    livemode: integer("livemode", { mode: "boolean" }).notNull(),
    createdAt: createdAt(),
    // Epoch ms; the session is refused from then on.
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [
    index("dashboard_sessions_test_key").on(t.testKeyId),
    index("dashboard_sessions_live_key").on(t.liveKeyId),
    index("dashboard_sessions_expiry").on(t.expiresAt),
    index("dashboard_sessions_account").on(t.accountId, t.tokenHash),
    check("dashboard_sessions_acting_key", sql`CASE WHEN ${t.livemode} THEN ${t.liveKeyId} IS NOT NULL ELSE ${t.testKeyId} IS NOT NULL END`),
  ],
);

// The account's card processor for live mode (PUT /api/processor), one per account. The secrets
// are stored only encrypted (src/processor/connections.ts): each value is `<key id>:<iv>:<ciphertext>`
// (AES-GCM under the PROCESSOR_ENCRYPTION_KEY entry of that id, bound to the account and field),
// so the key can rotate. Only the secret key's last 4 characters are kept in clear.
export const processorConnections = sqliteTable(
  "processor_connections",
  {
    accountId: text("account_id").primaryKey().references(() => accounts.id),
    // Test mode is always the sandbox: a connection is live mode's, which the CHECK keeps true.
    livemode: integer("livemode", { mode: "boolean" }).notNull().default(true),
    provider: text("provider", { enum: ["stripe"] }).notNull(),
    /** The processor's own account id (Stripe's `acct_…`), from verifying the key. */
    processorAccount: text("processor_account").notNull(),
    secretKeyEncrypted: text("secret_key_encrypted").notNull(),
    secretKeyLast4: text("secret_key_last4").notNull(),
    webhookSecretEncrypted: text("webhook_secret_encrypted").notNull(),
    /** The Connect endpoint's signing secret (payout events of connected accounts), if given. */
    connectWebhookSecretEncrypted: text("connect_webhook_secret_encrypted"),
    /**
     * Whether card numbers may be sent to Stripe (the card fields in live mode): only for a Stripe
     * account granted raw card data access. Connections made before the flag existed are true
     * (the migration sets them), so nothing that worked stops working.
     */
    rawCardData: integer("raw_card_data", { mode: "boolean" }).notNull().default(false),
    /** The Stripe publishable key (pk_live_… / pk_test_…) the hosted pages and Stripe.js use; not a secret. */
    publishableKey: text("publishable_key"),
    createdAt: createdAt(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [check("processor_connections_live_only", sql`${t.livemode} = 1`)],
);

// A connection that was removed (DELETE /api/processor) or replaced by another Stripe account's
// (PUT): its secrets, still sealed as they were (same key ids, same additional data), kept only to
// verify and settle Stripe's events about objects made through it (a payout that fails days later,
// a dispute), never to move new money. One per (account, Stripe account): the newest secrets win.
export const retiredProcessorConnections = sqliteTable(
  "retired_processor_connections",
  {
    accountId: text("account_id").notNull(),
    livemode: integer("livemode", { mode: "boolean" }).notNull().default(true),
    provider: text("provider", { enum: ["stripe"] }).notNull(),
    processorAccount: text("processor_account").notNull(),
    secretKeyEncrypted: text("secret_key_encrypted").notNull(),
    secretKeyLast4: text("secret_key_last4").notNull(),
    webhookSecretEncrypted: text("webhook_secret_encrypted").notNull(),
    connectWebhookSecretEncrypted: text("connect_webhook_secret_encrypted"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    retiredAt: text("retired_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.processorAccount] }), check("retired_processor_connections_live_only", sql`${t.livemode} = 1`)],
);

// Live money in flight (src/processor/in-flight.ts): a request that is about to move money at the
// processor before its own batch can record it (a first charge) holds a claim here, taken in one
// batch with its key check and with the connection it charges through. Disconnecting or swapping
// the connection refuses while an unexpired claim exists, and a move of the account waits for them;
// the request's commit is guarded by its claim (and the same connection) and deletes it. A claim
// whose worker died runs out at lease_until.
export const moneyClaims = sqliteTable(
  "money_claims",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    /** The processor account the money goes through (Stripe's acct_…), in live mode. */
    processorAccount: text("processor_account"),
    /** What the money is: first_charge, invoice_payment, proration_charge, past_due_charge. */
    purpose: text("purpose").notNull(),
    createdAt: createdAt(),
    leaseUntil: integer("lease_until").notNull(),
  },
  (t) => [index("money_claims_account").on(t.accountId, t.leaseUntil)],
);

// Each processor event applied (Stripe's webhooks), recorded in the same batch as its effect:
// the primary key makes a redelivered event, or two deliveries at once, apply once.
export const processorEvents = sqliteTable(
  "processor_events",
  {
    accountId: text("account_id").notNull(),
    livemode: integer("livemode", { mode: "boolean" }).notNull().default(true),
    provider: text("provider", { enum: ["stripe"] }).notNull(),
    eventId: text("event_id").notNull(),
    type: text("type").notNull(),
    /** `applied` (it changed a Tender object), `unchanged` (already so, or superseded) or `ignored` (not Tender's). */
    outcome: text("outcome", { enum: ["applied", "unchanged", "ignored"] }).notNull(),
    /** The Tender object it was about (a payout, refund or payment), when found. */
    objectId: text("object_id"),
    receivedAt: text("received_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.eventId] }), index("processor_events_received").on(t.receivedAt)],
);

// Credit notes (src/billing/credit-notes.ts): a correction of a finalized invoice, which never
// changes itself. Numbered gap-free per account and mode in their own sequence (<PREFIX>-CN-0001:
// MAX + 1 taken by the INSERT, the unique index refusing a second taker). `lines` is what each
// invoice line is credited ([{ id, invoice_line_id, description, amount, tax_amounts }], amounts
// tax included): the batch that issues a note checks, before its INSERT, that the invoice's
// notes not void never credit a line, nor the invoice, more than it cost. A note is paid out once,
// in the same batch: a refund of the invoice's payment (refund_id) or a credit to the user's
// balance (customer_balance_transaction).
export const creditNotes = sqliteTable(
  "credit_notes",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    numberSequence: integer("number_sequence").notNull(),
    number: text("number").generatedAlwaysAs(sql`upper(substr(account_id, -8)) || '-CN-' || printf('%04d', number_sequence)`, { mode: "virtual" }),
    invoiceId: text("invoice_id").notNull(),
    userId: text("user_id"),
    currency: text("currency").notNull(),
    // What it credits in all, tax included; `tax` the tax in it (inclusive and exclusive), per rate in tax_amounts.
    amount: integer("amount").notNull(),
    tax: integer("tax").notNull().default(0),
    exclusiveTax: integer("exclusive_tax").notNull().default(0),
    taxAmounts: text("tax_amounts", { mode: "json" }).$type<TaxAmount[]>().notNull().default(sql`'[]'`),
    lines: text("lines", { mode: "json" }).$type<CreditNoteLine[]>().notNull(),
    reason: text("reason", { enum: ["duplicate", "fraudulent", "order_change", "product_unsatisfactory"] }),
    memo: text("memo"),
    refundId: text("refund_id"),
    balanceTransactionId: text("balance_transaction_id"),
    status: text("status", { enum: ["issued", "void"] }).notNull(),
    createdAt: createdAt(),
    voidedAt: text("voided_at"),
  },
  (t) => [
    uniqueIndex("credit_notes_number").on(t.accountId, t.livemode, t.numberSequence),
    index("credit_notes_account").on(t.accountId, t.livemode, t.id),
    index("credit_notes_invoice").on(t.invoiceId, t.status),
    // A refund issues at most one credit note (POST /refunds of an invoiced payment).
    uniqueIndex("credit_notes_refund").on(t.refundId),
    check("credit_notes_amount_positive", sql`${t.amount} > 0`),
  ],
);

/** A credit note's line: what one invoice line is credited, tax included, and the tax in it. */
export interface CreditNoteLine {
  id: string;
  invoice_line_id: string;
  description: string;
  amount: number;
  tax_amounts: TaxAmount[];
}

// The ledger of users' balances (Stripe's customer balance transactions): every change of
// users.balance is one row here, written in the same batch, with the balance after it. `source`
// is unique (credit_note:<id>, credit_note_void:<id>, period:<subscription>:<n> for what a renewal's
// claim took), so a retried batch applies once.
export const customerBalanceTransactions = sqliteTable(
  "customer_balance_transactions",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    livemode: livemode(),
    userId: text("user_id").notNull(),
    // Negative credits the user (a credit note), positive takes a credit back (a void).
    amount: integer("amount").notNull(),
    currency: text("currency").notNull(),
    type: text("type", { enum: ["credit_note", "credit_note_void", "applied_to_invoice", "unapplied_from_invoice"] }).notNull(),
    creditNoteId: text("credit_note_id"),
    invoiceId: text("invoice_id"),
    source: text("source").notNull(),
    endingBalance: integer("ending_balance").notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("customer_balance_transactions_source").on(t.source),
    index("customer_balance_transactions_user").on(t.accountId, t.livemode, t.userId, t.id),
  ],
);
