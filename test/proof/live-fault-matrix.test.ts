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
import { OTHER_SHARD, TEST_SHARD, env, envOf } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { call, fetchWith, signup } from "../support/http";
import { renewChunk } from "../../src/billing/renewals";
import { settlePayout } from "../../src/payments/settle-payout";
import { settleRefund } from "../../src/payments/settle-refund";
import { createPlan } from "../support/fixtures";
import { card } from "../support/cards";
import { makeDue } from "../support/clock";
import { droppingQueue, runJobs } from "../support/queue";
import { type FaultRule } from "../support/fake-stripe";
import { faultyD1, sqlMatches } from "../support/faults";
import {
  type LiveAccount,
  STRIPE_CARDS,
  connectStripe,
  deliverStripeEvents,
  expectOneKeyPerObject,
  expectSpecClean,
  holdStripe,
  installFakeStripe,
  liveSubscription,
  livePayout,
  payableUser,
  paymentIntent,
  sentForPayout,
  skipStripeEvents,
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
      if (fault.charges === "authentication") {
        // The payer is there: the charge is made again on session (src/payments/charge.ts onSession),
        // which this card, asking once, lets through: one charge, one active subscription.
        expect(res.status, res.text).toBe(201);
        expect(res.body.status).toBe("active");
        expect(intents.filter((i) => i.status === "succeeded")).toHaveLength(1);
        expect(subs).toHaveLength(1);
      } else if (fault.charges) {
        expect(res.status, res.text).toBe(402);
        expect(res.body.error.decline_code).toBe("card_declined");
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
      if (fault.charges === "authentication") {
        // On session, authentication asked is the payer's to give (3-D Secure): nothing held yet.
        expect(res.status, res.text).toBe(201);
        expect(res.body).toMatchObject({ status: "requires_action", next_action: { type: "redirect_to_url" } });
        expect(intents.map((i) => i.status)).toEqual(["requires_action"]);
        expect(payments.map((p) => [p.status, p.amount_capturable])).toEqual([["requires_action", 0]]);
      } else if (fault.charges) {
        expect(res.status, res.text).toBe(402);
        expect(res.body.error.decline_code).toBe("card_declined");
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

// Issue 33: a disconnect (DELETE /api/processor) and an account move (drain_seconds 0) while each
// kind of live money is at Stripe, its answer held there. Each case has its own account (a move
// takes it to the other shard). After each: nothing lost (what Stripe did is recorded where the
// account lives) and nothing moved twice (one charge, refund, transfer, payout or reversal at
// Stripe for the object, whatever was sent again).
describe("racing a disconnect and an account move", () => {
  type Race = "disconnect" | "move";
  interface Case {
    acct: LiveAccount;
    /** Which Stripe answer is held. */
    holds: (method: string, path: string) => boolean;
    /** Starts the money's operation (not awaited). */
    start: () => Promise<unknown>;
    /** Whatever the operation answered, drives it to its end on the shard the account lives on. */
    finish: (shard: number, started: unknown) => Promise<void>;
    /** Nothing lost, nothing twice. */
    check: () => Promise<void>;
  }
  const shardRow = (shard: number, table: string, id: string) => envOf(shard).DB.prepare(`SELECT * FROM ${table} WHERE id = ?`).bind(id).first<Record<string, any>>();
  const unlease = (shard: number, id: string) => envOf(shard).DB.prepare("UPDATE job_runs SET lease_until = 0 WHERE key LIKE ?").bind(`%${id}%`).run();

  async function fresh(name: string) {
    const account: LiveAccount = await signup(name);
    const connected = await connectStripe(account);
    const plan = (await createPlan({ id: account.id, key: account.liveKey }, { price: 20, currency: "usd" })).id as string;
    return { account, connected, plan };
  }

  const KINDS: Record<string, (race: Race) => Promise<Case>> = {
    "a first charge": async (race) => {
      const { account, plan } = await fresh(`First charge ${race}`);
      const user = await payableUser(fake, account, `First ${race}`);
      // No Idempotency-Key, the sharpest case: nothing but this request's own commit can record the charge.
      const body = { user_id: user.id, plan_id: plan, ...card(STRIPE_CARDS.succeeds) };
      return {
        acct: account,
        holds: paymentIntent,
        start: () => call("/subscriptions", { key: account.liveKey, body }),
        finish: async (_shard, started) => {
          const res = started as { status: number; text: string };
          expect(res.status, res.text).toBe(201);
        },
        check: async () => {
          expect([...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id && i.status === "succeeded")).toHaveLength(1);
          const subs = (await call(`/subscriptions?user_id=${user.id}`, { key: account.liveKey })).body.data;
          expect(subs.map((s: { status: string }) => s.status)).toEqual(["active"]);
          expect((await call(`/payments?subscription_id=${subs[0].id}`, { key: account.liveKey })).body.data).toHaveLength(1);
        },
      };
    },
    "a renewal": async (race) => {
      const { account, plan } = await fresh(`Renewal ${race}`);
      const { sub } = await liveSubscription(fake, account, plan, `Renew ${race}`);
      await makeDue(sub);
      return {
        acct: account,
        holds: paymentIntent,
        start: () => renewChunk(envOf(TEST_SHARD), [sub]),
        finish: async (shard) => {
          if ((await call(`/payments?subscription_id=${sub}`, { key: account.liveKey })).body.data.length === 2) return;
          // Its record was not written where the account lives: the period's claim, once its lease ran out, is taken over there.
          await envOf(shard).DB.prepare("UPDATE subscription_periods SET updated_at = '2000-01-01T00:00:00.000Z' WHERE subscription_id = ? AND period_index = 1 AND status = 'open'").bind(sub).run();
          await envOf(shard).DB.prepare("UPDATE subscriptions SET due_at = 0 WHERE id = ?").bind(sub).run();
          await renewChunk(envOf(shard), [sub]);
        },
        check: async () => {
          expect(succeeded((r) => r?.startsWith(`${sub}:period:1:`) ?? false)).toHaveLength(1);
          const payments = (await call(`/payments?subscription_id=${sub}`, { key: account.liveKey })).body.data as { status: string }[];
          expect(payments.map((p) => p.status)).toEqual(["completed", "completed"]);
          expect((await call(`/subscriptions/${sub}`, { key: account.liveKey })).body.status).toBe("active");
        },
      };
    },
    "a refund": async (race) => {
      const { account, plan } = await fresh(`Refund ${race}`);
      const { sub } = await liveSubscription(fake, account, plan, `Refund ${race}`);
      const payment = (await call(`/payments?subscription_id=${sub}`, { key: account.liveKey })).body.data[0];
      const refund = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/refunds", { key: account.liveKey, json: { payment_id: payment.id, amount: 700 } });
      expect(refund.status, refund.text).toBe(201);
      const job = { kind: "settleRefund" as const, refundId: refund.body.id as string };
      return {
        acct: account,
        holds: (method, path) => method === "POST" && path === "/v1/refunds",
        start: () => settleRefund(job, envOf(TEST_SHARD)),
        finish: async (shard) => {
          if ((await shardRow(shard, "refunds", job.refundId))!.status !== "pending") return;
          await unlease(shard, job.refundId);
          await settleRefund(job, envOf(shard));
        },
        check: async () => {
          expect([...fake.refunds.values()].filter((r) => r.metadata?.tender_reference === job.refundId)).toHaveLength(1);
          expect((await call(`/refunds/${job.refundId}`, { key: account.liveKey })).body.status).toBe("succeeded");
          expect((await call(`/payments/${payment.id}`, { key: account.liveKey })).body.amount_refunded).toBe(700);
        },
      };
    },
    "a payout's settlement": async (race) => {
      const { account } = await fresh(`Payout ${race}`);
      const payee = await payableUser(fake, account, `Payee ${race}`);
      const res = await livePayout(account, payee.id);
      expect(res.status, res.text).toBe(201);
      const job = { kind: "settlePayout" as const, payoutId: res.body.id as string };
      return {
        acct: account,
        holds: (method, path) => method === "POST" && path === "/v1/transfers",
        start: () => settlePayout(job, envOf(TEST_SHARD)),
        finish: async (shard) => {
          for (let attempt = 0; attempt < 3 && sentForPayout(fake, job.payoutId).payouts < 1; attempt++) {
            await unlease(shard, job.payoutId);
            await settlePayout(job, envOf(shard));
          }
        },
        check: async () => {
          expect(sentForPayout(fake, job.payoutId)).toEqual({ transfers: 1, payouts: 1 });
          expect((await call(`/payouts/${job.payoutId}`, { key: account.liveKey })).body.status).toBe("pending");
        },
      };
    },
    "a Stripe event (payout.failed, reversing its transfer)": async (race) => {
      const { account, connected } = await fresh(`Event ${race}`);
      const payee = await payableUser(fake, account, `Event payee ${race}`);
      const res = await livePayout(account, payee.id);
      expect(res.status, res.text).toBe(201);
      const payoutId = res.body.id as string;
      await settlePayout({ kind: "settlePayout", payoutId }, envOf(TEST_SHARD));
      const stripePayout = [...fake.payouts.values()].find((p) => p.metadata?.tender_reference === payoutId)!;
      skipStripeEvents(fake);
      fake.settlePayout(stripePayout.id, "paid");
      await deliverStripeEvents(fake, connected);
      fake.settlePayout(stripePayout.id, "failed", "account_closed");
      const failed = fake.events[fake.events.length - 1];
      expect(failed.type).toBe("payout.failed");
      return {
        acct: account,
        holds: (method, path) => method === "POST" && path.endsWith("/reversals"),
        start: () => deliverStripeEvents(fake, connected, { events: [failed] }),
        finish: async (_shard, started) => {
          const [answer] = started as { status: number }[];
          // Anything but a 2xx: Stripe sends the event again.
          if (answer.status !== 200) expect((await deliverStripeEvents(fake, connected, { events: [failed] }))[0].status).toBe(200);
        },
        check: async () => {
          expect((await call(`/payouts/${payoutId}`, { key: account.liveKey })).body.status).toBe("failed");
          const transfers = [...fake.transfers.values()].filter((t) => t.metadata?.tender_reference === payoutId);
          expect(transfers).toHaveLength(1);
          expect(transfers[0]).toMatchObject({ reversed: true, amount_reversed: 2500 });
          expect(fake.count("reversals", (r) => r.transfer === transfers[0].id)).toBe(1);
        },
      };
    },
  };

  for (const [kind, make] of Object.entries(KINDS)) {
    for (const race of ["disconnect", "move"] as const) {
      it(`${kind}, with ${race === "disconnect" ? "DELETE /api/processor" : "a move of the account"} while Stripe's answer is held`, { timeout: 30_000 }, async () => {
        ran++;
        const c = await make(race);
        const gate = holdStripe(fake, c.holds);
        const running = c.start().then((value) => ({ value }), (error: unknown) => ({ error }));
        await gate.reached;
        let shard = TEST_SHARD;
        if (race === "disconnect") {
          const removed = await call("/api/processor", { method: "DELETE", key: c.acct.liveKey });
          // Money at Stripe through the connection: refused, or (a payout already paid, its late
          // event) the connection's events still settle; never 200 while an object waits on it.
          if (kind !== "a Stripe event (payout.failed, reversing its transfer)") expect(removed.status, removed.text).toBe(409);
          gate.release();
        } else {
          let moved: { status: number; text: string } | undefined;
          const moving = call(`/api/accounts/${c.acct.id}/move`, { body: { to_shard: OTHER_SHARD, drain_seconds: 0 } }).then((res) => (moved = res));
          // The move runs while Stripe's answer is held: to its end, or (a first charge's claim) it waits.
          for (let i = 0; i < 60 && !moved; i++) await new Promise((resolve) => setTimeout(resolve, 50));
          gate.release();
          await moving;
          expect(moved!.status, moved!.text).toBe(200);
          shard = OTHER_SHARD;
        }
        const outcome = await running;
        if ("error" in outcome) console.log(`${kind} / ${race}: the held operation threw ${String(outcome.error)}`);
        await c.finish(shard, "value" in outcome ? outcome.value : undefined);
        await c.check();
        expectOneKeyPerObject(fake, `${kind} / ${race}`);
      });
    }
  }
});

// The claim a first charge takes before it calls Stripe (src/processor/in-flight.ts), under D1's
// faults: refused before commit, or committed with its answer lost. Either way Stripe is not
// called, no claim is left behind to hold the connection or a move, and the client's retry with
// the same Idempotency-Key charges once.
describe("a first charge's money claim under D1 faults", () => {
  for (const kind of ["fail_before_commit", "commit_then_throw"] as const) {
    it(`the claim's batch: ${kind}`, async () => {
      ran++;
      const account: LiveAccount = await signup(`Claim fault ${kind}`);
      await connectStripe(account);
      const plan = (await createPlan({ id: account.id, key: account.liveKey }, { price: 20, currency: "usd" })).id as string;
      const user = await payableUser(fake, account, `Claim ${kind}`);
      const key = `claim-fault-${kind}`;
      const json = { user_id: user.id, plan_id: plan, ...card(STRIPE_CARDS.succeeds) };
      const faulty = faultyD1(env.DB, { kind, when: (op) => sqlMatches(op, /^\s*insert\s+into\s+"money_claims"/i) });
      const first = await fetchWith({ DB: faulty } as never, "/subscriptions", { key: account.liveKey, json, headers: { "idempotency-key": key } });
      expect(first.status, first.text).toBe(500);
      expect([...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id)).toHaveLength(0);
      expect(Number(await env.DB.prepare("SELECT count(*) AS n FROM money_claims WHERE account_id = ?").bind(account.id).first("n"))).toBe(0);
      const retried = await call("/subscriptions", { key: account.liveKey, body: json, idempotencyKey: key });
      expect(retried.status, retried.text).toBe(201);
      expect([...fake.paymentIntents.values()].filter((i) => i.metadata?.tender_user === user.id && i.status === "succeeded")).toHaveLength(1);
      expect(Number(await env.DB.prepare("SELECT count(*) AS n FROM money_claims WHERE account_id = ?").bind(account.id).first("n"))).toBe(0);
    });
  }
});
