// The hosted checkout page (POST /checkout/sessions answers its url): what the payer sees and
// submits. src/payments/checkout.ts holds the session's rules; this file is the page.
//
// The page carries no API key. It acts through the API's own routes, in process, as the key that
// created the session (src/auth/principal.ts, as the dashboard does), with only the scopes it
// needs: it saves the card (POST /api/users/{id}/payment-methods), then charges it (POST /payments,
// or POST /subscriptions), then completes the session. Validation, idempotency, processor calls,
// money claims and events are therefore the API's, unchanged.
//
// Test mode shows Tender's own card form; the card number goes to the API in process and is never
// stored or logged here. Live mode shows Stripe's Payment Element (deferred-intent mode, the
// connection's publishable key): Stripe.js makes the PaymentMethod in the browser and the page
// posts only its id, which is attached to the user's Stripe Customer (the live path of POST
// /api/users/{id}/payment-methods) and charged through the live paths. A live setup session sets
// the card up with a SetupIntent; one whose bank asks to authenticate goes through Stripe.js
// handleNextAction and the return route (?setup_intent=…) saves it.
//
// 3-D Secure: `afterCharge` is the one place that decides where the browser goes once the charge
// has answered. A payment (or a subscription's first charge) that asks for authentication sends
// the browser to its next_action.url, which comes back to this session's return route
// (`returnPath`), which finishes the session as a submit does.
import type { Context } from "hono";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import type { AppEnv, Auth } from "../context";
import { createDb } from "../db/client";
import { accounts, checkoutSessions, plans } from "../db/schema";
import { findOnAnyShard, shardEnv } from "../db/shards";
import { livesHere } from "../db/scope";
import { CURRENT_API_VERSION } from "../domain/api-versions";
import { hasPrefix } from "../domain/ids";
import { formatMoney } from "../domain/money";
import { isDevelopment } from "../env";
import { clock } from "../lib/clock";
import { randomToken } from "../lib/crypto";
import {
  type CheckoutSessionRow,
  attemptChargeKey,
  checkoutPagePath,
  completeCheckoutSession,
  endDeclinedAttempt,
  holdForSubmit,
  isPayable,
  recordAttemptCard,
  releaseSubmit,
  setupReturnKey,
  submitCardKey,
  successUrlOf,
} from "../payments/checkout";
import { chargeableAmount } from "../billing/pricing";
import { HostedLayout, hostedHeaders, pageSecretMatches, publishableKeyOf, stripeJsUrl } from "./hosted";
import { CHECKOUT_SCRIPT, CHECKOUT_SCRIPT_PATH, CardFields, readForm, readToken } from "./card-form";
import { type ApiAnswer, type InProcessApp, callApi, crossSite } from "./in-process";

type PlanRow = typeof plans.$inferSelect;

/** A session found by its page: the row, the shard it lives on, and what the page shows of its account and plan. */
interface Found {
  row: CheckoutSessionRow;
  shard: number;
  merchant: string;
  plan: PlanRow | null;
  /** Live mode: the connection's publishable key, for Stripe.js (null without one). */
  publishableKey: string | null;
}

/** How long a second submit (a double click, another tab) waits for the first to finish before it says so. */
const WAIT_FOR_OTHER_SUBMIT_MS = 10_000;
const WAIT_STEP_MS = 400;

/**
 * The session `id` on whichever shard its account lives (its URL names no shard: it must outlive an
 * account's move), with its account's name and its plan. Asked of every shard side by side.
 */
async function findSession(env: AppEnv["Bindings"], id: string): Promise<Found | null> {
  if (!hasPrefix(id, "checkoutSession")) return null;
  return findOnAnyShard(env, async (view) => {
    const db = createDb(view.DB);
    const [hit] = await db
      .select({ row: checkoutSessions, merchant: accounts.name })
      .from(checkoutSessions)
      .innerJoin(accounts, eq(accounts.id, checkoutSessions.accountId))
      .where(and(eq(checkoutSessions.id, id), livesHere(checkoutSessions.accountId)))
      .limit(1);
    if (!hit) return null;
    const plan = hit.row.planId ? ((await db.select().from(plans).where(eq(plans.id, hit.row.planId)).limit(1))[0] ?? null) : null;
    const publishableKey = hit.row.livemode ? await publishableKeyOf(db, hit.row.accountId) : null;
    return { row: hit.row, shard: view.SHARD, merchant: hit.merchant, plan, publishableKey };
  });
}

