// Fifth-round attacks on the money and delivery paths of the issue 19 fixes: the cron's settlement
// of unsettled claims against renewals, cancels, card updates, test clock advances and itself;
// lost replies of a past-due card update retried with and without an Idempotency-Key; a
// redelivery made while the consumer is delivering; and the data of the notifications that
// renewals and claim settlement commit. Each runs against the real local D1, queues and Durable
// Objects, with the processor ledger of test/support/faults.ts; invariants from
// test/support/invariants.ts are checked after each.
import { env } from "../support/env";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Bindings } from "../../src/env";
import { settleStaleClaims } from "../../src/billing/claims";
import { renewChunk } from "../../src/billing/renewals";
import { useClock } from "../../src/lib/clock";
import { useProcessor } from "../../src/processor";
import type { Processor } from "../../src/processor/types";
import { processDelivery } from "../../src/webhooks/consumer";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { type Account, type CallResult, call, expectError, fetchWith, signup, withEnv } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { CARDS, captureLogs, cardFields } from "../support/cards";
import { advance, createClock, makeDue } from "../support/clock";
import { countOf, one } from "../support/db";
import { type D1Op, type Ledger, type Receivers, faultyD1, gatedProcessor, installReceivers, ledgerProcessor, recordingQueue, writesTo } from "../support/faults";
import { atMostOneProcessorCallPer, everyEventDeliveredOrFailed, mark, paymentsEqualCharges } from "../support/invariants";
import { invariants } from "../support/checks";
import { RECEIVER_ORIGIN } from "../support/receiver";

// Everything logged meanwhile (processor timeouts, unknown outcomes) is kept, and must hold no
// card number or CVV sent.
let logs: ReturnType<typeof captureLogs>;
beforeEach(() => {
  logs = captureLogs();
});
afterEach(() => {
  useProcessor();
  useClock();
  try {
    logs.expectNoCardData();
  } finally {
    logs.restore();
  }
});

const MINUTE = 60_000;
const LEASE = 10 * MINUTE;

/**
 * A processor ledger (test/support/faults.ts) that also records which card each reference was
 * sent with: a reference is one charge, so sending it again with another card is asking the
 * processor for a different charge under the same idempotency key (Stripe refuses that with an
 * idempotency_error; a lenient processor answers the first charge, which then gets recorded as a
 * charge of the other card).
 */
function cardLedger() {
  const ledger = ledgerProcessor();
  const tokens = new Map<string, Set<string>>();
  const note = (reference: string, token: string) => tokens.set(reference, new Set([...(tokens.get(reference) ?? []), token]));
  const install = (around?: (p: Processor) => Processor) =>
    useProcessor((inner) => {
      const recorded: Processor = {
        ...inner,
        chargeToken: (args) => {
          note(args.reference, args.token);
          return inner.chargeToken(args);
        },
      };
      const wrapped = ledger.wrap(recorded);
      return around ? around(wrapped) : wrapped;
    });
  /** Every reference was sent with one card only. */
  const oneCardPerReference = () => {
    const violations = [...tokens].filter(([, set]) => set.size > 1).map(([reference, set]) => `${reference} sent with ${set.size} different cards`);
    if (violations.length > 0) throw new Error(`oneCardPerReference: ${violations.join("; ")}`);
  };
  return { ledger, install, oneCardPerReference, tokens };
}

/** The cron's settlement of claims and the renewal run, at `at` on the wall clock. */
async function settleAt(at: number, overrides: Partial<Bindings> = {}) {
  useClock({ now: () => at });
  try {
    return await settleStaleClaims(withEnv({ DELIVERY_QUEUE: recordingQueue(), JOB_QUEUE: recordingQueue(), ...overrides }), at);
  } finally {
    useClock();
  }
}

const subscriptionRow = (id: string) =>
  one<{ status: string; periods_billed: number; dunning_attempts: number; card_last4: string; processor_token: string }>("SELECT * FROM subscriptions WHERE id = ?", id);

