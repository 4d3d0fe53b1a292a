// POST /invoices/{id}/pay: charges an open invoice now. An invoice of a subscription's billing
// period is charged exactly as a dunning retry charges it (src/billing/periods.ts): the period's
// next attempt is claimed (so it and a retry can never both charge), the processor is sent that
// attempt's fixed reference with the subscription's card, and the settlement records the payment,
// the invoice (paid, or still open) and the subscription (active again, or still past_due with its
// scheduled retry: a declined Pay now counts as an attempt, as a past-due card update does).
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { eq, sql } from "drizzle-orm";
import { waitingFirstPaymentOf } from "../../billing/incomplete";
import { PERIOD_ALREADY_SETTLED, chargeOf, type PeriodClaim, chargePeriod, claimOf, claimPeriod, hasUnsettledClaim, releaseClaim } from "../../billing/periods";
import { runBatch } from "../../db/batch";
import { invoices } from "../../db/schema";
import type { AppEnv } from "../../context";
import { clock } from "../../lib/clock";
import { ApiError, conflict } from "../../lib/errors";
import { processorForRequest } from "../../processor";
import { apiRoute, json } from "../openapi";
import { readById } from "../reads";
import { assertKeyClaimedFirst, commit, holdMoney, outcomeTracked } from "../write-path";
import { answerDecline, billingNow, chargeInProgress, changedMeanwhile, loadSubscription } from "../subscriptions/common";
import { invoiceAnswerSql, invoiceId, notOpen, tags } from "./common";
import { InvoiceSchema } from "./schema";
import { publicUrl } from "../../pages/public-url";

const pay = apiRoute({
  method: "post",
  path: "/invoices/{id}/pay",
  claimFirst: true,
  tags,
  operationId: "payInvoice",
  summary: "Charge an open invoice now",
  description:
    "Charges an open invoice at once with its subscription's card, as the next attempt of its billing period: the same claim and processor reference as a dunning retry, so the two never both charge. Success answers the paid invoice (invoice.paid; a past-due subscription is active again); a decline answers 402 with decline_code (invoice.payment_failed), counts as an attempt and leaves the scheduled retry as it was. A paid invoice answers 409 invoice_paid, a void or uncollectible one 409 invoice_not_open; while a charge of the invoice is at the processor, or a payment made on its hosted page waits for its payer's 3-D Secure, 409 charge_in_progress. The first invoice of an incomplete subscription (its first charge waits for 3-D Secure) is charged only by that payment: 409 charge_in_progress, whose message names the payment and its challenge (next_action.url), and nothing is charged. Should the processor not answer, 500 outcome_unknown, and Tender settles that charge within 10 minutes.",
  scope: "invoices:write",
  request: { params: invoiceId },
  responses: { 200: json(InvoiceSchema, "The paid invoice.") },
  extraErrors: [402],
});

export function registerPayInvoice(app: OpenAPIHono<AppEnv>) {
  app.openapi(pay, async function payInvoice(c) {
    const { db } = c.var;
    const { id } = c.req.valid("param");
    const realNow = clock.now();
    const invoice = await readById(c, invoices, id, "invoice");
    if (invoice.status !== "open") throw notOpen(id, invoice.status, "paid");
    if (invoice.subscriptionId !== null && invoice.periodIndex === null) {
      // A change invoiced at once: its invoice is open only while its own charge is in flight.
      throw conflict("charge_in_progress", `Invoice ${id} is being charged for a change of its subscription invoiced at once; it settles within 10 minutes.`);
    }
    if (invoice.subscriptionId === null || invoice.periodIndex === null) {
      throw conflict("invoice_not_payable", `Invoice ${id} bills no subscription period, so it has no card to charge.`);
    }
    const current = await loadSubscription(c, invoice.subscriptionId);
    const { sub } = current;
    // An incomplete subscription's first invoice: its first payment waits for its payer, whose
    // outcome decides the invoice (paid, or void); a second charge could take the money twice.
    if (sub.status === "incomplete") {
      const first = await waitingFirstPaymentOf(db, id);
      if (first) {
        throw conflict(
          "charge_in_progress",
          `Invoice ${id} is the first invoice of incomplete subscription ${sub.id}: its payment ${first.id} waits for its payer's 3-D Secure at ${first.nextAction?.url ?? "its next_action.url"}. Send the payer there; its outcome pays the invoice (or voids it). Nothing was charged.`,
        );
      }
    }
    // An open invoice of a period is its past-due subscription's period being dunned.
    if (sub.status !== "past_due" || sub.periodsBilled !== invoice.periodIndex) throw changedMeanwhile();
    await holdMoney(c, "invoice_payment");
    const processor = await processorForRequest(c);

    const claim = await claimNextAttempt(c, current, realNow);
    if (!claim) {
      // This request took its own stale Idempotency-Key claim over, and the period's next attempt
      // is claimed and unsettled: it may be this request's earlier run, whose outcome is unknown
      // (500 outcome_unknown; the cron settles it). Anyone else: a charge is in progress.
      if (c.var.idempotency?.takeover && hasUnsettledClaim(current)) {
        await outcomeTracked(c, () => Promise.reject(new Error(`pay of ${id}: an earlier run's charge is unsettled`)));
      }
      throw hasUnsettledClaim(current) ? chargeInProgress() : changedMeanwhile();
    }
    assertKeyClaimedFirst(c);
    try {
      const settlement = await outcomeTracked(c, () =>
        chargePeriod(db, { processor, pageBase: publicUrl(c.env), row: current, claim, at: billingNow(current.clock, realNow), realNow, manual: true }),
      );
      // Money moved: the settlement commits whatever became of the caller's key or claim meanwhile.
      const charged = chargeOf(settlement);
      const options = { moneyMoved: { paymentId: charged.payment.id }, claimGuard: false, failures: { [PERIOD_ALREADY_SETTLED]: changedMeanwhile } };
      if (!charged.succeeded) return await answerDecline(c, charged, settlement.writes, options);
      const answer = db.select({ invoice: sql<string>`${invoiceAnswerSql(id)}` }).from(invoices).where(eq(invoices.id, id));
      const { answered } = await commit(c, { ...settlement.writes, answer }, 200, invoiceAnswerSql(id), options);
      // An earlier try of the settlement committed and its answer was lost: read the invoice it wrote.
      const row = (answered as { invoice: string }[])[0] ?? (await answer)[0];
      return c.json(JSON.parse(row.invoice), 200);
    } catch (error) {
      if (!(error instanceof ApiError)) await runBatch(db, [releaseClaim(db, sub, claim, realNow)]).catch(() => undefined);
      throw error;
    }
  });
}

/**
 * Claims the period's next attempt, or null when another worker holds it. Should the claim's
 * commit answer be lost, the outcome is unknown: the key stays claimed (500), and a claim that did
 * commit is settled by the cron once its lease runs out (the charge the caller asked for).
 */
async function claimNextAttempt(c: Context<AppEnv>, current: Parameters<typeof claimPeriod>[1], realNow: number): Promise<PeriodClaim | null> {
  const { db } = c.var;
  const [claimed] = await outcomeTracked(c, () => runBatch(db, [claimPeriod(db, current, "pay", realNow, realNow)]));
  return claimOf(claimed);
}
