// Shared steps of the proof suites (faults, fuzz, security), built on test/helpers.ts,
// test/foundation/support.ts and test/payments/support.ts: the operations of the OpenAPI
// document, the scope each one needs, a valid body for each, one object of every kind for an
// account, whole-database snapshots, and the Worker called with a hand-made environment (a queue
// that fails or drops, to simulate a crash between a commit and its enqueue).
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import worker from "../../src/index";
import { SCOPES } from "../../src/auth/scopes";
import { type Account, BASE, type CallResult, call } from "../helpers";
import { createKey } from "../foundation/support";
import { cardFields, createUser, payoutBody, waitFor } from "../payments/support";
import { RECEIVER_ORIGIN } from "../webhooks/receiver";

// ---------------------------------------------------------------------------------------------
// The OpenAPI document

export interface Operation {
  method: "get" | "post" | "put" | "patch" | "delete";
  path: string;
  operationId: string;
  /** No bearer credential (the document gives the operation no `security`). */
  isPublic: boolean;
  /** The document gives the operation a request body. */
  hasBody: boolean;
  /** Query parameter names. */
  query: string[];
  /** Whether the path has an {id}. */
  hasId: boolean;
}

export const label = (op: Operation) => `${op.method.toUpperCase()} ${op.path}`;

/** Every operation of GET /openapi.json, as the running Worker documents it. */
export async function operations(): Promise<Operation[]> {
  const res = await call("/openapi.json");
  expect(res.status).toBe(200);
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(res.body.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
      ops.push({
        method: method as Operation["method"],
        path,
        operationId: op.operationId,
        isPublic: !op.security || op.security.length === 0,
        hasBody: Boolean(op.requestBody),
        query: (op.parameters ?? []).filter((p: any) => p.in === "query").map((p: any) => p.name),
        hasId: path.includes("{id}"),
      });
    }
  }
  return ops;
}

/**
 * The scope each operation needs. The OpenAPI document does not expose it (apiRoute keeps
 * `scope` out of the generated operation), so it is written here from the route files; the
 * security suite checks this table against the document (every operation, nothing extra) and
 * against the running Worker (the scope alone is enough; every other scope is not).
 */
export const SCOPE_OF: Record<string, (typeof SCOPES)[number]> = {
  createKey: "keys:write",
  listKeys: "keys:read",
  getKey: "keys:read",
  revokeKey: "keys:write",
  createRequestId: "request_ids:write",
  listRequestIds: "request_ids:read",
  getRequestId: "request_ids:read",
  createUser: "users:write",
  listUsers: "users:read",
  getUser: "users:read",
  updateUser: "users:write",
  createPayout: "payouts:write",
  listPayouts: "payouts:read",
  getPayout: "payouts:read",
  cancelPayout: "payouts:write",
  listPayments: "payments:read",
  getPayment: "payments:read",
  createRefund: "refunds:write",
  listRefunds: "refunds:read",
  getRefund: "refunds:read",
  createWebhook: "webhooks:write",
  listWebhooks: "webhooks:read",
  getWebhook: "webhooks:read",
  updateWebhook: "webhooks:write",
  deleteWebhook: "webhooks:write",
  rotateWebhookSecret: "webhooks:write",
  listWebhookDeliveries: "webhooks:read",
  testWebhook: "webhooks:write",
  listEventTypes: "events:read",
  listEvents: "events:read",
  getEvent: "events:read",
  redeliverEvent: "events:write",
  createPlan: "plans:write",
  listPlans: "plans:read",
  getPlan: "plans:read",
  updatePlan: "plans:write",
  createSubscription: "subscriptions:write",
  listSubscriptions: "subscriptions:read",
  getSubscription: "subscriptions:read",
  updateSubscription: "subscriptions:write",
  cancelSubscription: "subscriptions:write",
  createTestClock: "test_clocks:write",
  listTestClocks: "test_clocks:read",
  getTestClock: "test_clocks:read",
  advanceTestClock: "test_clocks:write",
};

