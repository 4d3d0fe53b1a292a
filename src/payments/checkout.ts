// Hosted checkout sessions: what one is (its row and its answer), the URLs it sends the payer to,
// how a page submit holds it, how it is completed (once) and how the cron expires it (once). The
// page itself is src/pages/checkout.tsx; the API is src/routes/checkout-sessions.
//
// Exactly once. A submit holds the session (submit_until, one conditional UPDATE) while it is at
// the processor, so a double click or a second tab waits for the first instead of charging; the
// charge goes under an Idempotency-Key made of the session id and its attempt number, so a submit
// retried after an unknown outcome reaches the processor as the same charge; and the batch that
// completes the session is conditional on its status, so one completion (and one
// checkout.session.completed) is ever recorded. The cron leaves a held session alone.
import { and, asc, eq, lte, sql } from "drizzle-orm";
import { type Db, createDb } from "../db/client";
import { failureReason, guard } from "../db/batch";
import { checkoutSessions, payments } from "../db/schema";
import { livesHere } from "../db/scope";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { commitWrites, emitEvent } from "../webhooks/outbox";
import { isPrivateHost } from "../webhooks/url-policy";

export type CheckoutSessionRow = typeof checkoutSessions.$inferSelect;
export type CheckoutMode = CheckoutSessionRow["mode"];

/** A session is open this long (Stripe's default): then the cron expires it. */
export const CHECKOUT_SESSION_LIFETIME_MS = 24 * 60 * 60 * 1000;
/** How long a page submit holds its session while it is at the processor (the connector's retries fit inside). */
export const CHECKOUT_SUBMIT_HOLD_MS = 2 * 60_000;
/** Sessions one cron run expires per shard at the most; the rest go in the next run. */
export const CHECKOUT_EXPIRY_BATCH = 100;
/** What success_url may carry, replaced by the session's id on the way there (as Stripe's). */
export const SESSION_ID_TEMPLATE = "{CHECKOUT_SESSION_ID}";

/** Where the session's page is: `<origin>/pay/checkout/<id>/<secret>`. */
export const checkoutPagePath = (row: Pick<CheckoutSessionRow, "id" | "pageSecret">) => `/pay/checkout/${row.id}/${row.pageSecret}`;

/** success_url with {CHECKOUT_SESSION_ID} replaced by the session's id. */
export const successUrlOf = (row: Pick<CheckoutSessionRow, "id" | "successUrl">) => row.successUrl.split(SESSION_ID_TEMPLATE).join(row.id);

/** The session as the API answers it; `url` only while it is open (and the origin is known). */
export function serializeCheckoutSession(row: CheckoutSessionRow, origin: string | null) {
  return {
    id: row.id,
    object: "checkout_session" as const,
    url: row.status === "open" && origin ? `${origin}${checkoutPagePath(row)}` : null,
    status: row.status,
    mode: row.mode,
    livemode: row.livemode,
    user_id: row.userId,
    amount: row.amount,
    currency: row.currency,
    plan_id: row.planId,
    metadata: row.metadata ?? {},
    expires_at: row.expiresAt,
    payment_id: row.paymentId,
    subscription_id: row.subscriptionId,
    payment_method_id: row.paymentMethodId,
    success_url: row.successUrl,
    cancel_url: row.cancelUrl,
    created_at: row.createdAt,
    completed_at: row.completedAt,
  };
}

export type CheckoutSessionJson = ReturnType<typeof serializeCheckoutSession>;

/** Whether the session still takes a payment at `now`: open, and not past expires_at (the cron may not have run yet). */
export const isPayable = (row: CheckoutSessionRow, now: number) => row.status === "open" && Date.parse(row.expiresAt) > now;

/** SQL: the session is open and unexpired at `now`. */
const payableSql = (now: number) => sql`${checkoutSessions.status} = 'open' AND ${checkoutSessions.expiresAt} > ${isoTime(now)}`;

/**
 * Holds the session for one submit until `now + CHECKOUT_SUBMIT_HOLD_MS`: one conditional UPDATE,
 * so of two submits at once one holds it. Answers the session as held, or null (held by another
 * submit, or no longer payable).
 */
export async function holdForSubmit(db: Db, id: string, now: number): Promise<CheckoutSessionRow | null> {
  const [row] = await db
    .update(checkoutSessions)
    .set({ submitUntil: now + CHECKOUT_SUBMIT_HOLD_MS })
    .where(and(eq(checkoutSessions.id, id), payableSql(now), sql`(${checkoutSessions.submitUntil} IS NULL OR ${checkoutSessions.submitUntil} <= ${now})`))
    .returning();
  return row ?? null;
}

