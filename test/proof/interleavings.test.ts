// Interleavings: two workers on the same money object, in orders fast-check's scheduler picks.
// Every D1 round trip of each worker (test/support/faults.ts faultyD1 with a gate), every
// processor call and answer (gatedProcessor) and every receiver answer waits on `s.schedule`, so
// each run is one ordering of the two workers' steps; the real local D1, queues and Durable
// Objects do the work. After each run the named invariants (test/support/invariants.ts) are
// checked. The seed is fixed in test/setup.ts; a failure prints the seed and path to replay it.
import { env } from "../support/env";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Bindings } from "../../src/env";
import { useClock } from "../../src/lib/clock";
import { settlePayout } from "../../src/payments/settle-payout";
import { settleStaleClaims } from "../../src/billing/claims";
import { useProcessor } from "../../src/processor";
import { processDelivery } from "../../src/webhooks/consumer";
import { type Account, type CallResult, call, fetchWith, signup, withEnv } from "../support/http";
import { dueSubscription, payoutWithoutSettlement } from "../support/fixtures";
import { cardFields, PROOF_CARD } from "../support/cards";
import { countOf, one } from "../support/db";
import { RECEIVER_ORIGIN } from "../support/receiver";
import { invariants } from "../support/checks";
import {
  type D1Op,
  type Ledger,
  type Receivers,
  compressTimeouts,
  faultyD1,
  gatedProcessor,
  installReceivers,
  isWrite,
  ledgerProcessor,
  recordingQueue,
  renewChunk,
} from "../support/faults";
import {
  acknowledgedDeliveriesDelivered,
  atMostOneProcessorCallPer,
  everyEventDeliveredOrFailed,
  mark,
  paymentsEqualCharges,
  payoutsSentOnce,
  refundsNeverExceedPayment,
} from "../support/invariants";

const NUM_RUNS = 15;
const ledger: Ledger = ledgerProcessor();
let receivers: Receivers;
let timeouts: { restore(): void };
let acct: Account;
let user: string;
let plan: string;
let endpoint: string;
let interleavings = 0;

