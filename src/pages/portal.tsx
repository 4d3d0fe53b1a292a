// The customer portal (POST /portal/sessions answers its url): where a user sees their
// subscriptions, invoices and saved cards, and acts on them. src/pages/portal-links.ts holds the
// session's answer and path; src/routes/portal-sessions the API.
//
// Like the checkout page, the portal carries no API key: it acts through the API's own routes, in
// process, as the key that created the session (src/pages/in-process.ts), with only the scopes it
// needs, and always for the session's user. Each action is the ordinary API action with its
// ordinary events: adding a card is POST /api/users/{id}/payment-methods (payment_method.attached),
// removing one DELETE …/payment-methods/{pm_id} (payment_method.detached; refused while a
// subscription charges it), making one the default POST …/payment-methods/{pm_id}/default
// (customer.updated) and then PUT /subscriptions/{id} with payment_method for each of the user's
// subscriptions that charges another card (subscription_updated), and canceling DELETE
// /subscriptions/{id}?at_period_end=true (subscription_updated).
//
// Forms. Every action is a same-origin POST to a path that carries the session's secret, so a
// site that does not know the secret cannot make one, and a form posted from another site is
// refused (Origin, Sec-Fetch-Site) as on the checkout page. Each page render puts a fresh
// `action_key` in its forms; the action's Idempotency-Key is made of the session, the action, its
// object and that key, so a double submit of one form is one action (the second waits for the
// first and answers as it did), while the same action chosen again later is a new one.
import type { Context } from "hono";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, inArray } from "drizzle-orm";
import type { AppEnv, Auth } from "../context";
import { createDb } from "../db/client";
import { accounts, plans, portalSessions } from "../db/schema";
import { findOnAnyShard, shardEnv } from "../db/shards";
import { livesHere } from "../db/scope";
import { CURRENT_API_VERSION } from "../domain/api-versions";
import { hasPrefix } from "../domain/ids";
import { formatMoney } from "../domain/money";
import { clock } from "../lib/clock";
import { randomToken } from "../lib/crypto";
import { chargeableAmount } from "../billing/pricing";
import { CHECKOUT_SCRIPT_PATH, CardFields, readForm, readToken } from "./card-form";
import { HostedLayout, hostedHeaders, pageSecretMatches, publishableKeyOf, stripeJsUrl } from "./hosted";
import { type ApiAnswer, type InProcessApp, apiResponse, callApi, crossSite } from "./in-process";
import { type PortalSessionRow, portalPagePath } from "./portal-links";

type PlanRow = typeof plans.$inferSelect;

interface Found {
  row: PortalSessionRow;
  shard: number;
  merchant: string;
  /** Live mode: the connection's publishable key, for Stripe.js (null without one). */
  publishableKey: string | null;
}

/** How long a second submit of one form waits for the first to finish before it says so. */
const WAIT_FOR_OTHER_SUBMIT_MS = 10_000;
const WAIT_STEP_MS = 400;
const SECRET = /^[0-9A-Za-z]{40}$/;
const ACTION_KEY = /^[0-9A-Za-z]{16,64}$/;
/** The statuses in which a subscription still charges its card: it can be canceled at period end, and follows a new default card. */
const CHARGING = new Set(["trialing", "active", "past_due"]);

/** The session `id` on whichever shard its account lives (its URL names no shard: it must outlive an account's move). */
async function findSession(env: AppEnv["Bindings"], id: string): Promise<Found | null> {
  if (!hasPrefix(id, "portalSession")) return null;
  return findOnAnyShard(env, async (view) => {
    const db = createDb(view.DB);
    const [hit] = await db
      .select({ row: portalSessions, merchant: accounts.name })
      .from(portalSessions)
      .innerJoin(accounts, eq(accounts.id, portalSessions.accountId))
      .where(and(eq(portalSessions.id, id), livesHere(portalSessions.accountId)))
      .limit(1);
    if (!hit) return null;
    const publishableKey = hit.row.livemode ? await publishableKeyOf(db, hit.row.accountId) : null;
    return { row: hit.row, shard: view.SHARD, merchant: hit.merchant, publishableKey };
  });
}

