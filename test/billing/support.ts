// Shared steps of the billing suite: plans, users (optionally on a test clock), subscriptions,
// the job queue and cron driven by hand, and reads of what D1 holds.
import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import worker from "../../src/index";
import type { JobMessage } from "../../src/jobs";
import { sha256Hex } from "../../src/lib/crypto";
import { type Account, call } from "../helpers";

export const CARDS = {
  visa: "4242424242424242",
  mastercard: "5555555555554444",
  declined: "4000000000000002",
  insufficientFunds: "4000000000009995",
  declineAfterFirst: "4000000000000341",
  amex: "378282246310005",
} as const;

export const EXP_YEAR = new Date().getUTCFullYear() + 4;

export const card = (pan: string = CARDS.visa, overrides: Record<string, unknown> = {}) => ({
  payment_method: "card",
  card_number: pan,
  expiration_month: 12,
  expiration_year: EXP_YEAR,
  cvv: pan.startsWith("37") ? "1234" : "123",
  ...overrides,
});

/** The tiers of DESIGN.md: 1–5 at 7.00, 6–10 at 6.50, 11+ at 6.00. */
export const DESIGN_TIERS = [
  { up_to: 5, unit_price: 7.0 },
  { up_to: 10, unit_price: 6.5 },
  { up_to: null, unit_price: 6.0 },
];

export async function createPlan(acct: Account, overrides: Record<string, unknown> = {}) {
  const res = await call("/subscription-plans", {
    key: acct.key,
    body: { name: "Pro", price: 19.99, currency: "usd", interval: "month", description: "Pro plan", ...overrides },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

export async function createUser(acct: Account, testClock?: string) {
  const res = await call("/api/users", {
    key: acct.key,
    body: { name: "Ada Lovelace", email: "ada@example.com", ...(testClock ? { test_clock: testClock } : {}) },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; email: string; test_clock: string | null };
}

export async function createClock(acct: Account, frozenTime: string) {
  const res = await call("/api/test-clocks", { key: acct.key, body: { frozen_time: frozenTime, name: "clock" } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; frozen_time: string; status: string };
}

export async function advance(acct: Account, clockId: string, frozenTime: string) {
  const res = await call(`/api/test-clocks/${clockId}/advance`, { key: acct.key, body: { frozen_time: frozenTime } });
  expect(res.status, res.text).toBe(200);
  return res.body as { id: string; frozen_time: string; status: string };
}

export async function subscribe(acct: Account, userId: string, planId: string, pan: string = CARDS.visa, extra: Record<string, unknown> = {}) {
  return call("/subscriptions", { key: acct.key, body: { user_id: userId, plan_id: planId, ...card(pan), ...extra } });
}

export async function subscribed(acct: Account, userId: string, planId: string, pan: string = CARDS.visa, extra: Record<string, unknown> = {}) {
  const res = await subscribe(acct, userId, planId, pan, extra);
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

export async function getSubscription(acct: Account, id: string) {
  const res = await call(`/subscriptions/${id}`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body as Record<string, any>;
}

let messageCount = 0;

/** Runs job messages through the Worker's queue consumer, as the tender-jobs queue would. */
export async function runJobs(...bodies: JobMessage[]) {
  const batch = createMessageBatch<JobMessage>(
    "tender-jobs",
    bodies.map((body) => ({ id: `billing-job-${++messageCount}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch as MessageBatch, env, ctx);
  return getQueueResult(batch, ctx);
}

/** Runs the Worker's Cron Trigger once, at `scheduledTime`. */
export async function runCron(scheduledTime = Date.now()) {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime, cron: "* * * * *" }), env, ctx);
}

export interface PaymentRow {
  id: string;
  subscription_id: string | null;
  user_id: string | null;
  amount: number;
  currency: string;
  status: string;
  failure_code: string | null;
  created_at: string;
}

export async function paymentsOf(accountId: string): Promise<PaymentRow[]> {
  const rows = await env.DB.prepare("SELECT * FROM payments WHERE account_id = ? ORDER BY id").bind(accountId).all<PaymentRow>();
  return rows.results;
}

export async function periodsOf(subscriptionId: string) {
  const rows = await env.DB.prepare("SELECT * FROM subscription_periods WHERE subscription_id = ? ORDER BY period_index")
    .bind(subscriptionId)
    .all<{ period_index: number; period_start: string; amount: number; status: string; attempts: number; payment_id: string | null }>();
  return rows.results;
}

export async function eventsOf(accountId: string, type?: string) {
  const rows = await env.DB.prepare(`SELECT type, payload FROM events WHERE account_id = ?${type ? " AND type = ?" : ""} ORDER BY id`)
    .bind(...(type ? [accountId, type] : [accountId]))
    .all<{ type: string; payload: string }>();
  return rows.results.map((r) => ({ type: r.type, body: JSON.parse(r.payload) }));
}

/** The subscription notifications of one subscription, as `type:status`, in order. */
export async function notificationsOf(accountId: string, subscriptionId: string) {
  return (await eventsOf(accountId))
    .filter((e) => e.body.subscription_id === subscriptionId && e.type.startsWith("subscription_"))
    .map((e) => `${e.type}:${e.body.status}`);
}

/** Moves a subscription's due time into the past, as if the wall clock had reached it. */
export async function makeDue(subscriptionId: string, dueAt = Date.now() - 1000) {
  await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(dueAt, subscriptionId).run();
}

/** A live-mode secret key for the account, inserted directly (sign-up only issues test keys). */
export async function liveKey(accountId: string): Promise<string> {
  const key = `sk_live_${"L".repeat(16)}${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  await env.DB.prepare(
    "INSERT INTO api_keys (id, account_id, name, kind, mode, prefix, hash, scopes, created_at) VALUES (?, ?, 'live', 'secret', 'live', ?, ?, '[\"*\"]', ?)",
  )
    .bind(`key_live${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`, accountId, key.slice(0, 12), await sha256Hex(key), new Date().toISOString())
    .run();
  return key;
}

export async function waitFor<T>(probe: () => Promise<T | undefined | null | false>, timeoutMs = 8000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