const dbOf = (env: AppEnv["Bindings"], shard: number) => createDb(shardEnv(env, shard).DB);

/** The key the page acts as: the session's creator, with only the scopes the page needs. */
function pageAuth(found: Found): Auth {
  const { row } = found;
  return {
    shard: found.shard,
    accountId: row.accountId,
    keyId: row.keyId,
    mode: row.livemode ? "live" : "test",
    livemode: row.livemode,
    scopes: ["payment_methods:write", "payments:write", "subscriptions:write"],
    credential: "restricted_key",
    apiVersion: CURRENT_API_VERSION,
    // A payment or subscription session charges the card it saves at once (that charge sets it up); a setup session sets it up (a SetupIntent in live mode).
    ...(row.mode === "setup" ? { setupForCheckoutSession: row.id } : { chargesSavedCardNow: true as const }),
  };
}

/** The route a 3-D Secure challenge returns to (with ?payment_id=…): it finishes the session. */
export const returnPath = (row: Pick<CheckoutSessionRow, "id" | "pageSecret">) => `${checkoutPagePath(row)}/return`;

// ---------------------------------------------------------------------------------------------
// What the page shows

/** What is paid, in words: the amount, the plan's price and interval, or saving a card. */
function WhatIsPaid({ found }: { found: Found }) {
  const { row, plan, merchant } = found;
  if (row.mode === "payment" && row.amount !== null && row.currency) {
    return (
      <>
        <p class="muted">Pay {merchant}</p>
        <p class="amount">{formatMoney(row.amount, row.currency)}</p>
      </>
    );
  }
  if (row.mode === "subscription" && plan) {
    const metered = plan.usageType === "metered";
    const price = metered ? null : chargeableAmount(plan, 1);
    return (
      <>
        <p class="muted">Subscribe to {plan.name} from {merchant}</p>
        <p class="amount">{price === null ? "Billed by usage" : formatMoney(price, plan.currency)} <span class="muted">per {plan.interval}</span></p>
        {plan.trialPeriodDays ? <p class="muted">{plan.trialPeriodDays}-day free trial: the card is charged when it ends.</p> : null}
      </>
    );
  }
  return (
    <>
      <p class="muted">{merchant}</p>
      <p class="amount">Save a card</p>
      <p class="muted">Your card is saved for later payments; nothing is charged now.</p>
    </>
  );
}

const submitLabel = (row: CheckoutSessionRow) => (row.mode === "payment" ? "Pay" : row.mode === "subscription" ? "Subscribe" : "Save card");

interface FormProps {
  found: Found;
  message?: string;
  /** The cardholder's name as typed (never the card number or the security code). */
  name?: string;
}

function CheckoutForm({ found, message, name }: FormProps) {
  const { row } = found;
  return (
    <HostedLayout title={`${submitLabel(row)} · ${found.merchant}`} livemode={row.livemode}>
      <h1>Checkout</h1>
      <WhatIsPaid found={found} />
      {message ? (
        <p class="error" role="alert">
          {message}
        </p>
      ) : null}
      <form method="post" action={checkoutPagePath(row)} autocomplete="on">
        <CardFields name={name} />
        <button type="submit">{submitLabel(row)}</button>
      </form>
      <p>
        <a href={row.cancelUrl}>Cancel and return</a>
      </p>
    </HostedLayout>
  );
}

/**
 * The live page: Stripe's Payment Element (deferred-intent mode) in place of Tender's card fields.
 * The script makes a PaymentMethod with Stripe.js in the browser and posts only its id
 * (`processor_token`): the card never reaches Tender.
 */
