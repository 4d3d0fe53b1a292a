// The statements that read an account's objects find them through indexes that lead with
// (account_id, livemode), so neither mode's reads walk the other mode's rows: EXPLAIN QUERY PLAN of
// each list page, filtered list, Idempotency-Key lookup and dashboard figure, as the API builds it.
import { env } from "../support/env";
import { type SQL, and, count, desc, eq, gte, lt } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import {
  apiKeys,
  deliveryAttempts,
  events,
  idempotencyKeys,
  payments,
  payouts,
  plans,
  refunds,
  requestIds,
  subscriptions,
  testClocks,
  users,
  webhookDeliveries,
  webhookEndpoints,
} from "../../src/db/schema";
import { owned, ownedBy } from "../../src/db/scope";

const db = createDb(env.DB);
const caller = { accountId: "acct_01m7z2d8n7zgev6x3n0epk9rxn", livemode: true, keyId: "key_01m7z2d8n7zgev6x3n0epk9rxn" };

/** The lines of EXPLAIN QUERY PLAN for a drizzle query. */
async function planOf(query: { toSQL(): { sql: string; params: unknown[] } }): Promise<string[]> {
  const { sql, params } = query.toSQL();
  const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>();
  return rows.results.map((r) => r.detail);
}

/** The plan reads `table` through `index`, with account and mode (and `more`) as its leading equalities. */
function expectIndexed(plan: string[], table: string, index: string, more = "") {
  const line = plan.find((l) => new RegExp(`^(SEARCH|SCAN) ${table}\\b`).test(l));
  expect(line, `${table}: ${plan.join(" | ")}`).toBeDefined();
  expect(line, plan.join(" | ")).toMatch(new RegExp(`USING (COVERING )?INDEX ${index} \\(account_id=\\? AND livemode=\\?${more.replace(/[?()]/g, (c) => `\\${c}`)}`));
}

type Owned = SQLiteTable & { id: SQLiteColumn; accountId: SQLiteColumn; livemode: SQLiteColumn };
const listPage = (table: Owned, ...conditions: SQL[]) =>
  db.select().from(table).where(owned(table, caller, ...conditions)).orderBy(desc(table.id)).limit(11);

describe("indexes lead with account and mode", () => {
  it("every list page, first and after a cursor", async () => {
    const tables: [Owned, string, string][] = [
      [apiKeys, "api_keys", "api_keys_account"],
      [requestIds, "request_ids", "request_ids_account"],
      [testClocks, "test_clocks", "test_clocks_account"],
      [users, "users", "users_account"],
      [webhookEndpoints, "webhook_endpoints", "webhook_endpoints_account"],
      [payouts, "payouts", "payouts_account"],
      [payments, "payments", "payments_account"],
      [refunds, "refunds", "refunds_account"],
      [plans, "plans", "plans_account"],
      [subscriptions, "subscriptions", "subscriptions_account"],
    ];
    for (const [table, name, index] of tables) {
      expectIndexed(await planOf(listPage(table)), name, index, ")");
      expectIndexed(await planOf(listPage(table, lt(table.id, "zzz"))), name, index, " AND id<?)");
    }
    // The events feed pages by its commit order (feed_position), not by id (src/routes/events/feed.ts).
    const feedPage = (...conditions: SQL[]) => db.select().from(events).where(owned(events, caller, ...conditions)).orderBy(desc(events.feedPosition)).limit(11);
    expectIndexed(await planOf(feedPage()), "events", "events_account_mode_feed", ")");
    expectIndexed(await planOf(feedPage(lt(events.feedPosition, 100))), "events", "events_account_mode_feed", " AND feed_position<?)");
  });

  it("the filtered lists", async () => {
    expectIndexed(await planOf(listPage(payments, eq(payments.userId, "usr_1"))), "payments", "payments_user", " AND user_id=?");
    expectIndexed(await planOf(listPage(payments, eq(payments.subscriptionId, "sub_1"))), "payments", "payments_subscription", " AND subscription_id=?");
    expectIndexed(await planOf(listPage(refunds, eq(refunds.paymentId, "pay_1"))), "refunds", "refunds_payment", " AND payment_id=?");
    expectIndexed(await planOf(listPage(subscriptions, eq(subscriptions.userId, "usr_1"))), "subscriptions", "subscriptions_account_user", " AND user_id=?");
    const byType = db.select().from(events).where(owned(events, caller, eq(events.type, "customer.created"))).orderBy(desc(events.feedPosition)).limit(11);
    expectIndexed(await planOf(byType), "events", "events_account_type_feed", " AND type=?");
  });

  it("an Idempotency-Key is found by (account, mode, key)", async () => {
    const plan = await planOf(
      db.select().from(idempotencyKeys).where(and(eq(idempotencyKeys.accountId, caller.accountId), eq(idempotencyKeys.livemode, true), eq(idempotencyKeys.key, "k"))),
    );
    expect(plan.join(" | ")).toMatch(/SEARCH idempotency_keys USING INDEX sqlite_autoindex_idempotency_keys_1 \(account_id=\? AND livemode=\? AND key=\?\)/);
  });

  it("the dashboard's figures over deliveries and attempts", async () => {
    expectIndexed(
      await planOf(db.select({ n: count() }).from(webhookDeliveries).where(and(ownedBy(webhookDeliveries, caller), eq(webhookDeliveries.status, "failed")))),
      "webhook_deliveries",
      "webhook_deliveries_account",
      " AND status=?)",
    );
    expectIndexed(
      await planOf(db.select({ n: count() }).from(deliveryAttempts).where(and(ownedBy(deliveryAttempts, caller), gte(deliveryAttempts.attemptedAt, "2026-01-01")))),
      "delivery_attempts",
      "delivery_attempts_account",
      " AND attempted_at>?)",
    );
  });
});
