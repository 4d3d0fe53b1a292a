// Migration 0009 (test and live mode) on a database that holds data: every row written before
// modes existed becomes a test-mode row, readable by the test key as before, and invisible to a
// live key. The data is made through the API, then the database is taken back to migration 0007
// holding the same rows (only the columns 0007 has), and migrated forward again.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createKey, seed } from "../support/fixtures";
import { PROOF_CARD, payoutBody } from "../support/cards";
import { countOf, quiesce, tableNames } from "../support/db";
import { fixtureId, label, operations, pathWith } from "../support/operations";

type Migration = Parameters<typeof applyD1Migrations>[1][number];
const migrations = (env as unknown as { TEST_MIGRATIONS: Migration[] }).TEST_MIGRATIONS;
/** Tables whose rows reference accounts or keys: emptied last, filled first. */
const PARENTS = ["accounts", "api_keys"];
/** Tables that migrations after 0007 create. */
const LATER_TABLES = ["processor_connections", "processor_events", "invoice_items", "proration_charges", "retired_processor_connections", "money_claims"];
/** Tables that a later migration (0013's invoices) creates and fills from the history it finds. */
const BACKFILLED = ["invoices", "invoice_lines"];
/** Tables a later migration (0015's coupons, 0017's usage records, 0020's payment methods, 0028's webhook recoveries, 0032's checkout sessions, 0034's tax rates, 0036's portal sessions, 0037's credit notes and balance transactions) creates, holding rows the fixtures made: put back once it exists. */
const RESTORED_AFTER = ["coupons", "coupon_redemptions", "usage_records", "payment_methods", "webhook_recoveries", "checkout_sessions", "tax_rates", "credit_notes", "customer_balance_transactions", "portal_sessions"];

async function insertRows(table: string, rows: Record<string, unknown>[]) {
  const columns = await columnsOf(table);
  for (const row of rows) {
    const present = columns.filter((c) => c in row);
    await env.DB.prepare(`INSERT INTO "${table}" (${present.map((c) => `"${c}"`).join(", ")}) VALUES (${present.map(() => "?").join(", ")})`)
      .bind(...present.map((c) => row[c]))
      .run();
  }
}

async function columnsOf(table: string): Promise<string[]> {
  return (await env.DB.prepare(`SELECT name FROM pragma_table_xinfo('${table}') WHERE hidden = 0`).all<{ name: string }>()).results.map((c) => c.name);
}

