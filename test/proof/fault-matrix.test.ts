// The fault matrix: every mutating operation of the OpenAPI document, and every background job,
// run with a fault injected at a boundary (test/support/faults.ts), then retried as a client or
// the queue would, against the real local D1, queues, Durable Objects and cron. After each case
// the named invariants of test/support/invariants.ts are checked. The number of combinations run
// is printed at the end and asserted, so a case that silently stops running fails the file.
//
// Routes: each D1 fault (fail_before_commit, commit_then_throw, slow) on the route's write batch
// (the last batch that writes, found by a clean probe run of the same request), with and without
// an Idempotency-Key, then the same request again (same key) on the real D1.
// Jobs: payout and refund settlement, renewal, dunning retry, webhook delivery, the retry alarm
// and the cron sweeps, under D1 faults on their batches, duplicated messages, a processor that
// times out after moving the money, and receivers that hang, fail or answer too late.
import { createExecutionContext, runDurableObjectAlarm, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { TEST_SHARD, env, envOf } from "../support/env";
import { useProcessor } from "../../src/processor";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runScheduled } from "../../src/cron";
import type { Bindings } from "../../src/env";
import type { JobMessage } from "../../src/jobs";
import { useClock } from "../../src/lib/clock";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";
import { PAYOUT_SEND_LEASE_MS, PAYOUT_STALE_MS, settlePayout } from "../../src/payments/settle-payout";
import { REFUND_SEND_LEASE_MS, REFUND_STALE_MS, settleRefund } from "../../src/payments/settle-refund";
import { processDelivery } from "../../src/webhooks/consumer";
import { schedulerFor, type WebhookRetryScheduler } from "../../src/webhooks/scheduler";
import { type Account, type CallResult, call, fetchWith, signup, withEnv } from "../support/http";
import { type Fixtures, PAYMENT_METHOD_OF, createKey, dueSubscription, openInvoice, payoutWithoutSettlement, refundWithoutSettlement, seed } from "../support/fixtures";
import { connectStripe, installFakeStripe } from "../support/live";
import { captureLogs, cardFields, PROOF_CARD, sentCvvs, sentPans } from "../support/cards";
import { backdate, makeDue } from "../support/clock";
import { countOf, one } from "../support/db";
import { waitFor } from "../support/wait";
import { RECEIVER_ORIGIN } from "../support/receiver";
import { CLAIM_FIRST, LIVE_SECRET_KEY_ONLY, type Operation, fixtureId, label, operations, pathWith, validBody } from "../support/operations";
import { invariants } from "../support/checks";
import {
  type D1FaultKind,
  type D1FaultRule,
  type D1Op,
  type Ledger,
  type ProcessorFault,
  type Receivers,
  claimStaleMs,
  compressTimeouts,
  duplicatingQueue,
  faultyD1,
  installReceivers,
  isWrite,
  ledgerProcessor,
  recordingQueue,
  renewChunk,
  sqlMatches,
  throwingQueue,
  writesTo,
} from "../support/faults";
import {
  type Mark,
  acknowledgedDeliveriesDelivered,
  atMostOneProcessorCallPer,
  everyEventDeliveredOrFailed,
  deliveriesStayInTheirAccount,
  everyEventReachesItsEndpoints,
  mark,
  noSecretOrCardAtRest,
  paymentsEqualCharges,
  payoutsSentOnce,
  refundsNeverExceedPayment,
  refundsSentOnce,
} from "../support/invariants";

// The Worker logs every injected failure; the lines are kept (and checked for card data) rather than printed.
const logs = captureLogs();
const ledger: Ledger = ledgerProcessor();
let receivers: Receivers;
let timeouts: { restore(): void };
let acct: Account & { liveKey: string };
let fx: Fixtures;
/** The connector's Stripe, for the processor connection's key check. */
const stripe = installFakeStripe();
let ops: Map<string, Operation>;

/** Combinations run (incremented as each case starts) and registered (at collection). */
let ran = 0;
let registered = 0;
const ranCases: string[] = [];

beforeAll(async () => {
  ledger.install();
  receivers = installReceivers(RECEIVER_ORIGIN, "ok");
  timeouts = compressTimeouts(200);
  acct = await signup("Fault matrix");
  fx = await seed(acct);
  ops = new Map((await operations()).filter((op) => op.method !== "get" && !(op.operationId in FAULTS_ELSEWHERE)).map((op) => [op.operationId, op]));
}, 30_000);

afterEach(() => {
  useClock();
  ledger.inject();
  receivers.answer("ok");
});

afterAll(() => {
  timeouts?.restore();
  receivers?.restore();
  ledger.uninstall();
  stripe.restore();
  logs.restore();
  console.log(`fault matrix: ${ran} (operation × fault) combinations run of ${registered} registered`);
  logs.expectNoCardData();
});

function matrixCase(name: string, body: () => Promise<void>, timeout = 20_000) {
  registered++;
  it(
    name,
    async () => {
      ran++;
      ranCases.push(name);
      await body();
    },
    timeout,
  );
}

const uid = () => crypto.randomUUID().slice(0, 8);

// =============================================================================================
// Routes

/**
 * Mutating operations whose faults are proven elsewhere, because one write batch on one database
 * does not describe them.
 */
const FAULTS_ELSEWHERE: Record<string, string> = {
  moveAccount: "test/shards/move.test.ts: an operator's command over two shards, with a D1 fault at the pause, the copy and each half of its switch",
};

/** The operations whose Idempotency-Key is ignored (README: sign-up has no account, tokens are not replayed). */
const NOT_IDEMPOTENT = new Set(["createAccount", "createAccessToken"]);

/**
 * Every mutating operation: the table a create adds one row to, and the fixture it uses up. A
 * variant of an operation (`operation`, with its own `body`) is a money path of its own.
 */
const ROUTES: Record<string, { table?: string; consumes?: keyof Fixtures | "connection" | "no_connection"; operation?: string; body?: (fx: Fixtures) => unknown }> = {
  createAccount: { table: "accounts" },
  createAccessToken: { table: "access_tokens" },
  createKey: { table: "api_keys" },
  revokeKey: { consumes: "key" },
  createRequestId: { table: "request_ids" },
  createUser: { table: "users" },
  updateUser: {},
  updateAccount: {},
  createPayout: { table: "payouts" },
  cancelPayout: { consumes: "payout" },
  createRefund: { table: "refunds" },
  createPaymentMethod: { table: "payment_methods" },
  detachPaymentMethod: { consumes: "paymentMethod" },
  // A fresh card: an earlier case's detach leaves the shared one unable to be the default.
  setDefaultPaymentMethod: { consumes: "paymentMethod" },
  createPayment: { table: "payments" },
  createCheckoutSession: { table: "checkout_sessions" },
  createPortalSession: { table: "portal_sessions" },
  expireCheckoutSession: { consumes: "checkoutSession" },
  capturePayment: { consumes: "authorization" },
  cancelPayment: { consumes: "authorization" },
  createWebhook: { table: "webhook_endpoints" },
  updateWebhook: {},
  deleteWebhook: { consumes: "webhook" },
  rotateWebhookSecret: {},
  testWebhook: {},
  redeliverEvent: {},
  // A fresh endpoint each time: a recovery left running (its enqueue lost with the answer) would
  // make the next one over the same range a 409.
  recoverWebhook: { table: "webhook_recoveries", consumes: "webhook" },
  createPlan: { table: "plans" },
  updatePlan: {},
  createSubscription: { table: "subscriptions" },
  updateSubscription: {},
  // A prorated change, and one invoiced and charged at once (a fresh subscription each time: 1 → 3 seats).
  "updateSubscription+create_prorations": { operation: "updateSubscription", consumes: "subscription", body: () => ({ quantity: 3 }) },
  "updateSubscription+always_invoice": { operation: "updateSubscription", consumes: "subscription", body: () => ({ quantity: 3, proration_behavior: "always_invoice" }) },
  cancelSubscription: { consumes: "subscription" },
  createTestClock: { table: "test_clocks" },
  advanceTestClock: { consumes: "clock" },
  voidInvoice: { consumes: "invoice" },
  payInvoice: { consumes: "invoice" },
  createCoupon: { table: "coupons" },
  deleteCoupon: { consumes: "coupon" },
  createTaxRate: { table: "tax_rates" },
  updateTaxRate: {},
  createCreditNote: { table: "credit_notes" },
  voidCreditNote: { consumes: "creditNote" },
  createUsageRecord: { table: "usage_records" },
  // A fresh event id each case (the case's retries resend it). No `table`: without a key a retry
  // of the same events is a duplicate, so it writes no second row (counted once by design).
  createUsageEvents: { body: (own) => ({ events: [{ id: `matrix-${crypto.randomUUID()}`, subscription_id: own.metered, quantity: 7 }] }) },
  // The processor connection (the live secret key's; Stripe is the fake): made where there is none,
  // removed where there is one.
  connectProcessor: { consumes: "no_connection" },
  disconnectProcessor: { consumes: "connection" },
};

