// POST /payments: a one-off payment (src/payments/intents.ts). Validates everything first (amount,
// currency, user, card, return_url), then asks the processor to charge the card, or only to
// authorize it (capture_method manual), under a reference derived from the Idempotency-Key, and
// records the payment and its event in one batch. A decline answers 402 with the failed payment's
// id; the failed payment is kept. Live mode and card fields claim the key first (claim and payer
// read, then the batch); a saved card in test mode is one round trip once its payer is known in
// this isolate (payWithSavedCardInTestMode).
import type { OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq } from "drizzle-orm";
import { insertRow } from "../../db/prepared";
import { payments as paymentsTable } from "../../db/schema";
import { hasPrefix, newId } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { isDevelopment } from "../../env";
import { ApiError, cardDeclined, conflict, invalidRequest } from "../../lib/errors";
import { clock } from "../../lib/clock";
import { idempotencyClaimLost } from "../../middleware/idempotency";
import { type CardInput, assertNoCardData, cardInBody, readCard } from "../../payments/card-input";
import { withProcessorRetries } from "../../payments/charge";
import { checkRedirectUrl } from "../../payments/checkout";
import { newPaymentEvent, paymentOfOutcome } from "../../payments/intents";
import type { Processor } from "../../processor/types";
import { newPageSecret } from "../../pages/hosted";
import { readCurrency } from "../../payments/money-input";
import { serializePayment } from "../../payments/serialize";
import { processorForCardFields, processorForRequest } from "../../processor";
import {
  PAYER_CHANGED,
  type Payer,
  type PayerIds,
  type PayerPreread,
  cachedPayer,
  forgetPayer,
  keyAndPayerStillAsRead,
  payerStatement,
  readPayer,
  rememberPayer,
} from "../../payments/payer";
import type { SavedCard } from "../../payments/methods";
import type { Statement } from "../../db/batch";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { type CommitOptions, commit, firstChargeReference, holdMoney, inBatchChargeReference, outcomeTracked } from "../write-path";
import { CreatePaymentBody, PaymentSchema } from "./schema";

const create = apiRoute({
  method: "post",
  path: "/payments",
  // The key is claimed before the card is charged, except for a saved card in test mode: the
  // sandbox moves no money, and that payment's key is recorded in the batch that records it.
  claimFirst: (c) => c.var.auth.livemode || payerIdsOf(c.var.jsonBody)?.cardId === undefined,
  // The user and the saved card are read in the claim's own batch: one round trip for both.
  claimReads: (c, body) => {
    const ids = payerIdsOf(body);
    return ids ? { ids, statement: payerStatement(c, ids) } : undefined;
  },
  tags: ["Payments"],
  operationId: "createPayment",
  summary: "Take a one-off payment",
  description:
    "Charges a user's card once, as Stripe's PaymentIntent with confirm. capture_method automatic (the default) captures at once: status completed, payment.completed. " +
    "capture_method manual only authorizes: status requires_capture with amount_capturable held and capture_before 7 days on, payment.authorized; capture it with POST /payments/{id}/capture or release it with POST /payments/{id}/cancel (the cron cancels it when capture_before passes, cancellation_reason expired). " +
    "A decline answers 402 card_declined (with decline_code) and error.payment_id: the payment is kept, failed, and payment.failed is sent. " +
    "The Idempotency-Key is the processor's: a retry with it never charges twice. The user must be of this account and mode (else 404). " +
    "A saved card (payment_method pmt_…) must be the user's (else 404) and attached (else 400 payment_method_detached); a user or card that kept changing while the payment was made answers 409 payer_changed, nothing written. " +
    "A card that asks for 3-D Secure answers 201 requires_action with next_action { type: redirect_to_url, url } and payment.requires_action: send the payer to the url (a page with no API key; test mode's has Complete and Fail, live mode's runs Stripe.js), after which the payment is completed, requires_capture or failed (failure_code authentication_failed), and the payer lands on return_url with ?payment_id=…. Not authenticated within 7 days, the cron cancels it (cancellation_reason abandoned). " +
    "In live mode the payment is a Stripe PaymentIntent on the user's Stripe Customer (capture_method as given, confirmed at once, the outcome of 3-D Secure read from Stripe).",
  scope: "payments:write",
  request: jsonBodyOf(CreatePaymentBody),
  responses: { 201: json(PaymentSchema, "The payment: completed, requires_capture for a manual capture, or requires_action when the card asks for 3-D Secure.") },
  extraErrors: [402],
});

