// Test and live mode apart, for every operation of GET /openapi.json, in both directions: a live
// key never reads, lists, changes or replays a test object, and a test key never a live one.
//
//  - every operation on an id: the other mode's id answers 404 (a live key on a test clock: 403,
//    clocks are test-only), with the key and with an access token minted from it, and nothing is
//    written;
//  - every list: only the caller's mode's objects, whatever cursor or filter names the other's;
//  - every create: the object is of the caller's mode, and the other mode cannot see it;
//  - every mutating operation, with one Idempotency-Key used in both modes (each order): it runs
//    once per mode and never replays the other mode's answer;
//  - events and deliveries, from requests and from background work (settlement, renewals): each
//    reaches only the endpoints of its own mode.
//
// The sweep's live account has no Stripe connection: the live objects that need a processor
// (payouts, payments, subscriptions, refunds; and test clocks, which exist in test mode only) are
// rows copied as live ones (test/support/modes.ts), and operations that need the processor answer
// 400 livemode_unavailable. Live money through Stripe (the fake) is proven in test/live/ and in the
// background-work test below, on a connected account.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import { authenticate } from "../../src/auth/credentials";
import { overviewStats } from "../../src/dashboard/stats";
import { processDelivery } from "../../src/webhooks/consumer";
import { withoutSecrets } from "../../src/middleware/stored-answers";
import { firstChargeReference } from "../../src/routes/write-path";
import type { AppEnv } from "../../src/context";
import type { Context } from "hono";
import { type CallResult, call, expectErrorShape, signup } from "../support/http";
import { type Fixtures, createKey, createPlan, createUser, mintToken, payoutWithoutSettlement, subscribed } from "../support/fixtures";
import { changes, countOf, quiesce, snapshot } from "../support/db";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";
import { waitFor } from "../support/wait";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { type Mode, type TwoModes, other, seedBothModes } from "../support/modes";
import { type Operation, fixtureId, label, operations, pathWith, validBody } from "../support/operations";
import { dashboardFetch, signIn, textOf } from "../dashboard/support";
import { STRIPE_CARDS, connectStripe, deliverStripeEvents, installFakeStripe, livePayout, payableUser } from "../support/live";

const receiver = installReceiver();
/** Live money in this file goes through the fake Stripe, in this isolate. */
const stripe = installFakeStripe();
const MODES: Mode[] = ["test", "live"];
/** Test clocks exist in test mode only: a live credential is refused with 403 before any read. */
const TEST_ONLY = new Set(["createTestClock", "listTestClocks", "getTestClock", "advanceTestClock"]);
/** The processor connection belongs to live mode: a test credential is refused with 403. */
const LIVE_ONLY = new Set(["connectProcessor", "getProcessor", "disconnectProcessor"]);
/** Operations that need a card processor, which live mode does not have yet: 400 livemode_unavailable. */
const NEEDS_PROCESSOR = new Set(["createPayout", "createRefund", "createSubscription", "payInvoice", "createPaymentMethod", "createPayment", "capturePayment", "cancelPayment"]);
/** Operations that end their object: run after every other operation on the same fixtures. */
const ENDING = ["revokeKey", "cancelPayout", "cancelSubscription", "deleteWebhook", "voidInvoice", "detachPaymentMethod"];

let ops: Operation[];
let both: TwoModes;
let tokens: Record<Mode, string>;

beforeAll(async () => {
  ops = await operations();
  both = await seedBothModes(await signup("Two modes"));
  tokens = { test: await mintToken(both.keys.test), live: await mintToken(both.keys.live) };
  await quiesce();
}, 60_000);

/** Payouts made through POST /payout: their settlement (and its payout.paid delivery) runs after a hold. */
const settling: string[] = [];

afterAll(async () => {
  // Nothing may reach the network once the receiver is gone: let the payouts settle and deliver.
  await waitFor(async () => {
    for (const id of settling) expect(await countOf("SELECT count(*) AS n FROM payouts WHERE id = ? AND status = 'pending'", id), id).toBe(0);
  }, 30_000);
  await quiesce();
  stripe.restore();
  receiver.restore();
}, 40_000);