const D1_FAULTS: D1FaultKind[] = ["fail_before_commit", "commit_then_throw", "slow"];
const DOCUMENTED = [400, 401, 402, 403, 404, 409, 413, 415, 422, 429, 500, 503];

/** Tables whose row counts say what a request changed (bookkeeping tables left out). */
const UNCOUNTED = new Set(["idempotency_keys", "delivery_attempts", "job_runs", "batch_guards", "d1_migrations"]);
let counted: string[] | undefined;
async function counts(): Promise<Record<string, number>> {
  counted ??= (await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all<{ name: string }>()).results
    .map((r) => r.name)
    .filter((n) => !n.startsWith("_cf_") && !n.startsWith("sqlite_") && !UNCOUNTED.has(n));
  const results = await env.DB.batch(counted.map((t) => env.DB.prepare(`SELECT count(*) AS n FROM "${t}"`)));
  return Object.fromEntries(counted.map((t, i) => [t, Number((results[i].results[0] as { n: number }).n)]));
}
const delta = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(Object.keys(after).flatMap((t) => (after[t] !== before[t] ? [[t, after[t] - before[t]]] : [])));

/** A fresh object of the kind the operation uses up (a revoked key cannot be revoked again). */
async function fixturesFor(op: RouteOperation): Promise<Fixtures> {
  const consumes = ROUTES[routeKey(op)]?.consumes;
  if (!consumes) return fx;
  const created = async (res: CallResult) => {
    expect(res.status, res.text).toBeLessThan(300);
    return res.body.id as string;
  };
  switch (consumes) {
    case "key":
      return { ...fx, key: (await createKey(acct, ["users:read"], "consumable")).id };
    case "payout":
      return { ...fx, payout: (await payoutWithoutSettlement(acct)).id };
    case "webhook":
      return { ...fx, webhook: await created(await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/consumable`, events: ["payout.paid"] } })) };
    case "subscription":
      return {
        ...fx,
        subscription: await created(await call("/subscriptions", { key: acct.key, body: { user_id: fx.user, plan_id: fx.plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } })),
      };
    case "authorization":
      return {
        ...fx,
        authorization: await created(
          await call("/payments", { key: acct.key, body: { amount: 1500, currency: "usd", user_id: fx.user, capture_method: "manual", ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }),
        ),
      };
    case "paymentMethod": {
      // A fresh saved card of the user, which the path's {pm_id} names (pathWith).
      const paymentMethod = await created(await call(`/api/users/${fx.user}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } }));
      PAYMENT_METHOD_OF.set(fx.user, paymentMethod);
      return { ...fx, paymentMethod };
    }
    case "checkoutSession":
      return {
        ...fx,
        checkoutSession: await created(
          await call("/checkout/sessions", { key: acct.key, body: { mode: "setup", user_id: fx.user, success_url: "https://shop.example.com/ok", cancel_url: "https://shop.example.com/cart" } }),
        ),
      };
    case "clock":
      return { ...fx, clock: await created(await call("/api/test-clocks", { key: acct.key, body: { frozen_time: "2030-01-01T00:00:00.000Z" } })) };
    case "invoice":
      return { ...fx, invoice: await openInvoice(acct, fx.user, fx.plan, fx.subscription) };
    case "creditNote":
      return { ...fx, creditNote: await created(await call("/credit-notes", { key: acct.key, body: { invoice_id: fx.invoice, amount: 1, refund: false } })) };
    case "coupon": {
      const res = await call("/coupons", { key: acct.key, body: { name: "Fresh", percent_off: 10, duration: "once" } });
      expect(res.status, res.text).toBe(201);
      return { ...fx, coupon: res.body.id as string };
    }
    case "no_connection":
      await env.DB.prepare("DELETE FROM processor_connections WHERE account_id = ?").bind(acct.id).run();
      return fx;
    case "connection":
      await env.DB.prepare("DELETE FROM processor_connections WHERE account_id = ?").bind(acct.id).run();
      // A fresh connection, never retired before: a DELETE's retirement adds its row once.
      await env.DB.prepare("DELETE FROM retired_processor_connections WHERE account_id = ?").bind(acct.id).run();
      await connectStripe(acct);
      return fx;
    default:
      throw new Error(`no fresh fixture for ${consumes}`);
  }
}