/** The key the page acts as: the session's creator, with only the scopes the page needs. */
function pageAuth(found: Found): Auth {
  const { row } = found;
  return {
    shard: found.shard,
    accountId: row.accountId,
    keyId: row.keyId,
    mode: row.livemode ? "live" : "test",
    livemode: row.livemode,
    scopes: ["users:read", "payment_methods:write", "subscriptions:write", "invoices:read", "plans:read"],
    credential: "restricted_key",
    apiVersion: CURRENT_API_VERSION,
  };
}

const APP: unique symbol = Symbol("tender.portalApp");
const appOf = (c: Context<AppEnv>) => (c as unknown as { [APP]: InProcessApp })[APP];
const api = (c: Context<AppEnv>, found: Found, method: string, path: string, body?: unknown, idempotencyKey?: string) => callApi(appOf(c), c, pageAuth(found), method, path, body, idempotencyKey);

/** An action's API call; a second submit of the same form (its key still in flight) waits for the first and answers as it did. */
async function act(c: Context<AppEnv>, found: Found, method: string, path: string, body: unknown, idempotencyKey: string): Promise<ApiAnswer> {
  const deadline = Date.now() + WAIT_FOR_OTHER_SUBMIT_MS;
  for (;;) {
    const answer = await api(c, found, method, path, body, idempotencyKey);
    if (answer.status !== 409 || answer.body?.error?.code !== "idempotency_key_in_use" || Date.now() > deadline) return answer;
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
  }
}

const basePath = (found: Found) => portalPagePath(found.row);
const userPath = (found: Found) => `/api/users/${encodeURIComponent(found.row.userId)}`;
const date = (iso: string | null | undefined) => (iso ? iso.slice(0, 10) : "—");
const brandName = (brand: string) => (brand === "amex" ? "American Express" : brand.charAt(0).toUpperCase() + brand.slice(1));
const errorMessage = (answer: ApiAnswer, fallback: string) => (answer.body?.error?.message as string | undefined) ?? fallback;

// ---------------------------------------------------------------------------------------------
// Pages

function messagePage(c: Context<AppEnv>, status: 400 | 404 | 410 | 500, title: string, message: string, back?: string, livemode = false) {
  return c.html(
    <HostedLayout title={title} livemode={livemode}>
      <h1>{title}</h1>
      <p>{message}</p>
      {back ? (
        <p>
          <a href={back}>Back</a>
        </p>
      ) : null}
    </HostedLayout>,
    status,
    hostedHeaders(null),
  );
}

const notFoundPage = (c: Context<AppEnv>) => messagePage(c, 404, "Page not found", "This billing link is not valid. Open it again from the seller's site.");

function expiredPage(c: Context<AppEnv>, found: Found) {
  return c.html(
    <HostedLayout title="Link expired" livemode={found.row.livemode}>
      <h1>This link has expired</h1>
      <p>For your security, a billing link works for one hour. Open it again from {found.merchant}'s site.</p>
      <p>
        <a href={found.row.returnUrl}>Return to {found.merchant}</a>
      </p>
    </HostedLayout>,
    410,
    hostedHeaders(null),
  );
}

interface Overview {
  user: { id: string; name: string; email: string; default_payment_method: string | null };
  subscriptions: any[];
  invoices: any[];
  paymentMethods: any[];
  plans: Map<string, PlanRow>;
}

