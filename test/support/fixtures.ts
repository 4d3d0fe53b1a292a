// Objects made for a test, through the API where there is one: users, keys and tokens, plans and
// subscriptions, payouts, charges (made as billing makes them: there is no "create payment"
// endpoint), and one object of every kind for an account.
import { TEST_SHARD, env } from "./env";
import { expect } from "vitest";
import { createDb } from "../../src/db/client";
import { sha256Hex } from "../../src/lib/crypto";
import { readCard } from "../../src/payments/card-input";
import { type ChargeResult, charge } from "../../src/payments/charge";
import { sandboxProcessor } from "../../src/processor/sandbox";
import { commitWrites } from "../../src/webhooks/outbox";
import { issueInvoice } from "../../src/billing/invoices";
import { newId } from "../../src/domain/ids";
import { CARDS, PROOF_CARD, card, cardFields, payoutBody } from "./cards";
import { makeDue } from "./clock";
import { type Account, type CallResult, call, fetchWith } from "./http";
import { droppingQueue, runJobs } from "./queue";
import { RECEIVER_ORIGIN } from "./receiver";
import { waitFor } from "./wait";
import { publicUrl } from "../../src/pages/public-url";

// ---------------------------------------------------------------------------------------------
// Users

export interface UserOptions {
  /** Default "Ada Lovelace". */
  name?: string;
  /** Default: the first word of the name, lower-cased, at example.com ("ada@example.com"). */
  email?: string;
  /** A test clock id: the user (and what they subscribe to) lives on that clock's time. */
  testClock?: string;
}