/** Every scope except the resource's own read and write: what "lacks the route's scope" means. */
export const scopesWithout = (scope: string) => SCOPES.filter((s) => s.split(":")[0] !== scope.split(":")[0]);

// ---------------------------------------------------------------------------------------------
// One object of every kind

export interface Fixtures {
  user: string;
  requestId: string;
  /** A restricted key that is not the caller's own (DELETE /api/keys/{id} may revoke it). */
  key: string;
  /** A pending payout committed as POST /payout does, whose settlement was never enqueued. */
  payout: string;
  payment: string;
  refund: string;
  webhook: string;
  event: string;
  plan: string;
  subscription: string;
  clock: string;
}

/** Path prefix (before /{id}) -> the fixture that fills it. */
const ID_OF_PATH: [string, keyof Fixtures][] = [
  ["/api/keys/", "key"],
  ["/api/request-id/", "requestId"],
  ["/api/users/", "user"],
  ["/payouts/", "payout"],
  ["/payments/", "payment"],
  ["/refunds/", "refund"],
  ["/api/webhooks/", "webhook"],
  ["/api/events/", "event"],
  ["/subscription-plans/", "plan"],
  ["/subscriptions/", "subscription"],
  ["/api/test-clocks/", "clock"],
];

/** The fixture id for an operation's {id}; fails for a path no fixture covers (a new resource). */
export function fixtureId(op: Operation, fx: Fixtures): string {
  const match = ID_OF_PATH.find(([prefix]) => op.path.startsWith(`${prefix}{id}`));
  if (!match) throw new Error(`No fixture fills the {id} of ${label(op)}: add one to test/proof/support.ts`);
  return fx[match[1]];
}

export const pathWith = (op: Operation, id: string) => op.path.replace("{id}", encodeURIComponent(id));

/** A body each mutating operation accepts (given the fixtures), so a refusal is about something else. */
export function validBody(op: Operation, fx: Fixtures): unknown {
  const bodies: Record<string, () => unknown> = {
    createAccount: () => ({ name: "Proof", email: "proof@example.com" }),
    createAccessToken: () => ({ grant_type: "client_credentials" }),
    createKey: () => ({ name: "proof key", scopes: ["users:read"] }),
    revokeKey: () => undefined,
    createRequestId: () => ({ purpose: "proof", metadata: { order: "A-1" } }),
    createUser: () => ({ name: "Grace Hopper", email: "grace@example.com" }),
    updateUser: () => ({ name: "Grace B. Hopper", email: "grace@example.com" }),
    createPayout: () => payoutBody({ amount: 1234 }, PROOF_CARD.pan, PROOF_CARD.cvv),
    cancelPayout: () => undefined,
    createRefund: () => ({ payment_id: fx.payment, amount: 1 }),
    createWebhook: () => ({ url: `${RECEIVER_ORIGIN}/proof`, events: ["payout.paid"] }),
    updateWebhook: () => ({ status: "active" }),
    deleteWebhook: () => undefined,
    rotateWebhookSecret: () => undefined,
    testWebhook: () => undefined,
    redeliverEvent: () => ({}),
    createPlan: () => ({ name: "Basic", price: 5, currency: "usd", interval: "month" }),
    updatePlan: () => ({ name: "Basic+" }),
    createSubscription: () => ({ user_id: fx.user, plan_id: fx.plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) }),
    updateSubscription: () => ({ quantity: 2 }),
    cancelSubscription: () => undefined,
    createTestClock: () => ({ frozen_time: "2030-01-01T00:00:00.000Z", name: "proof" }),
    advanceTestClock: () => ({ frozen_time: "2030-02-01T00:00:00.000Z" }),
  };
  if (!Object.hasOwn(bodies, op.operationId)) throw new Error(`No valid body for ${op.operationId}: add one to test/proof/support.ts`);
  return bodies[op.operationId]();
}

