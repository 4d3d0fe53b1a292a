// Every idempotent write that calls no processor before its commit is one D1 round trip with an
// Idempotency-Key: its record is written in the route's own batch. A replay costs at most two.
import { afterAll, describe, expect, it } from "vitest";
import { call, roundTrips, signup } from "../support/http";
import { seed, warm } from "../support/fixtures";
import { fixtureId, label, LIVE_SECRET_KEY_ONLY, operations, pathWith, validBody } from "../support/operations";
import { connectStripe, installFakeStripe } from "../support/live";

const stripe = installFakeStripe();
afterAll(() => stripe.restore());
import { withoutSecrets } from "../../src/middleware/stored-answers";

/**
 * The exceptions, each with its count. Money moves at the processor before the commit of a
 * subscription's creation (claim, plan/user read, batch; plus the charge record) and of a
 * past-due card update, and a test clock's advance runs renewals after its batch: they claim the
 * key first. Every other write is one round trip, those whose answer is an object they do not
 * read first (a plan's PATCH, a cancel) included: their batch returns the row, and the record
 * stores it (src/middleware/stored-answers.ts).
 */
const EXPECTED_ABOVE_ONE: Record<string, number> = {
  createSubscription: 4,
  updateSubscription: 3,
  // An advance also reads the trial notices that fell due on the clock (src/billing/trials.ts).
  advanceTestClock: 7,
  // The processor connection reads the one it replaces (to keep its created_at) or removes (to
  // answer its Stripe account), after asking Stripe to check the key.
  connectProcessor: 2,
  // Saving a card calls the processor before its batch: the key's claim, the user, the batch.
  createPaymentMethod: 3,
  // The payment method is read (it may be detached already: answered as it is), then the batch.
  detachPaymentMethod: 2,
  disconnectProcessor: 2,
  // Paying an invoice charges its period at once, as a past-due card update does: the key's claim,
  // the invoice and subscription read, the period's claim, the charge, then the batch.
  payInvoice: 5,
  // A one-off payment: the key's claim with the user's and saved card's read in its batch
  // (src/payments/payer.ts), then the batch (the card is charged between). A saved card too: see
  // test/payments/one-off.test.ts.
  createPayment: 2,
  // A capture or cancel of a one-off payment: the key's claim, the payment's read, its step lease
  // (so two steps never reach the processor at once), then the batch.
  capturePayment: 4,
  cancelPayment: 4,
  // A void reads the invoice (its status and period), then its subscription's plan and period (a
  // metered period is billed at its own end; a final invoice ends the subscription), then its batch.
  voidInvoice: 3,
  // A checkout session reads its user and plan (a 404 names the field), then its batch; an expire
  // reads the session (its status names the 409), then its batch.
  createCheckoutSession: 2,
  expireCheckoutSession: 2,
  // Usage reads the subscription (its plan, period and clock) before its one batch.
  createUsageRecord: 2,
  // A batch of usage events: the subscriptions it names are read (to answer each event), then one
  // batch holds its one INSERT … SELECT (which checks them again as it runs) and its answer.
  createUsageEvents: 2,
  // A credit note reads the invoice and its notes not void (to plan what each line is credited),
  // then its batch, whose guards re-check the sums; a refund of a payment reads the same (a refund
  // of an invoiced payment issues a credit note); a void reads the note (how it was paid out).
  createCreditNote: 2,
  createRefund: 2,
  voidCreditNote: 2,
};

describe("round trips of idempotent writes", () => {
  it("each mutating operation with an Idempotency-Key", async () => {
    const ops = (await operations()).filter((op) => op.method !== "get" && !op.isPublic);
    const counts: Record<string, number> = {};
    for (const op of ops) {
      const acct = await signup();
      const fx = await seed(acct);
      // The processor connection is the live secret key's; the one to remove is made first.
      const key = LIVE_SECRET_KEY_ONLY.has(op.operationId) ? acct.liveKey : acct.key;
      if (op.operationId === "disconnectProcessor") await connectStripe(acct);
      await warm(key);
      const path = op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path;
      const body = validBody(op, fx);
      const res = await call(path, { key, method: op.method.toUpperCase(), body, idempotencyKey: `rt-${op.operationId}` });
      expect(res.status, `${label(op)}: ${res.text}`).toBeLessThan(300);
      counts[op.operationId] = roundTrips(res);
      // The replay: the batch meets the key, and the stored answer is read.
      const replay = await call(path, { key, method: op.method.toUpperCase(), body, idempotencyKey: `rt-${op.operationId}` });
      expect(replay.headers.get("idempotent-replayed"), label(op)).toBe("true");
      expect(replay.status).toBe(res.status);
      // The same answer, but for a secret shown once (stored as null).
      expect(replay.body, label(op)).toEqual(withoutSecrets(res.body));
      expect(roundTrips(replay), label(op)).toBeLessThanOrEqual(3);
    }
    const expected = Object.fromEntries(ops.map((op) => [op.operationId, EXPECTED_ABOVE_ONE[op.operationId] ?? 1]));
    expect(counts).toEqual(expected);
  }, 120_000);
});
