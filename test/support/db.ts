// Reads of what D1 holds, straight from the database: counts, events, payments, periods,
// webhook deliveries, and the whole database as snapshots (with a wait until it stops changing).
import { env } from "./env";

/** The first row of `query`, asserted present. */
export const one = async <T>(query: string, ...binds: unknown[]) => (await env.DB.prepare(query).bind(...binds).first<T>())!;

/** The `n` of a `SELECT count(*) AS n ...` query. */
export const countOf = async (query: string, ...binds: unknown[]) => Number((await one<{ n: number }>(query, ...binds)).n);

/** The rows of `table` matching `where` (with `binds` for its placeholders). */
export const countRows = async (table: string, where = "1 = 1", ...binds: unknown[]) =>
  Number((await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${where}`).bind(...binds).first<{ n: number }>())!.n);

// ---------------------------------------------------------------------------------------------
// Events and notifications

/** The account's events (of `type`, if given), oldest first, each with its payload parsed as `body`. */
export async function eventsOf(accountId: string, type?: string) {
  const rows = type
    ? await env.DB.prepare("SELECT id, type, payload FROM events WHERE account_id = ? AND type = ? ORDER BY id").bind(accountId, type).all<{ id: string; type: string; payload: string }>()
    : await env.DB.prepare("SELECT id, type, payload FROM events WHERE account_id = ? ORDER BY id").bind(accountId).all<{ id: string; type: string; payload: string }>();
  return rows.results.map((r) => ({ id: r.id, type: r.type, body: JSON.parse(r.payload) }));
}

/** The account's events about one object (its data.id or data.transaction_id), oldest first. */
export async function eventsFor(accountId: string, objectId: string) {
  return (await eventsOf(accountId)).filter((e) => e.body.data?.id === objectId || e.body.data?.transaction_id === objectId);
}

/** The subscription notifications of one subscription, as `type:status`, in order. */
export async function notificationsOf(accountId: string, subscriptionId: string) {
  return (await eventsOf(accountId))
    .filter((e) => e.body.subscription_id === subscriptionId && e.type.startsWith("subscription_"))
    .map((e) => `${e.type}:${e.body.status}`);
}

// ---------------------------------------------------------------------------------------------
// Payments and subscription periods

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

// ---------------------------------------------------------------------------------------------
// Webhook deliveries

export async function deliveryRow(id: string) {
  return env.DB.prepare("SELECT * FROM webhook_deliveries WHERE id = ?").bind(id).first<Record<string, any>>();
}

export async function deliveriesOfEvent(eventId: string) {
  return (await env.DB.prepare("SELECT * FROM webhook_deliveries WHERE event_id = ?").bind(eventId).all<Record<string, any>>()).results;
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