function LiveCheckoutForm({ found, message, stripeJs, setupSecret }: FormProps & { stripeJs: string; setupSecret?: string }) {
  const { row } = found;
  const elementsMode = row.mode === "setup" ? "setup" : row.mode === "subscription" ? "subscription" : "payment";
  const amount = row.mode === "payment" ? row.amount : row.mode === "subscription" && found.plan && found.plan.usageType !== "metered" ? chargeableAmount(found.plan, 1) : null;
  return (
    <HostedLayout title={`${submitLabel(row)} · ${found.merchant}`} livemode={row.livemode} scripts={[stripeJs, CHECKOUT_SCRIPT_PATH]}>
      <h1>Checkout</h1>
      <WhatIsPaid found={found} />
      <p class="error" role="alert" id="checkout-error">
        {message ?? ""}
      </p>
      <form
        method="post"
        action={checkoutPagePath(row)}
        id="checkout-form"
        data-publishable-key={found.publishableKey ?? ""}
        data-mode={elementsMode}
        data-amount={amount === null ? "" : String(amount)}
        data-currency={row.currency ?? ""}
        data-client-secret={setupSecret ?? ""}
        data-return-url={returnPath(row)}
      >
        <div id="payment-element"></div>
        <input type="hidden" name="processor_token" id="processor_token" value="" />
        <button type="submit">{submitLabel(row)}</button>
      </form>
      <p>
        <a href={row.cancelUrl}>Cancel and return</a>
      </p>
    </HostedLayout>
  );
}

type PageStatus = 200 | 400 | 402 | 404 | 409 | 410 | 500 | 503;

function formPage(c: Context<AppEnv>, found: Found, status: PageStatus, message?: string, name?: string, setupSecret?: string) {
  if (found.row.livemode) {
    if (!found.publishableKey) return messagePage(c, 503, "Checkout unavailable", "This seller's live payments are not set up yet (no publishable key on its Stripe connection).", true);
    const stripeJs = stripeJsUrl(c.env);
    return c.html(<LiveCheckoutForm found={found} message={message} stripeJs={stripeJs} setupSecret={setupSecret} />, status, hostedHeaders(stripeJs));
  }
  return c.html(<CheckoutForm found={found} message={message} name={name} />, status, hostedHeaders(null));
}

function messagePage(c: Context<AppEnv>, status: PageStatus, title: string, message: string, livemode = false) {
  return c.html(
    <HostedLayout title={title} livemode={livemode}>
      <h1>{title}</h1>
      <p>{message}</p>
    </HostedLayout>,
    status,
    hostedHeaders(null),
  );
}

const notFoundPage = (c: Context<AppEnv>) => messagePage(c, 404, "Checkout not found", "This checkout link is not valid. Ask the seller for a new one.");

/** The page of a session that takes no card any more: complete or expired (410). */
function closedPage(c: Context<AppEnv>, found: Found) {
  const { row } = found;
  if (row.status === "complete") return messagePage(c, 410, "Already paid", `This checkout was completed${row.completedAt ? ` on ${row.completedAt.slice(0, 10)}` : ""}. Nothing more will be charged.`, row.livemode);
  return messagePage(c, 410, "Checkout expired", "This checkout expired before it was paid. Ask the seller for a new one.", row.livemode);
}

const redirectTo = (c: Context<AppEnv>, url: string) => c.body(null, 303, { Location: url, ...hostedHeaders(null) });

// ---------------------------------------------------------------------------------------------
// Submitting

/** An API error's message, for the payer: the API's own sentence (it never repeats a card number). */
const errorMessage = (answer: ApiAnswer) => (answer.body?.error?.message as string | undefined) ?? "The payment could not be made.";

/**
 * Where the browser goes once the charge has answered (2xx): THE seam for 3-D Secure. A payment
 * (or a subscription's first charge) that asks the payer to authenticate sends the browser to its
 * next_action.url, which returns to this session's return route; anything else is paid, and the
 * session is completed.
 */