/** The account itself (GET and PATCH /api/account) is one across both modes: proven on its own below. */
const ACCOUNT_WIDE = new Set(["getAccount", "updateAccount"]);
const guarded = () => ops.filter((op) => !op.isPublic && !ACCOUNT_WIDE.has(op.operationId));
const isLive = (mode: Mode) => mode === "live";

async function send(op: Operation, fx: Fixtures, credential: string, idempotencyKey?: string) {
  const path = op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path;
  const body = op.method === "get" ? undefined : validBody(op, fx);
  const res = await call(path, { method: op.method.toUpperCase(), key: credential, body, idempotencyKey });
  if (op.operationId === "createPayout" && res.status === 201) settling.push(res.body.id);
  return res;
}

/** What `op` answers in `mode` when it acts on that mode's own objects. */
function expectOwnModeAnswer(op: Operation, mode: Mode, res: CallResult, context: string) {
  if (isLive(mode) && TEST_ONLY.has(op.operationId)) {
    expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(403);
    expect(res.body.error.code, context).toBe("livemode_not_allowed");
  } else if (!isLive(mode) && LIVE_ONLY.has(op.operationId)) {
    expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(403);
    expect(res.body.error.code, context).toBe("livemode_required");
  } else if (isLive(mode) && op.operationId === "disconnectProcessor") {
    // The live fixtures' subscription depends on the connection: it cannot be removed under them.
    expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(409);
    expect(res.body.error.code, context).toBe("processor_in_use");
  } else if (isLive(mode) && NEEDS_PROCESSOR.has(op.operationId)) {
    expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(400);
    expect(res.body.error.code, context).toBe("livemode_unavailable");
  } else {
    expect(res.status, `${context}: ${res.text.slice(0, 300)}`).toBeGreaterThanOrEqual(200);
    expect(res.status, `${context}: ${res.text.slice(0, 300)}`).toBeLessThan(300);
    if (op.operationId === "getInvoicePdf" || op.operationId === "getCreditNotePdf") {
      expect(res.headers.get("content-type"), context).toMatch(/^application\/pdf/);
    } else if (res.body.object === "list") {
      for (const item of res.body.data) expect(item.livemode, `${context}: ${item.id}'s livemode`).toBe(isLive(mode));
    } else {
      expect(res.body.livemode, `${context}: the answer's livemode`).toBe(isLive(mode));
    }
  }
}

/** Runs `fn`, then asserts that the database is exactly as it was. */
async function writesNothing(context: string, fn: () => Promise<void>) {
  const before = await snapshot();
  await fn();
  expect(changes(before, await snapshot()), context).toEqual({});
}

const idsOf = (fx: Fixtures) => new Set(Object.values(fx));

describe("each mode's own objects", () => {
  it("every fixture is real: each mode reads each of its own objects, marked with its mode", async () => {
    for (const mode of MODES) {
      for (const op of guarded().filter((o) => o.hasId && o.method === "get")) {
        expectOwnModeAnswer(op, mode, await send(op, both.fixtures[mode], both.keys[mode]), `${label(op)} in ${mode} mode`);
      }
    }
  });
});