/** A subscription whose first renewal was declined: past_due, its next dunning retry a day away. */
async function pastDue(acct: Account, ledger: Ledger) {
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id);
  await makeDue(sub.id);
  ledger.inject({ kind: "decline", method: "chargeToken", when: (c) => c.reference.startsWith(`${sub.id}:`) });
  expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
  ledger.inject();
  return sub;
}

describe("a renewal whose charge is unknown, then new card details", () => {
  it("the claim's charge is settled with the card it was sent with: new card details meanwhile answer 409 charge_in_progress, and the reference never goes out with another card", async () => {
    const { ledger, install, oneCardPerReference } = cardLedger();
    install();
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const since = await mark(ledger);
    await makeDue(sub.id);
    // The renewal's charge never answers (after moving the money): its claim stays, unsettled.
    ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: (c) => c.reference.startsWith(`${sub.id}:`) });
    await expect(renewChunk(env, [sub.id])).rejects.toThrow(/timeout/);
    ledger.inject();
    const start = Date.now();

    // New card details while that charge's outcome is unknown.
    const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, "739") });
    expectError(put, 409, "invalid_request_error", "charge_in_progress");
    expect((await subscriptionRow(sub.id)).card_last4, "the card is not replaced under the charge").toBe("4242");

    await settleAt(start + LEASE + MINUTE);
    await ledger.idle();
    expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2 });
    // The payment of the period records the card that was charged: the first card (visa, 4242).
    const payment = await one<{ card_last4: string; status: string }>(
      "SELECT card_last4, status FROM payments WHERE subscription_id = ? AND charge_reference = ?",
      sub.id,
      `${sub.id}:period:1:attempt:1`,
    );
    expect(payment).toMatchObject({ status: "completed", card_last4: "4242" });
    await invariants("renewal unknown, then a card update", [
      oneCardPerReference,
      () => paymentsEqualCharges(ledger, { since }),
      () => atMostOneProcessorCallPer(ledger, "period_attempt", { since }),
    ]);
    // Once settled, new card details go through.
    const later = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, "739") });
    expect(later.status, later.text).toBe(200);
    expect(later.body.card.last4).toBe("4444");
  });
});

describe("notifications committed by renewals and claim settlement carry the committed row", () => {
  /** The subscription notifications of a subscription, newest first, with their data. */
  const notifications = async (acct: Account, id: string) =>
    ((await call(`/api/events?object_id=${id}&limit=100`, { key: acct.key })).body.data as { type: string; data: Record<string, any>; payload: Record<string, any> }[]).filter((e) =>
      e.type.startsWith("subscription_"),
    );

  it("a renewal chunk of several subscriptions, renewed, dunned and canceled: each notification's data is its subscription as the chunk committed it", async () => {
    const ledger = ledgerProcessor();
    ledger.install();
    const acct = await signup();
    const plan = await createPlan(acct);
    const subs = [];
    for (const name of ["Renewed One", "Renewed Two", "Dunned Three"]) {
      const user = await createUser(acct, { name, email: `${name.split(" ")[1].toLowerCase()}@example.com` });
      subs.push(await subscribed(acct, user.id, plan.id));
    }
    const [, , dunned] = subs;
    for (const sub of subs) await makeDue(sub.id);
    ledger.inject({ kind: "decline", method: "chargeToken", when: (c) => c.reference.startsWith(`${dunned.id}:`) });
    expect(await renewChunk(env, subs.map((s) => s.id))).toEqual(["renewed", "renewed", "past_due"]);
    for (const sub of subs) {
      const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
      const [latest] = await notifications(acct, sub.id);
      expect(latest.type).toBe("subscription_renewal");
      expect(latest.data, `${sub.id}: data is the row as committed`).toEqual(read.body);
      expect(latest.payload.data).toEqual(read.body);
      expect(latest.payload.status).toBe(sub.id === dunned.id ? "failed" : "success");
    }
    // The dunning runs out: the last attempt cancels, and its notification shows the canceled row.
    for (let attempt = 0; attempt < 3; attempt++) {
      await makeDue(dunned.id);
      await renewChunk(env, [dunned.id]);
    }
    const read = await call(`/subscriptions/${dunned.id}`, { key: acct.key });
    expect(read.body).toMatchObject({ status: "canceled", cancel_at_period_end: false });
    const [canceled, failed] = await notifications(acct, dunned.id);
    expect(canceled.type).toBe("subscription_canceled");
    expect(canceled.data).toEqual(read.body);
    expect(failed.type).toBe("subscription_renewal");
    expect(failed.data).toEqual(read.body);
    ledger.uninstall();
  });

  it("the cron's settlement of a card update's claim: subscription_renewal and subscription_updated show the subscription active on the new card", async () => {
    const { ledger, install, oneCardPerReference } = cardLedger();
    install();
    const acct = await signup();
    const sub = await pastDue(acct, ledger);
    const start = Date.now();
    ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: (c) => c.reference.startsWith(`${sub.id}:`) });
    const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, "739") });
    expect(put.status, put.text).toBe(500);
    ledger.inject();
    expect(await settleAt(start + LEASE)).toContain("renewed");
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body).toMatchObject({ status: "active", card: { last4: "4444" } });
    const [updated, renewal] = await notifications(acct, sub.id);
    expect([updated.type, renewal.type]).toEqual(["subscription_updated", "subscription_renewal"]);
    for (const event of [updated, renewal]) {
      expect(event.data, event.type).toEqual(read.body);
      expect(event.payload.data).toEqual(read.body);
      expect(event.payload.subscription_id).toBe(sub.id);
    }
    const payment = (await call(`/payments?subscription_id=${sub.id}&limit=1`, { key: acct.key })).body.data[0];
    expect(payment).toMatchObject({ status: "completed", card: { last4: "4444" } });
    oneCardPerReference();
  });
});