/** The request as a client sends it; queues record (nothing runs in the background). */
function send(op: Operation, path: string, body: unknown, idempotencyKey: string | undefined, DB?: D1Database) {
  return fetchWith({ ...(DB ? { DB } : {}), JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, path, {
    method: op.method.toUpperCase(),
    key: LIVE_SECRET_KEY_ONLY.has(op.operationId) ? acct.liveKey : acct.key,
    json: body,
    headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {},
  });
}

/** A success, or an error in the documented shape with no internals (no stack, no D1 message). */
function expectClean(res: CallResult, context: string) {
  if (res.status >= 200 && res.status < 300) return;
  expect.soft(DOCUMENTED, `${context}: undocumented status ${res.status}`).toContain(res.status);
  expect.soft(res.body, `${context}: error shape: ${res.text.slice(0, 300)}`).toMatchObject({
    error: { type: expect.any(String), code: expect.any(String), message: expect.any(String), request_id: expect.any(String) },
  });
  expect.soft(res.headers.get("request-id"), `${context}: Request-Id header`).toBe(res.body?.error?.request_id);
  expect.soft(res.text, `${context}: the answer leaks internals`).not.toMatch(/D1_ERROR|Network connection lost|\n\s+at |"stack"/);
}

interface Probe {
  status: number;
  /** Selects the write batch: the nth batch that writes. */
  target: Omit<D1FaultRule, "kind">;
  /** The row counts a clean run changes. */
  delta: Record<string, number>;
  writeBatch: string[];
}

const probes = new Map<string, Probe>();

/** A clean run of the same request (fresh fixtures), to find its write batch and what it changes. */
async function probe(op: RouteOperation, keyed: boolean): Promise<Probe> {
  const cacheKey = `${routeKey(op)}:${keyed}`;
  const cached = probes.get(cacheKey);
  if (cached) return cached;
  const own = await fixturesFor(op);
  const path = op.hasId ? pathWith(op, fixtureId(op, own)) : op.path;
  const recorder = faultyD1(env.DB);
  const before = await counts();
  const res = await send(op, path, bodyOf(op, own), keyed ? `probe-${op.operationId}-${uid()}` : undefined, recorder);
  expect(res.status, `${label(op)} succeeds on a clean run: ${res.text.slice(0, 300)}`).toBeLessThan(300);
  const after = await counts();
  const writes = recorder.ops.filter((o) => o.kind === "batch" && isWrite(o));
  expect(writes.length, `${label(op)} commits through a write batch`).toBeGreaterThan(0);
  const result: Probe = {
    status: res.status,
    target: { on: "batch", when: (o: D1Op) => isWrite(o), nth: writes.length - 1 },
    delta: delta(before, after),
    writeBatch: writes[writes.length - 1].sql.map((s) => s.trim().slice(0, 60)),
  };
  probes.set(cacheKey, result);
  return result;
}

/** The operation of a ROUTES entry, tagged with the entry (a variant runs its own body). */
type RouteOperation = Operation & { route?: string };
const routeKey = (op: RouteOperation) => op.route ?? op.operationId;
const bodyOf = (op: RouteOperation, own: Fixtures) => ROUTES[routeKey(op)]?.body?.(own) ?? validBody(op, own);

async function routeCase(route: string, fault: D1FaultKind, keyed: boolean) {
  const operationId = ROUTES[route].operation ?? route;
  const base = ops.get(operationId);
  expect(base, `${operationId} is in the OpenAPI document`).toBeDefined();
  if (!base) return;
  const op: RouteOperation = { ...base, route };
  const idempotent = keyed && !NOT_IDEMPOTENT.has(operationId);
  const context = `${label(op)} [${fault}, ${keyed ? "with" : "without"} Idempotency-Key]`;
  const clean = await probe(op, keyed);
  const own = await fixturesFor(op);
  const path = op.hasId ? pathWith(op, fixtureId(op, own)) : op.path;
  const body = bodyOf(op, own);
  const key = keyed ? `matrix-${route}-${fault}-${uid()}` : undefined;
  const since = await mark(ledger);
  const before = await counts();

  const faulty = faultyD1(env.DB, { kind: fault, ...clean.target });
  const first = await send(op, path, body, key, faulty);
  expect(faulty.fired.length, `${context}: the fault hit the write batch (${clean.writeBatch.join(" | ")})`).toBe(1);
  expectClean(first, `${context} first answer`);
  const afterFirst = delta(before, await counts());
  const same = (a: Record<string, number>, b: Record<string, number>) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
  if (first.status < 300) {
    // A route may retry its own batch (money already moved): a success means the change exists once.
    expect.soft(first.status, `${context}: a success answers as a clean run does`).toBe(clean.status);
    expect.soft(afterFirst, `${context}: a success stored the change exactly once`).toEqual(clean.delta);
  } else if (fault === "commit_then_throw") {
    expect.soft(first.status, `${context}: a lost commit answer is an unknown outcome (500)`).toBe(500);
    expect.soft(afterFirst, `${context}: the batch committed, once`).toEqual(clean.delta);
  } else {
    // An error after a batch that never committed: nothing is stored, unless the route retried the
    // batch and lost that answer too, which it can only answer as an unknown outcome (500).
    const nothing = same(afterFirst, {});
    expect.soft(nothing || (same(afterFirst, clean.delta) && first.status === 500), `${context}: an error stored nothing (or, answered 500, the change once): ${JSON.stringify(afterFirst)}`).toBe(true);
  }
  if (fault === "slow") expect.soft(first.status, `${context}: a slow commit still succeeds`).toBe(clean.status);

  if (idempotent) {
    let retry = await send(op, path, body, key);
    expectClean(retry, `${context} retry`);
    if (first.status < 300) {
      expect.soft(retry.status, `${context}: the retry replays the first answer`).toBe(first.status);
      expect.soft(retry.headers.get("idempotent-replayed"), `${context}: the retry is marked replayed`).toBe("true");
      expect.soft(retry.body?.id, `${context}: the replay names the same object`).toEqual(first.body?.id);
    } else {
      const replayed = retry.status < 300 && retry.headers.get("idempotent-replayed") === "true";
      const inUse = retry.status === 409 && retry.body?.error?.code === "idempotency_key_in_use";
      // A route that records its key in its own batch committed both or neither: when nothing was
      // stored, the retry runs the request (once). A claim-first route keeps its key claimed.
      const ranOnce = !CLAIM_FIRST.has(operationId) && same(afterFirst, {}) && retry.status < 300 && retry.headers.get("idempotent-replayed") === null;
      expect
        .soft(replayed || inUse || ranOnce, `${context}: after an unknown outcome the retry replays, answers 409 idempotency_key_in_use, or (nothing stored, key recorded in the batch) runs once; got ${retry.status} ${retry.text.slice(0, 200)}`)
        .toBe(true);
      if (!CLAIM_FIRST.has(operationId)) expect.soft(inUse, `${context}: a key recorded in the batch is never left in flight`).toBe(false);
      if (inUse) {
        // The claim's lock runs out (IDEMPOTENCY_LOCK_MS): only now may a retry take the key over.
        await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
        retry = await send(op, path, body, key);
        expectClean(retry, `${context} retry after the lock ran out`);
        expect.soft(retry.status, `${context}: once the lock ran out the retry goes through: ${retry.text.slice(0, 200)}`).toBeLessThan(300);
      }
    }
    expect.soft(delta(before, await counts()), `${context}: after the retries the change exists exactly once`).toEqual(clean.delta);
    if (retry.status < 300) {
      const again = await send(op, path, body, key);
      expect.soft(again.headers.get("idempotent-replayed"), `${context}: a further retry replays`).toBe("true");
      expect.soft(again.body?.id, `${context}: a further retry names the same object`).toEqual(retry.body?.id);
    }
  } else {
    const retry = await send(op, path, body, key);
    expectClean(retry, `${context} retry`);
    const table = ROUTES[route].table;
    if (table) {
      const firstStored = afterFirst[table] ?? 0;
      expect.soft(firstStored, `${context}: the first request stored at most one ${table} row`).toBeLessThanOrEqual(1);
      expect.soft(delta(before, await counts())[table] ?? 0, `${context}: one ${table} row per request that stored one, no more`).toBe(firstStored + (retry.status < 300 ? 1 : 0));
    }
  }

  await invariants(context, [
    () => paymentsEqualCharges(ledger, { since }),
    () => atMostOneProcessorCallPer(ledger, "idempotency_key", { since }),
    () => refundsNeverExceedPayment(),
    () => payoutsSentOnce(ledger, { since }),
  ]);
}

describe("routes: D1 faults on the write batch, then the same request again", () => {
  it("the table covers every mutating operation of the OpenAPI document", () => {
    expect([...ops.keys()].sort()).toEqual(Object.keys(ROUTES).filter((r) => !ROUTES[r].operation).sort());
  });
  for (const operationId of Object.keys(ROUTES)) {
    for (const fault of D1_FAULTS) {
      for (const keyed of [true, false]) {
        matrixCase(`${operationId}: ${fault} ${keyed ? "with" : "without"} an Idempotency-Key`, () => routeCase(operationId, fault, keyed));
      }
    }
  }
});

// =============================================================================================
// Background jobs

let bg: Account;
let bgUser: string;
let bgPlan: string;
let bgPayment: string;
let bgEndpoint: string;

const BG_RECEIVER = `${RECEIVER_ORIGIN}/background`;

async function ensureBackground() {
  if (bg) return;
  bg = await signup("Fault matrix jobs");
  const user = await call("/api/users", { key: bg.key, body: { name: "Job User", email: "jobs@example.com" } });
  bgUser = user.body.id;
  const plan = await call("/subscription-plans", { key: bg.key, body: { name: "Jobs", price: 19.99, currency: "usd", interval: "month" } });
  bgPlan = plan.body.id;
  const sub = await call("/subscriptions", { key: bg.key, body: { user_id: bgUser, plan_id: bgPlan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } });
  expect(sub.status, sub.text).toBe(201);
  bgPayment = (await call(`/payments?subscription_id=${sub.body.id}`, { key: bg.key })).body.data[0].id;
  const hook = await call("/api/webhooks", { key: bg.key, body: { url: BG_RECEIVER, events: ["customer.created"] } });
  expect(hook.status, hook.text).toBe(201);
  bgEndpoint = hook.body.id;
}

const eventsAbout = (type: string, id: string) =>
  countOf("SELECT count(*) AS n FROM events WHERE type = ? AND (json_extract(payload, '$.data.id') = ? OR json_extract(payload, '$.subscription_id') = ?)", type, id, id);

/** Runs the cron at `at` with queues that record, and returns the job messages it enqueued. */
async function cronAt(at: number, overrides: Partial<Bindings> = {}) {
  const jobs = recordingQueue();
  const ctx = createExecutionContext();
  await runScheduled(withEnv({ JOB_QUEUE: jobs, DELIVERY_QUEUE: recordingQueue(), ...overrides }), at, ctx);
  await waitOnExecutionContext(ctx);
  return jobs.sent as JobMessage[];
}

// --- payout and refund settlement -----------------------------------------------------------

type SettleKind = "payout" | "refund";
interface SettleFault {
  name: string;
  d1?: D1FaultRule;
  processor?: ProcessorFault["kind"];
  duplicate?: boolean;
  /** The processor is legitimately called again with the same reference (the first outcome was never recorded). */
  resends?: boolean;
}

const leaseBatch = (o: D1Op) => sqlMatches(o, /insert\s+into\s+"?job_runs"?/i);
const settleBatchOf = (kind: SettleKind) => (o: D1Op) => writesTo(o, kind === "payout" ? "payouts" : "refunds");

const settleFaults = (kind: SettleKind): SettleFault[] => [
  { name: "D1 fails before the settle batch commits", d1: { kind: "fail_before_commit", when: settleBatchOf(kind) }, resends: true },
  { name: "D1 commits the settle batch and the answer is lost", d1: { kind: "commit_then_throw", when: settleBatchOf(kind) } },
  { name: "D1 fails before the lease batch commits", d1: { kind: "fail_before_commit", when: leaseBatch } },
  { name: "D1 commits the lease batch and the answer is lost", d1: { kind: "commit_then_throw", when: leaseBatch } },
  { name: "the processor times out after it moved the money", processor: "timeout_after_success", resends: true },
  { name: "the message is delivered twice, both in flight at once", duplicate: true },
];

async function settlementCase(kind: SettleKind, fault: SettleFault) {
  await ensureBackground();
  const id = kind === "payout" ? (await payoutWithoutSettlement(bg)).id : (await refundWithoutSettlement(bg, { payment_id: bgPayment, amount: 10 })).id;
  const method = kind === "payout" ? "sendPayout" : "refund";
  const run = (e: Bindings) =>
    kind === "payout" ? settlePayout({ kind: "settlePayout", payoutId: id }, e) : settleRefund({ kind: "settleRefund", refundId: id }, e);
  const since = await mark(ledger);

  if (fault.duplicate) {
    ledger.inject({ kind: "slow", ms: 30, method });
    await Promise.all([run(env), run(env)]);
  } else {
    if (fault.processor) ledger.inject({ kind: fault.processor, method, when: (c) => c.reference === id, times: 1 });
    const faulty = fault.d1 ? faultyD1(env.DB, fault.d1) : env.DB;
    const failed = await run(withEnv({ DB: faulty })).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failed, `${kind} ${fault.name}: the handler reports the failure, so the queue redelivers`).not.toBeNull();
    if (fault.d1) expect((faulty as ReturnType<typeof faultyD1>).fired).toHaveLength(1);
    ledger.inject();
    // The queue redelivers the message.
    await run(env);
  }
  // Whatever is still pending is re-enqueued by the cron sweep once the stale window and any
  // send lease have passed; the sweep's message is then handled.
  const status = async () => (await one<{ status: string }>(`SELECT status FROM ${kind === "payout" ? "payouts" : "refunds"} WHERE id = ?`, id)).status;
  if ((await status()) === "pending") {
    const at = Date.now() + Math.max(PAYOUT_STALE_MS, REFUND_STALE_MS) + Math.max(PAYOUT_SEND_LEASE_MS, REFUND_SEND_LEASE_MS) + 60_000;
    useClock({ now: () => at });
    const messages = (await cronAt(at)).filter((m) => (m.kind === "settlePayout" && m.payoutId === id) || (m.kind === "settleRefund" && m.refundId === id));
    expect(messages.length, `${kind} ${fault.name}: the sweep re-enqueues the ${kind} left pending`).toBeGreaterThan(0);
    for (const message of messages) await run(env);
    useClock();
  }
  expect.soft(await status(), `${kind} ${fault.name}: settled in the end`).toBe(kind === "payout" ? "paid" : "succeeded");
  expect.soft(await eventsAbout(kind === "payout" ? "payout.paid" : "refund.completed", id), `${kind} ${fault.name}: one completion event`).toBe(1);
  await ledger.idle();
  await invariants(`${kind} settlement: ${fault.name}`, [
    () => atMostOneProcessorCallPer(ledger, kind, { since, once: !fault.resends }),
    () => (kind === "payout" ? payoutsSentOnce(ledger, { since }) : refundsSentOnce(ledger, { since })),
    () => refundsNeverExceedPayment(),
    () => paymentsEqualCharges(ledger, { since }),
  ]);
}