describe("an id of the other mode answers 404, on every operation that takes one", () => {
  it("with the key and with an access token, in both directions, and nothing is written", async () => {
    const withId = guarded().filter((op) => op.hasId);
    expect(withId.length).toBeGreaterThan(20);
    let checks = 0;
    await writesNothing("the other mode's ids", async () => {
      for (const mode of MODES) {
        const foreign = both.fixtures[other(mode)];
        for (const op of withId) {
          for (const [name, credential] of [["key", both.keys[mode]], ["access token", tokens[mode]]]) {
            const res = await send(op, foreign, credential);
            const context = `${label(op)} on a ${other(mode)}-mode object with a ${mode}-mode ${name}`;
            expectErrorShape(res, context);
            if (isLive(mode) && TEST_ONLY.has(op.operationId)) {
              expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(403);
              expect(res.body.error.code, context).toBe("livemode_not_allowed");
            } else {
              expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(404);
              expect(res.body.error, context).toMatchObject({ type: "not_found_error", code: "resource_missing" });
            }
            // Nothing of the object is told.
            expect(res.text, context).not.toMatch(/Proof User|Live User/);
            checks++;
          }
        }
      }
    });
    console.log(`mode sweep: ${withId.length} operations on an id × 2 directions × 2 credentials = ${checks} checks`);
    expect(checks).toBe(withId.length * 2 * 2);
  }, 60_000);

  it("the other mode's ids inside a body answer 404 naming the parameter (or 400 livemode_unavailable first), and write nothing", async () => {
    await writesNothing("ids in bodies", async () => {
      for (const mode of MODES) {
        const own = both.fixtures[mode];
        const foreign = both.fixtures[other(mode)];
        const key = both.keys[mode];
        const cases: [string, string, unknown, string][] = [
          ["POST", "/payout", { ...(validBody({ operationId: "createPayout" } as Operation, own) as object), recipient_id: foreign.user }, "recipient_id"],
          ["POST", "/refunds", { payment_id: foreign.payment, amount: 1 }, "payment_id"],
          ["POST", "/subscriptions", { ...(validBody({ operationId: "createSubscription" } as Operation, own) as object), user_id: foreign.user }, "user_id"],
          ["POST", "/subscriptions", { ...(validBody({ operationId: "createSubscription" } as Operation, own) as object), plan_id: foreign.plan }, "plan_id"],
          ["PUT", `/subscriptions/${own.subscription}`, { plan_id: foreign.plan }, "plan_id"],
          ["POST", "/payments", { ...(validBody({ operationId: "createPayment" } as Operation, own) as object), user_id: foreign.user }, "user_id"],
          ["POST", "/api/users", { name: "Mallory", email: "mallory@example.com", test_clock: foreign.clock }, "test_clock"],
          ["POST", `/api/events/${own.event}/redeliver`, { endpoint_id: foreign.webhook }, "endpoint_id"],
        ];
        for (const [method, path, body, param] of cases) {
          const res = await call(path, { key, method, body });
          const context = `${method} ${path} in ${mode} mode with the ${other(mode)}-mode ${param}`;
          expectErrorShape(res, context);
          if (isLive(mode) && (path === "/payout" || path === "/refunds")) {
            // The processor is asked for before anything is read: live mode has none yet.
            expect(res.status, context).toBe(400);
            expect(res.body.error.code, context).toBe("livemode_unavailable");
          } else {
            expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(404);
            expect(res.body.error, context).toMatchObject({ type: "not_found_error", code: "resource_missing", param });
          }
        }
      }
    });
  });
});

describe("lists show the caller's mode only", () => {
  /** The fixture each list must show in its own mode (the positive control). */
  const OWN_ITEM: Record<string, keyof Fixtures> = {
    listKeys: "key",
    listRequestIds: "requestId",
    listUsers: "user",
    listPayouts: "payout",
    listPayments: "payment",
    listRefunds: "refund",
    listWebhooks: "webhook",
    listEvents: "event",
    listPlans: "plan",
    listSubscriptions: "subscription",
    listTestClocks: "clock",
  };

  it("every list, paged from or filtered by the other mode's ids, holds only the caller's mode's objects", async () => {
    // GET /api/processor is the account's one connection, not a list (test/live/connection.test.ts).
    const lists = guarded().filter((op) => op.method === "get" && !op.hasId && op.operationId !== "getProcessor");
    let checks = 0;
    for (const mode of MODES) {
      const key = both.keys[mode];
      const foreignIds = idsOf(both.fixtures[other(mode)]);
      for (const op of lists) {
        const context = `${label(op)} in ${mode} mode`;
        checks++;
        // GET /api/event-types is a static catalog, not paged: it takes no query parameters.
        const first = await call(op.query.includes("limit") ? `${op.path}?limit=100` : op.path, { key });
        if ((isLive(mode) && TEST_ONLY.has(op.operationId)) || (!isLive(mode) && LIVE_ONLY.has(op.operationId))) {
          expect(first.status, context).toBe(403);
          continue;
        }
        expect(first.status, `${context}: ${first.text.slice(0, 200)}`).toBe(200);
        const items = first.body.data as { id?: string; livemode?: boolean }[];
        for (const item of items.filter((i) => i.id !== undefined)) {
          expect(item.livemode, `${context}: ${item.id}`).toBe(isLive(mode));
          expect(foreignIds.has(item.id!), `${context} shows ${item.id}`).toBe(false);
        }
        const own = OWN_ITEM[op.operationId];
        if (own) expect(items.map((i) => i.id), `${context} shows its own ${own}`).toContain(both.fixtures[mode][own]);
        if (!op.query.includes("ending_before")) continue;
        for (const cursor of ["ending_before", "starting_after"]) {
          for (const id of foreignIds) {
            const res = await call(`${op.path}?${cursor}=${encodeURIComponent(id)}&limit=100`, { key });
            expect(res.status, `${context} ${cursor}=${id}: ${res.text.slice(0, 200)}`).toBeLessThan(500);
            if (res.status !== 200) {
              expectErrorShape(res, context);
              continue;
            }
            for (const item of res.body.data) expect(foreignIds.has(item.id), `${context} ${cursor}=${id} leaked ${item.id}`).toBe(false);
          }
        }
      }
    }
    console.log(`mode sweep: ${lists.length} lists × 2 directions = ${checks} checks`);
    expect(checks).toBe(lists.length * 2);
    for (const mode of MODES) {
      const foreign = both.fixtures[other(mode)];
      const filtered = [
        `/payouts?recipient_id=${foreign.user}`,
        `/payments?user_id=${foreign.user}`,
        `/payments?subscription_id=${foreign.subscription}`,
        `/refunds?payment_id=${foreign.payment}`,
        `/subscriptions?user_id=${foreign.user}`,
        `/api/events?object_id=${foreign.user}`,
      ];
      for (const path of filtered) {
        const res = await call(path, { key: both.keys[mode] });
        expect(res.status, `${path} in ${mode} mode`).toBe(200);
        expect(res.body.data, `${path} in ${mode} mode`).toEqual([]);
      }
    }
  }, 60_000);
});