/** What the overview shows, read through the API as the session's key; null when the user (or the key) is gone. */
async function loadOverview(c: Context<AppEnv>, found: Found): Promise<Overview | null> {
  const user = encodeURIComponent(found.row.userId);
  const [read, subs, invoices, methods] = await Promise.all([
    api(c, found, "GET", `/api/users/${user}`),
    api(c, found, "GET", `/subscriptions?user_id=${user}&limit=100`),
    api(c, found, "GET", `/invoices?user_id=${user}&limit=100`),
    api(c, found, "GET", `/api/users/${user}/payment-methods?limit=100`),
  ]);
  if (read.status === 404 || read.status === 401) return null;
  for (const answer of [read, subs, invoices, methods]) if (answer.status !== 200) throw new Error(`portal read answered ${answer.status}`);
  const subscriptions = (subs.body.data as any[]).filter((s) => s.status !== "canceled" && s.status !== "incomplete_expired");
  const planIds = [...new Set(subscriptions.map((s) => s.plan_id as string))].slice(0, 90);
  const db = createDb(shardEnv(c.env, found.shard).DB);
  const planRows = planIds.length ? await db.select().from(plans).where(and(eq(plans.accountId, found.row.accountId), inArray(plans.id, planIds))) : [];
  return {
    user: read.body,
    subscriptions,
    invoices: (invoices.body.data as any[]).filter((i) => i.status !== "draft"),
    paymentMethods: methods.body.data,
    plans: new Map(planRows.map((p) => [p.id, p])),
  };
}

const NOTICES: Record<string, string> = {
  added: "Your card was added.",
  default: "Your default card was changed.",
  removed: "The card was removed.",
  canceled: "Your subscription will be canceled at the end of its period.",
};

function SubscriptionItem({ sub, plan, base }: { sub: any; plan: PlanRow | undefined; base: string }) {
  const price = plan && plan.usageType !== "metered" ? formatMoney(chargeableAmount(plan, sub.quantity), plan.currency) : null;
  return (
    <div class="item" data-subscription={sub.id}>
      <div class="line">
        <strong>
          {plan?.name ?? sub.plan_id}
          {sub.quantity > 1 ? ` × ${sub.quantity}` : ""}
        </strong>
        <span>{price === null ? "Billed by usage" : `${price} per ${plan?.interval ?? "period"}`}</span>
      </div>
      <div class="muted">
        <span data-status={sub.status}>{sub.status === "past_due" ? "Past due" : sub.status === "trialing" ? "Trial" : sub.status === "active" ? "Active" : sub.status}</span>
        {" · "}
        {sub.cancel_at_period_end ? <span data-cancels>Cancels on {date(sub.next_billing_date)}</span> : sub.next_billing_date ? `Renews on ${date(sub.next_billing_date)}` : null}
        {sub.card?.last4 ? ` · ${brandName(sub.card.brand)} •••• ${sub.card.last4}` : ""}
      </div>
      {CHARGING.has(sub.status) && !sub.cancel_at_period_end ? (
        <div class="actions">
          <a href={`${base}/subscriptions/${sub.id}/cancel`}>Cancel at period end</a>
        </div>
      ) : null}
    </div>
  );
}

function InvoiceItem({ invoice, base }: { invoice: any; base: string }) {
  return (
    <div class="item" data-invoice={invoice.id}>
      <div class="line">
        <strong>{invoice.number ?? invoice.id}</strong>
        <span>{formatMoney(invoice.total, invoice.currency)}</span>
      </div>
      <div class="muted">
        {date(invoice.finalized_at ?? invoice.created_at)} · <span data-status={invoice.status}>{invoice.status === "open" ? "Open" : invoice.status === "paid" ? "Paid" : invoice.status === "void" ? "Void" : invoice.status}</span>
      </div>
      <div class="actions">
        <a href={`${base}/invoices/${invoice.id}/pdf`}>PDF</a>
        {invoice.status === "open" && invoice.hosted_invoice_url ? <a href={invoice.hosted_invoice_url}>Pay this invoice</a> : null}
      </div>
    </div>
  );
}

