// Live money under Stripe's faults, at Tender's level (issue 20 §4): every live operation as a
// user or the background reaches it — a first charge (POST /subscriptions, retried with its
// Idempotency-Key as a client does), a renewal (the job, then the cron's settlement of a claim left
// unsettled), a refund (POST /refunds, then its job until it settles), a one-off payment (POST /payments with capture_method
// manual, then its capture or its cancel, each retried with its Idempotency-Key) and a payout (POST /payout,
// then its job until Stripe holds it) — under each fault the fake Stripe can make: 429 and 500 that
// the connector's retries absorb, 500s that outlast them (the outcome unknown), a timeout after
// success, and for charges a decline and a card that needs authentication. After each: no second
// charge, transfer, payout or refund at Stripe, the same Idempotency-Key on every send of one
// object, and Tender's record agreeing with Stripe's.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { call, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";
import { type FaultRule } from "../support/fake-stripe";
import {
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  expectOneKeyPerObject,
  expectSpecClean,
  installFakeStripe,
  liveSubscription,
  livePayout,
  payableUser,
  sentForPayout,
} from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
let acct: LiveAccount;
let planId: string;
let ran = 0;

beforeAll(async () => {
  acct = await signup("Live fault matrix");
  await connectStripe(acct);
  planId = (await createPlan({ id: acct.id, key: acct.liveKey }, { price: 20, currency: "usd" })).id;
});

afterAll(() => {
  expectSpecClean(fake);
  console.log(`live fault matrix: ${ran} (operation × Stripe fault) combinations`);
  stripe.restore();
});

type Fault = { name: string; rules: (operation: string) => FaultRule[]; charges?: "declined" | "authentication" };
const FAULTS: Fault[] = [
  // (a card fault is the next charge's behaviour, whatever the card)
  { name: "429 twice (retried by the connector)", rules: (operation) => [{ kind: "status", status: 429, operation, times: 2 }] },
  { name: "500 twice (retried by the connector)", rules: (operation) => [{ kind: "status", status: 500, operation, times: 2 }] },
  { name: "500 beyond the connector's retries (outcome unknown)", rules: (operation) => [{ kind: "status", status: 500, operation, times: 4 }] },
  { name: "a timeout after success", rules: (operation) => [{ kind: "timeout_after_success", operation, times: 1 }] },
  { name: "a decline", rules: () => [{ kind: "card", behaviour: "generic_decline", times: 1 }], charges: "declined" },
  { name: "a card that needs authentication", rules: () => [{ kind: "card", behaviour: "authentication_required", times: 1 }], charges: "authentication" },
];

const row = (table: string, id: string) => env.DB.prepare(`SELECT * FROM ${table} WHERE id = ?`).bind(id).first<Record<string, any>>();
const succeeded = (reference: (r: string | undefined) => boolean) => [...fake.paymentIntents.values()].filter((i) => reference(i.metadata?.tender_reference) && i.status === "succeeded");

/** A client's retries: the same request and Idempotency-Key until a definitive answer (the key's lock run out between). */
async function untilDefinitive(send: () => Promise<{ status: number; body: any; text: string }>, key: string) {
  let res = await send();
  for (let i = 0; i < 4 && (res.status === 500 || (res.status === 409 && res.body.error?.code === "idempotency_key_in_use")); i++) {
    await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
    res = await send();
  }
  return res;
}