describe("what a mode creates is of that mode, and the other mode cannot see it", () => {
  it("every create, in both modes", async () => {
    const creates = guarded().filter((op) => op.method === "post" && !op.hasId);
    let checks = 0;
    for (const mode of MODES) {
      for (const op of creates) {
        const res = await send(op, both.fixtures[mode], both.keys[mode]);
        const context = `${label(op)} in ${mode} mode`;
        expectOwnModeAnswer(op, mode, res, context);
        checks++;
        if (res.status !== 201) continue;
        const read = ops.find((o) => o.operationId === op.operationId.replace(/^create/, "get"))!;
        const unseen = await call(pathWith(read, res.body.id), { key: both.keys[other(mode)] });
        expect(unseen.status, `${label(read)} of the new object in ${other(mode)} mode`).toBe(isLive(other(mode)) && TEST_ONLY.has(read.operationId) ? 403 : 404);
        const list = ops.find((o) => o.method === "get" && o.path === read.path.replace("/{id}", ""))!;
        const listed = await call(`${list.path}?limit=100`, { key: both.keys[other(mode)] });
        if (listed.status === 200) expect(listed.body.data.map((i: { id: string }) => i.id), `${label(list)} in ${other(mode)} mode`).not.toContain(res.body.id);
      }
    }
    console.log(`mode sweep: ${creates.length} creates × 2 modes = ${checks} checks`);
    expect(checks).toBe(creates.length * 2);
    await quiesce();
  }, 60_000);
});