function CardItem({ method, isDefault, base, actionKey }: { method: any; isDefault: boolean; base: string; actionKey: string }) {
  return (
    <div class="item" data-payment-method={method.id}>
      <div class="line">
        <span>
          <strong>
            {brandName(method.card.brand)} •••• {method.card.last4}
          </strong>
          {isDefault ? <span class="badge">Default</span> : null}
        </span>
        <span class="muted">
          Expires {String(method.card.exp_month).padStart(2, "0")}/{method.card.exp_year}
        </span>
      </div>
      <div class="actions">
        {isDefault ? null : (
          <form method="post" action={`${base}/payment-methods/${method.id}/default`}>
            <input type="hidden" name="action_key" value={actionKey} />
            <button type="submit" class="secondary">
              Make default
            </button>
          </form>
        )}
        <form method="post" action={`${base}/payment-methods/${method.id}/remove`}>
          <input type="hidden" name="action_key" value={actionKey} />
          <button type="submit" class="secondary">
            Remove
          </button>
        </form>
      </div>
    </div>
  );
}

function OverviewPage({ found, data, notice, error }: { found: Found; data: Overview; notice?: string; error?: string }) {
  const base = basePath(found);
  const actionKey = randomToken(24);
  return (
    <HostedLayout title={`Billing · ${found.merchant}`} livemode={found.row.livemode} wide>
      <p class="muted">{found.merchant}</p>
      <h1>Your billing</h1>
      <p class="muted">
        {data.user.name} · {data.user.email}
      </p>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
      <h2>Subscriptions</h2>
      {data.subscriptions.length === 0 ? <p class="muted">No subscriptions.</p> : data.subscriptions.map((sub) => <SubscriptionItem sub={sub} plan={data.plans.get(sub.plan_id)} base={base} />)}
      <h2>Payment methods</h2>
      {data.paymentMethods.length === 0 ? (
        <p class="muted">No saved cards.</p>
      ) : (
        data.paymentMethods.map((method) => <CardItem method={method} isDefault={method.id === data.user.default_payment_method} base={base} actionKey={actionKey} />)
      )}
      <div class="actions">
        <a href={`${base}/payment-methods/new`}>Add a card</a>
      </div>
      <h2>Invoices</h2>
      {data.invoices.length === 0 ? <p class="muted">No invoices yet.</p> : data.invoices.map((invoice) => <InvoiceItem invoice={invoice} base={base} />)}
      <p>
        <a href={found.row.returnUrl}>Return to {found.merchant}</a>
      </p>
    </HostedLayout>
  );
}

type PageStatus = 200 | 400 | 402 | 404 | 409 | 500 | 503;

async function overview(c: Context<AppEnv>, found: Found, status: PageStatus = 200, error?: string) {
  const data = await loadOverview(c, found);
  if (!data) return notFoundPage(c);
  const notice = status === 200 ? NOTICES[c.req.query("done") ?? ""] : undefined;
  return c.html(<OverviewPage found={found} data={data} notice={notice} error={error} />, status, hostedHeaders(null));
}

/** The add-a-card page: Tender's card form in test mode, Stripe's Payment Element (a SetupIntent) in live mode. */
function addCardPage(c: Context<AppEnv>, found: Found, status: PageStatus = 200, message?: string, name?: string) {
  const base = basePath(found);
  const actionKey = randomToken(24);
  if (found.row.livemode) {
    if (!found.publishableKey) return messagePage(c, 400, "Cards unavailable", "This seller's live payments are not set up yet: no card can be added here.", base, true);
    const stripeJs = stripeJsUrl(c.env);
    return c.html(
      <HostedLayout title={`Add a card · ${found.merchant}`} livemode scripts={[stripeJs, CHECKOUT_SCRIPT_PATH]}>
        <p class="muted">{found.merchant}</p>
        <h1>Add a card</h1>
        <p class="error" role="alert" id="checkout-error">
          {message ?? ""}
        </p>
        <form method="post" action={`${base}/payment-methods`} id="checkout-form" data-publishable-key={found.publishableKey} data-mode="setup" data-amount="" data-currency="" data-client-secret="" data-return-url="">
          <div id="payment-element"></div>
          <input type="hidden" name="processor_token" id="processor_token" value="" />
          <input type="hidden" name="action_key" value={actionKey} />
          <button type="submit">Save card</button>
        </form>
        <p>
          <a href={base}>Back</a>
        </p>
      </HostedLayout>,
      status,
      hostedHeaders(stripeJs),
    );
  }
  return c.html(
    <HostedLayout title={`Add a card · ${found.merchant}`} livemode={false}>
      <p class="muted">{found.merchant}</p>
      <h1>Add a card</h1>
      {message ? (
        <p class="error" role="alert">
          {message}
        </p>
      ) : null}
      <form method="post" action={`${base}/payment-methods`} autocomplete="on">
        <CardFields name={name} />
        <input type="hidden" name="action_key" value={actionKey} />
        <button type="submit">Save card</button>
      </form>
      <p>
        <a href={base}>Back</a>
      </p>
    </HostedLayout>,
    status,
    hostedHeaders(null),
  );
}