describe("a first charge", () => {
  for (const fault of FAULTS) {
    it(`POST /subscriptions under ${fault.name}`, async () => {
      ran++;
      const user = await payableUser(fake, acct, `First ${ran}`);
      const key = `live-matrix-first-${ran}`;
      fake.inject(...fault.rules("POST /v1/payment_intents"));
      const res = await untilDefinitive(() => call("/subscriptions", { key: acct.liveKey, body: { user_id: user.id, plan_id: planId, ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: key }), key);
      const intents = [...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id);
      const subs = (await call(`/subscriptions?user_id=${user.id}`, { key: acct.liveKey })).body.data;
      if (fault.charges) {
        expect(res.status, res.text).toBe(402);
        expect(res.body.error.decline_code).toBe(fault.charges === "declined" ? "card_declined" : "authentication_required");
        expect(intents.filter((i) => i.status === "succeeded")).toHaveLength(0);
        expect(subs).toHaveLength(0);
      } else {
        expect(res.status, res.text).toBe(201);
        expect(intents.filter((i) => i.status === "succeeded")).toHaveLength(1);
        expect(subs).toHaveLength(1);
        const payments = (await call(`/payments?subscription_id=${subs[0].id}`, { key: acct.liveKey })).body.data;
        expect(payments.map((p: { status: string; amount: number }) => [p.status, p.amount])).toEqual([["completed", 2000]]);
      }
      expectOneKeyPerObject(fake, fault.name);
    });
  }
});

describe("a renewal", () => {
  for (const fault of FAULTS) {
    it(`the renewal job, then the cron's settlement, under ${fault.name}`, async () => {
      ran++;
      const { sub } = await liveSubscription(fake, acct, planId, `Renew ${ran}`);
      await makeDue(sub);
      fake.inject(...fault.rules("POST /v1/payment_intents"));
      await runJobs({ kind: "billing.renew", subscriptionIds: [sub] });
      const recorded = async () => (await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey })).body.data.length as number;
      if ((await recorded()) === 1) {
        // No attempt recorded: the outcome is unknown and the period's claim unsettled. Once its
        // lease has run out, the next run takes it over and sends the same reference.
        await env.DB.prepare("UPDATE subscription_periods SET updated_at = '2000-01-01T00:00:00.000Z' WHERE subscription_id = ? AND period_index = 1 AND status = 'open'").bind(sub).run();
        await makeDue(sub);
        await runJobs({ kind: "billing.renew", subscriptionIds: [sub] });
      }
      const forPeriod = succeeded((r) => r?.startsWith(`${sub}:period:1:`) ?? false);
      const payments = (await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey })).body.data as { status: string }[];
      const state = (await call(`/subscriptions/${sub}`, { key: acct.liveKey })).body;
      if (fault.charges) {
        expect(forPeriod).toHaveLength(0);
        expect(state.status).toBe("past_due");
        expect(payments.filter((p) => p.status === "completed")).toHaveLength(1);
      } else {
        expect(forPeriod).toHaveLength(1);
        expect(state.status).toBe("active");
        expect(payments.filter((p) => p.status === "completed")).toHaveLength(2);
      }
      const invoices = (await call(`/invoices?subscription_id=${sub}`, { key: acct.liveKey })).body.data;
      expect(invoices).toHaveLength(2);
      expectOneKeyPerObject(fake, fault.name);
    });
  }
});

describe("a refund", () => {
  for (const fault of FAULTS.filter((f) => !f.charges)) {
    it(`POST /refunds and its job under ${fault.name}`, async () => {
      ran++;
      const { sub } = await liveSubscription(fake, acct, planId, `Refund ${ran}`);
      const payment = (await call(`/payments?subscription_id=${sub}`, { key: acct.liveKey })).body.data[0];
      const res = await call("/refunds", { key: acct.liveKey, body: { payment_id: payment.id, amount: 700 } });
      expect(res.status, res.text).toBe(201);
      fake.inject(...fault.rules("POST /v1/refunds"));
      for (let attempt = 0; attempt < 3 && (await row("refunds", res.body.id))!.status === "pending"; attempt++) {
        await runJobs({ kind: "settleRefund", refundId: res.body.id });
        await env.DB.prepare("UPDATE job_runs SET lease_until = 0 WHERE key LIKE ?").bind(`%${res.body.id}%`).run();
      }
      const atStripe = [...fake.refunds.values()].filter((r) => r.metadata?.tender_reference === res.body.id);
      expect(atStripe).toHaveLength(1);
      expect(atStripe[0]).toMatchObject({ amount: 700, payment_intent: payment.processor_reference ?? atStripe[0].payment_intent });
      expect((await row("refunds", res.body.id))!.status).toBe("succeeded");
      expect((await row("payments", payment.id))!.amount_refunded).toBe(700);
      expectOneKeyPerObject(fake, fault.name);
    });
  }
});

describe("a payout", () => {
  for (const fault of FAULTS.filter((f) => !f.charges)) {
    for (const operation of ["POST /v1/transfers", "POST /v1/payouts"]) {
      it(`POST /payout and its job under ${fault.name} on ${operation}`, async () => {
        ran++;
        const payee = await payableUser(fake, acct, `Payee ${ran}`);
        const res = await livePayout(acct, payee.id);
        expect(res.status, res.text).toBe(201);
        fake.inject(...fault.rules(operation));
        for (let attempt = 0; attempt < 3 && sentForPayout(fake, res.body.id).payouts < 1; attempt++) {
          await runJobs({ kind: "settlePayout", payoutId: res.body.id });
          await env.DB.prepare("UPDATE job_runs SET lease_until = 0 WHERE key LIKE ?").bind(`%${res.body.id}%`).run();
        }
        expect(sentForPayout(fake, res.body.id)).toEqual({ transfers: 1, payouts: 1 });
        // Stripe holds it: pending until Stripe's payout.paid, as in the walk-through.
        expect((await row("payouts", res.body.id))!.status).toBe("pending");
        expectOneKeyPerObject(fake, fault.name);
      });
    }
  }
});