/** Records the saved card the held attempt charges, before it is charged (see attemptPaymentMethodId). */
export async function recordAttemptCard(db: Db, id: string, attempt: number, paymentMethodId: string): Promise<void> {
  await db
    .update(checkoutSessions)
    .set({ attemptPaymentMethodId: paymentMethodId })
    .where(and(eq(checkoutSessions.id, id), eq(checkoutSessions.attempt, attempt), eq(checkoutSessions.status, "open")));
}

/** A declined attempt: the next submit is a new attempt (a new charge reference, a new card), and the hold is given back. */
export async function endDeclinedAttempt(db: Db, id: string, attempt: number): Promise<void> {
  await db
    .update(checkoutSessions)
    .set({ attempt: attempt + 1, attemptPaymentMethodId: null, submitUntil: null })
    .where(and(eq(checkoutSessions.id, id), eq(checkoutSessions.attempt, attempt), eq(checkoutSessions.status, "open")));
}

/** Gives the hold back (the submit ended without a decision); best effort: it runs out by itself. */
export async function releaseSubmit(db: Db, id: string): Promise<void> {
  await db
    .update(checkoutSessions)
    .set({ submitUntil: null })
    .where(eq(checkoutSessions.id, id))
    .catch((error) => console.error(JSON.stringify({ message: "checkout session hold not released; it runs out by itself", checkout_session: id, error: String(error) })));
}

/** The Idempotency-Key of an attempt's charge (POST /payments or /subscriptions): its processor reference derives from it. */
export const attemptChargeKey = (row: Pick<CheckoutSessionRow, "id" | "attempt">) => `checkout_session:${row.id}:${row.attempt}`;
/** The Idempotency-Key of a submit's saved card (it moves no money: one per submit). */
export const submitCardKey = (row: Pick<CheckoutSessionRow, "id" | "attempt">, nonce: string) => `checkout_session:${row.id}:${row.attempt}:card:${nonce}`;

/** The Idempotency-Key of saving a setup session's card from its SetupIntent (the page's return, or Stripe's setup_intent.succeeded): one per SetupIntent. */
export const setupReturnKey = (row: Pick<CheckoutSessionRow, "id">, setupIntent: string) => `checkout_session:${row.id}:setup_intent:${setupIntent}`;

/** Guard reason: the session was completed (or expired unpaid) before this completion. */
export const CHECKOUT_SESSION_NOT_OPEN = "checkout_session_not_open";

export interface Completion {
  paymentId: string | null;
  subscriptionId: string | null;
  paymentMethodId: string;
}

/**
 * Completes the session with what the page made, and emits checkout.session.completed (data: the
 * session), in one batch conditional on the session being open. A session the cron expired while
 * its payment was at the processor is completed all the same: the money moved, and the session
 * says what it paid. Answers the completed row, or null when another submit completed it first.
 */
export async function completeCheckoutSession(deps: { db: Db; queue: Queue; waitUntil?: (p: Promise<unknown>) => void }, row: CheckoutSessionRow, made: Completion, now: number): Promise<CheckoutSessionRow | null> {
  const { db } = deps;
  const completed: CheckoutSessionRow = {
    ...row,
    status: "complete",
    paymentId: made.paymentId,
    subscriptionId: made.subscriptionId,
    paymentMethodId: made.paymentMethodId,
    completedAt: isoTime(now),
    submitUntil: null,
    attemptPaymentMethodId: null,
  };
  const unfinished = sql`${checkoutSessions.status} IN ('open', 'expired') AND ${checkoutSessions.completedAt} IS NULL`;
  try {
    await commitWrites(deps, {
      statements: [
        guard(db, CHECKOUT_SESSION_NOT_OPEN, sql`EXISTS (SELECT 1 FROM ${checkoutSessions} WHERE ${checkoutSessions.id} = ${row.id} AND ${unfinished})`),
        db
          .update(checkoutSessions)
          .set({ status: "complete", paymentId: made.paymentId, subscriptionId: made.subscriptionId, paymentMethodId: made.paymentMethodId, completedAt: completed.completedAt, submitUntil: null, attemptPaymentMethodId: null })
          .where(and(eq(checkoutSessions.id, row.id), unfinished)),
      ],
      events: [emitEvent(db, row, { type: "checkout.session.completed", data: serializeCheckoutSession(completed, null) }, now)],
    });
  } catch (error) {
    if (failureReason(error) === CHECKOUT_SESSION_NOT_OPEN) return null;
    throw error;
  }
  return completed;
}

/**
 * The writes that expire `row` at `now` and emit checkout.session.expired, conditional on it still
 * being open and held by no submit (else the batch aborts with CHECKOUT_SESSION_NOT_OPEN).
 */