describe("payout settlement", () => {
  for (const fault of settleFaults("payout")) matrixCase(`settlePayout: ${fault.name}, then redelivered`, () => settlementCase("payout", fault));
});

describe("refund settlement", () => {
  for (const fault of settleFaults("refund")) matrixCase(`settleRefund: ${fault.name}, then redelivered`, () => settlementCase("refund", fault));
});

// --- renewals and dunning -------------------------------------------------------------------

interface PeriodFault {
  name: string;
  d1?: D1FaultRule;
  processor?: "timeout_after_success";
  duplicate?: boolean;
  resends?: boolean;
}

const settleBatch = (o: D1Op) => writesTo(o, "payments");
const claimBatch = (o: D1Op) => writesTo(o, "subscription_periods") && !writesTo(o, "payments");

const PERIOD_FAULTS: PeriodFault[] = [
  // A chunk's settlement batch that fails is retried one by one: the outage lasts for both.
  { name: "D1 fails before the settle batch commits", d1: { kind: "fail_before_commit", when: settleBatch, times: 2 }, resends: true },
  { name: "D1 commits the settle batch and the answer is lost", d1: { kind: "commit_then_throw", when: settleBatch } },
  { name: "D1 fails before the claim commits", d1: { kind: "fail_before_commit", when: claimBatch } },
  { name: "D1 commits the claim and the answer is lost", d1: { kind: "commit_then_throw", when: claimBatch } },
  { name: "the processor times out after it charged", processor: "timeout_after_success", resends: true },
  { name: "the message is delivered twice, both in flight at once", duplicate: true },
];

/** A subscription of the background account whose renewal is due. */
async function dueBackgroundSubscription(): Promise<string> {
  await ensureBackground();
  return dueSubscription(bg, bgUser, bgPlan);
}

// The renewal and dunning cases run on an account of their own, with an endpoint subscribed to
// every event ("*"), so that each case's settlement makes deliveries (by the batch's one fan-out
// statement) and everyEventReachesItsEndpoints checks them. Its deliveries are never sent during
// the cases (every call on the account records its delivery queue instead): the whole run's sweep
// at the end sends them, so they cannot take another case's receiver answers.
let rn: Account;
let rnUser: string;
let rnPlan: string;
let rnEndpoint: string;
/** The renewal account's delivery queue: records what would be sent. */
const rnDeliveries = recordingQueue();
const rnEnv = (overrides: Partial<Bindings> = {}) => withEnv({ DELIVERY_QUEUE: rnDeliveries, ...overrides });
const onRn = (path: string, json: unknown) => fetchWith({ DELIVERY_QUEUE: rnDeliveries }, path, { key: rn.key, json });

async function ensureRenewals() {
  if (rn) return;
  rn = await signup("Fault matrix renewals");
  rnUser = (await onRn("/api/users", { name: "Renewing User", email: "renewing@example.com" })).body.id;
  rnPlan = (await onRn("/subscription-plans", { name: "Renewing", price: 9.99, currency: "usd", interval: "month" })).body.id;
  const hook = await onRn("/api/webhooks", { url: `${RECEIVER_ORIGIN}/renewals`, events: ["*"] });
  expect(hook.status, hook.text).toBe(201);
  rnEndpoint = hook.body.id;
}

/** A subscription of the renewal account whose renewal is due. */
async function dueRenewalSubscription(): Promise<string> {
  await ensureRenewals();
  const sub = await onRn("/subscriptions", { user_id: rnUser, plan_id: rnPlan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) });
  expect(sub.status, sub.text).toBe(201);
  await makeDue(sub.body.id);
  return sub.body.id;
}

/** A subscription whose first renewal was declined: past_due, with its dunning retry due at the returned time. */
async function pastDueSubscription(account: "background" | "renewals" = "background"): Promise<{ id: string; at: number }> {
  const id = account === "renewals" ? await dueRenewalSubscription() : await dueBackgroundSubscription();
  ledger.inject({ kind: "decline", method: "chargeToken", when: (c) => c.reference.startsWith(`${id}:`) });
  expect(await renewChunk(account === "renewals" ? rnEnv() : env, [id], Date.now())).toEqual(["past_due"]);
  ledger.inject();
  const row = await one<{ status: string; due_at: number }>("SELECT status, due_at FROM subscriptions WHERE id = ?", id);
  expect(row.status).toBe("past_due");
  return { id, at: row.due_at + 1000 };
}

async function periodCase(kind: "renewal" | "dunning", fault: PeriodFault) {
  const { id, at } = kind === "renewal" ? { id: await dueRenewalSubscription(), at: Date.now() } : await pastDueSubscription("renewals");
  const since = await mark(ledger);
  const context = `${kind}: ${fault.name}`;
  const periodsBefore = (await one<{ periods_billed: number }>("SELECT periods_billed FROM subscriptions WHERE id = ?", id)).periods_billed;
  const renewalsBefore = await countOf("SELECT count(*) AS n FROM events WHERE type = 'subscription_renewal' AND json_extract(payload, '$.subscription_id') = ? AND json_extract(payload, '$.status') = 'success'", id);
  if (fault.duplicate) {
    ledger.inject({ kind: "slow", ms: 30, method: "chargeToken" });
    await Promise.all([renewChunk(rnEnv(), [id], at), renewChunk(rnEnv(), [id], at)]);
    ledger.inject();
  } else {
    if (fault.processor) ledger.inject({ kind: fault.processor, method: "chargeToken", when: (c) => c.reference.startsWith(`${id}:`), times: 1 });
    const faulty = fault.d1 ? faultyD1(env.DB, fault.d1) : env.DB;
    const first = await renewChunk(rnEnv({ DB: faulty }), [id], at).then(
      (outcomes) => outcomes,
      (error: unknown) => error,
    );
    if (fault.d1) expect((faulty as ReturnType<typeof faultyD1>).fired.length, `${context}: the fault fired`).toBeGreaterThan(0);
    ledger.inject();
    // The queue redelivers the message at once; then, once a claim left behind is stale, a later run takes it over.
    await renewChunk(rnEnv(), [id], at);
    const still = await one<{ periods_billed: number }>("SELECT periods_billed FROM subscriptions WHERE id = ?", id);
    if (still.periods_billed === periodsBefore) await renewChunk(rnEnv(), [id], at + claimStaleMs() + 60_000);
    void first;
  }
  await ledger.idle();
  const sub = await one<{ status: string; periods_billed: number }>("SELECT status, periods_billed FROM subscriptions WHERE id = ?", id);
  expect.soft(sub, `${context}: the period is collected once`).toMatchObject({ status: "active", periods_billed: periodsBefore + 1 });
  const periodPayments = await countOf(
    "SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?",
    id,
    `${id}:period:${periodsBefore}:%`,
  );
  expect.soft(periodPayments, `${context}: one completed payment for the period`).toBe(1);
  const renewals = await countOf("SELECT count(*) AS n FROM events WHERE type = 'subscription_renewal' AND json_extract(payload, '$.subscription_id') = ? AND json_extract(payload, '$.status') = 'success'", id);
  expect.soft(renewals - renewalsBefore, `${context}: one subscription_renewal success`).toBe(1);
  await invariants(context, [
    () => paymentsEqualCharges(ledger, { since }),
    () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: !fault.resends }),
    () => refundsNeverExceedPayment(),
    () => everyEventReachesItsEndpoints([rnEndpoint], { since }),
    () => deliveriesStayInTheirAccount({ since }),
  ]);
}