// ---------------------------------------------------------------------------------------------
// Actions

const redirectTo = (c: Context<AppEnv>, url: string) => c.body(null, 303, { Location: url, ...hostedHeaders(null) });
const done = (c: Context<AppEnv>, found: Found, what: keyof typeof NOTICES) => redirectTo(c, `${basePath(found)}?done=${what}`);

/** The form's action_key (a fresh one when it is missing or malformed: that submit is then not deduplicated). */
function actionKeyOf(form: Record<string, unknown>): string {
  const key = typeof form.action_key === "string" ? form.action_key : "";
  return ACTION_KEY.test(key) ? key : randomToken(24);
}

const idempotencyKey = (found: Found, action: string, object: string, actionKey: string) => `portal:${found.row.id}:${action}:${object}:${actionKey}`;

/** The subscription `id` if it is the session user's (read through the API), else null: another user's answers as an unknown one. */
async function usersSubscription(c: Context<AppEnv>, found: Found, id: string): Promise<any | null> {
  if (!hasPrefix(id, "subscription")) return null;
  const read = await api(c, found, "GET", `/subscriptions/${encodeURIComponent(id)}`);
  return read.status === 200 && read.body.user_id === found.row.userId ? read.body : null;
}

function cancelConfirmPage(c: Context<AppEnv>, found: Found, sub: any, plan: PlanRow | undefined) {
  const base = basePath(found);
  const actionKey = randomToken(24);
  return c.html(
    <HostedLayout title={`Cancel subscription · ${found.merchant}`} livemode={found.row.livemode}>
      <p class="muted">{found.merchant}</p>
      <h1>Cancel {plan?.name ?? "this subscription"}?</h1>
      <p>
        It stays active until the end of the current period, on {date(sub.next_billing_date)}, and is then canceled: nothing more is charged for it after that date.
      </p>
      <form method="post" action={`${base}/subscriptions/${sub.id}/cancel`}>
        <input type="hidden" name="action_key" value={actionKey} />
        <button type="submit">Cancel at period end</button>
      </form>
      <p>
        <a href={base}>Keep my subscription</a>
      </p>
    </HostedLayout>,
    200,
    hostedHeaders(null),
  );
}

async function cancelAtPeriodEnd(c: Context<AppEnv>, found: Found, id: string, form: Record<string, unknown>) {
  const sub = await usersSubscription(c, found, id);
  if (!sub) return messagePage(c, 404, "Subscription not found", "This subscription is not one of yours.", basePath(found), found.row.livemode);
  const answer = await act(c, found, "DELETE", `/subscriptions/${encodeURIComponent(id)}?at_period_end=true`, undefined, idempotencyKey(found, "cancel", id, actionKeyOf(form)));
  if (answer.status === 200) return done(c, found, "canceled");
  return overview(c, found, answer.status === 409 ? 409 : answer.status >= 500 ? 500 : 400, errorMessage(answer, "The subscription could not be canceled. Try again in a moment."));
}