export function afterCharge(mode: "payment" | "subscription", answer: any): { kind: "authenticate"; url: string } | { kind: "paid"; paymentId: string | null; subscriptionId: string | null } {
  const payment = mode === "payment" ? answer : answer?.latest_payment;
  if (payment?.status === "requires_action" && typeof payment.next_action?.url === "string") return { kind: "authenticate", url: payment.next_action.url };
  if (mode === "payment") return { kind: "paid", paymentId: answer.id, subscriptionId: null };
  return { kind: "paid", paymentId: typeof answer?.latest_payment?.id === "string" ? answer.latest_payment.id : null, subscriptionId: answer.id };
}

/** Completes the session and sends the browser to success_url; a session completed by another submit first goes there too. */
async function finish(c: Context<AppEnv>, found: Found, made: { paymentId: string | null; subscriptionId: string | null; paymentMethodId: string }) {
  const env = shardEnv(c.env, found.shard);
  const db = dbOf(c.env, found.shard);
  let paymentId = made.paymentId;
  // A subscription's answer names no payment: its first charge, if it had one (a trial has none).
  if (found.row.mode === "subscription" && made.subscriptionId && paymentId === null) {
    const payments = await callApi(appOf(c), c, pageAuth(found), "GET", `/payments?subscription_id=${encodeURIComponent(made.subscriptionId)}&limit=1`);
    paymentId = payments.status === 200 ? (payments.body?.data?.[0]?.id ?? null) : null;
  }
  await completeCheckoutSession({ db, queue: env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) }, found.row, { ...made, paymentId }, clock.now());
  return redirectTo(c, successUrlOf(found.row));
}

/** A second submit while one is at the processor: waits for it, then goes where it went. */
async function waitForOtherSubmit(c: Context<AppEnv>, id: string) {
  const deadline = Date.now() + WAIT_FOR_OTHER_SUBMIT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
    const again = await findSession(c.env, id);
    if (!again) break;
    if (again.row.status === "complete") return redirectTo(c, successUrlOf(again.row));
    if (!isPayable(again.row, clock.now())) return closedPage(c, again);
    if (again.row.submitUntil === null || again.row.submitUntil <= clock.now()) return formPage(c, again, 409, "The payment in your other window did not go through. Check your card details and try again.");
  }
  return messagePage(c, 409, "Payment in progress", "This checkout is being paid in another window. Reload this page in a moment.");
}

const APP: unique symbol = Symbol("tender.checkoutApp");
const appOf = (c: Context<AppEnv>) => (c as unknown as { [APP]: InProcessApp })[APP];