describe("renewal", () => {
  for (const fault of PERIOD_FAULTS) matrixCase(`renewChunk: ${fault.name}, then redelivered`, () => periodCase("renewal", fault));
});

describe("dunning retry", () => {
  for (const fault of PERIOD_FAULTS) matrixCase(`renewChunk (dunning retry): ${fault.name}, then redelivered`, () => periodCase("dunning", fault));
});

// --- a change invoiced at once, its charge left claimed -------------------------------------
// PUT /subscriptions/{id} with proration_behavior always_invoice whose processor call never
// answered (it charged, then timed out): the claim stays, and the cron settles it once its lease
// ran out, sending the same reference again. Under each fault the change is made once, paid once.

const changeSettleBatch = (o: D1Op) => writesTo(o, "payments") && writesTo(o, "proration_charges");
const CHANGE_FAULTS: PeriodFault[] = [
  { name: "D1 fails before the settle batch commits", d1: { kind: "fail_before_commit", when: changeSettleBatch }, resends: true },
  { name: "D1 commits the settle batch and the answer is lost", d1: { kind: "commit_then_throw", when: changeSettleBatch }, resends: true },
  { name: "the processor times out again after it charged", processor: "timeout_after_success", resends: true },
  { name: "two cron runs at once", duplicate: true, resends: true },
];

async function changeCase(fault: PeriodFault) {
  await ensureBackground();
  const context = `change invoiced at once: ${fault.name}`;
  const created = await call("/subscriptions", { key: bg.key, body: { user_id: bgUser, plan_id: bgPlan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } });
  expect(created.status, created.text).toBe(201);
  const id = created.body.id as string;
  const since = await mark(ledger);
  const mine = (c: { reference: string }) => c.reference.startsWith(`${id}:proration:`);
  ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: mine });
  const put = await call(`/subscriptions/${id}`, { key: bg.key, method: "PUT", body: { quantity: 3, proration_behavior: "always_invoice" } });
  ledger.inject();
  expect(put.status, `${context}: the request's outcome is unknown`).toBe(500);
  const { settleStaleProrationCharges } = await import("../../src/billing/proration-charges");
  const later = Date.now() + claimStaleMs() + 60_000;
  if (fault.duplicate) {
    ledger.inject({ kind: "slow", ms: 30, method: "chargeToken" });
    await Promise.allSettled([settleStaleProrationCharges(env, later), settleStaleProrationCharges(env, later)]);
    ledger.inject();
  } else {
    if (fault.processor) ledger.inject({ kind: fault.processor, method: "chargeToken", when: mine });
    const faulty = fault.d1 ? faultyD1(env.DB, fault.d1) : env.DB;
    await settleStaleProrationCharges(withEnv({ DB: faulty }), later).catch(() => undefined);
    if (fault.d1) expect((faulty as ReturnType<typeof faultyD1>).fired.length, `${context}: the fault fired`).toBeGreaterThan(0);
    ledger.inject();
    // The next cron run, once the claim's new lease ran out too.
    await settleStaleProrationCharges(env, later + claimStaleMs() + 60_000);
  }
  await ledger.idle();
  const sub = await one<{ quantity: number }>("SELECT quantity FROM subscriptions WHERE id = ?", id);
  expect.soft(sub.quantity, `${context}: the change is made`).toBe(3);
  const claim = await one<{ status: string }>("SELECT status FROM proration_charges WHERE subscription_id = ?", id);
  expect.soft(claim.status, `${context}: the claim is settled`).toBe("paid");
  const paid = await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", id, `${id}:proration:%`);
  expect.soft(paid, `${context}: one completed payment for the change`).toBe(1);
  const invoice = await one<{ status: string; amount_paid: number }>("SELECT status, amount_paid FROM invoices WHERE subscription_id = ? AND period_index IS NULL", id);
  expect.soft(invoice.status, `${context}: its invoice is paid`).toBe("paid");
  await invariants(context, [
    () => paymentsEqualCharges(ledger, { since }),
    () => atMostOneProcessorCallPer(ledger, "proration", { since, once: !fault.resends }),
    () => refundsNeverExceedPayment(),
  ]);
}

describe("a change invoiced at once, settled by the cron", () => {
  for (const fault of CHANGE_FAULTS) matrixCase(`settleStaleProrationCharges: ${fault.name}`, () => changeCase(fault));
});

// --- past-due card update -------------------------------------------------------------------
// PUT /subscriptions/{id} with a new card on a past_due subscription: the card is vaulted, the
// period's next attempt claimed for it, charged, and settled. Whatever fails, the claim is settled
// within its 10-minute lease by the cron (src/billing/claims.ts), due or not, and a cancel then
// goes through.

interface CardUpdateFault {
  name: string;
  d1?: D1FaultRule[];
  /** Every try of the charge times out after the processor charged (or only the first). */
  processor?: "every_try" | "first_try";
  /** The first answer: 200, or 500 outcome_unknown (the key kept), or 500 with nothing kept. */
  first: 200 | "outcome_unknown" | "nothing_kept";
  /** The processor is legitimately sent the same reference again. */
  resends?: boolean;
}

const CARD_UPDATE_FAULTS: CardUpdateFault[] = [
  { name: "the processor times out after it charged, on every try", processor: "every_try", first: "outcome_unknown", resends: true },
  { name: "the processor times out after it charged, once", processor: "first_try", first: 200, resends: true },
  { name: "D1 fails before the claim commits", d1: [{ kind: "fail_before_commit", when: claimBatch }], first: "nothing_kept" },
  { name: "D1 commits the claim and the answer is lost", d1: [{ kind: "commit_then_throw", when: claimBatch }], first: 200 },
  {
    name: "D1 commits the claim, the answer is lost, and the read-back fails",
    d1: [
      { kind: "commit_then_throw", when: claimBatch },
      { kind: "fail_before_commit", on: "statement", when: (o) => sqlMatches(o, /from\s+"subscription_periods"/i), times: 5 },
    ],
    first: "outcome_unknown",
  },
  { name: "D1 commits the settle batch and the answer is lost", d1: [{ kind: "commit_then_throw", when: settleBatch }], first: 200 },
  { name: "D1 fails before the settle batch commits, every try", d1: [{ kind: "fail_before_commit", when: settleBatch, times: 3 }], first: "outcome_unknown", resends: true },
];

async function cardUpdateCase(fault: CardUpdateFault) {
  const { id } = await pastDueSubscription();
  const context = `card update: ${fault.name}`;
  const since = await mark(ledger);
  const key = `card-update-${uid()}`;
  const body = cardFields(PROOF_CARD.pan, PROOF_CARD.cvv);
  const put = (DB?: D1Database) =>
    fetchWith({ ...(DB ? { DB } : {}), JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, `/subscriptions/${id}`, {
      method: "PUT",
      key: bg.key,
      json: body,
      headers: { "idempotency-key": key },
    });
  if (fault.processor) {
    ledger.inject({ kind: "timeout_after_success", method: "chargeToken", when: (c) => c.reference.startsWith(`${id}:`), ...(fault.processor === "first_try" ? { times: 1 } : {}) });
  }
  const faulty = faultyD1(env.DB, fault.d1 ?? []);
  const first = await put(faulty);
  ledger.inject();
  if (fault.d1) expect(faulty.fired.length, `${context}: the fault fired`).toBeGreaterThan(0);
  expectClean(first, `${context} first answer`);
  if (fault.first === 200) expect.soft(first.status, `${context}: ${first.text.slice(0, 200)}`).toBe(200);
  else {
    expect.soft(first.status, `${context}: ${first.text.slice(0, 200)}`).toBe(500);
    expect.soft(first.body?.error?.code, context).toBe(fault.first === "outcome_unknown" ? "outcome_unknown" : "internal_error");
    const record = await env.DB.prepare("SELECT status FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(bg.id, key).first<{ status: string }>();
    expect.soft(record?.status ?? null, `${context}: the key is kept only when the outcome is unknown`).toBe(fault.first === "outcome_unknown" ? "in_flight" : null);
  }

  // The cron, once the claim's lease has run out; then the client's retry (after the key's lock).
  const at = Date.now() + claimStaleMs() + 60_000;
  useClock({ now: () => at });
  await cronAt(at);
  useClock();
  await ledger.idle();
  await env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, bg.id, key).run();
  const retry = await put();
  expectClean(retry, `${context} retry`);
  expect.soft(retry.status, `${context}: the retry succeeds: ${retry.text.slice(0, 200)}`).toBe(200);
  if (first.status === 200) expect.soft(retry.headers.get("idempotent-replayed"), `${context}: the retry replays`).toBe("true");

  const sub = await one<{ status: string; periods_billed: number }>("SELECT status, periods_billed FROM subscriptions WHERE id = ?", id);
  expect.soft(sub, `${context}: the unpaid period is collected`).toMatchObject({ status: "active", periods_billed: 2 });
  const periodPayments = await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed' AND charge_reference LIKE ?", id, `${id}:period:1:%`);
  expect.soft(periodPayments, `${context}: one completed payment for the period`).toBe(1);
  const cancel = await fetchWith({ JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: recordingQueue() }, `/subscriptions/${id}`, { method: "DELETE", key: bg.key });
  expect.soft(cancel.status, `${context}: a cancel goes through: ${cancel.text.slice(0, 200)}`).toBe(200);
  await invariants(context, [
    () => paymentsEqualCharges(ledger, { since }),
    () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: !fault.resends }),
    () => refundsNeverExceedPayment(),
  ]);
}

