// POST /payments/{id}/capture and POST /payments/{id}/cancel: the steps after an authorization
// (src/payments/intents.ts). The payment's step lease is taken (another capture or cancel at the
// processor meanwhile answers 409 payment_in_progress), the processor is called with the
// operation's fixed reference (one capture, one cancel per payment, whoever asks), then one batch
// records the change if the payment is still as it was read; otherwise the change someone else
// recorded is answered as 409 naming the state it is in now.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../../context";
import { revokedCredential } from "../../auth/credentials";
import { CREDENTIAL_REVOKED, credentialGuard } from "../../db/scope";
import { hasPrefix } from "../../domain/ids";
import { ApiError, conflict, invalidRequest, notFound } from "../../lib/errors";
import { clock } from "../../lib/clock";
import { PAYMENT_STATE_CHANGED, cancelAtProcessor, cancelWrites, captureAtProcessor, captureWrites, loadPayment, releasePaymentStep, takePaymentStep } from "../../payments/intents";
import type { PaymentRow } from "../../payments/event-data";
import { serializePayment } from "../../payments/serialize";
import { processorForRequest } from "../../processor";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { found } from "../reads";
import { assertKeyClaimedFirst, commit, holdMoney, outcomeTracked } from "../write-path";
import { CancelPaymentBody, CapturePaymentBody, PaymentSchema } from "./schema";

const tags = ["Payments"];
const paymentId = idParam("payment", "pay_01jd2x4k5m6n7p8q9r0s1t2v3w");

const capture = apiRoute({
  method: "post",
  path: "/payments/{id}/capture",
  claimFirst: true,
  tags,
  operationId: "capturePayment",
  summary: "Capture an authorized payment",
  description:
    "Captures `amount` (default: all of amount_capturable) of a payment in requires_capture and releases the rest: the payment is completed, amount_received is what was captured (refunds come out of it), and payment.completed is sent. " +
    "More than amount_capturable answers 400 amount_too_large; a payment in any other status, or past its capture_before (the authorization expired), answers 409 payment_unexpected_state, naming it. A retry, or two captures at once, capture once; what is recorded and answered is what the processor captured (a capture whose answer was lost, then one of another amount, records the first one's amount).",
  scope: "payments:write",
  request: { params: paymentId, ...jsonBodyOf(CapturePaymentBody) },
  responses: { 200: json(PaymentSchema, "The completed payment.") },
  // The processor refused the capture (the authorization lapsed there): 402 payment_processor_refused, nothing changed.
  extraErrors: [402],
});

const cancel = apiRoute({
  method: "post",
  path: "/payments/{id}/cancel",
  claimFirst: true,
  tags,
  operationId: "cancelPayment",
  summary: "Cancel an uncaptured payment",
  description:
    "Releases a payment that is requires_capture (or requires_action): it becomes canceled with canceled_at and cancellation_reason, nothing held, and payment.canceled is sent. A payment in any other status answers 409 payment_unexpected_state, naming it.",
  scope: "payments:write",
  request: { params: paymentId, ...jsonBodyOf(CancelPaymentBody) },
  responses: { 200: json(PaymentSchema, "The canceled payment.") },
  extraErrors: [402],
});

const unexpectedState = (payment: PaymentRow, action: "captured" | "canceled", allowed: string) =>
  conflict(
    "payment_unexpected_state",
    `Payment ${payment.id} is ${payment.status}; only a payment that is ${allowed} can be ${action}.`,
  );

/** The processor refused the capture or cancel (the authorization lapsed there): nothing changed. */
const processorRefused = (payment: PaymentRow, action: string, message: string) =>
  new ApiError(402, "card_error", "payment_processor_refused", `The processor refused to ${action} payment ${payment.id}: ${message}`, undefined, {}, { payment_id: payment.id });

async function loadOwnPayment(c: Context<AppEnv>, id: string) {
  if (!hasPrefix(id, "payment")) throw notFound("payment", id);
  return found(c, (await loadPayment(c.var.db, c.var.auth, id)) ?? undefined, "payment", id);
}

const inProgress = (id: string) =>
  conflict("payment_in_progress", `Payment ${id} is being captured or canceled by another request; retry in a few seconds.`);

/**
 * Runs `step` (the processor call and the batch) while holding the payment's step lease, which the
 * step's batch gives back, or this does when the step fails (a call that threw leaves the outcome
 * unknown: the retry calls again with the same reference, at once).
 */