describe("one Idempotency-Key in both modes runs once per mode", () => {
  it("every mutating operation, test mode first and live mode first: never a replay of the other mode's answer", async () => {
    const mutating = guarded().filter((op) => op.method !== "get");
    const ordered = [...mutating.filter((op) => !ENDING.includes(op.operationId)), ...ENDING.map((id) => mutating.find((op) => op.operationId === id)!)];
    expect(ordered).toHaveLength(mutating.length);
    let checks = 0;
    for (const [first, second] of [["test", "live"], ["live", "test"]] as [Mode, Mode][]) {
      // Fresh objects for each order, so that each operation acts on objects in their first state.
      const modes = await seedBothModes(await signup(`Idempotency, ${first} first`));
      await quiesce();
      for (const op of ordered) {
        const key = `both-modes-${first}-first-${op.operationId}`;
        const answers: Partial<Record<Mode, CallResult>> = {};
        for (const mode of [first, second]) {
          const res = await send(op, modes.fixtures[mode], modes.keys[mode], key);
          const context = `${label(op)} in ${mode} mode, after the same Idempotency-Key in ${other(mode)} mode`;
          // Neither a replay of the other mode's answer, nor refused as the other mode's key.
          expect(res.headers.get("idempotent-replayed"), context).toBeNull();
          if (op.operationId === "voidInvoice" && !isLive(mode)) {
            // payInvoice ran earlier on the same test-mode invoice and paid it (live mode's was refused).
            expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(409);
            expect(res.body.error.code, context).toBe("invoice_paid");
          } else if (op.operationId === "cancelPayment" && !isLive(mode)) {
            // capturePayment ran earlier on the same test-mode authorization and captured it (live mode's has no connection).
            expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(409);
            expect(res.body.error.code, context).toBe("payment_unexpected_state");
          } else {
            expectOwnModeAnswer(op, mode, res, context);
          }
          answers[mode] = res;
        }
        checks++;
        for (const mode of MODES) {
          const answer = answers[mode]!;
          const succeeded = answer.status < 300;
          // Within a mode the key does what it always did: a success replays, a refusal left it free.
          const again = await send(op, modes.fixtures[mode], modes.keys[mode], key);
          expect(again.status, `${label(op)} again in ${mode} mode`).toBe(answer.status);
          if (succeeded) {
            expect(again.headers.get("idempotent-replayed"), `${label(op)} again in ${mode} mode`).toBe("true");
            expect(again.body, `${label(op)} again in ${mode} mode`).toEqual(withoutSecrets(answer.body));
          }
          const records = await countOf("SELECT count(*) AS n FROM idempotency_keys WHERE account_id = ? AND key = ? AND livemode = ?", modes.accountId, key, isLive(mode) ? 1 : 0);
          expect(records, `${label(op)}: the ${mode}-mode record of the key`).toBe(succeeded ? 1 : 0);
        }
      }
      await quiesce();
    }
    console.log(`mode sweep: ${mutating.length} mutating operations × 2 orders = ${checks} Idempotency-Key checks`);
    expect(checks).toBe(mutating.length * 2);
  }, 180_000);
});