describe("past-due card update", () => {
  for (const fault of CARD_UPDATE_FAULTS) matrixCase(`PUT /subscriptions/{id} (past_due, new card): ${fault.name}, then the cron and the retry`, () => cardUpdateCase(fault));
});

// --- webhook delivery -----------------------------------------------------------------------

/** A delivery of a new customer.created event to the background endpoint, committed but not yet attempted. */
async function pendingDelivery(): Promise<{ deliveryId: string; eventId: string }> {
  await ensureBackground();
  // Every case starts from an endpoint no earlier case's 503 slowed (src/domain/webhook-throttle.ts):
  // the cases share one endpoint, and a slowdown carried over would throttle the next case's send.
  await env.DB.prepare("UPDATE webhook_endpoints SET slowed_until = NULL WHERE id = ?").bind(bgEndpoint).run();
  const queue = recordingQueue();
  const res = await fetchWith({ DELIVERY_QUEUE: queue }, "/api/users", { key: bg.key, json: { name: "Hooked", email: "hooked@example.com" } });
  expect(res.status, res.text).toBe(201);
  const [message] = queue.sent as { deliveryId: string }[];
  expect(message?.deliveryId, "the new user's event has a delivery").toBeDefined();
  const row = await one<{ event_id: string }>("SELECT event_id FROM webhook_deliveries WHERE id = ?", message.deliveryId);
  return { deliveryId: message.deliveryId, eventId: row.event_id };
}

const deliveryOf = (id: string) =>
  one<{ status: string; attempt_count: number; next_attempt_at: number | null; last_error: string | null; last_status_code: number | null }>(
    "SELECT * FROM webhook_deliveries WHERE id = ?",
    id,
  );
const sendsOf = (eventId: string) => receivers.received.filter((r) => r.headers["webhook-id"] === eventId);

/**
 * Takes a delivery to its end the way the machinery would: a scheduled retry through the
 * endpoint's alarm, a delivery left pending without one through a message as the sweeper sends.
 */
async function finishDelivery(deliveryId: string, endpointId = bgEndpoint) {
  for (let i = 0; i < 6; i++) {
    const d = await deliveryOf(deliveryId);
    if (d.status !== "pending") return;
    if (d.next_attempt_at !== null) {
      const at = d.next_attempt_at;
      useClock({ now: () => at });
      // The endpoint's alarm holds the retry, or an earlier run of it already handed the retry to
      // the delivery queue (a loaded machine's consumer may not have taken it yet): either way the
      // attempt comes; what it delivers is checked by the case's own expectations.
      await runDurableObjectAlarm(schedulerFor(env, endpointId));
      await waitFor(async () => expect((await deliveryOf(deliveryId)).attempt_count).toBeGreaterThan(d.attempt_count), 5000).catch(() => {});
    } else {
      const at = Date.now() + 6 * 60_000;
      useClock({ now: () => at });
      await processDelivery(env, deliveryId);
    }
  }
  useClock();
}

interface DeliveryFault {
  name: string;
  d1?: D1FaultRule;
  receiver?: Parameters<Receivers["answer"]>[0];
  duplicate?: boolean;
  /** Sends the receiver may see in all (at-least-once allows a resend when the first outcome was never recorded). */
  sends: [number, number];
}

const DELIVERY_FAULTS: DeliveryFault[] = [
  { name: "D1 fails before the attempt's record commits", d1: { kind: "fail_before_commit", when: (o) => writesTo(o, "delivery_attempts") }, sends: [1, 2] },
  { name: "D1 commits the attempt's record and the answer is lost", d1: { kind: "commit_then_throw", when: (o) => writesTo(o, "delivery_attempts") }, sends: [1, 1] },
  { name: "D1 fails before the attempt's claim commits", d1: { kind: "fail_before_commit", on: "any", when: (o) => writesTo(o, "webhook_deliveries") }, sends: [1, 1] },
  { name: "the message is delivered twice while the attempt is in flight", duplicate: true, sends: [1, 1] },
  { name: "the receiver hangs until the timeout", receiver: "hang", sends: [2, 2] },
  { name: "the receiver answers 503", receiver: "fail5xx", sends: [2, 2] },
  { name: "the receiver answers 200 only after the timeout fired", receiver: "ok_after_timeout", sends: [2, 2] },
];

async function deliveryCase(fault: DeliveryFault) {
  const { deliveryId, eventId } = await pendingDelivery();
  const since = await mark(ledger);
  if (fault.duplicate) {
    receivers.answer("slow_ok", "ok");
    const first = processDelivery(env, deliveryId);
    await new Promise((resolve) => setTimeout(resolve, 15));
    const outcomes = await Promise.all([first, processDelivery(env, deliveryId)]);
    expect.soft(outcomes.filter((o) => o === "delivered"), "one of the two delivers").toHaveLength(1);
  } else if (fault.receiver) {
    receivers.answer(fault.receiver, "ok");
    const outcome = await processDelivery(env, deliveryId);
    const after = await deliveryOf(deliveryId);
    expect.soft(outcome, `${fault.name}: the attempt counts as failed`).toBe("scheduled");
    expect.soft(after.status, `${fault.name}: not delivered by a failed attempt`).toBe("pending");
    expect.soft(after.next_attempt_at, `${fault.name}: a retry is scheduled`).not.toBeNull();
    receivers.answer("ok");
  } else {
    const faulty = faultyD1(env.DB, fault.d1!);
    await processDelivery(withEnv({ DB: faulty }), deliveryId).catch(() => "threw");
    expect(faulty.fired, `${fault.name}: the fault fired`).toHaveLength(1);
    // The queue redelivers the message.
    await processDelivery(env, deliveryId).catch(() => "threw");
  }
  await finishDelivery(deliveryId);
  const d = await deliveryOf(deliveryId);
  expect.soft(d.status, `${fault.name}: delivered in the end`).toBe("delivered");
  const sends = sendsOf(eventId).length;
  expect.soft(sends, `${fault.name}: sends between ${fault.sends[0]} and ${fault.sends[1]}`).toBeGreaterThanOrEqual(fault.sends[0]);
  expect.soft(sends, `${fault.name}: sends between ${fault.sends[0]} and ${fault.sends[1]}`).toBeLessThanOrEqual(fault.sends[1]);
  await invariants(`delivery: ${fault.name}`, [() => everyEventDeliveredOrFailed({ since }), () => acknowledgedDeliveriesDelivered({ since })]);
}

describe("webhook delivery", () => {
  for (const fault of DELIVERY_FAULTS) matrixCase(`processDelivery: ${fault.name}`, () => deliveryCase(fault));
});

// --- the retry alarm ------------------------------------------------------------------------

/** A delivery whose first attempt failed (503), with its retry held by the endpoint's scheduler. */
async function scheduledRetry() {
  const delivery = await pendingDelivery();
  receivers.answer("fail5xx", "ok");
  expect(await processDelivery(env, delivery.deliveryId)).toBe("scheduled");
  receivers.answer("ok");
  const d = await deliveryOf(delivery.deliveryId);
  expect(d.next_attempt_at).not.toBeNull();
  return { ...delivery, dueAt: d.next_attempt_at! };
}

const setSchedulerQueue = (queue: Queue) =>
  runInDurableObject(schedulerFor(env, bgEndpoint), (o: WebhookRetryScheduler) => {
    (o as unknown as { env: Bindings }).env = { ...env, DELIVERY_QUEUE: queue } as Bindings;
  });