beforeAll(async () => {
  ledger.install();
  receivers = installReceivers(RECEIVER_ORIGIN, "ok");
  timeouts = compressTimeouts(2_000);
  acct = await signup("Interleavings");
  user = (await call("/api/users", { key: acct.key, body: { name: "Race", email: "race@example.com" } })).body.id;
  plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Race", price: 19.99, currency: "usd", interval: "month" } })).body.id;
  const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/race`, events: ["customer.created"] } });
  expect(hook.status, hook.text).toBe(201);
  endpoint = hook.body.id;
});

afterEach(() => {
  useClock();
  ledger.install();
  ledger.inject();
  receivers.gate(null);
  receivers.answer("ok");
});

afterAll(() => {
  console.log(`interleavings: ${interleavings} runs`);
  timeouts?.restore();
  receivers?.restore();
  ledger.uninstall();
});

type Scheduler = fc.Scheduler;
const short = (op: D1Op) => `${op.kind} ${op.sql.map((q) => q.trim().slice(0, 36)).join(" | ")}`.slice(0, 120);

/** An env for one worker whose every D1 round trip waits for the scheduler. */
const workerEnv = (s: Scheduler, who: string, overrides: Partial<Bindings> = {}) =>
  withEnv({ DB: faultyD1(env.DB, [], { gate: (op) => s.schedule(Promise.resolve(`${who}: ${short(op)}`)) }), ...overrides });

/** Every processor call and answer waits for the scheduler; the ledger records them. */
const scheduleProcessor = (s: Scheduler) => useProcessor((inner) => gatedProcessor(ledger.wrap(inner), (label) => s.schedule(Promise.resolve(label))));

async function property(name: string, run: (s: Scheduler) => Promise<void>) {
  await fc.assert(
    fc.asyncProperty(fc.scheduler(), async (s) => {
      interleavings++;
      try {
        await run(s);
      } catch (error) {
        throw new Error(`${name}: ${error instanceof Error ? error.message : String(error)}`);
      } finally {
        ledger.install();
        receivers.gate(null);
      }
    }),
    { numRuns: NUM_RUNS, endOnFailure: true },
  );
}

const settled = <T>(p: Promise<T>) => p.then((value) => ({ value, error: null as unknown }), (error: unknown) => ({ value: null as T | null, error }));

async function pastDueSubscription(): Promise<{ id: string; at: number }> {
  const id = await dueSubscription(acct, user, plan);
  ledger.inject({ kind: "decline", method: "chargeToken", when: (c) => c.reference.startsWith(`${id}:`) });
  expect(await renewChunk(env, [id], Date.now())).toEqual(["past_due"]);
  ledger.inject();
  const row = await one<{ due_at: number }>("SELECT due_at FROM subscriptions WHERE id = ?", id);
  return { id, at: row.due_at + 1000 };
}

/** Every period of the subscription that the processor was paid for is a paid period the subscription advanced past. */
async function chargedPeriodsAdvanced(subscriptionId: string) {
  const rows = (
    await env.DB.prepare(
      `SELECT p.charge_reference, sp.status AS period_status, sp.period_index, s.periods_billed, s.status
       FROM payments p JOIN subscriptions s ON s.id = p.subscription_id
       LEFT JOIN subscription_periods sp ON sp.payment_id = p.id
       WHERE p.subscription_id = ? AND p.status = 'completed'`,
    )
      .bind(subscriptionId)
      .all<{ charge_reference: string; period_status: string | null; period_index: number | null; periods_billed: number; status: string }>()
  ).results;
  const violations = rows
    .filter((r) => r.period_status !== "paid" || r.period_index === null || r.periods_billed <= r.period_index)
    .map((r) => `charge ${r.charge_reference} is recorded, but its period is ${r.period_status ?? "not linked"} (periods_billed ${r.periods_billed}, subscription ${r.status})`);
  if (violations.length > 0) throw new Error(`chargedPeriodsAdvanced: ${violations.join("; ")}`);
}

const clean = (res: CallResult, context: string) => {
  if (res.status < 300) return;
  expect(res.body, `${context}: ${res.status} ${res.text.slice(0, 200)}`).toMatchObject({ error: { type: expect.any(String), code: expect.any(String) } });
  expect(res.text, context).not.toMatch(/D1_ERROR|\n\s+at /);
};

describe("two workers on one object", () => {
  it("the same payout: two settlement messages at once send it to the processor once", async () => {
    await property("two settlePayout", async (s) => {
      const payout = (await payoutWithoutSettlement(acct)).id;
      const since = await mark(ledger);
      scheduleProcessor(s);
      const job = { kind: "settlePayout" as const, payoutId: payout };
      const both = Promise.all([settled(settlePayout(job, workerEnv(s, "A"))), settled(settlePayout(job, workerEnv(s, "B")))]);
      const outcomes = await s.waitFor(both);
      ledger.install();
      await ledger.idle();
      expect(outcomes.map((o) => o.error).filter(Boolean), "neither worker fails").toEqual([]);
      expect(outcomes.map((o) => o.value).sort()).toEqual(["paid", "skipped"]);
      expect(await countOf("SELECT count(*) AS n FROM events WHERE type = 'payout.paid' AND json_extract(payload, '$.data.id') = ?", payout)).toBe(1);
      await invariants("same payout", [() => payoutsSentOnce(ledger, { since }), () => atMostOneProcessorCallPer(ledger, "payout", { since, once: true })]);
    });
  }, 60_000);

  it("the same period: two renewal runs charge it once", async () => {
    await property("two renewChunk", async (s) => {
      const id = await dueSubscription(acct, user, plan);
      const since = await mark(ledger);
      scheduleProcessor(s);
      const now = Date.now();
      const outcomes = await s.waitFor(Promise.all([settled(renewChunk(workerEnv(s, "A"), [id], now)), settled(renewChunk(workerEnv(s, "B"), [id], now))]));
      ledger.install();
      await ledger.idle();
      expect(outcomes.map((o) => o.error).filter(Boolean), "neither run fails").toEqual([]);
      expect(outcomes.map((o) => o.value?.[0]).sort()).toEqual(["renewed", "skipped"]);
      expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed'", id)).toBe(2);
      await invariants("same period", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true }),
        () => chargedPeriodsAdvanced(id),
      ]);
    });
  }, 60_000);

  it("a renewal against DELETE /subscriptions/{id}: no charge lands under the cancel", async () => {
    await property("renewal vs cancel", async (s) => {
      const id = await dueSubscription(acct, user, plan);
      const since = await mark(ledger);
      scheduleProcessor(s);
      const now = Date.now();
      const [renewal, cancel] = await s.waitFor(
        Promise.all([
          settled(renewChunk(workerEnv(s, "renewal"), [id], now)),
          fetchWith({ DB: workerEnv(s, "cancel").DB, JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, `/subscriptions/${id}`, { method: "DELETE", key: acct.key }),
        ]),
      );
      ledger.install();
      await ledger.idle();
      expect(renewal.error, "the renewal run does not fail").toBeNull();
      clean(cancel, "DELETE");
      if (cancel.status !== 200) expect(cancel.body.error.code, "a refused cancel says a charge is in progress").toBe("charge_in_progress");
      const sub = await one<{ status: string; periods_billed: number }>("SELECT status, periods_billed FROM subscriptions WHERE id = ?", id);
      if (cancel.status === 200) expect(sub.status, "an answered cancel holds").toBe("canceled");
      await invariants("renewal vs cancel", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true }),
        () => chargedPeriodsAdvanced(id),
      ]);
    });
  }, 60_000);

  it("a renewal against DELETE /subscriptions/{id}?at_period_end=true: never charged for a period the answer said would not come", async () => {
    await property("renewal vs cancel at period end", async (s) => {
      const id = await dueSubscription(acct, user, plan);
      const since = await mark(ledger);
      scheduleProcessor(s);
      const now = Date.now();
      const [renewal, cancel] = await s.waitFor(
        Promise.all([
          settled(renewChunk(workerEnv(s, "renewal"), [id], now)),
          fetchWith({ DB: workerEnv(s, "cancel").DB, JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, `/subscriptions/${id}?at_period_end=true`, {
            method: "DELETE",
            key: acct.key,
          }),
        ]),
      );
      ledger.install();
      await ledger.idle();
      expect(renewal.error, "the renewal run does not fail").toBeNull();
      clean(cancel, "DELETE ?at_period_end=true");
      const sub = await one<{ status: string; cancel_at_period_end: number; periods_billed: number }>("SELECT status, cancel_at_period_end, periods_billed FROM subscriptions WHERE id = ?", id);
      if (cancel.status === 200) {
        expect(cancel.body.cancel_at_period_end).toBe(true);
        // The answer promised the subscription ends at its next_billing_date: no period starting
        // there (or later) may be charged.
        const end = cancel.body.next_billing_date as string;
        const charged = await countOf(
          "SELECT count(*) AS n FROM subscription_periods sp JOIN payments p ON p.id = sp.payment_id WHERE sp.subscription_id = ? AND sp.period_start >= ? AND p.status = 'completed'",
          id,
          end,
        );
        expect(charged, `charged for a period starting at or after ${end}, when the cancel answered it ends then`).toBe(0);
        expect(sub.status === "canceled" || sub.cancel_at_period_end === 1, "the cancel at period end is kept").toBe(true);
      }
      await invariants("renewal vs cancel at period end", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true }),
        () => chargedPeriodsAdvanced(id),
      ]);
    });
  }, 60_000);

  it("a dunning retry against PUT /subscriptions/{id} with a new card on a past_due subscription: the period is charged once", async () => {
    await property("dunning retry vs card update", async (s) => {
      const { id, at } = await pastDueSubscription();
      const since = await mark(ledger);
      scheduleProcessor(s);
      useClock({ now: () => at });
      const [retry, update] = await s.waitFor(
        Promise.all([
          settled(renewChunk(workerEnv(s, "retry"), [id], at)),
          fetchWith({ DB: workerEnv(s, "update").DB, JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, `/subscriptions/${id}`, {
            method: "PUT",
            key: acct.key,
            json: cardFields("5555555555554444", "739"),
          }),
        ]),
      );
      ledger.install();
      await ledger.idle();
      expect(retry.error, "the dunning run does not fail").toBeNull();
      clean(update, "PUT new card");
      const periodPayments = await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", id, `${id}:period:1:%`);
      expect(periodPayments, "the unpaid period is paid once").toBe(1);
      expect((await one<{ status: string }>("SELECT status FROM subscriptions WHERE id = ?", id)).status).toBe("active");
      await invariants("dunning retry vs card update", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true }),
        () => chargedPeriodsAdvanced(id),
      ]);
    });
  }, 60_000);

  it("a card update's claim left unknown: the cron's settlement of claims against the due renewal run charge its card once", async () => {
    await property("claim settlement vs renewal run", async (s) => {
      const { id } = await pastDueSubscription();
      // The card update's charge never answers: 500 outcome_unknown, and its claim is given back.
      ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: (c) => c.reference.startsWith(`${id}:`) });
      const put = await fetchWith({ JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, `/subscriptions/${id}`, { method: "PUT", key: acct.key, json: cardFields("5555555555554444", "739") });
      expect(put.status, put.text).toBe(500);
      ledger.inject();
      await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(Date.now() - 1000, id).run();
      const since = await mark(ledger);
      const at = Date.now() + 11 * 60_000;
      useClock({ now: () => at });
      scheduleProcessor(s);
      const [cron, renewal] = await s.waitFor(
        Promise.all([settled(settleStaleClaims(workerEnv(s, "cron", { DELIVERY_QUEUE: recordingQueue() }), at)), settled(renewChunk(workerEnv(s, "renewal", { DELIVERY_QUEUE: recordingQueue() }), [id], at))]),
      );
      ledger.install();
      await ledger.idle();
      expect([cron.error, renewal.error].filter(Boolean), "neither worker fails").toEqual([]);
      const periodPayments = await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", id, `${id}:period:1:%`);
      expect(periodPayments, "the unpaid period is paid once, by the card update's charge").toBe(1);
      expect(await one<{ status: string; card_last4: string }>("SELECT status, card_last4 FROM subscriptions WHERE id = ?", id)).toMatchObject({ status: "active", card_last4: "4444" });
      await invariants("claim settlement vs renewal run", [
        () => paymentsEqualCharges(ledger, { since }),
        () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true }),
        () => chargedPeriodsAdvanced(id),
      ]);
    });
  }, 60_000);

  it("the same delivery: two messages at once send it once and keep its 2xx", async () => {
    await property("two processDelivery", async (s) => {
      const queue = recordingQueue();
      const res = await fetchWith({ DELIVERY_QUEUE: queue }, "/api/users", { key: acct.key, json: { name: "Hooked", email: "hooked@example.com" } });
      expect(res.status, res.text).toBe(201);
      const [{ deliveryId }] = queue.sent as { deliveryId: string }[];
      const eventId = (await one<{ event_id: string }>("SELECT event_id FROM webhook_deliveries WHERE id = ?", deliveryId)).event_id;
      const since = await mark(ledger);
      receivers.gate((request) => s.schedule(Promise.resolve(`receiver answers ${request.headers["tender-delivery-attempt"]}`)));
      const outcomes = await s.waitFor(Promise.all([settled(processDelivery(workerEnv(s, "A"), deliveryId)), settled(processDelivery(workerEnv(s, "B"), deliveryId))]));
      receivers.gate(null);
      expect(outcomes.map((o) => o.error).filter(Boolean), "neither worker fails").toEqual([]);
      const sends = receivers.received.filter((r) => r.headers["webhook-id"] === eventId);
      expect(sends.length, "one send while an attempt is in flight").toBe(1);
      expect((await one<{ status: string }>("SELECT status FROM webhook_deliveries WHERE id = ?", deliveryId)).status, "the 2xx is kept").toBe("delivered");
      await invariants("same delivery", [() => acknowledgedDeliveriesDelivered({ since }), () => everyEventDeliveredOrFailed({ since })]);
    });
  }, 60_000);

  it("the same Idempotency-Key: two POST /payout, the first's commit answer lost, make one payout", async () => {
    await property("two POST /payout, one key", async (s) => {
      const key = `race-${crypto.randomUUID()}`;
      const body = { amount: 4321, currency: "usd", description: "race", ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) };
      const lostAnswer = faultyD1(
        env.DB,
        { kind: "commit_then_throw", when: (op) => isWrite(op) && op.sql.some((q) => /insert into "payouts"/i.test(q)) },
        { gate: (op) => s.schedule(Promise.resolve(`first: ${short(op)}`)) },
      );
      const request = (DB: D1Database) =>
        fetchWith({ DB, JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, "/payout", { key: acct.key, json: body, headers: { "idempotency-key": key } });
      const answers = await s.waitFor(Promise.all([request(lostAnswer), request(workerEnv(s, "second").DB)]));
      answers.forEach((a, i) => clean(a, `answer ${i}`));
      const ok = answers.filter((a) => a.status < 300);
      for (const a of answers.filter((x) => x.status >= 300)) {
        expect(["idempotency_key_in_use", "outcome_unknown"], `answer ${a.status} ${a.text.slice(0, 200)}`).toContain(a.body.error.code);
      }
      expect(new Set(ok.map((a) => a.body.id)).size, "every success names the same payout").toBeLessThanOrEqual(1);
      const made = await countOf("SELECT count(*) AS n FROM payouts WHERE account_id = ? AND amount = 4321 AND description = 'race' AND created_at >= ?", acct.id, new Date(Date.now() - 60_000).toISOString());
      const replay = await fetchWith({ JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, "/payout", { key: acct.key, json: body, headers: { "idempotency-key": key } });
      if (replay.status < 300) {
        expect(replay.headers.get("idempotent-replayed"), "a later retry replays").toBe("true");
        if (ok[0]) expect(replay.body.id).toBe(ok[0].body.id);
      } else {
        expect(replay.body.error.code, `a later retry replays or is told the key is in use: ${replay.text.slice(0, 200)}`).toBe("idempotency_key_in_use");
      }
      await env.DB.prepare("UPDATE payouts SET description = 'race done' WHERE account_id = ? AND description = 'race'").bind(acct.id).run();
      expect(made, "one payout for the key").toBe(1);
      await invariants("same Idempotency-Key", [() => refundsNeverExceedPayment(), () => atMostOneProcessorCallPer(ledger, "idempotency_key")]);
    });
  }, 60_000);

  afterAll(() => {
    // 7 properties × NUM_RUNS, unless one stopped at its first failure.
    expect(interleavings).toBeGreaterThan(0);
  });
});