describe("a past-due card update whose reply is lost, retried", () => {
  const settlementBatch = (op: D1Op) => op.kind === "batch" && writesTo(op, "payments");

  for (const withKey of [true, false]) {
    it(`${withKey ? "with" : "without"} an Idempotency-Key: the unpaid period is charged once, and the retry answers the subscription active`, async () => {
      const { ledger, install } = cardLedger();
      install();
      const acct = await signup();
      const sub = await pastDue(acct, ledger);
      const since = await mark(ledger);
      const headers = withKey ? { "idempotency-key": `lost-${sub.id}` } : undefined;
      // Every try of the settlement commits, and its answer is lost.
      const db = faultyD1(env.DB, { kind: "commit_then_throw", when: settlementBatch, times: 10 });
      const first = await fetchWith({ DB: db }, `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: cardFields(CARDS.mastercard, "739"), headers });
      expect(db.fired.length, "the fault hit the settlement").toBeGreaterThan(0);
      expect([200, 500], first.text).toContain(first.status);
      const retry = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, "739"), idempotencyKey: headers?.["idempotency-key"] });
      if (retry.status === 409) expect(retry.body.error.code).toBe("idempotency_key_in_use");
      else {
        expect(retry.status, retry.text).toBe(200);
        expect(retry.body).toMatchObject({ status: "active", card: { last4: "4444" } });
      }
      await settleAt(Date.now() + LEASE + MINUTE);
      await ledger.idle();
      expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2 });
      expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", sub.id, `${sub.id}:period:1:%`)).toBe(1);
      await invariants("lost reply", [() => paymentsEqualCharges(ledger, { since }), () => atMostOneProcessorCallPer(ledger, "period_attempt", { since })]);
    });
  }
});

describe("a redelivery made while the consumer is delivering", () => {
  async function setup(receivers: Receivers) {
    const acct = await signup();
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/racing`, events: ["customer.created"] } });
    expect(hook.status, hook.text).toBe(201);
    const queue = recordingQueue();
    const user = await fetchWith({ DELIVERY_QUEUE: queue }, "/api/users", { key: acct.key, json: { name: "Racing", email: "racing@example.com" } });
    expect(user.status).toBe(201);
    const [{ deliveryId }] = queue.sent as { deliveryId: string }[];
    const eventId = (await one<{ event_id: string }>("SELECT event_id FROM webhook_deliveries WHERE id = ?", deliveryId)).event_id;
    receivers.answer("fail5xx");
    return { acct, endpoint: hook.body.id as string, deliveryId, eventId };
  }

  /** Holds the receiver's answer to the next request until `release()`. */
  function holdReceiver(receivers: Receivers) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const received = new Promise<void>((resolve) => (arrived = resolve));
    receivers.gate(async () => {
      arrived();
      await released;
    });
    return { received, release };
  }

  for (const moment of ["the last attempt of its window", "an attempt mid-window"]) {
    it(`to one endpoint, during ${moment} that then fails: the redelivery is not lost, it goes out at once with a fresh window`, async () => {
      const receivers = installReceivers(RECEIVER_ORIGIN, "fail5xx");
      try {
        const { acct, endpoint, deliveryId, eventId } = await setup(receivers);
        const last = moment.startsWith("the last");
        // The delivery has been failing for (almost) 24 hours, or for a minute.
        const firstAttemptAt = Date.now() - (last ? 24 * 3_600_000 - 5 * MINUTE : MINUTE);
        await env.DB.prepare("UPDATE webhook_deliveries SET attempt_count = ?, first_attempt_at = ? WHERE id = ?").bind(last ? 11 : 2, firstAttemptAt, deliveryId).run();
        const consumerQueue = recordingQueue();
        const consumerEnv = withEnv({ DELIVERY_QUEUE: consumerQueue });
        const hold = holdReceiver(receivers);
        const attempt = processDelivery(consumerEnv, deliveryId);
        await hold.received;

        // Meanwhile: redeliver to that endpoint. 202, the delivery queued.
        const redeliveryQueue = recordingQueue();
        const redelivered = await fetchWith({ DELIVERY_QUEUE: redeliveryQueue }, `/api/events/${eventId}/redeliver`, { key: acct.key, json: { endpoint_id: endpoint } });
        expect(redelivered.status, redelivered.text).toBe(202);
        expect(redelivered.body.deliveries).toEqual([deliveryId]);
        // Its message arrives while the attempt holds the delivery.
        for (const body of redeliveryQueue.sent as { deliveryId: string }[]) await processDelivery(consumerEnv, body.deliveryId);

        hold.release();
        receivers.gate(null);
        await attempt;
        receivers.answer("ok");
        // Whatever the consumer queued next is run (a hand-back, a wake-up): nothing waits for the sweeper.
        for (const body of consumerQueue.sent as { deliveryId: string }[]) await processDelivery(consumerEnv, body.deliveryId);
        const row = await one<{ status: string; attempt_count: number; first_attempt_at: number | null }>("SELECT * FROM webhook_deliveries WHERE id = ?", deliveryId);
        expect(row.status, "the redelivery asked for is not dropped by the attempt it raced").not.toBe("failed");
        expect(row.status).toBe("delivered");
        expect(row.first_attempt_at, "a fresh window").toBeGreaterThan(firstAttemptAt + 30_000);
        const sends = receivers.received.filter((r) => r.headers["webhook-id"] === eventId);
        expect(sends.map((s) => s.result)).toEqual([503, 200]);
        await invariants("redelivery during an attempt", [() => everyEventDeliveredOrFailed()]);
      } finally {
        receivers.gate(null);
        receivers.restore();
      }
    });
  }

  it("without a body, while an attempt is in flight: skipped as in_progress, and the attempt's outcome stands", async () => {
    const receivers = installReceivers(RECEIVER_ORIGIN, "ok");
    try {
      const { acct, deliveryId, eventId } = await setup(receivers);
      receivers.answer("ok");
      const hold = holdReceiver(receivers);
      const attempt = processDelivery(withEnv({ DELIVERY_QUEUE: recordingQueue() }), deliveryId);
      await hold.received;
      const queue = recordingQueue();
      const redelivered = await fetchWith({ DELIVERY_QUEUE: queue }, `/api/events/${eventId}/redeliver`, { key: acct.key, method: "POST" });
      expect(redelivered.status, redelivered.text).toBe(202);
      expect(redelivered.body).toMatchObject({ deliveries: [], skipped: [{ delivery_id: deliveryId, reason: "in_progress" }] });
      expect(queue.sent).toEqual([]);
      hold.release();
      receivers.gate(null);
      expect(await attempt).toBe("delivered");
      expect(receivers.received.filter((r) => r.headers["webhook-id"] === eventId)).toHaveLength(1);
    } finally {
      receivers.gate(null);
      receivers.restore();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Interleavings: every D1 round trip and processor call of each worker waits on fast-check's
// scheduler (as in interleavings.test.ts), so each run is one ordering of the workers' steps.

describe("workers at once on a claim whose charge is unknown", () => {
  const NUM_RUNS = 8;
  type Scheduler = fc.Scheduler;
  const short = (op: D1Op) => `${op.kind} ${op.sql.map((q) => q.trim().slice(0, 36)).join(" | ")}`.slice(0, 120);
  const gatedEnv = (s: Scheduler, who: string, overrides: Partial<Bindings> = {}) =>
    withEnv({ DB: faultyD1(env.DB, [], { gate: (op) => s.schedule(Promise.resolve(`${who}: ${short(op)}`)) }), DELIVERY_QUEUE: recordingQueue(), JOB_QUEUE: recordingQueue(), ...overrides });
  const settled = <T>(p: Promise<T>) => p.then((value) => ({ value, error: null as unknown }), (error: unknown) => ({ value: null as T | null, error }));
  const request = (s: Scheduler, who: string, path: string, init: { method: string; key: string; json?: unknown }) => {
    const e = gatedEnv(s, who);
    return fetchWith({ DB: e.DB, DELIVERY_QUEUE: e.DELIVERY_QUEUE, JOB_QUEUE: e.JOB_QUEUE }, path, init);
  };
  const clean = (res: CallResult, context: string, codes: string[]) => {
    if (res.status < 300) return;
    expect(res.text, context).not.toMatch(/D1_ERROR|\n\s+at /);
    expect(codes, `${context}: ${res.status} ${res.text.slice(0, 200)}`).toContain(res.body.error?.code);
  };

  /** Each charge the processor was paid for is recorded, and its period is paid and passed. */
  async function chargedPeriodsAdvanced(subscriptionId: string) {
    const rows = (
      await env.DB.prepare(
        `SELECT p.charge_reference, sp.status AS period_status, sp.period_index, s.periods_billed FROM payments p JOIN subscriptions s ON s.id = p.subscription_id
         LEFT JOIN subscription_periods sp ON sp.payment_id = p.id WHERE p.subscription_id = ? AND p.status = 'completed'`,
      )
        .bind(subscriptionId)
        .all<{ charge_reference: string; period_status: string | null; period_index: number | null; periods_billed: number }>()
    ).results;
    const bad = rows.filter((r) => r.period_status !== "paid" || r.period_index === null || r.periods_billed <= r.period_index);
    if (bad.length > 0) throw new Error(`chargedPeriodsAdvanced: ${bad.map((r) => `${r.charge_reference} -> ${r.period_status}`).join("; ")}`);
  }

  async function property(run: (s: Scheduler, cards: ReturnType<typeof cardLedger>) => Promise<void>) {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), async (s) => {
        const cards = cardLedger();
        cards.install();
        try {
          await run(s, cards);
        } finally {
          useProcessor();
          useClock();
        }
      }),
      { numRuns: NUM_RUNS, endOnFailure: true },
    );
  }

  /** A past-due subscription whose card update's charge never answered: its claim given back, unsettled. */
  async function unknownCardUpdate(cards: ReturnType<typeof cardLedger>, acct: Account, sub?: { id: string }) {
    const target = sub ?? (await pastDue(acct, cards.ledger));
    cards.ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: (c) => c.reference.startsWith(`${target.id}:`) });
    const put = await call(`/subscriptions/${target.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, "739") });
    expect(put.status, put.text).toBe(500);
    cards.ledger.inject();
    return target;
  }

  it("two claim settlements at once (overlapping cron runs) send the reference once more and record it once", async () => {
    const acct = await signup();
    await property(async (s, cards) => {
      const sub = await unknownCardUpdate(cards, acct);
      const since = await mark(cards.ledger);
      cards.install((p) => gatedProcessor(p, (label) => s.schedule(Promise.resolve(label))));
      const at = Date.now() + LEASE;
      useClock({ now: () => at });
      const outcomes = await s.waitFor(Promise.all([settled(settleStaleClaims(gatedEnv(s, "cron A"), at)), settled(settleStaleClaims(gatedEnv(s, "cron B"), at))]));
      cards.install();
      await cards.ledger.idle();
      expect(outcomes.map((o) => o.error).filter(Boolean), "neither run fails").toEqual([]);
      // One of the two settled this claim (another test's leftover claim could be settled too).
      expect(outcomes.map((o) => o.value ?? []).flat().filter((o) => o === "renewed").length).toBeGreaterThanOrEqual(1);
      expect(await subscriptionRow(sub.id)).toMatchObject({ status: "active", periods_billed: 2, card_last4: "4444" });
      await invariants("two claim settlements", [
        cards.oneCardPerReference,
        () => paymentsEqualCharges(cards.ledger, { since }),
        () => atMostOneProcessorCallPer(cards.ledger, "period_attempt", { since, once: true }),
        () => chargedPeriodsAdvanced(sub.id),
      ]);
    });
  }, 90_000);

  it("the claim settlement against a cancel and a second card update: charged once, with its own card; a cancel that answered holds", async () => {
    const acct = await signup();
    await property(async (s, cards) => {
      const sub = await unknownCardUpdate(cards, acct);
      const since = await mark(cards.ledger);
      cards.install((p) => gatedProcessor(p, (label) => s.schedule(Promise.resolve(label))));
      const at = Date.now();
      const [cron, cancel, update] = await s.waitFor(
        Promise.all([
          settled(settleStaleClaims(gatedEnv(s, "cron"), at)),
          request(s, "cancel", `/subscriptions/${sub.id}`, { method: "DELETE", key: acct.key }),
          request(s, "update", `/subscriptions/${sub.id}`, { method: "PUT", key: acct.key, json: cardFields(CARDS.visa, "739") }),
        ]),
      );
      cards.install();
      await cards.ledger.idle();
      expect(cron.error, "the cron does not fail").toBeNull();
      clean(cancel, "DELETE", ["charge_in_progress"]);
      clean(update, "PUT", ["charge_in_progress", "subscription_changed", "subscription_canceled", "idempotency_key_in_use"]);
      const row = await subscriptionRow(sub.id);
      if (cancel.status === 200) expect(row.status, "an answered cancel holds").toBe("canceled");
      expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", sub.id, `${sub.id}:period:1:%`)).toBe(1);
      await invariants("settlement vs cancel vs card update", [
        cards.oneCardPerReference,
        () => paymentsEqualCharges(cards.ledger, { since }),
        () => atMostOneProcessorCallPer(cards.ledger, "period_attempt", { since }),
        () => chargedPeriodsAdvanced(sub.id),
      ]);
    });
  }, 90_000);

  it("the claim settlement against a test clock advance of the subscription's clock (and the wall-clock renewal run, which leaves it alone): every period charged once", async () => {
    const acct = await signup();
    await property(async (s, cards) => {
      const clock = await createClock(acct, "2026-01-15T12:00:00.000Z");
      const user = await createUser(acct, { testClock: clock.id });
      const plan = await createPlan(acct);
      const created = await subscribed(acct, user.id, plan.id);
      cards.ledger.inject({ kind: "decline", method: "chargeToken", when: (c) => c.reference.startsWith(`${created.id}:`) });
      await advance(acct, clock.id, "2026-02-16T12:00:00.000Z");
      cards.ledger.inject();
      expect((await subscriptionRow(created.id)).status).toBe("past_due");
      const sub = await unknownCardUpdate(cards, acct, created as { id: string });
      const since = await mark(cards.ledger);
      cards.install((p) => gatedProcessor(p, (label) => s.schedule(Promise.resolve(label))));
      const at = Date.now();
      const [cron, renewal, advanced] = await s.waitFor(
        Promise.all([
          settled(settleStaleClaims(gatedEnv(s, "cron"), at)),
          settled(renewChunk(gatedEnv(s, "renewal"), [sub.id], at)),
          request(s, "advance", `/api/test-clocks/${clock.id}/advance`, { method: "POST", key: acct.key, json: { frozen_time: "2026-04-16T12:00:00.000Z" } }),
        ]),
      );
      cards.install();
      await cards.ledger.idle();
      expect([cron.error, renewal.error].filter(Boolean), "neither background worker fails").toEqual([]);
      clean(advanced, "advance", ["test_clock_advancing", "idempotency_key_in_use"]);
      // What the advance left to later runs (a claim it met in flight) is finished by the cron.
      await settleAt(Date.now() + LEASE + MINUTE);
      if (advanced.status !== 200) expect((await call(`/api/test-clocks/${clock.id}/advance`, { key: acct.key, body: { frozen_time: "2026-04-16T12:00:00.000Z" } })).status).toBe(200);
      await cards.ledger.idle();
      await invariants("settlement vs renewal vs advance", [
        cards.oneCardPerReference,
        () => paymentsEqualCharges(cards.ledger, { since }),
        () => atMostOneProcessorCallPer(cards.ledger, "period_attempt", { since }),
        () => chargedPeriodsAdvanced(sub.id),
      ]);
      const periods = await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", sub.id, `${sub.id}:period:1:%`);
      expect(periods, "the unpaid period is paid once").toBe(1);
    });
  }, 120_000);
});

describe("overlapping cron runs and repeated job messages", () => {
  it("two cron runs at once, then every renewal message they queued delivered twice at once: each due period charged once, the unknown claim settled once", async () => {
    const { createExecutionContext, waitOnExecutionContext } = await import("cloudflare:test");
    const { runScheduled } = await import("../../src/cron");
    const { runJobs } = await import("../support/queue");
    const { dueSubscription } = await import("../support/fixtures");
    const cards = cardLedger();
    cards.install();
    const acct = await signup();
    const unknown = await pastDue(acct, cards.ledger);
    cards.ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: (c) => c.reference.startsWith(`${unknown.id}:`) });
    expect((await call(`/subscriptions/${unknown.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, "739") })).status).toBe(500);
    cards.ledger.inject();
    const user = await createUser(acct, { name: "Due Person" });
    const plan = await createPlan(acct);
    const due = [await dueSubscription(acct, user.id, plan.id), await dueSubscription(acct, user.id, plan.id)];
    const since = await mark(cards.ledger);

    const queues = [recordingQueue(), recordingQueue()];
    const at = Date.now();
    await Promise.all(
      queues.map(async (queue) => {
        const ctx = createExecutionContext();
        await runScheduled(withEnv({ JOB_QUEUE: queue, DELIVERY_QUEUE: recordingQueue() }), at, ctx).catch(() => undefined);
        await waitOnExecutionContext(ctx);
      }),
    );
    const jobs = queues.flatMap((q) => q.sent) as Parameters<typeof runJobs>;
    expect(jobs.length, "one walk of the due index: the second run respects the first's lease").toBeGreaterThan(0);
    await Promise.all([runJobs(...jobs), runJobs(...jobs)]);
    await cards.ledger.idle();

    for (const id of due) {
      expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed'", id), id).toBe(2);
      expect((await subscriptionRow(id)).periods_billed).toBe(2);
    }
    expect(await subscriptionRow(unknown.id)).toMatchObject({ status: "active", periods_billed: 2, card_last4: "4444" });
    await invariants("overlapping cron runs", [
      cards.oneCardPerReference,
      () => paymentsEqualCharges(cards.ledger, { since }),
      () => atMostOneProcessorCallPer(cards.ledger, "period_attempt", { since }),
    ]);
  });
});
