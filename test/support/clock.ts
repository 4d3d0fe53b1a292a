// Time in tests: test clocks made and advanced through the API, and rows moved into the past so
// that what the wall clock would reach later (a renewal, a stale settlement) is due now.
import { env } from "./env";
import { expect } from "vitest";
import { type Account, call } from "./http";

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

/** Moves a subscription's due time into the past, as if the wall clock had reached it. */
export async function makeDue(subscriptionId: string, dueAt = Date.now() - 1000) {
  await env.DB.prepare("UPDATE subscriptions SET due_at = ? WHERE id = ?").bind(dueAt, subscriptionId).run();
}

/** Moves a payout's or refund's creation `ms` into the past, so the stale-settlement sweep picks it up. */
export const backdate = (table: "payouts" | "refunds", id: string, ms = 10 * 60_000) =>
  env.DB.prepare(`UPDATE ${table} SET created_at = ? WHERE id = ?`).bind(new Date(Date.now() - ms).toISOString(), id).run();