async function submit(c: Context<AppEnv>, found: Found, form: Record<string, unknown>) {
  const app = appOf(c);
  const now = clock.now();
  const db = dbOf(c.env, found.shard);
  const input = found.row.livemode ? readToken(form) : readForm(form);
  if (!input.ok) return formPage(c, found, 400, input.message, input.name);
  const held = await holdForSubmit(db, found.row.id, now);
  if (!held) {
    const again = await findSession(c.env, found.row.id);
    if (!again) return notFoundPage(c);
    if (again.row.status === "complete") return redirectTo(c, successUrlOf(again.row));
    if (!isPayable(again.row, now)) return closedPage(c, again);
    return waitForOtherSubmit(c, found.row.id);
  }
  const session: Found = { ...found, row: held };
  const auth = pageAuth(session);
  let decided = false;
  try {
    // The card: the one an earlier attempt was charging when its outcome was lost (charged again
    // under the same reference, so never twice), else the one typed now.
    let paymentMethodId = held.attemptPaymentMethodId;
    if (!paymentMethodId) {
      const saved = await callApi(app, c, auth, "POST", `/api/users/${encodeURIComponent(held.userId)}/payment-methods`, input.card, submitCardKey(held, randomToken(16)));
      // A setup session's card whose bank asks its holder to authenticate: the page runs Stripe.js
      // handleNextAction with the SetupIntent's client secret, then returns (returnedFromSetup).
      const setupSecret = saved.body?.error?.code === "authentication_required" ? saved.body.error.setup_intent?.client_secret : undefined;
      if (saved.status === 402 && held.mode === "setup" && typeof setupSecret === "string") {
        return formPage(c, session, 200, "Your bank asks you to confirm this card.", input.name, setupSecret);
      }
      if (saved.status !== 201) return formPage(c, session, saved.status === 402 ? 402 : saved.status >= 500 ? 500 : 400, errorMessage(saved), input.name);
      paymentMethodId = saved.body.id as string;
      if (held.mode !== "setup") await recordAttemptCard(db, held.id, held.attempt, paymentMethodId);
    }
    if (held.mode === "setup") {
      decided = true;
      return await finish(c, session, { paymentId: null, subscriptionId: null, paymentMethodId });
    }
    const charged =
      held.mode === "payment"
        ? await callApi(
            app,
            c,
            auth,
            "POST",
            "/payments",
            { amount: held.amount, currency: held.currency, user_id: held.userId, payment_method: paymentMethodId, metadata: { checkout_session_id: held.id }, ...returnUrlField(c, held) },
            attemptChargeKey(held),
          )
        : // A first charge that asks for 3-D Secure makes the subscription incomplete: its challenge returns here too.
          await callApi(app, c, auth, "POST", "/subscriptions", { user_id: held.userId, plan_id: held.planId, payment_method: paymentMethodId, ...returnUrlField(c, held) }, attemptChargeKey(held));
    if (charged.status === 201 || charged.status === 200) {
      const next = afterCharge(held.mode, charged.body);
      if (next.kind === "authenticate") return redirectTo(c, next.url);
      decided = true;
      return await finish(c, session, { paymentId: next.paymentId, subscriptionId: next.subscriptionId, paymentMethodId });
    }
    if (charged.status === 402) {
      // Declined: the next submit is a new attempt, with a new card and a new reference.
      await endDeclinedAttempt(db, held.id, held.attempt);
      decided = true;
      return formPage(c, session, 402, errorMessage(charged), input.name);
    }
    if (charged.status === 400 || charged.status === 404) {
      // Refused before any charge (a detached card, an archived plan): the attempt may start again.
      await endDeclinedAttempt(db, held.id, held.attempt);
      decided = true;
      return formPage(c, session, 400, errorMessage(charged), input.name);
    }
    // The outcome is unknown (in flight elsewhere, a server error): the next submit charges the same
    // card under the same reference, which answers as this one would have.
    console.error(JSON.stringify({ message: "checkout charge outcome unknown; the next submit retries it under the same reference", checkout_session: held.id, status: charged.status, code: charged.body?.error?.code ?? null }));
    return formPage(c, session, 503, "We could not confirm the payment. Submit again in a moment: you will not be charged twice.", input.name);
  } finally {
    if (!decided) await releaseSubmit(db, held.id);
  }
}

/** POST /payments's (and POST /subscriptions's) return_url: this session's return route, where the origin allows it (https, or development). */
function returnUrlField(c: Context<AppEnv>, row: CheckoutSessionRow): { return_url?: string } {
  const url = new URL(returnPath(row), c.req.url);
  return url.protocol === "https:" || isDevelopment(c.env) ? { return_url: url.toString() } : {};
}

/**
 * Whether the subscription is the one this session's attempt made: of the session's plan and
 * charging the card the attempt saved (a card saved for this submit only), so a payer cannot
 * complete a subscription session with an earlier subscription's payment.
 */
async function isAttemptSubscription(c: Context<AppEnv>, found: Found, subscriptionId: string): Promise<boolean> {
  const { row } = found;
  if (!row.attemptPaymentMethodId || !hasPrefix(subscriptionId, "subscription")) return false;
  const read = await callApi(appOf(c), c, pageAuth(found), "GET", `/subscriptions/${encodeURIComponent(subscriptionId)}`);
  return read.status === 200 && read.body?.plan_id === row.planId && read.body?.user_id === row.userId && read.body?.payment_method === row.attemptPaymentMethodId;
}

