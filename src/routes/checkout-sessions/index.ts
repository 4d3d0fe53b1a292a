// Hosted checkout sessions (src/payments/checkout.ts; the page is src/pages/checkout.tsx): create,
// list and read. Creating one checks everything the page will need (the user, the plan, the
// amount, the URLs) so that the payer never meets a session that cannot be paid.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import type { AppEnv } from "../../context";
import { checkoutSessions, plans, users } from "../../db/schema";
import { owned } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { isDevelopment } from "../../env";
import { clock, isoTime } from "../../lib/clock";
import { conflict, invalidRequest, notFound } from "../../lib/errors";
import { CHECKOUT_SESSION_LIFETIME_MS, CHECKOUT_SESSION_NOT_OPEN, type CheckoutSessionRow, attemptPaymentOf, checkRedirectUrl, completeCheckoutSession, expiryWrites, serializeCheckoutSession } from "../../payments/checkout";
import { readCurrency } from "../../payments/money-input";
import { newPageSecret } from "../../pages/hosted";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { listSchema } from "../pagination";
import { listOwned, readById, withLiveKeyAll } from "../reads";
import { commitAndRespond } from "../write-path";
import { CheckoutSessionListQuery, CheckoutSessionSchema, CreateCheckoutSessionBody } from "./schema";

const tags = ["Checkout sessions"];

const create = apiRoute({
  method: "post",
  path: "/checkout/sessions",
  tags,
  operationId: "createCheckoutSession",
  summary: "Create a hosted checkout session",
  description:
    "A page Tender hosts where the user pays: send the payer to the answer's url (it carries its own secret, no API key). mode payment charges amount in currency once (a one-off payment, captured at once); mode subscription subscribes the user to plan_id with the card typed there; mode setup only saves the card. " +
    "The page makes the payment method, then the payment or the subscription, marks the session complete (payment_id, subscription_id, payment_method_id), emits checkout.session.completed and redirects to success_url ({CHECKOUT_SESSION_ID} replaced); a decline is shown on the page, which stays open. Unused after 24 hours it is expired (checkout.session.expired). " +
    "The page acts as the key that created the session: revoking that key stops its open sessions. success_url and cancel_url must be https (http://localhost and http://127.0.0.1 in development only). A user or plan of another account or mode answers 404.",
  scope: "checkout_sessions:write",
  request: jsonBodyOf(CreateCheckoutSessionBody),
  responses: { 201: json(CheckoutSessionSchema, "The open session, with its url.") },
});