describe("events and deliveries stay in their mode", () => {
  it("events from requests and from background work reach only the endpoints of their own mode", async () => {
    const acct = await signup("Deliveries by mode");
    const keys: Record<Mode, string> = { test: acct.key, live: acct.liveKey };
    const endpoints: Partial<Record<Mode, string>> = {};
    for (const mode of MODES) {
      const hook = await call("/api/webhooks", { key: keys[mode], body: { url: `${RECEIVER_ORIGIN}/modes/${mode}`, events: ["*"] } });
      expect(hook.status, hook.text).toBe(201);
      expect(hook.body.livemode).toBe(isLive(mode));
      endpoints[mode] = hook.body.id;
    }
    const asTest = { id: acct.id, key: keys.test };
    const asLive = { id: acct.id, key: keys.live };
    // Requests, in each mode.
    for (const [mode, as] of [["test", asTest], ["live", asLive]] as const) {
      const user = await createUser(as, { name: `${mode} customer`, email: `${mode}@example.com` });
      expect((await call(`/api/users/${user.id}`, { key: keys[mode], method: "PUT", body: { name: `${mode} customer 2`, email: `${mode}@example.com` } })).status).toBe(200);
      expect((await call(`/api/webhooks/${endpoints[mode]}/test`, { key: keys[mode], method: "POST" })).status).toBe(202);
    }
    // Background work in live mode, through the account's Stripe connection (the fake): a payout
    // handed to Stripe and settled by Stripe's payout.paid, and a renewal charged off-session.
    const connected = await connectStripe(acct);
    const payee = await payableUser(stripe.fake, acct, "Live Renewing");
    const livePlan = await createPlan(asLive, { name: "Live renewing" });
    const liveSub = (await subscribed(asLive, payee.id, livePlan.id, STRIPE_CARDS.succeeds)).id as string;
    const payout = await livePayout(acct, payee.id);
    expect(payout.status, payout.text).toBe(201);
    const livePayoutId = payout.body.id as string;
    await runJobs({ kind: "settlePayout", payoutId: livePayoutId });
    const stripePayout = [...stripe.fake.payouts.values()].find((p) => p.metadata?.tender_reference === livePayoutId)!;
    stripe.fake.settlePayout(stripePayout.id, "paid");
    expect((await deliverStripeEvents(stripe.fake, connected)).filter((a) => a.type === "payout.paid")).toEqual([
      { eventId: expect.any(String), type: "payout.paid", status: 200 },
    ]);
    await makeDue(liveSub);
    await runJobs({ kind: "billing.renew", subscriptionIds: [liveSub] });
    // Redelivering a live event from test mode is refused; from live mode it goes to the live endpoint.
    const [liveEvent] = (await call(`/api/events?object_id=${livePayoutId}&type=payout.paid`, { key: keys.live })).body.data;
    expect(liveEvent).toMatchObject({ type: "payout.paid", livemode: true });
    expect((await call(`/api/events/${liveEvent.id}/redeliver`, { key: keys.test, body: {} })).status).toBe(404);
    expect((await call(`/api/events/${liveEvent.id}/redeliver`, { key: keys.test, body: { endpoint_id: endpoints.test } })).status).toBe(404);
    expect((await call(`/api/events/${liveEvent.id}/redeliver`, { key: keys.live, body: { endpoint_id: endpoints.test } })).status).toBe(404);
    const redelivered = await call(`/api/events/${liveEvent.id}/redeliver`, { key: keys.live, body: { endpoint_id: endpoints.live } });
    expect(redelivered.status, redelivered.text).toBe(202);
    expect(redelivered.body).toMatchObject({ object: "redelivery", livemode: true, deliveries: [expect.stringMatching(/^dlv_/)] });
    // Without endpoint_id, only where it was not delivered: the live endpoint has it pending again, so it is skipped, never sent to test.
    const again = await call(`/api/events/${liveEvent.id}/redeliver`, { key: keys.live, body: {} });
    expect(again.status, again.text).toBe(202);
    expect(again.body).toMatchObject({ object: "redelivery", livemode: true, deliveries: [] });
    expect(again.body.skipped.map((s: { endpoint_id: string }) => s.endpoint_id)).toEqual([endpoints.live]);

    // The rows the background work wrote are live-mode rows.
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND livemode = 1", liveSub)).toBe(2);
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE subscription_id = ? AND livemode = 0", liveSub)).toBe(0);
    expect(await countOf("SELECT count(*) AS n FROM subscription_periods WHERE subscription_id = ? AND livemode = 1", liveSub)).toBe(2);
    expect(await countOf("SELECT count(*) AS n FROM subscription_periods WHERE subscription_id = ? AND livemode = 0", liveSub)).toBe(0);

    const eventsOf = async (mode: Mode) =>
      (await env.DB.prepare("SELECT id, type FROM events WHERE account_id = ? AND livemode = ?").bind(acct.id, isLive(mode) ? 1 : 0).all<{ id: string; type: string }>()).results;
    const expected: Record<Mode, { id: string; type: string }[]> = { test: await eventsOf("test"), live: await eventsOf("live") };
    expect(expected.live.map((e) => e.type).sort()).toEqual(
      [
        ...["customer.created", "customer.updated", "webhook.test"],
        ...["customer.created", "subscription_created", "payment.completed"],
        ...["payout.created", "payout.paid"],
        ...["payment.completed", "subscription_renewal"],
        // The first charge's and the renewal's invoices.
        ...["invoice.created", "invoice.finalized", "invoice.paid"],
        ...["invoice.created", "invoice.finalized", "invoice.paid"],
      ].sort(),
    );
    await waitFor(() => {
      for (const mode of MODES) {
        const ids = new Set(receiver.received.filter((r) => r.url.endsWith(`/modes/${mode}`)).map((r) => JSON.parse(r.body).id));
        for (const event of expected[mode]) expect(ids.has(event.id), `${mode} ${event.type} delivered`).toBe(true);
      }
    });
    await quiesce();
    for (const mode of MODES) {
      const got = receiver.received.filter((r) => r.url.endsWith(`/modes/${mode}`));
      const otherIds = new Set(expected[other(mode)].map((e) => e.id));
      for (const delivery of got) {
        const body = JSON.parse(delivery.body);
        expect(otherIds.has(body.id), `a ${other(mode)} event at the ${mode} endpoint`).toBe(false);
        expect(body.livemode, `${body.type ?? body.event} at the ${mode} endpoint`).toBe(isLive(mode));
        if (body.data?.object) expect(body.data.livemode, `${body.type}'s data at the ${mode} endpoint`).toBe(isLive(mode));
      }
    }
    // No delivery anywhere pairs an event with an endpoint of another mode or account.
    expect(
      await countOf(`SELECT count(*) AS n FROM webhook_deliveries d JOIN events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE d.livemode != e.livemode OR w.livemode != e.livemode OR w.account_id != e.account_id OR d.account_id != e.account_id`),
    ).toBe(0);
    // The feeds: each mode's events only.
    for (const mode of MODES) {
      const feed = (await call("/api/events?limit=100", { key: keys[mode] })).body.data as { id: string; livemode: boolean }[];
      expect(feed.map((e) => e.id).sort()).toEqual(expected[mode].map((e) => e.id).sort());
      for (const event of feed) expect(event.livemode).toBe(isLive(mode));
    }
  }, 60_000);

  it("a delivery row that pairs an event with an endpoint of the other mode sends nothing", async () => {
    const acct = await signup("Mismatched delivery");
    const live = await call("/api/webhooks", { key: acct.liveKey, body: { url: `${RECEIVER_ORIGIN}/mismatch/live`, events: ["*"] } });
    await createUser(acct, { name: "Test only" });
    const [testEvent] = (await call("/api/events?limit=1", { key: acct.key })).body.data;
    // Not a row Tender writes (deliveries are made per account and mode): written by hand.
    const deliveryId = `dlv_${testEvent.id.slice(4)}${live.body.id.slice(4)}`;
    await env.DB.prepare(
      "INSERT INTO webhook_deliveries (id, account_id, livemode, event_id, endpoint_id, status, attempt_count, created_at, updated_at) VALUES (?, ?, 1, ?, ?, 'pending', 0, ?, ?)",
    )
      .bind(deliveryId, acct.id, testEvent.id, live.body.id, new Date().toISOString(), Date.now())
      .run();
    expect(await processDelivery(env, deliveryId)).toBe("skipped");
    expect(receiver.received.filter((r) => r.url.endsWith("/mismatch/live"))).toEqual([]);
    expect(await countOf("SELECT count(*) AS n FROM webhook_deliveries WHERE id = ? AND status = 'failed' AND last_error = 'endpoint_mismatch'", deliveryId)).toBe(1);
  });
});