/**
 * The return from a 3-D Secure challenge (?payment_id=…): the payment, read through the API, is
 * this session's; completed, the session is finished as a submit finishes it; failed, the form
 * shows why; still waiting, the form says so.
 */
async function returned(c: Context<AppEnv>, found: Found, paymentId: string) {
  const { row } = found;
  if (!hasPrefix(paymentId, "payment")) return formPage(c, found, 400, "The payment could not be confirmed. Try again.");
  const read = await callApi(appOf(c), c, pageAuth(found), "GET", `/payments/${encodeURIComponent(paymentId)}`);
  const payment = read.body;
  const ours =
    read.status === 200 &&
    payment.user_id === row.userId &&
    (row.mode === "payment"
      ? payment.metadata?.checkout_session_id === row.id && payment.amount === row.amount && payment.currency === row.currency
      : row.mode === "subscription" && typeof payment.subscription_id === "string" && (await isAttemptSubscription(c, found, payment.subscription_id)));
  if (!ours) return row.status === "open" ? formPage(c, found, 400, "The payment could not be confirmed. Try again.") : closedPage(c, found);
  // Expired while the payer was at the challenge: a success still completes it (the money moved);
  // anything else finds the session closed.
  if (row.status !== "open" && payment.status !== "completed") return closedPage(c, found);
  if (payment.status === "completed") {
    return finish(c, found, { paymentId: payment.id, subscriptionId: row.mode === "subscription" ? payment.subscription_id : null, paymentMethodId: payment.payment_method_id ?? row.attemptPaymentMethodId ?? "" });
  }
  if (payment.status === "failed" || payment.status === "canceled") {
    await endDeclinedAttempt(dbOf(c.env, found.shard), row.id, row.attempt);
    return formPage(c, found, 402, payment.failure_message ?? "The card was not authenticated. Try again or use another card.");
  }
  return formPage(c, found, 409, "The payment still waits for authentication. Try again.");
}

/**
 * The return from a setup session's 3-D Secure (?setup_intent=seti_…): the card is saved from the
 * SetupIntent (the API checks it is this user's Customer's and succeeded), under one key per
 * SetupIntent, so a reload or Stripe's event saves it once; then the session is finished.
 */
async function returnedFromSetup(c: Context<AppEnv>, found: Found, setupIntent: string) {
  const { row } = found;
  if (row.mode !== "setup" || !/^seti_[A-Za-z0-9]{1,200}$/.test(setupIntent)) return formPage(c, found, 400, "The card could not be confirmed. Try again.");
  if (row.status !== "open") return closedPage(c, found);
  const saved = await callApi(appOf(c), c, pageAuth(found), "POST", `/api/users/${encodeURIComponent(row.userId)}/payment-methods`, { processor_token: setupIntent }, setupReturnKey(row, setupIntent));
  if (saved.status === 201) return finish(c, found, { paymentId: null, subscriptionId: null, paymentMethodId: saved.body.id as string });
  if (saved.body?.error?.code === "authentication_required") return formPage(c, found, 409, "Your bank's check is not finished. Try again.");
  return formPage(c, found, saved.status === 402 ? 402 : saved.status >= 500 ? 500 : 400, errorMessage(saved));
}

/**
 * Stripe's setup_intent.succeeded for a setup session's SetupIntent (the payer authenticated and
 * never came back to the page): the card is saved and the session completed, exactly as the
 * return does, under the same Idempotency-Key, so whichever comes first applies and the other
 * finds it done. The session must be this account's, live, in setup mode and the event's user's;
 * the SetupIntent is read back at Stripe by the save (the user's Customer's, succeeded), so an
 * event about anything else saves nothing. Answers what became of it.
 */
