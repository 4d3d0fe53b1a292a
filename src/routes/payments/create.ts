// POST /payments: a one-off payment (src/payments/intents.ts). Validates everything first (amount,
// currency, user, card, return_url), then asks the processor to charge the card, or only to
// authorize it (capture_method manual), under a reference derived from the Idempotency-Key, and
// records the payment and its event in one batch. A decline answers 402 with the failed payment's
// id; the failed payment is kept.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { insertRow } from "../../db/prepared";
import { payments as paymentsTable } from "../../db/schema";
import { hasPrefix, newId } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { isDevelopment } from "../../env";
import { ApiError, cardDeclined, invalidRequest, notFound } from "../../lib/errors";
import { clock } from "../../lib/clock";
import { idempotencyClaimLost } from "../../middleware/idempotency";
import { assertNoCardData, cardInBody, readCard } from "../../payments/card-input";
import { withProcessorRetries } from "../../payments/charge";
import { checkRedirectUrl } from "../../payments/checkout";
import { newPaymentEvent, paymentOfOutcome } from "../../payments/intents";
import { newPageSecret } from "../../pages/hosted";
import { readCurrency } from "../../payments/money-input";
import { serializePayment } from "../../payments/serialize";
import { processorForCardFields, processorForRequest } from "../../processor";
import { type PayerIds, type PayerPreread, payerStatement, readPayer } from "../../payments/payer";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { commit, firstChargeReference, holdMoney, outcomeTracked } from "../write-path";
import { CreatePaymentBody, PaymentSchema } from "./schema";

const create = apiRoute({
  method: "post",
  path: "/payments",
  claimFirst: true,
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

export function registerCreatePayment(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createPayment(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const currency = readCurrency(body.currency);
    const returnUrl = readReturnUrl(body.return_url, isDevelopment(c.env));
    // A saved card of the user (pmt_…), or the card fields (in live mode only on a connection
    // made with raw_card_data).
    const savedId = body.payment_method?.startsWith("pmt_") ? body.payment_method : undefined;
    const cardFields = savedId ? undefined : cardInBody(body);
    if (savedId) assertNoCardData(body);
    if (!savedId && !cardFields) {
      throw invalidRequest("parameter_missing", "payment_method is required: a saved payment method \"pmt_…\", or \"card\" with card_number, expiration_month, expiration_year and cvv.", "payment_method");
    }
    const card = cardFields ? await readCard(c.env, cardFields, now) : undefined;
    // One statement (read with the key's claim when there is one): 404 user_id, then 404 or 400 payment_method.
    const { user, saved } = await readPayer(c, { userId: body.user_id, ...(savedId ? { cardId: savedId } : {}) }, c.var.idempotency?.preread as PayerPreread | undefined);
    // Live money goes out through the connection only under a claim of it (src/processor/in-flight.ts).
    await holdMoney(c, "one_off_payment");
    const processor = saved ? await processorForRequest(c) : await processorForCardFields(c);

    const id = newId("payment", now);
    const reference = firstChargeReference(c) ?? id;
    const captureMethod = body.capture_method ?? "automatic";
    const customer = { id: user.id, email: user.email };
    // A processor call that still throws after its retries may have moved money: the key stays claimed.
    const outcome = await outcomeTracked(c, () =>
      withProcessorRetries(() =>
        processor.authorizeCard({
          ...(saved ? { token: saved.token } : { card: card!.card }),
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
        card: saved ?? card!,
        paymentMethodId: saved?.id ?? null,
        chargeReference: reference,
        at: now,
        authentication: { origin: new URL(c.req.url).origin, pageSecret: newPageSecret(), returnUrl },
      },
      outcome,
    );
    const writes = { statements: [insertRow(db, paymentsTable, payment)], events: [newPaymentEvent(db, payment, customer, now)] };
    const options = { moneyMoved: { paymentId: id }, failures: { [CHARGE_RECORDED]: idempotencyClaimLost } };
    if (outcome.status === "failed") {
      const declined = cardDeclined(outcome.code, outcome.message);
      const error = new ApiError(declined.status, declined.type, declined.code, declined.message, undefined, {}, { ...declined.extra, payment_id: id });
      await commit(c, writes, 402, error.body(c.var.requestId), options);
      throw error;
    }
    const answer = serializePayment(payment);
    await commit(c, writes, 201, answer, options);
    return c.json(answer, 201);
  });
}