describe("keys by mode", () => {
  it("sign-up answers a live secret key; each mode's keys see, list and revoke only that mode's keys", async () => {
    const acct = await signup("Keys by mode");
    expect(acct.key).toMatch(/^sk_test_[0-9A-Za-z]{32}$/);
    expect(acct.liveKey).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    const listed = async (key: string) => (await call("/api/keys?limit=100", { key })).body.data as { id: string; mode: string; livemode: boolean; kind: string }[];
    const [liveSecret] = await listed(acct.liveKey);
    expect(await listed(acct.liveKey)).toHaveLength(1);
    expect(liveSecret).toMatchObject({ kind: "secret", mode: "live", livemode: true });
    const [testSecret] = await listed(acct.key);
    expect(await listed(acct.key)).toHaveLength(1);
    expect(testSecret).toMatchObject({ kind: "secret", mode: "test", livemode: false });

    const liveRestricted = await createKey({ id: acct.id, key: acct.liveKey }, ["keys:write", "users:read"], "live writer");
    expect(liveRestricted.secret).toMatch(/^rk_live_/);
    expect((await listed(acct.liveKey)).map((k) => k.id).sort()).toEqual([liveSecret.id, liveRestricted.id].sort());
    expect((await listed(acct.key)).map((k) => k.id)).toEqual([testSecret.id]);
    const testRestricted = await createKey(acct, ["keys:write", "users:read"], "test writer");
    expect(testRestricted.secret).toMatch(/^rk_test_/);

    // A test key never reads or revokes a live key, nor a live key a test one.
    for (const [key, foreign] of [[acct.key, liveSecret.id], [acct.key, liveRestricted.id], [acct.liveKey, testSecret.id], [acct.liveKey, testRestricted.id]]) {
      expect((await call(`/api/keys/${foreign}`, { key })).status).toBe(404);
      expect((await call(`/api/keys/${foreign}`, { key, method: "DELETE" })).status).toBe(404);
    }
    expect((await call("/api/users", { key: acct.liveKey })).status).toBe(200);
    expect((await call("/api/users", { key: acct.key })).status).toBe(200);

    // Only the live secret key creates live keys: not a live restricted key, nor a live access token.
    const liveToken = await mintToken(acct.liveKey);
    expect(liveToken).toMatch(/^at_live_/);
    for (const credential of [liveRestricted.secret, liveToken]) {
      const res = await call("/api/keys", { key: credential, body: { scopes: ["users:read"] } });
      expect(res.status, res.text).toBe(403);
      expectErrorShape(res, "a live key made by a non-secret credential");
      expect(res.body.error).toMatchObject({ type: "permission_error", code: "live_key_requires_secret_key" });
    }
    // A test restricted key with keys:write still creates test keys.
    const made = await call("/api/keys", { key: testRestricted.secret, body: { scopes: ["users:read"] } });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ mode: "test", livemode: false });
    expect(await countOf("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND mode = 'live'", acct.id)).toBe(2);
  });

  it("access tokens and dashboard sessions act in their key's mode", async () => {
    const acct = await signup("Sessions by mode");
    await createUser(acct, { name: "Test Person", email: "test.person@example.com" });
    await createUser({ id: acct.id, key: acct.liveKey }, { name: "Live Person", email: "live.person@example.com" });
    const liveToken = await mintToken(acct.liveKey);
    const names = async (key: string) => ((await call("/api/users", { key })).body.data as { name: string }[]).map((u) => u.name);
    expect(await names(liveToken)).toEqual(["Live Person"]);
    expect(await names(await mintToken(acct.key))).toEqual(["Test Person"]);

    for (const [mode, key, mine, theirs] of [["test", acct.key, "Test Person", "Live Person"], ["live", acct.liveKey, "Live Person", "Test Person"]]) {
      const cookie = await signIn(key);
      const page = await dashboardFetch("/dashboard/users", { cookie });
      expect(page.status, page.html.slice(0, 300)).toBe(200);
      expect(textOf(page.html), `the ${mode}-mode dashboard`).toContain(mine);
      expect(textOf(page.html), `the ${mode}-mode dashboard`).not.toContain(theirs);
      // The overview's figures, through the same scoping: the session's key's mode only.
      const auth = await authenticate(env, key, Date.now());
      const stats = await overviewStats(createDb(env.DB), auth, Date.now());
      expect(stats.counts.find((c) => c.label === "Users")?.value, `${mode}-mode users`).toBe(1);
      expect(stats.counts.find((c) => c.label === "Events, 30 days")?.value, `${mode}-mode events`).toBe(1);
    }
  });
});

