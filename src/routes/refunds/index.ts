// Refunds: take a refund from a payment at once (refund.initiated, never beyond what was charged),
// settle it on the job queue (src/payments/settle-refund.ts); list and read.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { payments, refunds } from "../../db/schema";
import { owned } from "../../db/scope";
import { CURRENCY_EXPONENTS, formatMinor } from "../../domain/money";
import { hasPrefix, newId } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { conflict, invalidRequest, notFound } from "../../lib/errors";
import { listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commit } from "../write-path";
import { type RefundRow, refundJsonSql, serializeRefund } from "../../payments/serialize";
import { REFUND_FAILURES, refundWrites } from "../../payments/refund-writes";
import { refundSettlementMessages } from "../../payments/settle-refund";
import { sendSoon } from "../../lib/queue";
import { processorForRequest } from "../../processor";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { CreateRefundBody, RefundListQuery, RefundSchema } from "./schema";
import { clock } from "../../lib/clock";
import { hasScope } from "../../auth/scopes";
import { creditNoteFailures } from "../credit-notes";
import { creditNoteOfRefund } from "../credit-notes/refund-note";

const tags = ["Refunds"];

const create = apiRoute({
  method: "post",
  path: "/refunds",
  tags,
  operationId: "createRefund",
  summary: "Refund a payment",
  description:
    "Refunds a completed payment, fully (the default) or partly, never beyond what was charged. " +
    "Emits refund.initiated at once and refund.completed when the processor settles it. " +
    "In live mode the refund is a Stripe Refund of the payment's PaymentIntent; one Stripe answers `pending` stays pending until Stripe's event settles it, and one that fails makes its amount refundable again (status failed). " +
      "A live payment charged through a Stripe account that is no longer connected (removed, or replaced by another account's key) answers 409 payment_processor_retired and nothing is sent: refund it in that Stripe account, or connect it again.",
  scope: "refunds:write",
  request: jsonBodyOf(CreateRefundBody),
  responses: { 201: json(RefundSchema, "The new refund, pending.") },
});