/** The payer a body names, as sent (not yet validated): undefined for a body that names none readable. */
function payerIdsOf(body: unknown): PayerIds | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const { user_id: userId, payment_method: method } = body as Record<string, unknown>;
  if (typeof userId !== "string" || !hasPrefix(userId, "user")) return undefined;
  return typeof method === "string" && method.startsWith("pmt_") ? { userId, cardId: method } : { userId };
}

/** The charge's reference is already recorded: another request took this Idempotency-Key over and answers for it. */
const CHARGE_RECORDED = "unique:payments.charge_reference";

const payerChanged = () =>
  conflict("payer_changed", "The user or the payment method changed while this payment was being made (a detach, an edit): nothing was charged or written. Retry the request.");

/** Tries of a test-mode saved card's payment whose batch found its payer changed: the first may be from memory, the next read afresh. */
const PAYER_TRIES = 3;

/**
 * return_url: the same rule as checkout's success_url and cancel_url (checkRedirectUrl): https, no
 * credentials; localhost, loopback and private hosts (and plain http to localhost) only in development.
 */
export function readReturnUrl(text: string | undefined, development: boolean): string | null {
  if (text === undefined) return null;
  const checked = checkRedirectUrl(text, development);
  if (!checked.ok) {
    throw invalidRequest(
      "url_invalid",
      development ? "return_url must be an https URL with no user name or password (or http://localhost or http://127.0.0.1 in development)." : "return_url must be a public https URL with no user name or password.",
      "return_url",
    );
  }
  return new URL(checked.url).toString();
}

type CreateBody = z.infer<typeof CreatePaymentBody>;

/** What the handler checked before the payer: the currency, return_url, and when the request began. */
interface Checked {
  currency: string;
  returnUrl: string | null;
  now: number;
}

export function registerCreatePayment(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createPayment(c) {
    const body = c.req.valid("json");
    const now = clock.now();
    const checked: Checked = { currency: readCurrency(body.currency), returnUrl: readReturnUrl(body.return_url, isDevelopment(c.env)), now };
    // A saved card of the user (pmt_…), or the card fields (in live mode only on a connection
    // made with raw_card_data).
    const savedId = body.payment_method?.startsWith("pmt_") ? body.payment_method : undefined;
    const cardFields = savedId ? undefined : cardInBody(body);
    if (savedId) assertNoCardData(body);
    if (!savedId && !cardFields) {
      throw invalidRequest("parameter_missing", "payment_method is required: a saved payment method \"pmt_…\", or \"card\" with card_number, expiration_month, expiration_year and cvv.", "payment_method");
    }
    if (savedId && !c.var.auth.livemode) return payWithSavedCardInTestMode(c, body, checked, { userId: body.user_id, cardId: savedId });
    const card = cardFields ? await readCard(c.env, cardFields, now) : undefined;
    // One statement (read with the key's claim when there is one): 404 user_id, then 404 or 400 payment_method.
    const { user, saved } = await readPayer(c, { userId: body.user_id, ...(savedId ? { cardId: savedId } : {}) }, c.var.idempotency?.preread as PayerPreread | undefined);
    // Live money goes out through the connection only under a claim of it (src/processor/in-flight.ts).
    await holdMoney(c, "one_off_payment");
    const processor = saved ? await processorForRequest(c) : await processorForCardFields(c);
    const id = newId("payment", now);
    return chargeAndRecord(c, body, checked, { user, card: saved ?? card! }, {
      processor,
      id,
      reference: firstChargeReference(c) ?? id,
      guards: [],
      options: { moneyMoved: { paymentId: id }, failures: { [CHARGE_RECORDED]: idempotencyClaimLost } },
    });
  });
}

/**
 * A saved card in test mode: one round trip once its payer is known here. The sandbox decides in
 * the request (it moves no money), so the payer may come from this isolate's memory and the key is
 * recorded in the payment's own batch, which also checks that the payer is still as read
 * (keyAndPayerStillAsRead). Refused so (the card detached meanwhile, the user deleted or changed), the
 * batch wrote nothing: the payer is read afresh, answering as the read answers (404, 400
 * payment_method_detached), and the payment is made again from what it says.
 */