describe("migration 0009 on a database with data", () => {
  it("every existing row becomes a test-mode row: the test key reads it all as before, a live key sees none of it", async () => {
    const acct = await signup("Before modes");
    const fx = await seed(acct);
    const idempotent = await call("/payout", { key: acct.key, body: payoutBody({ amount: 777 }, PROOF_CARD.pan, PROOF_CARD.cvv), idempotencyKey: "made-before-modes" });
    expect(idempotent.status, idempotent.text).toBe(201);
    const restricted = await createKey(acct, ["users:read"], "made before modes");
    await quiesce();

    // The rows as they are, then the database back at migration 0007 with those rows.
    const tables = (await tableNames()).filter((t) => t !== "d1_migrations");
    const rows: Record<string, Record<string, unknown>[]> = {};
    for (const table of tables) rows[table] = (await env.DB.prepare(`SELECT * FROM "${table}"`).all<Record<string, unknown>>()).results;
    const drop = [...tables.filter((t) => !PARENTS.includes(t)), ...PARENTS.filter((t) => tables.includes(t)).reverse()];
    await env.DB.batch([...drop.map((t) => env.DB.prepare(`DROP TABLE "${t}"`)), env.DB.prepare("DROP TABLE d1_migrations")]);
    const upTo0007 = migrations.filter((m) => m.name.localeCompare("0008") < 0);
    expect(upTo0007.map((m) => m.name.slice(0, 4))).toEqual(["0000", "0001", "0002", "0003", "0004", "0005", "0006", "0007"]);
    await applyD1Migrations(env.DB, upTo0007);
    expect(await columnsOf("users")).not.toContain("livemode");
    for (const table of [...PARENTS, ...tables.filter((t) => !PARENTS.includes(t))]) {
      const columns = await columnsOf(table);
      // Tables made by a later migration (0011's processor tables) are empty here, and made again below.
      if (BACKFILLED.includes(table) || RESTORED_AFTER.includes(table)) continue;
      if (LATER_TABLES.includes(table)) {
        expect(rows[table], `${table} is empty`).toEqual([]);
        continue;
      }
      expect(columns.length, `${table} exists at 0007`).toBeGreaterThan(0);
      await insertRows(table, rows[table]);
    }

    // Forward again: 0008 onwards.
    await applyD1Migrations(env.DB, migrations);
    for (const table of RESTORED_AFTER) await insertRows(table, rows[table]);
    // A plan's usage type (0017) did not exist at 0007, so every plan made before it is licensed;
    // the fixtures' metered plan, made today, is put back as it was.
    for (const plan of rows.plans.filter((p) => p.usage_type === "metered")) {
      await env.DB.prepare("UPDATE plans SET usage_type = 'metered', aggregate_usage = ? WHERE id = ?").bind(plan.aggregate_usage, plan.id).run();
    }
    for (const table of tables) {
      if (BACKFILLED.includes(table)) expect(await countOf(`SELECT count(*) AS n FROM "${table}"`), `${table} made again from the history`).toBeGreaterThan(0);
      else expect(await countOf(`SELECT count(*) AS n FROM "${table}"`), `${table} keeps its rows`).toBe(rows[table].length);
      const columns = await columnsOf(table);
      if (!columns.includes("livemode") || table === "api_keys") continue;
      expect(await countOf(`SELECT count(*) AS n FROM "${table}" WHERE livemode <> 0`), `${table}: every row is a test-mode row`).toBe(0);
    }
    // API keys keep their mode: the account's test keys are test-mode keys, its live secret key a live one.
    expect(await countOf("SELECT count(*) AS n FROM api_keys WHERE livemode <> (mode = 'live')")).toBe(0);
    expect(await countOf("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND livemode = 0", acct.id)).toBe(3);

    // The test key reads every object as before; a live key finds none of them.
    // The invoices are the backfill's (new ids): the fixture's is the first of the account's.
    const invoices = await call("/invoices?limit=100", { key: acct.key });
    expect(invoices.body.data.length, invoices.text).toBeGreaterThan(0);
    const ids = { ...fx, invoice: invoices.body.data[0].id as string };
    expect((await call("/invoices", { key: acct.liveKey })).body.data).toEqual([]);
    const ops = (await operations()).filter((op) => op.method === "get" && op.hasId && !op.isPublic);
    for (const op of ops) {
      const path = pathWith(op, fixtureId(op, ids));
      const read = await call(path, { key: acct.key });
      expect(read.status, `${label(op)}: ${read.text.slice(0, 200)}`).toBe(200);
      if (read.body.object !== "list" && read.body.object !== undefined) expect(read.body.livemode, label(op)).toBe(false);
      const live = await call(path, { key: acct.liveKey });
      expect(live.status, `${label(op)} with the live key`).toBe(op.operationId === "getTestClock" ? 403 : 404);
    }
    const users = await call("/api/users", { key: acct.key });
    expect(users.body.data.map((u: { id: string }) => u.id)).toEqual([fx.user]);
    expect((await call("/api/users", { key: acct.liveKey })).body.data).toEqual([]);
    expect((await call("/api/keys/" + restricted.id, { key: acct.key })).body).toMatchObject({ mode: "test", livemode: false });
    expect((await call("/api/users", { key: restricted.secret })).status).toBe(200);

    // An Idempotency-Key used before the migration still replays in test mode, and is free in live mode.
    const replay = await call("/payout", { key: acct.key, body: payoutBody({ amount: 777 }, PROOF_CARD.pan, PROOF_CARD.cvv), idempotencyKey: "made-before-modes" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(idempotent.body);
    const live = await call("/api/users", { key: acct.liveKey, body: { name: "Live", email: "live@example.com" }, idempotencyKey: "made-before-modes" });
    expect(live.status, live.text).toBe(201);
    expect(live.headers.get("idempotent-replayed")).toBeNull();
    expect(live.body.livemode).toBe(true);
  }, 60_000);
});