const list = apiRoute({
  method: "get",
  path: "/refunds",
  tags,
  operationId: "listRefunds",
  summary: "List refunds",
  scope: "refunds:read",
  request: { query: RefundListQuery },
  responses: { 200: json(listSchema(RefundSchema, "RefundList"), "A page of refunds, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/refunds/{id}",
  tags,
  operationId: "getRefund",
  summary: "Read a refund",
  scope: "refunds:read",
  request: { params: idParam("refund", "re_01jd2x4k5m6n7p8q9r0s1t2v3w") },
  responses: { 200: json(RefundSchema, "The refund.") },
});

export function registerRefunds(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createRefund(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const paymentId = body.payment_id;
    // The refund settles at the processor: a mode without one refunds nothing (400 livemode_unavailable).
    await processorForRequest(c);
    if (!hasPrefix(paymentId, "payment")) throw notFound("payment", paymentId, "payment_id");
    const refundId = newId("refund", now);
    // A payment that paid an invoice: the refund is a correction of the invoice, so the same batch
    // issues its credit note (src/billing/credit-notes.ts), which never takes the invoice's notes
    // past its total. One refund, one note, whatever the retries (the Idempotency-Key replays it).
    // The refund is then of the note's amount exactly (what remained when it was read: a refund
    // meanwhile makes the payment's CHECK refuse it).
    const invoiced = await creditNoteOfRefund(c, { paymentId, refundId, amount: body.amount, reason: body.reason ?? null, at: now });
    const writes = refundWrites(db, { accountId: auth.accountId, livemode: auth.livemode, paymentId, refundId, amount: invoiced?.amount ?? body.amount, reason: body.reason ?? null, at: now });
    if (invoiced) {
      writes.statements.push(...invoiced.statements);
      writes.events.push(...invoiced.events);
    }

    let exceeded = false;
    let notCaptured = false;
    let retired = false;
    let returned: unknown[];
    try {
      ({ returned } = await commit(c, writes, 201, refundJsonSql(refundId), {
        failures: {
          ...(invoiced ? creditNoteFailures(invoiced.amount) : {}),
          [REFUND_FAILURES.paymentMissing]: () => notFound("payment", paymentId, "payment_id"),
          [REFUND_FAILURES.paymentFailed]: () =>
            conflict("payment_not_refundable", `Payment '${paymentId}' failed, so nothing was charged and there is nothing to refund.`),
          [REFUND_FAILURES.paymentRefunded]: () => conflict("payment_already_refunded", `Payment '${paymentId}' has already been fully refunded.`),
          [REFUND_FAILURES.paymentNotCaptured]: () => {
            notCaptured = true;
            return conflict("payment_not_refundable", `Payment '${paymentId}' has captured nothing, so there is nothing to refund: capture it, or cancel it to release the authorization.`);
          },
          [REFUND_FAILURES.processorRetired]: () => {
            retired = true;
            return conflict("payment_processor_retired", `Payment '${paymentId}' was charged through a Stripe account that is no longer connected, so Tender cannot refund it.`);
          },
          [REFUND_FAILURES.exceedsPayment]: () => {
            exceeded = true;
            return invalidRequest(
              "refund_exceeds_payment",
              `A refund of ${body.amount} is more than payment '${paymentId}' has left to refund. A key with payments:read can read what remains (amount_received less amount_refunded).`,
              "amount",
            );
          },
        },
      }));
    } catch (error) {
      // Name the Stripe account the payment was charged through: the one to refund it in.
      if (retired) {
        const payment = await db.query.payments.findFirst({ where: owned(payments, auth, eq(payments.id, paymentId)) });
        throw conflict(
          "payment_processor_retired",
          `Payment '${paymentId}' was charged through Stripe account ${payment?.processorAccount || "(unknown)"}, which is no longer connected: Tender moves no new money through a retired connection. ` +
            "Refund it in that Stripe account's Dashboard, or connect that account again (PUT /api/processor).",
        );
      }
      // Name what can still be refunded, to a caller that may read the payment: the amounts are
      // the payment's (payments:read), which refunds:write does not grant. Read only on this path.
      // The payment's state is named to a caller that may read it.
      if (notCaptured && hasScope(auth.scopes, "payments:read")) {
        const payment = await db.query.payments.findFirst({ where: owned(payments, auth, eq(payments.id, paymentId)) });
        if (payment) throw conflict("payment_not_refundable", `Payment '${paymentId}' is ${payment.status} and has captured nothing, so there is nothing to refund${payment.status === "requires_capture" ? ": capture it, or cancel it to release the authorization" : ""}.`);
      }
      if (exceeded && hasScope(auth.scopes, "payments:read")) {
        const payment = await db.query.payments.findFirst({ where: owned(payments, auth, eq(payments.id, paymentId)) });
        if (payment) {
          const remaining = payment.amountReceived - payment.amountRefunded;
          const exponent = CURRENCY_EXPONENTS[payment.currency] ?? 2;
          throw invalidRequest(
            "refund_exceeds_payment",
            `A refund of ${body.amount} is more than payment '${paymentId}' has left to refund: ${remaining} ` +
              `(${formatMinor(remaining, exponent)} ${payment.currency.toUpperCase()}) of ${payment.amountReceived} captured remains refundable.`,
            "amount",
          );
        }
      }
      throw error;
    }
    const [row] = returned as RefundRow[];
    sendSoon(c.env.JOB_QUEUE, refundSettlementMessages([refundId]), (p) => c.executionCtx.waitUntil(p), (error) => {
      console.error(JSON.stringify({ message: "refund settlement enqueue failed; the sweep will retry", refund: refundId, error: String(error) }));
    });
    return c.json(serializeRefund(row), 201);
  });

  app.openapi(list, async function listRefunds(c) {
    const query = c.req.valid("query");
    const page = await listOwned(c, {
      table: refunds,
      query,
      filters: [[refunds.paymentId, query.payment_id]],
      validCursor: (id) => hasPrefix(id, "refund"),
      serialize: serializeRefund,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getRefund(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, refunds, id, "refund");
    return c.json(serializeRefund(row), 200);
  });
}