export function expiryWrites(db: Db, row: CheckoutSessionRow, now: number) {
  const after: CheckoutSessionRow = { ...row, status: "expired", expiredAt: isoTime(now), submitUntil: null };
  const stillDue = sql`${checkoutSessions.status} = 'open' AND (${checkoutSessions.submitUntil} IS NULL OR ${checkoutSessions.submitUntil} <= ${now})`;
  return {
    row: after,
    statements: [
      guard(db, CHECKOUT_SESSION_NOT_OPEN, sql`EXISTS (SELECT 1 FROM ${checkoutSessions} WHERE ${checkoutSessions.id} = ${row.id} AND ${stillDue})`),
      db.update(checkoutSessions).set({ status: "expired", expiredAt: after.expiredAt, submitUntil: null }).where(and(eq(checkoutSessions.id, row.id), stillDue)),
    ],
    events: [emitEvent(db, row, { type: "checkout.session.expired", data: serializeCheckoutSession(after, null) }, now)],
  };
}

/**
 * The cron: marks this shard's open sessions past expires_at `expired` and emits
 * checkout.session.expired once each. A session a submit holds is left for the next run. Safe to
 * overlap and to repeat: each batch is conditional on the session still being open.
 */
export async function expireCheckoutSessions(env: Bindings, now: number): Promise<{ expired: number }> {
  const db = createDb(env.DB);
  const due = await db
    .select()
    .from(checkoutSessions)
    .where(and(eq(checkoutSessions.status, "open"), lte(checkoutSessions.expiresAt, isoTime(now)), livesHere(checkoutSessions.accountId)))
    .orderBy(asc(checkoutSessions.expiresAt))
    .limit(CHECKOUT_EXPIRY_BATCH);
  let expired = 0;
  for (const row of due) {
    if (row.submitUntil !== null && row.submitUntil > now) continue;
    try {
      // An attempt whose payment went to 3-D Secure: waiting, the session is left open for it (the
      // payer may still finish, or the payment is canceled); succeeded while the payer never came
      // back to the page, the session is completed with it, never expired.
      const attempt = await attemptPaymentOf(db, row);
      if (attempt?.status === "requires_action") continue;
      if (attempt?.status === "completed") {
        await completeCheckoutSession({ db, queue: env.DELIVERY_QUEUE }, row, { paymentId: attempt.id, subscriptionId: null, paymentMethodId: attempt.paymentMethodId ?? row.attemptPaymentMethodId ?? "" }, now);
        continue;
      }
      const writes = expiryWrites(db, row, now);
      await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { statements: writes.statements, events: writes.events });
      expired++;
    } catch (error) {
      // Completed, held or expired by an overlapping run meanwhile: nothing to do.
      if (failureReason(error) === CHECKOUT_SESSION_NOT_OPEN) continue;
      console.error(JSON.stringify({ message: "checkout session expiry failed; retried next run", checkout_session: row.id, error: String(error) }));
    }
  }
  return { expired };
}

/**
 * The payment a payment session's attempt made that is waiting for 3-D Secure or succeeded (the
 * page's charge carries metadata.checkout_session_id, the session's user, amount and currency), or
 * null. Only asked of a session whose attempt charged a card (attempt_payment_method_id).
 */
export async function attemptPaymentOf(db: Db, row: CheckoutSessionRow): Promise<{ id: string; status: string; paymentMethodId: string | null } | null> {
  if (row.mode !== "payment" || row.attemptPaymentMethodId === null) return null;
  const [payment] = await db
    .select({ id: payments.id, status: payments.status, paymentMethodId: payments.paymentMethodId })
    .from(payments)
    .where(
      and(
        eq(payments.accountId, row.accountId),
        eq(payments.livemode, row.livemode),
        eq(payments.userId, row.userId),
        sql`json_extract(${payments.metadata}, '$.checkout_session_id') = ${row.id}`,
        sql`${payments.amount} = ${row.amount} AND ${payments.currency} = ${row.currency}`,
        sql`${payments.status} IN ('requires_action', 'completed')`,
      ),
    )
    .orderBy(sql`${payments.status} = 'completed' DESC`)
    .limit(1);
  return payment ?? null;
}

/**
 * A URL the payer's browser is sent to (success_url, cancel_url): https, with no credentials in it;
 * http only to localhost or 127.0.0.1, and those hosts (or any other loopback or private one) only
 * in development. Answers the text as sent (so {CHECKOUT_SESSION_ID} stays as written), or the
 * message of what is wrong.
 */
export function checkRedirectUrl(raw: string, development: boolean): { ok: true; url: string } | { ok: false; message: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: "is not an absolute URL" };
  }
  if (url.username || url.password) return { ok: false, message: "must not carry a user name or password" };
  const local = url.hostname === "localhost" || url.hostname === "127.0.0.1";
  if (url.protocol !== "https:" && !(url.protocol === "http:" && local)) return { ok: false, message: "must be an https URL" };
  if (!development && (local || isPrivateHost(url.hostname))) return { ok: false, message: "must be a public https URL (localhost and 127.0.0.1 only in development)" };
  return { ok: true, url: raw };
}
