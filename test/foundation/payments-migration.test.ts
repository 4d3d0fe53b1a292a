// Migration 0024 (one-off payments) on a payments table that holds the rows of before: drizzle-kit
// rebuilds the table (new CHECK constraints), and the hand-written copy fills amount_received with
// what each payment captured (its amount, unless it failed), so that refunds, whose constraint is
// now against amount_received, still fit, and what remains refundable is what it was.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";

type Migration = { name: string; queries: string[] };
const migrations = (env as unknown as { TEST_MIGRATIONS: Migration[] }).TEST_MIGRATIONS;

/** The columns payments had before 0024. */
const BEFORE = [
  "id", "account_id", "livemode", "user_id", "subscription_id", "amount", "currency", "status", "amount_refunded", "failure_code", "failure_message",
  "card_brand", "card_last4", "card_exp_month", "card_exp_year", "card_fingerprint", "processor_reference", "processor_account", "charge_reference", "invoice_id", "created_at",
];

const row = (id: string, status: string, amount: number, refunded: number) => ({
  id, account_id: "acct_m", livemode: 0, user_id: "usr_m", subscription_id: "sub_m", amount, currency: "usd", status, amount_refunded: refunded,
  failure_code: status === "failed" ? "card_declined" : null, failure_message: null, card_brand: "visa", card_last4: "4242", card_exp_month: 12,
  card_exp_year: 2030, card_fingerprint: "fp", processor_reference: status === "failed" ? null : `sbx_${id}`, processor_account: null, charge_reference: `ref_${id}`, invoice_id: null,
  created_at: "2026-11-01T00:00:00.000Z",
});

describe("migration 0024 on payments made before it", () => {
  it("keeps every row, with amount_received = amount for a captured payment and 0 for a failed one, capture_method automatic", async () => {
    const migration = migrations.find((m) => m.name.startsWith("0024"));
    expect(migration, "migration 0024").toBeDefined();
    // The table as 0023 left it (its columns), holding a payment of each status.
    await env.DB.batch([
      // (SQLite renames no table while a trigger names a missing one: the migration makes it again.)
      env.DB.prepare("DROP TRIGGER refunds_processor_account"),
      env.DB.prepare(`CREATE TABLE payments_before AS SELECT ${BEFORE.map((c) => `"${c}"`).join(", ")} FROM payments WHERE 0`),
      env.DB.prepare("DROP TABLE payments"),
      env.DB.prepare("ALTER TABLE payments_before RENAME TO payments"),
    ]);
    const rows = [row("pay_a", "completed", 1000, 0), row("pay_b", "failed", 500, 0), row("pay_c", "refunded", 700, 700), row("pay_d", "partially_refunded", 900, 300)];
    for (const r of rows) {
      await env.DB.prepare(`INSERT INTO payments (${BEFORE.join(", ")}) VALUES (${BEFORE.map(() => "?").join(", ")})`).bind(...BEFORE.map((c) => r[c as keyof typeof r])).run();
    }
    await env.DB.batch(migration!.queries.map((q) => env.DB.prepare(q)));
    const after = await env.DB.prepare("SELECT id, status, amount, amount_received, amount_refunded, amount_capturable, capture_method FROM payments ORDER BY id").all();
    expect(after.results).toEqual([
      { id: "pay_a", status: "completed", amount: 1000, amount_received: 1000, amount_refunded: 0, amount_capturable: 0, capture_method: "automatic" },
      { id: "pay_b", status: "failed", amount: 500, amount_received: 0, amount_refunded: 0, amount_capturable: 0, capture_method: "automatic" },
      { id: "pay_c", status: "refunded", amount: 700, amount_received: 700, amount_refunded: 700, amount_capturable: 0, capture_method: "automatic" },
      { id: "pay_d", status: "partially_refunded", amount: 900, amount_received: 900, amount_refunded: 300, amount_capturable: 0, capture_method: "automatic" },
    ]);
    // The rebuilt table keeps migration 0020's trigger, which records a live payment's Stripe account.
    const trigger = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'payments'").all();
    expect(trigger.results).toEqual([{ name: "payments_processor_account" }]);
    const refundTrigger = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'refunds'").all();
    expect(refundTrigger.results).toEqual([{ name: "refunds_processor_account" }]);
    // The rebuilt table enforces the new constraints: no refund past what was received.
    await expect(env.DB.prepare("UPDATE payments SET amount_refunded = 901 WHERE id = 'pay_d'").run()).rejects.toThrow(/payments_refund_within_amount/);
    await expect(env.DB.prepare("UPDATE payments SET amount_received = 901 WHERE id = 'pay_d'").run()).rejects.toThrow(/payments_received_within_amount/);
  });
});