export async function createUser(acct: Account, { name = "Ada Lovelace", email, testClock }: UserOptions = {}) {
  email ??= `${name.split(" ")[0].toLowerCase()}@example.com`;
  const res = await call("/api/users", { key: acct.key, body: { name, email, ...(testClock ? { test_clock: testClock } : {}) } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; name: string; email: string; test_clock: string | null };
}

// ---------------------------------------------------------------------------------------------
// Keys and tokens

/** Creates a restricted key with `scopes` for the account, and returns the created key's answer. */
export async function createKey(acct: Account, scopes: string[], name = "test key") {
  const res = await call("/api/keys", { key: acct.key, body: { name, scopes } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; secret: string; prefix: string; scopes: string[] };
}

/** Exchanges an API key for an access token (Bearer client authentication, JSON body). */
export async function mintToken(key: string, scope?: string): Promise<string> {
  const res = await call("/oauth/token", {
    body: { grant_type: "client_credentials", ...(scope ? { scope } : {}) },
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.access_token;
}

/** The id of the account's default secret key, as GET /api/keys shows it. */
export async function secretKeyId(account: Account): Promise<string> {
  const res = await call("/api/keys?limit=100", { key: account.key });
  expect(res.status).toBe(200);
  return res.body.data.find((k: { kind: string }) => k.kind === "secret").id;
}

/** Uses the credential once, so the per-isolate credential cache holds it. */
export async function warm(key: string) {
  const res = await call("/api/users?limit=1", { key });
  expect(res.status, res.text).toBe(200);
}

/** A live-mode secret key for the account, inserted directly (sign-up only issues test keys). */
export async function liveKey(accountId: string): Promise<string> {
  // Its first random character names the shard the account lives on (src/db/shards.ts).
  const key = `sk_live_${TEST_SHARD}${"L".repeat(15)}${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  await env.DB.prepare(
    "INSERT INTO api_keys (id, account_id, name, kind, mode, prefix, hash, scopes, created_at) VALUES (?, ?, 'live', 'secret', 'live', ?, ?, '[\"*\"]', ?)",
  )
    .bind(`key_live${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`, accountId, key.slice(0, 12), await sha256Hex(key), new Date().toISOString())
    .run();
  return key;
}

// ---------------------------------------------------------------------------------------------
// Plans and subscriptions

/** The tiers of DESIGN.md: 1–5 at 7.00, 6–10 at 6.50, 11+ at 6.00. */
export const DESIGN_TIERS = [
  { up_to: 5, unit_price: 7.0 },
  { up_to: 10, unit_price: 6.5 },
  { up_to: null, unit_price: 6.0 },
];

export async function createPlan(acct: Account, overrides: Record<string, unknown> = {}) {
  const res = await call("/subscription-plans", {
    key: acct.key,
    body: { name: "Pro", price: 19.99, currency: "usd", interval: "month", description: "Pro plan", ...overrides },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

/** A subscription whose first charge asked for 3-D Secure: incomplete, its first invoice open. */
export interface IncompleteInvoice {
  sub: string;
  payment: string;
  /** The payment's 3-D Secure page (latest_payment.next_action.url). */
  challenge: string;
  invoice: { id: string; hosted_invoice_url: string };
  /** The invoice's page, as a path. */
  page: string;
}

/** A card that asks for 3-D Secure on every charge. */
export const AUTH_CARD = "4000002760003184";

/** POST /subscriptions with AUTH_CARD (and the merchant's `returnUrl`, if given): incomplete, its first invoice open with its page. */
export async function incompleteInvoice(owner: Account, returnUrl?: string): Promise<IncompleteInvoice> {
  const user = await createUser(owner, { name: "Ada Lovelace", email: "ada@example.com" });
  const plan = await createPlan(owner, { price: 30, name: "Pro" });
  const res = await call("/subscriptions", { key: owner.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(AUTH_CARD), ...(returnUrl ? { return_url: returnUrl } : {}) } });
  expect(res.status, res.text).toBe(201);
  expect(res.body).toMatchObject({ status: "incomplete", latest_payment: { status: "requires_action" } });
  const [invoice] = (await call(`/invoices?subscription_id=${res.body.id}&status=open`, { key: owner.key })).body.data;
  expect(invoice?.hosted_invoice_url).toBeTruthy();
  return {
    sub: res.body.id,
    payment: res.body.latest_payment.id,
    challenge: res.body.latest_payment.next_action.url,
    invoice,
    page: new URL(invoice.hosted_invoice_url).pathname,
  };
}

/** POST /subscriptions with `card(pan)`; returns the answer, whatever it is. */
export async function subscribe(acct: Account, userId: string, planId: string, pan: string = CARDS.visa, extra: Record<string, unknown> = {}) {
  return call("/subscriptions", { key: acct.key, body: { user_id: userId, plan_id: planId, ...card(pan), ...extra } });
}

/** POST /subscriptions with `card(pan)`, asserted created; returns the subscription. */
export async function subscribed(acct: Account, userId: string, planId: string, pan: string = CARDS.visa, extra: Record<string, unknown> = {}) {
  const res = await subscribe(acct, userId, planId, pan, extra);
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

export async function getSubscription(acct: Account, id: string) {
  const res = await call(`/subscriptions/${id}`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body as Record<string, any>;
}

/** A subscription paid with PROOF_CARD whose next renewal is already due; returns its id. */
export async function dueSubscription(acct: Account, userId: string, planId: string): Promise<string> {
  const sub = await call("/subscriptions", { key: acct.key, body: { user_id: userId, plan_id: planId, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } });
  expect(sub.status, sub.text).toBe(201);
  await makeDue(sub.body.id);
  return sub.body.id;
}

// ---------------------------------------------------------------------------------------------
// Payouts, charges and refunds

export async function createPayout(acct: Account, overrides: Record<string, unknown> = {}, pan: string = CARDS.visa, cvv = "987") {
  const res = await call("/payout", { key: acct.key, body: payoutBody(overrides, pan, cvv) });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

/** Creates a payout through POST /payout whose settlement message is lost after the commit. */
export async function payoutWithoutSettlement(acct: Account, overrides: Record<string, unknown> = {}, pan = PROOF_CARD.pan) {
  const res = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody(overrides, pan, PROOF_CARD.cvv) });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

/** Creates a refund through POST /refunds whose settlement message is lost after the commit. */
export async function refundWithoutSettlement(acct: Account, body: Record<string, unknown>) {
  const res = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/refunds", { key: acct.key, json: body });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

export interface ChargeOptions {
  pan?: string;
  cvv?: string;
  amount?: number;
  currency?: string;
  subscriptionId?: string | null;
  /** Charge the vaulted token of an earlier charge instead of a card (a renewal). */
  token?: string;
}

/**
 * A charge made the way billing makes one: charge() against the sandbox, with a card validated by
 * readCard (recorded, see cardFields), for an invoice of one line (paid, or void when declined),
 * committed as one batch with commitWrites.
 */
export async function chargeCard(acct: Account, customer: { id: string; email: string } | null, options: ChargeOptions = {}): Promise<ChargeResult> {
  const db = createDb(env.DB);
  const at = Date.now();
  const input = await readCard(env, cardFields(options.pan ?? CARDS.visa, options.cvv ?? "864"), at);
  const invoiceId = newId("invoice", at);
  const result = await charge({
    db,
    processor: sandboxProcessor,
    accountId: acct.id,
    livemode: false,
    customer,
    subscriptionId: options.subscriptionId ?? null,
    invoiceId,
    amount: options.amount ?? 4000,
    currency: options.currency ?? "usd",
    source: options.token ? { token: options.token } : { card: input.card },
    summary: input.summary,
    fingerprint: input.fingerprint,
    at,
  });
  const now = new Date(at).toISOString();
  const amount = options.amount ?? 4000;
  const invoice = issueInvoice(
    db,
    {
      id: invoiceId,
      tenant: { accountId: acct.id, livemode: false },
      subscriptionId: options.subscriptionId ?? null,
      periodIndex: null,
      userId: customer?.id ?? null,
      currency: options.currency ?? "usd",
      periodStart: now,
      periodEnd: now,
      lines: [{ type: "subscription", description: "Charge", quantity: 1, unitAmountDecimal: String(amount), amount, proration: false, periodStart: now, periodEnd: now }],
    },
    result.succeeded ? { kind: "paid", paymentId: result.payment.id } : { kind: "failed", paymentId: result.payment.id, status: "void" },
    { at, realNow: at, pageBase: publicUrl(env) },
  );
  await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { statements: [...result.statements, ...invoice.statements], events: [...result.events, ...invoice.events] });
  return result;
}

// ---------------------------------------------------------------------------------------------
// One object of every kind

export interface Fixtures {
  user: string;
  requestId: string;
  /** A restricted key that is not the caller's own (DELETE /api/keys/{id} may revoke it). */
  key: string;
  /** A pending payout committed as POST /payout does, whose settlement was never enqueued. */
  payout: string;
  payment: string;
  refund: string;
  webhook: string;
  event: string;
  plan: string;
  subscription: string;
  clock: string;
  /** An open invoice: the declined renewal of a second subscription (past_due), which void or pay acts on. */
  invoice: string;
  /** A coupon (its id is generated, co_…), not redeemed. */
  coupon: string;
  /** A tax rate (20% exclusive), on no plan. */
  taxRate: string;
  /** A paid invoice, of a third subscription nothing refunds: what credit notes are made on (an open invoice with a credit note standing cannot be voided). */
  creditedInvoice: string;
  /** A credit note of `creditedInvoice` (0.01) to the user's balance, issued: what void acts on. */
  creditNote: string;
  /** A subscription to a metered plan (its usage is reported to it). */
  metered: string;
  /** A saved card of `user` (pm_card_visa), charged by no subscription: DELETE detaches it. */
  paymentMethod: string;
  /** A one-off payment authorized, not captured (requires_capture): what capture and cancel act on. */
  authorization: string;
  /** An open checkout session (payment mode) of `user`. */
  checkoutSession: string;
  /** A customer portal session of `user`. */
  portalSession: string;
}

/**
 * The saved card of each seeded user: fills a path's {pm_id} beside the user's {id}
 * (test/support/operations.ts pathWith), so a sweep given another account's user gets its card.
 */
export const PAYMENT_METHOD_OF = new Map<string, string>();

/** The recovery of each seeded webhook endpoint (done): fills a path's {rcv_id} beside the endpoint's {id}. */
export const RECOVERY_OF = new Map<string, string>();

async function created(res: CallResult, status = 201) {
  expect(res.status, res.text).toBe(status);
  return res.body;
}

/**
 * One object of every kind for `acct`, made through the API. When it returns, nothing is left
 * running in the background for them (the refund is settled, the payout was never enqueued, and
 * the webhook endpoint is made last, subscribed to a type none of this emits).
 */
/**
 * An open invoice: the declined renewal of a new subscription (past_due), whose card was then fixed
 * (so that POST /invoices/{id}/pay charges it successfully). `paying` is a subscription whose
 * vaulted card succeeds: its token is put in the declined card's place.
 */
export async function openInvoice(acct: Account, userId: string, planId: string, paying: string): Promise<string> {
  const res = await call("/subscriptions", { key: acct.key, body: { user_id: userId, plan_id: planId, ...cardFields(CARDS.declineAfterFirst, "123") } });
  expect(res.status, res.text).toBe(201);
  const dunned = res.body.id as string;
  await makeDue(dunned);
  await runJobs({ kind: "billing.renew", subscriptionIds: [dunned] });
  const open = await call(`/invoices?subscription_id=${dunned}&status=open`, { key: acct.key });
  expect(open.body.data, open.text).toHaveLength(1);
  // Its holder's bank fixed the card: the vaulted card now succeeds. Through the API a new card on a
  // past-due subscription is charged at once (and pays the invoice), so a working card's token is
  // put in its place.
  await env.DB.prepare("UPDATE subscriptions SET processor_token = (SELECT processor_token FROM subscriptions WHERE id = ?) WHERE id = ?").bind(paying, dunned).run();
  return open.body.data[0].id as string;
}

/** A recovery of the endpoint, run to its end here (its message to the job queue dropped): done. */
export async function seedRecovery(key: string, webhook: string): Promise<string> {
  const recovery = (await created(await fetchWith({ JOB_QUEUE: droppingQueue() }, `/api/webhooks/${webhook}/recover`, { key, json: { since: new Date(Date.now() - 60_000).toISOString() } }), 202)).id;
  await runJobs({ kind: "webhooks.recover", recoveryId: recovery });
  return recovery;
}

export async function seed(acct: Account): Promise<Fixtures> {
  const user = await createUser(acct, { name: "Proof User", email: "proof.user@example.com" });
  const requestId = (await created(await call("/api/request-id", { key: acct.key, body: { purpose: "proof" } }))).id;
  const key = (await createKey(acct, ["users:read"], "victim")).id;
  const plan = (await created(await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 19.99, currency: "usd", interval: "month" } }))).id;
  const subscription = (
    await created(await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }))
  ).id;
  const payments = await call(`/payments?subscription_id=${subscription}`, { key: acct.key });
  expect(payments.body.data).toHaveLength(1);
  const payment = payments.body.data[0].id;
  const refund = (await created(await call("/refunds", { key: acct.key, body: { payment_id: payment, amount: 100 } }))).id;
  await waitFor(async () => expect((await call(`/refunds/${refund}`, { key: acct.key })).body.status).toBe("succeeded"));
  const payout = (await payoutWithoutSettlement(acct)).id;
  const invoice = await openInvoice(acct, user.id, plan, subscription);
  const clock = (await created(await call("/api/test-clocks", { key: acct.key, body: { frozen_time: "2030-01-01T00:00:00.000Z" } }))).id;
  const coupon = (await created(await call("/coupons", { key: acct.key, body: { name: "Proof", percent_off: 10, duration: "once" } }))).id;
  const taxRate = (await created(await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "20", inclusive: false } }))).id;
  const credited = (await created(await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }))).id;
  const creditedInvoice = (await call(`/invoices?subscription_id=${credited}&status=paid`, { key: acct.key })).body.data[0].id as string;
  const creditNote = (await created(await call("/credit-notes", { key: acct.key, body: { invoice_id: creditedInvoice, amount: 1, refund: false } }))).id;
  const paymentMethod = (await created(await call(`/api/users/${user.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } }))).id;
  PAYMENT_METHOD_OF.set(user.id, paymentMethod);
  const meteredPlan = (await created(await call("/subscription-plans", { key: acct.key, body: { name: "Calls", price: 0.01, currency: "usd", interval: "month", usage_type: "metered" } }))).id;
  const metered = (
    await created(await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: meteredPlan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }))
  ).id;
  const authorization = (
    await created(await call("/payments", { key: acct.key, body: { amount: 1500, currency: "usd", user_id: user.id, capture_method: "manual", ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }))
  ).id;
  const checkoutSession = (
    await created(await call("/checkout/sessions", { key: acct.key, body: { mode: "payment", amount: 1500, currency: "usd", user_id: user.id, success_url: "https://shop.example.com/ok", cancel_url: "https://shop.example.com/cart" } }))
  ).id;
  const portalSession = (await created(await call("/portal/sessions", { key: acct.key, body: { user_id: user.id, return_url: "https://shop.example.com/account" } }))).id;
  const event = (await call("/api/events?limit=1", { key: acct.key })).body.data[0].id;
  const webhook = (await created(await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/proof`, events: ["payout.paid"] } }))).id;
  RECOVERY_OF.set(webhook, await seedRecovery(acct.key, webhook));
  return { user: user.id, requestId, key, payout, payment, refund, webhook, event, plan, subscription, clock, invoice, coupon, taxRate, creditedInvoice, creditNote, metered, paymentMethod, authorization, checkoutSession, portalSession };
}