describe("a first charge's processor reference", () => {
  it("differs between the modes for one Idempotency-Key, and keeps its test-mode form", () => {
    const since = "2026-11-23T12:00:00.000Z";
    const referenceIn = (livemode: boolean) =>
      firstChargeReference({
        var: { auth: { accountId: "acct_1", livemode }, idempotency: { key: "order-1", since, mode: "claimed" } },
        req: { method: "POST", routePath: "/subscriptions" },
      } as unknown as Context<AppEnv>);
    // The form test-mode references had before modes existed: a retry of an older claim charges the same one.
    expect(referenceIn(false)).toBe(`acct_1:idempotency:order-1:${since}`);
    expect(referenceIn(true)).toBe(`acct_1:live:idempotency:order-1:${since}`);
  });
});

describe("the account, one across both modes", () => {
  it("a live secret key and a test one read the same account, and a change made with one is seen by the other", async () => {
    expect(ops.filter((op) => ACCOUNT_WIDE.has(op.operationId)).map((op) => op.operationId).sort()).toEqual(["getAccount", "updateAccount"]);
    const acct = await signup("Account-wide");
    const [test, live] = await Promise.all([call("/api/account", { key: acct.key }), call("/api/account", { key: acct.liveKey })]);
    expect(test.status, test.text).toBe(200);
    expect(live.body).toEqual(test.body);
    expect(test.body).not.toHaveProperty("livemode");
    const changed = await call("/api/account", { key: acct.liveKey, method: "PATCH", body: { event_retention_days: 7 } });
    expect(changed.status, changed.text).toBe(200);
    expect((await call("/api/account", { key: acct.key })).body.event_retention_days).toBe(7);
  });
});