async function holdingStep<T>(c: Context<AppEnv>, id: string, now: number, step: () => Promise<T>): Promise<T> {
  const { db, auth } = c.var;
  const guarded = { statement: credentialGuard(db, auth), failures: { [CREDENTIAL_REVOKED]: () => revokedCredential(auth.keyId) } };
  if (!(await takePaymentStep(db, id, now, guarded))) throw inProgress(id);
  try {
    return await step();
  } catch (error) {
    await releasePaymentStep(db, id);
    throw error;
  }
}

/** The batch lost to a change recorded meanwhile: answer the state the payment is in now. */
async function changedMeanwhile(c: Context<AppEnv>, id: string, action: "captured" | "canceled", allowed: string) {
  const now = await loadPayment(c.var.db, c.var.auth, id);
  return now ? unexpectedState(now.payment, action, allowed) : notFound("payment", id);
}

export function registerPaymentSteps(app: OpenAPIHono<AppEnv>) {
  app.openapi(capture, async function capturePayment(c) {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    assertKeyClaimedFirst(c);
    const { payment, customer } = await loadOwnPayment(c, id);
    if (payment.status !== "requires_capture") throw unexpectedState(payment, "captured", "requires_capture");
    // Past capture_before the authorization has lapsed (Stripe cancels it after 7 days): test mode
    // refuses the capture as live mode's processor would, and the cron cancels it.
    if (payment.captureBefore !== null && Date.parse(payment.captureBefore) <= now) {
      throw conflict("payment_unexpected_state", `Payment ${id}'s authorization expired at ${payment.captureBefore} (capture_before); it can be captured no more and is being canceled.`);
    }
    const amount = body.amount ?? payment.amountCapturable;
    if (amount > payment.amountCapturable) {
      throw invalidRequest("amount_too_large", `amount ${amount} is more than payment ${id} can capture: ${payment.amountCapturable} (amount_capturable).`, "amount");
    }
    await holdMoney(c, "payment_capture");
    const processor = await processorForRequest(c);
    const answer = await holdingStep(c, id, now, async () => {
      const outcome = await outcomeTracked(c, () => captureAtProcessor(processor, payment, amount));
      if (outcome.status === "failed") throw processorRefused(payment, "capture", outcome.message);
      // What the processor captured is recorded, never only what was asked: an earlier capture
      // whose answer was lost may have taken another amount under the same reference.
      const writes = captureWrites(db, payment, outcome.amountReceived, customer, now);
      const answer = serializePayment(writes.row);
      let lost = false;
      await commit(c, { statements: writes.statements, events: writes.events }, 200, answer, {
        failures: {
          [PAYMENT_STATE_CHANGED]: () => {
            lost = true;
            return conflict("payment_unexpected_state", `Payment ${id} changed while it was being captured.`);
          },
        },
      }).catch(async (error) => {
        throw lost ? await changedMeanwhile(c, id, "captured", "requires_capture") : error;
      });
      return answer;
    });
    return c.json(answer, 200);
  });

  app.openapi(cancel, async function cancelPayment(c) {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    assertKeyClaimedFirst(c);
    const { payment } = await loadOwnPayment(c, id);
    if (payment.status !== "requires_capture" && payment.status !== "requires_action") throw unexpectedState(payment, "canceled", "requires_capture or requires_action");
    await holdMoney(c, "payment_cancel");
    const processor = await processorForRequest(c);
    const writes = cancelWrites(db, payment, body.cancellation_reason ?? null, now);
    const answer = serializePayment(writes.row);
    await holdingStep(c, id, now, async () => {
      const outcome = await outcomeTracked(c, () => cancelAtProcessor(processor, payment));
      if (outcome.status === "failed") throw processorRefused(payment, "cancel", outcome.message);
      let lost = false;
      await commit(c, { statements: writes.statements, events: writes.events }, 200, answer, {
        failures: {
          [PAYMENT_STATE_CHANGED]: () => {
            lost = true;
            return conflict("payment_unexpected_state", `Payment ${id} changed while it was being canceled.`);
          },
        },
      }).catch(async (error) => {
        throw lost ? await changedMeanwhile(c, id, "canceled", "requires_capture or requires_action") : error;
      });
    });
    return c.json(answer, 200);
  });
}