/** The card the proof suites use; its PAN and CVV are recorded (cardFields) for the data scan. */
export const PROOF_CARD = { pan: "4242424242424242", cvv: "739" };

/** Runs the Worker's fetch with `overrides` on its environment (a failing or dropping queue). */
export async function fetchWith(overrides: Partial<typeof env>, path: string, init: RequestInit & { key?: string; json?: unknown } = {}) {
  const headers = new Headers(init.headers);
  if (init.key) headers.set("authorization", `Bearer ${init.key}`);
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers.set("content-type", "application/json");
  }
  const ctx = createExecutionContext();
  const response = await worker.fetch(
    new Request(`${BASE}${path}`, { method: init.method ?? (body !== undefined ? "POST" : "GET"), headers, body }) as never,
    { ...env, ...overrides },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  const text = await response.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body: parsed, headers: response.headers, text } as CallResult;
}

/** A queue whose sends are silently lost, as if the Worker died right after its commit. */
export const droppingQueue = () => ({ send: async () => {}, sendBatch: async () => {} }) as unknown as Queue;
/** A queue that refuses every send. */
export const failingQueue = () =>
  ({
    send: async () => {
      throw new Error("queue unavailable");
    },
    sendBatch: async () => {
      throw new Error("queue unavailable");
    },
  }) as unknown as Queue;