async function payWithSavedCardInTestMode(c: Context<AppEnv>, body: CreateBody, checked: Checked, ids: Required<PayerIds>) {
  const { auth } = c.var;
  const processor = await processorForRequest(c);
  for (let attempt = 1; ; attempt++) {
    const remembered = attempt === 1 ? cachedPayer(auth, ids) : undefined;
    const payer = remembered ?? ((await readPayer(c, ids, c.var.idempotency?.preread as PayerPreread | undefined)) as Payer & { saved: SavedCard });
    rememberPayer(auth, ids, payer);
    const id = newId("payment", checked.now);
    try {
      return await chargeAndRecord(c, body, checked, { user: payer.user, card: payer.saved }, {
        processor,
        id,
        reference: inBatchChargeReference(c) ?? id,
        guards: [],
        options: { keyGuard: keyAndPayerStillAsRead(c, payer), failures: { [CHARGE_RECORDED]: idempotencyClaimLost, [PAYER_CHANGED]: payerChanged } },
      });
    } catch (error) {
      if (!(error instanceof ApiError && error.code === "payer_changed") || attempt === PAYER_TRIES) throw error;
      forgetPayer(auth, ids);
    }
  }
}

/**
 * Asks the processor to charge the card, or only to authorize it (capture_method manual), under
 * `reference`, and records the payment and its event in one batch (after `guards`). A decline
 * answers 402 with the failed payment's id; the failed payment is kept.
 */
async function chargeAndRecord(
  c: Context<AppEnv>,
  body: CreateBody,
  checked: Checked,
  payer: { user: { id: string; email: string }; card: SavedCard | CardInput },
  how: { processor: Processor; id: string; reference: string; guards: Statement[]; options: CommitOptions },
) {
  const { db, auth } = c.var;
  const { currency, now } = checked;
  const { user } = payer;
  const { id, reference } = how;
  const captureMethod = body.capture_method ?? "automatic";
  const customer = { id: user.id, email: user.email };
  // A saved card is charged by its token, never by card fields.
  const source = "token" in payer.card ? { token: payer.card.token } : { card: payer.card.card };
  const paymentMethodId = "token" in payer.card ? payer.card.id : null;
  // A processor call that still throws after its retries may have moved money: the key stays claimed.
  const outcome = await outcomeTracked(c, () =>
    withProcessorRetries(() =>
      how.processor.authorizeCard({
        ...source,
        amount: body.amount,
        currency,
        reference,
        capture: captureMethod,
        customer,
        // The payer is here (or the merchant's page is): a card that asks for 3-D Secure is sent to authenticate.
        onSession: true,
        firstAttemptAt: c.var.idempotency ? Date.parse(c.var.idempotency.since) : now,
      }),
    ),
  );
  const payment = paymentOfOutcome(
    {
      id,
      tenant: auth,
      userId: user.id,
      amount: body.amount,
      currency,
      captureMethod,
      description: body.description ?? null,
      metadata: body.metadata ?? null,
      card: payer.card,
      paymentMethodId,
      chargeReference: reference,
      at: now,
      authentication: { origin: new URL(c.req.url).origin, pageSecret: newPageSecret(), returnUrl: checked.returnUrl },
    },
    outcome,
  );
  const writes = { statements: [...how.guards, insertRow(db, paymentsTable, payment)], events: [newPaymentEvent(db, payment, customer, now)] };
  const record = (status: 201 | 402, body: unknown) => (how.options.moneyMoved ? commit(c, writes, status, body, how.options) : commitOrFind(c, id, () => commit(c, writes, status, body, how.options)));
  if (outcome.status === "failed") {
    const declined = cardDeclined(outcome.code, outcome.message);
    const error = new ApiError(declined.status, declined.type, declined.code, declined.message, undefined, {}, { ...declined.extra, payment_id: id });
    await record(402, error.body(c.var.requestId));
    throw error;
  }
  const answer = serializePayment(payment);
  await record(201, answer);
  return c.json(answer, 201);
}

/**
 * A batch recorded in test mode without moneyMoved (the one-trip path): when it fails without
 * saying whether it committed and the request has no Idempotency-Key (whose record would say),
 * the payment's own row says: there, the batch committed and its answer is given; else the
 * failure stands (a 500, the outcome unknown). With a key, the key's record answers
 * (src/middleware/idempotency.ts, settleUnknownOutcome).
 */
async function commitOrFind(c: Context<AppEnv>, paymentId: string, work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (error instanceof ApiError || c.var.idempotency) throw error;
    const { db, auth } = c.var;
    const found = await db
      .select({ id: paymentsTable.id })
      .from(paymentsTable)
      .where(and(eq(paymentsTable.id, paymentId), eq(paymentsTable.accountId, auth.accountId), eq(paymentsTable.livemode, auth.livemode)))
      .then((rows) => rows.length > 0, () => false);
    if (!found) throw error;
  }
}