describe("retry alarm", () => {
  matrixCase("alarm: the delivery queue refuses the enqueue, then the alarm runs again", async () => {
    const { deliveryId, eventId, dueAt } = await scheduledRetry();
    const since = await mark(ledger);
    useClock({ now: () => dueAt });
    await setSchedulerQueue(throwingQueue());
    try {
      expect(await runDurableObjectAlarm(schedulerFor(env, bgEndpoint))).toBe(true);
      const held = await runInDurableObject(schedulerFor(env, bgEndpoint), (o: WebhookRetryScheduler) => o.pending().map((p) => p.deliveryId));
      expect.soft(held, "the retry is kept when its enqueue fails").toContain(deliveryId);
    } finally {
      await setSchedulerQueue(env.DELIVERY_QUEUE);
    }
    expect(await runDurableObjectAlarm(schedulerFor(env, bgEndpoint))).toBe(true);
    await waitFor(async () => expect((await deliveryOf(deliveryId)).status).toBe("delivered"), 5000).catch(() => {});
    await finishDelivery(deliveryId);
    expect.soft((await deliveryOf(deliveryId)).status).toBe("delivered");
    expect.soft(sendsOf(eventId), "the failed first attempt and one retry").toHaveLength(2);
    await invariants("retry alarm: queue refuses", [() => everyEventDeliveredOrFailed({ since }), () => acknowledgedDeliveriesDelivered({ since })]);
  });

  matrixCase("alarm: the delivery queue delivers the retry message twice", async () => {
    const { deliveryId, eventId, dueAt } = await scheduledRetry();
    const since = await mark(ledger);
    useClock({ now: () => dueAt });
    await setSchedulerQueue(duplicatingQueue(env.DELIVERY_QUEUE));
    try {
      expect(await runDurableObjectAlarm(schedulerFor(env, bgEndpoint))).toBe(true);
    } finally {
      await setSchedulerQueue(env.DELIVERY_QUEUE);
    }
    await waitFor(async () => expect((await deliveryOf(deliveryId)).status).toBe("delivered"), 5000).catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    await finishDelivery(deliveryId);
    expect.soft((await deliveryOf(deliveryId)).status).toBe("delivered");
    expect.soft(sendsOf(eventId), "the failed first attempt and one retry, however often the message came").toHaveLength(2);
    await invariants("retry alarm: duplicated message", [() => everyEventDeliveredOrFailed({ since }), () => acknowledgedDeliveriesDelivered({ since })]);
  });
});

// --- the cron sweeps ------------------------------------------------------------------------

/** A delivery committed with its event whose enqueue was lost a while ago: the sweeper's work. */
async function stuckDelivery() {
  const delivery = await pendingDelivery();
  await env.DB.prepare("UPDATE webhook_deliveries SET updated_at = ? WHERE id = ?").bind(Date.now() - 2 * 60_000, delivery.deliveryId).run();
  return delivery;
}

async function runCron(overrides: Partial<Bindings> = {}, at = Date.now()) {
  const ctx = createExecutionContext();
  const result = await runScheduled(withEnv(overrides), at, ctx).then(
    () => null,
    (error: unknown) => error,
  );
  await waitOnExecutionContext(ctx);
  return result;
}

async function cronChecks(context: string, since: Mark) {
  await ledger.idle();
  await invariants(context, [
    () => payoutsSentOnce(ledger, { since }),
    () => atMostOneProcessorCallPer(ledger, "payout", { since, once: true }),
    () => refundsSentOnce(ledger, { since }),
    () => atMostOneProcessorCallPer(ledger, "refund", { since, once: true }),
    () => atMostOneProcessorCallPer(ledger, "period_attempt", { since, once: true }),
    () => paymentsEqualCharges(ledger, { since }),
    () => refundsNeverExceedPayment(),
    () => everyEventDeliveredOrFailed({ since }),
    () => acknowledgedDeliveriesDelivered({ since }),
  ]);
}

const payoutStatus = async (id: string) => (await one<{ status: string }>("SELECT status FROM payouts WHERE id = ?", id)).status;
const refundStatus = async (id: string) => (await one<{ status: string }>("SELECT status FROM refunds WHERE id = ?", id)).status;