/** Creates a payout through POST /payout whose settlement message is lost after the commit. */
export async function payoutWithoutSettlement(acct: Account, overrides: Record<string, unknown> = {}, pan = PROOF_CARD.pan) {
  const res = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/payout", { key: acct.key, json: payoutBody(overrides, pan, PROOF_CARD.cvv) });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

/** Creates a refund through POST /refunds whose settlement message is lost after the commit. */
export async function refundWithoutSettlement(acct: Account, body: Record<string, unknown>) {
  const res = await fetchWith({ JOB_QUEUE: droppingQueue() }, "/refunds", { key: acct.key, json: body });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

async function created(res: CallResult, status = 201) {
  expect(res.status, res.text).toBe(status);
  return res.body;
}

/**
 * One object of every kind for `acct`, made through the API. When it returns, nothing is left
 * running in the background for them (the refund is settled, the payout was never enqueued, and
 * the webhook endpoint is made last, subscribed to a type none of this emits).
 */
export async function seed(acct: Account): Promise<Fixtures> {
  const user = await createUser(acct, "Proof User", "proof.user@example.com");
  const requestId = (await created(await call("/api/request-id", { key: acct.key, body: { purpose: "proof" } }))).id;
  const key = (await createKey(acct.key, ["users:read"], "victim")).id;
  const plan = (await created(await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 19.99, currency: "usd", interval: "month" } }))).id;
  const subscription = (
    await created(await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }))
  ).id;
  const payments = await call(`/payments?subscription_id=${subscription}`, { key: acct.key });
  expect(payments.body.data).toHaveLength(1);
  const payment = payments.body.data[0].id;
  const refund = (await created(await call("/refunds", { key: acct.key, body: { payment_id: payment, amount: 100 } }))).id;
  await waitFor(async () => expect((await call(`/refunds/${refund}`, { key: acct.key })).body.status).toBe("succeeded"));
  const payout = (await payoutWithoutSettlement(acct)).id;
  const clock = (await created(await call("/api/test-clocks", { key: acct.key, body: { frozen_time: "2030-01-01T00:00:00.000Z" } }))).id;
  const event = (await call("/api/events?limit=1", { key: acct.key })).body.data[0].id;
  const webhook = (await created(await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/proof`, events: ["payout.paid"] } }))).id;
  return { user: user.id, requestId, key, payout, payment, refund, webhook, event, plan, subscription, clock };
}

// ---------------------------------------------------------------------------------------------
// The database, whole

export async function tableNames(): Promise<string[]> {
  const rows = (await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all<{ name: string }>()).results;
  // D1's own metadata table cannot be read by a Worker; sqlite_sequence is SQLite's.
  return rows.map((r) => r.name).filter((n) => !n.startsWith("_cf_") && !n.startsWith("sqlite_"));
}

let cachedTables: string[] | undefined;

/** Every row of every table, as text (rows sorted), read in one batch. */
export async function snapshot(): Promise<Record<string, string[]>> {
  cachedTables ??= await tableNames();
  const results = await env.DB.batch(cachedTables.map((name) => env.DB.prepare(`SELECT * FROM "${name}"`)));
  return Object.fromEntries(cachedTables.map((name, i) => [name, results[i].results.map((row) => JSON.stringify(row)).sort()]));
}

/** The tables whose rows differ between two snapshots, with the rows added and removed. */
export function changes(before: Record<string, string[]>, after: Record<string, string[]>) {
  const diff: Record<string, { added: string[]; removed: string[] }> = {};
  for (const table of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = new Set(before[table] ?? []);
    const b = new Set(after[table] ?? []);
    const added = [...b].filter((r) => !a.has(r));
    const removed = [...a].filter((r) => !b.has(r));
    if (added.length || removed.length) diff[table] = { added: added.map((r) => r.slice(0, 300)), removed: removed.map((r) => r.slice(0, 300)) };
  }
  return diff;
}

/** Waits until background work (queue consumers, deliveries) has stopped changing the database. */
export async function quiesce(timeoutMs = 10_000) {
  const start = Date.now();
  let last = JSON.stringify(await snapshot());
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 60));
    const pending = await env.DB.prepare(
      "SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at IS NULL) + (SELECT count(*) FROM refunds WHERE status = 'pending') AS n",
    ).first<{ n: number }>();
    const now = JSON.stringify(await snapshot());
    if (now === last && pending!.n === 0) return;
    if (Date.now() - start > timeoutMs) return;
    last = now;
  }
}

// ---------------------------------------------------------------------------------------------
// Answers

/** The documented error shape, with a Request-Id header equal to its request_id. */
export function expectErrorShape(res: CallResult, context: string) {
  expect(res.body, `${context}: ${res.status} ${res.text.slice(0, 300)}`).toMatchObject({
    error: { type: expect.any(String), code: expect.any(String), message: expect.any(String), request_id: expect.stringMatching(/^req_/) },
  });
  expect(res.headers.get("request-id"), context).toBe(res.body.error.request_id);
  expect(res.headers.get("content-type"), context).toMatch(/^application\/json/);
}

/** Answers every outbound fetch (webhook deliveries) with 200, wherever it goes; nothing leaves. */
export function acceptAllOutbound() {
  const sent: string[] = [];
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    sent.push(new Request(input, init).url);
    return new Response("ok", { status: 200 });
  });
  return { sent, restore: () => spy.mockRestore() };
}

/** The names Object.prototype and friends hold now, to prove later that nothing was added. */
export function prototypeNames() {
  return {
    object: Object.getOwnPropertyNames(Object.prototype).sort(),
    array: Object.getOwnPropertyNames(Array.prototype).sort(),
    function: Object.getOwnPropertyNames(Function.prototype).sort(),
    string: Object.getOwnPropertyNames(String.prototype).sort(),
  };
}

export function expectNoPollution(baseline: ReturnType<typeof prototypeNames>) {
  const probe = {} as Record<string, unknown>;
  for (const name of ["polluted", "isAdmin", "amount", "status", "scopes", "account_id", "x"]) {
    expect(probe[name], `Object.prototype.${name}`).toBeUndefined();
    expect(([] as unknown as Record<string, unknown>)[name], `Array.prototype.${name}`).toBeUndefined();
  }
  expect(prototypeNames()).toEqual(baseline);
  expect(Object.getPrototypeOf({})).toBe(Object.prototype);
}