const list = apiRoute({
  method: "get",
  path: "/checkout/sessions",
  tags,
  operationId: "listCheckoutSessions",
  summary: "List checkout sessions",
  description: "Checkout sessions, newest first, optionally one user's or in one status.",
  scope: "checkout_sessions:read",
  request: { query: CheckoutSessionListQuery },
  responses: { 200: json(listSchema(CheckoutSessionSchema, "CheckoutSessionList"), "A page of checkout sessions, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/checkout/sessions/{id}",
  tags,
  operationId: "getCheckoutSession",
  summary: "Read a checkout session",
  scope: "checkout_sessions:read",
  request: { params: idParam("checkout session", "cs_01jd2x4k5m6n7p8q9r0s1t2v3w") },
  responses: { 200: json(CheckoutSessionSchema, "The checkout session.") },
});

const expire = apiRoute({
  method: "post",
  path: "/checkout/sessions/{id}/expire",
  tags,
  operationId: "expireCheckoutSession",
  summary: "Expire a checkout session",
  description:
    "Expires an open session now, as Stripe's expire does: its page takes no card any more, and checkout.session.expired is sent. A complete or expired session answers 409 checkout_session_not_open (naming its status); a session whose payment is being made on its page at this moment, or waits for the payer's 3-D Secure (cancel that payment first), answers 409 checkout_session_in_progress; one whose payment succeeded while its payer never came back is completed, and answers 409 checkout_session_not_open.",
  scope: "checkout_sessions:write",
  request: { params: idParam("checkout session", "cs_01jd2x4k5m6n7p8q9r0s1t2v3w") },
  responses: { 200: json(CheckoutSessionSchema, "The expired session.") },
});

/** A field given in a mode that does not take it. */
const unexpected = (field: string, mode: string) => invalidRequest("parameter_unexpected", `${field}: a ${mode} session takes no ${field}.`, field);
const missing = (field: string, mode: string) => invalidRequest("parameter_missing", `${field} is required in ${mode} mode.`, field);

export function registerCheckoutSessions(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createCheckoutSession(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const { mode } = body;
    // The fields each mode takes, named when missing or out of place.
    if (mode === "payment") {
      if (body.amount === undefined) throw missing("amount", mode);
      if (body.currency === undefined) throw missing("currency", mode);
      if (body.plan_id !== undefined) throw unexpected("plan_id", mode);
    } else {
      if (body.amount !== undefined) throw unexpected("amount", mode);
      if (body.currency !== undefined) throw unexpected("currency", mode);
      if (mode === "subscription" && body.plan_id === undefined) throw missing("plan_id", mode);
      if (mode === "setup" && body.plan_id !== undefined) throw unexpected("plan_id", mode);
    }
    const currency = body.currency === undefined ? null : readCurrency(body.currency);
    const development = isDevelopment(c.env);
    const redirect = (field: "success_url" | "cancel_url") => {
      const checked = checkRedirectUrl(body[field], development);
      if (!checked.ok) throw invalidRequest("url_invalid", `${field} ${checked.message}.`, field);
      return checked.url;
    };
    const successUrl = redirect("success_url");
    const cancelUrl = redirect("cancel_url");
    if (!hasPrefix(body.user_id, "user")) throw notFound("user", body.user_id, "user_id");
    if (body.plan_id !== undefined && !hasPrefix(body.plan_id, "plan")) throw notFound("plan", body.plan_id, "plan_id");
    const [userRows, planRows] = await withLiveKeyAll<[{ id: string }[], (typeof plans.$inferSelect)[]]>(c, [
      db.select({ id: users.id }).from(users).where(owned(users, auth, eq(users.id, body.user_id))).limit(1),
      db.select().from(plans).where(owned(plans, auth, eq(plans.id, body.plan_id ?? ""))).limit(1),
    ]);
    if (userRows.length === 0) throw notFound("user", body.user_id, "user_id");
    const plan = planRows[0];
    if (body.plan_id !== undefined && !plan) throw notFound("plan", body.plan_id, "plan_id");
    if (plan && !plan.active) throw invalidRequest("plan_inactive", `Plan ${plan.id} is archived and accepts no new subscriptions.`, "plan_id");

    const row: CheckoutSessionRow = {
      id: newId("checkoutSession", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      keyId: auth.keyId,
      pageSecret: newPageSecret(),
      mode,
      status: "open",
      userId: body.user_id,
      planId: plan?.id ?? null,
      amount: body.amount ?? null,
      currency: plan?.currency ?? currency,
      successUrl,
      cancelUrl,
      metadata: body.metadata ?? null,
      expiresAt: isoTime(now + CHECKOUT_SESSION_LIFETIME_MS),
      paymentId: null,
      subscriptionId: null,
      paymentMethodId: null,
      attempt: 0,
      submitUntil: null,
      attemptPaymentMethodId: null,
      createdAt: isoTime(now),
      completedAt: null,
      expiredAt: null,
    };
    return commitAndRespond(c, { statements: [db.insert(checkoutSessions).values(row)] }, 201, serializeCheckoutSession(row, new URL(c.req.url).origin));
  });

  app.openapi(expire, async function expireCheckoutSession(c) {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const now = clock.now();
    const row = await readById(c, checkoutSessions, id, "checkout session");
    if (row.status !== "open") throw conflict("checkout_session_not_open", `Checkout session ${id} is ${row.status}: only an open session can be expired.`);
    const inProgress = () => conflict("checkout_session_in_progress", `Checkout session ${id} is being paid on its page at this moment: nothing was changed. Read it again in a minute.`);
    if (row.submitUntil !== null && row.submitUntil > now) throw inProgress();
    // Its payment waits for the payer's 3-D Secure: cancel that first. Succeeded while the payer never
    // came back to the page: the session is paid, and is completed now.
    const attempt = await attemptPaymentOf(db, row);
    if (attempt?.status === "requires_action") {
      throw conflict("checkout_session_in_progress", `Checkout session ${id}'s payment ${attempt.id} waits for the payer to authenticate (3-D Secure): cancel it (POST /payments/${attempt.id}/cancel), then expire the session.`);
    }
    if (attempt?.status === "completed") {
      await completeCheckoutSession({ db, queue: c.env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) }, row, { paymentId: attempt.id, subscriptionId: null, paymentMethodId: attempt.paymentMethodId ?? row.attemptPaymentMethodId ?? "" }, now);
      throw conflict("checkout_session_not_open", `Checkout session ${id} is complete: its payment ${attempt.id} succeeded.`);
    }
    const writes = expiryWrites(db, row, now);
    return commitAndRespond(c, { statements: writes.statements, events: writes.events }, 200, serializeCheckoutSession(writes.row, null), {
      failures: { [CHECKOUT_SESSION_NOT_OPEN]: inProgress },
    });
  });

  app.openapi(list, async function listCheckoutSessions(c) {
    const query = c.req.valid("query");
    const origin = new URL(c.req.url).origin;
    const page = await listOwned(c, {
      table: checkoutSessions,
      query,
      filters: [
        [checkoutSessions.userId, query.user_id],
        [checkoutSessions.status, query.status],
      ],
      validCursor: (id) => hasPrefix(id, "checkoutSession"),
      serialize: (row) => serializeCheckoutSession(row, origin),
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getCheckoutSession(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, checkoutSessions, id, "checkout session");
    return c.json(serializeCheckoutSession(row, new URL(c.req.url).origin), 200);
  });
}
