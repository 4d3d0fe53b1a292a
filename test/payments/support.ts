// Shared steps of the payments suite: card bodies (every PAN and CVV used is recorded, so each
// file can prove afterwards that none reached the database), users, keys, the job queue driven
// by hand, events read from D1, and the card-data scan.
import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import worker from "../../src/index";
import type { JobMessage } from "../../src/jobs";
import { type Account, call } from "../helpers";

export const CARDS = {
  visa: "4242424242424242",
  mastercard: "5555555555554444",
  declined: "4000000000000002",
  insufficientFunds: "4000000000009995",
  expired: "4000000000000069",
  processingError: "4000000000000119",
  declineAfterFirst: "4000000000000341",
  amex: "378282246310005",
} as const;

/** Every PAN and CVV a test sent: none may be found anywhere afterwards. */
export const sentPans = new Set<string>();
export const sentCvvs = new Set<string>();

export const nextYear = new Date().getUTCFullYear() + 1;

export function cardFields(pan: string = CARDS.visa, cvv = "987", overrides: Record<string, unknown> = {}) {
  sentPans.add(pan.replace(/[ -]/g, ""));
  sentCvvs.add(cvv);
  return { payment_method: "card", card_number: pan, expiration_month: 12, expiration_year: nextYear, cvv, ...overrides };
}

export function payoutBody(overrides: Record<string, unknown> = {}, pan: string = CARDS.visa, cvv = "987") {
  return { amount: 2500, currency: "usd", description: "Vendor invoice 1042", ...cardFields(pan, cvv), ...overrides };
}

export async function createPayout(acct: Account, overrides: Record<string, unknown> = {}, pan: string = CARDS.visa, cvv = "987") {
  const res = await call("/payout", { key: acct.key, body: payoutBody(overrides, pan, cvv) });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

export async function createUser(acct: Account, name = "Ada Lovelace", email = "ada@example.com") {
  const res = await call("/api/users", { key: acct.key, body: { name, email } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; name: string; email: string };
}

export async function createKey(acct: Account, scopes: string[]) {
  const res = await call("/api/keys", { key: acct.key, body: { name: "restricted", scopes } });
  expect(res.status, res.text).toBe(201);
  return res.body.secret as string;
}

let messageCount = 0;

/** Runs job messages through the Worker's queue consumer, as the tender-jobs queue would. */
export async function runJobs(...bodies: JobMessage[]) {
  const batch = createMessageBatch<JobMessage>(
    "tender-jobs",
    bodies.map((body) => ({ id: `job-${++messageCount}`, timestamp: new Date(), attempts: 1, body })),
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

export async function eventsOf(accountId: string, type?: string) {
  const rows = type
    ? await env.DB.prepare("SELECT id, type, payload FROM events WHERE account_id = ? AND type = ? ORDER BY id").bind(accountId, type).all<{ id: string; type: string; payload: string }>()
    : await env.DB.prepare("SELECT id, type, payload FROM events WHERE account_id = ? ORDER BY id").bind(accountId).all<{ id: string; type: string; payload: string }>();
  return rows.results.map((r) => ({ id: r.id, type: r.type, body: JSON.parse(r.payload) }));
}

export async function eventsFor(accountId: string, objectId: string) {
  return (await eventsOf(accountId)).filter((e) => e.body.data?.id === objectId || e.body.data?.transaction_id === objectId);
}

export const countRows = async (table: string, where = "1 = 1", ...binds: unknown[]) =>
  Number((await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${where}`).bind(...binds).first<{ n: number }>())!.n);

export async function waitFor(check: () => Promise<void> | void, timeoutMs = 15_000) {
  const start = Date.now();
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() - start > timeoutMs) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** A CVV as a standalone token: not inside a longer run of letters or digits (hashes, times). */
const token = (value: string) => new RegExp(`(^|[^0-9A-Za-z])${value}([^0-9A-Za-z]|$)`);

/**
 * Reads every row of every table and asserts that no PAN sent appears anywhere (even inside
 * another value), that no CVV sent appears as a value or token, and that no stored text holds a
 * "card_number" or "cvv" field: request bodies are never stored verbatim.
 */
export async function expectNoCardData() {
  // Every table, except D1's own metadata table, which D1 does not let a Worker read.
  const tables = (await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all<{ name: string }>()).results
    .map((t) => t.name)
    .filter((name) => !name.startsWith("_cf_"));
  expect(tables).toEqual(expect.arrayContaining(["payouts", "payments", "refunds", "events", "idempotency_keys", "webhook_deliveries"]));
  let cells = 0;
  for (const table of tables) {
    const rows = (await env.DB.prepare(`SELECT * FROM "${table}"`).all<Record<string, unknown>>()).results;
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        if (value === null) continue;
        cells++;
        const text = typeof value === "string" ? value : value instanceof ArrayBuffer ? new TextDecoder().decode(value) : String(value);
        const where = `${table}.${column}`;
        for (const pan of sentPans) {
          expect(text.includes(pan), `PAN found in ${where}`).toBe(false);
          expect(text.includes(pan.slice(0, 12)), `PAN prefix found in ${where}`).toBe(false);
        }
        if (typeof value === "string") {
          for (const cvv of sentCvvs) expect(token(cvv).test(text), `CVV ${cvv} found in ${where}: ${text.slice(0, 200)}`).toBe(false);
          expect(/"(card_number|cvv)"/.test(text), `card field stored in ${where}`).toBe(false);
        }
      }
    }
  }
  return { tables: tables.length, cells };
}

/** Records everything the Worker logs (it runs in this isolate), to check no PAN or CVV is logged. */
export function captureLogs() {
  const lines: string[] = [];
  const spies = (["log", "info", "warn", "error", "debug"] as const).map((level) =>
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      lines.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a) ?? String(a))).join(" "));
    }),
  );
  return {
    lines,
    expectNoCardData() {
      for (const line of lines) {
        for (const pan of sentPans) expect(line.includes(pan), `PAN logged: ${line.slice(0, 200)}`).toBe(false);
        for (const cvv of sentCvvs) expect(token(cvv).test(line) && /cvv/i.test(line), `CVV logged: ${line.slice(0, 200)}`).toBe(false);
      }
    },
    restore: () => spies.forEach((s) => s.mockRestore()),
  };
}