describe("cron sweeps", () => {
  matrixCase("sweep: a lost payout re-enqueued through a queue that delivers twice", async () => {
    await ensureBackground();
    const since = await mark(ledger);
    const payout = (await payoutWithoutSettlement(bg)).id;
    await backdate("payouts", payout);
    ledger.inject({ kind: "slow", ms: 30, method: "sendPayout" });
    expect(await runCron({ JOB_QUEUE: duplicatingQueue(env.JOB_QUEUE) })).toBeNull();
    await waitFor(async () => expect(await payoutStatus(payout)).toBe("paid"), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect.soft(await eventsAbout("payout.paid", payout)).toBe(1);
    await cronChecks("sweep: duplicated payout message", since);
  });

  matrixCase("sweep: a lost refund whose re-enqueue throws, then the next run", async () => {
    await ensureBackground();
    const since = await mark(ledger);
    const refund = (await refundWithoutSettlement(bg, { payment_id: bgPayment, amount: 10 })).id;
    await backdate("refunds", refund);
    expect(await runCron({ JOB_QUEUE: throwingQueue() }), "the cron reports the failed task").not.toBeNull();
    expect(await refundStatus(refund)).toBe("pending");
    expect(await runCron()).toBeNull();
    await waitFor(async () => expect(await refundStatus(refund)).toBe("succeeded"), 10_000);
    expect.soft(await eventsAbout("refund.completed", refund)).toBe(1);
    await cronChecks("sweep: refund re-enqueue throws", since);
  });

  matrixCase("sweep: D1 commits the sweeper's touch of a stuck delivery and the answer is lost, then the next run", async () => {
    const { deliveryId, eventId } = await stuckDelivery();
    const since = await mark(ledger);
    const faulty = faultyD1(env.DB, { kind: "commit_then_throw", on: "statement", when: (o) => writesTo(o, "webhook_deliveries") });
    expect(await runCron({ DB: faulty })).not.toBeNull();
    expect(faulty.fired).toHaveLength(1);
    expect(await runCron()).toBeNull();
    await waitFor(async () => expect((await deliveryOf(deliveryId)).status).toBe("delivered"), 8000).catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    await finishDelivery(deliveryId);
    expect.soft((await deliveryOf(deliveryId)).status).toBe("delivered");
    expect.soft(sendsOf(eventId), "one send for a delivery swept twice").toHaveLength(1);
    await cronChecks("sweep: touch lost", since);
  });

  matrixCase("sweep: D1 fails before the sweeper's read of stuck deliveries, then the next run", async () => {
    const { deliveryId, eventId } = await stuckDelivery();
    const since = await mark(ledger);
    const faulty = faultyD1(env.DB, { kind: "fail_before_commit", on: "statement", when: (o) => sqlMatches(o, /from\s+"webhook_deliveries"/i) });
    expect(await runCron({ DB: faulty })).not.toBeNull();
    expect(await runCron()).toBeNull();
    await waitFor(async () => expect((await deliveryOf(deliveryId)).status).toBe("delivered"), 8000).catch(() => {});
    await finishDelivery(deliveryId);
    expect.soft((await deliveryOf(deliveryId)).status).toBe("delivered");
    expect.soft(sendsOf(eventId)).toHaveLength(1);
    await cronChecks("sweep: read fails", since);
  });

  matrixCase("sweep: two overlapping cron runs over a lost payout, a lost refund and a stuck delivery", async () => {
    await ensureBackground();
    const since = await mark(ledger);
    const payout = (await payoutWithoutSettlement(bg)).id;
    await backdate("payouts", payout);
    const refund = (await refundWithoutSettlement(bg, { payment_id: bgPayment, amount: 10 })).id;
    await backdate("refunds", refund);
    const { deliveryId, eventId } = await stuckDelivery();
    ledger.inject({ kind: "slow", ms: 30 });
    const results = await Promise.all([runCron(), runCron()]);
    expect(results).toEqual([null, null]);
    await waitFor(async () => {
      expect(await payoutStatus(payout)).toBe("paid");
      expect(await refundStatus(refund)).toBe("succeeded");
      expect((await deliveryOf(deliveryId)).status).toBe("delivered");
    }, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect.soft(await eventsAbout("payout.paid", payout)).toBe(1);
    expect.soft(await eventsAbout("refund.completed", refund)).toBe(1);
    expect.soft(sendsOf(eventId)).toHaveLength(1);
    await cronChecks("sweep: overlapping runs", since);
  });

  matrixCase("renewals cron: the due subscription is enqueued through a queue that delivers twice", async () => {
    const id = await dueBackgroundSubscription();
    const since = await mark(ledger);
    const periodsBefore = (await one<{ periods_billed: number }>("SELECT periods_billed FROM subscriptions WHERE id = ?", id)).periods_billed;
    ledger.inject({ kind: "slow", ms: 30, method: "chargeToken" });
    expect(await runCron({ JOB_QUEUE: duplicatingQueue(env.JOB_QUEUE) })).toBeNull();
    await waitFor(async () => expect((await one<{ periods_billed: number }>("SELECT periods_billed FROM subscriptions WHERE id = ?", id)).periods_billed).toBe(periodsBefore + 1), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect.soft(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND status = 'completed'", id)).toBe(periodsBefore + 1);
    await cronChecks("renewals cron: duplicated message", since);
  });
});

// =============================================================================================

// --- an account move racing each kind of money (issue 33) ------------------------------------

/**
 * Test mode has no processor connection to disconnect (the live fault matrix races a disconnect
 * and a move against live money, test/proof/live-fault-matrix.test.ts). Here a move of the account
 * (drain_seconds 0) runs while the sandbox's answer to each kind of money is held. Each case has its
 * own account and its own ledger (the matrix's reads one shard, and the account leaves it): what the
 * sandbox did is recorded where the account lives, and no reference moves money twice.
 */
describe("an account move racing each kind of money", () => {
  type Kind = "first charge" | "renewal" | "refund" | "payout settlement";
  const HELD: Record<Kind, "chargeCard" | "chargeToken" | "refund" | "sendPayout"> = {
    "first charge": "chargeCard",
    renewal: "chargeToken",
    refund: "refund",
    "payout settlement": "sendPayout",
  };
  const to = 1 - TEST_SHARD;

  for (const kind of Object.keys(HELD) as Kind[]) {
    matrixCase(`${kind}: a move of the account while the sandbox's answer is held`, async () => {
      const own = ledgerProcessor();
      const gate = { armed: false, arrived: false, released: false };
      const method = HELD[kind];
      useProcessor((inner) => {
        const wrapped = own.wrap(inner) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
        return new Proxy(wrapped, {
          get(target, name) {
            const original = target[name as string];
            if (name !== method || typeof original !== "function") return original;
            return async (...args: unknown[]) => {
              const answer = await original.apply(target, args);
              if (gate.armed && !gate.arrived) {
                gate.arrived = true;
                // Polled: the request runs as another request of workerd, which a promise settled here would not wake.
                while (!gate.released) await new Promise((resolve) => setTimeout(resolve, 10));
              }
              return answer;
            };
          },
        }) as never;
      });
      try {
        const acct = await signup(`Move race ${kind}`);
        const user = (await call("/api/users", { key: acct.key, body: { name: "Racer", email: "racer@example.com" } })).body;
        const plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Race", price: 20, currency: "usd", interval: "month" } })).body;
        const body = { user_id: user.id, plan_id: plan.id, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) };
        let start: () => Promise<unknown>;
        let finish: (started: unknown) => Promise<void>;
        let check: () => Promise<void>;
        const shardEnv = envOf(to) as unknown as Bindings;
        if (kind === "first charge") {
          const key = `move-race-${uid()}`;
          start = () => call("/subscriptions", { key: acct.key, body, idempotencyKey: key });
          finish = async (started) => {
            const res = started as CallResult;
            if (res.status === 201) return;
            expect(res.status, res.text).toBe(500);
            await envOf(to).DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
            const retried = await call("/subscriptions", { key: acct.key, body, idempotencyKey: key });
            expect(retried.status, retried.text).toBe(201);
          };
          check = async () => {
            const subs = (await call(`/subscriptions?user_id=${user.id}`, { key: acct.key })).body.data;
            expect(subs).toHaveLength(1);
            expect((await call(`/payments?subscription_id=${subs[0].id}`, { key: acct.key })).body.data).toHaveLength(1);
          };
        } else if (kind === "renewal") {
          const sub = (await call("/subscriptions", { key: acct.key, body })).body;
          await makeDue(sub.id);
          start = () => renewChunk(env, [sub.id]);
          finish = async () => {
            if ((await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data.length === 2) return;
            await envOf(to).DB.prepare("UPDATE subscription_periods SET updated_at = '2000-01-01T00:00:00.000Z' WHERE subscription_id = ? AND period_index = 1 AND status = 'open'").bind(sub.id).run();
            await envOf(to).DB.prepare("UPDATE subscriptions SET due_at = 0 WHERE id = ?").bind(sub.id).run();
            await renewChunk(shardEnv, [sub.id]);
          };
          check = async () => {
            const payments = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data as { status: string }[];
            expect(payments.map((p) => p.status)).toEqual(["completed", "completed"]);
          };
        } else if (kind === "refund") {
          const sub = (await call("/subscriptions", { key: acct.key, body })).body;
          const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
          const refund = await refundWithoutSettlement(acct, { payment_id: payment.id, amount: 700 });
          start = () => settleRefund({ kind: "settleRefund", refundId: refund.id }, env);
          finish = async () => {
            if ((await call(`/refunds/${refund.id}`, { key: acct.key })).body.status !== "pending") return;
            await envOf(to).DB.prepare("UPDATE job_runs SET lease_until = 0 WHERE key LIKE ?").bind(`%${refund.id}%`).run();
            await settleRefund({ kind: "settleRefund", refundId: refund.id }, shardEnv);
          };
          check = async () => {
            expect((await call(`/refunds/${refund.id}`, { key: acct.key })).body.status).toBe("succeeded");
            expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.amount_refunded).toBe(700);
          };
        } else {
          const payout = await payoutWithoutSettlement(acct, { recipient_id: user.id });
          start = () => settlePayout({ kind: "settlePayout", payoutId: payout.id }, env);
          finish = async () => {
            if ((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status !== "pending") return;
            await envOf(to).DB.prepare("UPDATE job_runs SET lease_until = 0 WHERE key LIKE ?").bind(`%${payout.id}%`).run();
            await settlePayout({ kind: "settlePayout", payoutId: payout.id }, shardEnv);
          };
          check = async () => expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("paid");
        }
        gate.armed = true;
        const running = start().then((value) => ({ value }), (error: unknown) => ({ value: undefined, error }));
        await waitFor(() => expect(gate.arrived).toBe(true), 5000, 10);
        const moved = await call(`/api/accounts/${acct.id}/move`, { body: { to_shard: to, drain_seconds: 0 } });
        expect(moved.status, moved.text).toBe(200);
        gate.released = true;
        const outcome = await running;
        await finish(outcome.value);
        await check();
        await own.idle();
        // Nothing twice: whatever was sent again went with the one reference (the sandbox's ledger,
        // as Stripe's idempotency keys do, moves money once per reference).
        const references = new Set(own.calls.filter((c) => c.method === method).map((c) => c.reference));
        expect([...references]).toHaveLength(1);
        expect(own.moneyMoved(method)).toHaveLength(1);
      } finally {
        gate.released = true;
        ledger.install();
      }
    }, 30_000);
  }
});

describe("after every case", () => {
  it("ran every registered combination, then the whole database holds the invariants", async () => {
    // 23 operations × 3 D1 faults × with/without a key, and 46 background-job cases.
    const EXPECTED = 23 * 3 * 2 + 6 + 6 + 6 + 6 + 7 + 7 + 2 + 6 + 12 + 4; // + the two variants of updateSubscription, and the cron's settlement of a change's charge
    expect(registered).toBeGreaterThanOrEqual(EXPECTED);
    expect(ran, `cases that did not run: ${registered - ran}`).toBe(registered);

    // Deliveries whose enqueue the matrix dropped are the sweeper's: once they are stale, it
    // re-enqueues them, and each message is handled as the delivery queue's consumer handles it.
    // (The settlement cases ran sweeps up to ~8 minutes ahead, which touched them then.)
    // The dunning cases billed days ahead (a retry's due time), so their deliveries are made then:
    // a second sweep runs half an hour after the latest of them.
    receivers.answer("ok");
    const latest = await one<{ at: number | null }>("SELECT max(updated_at) AS at FROM webhook_deliveries WHERE status = 'pending'");
    const first = Date.now() + 30 * 60_000;
    for (const at of [first, ...(latest.at !== null && latest.at + 30 * 60_000 > first ? [latest.at + 30 * 60_000] : [])]) {
      useClock({ now: () => at });
      const swept = recordingQueue();
      expect(await runCron({ JOB_QUEUE: recordingQueue(), DELIVERY_QUEUE: swept }, at)).toBeNull();
      for (const message of swept.sent as { deliveryId: string }[]) await processDelivery(env, message.deliveryId);
    }
    useClock();
    await ledger.idle();
    await invariants("the whole run", [
      () => everyEventDeliveredOrFailed(),
      () => acknowledgedDeliveriesDelivered(),
      () => everyEventReachesItsEndpoints([rnEndpoint]),
      () => deliveriesStayInTheirAccount(),
      () => paymentsEqualCharges(ledger),
      () => refundsNeverExceedPayment(),
      () => payoutsSentOnce(ledger),
      () => atMostOneProcessorCallPer(ledger, "payout"),
      () => atMostOneProcessorCallPer(ledger, "refund"),
      () => atMostOneProcessorCallPer(ledger, "period_attempt"),
      () => atMostOneProcessorCallPer(ledger, "idempotency_key"),
      () => noSecretOrCardAtRest({ pans: sentPans, cvvs: sentCvvs }),
    ]);
  }, 60_000);
});