async function removeCard(c: Context<AppEnv>, found: Found, id: string, form: Record<string, unknown>) {
  const answer = await act(c, found, "DELETE", `${userPath(found)}/payment-methods/${encodeURIComponent(id)}`, undefined, idempotencyKey(found, "remove", id, actionKeyOf(form)));
  if (answer.status === 200) return done(c, found, "removed");
  if (answer.status === 404) return messagePage(c, 404, "Card not found", "This card is not one of yours.", basePath(found), found.row.livemode);
  if (answer.body?.error?.code === "payment_method_in_use") {
    return overview(c, found, 409, "This card pays for a subscription that is still running, so it cannot be removed. Add another card and make it the default first (or cancel the subscription), then remove this one.");
  }
  return overview(c, found, answer.status === 409 ? 409 : answer.status >= 500 ? 500 : 400, errorMessage(answer, "The card could not be removed. Try again in a moment."));
}

/**
 * Makes the card the user's default (customer.updated), then moves each of the user's subscriptions
 * that still charges another card onto it (PUT /subscriptions/{id}, subscription_updated): what a
 * customer means by "use this card from now on". A past_due subscription's new card is charged at
 * once for its unpaid period, as the API does.
 */
async function makeDefault(c: Context<AppEnv>, found: Found, id: string, form: Record<string, unknown>) {
  const actionKey = actionKeyOf(form);
  const set = await act(c, found, "POST", `${userPath(found)}/payment-methods/${encodeURIComponent(id)}/default`, undefined, idempotencyKey(found, "default", id, actionKey));
  if (set.status === 404) return messagePage(c, 404, "Card not found", "This card is not one of yours.", basePath(found), found.row.livemode);
  if (set.status !== 200) return overview(c, found, set.status >= 500 ? 500 : 400, errorMessage(set, "The card could not be made the default. Try again in a moment."));
  const subs = await api(c, found, "GET", `/subscriptions?user_id=${encodeURIComponent(found.row.userId)}&limit=100`);
  if (subs.status !== 200) throw new Error(`portal read answered ${subs.status}`);
  const failed: string[] = [];
  for (const sub of subs.body.data as any[]) {
    if (!CHARGING.has(sub.status) || sub.payment_method === id) continue;
    const moved = await act(c, found, "PUT", `/subscriptions/${encodeURIComponent(sub.id)}`, { payment_method: id }, idempotencyKey(found, "move", `${sub.id}:${id}`, actionKey));
    if (moved.status !== 200) failed.push(errorMessage(moved, `Subscription ${sub.id} still charges its former card.`));
  }
  if (failed.length > 0) return overview(c, found, 409, `The card is your default, but not every subscription could move to it: ${failed.join(" ")}`);
  return done(c, found, "default");
}

async function addCard(c: Context<AppEnv>, found: Found, form: Record<string, unknown>) {
  const input = found.row.livemode ? readToken(form, ["action_key"]) : readForm(form);
  if (!input.ok) return addCardPage(c, found, 400, input.message, input.name);
  const saved = await act(c, found, "POST", `${userPath(found)}/payment-methods`, input.card, idempotencyKey(found, "add", "card", actionKeyOf(form)));
  if (saved.status === 201) return done(c, found, "added");
  if (saved.body?.error?.code === "authentication_required") return addCardPage(c, found, 402, "Your bank asks you to confirm this card, which this page cannot do yet: try another card, or add it at the seller's checkout.");
  return addCardPage(c, found, saved.status === 402 ? 402 : saved.status >= 500 ? 500 : 400, errorMessage(saved, "The card could not be saved."), input.name);
}

async function invoicePdf(c: Context<AppEnv>, found: Found, id: string) {
  const missing = () => messagePage(c, 404, "Invoice not found", "This invoice is not one of yours.", basePath(found), found.row.livemode);
  if (!hasPrefix(id, "invoice")) return missing();
  const read = await api(c, found, "GET", `/invoices/${encodeURIComponent(id)}`);
  if (read.status !== 200 || read.body.user_id !== found.row.userId || read.body.status === "draft") return missing();
  const pdf = await apiResponse(appOf(c), c, pageAuth(found), "GET", `/invoices/${encodeURIComponent(id)}/pdf`);
  if (pdf.status !== 200) return missing();
  return c.body(await pdf.arrayBuffer(), 200, {
    ...hostedHeaders(null),
    "Content-Type": "application/pdf",
    "Content-Disposition": pdf.headers.get("content-disposition") ?? `inline; filename="${id}.pdf"`,
  });
}