export async function settleSetupIntentEvent(app: InProcessApp, c: Context<AppEnv>, accountId: string, event: { checkoutSession: string; user: string; processorObject: string }): Promise<"applied" | "unchanged" | "ignored"> {
  const found = await findSession(c.env, event.checkoutSession);
  if (!found || found.row.accountId !== accountId || !found.row.livemode || found.row.mode !== "setup" || found.row.userId !== event.user) return "ignored";
  if (found.row.status !== "open") return "unchanged";
  const { row } = found;
  const saved = await callApi(app, c, pageAuth(found), "POST", `/api/users/${encodeURIComponent(row.userId)}/payment-methods`, { processor_token: event.processorObject }, setupReturnKey(row, event.processorObject));
  if (saved.status !== 201) {
    // Not this user's Customer's, or not succeeded at Stripe: nothing saved. A server error, or the
    // page's return saving it at this moment (409 under the same key), is thrown: Stripe sends it again.
    if (saved.status >= 500 || saved.status === 409) throw new Error(`saving the card of SetupIntent ${event.processorObject} failed (${saved.status})`);
    return "ignored";
  }
  const env = shardEnv(c.env, found.shard);
  const completed = await completeCheckoutSession({ db: dbOf(c.env, found.shard), queue: env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) }, row, { paymentId: null, subscriptionId: null, paymentMethodId: saved.body.id as string }, clock.now());
  return completed ? "applied" : "unchanged";
}

// ---------------------------------------------------------------------------------------------
// Routes

/** The session of the URL if its secret is right (constant time), else null: one 404 for both. */
async function sessionOfUrl(c: Context<AppEnv>): Promise<Found | null> {
  const found = await findSession(c.env, c.req.param("id") ?? "");
  if (!found || !pageSecretMatches(found.row.pageSecret, c.req.param("secret"))) return null;
  return found;
}

/** Every page answer goes through here: an error becomes a page, never JSON, and never repeats what was typed. */
async function asPage(c: Context<AppEnv>, work: () => Promise<Response>): Promise<Response> {
  try {
    return await work();
  } catch (error) {
    console.error(JSON.stringify({ request_id: c.get("requestId") ?? null, message: "checkout page failed", error: error instanceof Error ? error.name : "unknown" }));
    return messagePage(c, 500, "Something went wrong", "The checkout could not be shown. Nothing was charged by this page; try again in a moment.");
  }
}

export function registerCheckoutPage(app: OpenAPIHono<AppEnv>) {
  const withApp = (c: Context<AppEnv>) => Object.assign(c, { [APP]: app as InProcessApp });

  app.get(CHECKOUT_SCRIPT_PATH, (c) =>
    c.body(CHECKOUT_SCRIPT, 200, { "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff" }),
  );

  app.get("/pay/checkout/:id/:secret", (c) =>
    asPage(c, async () => {
      const found = await sessionOfUrl(c);
      if (!found) return notFoundPage(c);
      if (!isPayable(found.row, clock.now())) return closedPage(c, found);
      return formPage(c, found, 200);
    }),
  );

  app.post("/pay/checkout/:id/:secret", (c) =>
    asPage(c, async () => {
      withApp(c);
      if (crossSite(c)) return messagePage(c, 400, "Refused", "This form was sent from another site.");
      const found = await sessionOfUrl(c);
      if (!found) return notFoundPage(c);
      if (found.row.status === "complete") return redirectTo(c, successUrlOf(found.row));
      if (!isPayable(found.row, clock.now())) return closedPage(c, found);
      const form = (await c.req.parseBody()) as Record<string, unknown>;
      return submit(c, found, form);
    }),
  );

  app.get("/pay/checkout/:id/:secret/return", (c) =>
    asPage(c, async () => {
      withApp(c);
      const found = await sessionOfUrl(c);
      if (!found) return notFoundPage(c);
      if (found.row.status === "complete") return redirectTo(c, successUrlOf(found.row));
      // An expired session still takes the return of a payment that succeeded (see returned).
      if (found.row.status !== "open" && found.row.status !== "expired") return closedPage(c, found);
      const setupIntent = c.req.query("setup_intent");
      if (setupIntent !== undefined) return returnedFromSetup(c, found, setupIntent);
      return returned(c, found, c.req.query("payment_id") ?? "");
    }),
  );
}
