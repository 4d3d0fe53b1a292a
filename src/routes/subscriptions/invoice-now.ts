// PUT /subscriptions/{id} with proration_behavior always_invoice: the change, its prorations and
// any pending items on an invoice issued at once and charged (src/billing/proration-charges.ts).
// The change holds only if the invoice is paid: a decline answers 402 and puts it back.
import type { Context } from "hono";
import { eq, sql } from "drizzle-orm";
import { guard } from "../../db/batch";
import { prorationCharges, subscriptions } from "../../db/schema";
import { chargeInFlight, subscriptionUpdatedEvent } from "../../billing/periods";
import { CREDIT_NOTE_FAILURES } from "../../billing/credit-notes";
import {
  PRORATION_ALREADY_SETTLED,
  type ProrationChargeRow,
  chargeClaimed,
  invoiceChangeNow,
  makeChange,
  settleProrationCharge,
} from "../../billing/proration-charges";
import { type prorationItems, pendingItemsOf } from "../../billing/prorations";
import type { PlanRow } from "../../billing/pricing";
import { processorForRequest } from "../../processor";
import { randomToken } from "../../lib/crypto";
import { isoTime } from "../../lib/clock";
import { cardDeclined } from "../../lib/errors";
import type { AppEnv } from "../../context";
import { commitWrites } from "../../webhooks/outbox";
import { assertKeyClaimedFirst, commit, commitAndAnswerRow, holdMoney, outcomeTracked } from "../write-path";
import { alreadyCanceled, answerDecline, chargeInProgress, changedMeanwhile, type loadSubscription, type SubscriptionRow, CHARGE_IN_FLIGHT, SUBSCRIPTION_CANCELED, SUBSCRIPTION_CHANGED, proratedAsRead } from "./common";
import { serializeSubscription, subscriptionAnswer } from "./schema";
import { publicUrl } from "../../pages/public-url";

export async function changeAndInvoiceNow(
  c: Context<AppEnv>,
  input: {
    row: Awaited<ReturnType<typeof loadSubscription>>;
    plan: PlanRow;
    proration: NonNullable<ReturnType<typeof prorationItems>>;
    changes: Partial<Pick<SubscriptionRow, "planId" | "quantity">>;
    at: number;
    realNow: number;
  },
) {
  const { db, auth } = c.var;
  const { row, plan, proration, at, realNow } = input;
  const { sub, user } = row;
  const where = eq(subscriptions.id, sub.id);
  await holdMoney(c, "proration_charge");
  const processor = await processorForRequest(c);
  // The charge's reference: fixed by the Idempotency-Key's use, so a retry is the same charge.
  const key = c.var.idempotency;
  const reference = `${sub.id}:proration:${key ? `${key.key}:${key.since}` : randomToken(20)}`;

  // A retry that took its own earlier run over: that run's claim, if it committed, is charged (the
  // same reference) and settled, instead of being refused as a change made meanwhile.
  if (key?.takeover) {
    const [own] = await db.select().from(prorationCharges).where(eq(prorationCharges.reference, reference));
    if (own?.status === "claimed") return chargeAndSettle(own);
    // Settled meanwhile (by the cron, after this key's earlier run lost its answer): paid, the
    // change is made and the answer is the subscription; declined, nothing changed.
    if (own?.status === "paid") return commitAndAnswerRow(c, { statements: [], events: [], returning: db.select().from(subscriptions).where(where) }, subscriptionAnswer, where);
    if (own) throw cardDeclined("card_declined", `The card was declined for invoice ${own.invoiceId}; the change was not made.`);
  }

  const pending = await pendingItemsOf(db, sub.id);
  if (pending.length !== sub.pendingItems) throw changedMeanwhile();
  const change = { planId: input.changes.planId ?? sub.planId, quantity: input.changes.quantity ?? sub.quantity };
  const invoiced = invoiceChangeNow(db, { sub, plan, newItems: proration.items, pending, next: proration.next, change, reference, at, realNow, pageBase: publicUrl(c.env), user });
  const writes = {
    statements: [
      guard(db, SUBSCRIPTION_CANCELED, sql`EXISTS (SELECT 1 FROM subscriptions AS s WHERE s.id = ${sub.id} AND s.status != 'canceled')`),
      guard(db, CHARGE_IN_FLIGHT, sql`NOT ${chargeInFlight(sub.id, realNow)}`),
      guard(db, SUBSCRIPTION_CHANGED, proratedAsRead(sub)),
      ...invoiced.statements,
    ],
    events: invoiced.events,
  };
  // A credit beyond the invoice goes to the balance (a credit note) only while it holds this
  // currency or none: a credit in another currency landing after the read refuses the batch, and the
  // request, read again, carries the credit as an item instead.
  const failures = { [SUBSCRIPTION_CANCELED]: () => alreadyCanceled(sub.id), [CHARGE_IN_FLIGHT]: chargeInProgress, [SUBSCRIPTION_CHANGED]: changedMeanwhile, [CREDIT_NOTE_FAILURES.balanceCurrency]: changedMeanwhile };

  // Nothing to charge (the credits cover it): the change and its paid invoice in one batch.
  if (!invoiced.claim) {
    return commitAndAnswerRow(
      c,
      {
        statements: [...writes.statements, makeChange(db, sub.id, invoiced.change, isoTime(realNow))],
        events: [...writes.events, subscriptionUpdatedEvent(db, auth, sub.id, realNow)],
        returning: db.select().from(subscriptions).where(where),
      },
      subscriptionAnswer,
      where,
      { failures },
    );
  }
  // A claim whose commit answer was lost may have committed: the key is kept (500 outcome_unknown),
  // and a retry of it after its lock takes this claim over (above); else the cron settles it.
  assertKeyClaimedFirst(c);
  await outcomeTracked(c, () => commitWrites({ db, queue: c.env.DELIVERY_QUEUE, waitUntil: (p) => c.executionCtx.waitUntil(p) }, writes, failures));
  return chargeAndSettle(invoiced.claim);

  async function chargeAndSettle(claim: ProrationChargeRow) {
    // A processor call that still threw after its retries may have moved money: the outcome is
    // unknown, so the Idempotency-Key stays claimed, and the cron settles the claim after its lease.
    assertKeyClaimedFirst(c);
    const result = await outcomeTracked(c, () => chargeClaimed(db, processor, sub, user, claim, realNow));
    const settlement = settleProrationCharge(db, sub, claim, result, realNow);
    const options = { moneyMoved: { paymentId: result.payment.id }, claimGuard: false, failures: { [PRORATION_ALREADY_SETTLED]: changedMeanwhile } };
    if (!result.succeeded) return answerDecline(c, result, settlement, options);
    const { returned } = await commit(c, { ...settlement, returning: db.select().from(subscriptions).where(where) }, 200, null, {
      ...options,
      storedBody: subscriptionAnswer.stored(where),
    });
    // An earlier try of the settlement committed and its answer was lost: read the row it wrote.
    const answered = (returned[0] as SubscriptionRow | undefined) ?? (await db.select().from(subscriptions).where(where))[0];
    return c.json(serializeSubscription(answered), 200);
  }
}