describe("a one-off payment", () => {
  const heldFor = (userId: string) => [...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === userId);
  // Stripe's 409 (another request holds the Idempotency-Key's lock) as well, here.
  const ONE_OFF_FAULTS: Fault[] = [...FAULTS, { name: "409 twice (Stripe's key lock, retried by the connector)", rules: (operation) => [{ kind: "status", status: 409, operation, times: 2 }] }];

  for (const fault of ONE_OFF_FAULTS) {
    it(`POST /payments (capture_method manual) under ${fault.name}`, async () => {
      ran++;
      const user = await payableUser(fake, acct, `One-off ${ran}`);
      const key = `live-matrix-oneoff-${ran}`;
      fake.inject(...fault.rules("POST /v1/payment_intents"));
      const res = await untilDefinitive(
        () => call("/payments", { key: acct.liveKey, body: { amount: 3000, currency: "usd", user_id: user.id, capture_method: "manual", ...card(STRIPE_CARDS.succeeds) }, idempotencyKey: key }),
        key,
      );
      const payments = (await call(`/payments?user_id=${user.id}`, { key: acct.liveKey })).body.data as { status: string; amount_capturable: number }[];
      const intents = heldFor(user.id);
      if (fault.charges) {
        expect(res.status, res.text).toBe(402);
        expect(res.body.error.decline_code).toBe(fault.charges === "declined" ? "card_declined" : "authentication_required");
        expect(intents.filter((i) => i.status === "requires_capture" || i.status === "succeeded")).toHaveLength(0);
        expect(payments.map((p) => p.status)).toEqual(["failed"]);
      } else {
        expect(res.status, res.text).toBe(201);
        expect(intents.filter((i) => i.status === "requires_capture")).toHaveLength(1);
        expect(intents.filter((i) => i.status === "succeeded")).toHaveLength(0);
        expect(payments.map((p) => [p.status, p.amount_capturable])).toEqual([["requires_capture", 3000]]);
      }
      expectOneKeyPerObject(fake, fault.name);
    });
  }

  for (const fault of ONE_OFF_FAULTS.filter((f) => !f.charges)) {
    for (const step of ["capture", "cancel"] as const) {
      it(`POST /payments/{id}/${step} under ${fault.name}`, async () => {
        ran++;
        const user = await payableUser(fake, acct, `Step ${ran}`);
        const made = await call("/payments", { key: acct.liveKey, body: { amount: 3000, currency: "usd", user_id: user.id, capture_method: "manual", ...card(STRIPE_CARDS.succeeds) } });
        expect(made.status, made.text).toBe(201);
        const key = `live-matrix-${step}-${ran}`;
        fake.inject(...fault.rules(`POST /v1/payment_intents/{intent}/${step}`));
        const res = await untilDefinitive(
          () => call(`/payments/${made.body.id}/${step}`, { key: acct.liveKey, body: step === "capture" ? { amount: 1500 } : {}, idempotencyKey: key }),
          key,
        );
        expect(res.status, res.text).toBe(200);
        const [intent] = heldFor(user.id);
        const payment = (await call(`/payments/${made.body.id}`, { key: acct.liveKey })).body;
        if (step === "capture") {
          expect(intent).toMatchObject({ status: "succeeded", amount_received: 1500 });
          expect(payment).toMatchObject({ status: "completed", amount_received: 1500, amount_capturable: 0 });
        } else {
          expect(intent).toMatchObject({ status: "canceled", amount_received: 0 });
          expect(payment).toMatchObject({ status: "canceled", amount_received: 0, amount_capturable: 0 });
        }
        // The step reached Stripe as one operation: every send of it carried the same key.
        const sends = fake.requests.filter((r) => r.operation === `POST /v1/payment_intents/{intent}/${step}` && r.path.includes(intent.id));
        expect(new Set(sends.map((r) => r.idempotencyKey)).size).toBe(1);
        const types = (await env.DB.prepare("SELECT type FROM events WHERE object_id = ? ORDER BY sequence").bind(made.body.id).all<{ type: string }>()).results.map((e) => e.type);
        expect(types).toEqual(["payment.authorized", step === "capture" ? "payment.completed" : "payment.canceled"]);
        expectOneKeyPerObject(fake, fault.name);
      });
    }
  }
});