// ---------------------------------------------------------------------------------------------
// Routes

/** The session of the URL if its secret is right (constant time), else null: one 404 for both. */
async function sessionOfUrl(c: Context<AppEnv>): Promise<Found | null> {
  const secret = c.req.param("secret") ?? "";
  if (!SECRET.test(secret)) return null;
  const found = await findSession(c.env, c.req.param("id") ?? "");
  if (!found || !pageSecretMatches(found.row.pageSecret, secret)) return null;
  return found;
}

/** Every answer goes through here: the session checked (404, 410), an error a page (never JSON, never what was typed). */
function portalRoute(app: OpenAPIHono<AppEnv>, post: boolean, work: (c: Context<AppEnv>, found: Found) => Promise<Response>) {
  return async (c: Context<AppEnv>) => {
    try {
      Object.assign(c, { [APP]: app as InProcessApp });
      if (post && crossSite(c)) return messagePage(c, 400, "Refused", "This form was sent from another site.");
      const found = await sessionOfUrl(c);
      if (!found) return notFoundPage(c);
      if (Date.parse(found.row.expiresAt) <= clock.now()) return expiredPage(c, found);
      return await work(c, found);
    } catch (error) {
      console.error(JSON.stringify({ request_id: c.get("requestId") ?? null, message: "customer portal failed", error: error instanceof Error ? error.name : "unknown" }));
      return messagePage(c, 500, "Something went wrong", "This page could not be shown. Try again in a moment.");
    }
  };
}

const formOf = async (c: Context<AppEnv>) => (await c.req.parseBody()) as Record<string, unknown>;

export function registerPortalPage(app: OpenAPIHono<AppEnv>) {
  const base = "/portal/:id/:secret";
  app.get(base, portalRoute(app, false, (c, found) => overview(c, found)));
  app.get(`${base}/payment-methods/new`, portalRoute(app, false, async (c, found) => addCardPage(c, found)));
  app.post(`${base}/payment-methods`, portalRoute(app, true, async (c, found) => addCard(c, found, await formOf(c))));
  app.post(`${base}/payment-methods/:pm/default`, portalRoute(app, true, async (c, found) => makeDefault(c, found, c.req.param("pm") ?? "", await formOf(c))));
  app.post(`${base}/payment-methods/:pm/remove`, portalRoute(app, true, async (c, found) => removeCard(c, found, c.req.param("pm") ?? "", await formOf(c))));
  app.get(
    `${base}/subscriptions/:sub/cancel`,
    portalRoute(app, false, async (c, found) => {
      const sub = await usersSubscription(c, found, c.req.param("sub") ?? "");
      if (!sub) return messagePage(c, 404, "Subscription not found", "This subscription is not one of yours.", basePath(found), found.row.livemode);
      if (!CHARGING.has(sub.status) || sub.cancel_at_period_end) return redirectTo(c, basePath(found));
      const [plan] = await createDb(shardEnv(c.env, found.shard).DB).select().from(plans).where(and(eq(plans.accountId, found.row.accountId), eq(plans.id, sub.plan_id))).limit(1);
      return cancelConfirmPage(c, found, sub, plan);
    }),
  );
  app.post(`${base}/subscriptions/:sub/cancel`, portalRoute(app, true, async (c, found) => cancelAtPeriodEnd(c, found, c.req.param("sub") ?? "", await formOf(c))));
  app.get(`${base}/invoices/:invoice/pdf`, portalRoute(app, false, (c, found) => invoicePdf(c, found, c.req.param("invoice") ?? "")));
}
