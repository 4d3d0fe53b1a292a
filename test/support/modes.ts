// Test mode and live mode side by side in one account: one object of every kind in each mode.
//
// The live side is an account with no Stripe connection, so that the sweeps never reach Stripe:
// the live objects only a processor makes (payouts, subscriptions, payments, refunds; and the test
// clock, which exists in test mode only) are rows of the account with livemode = 1, copied from the
// test-mode fixtures (new ids, the live user and plan). Everything else is made through the API
// with the live key. Live money through Stripe is proven in test/live/.
import { env } from "./env";
import { expect } from "vitest";
import { newId, type IdKind } from "../../src/domain/ids";
import { type Fixtures, PAYMENT_METHOD_OF, RECOVERY_OF, createKey, createUser, seed, seedRecovery } from "./fixtures";
import { type Account, call } from "./http";
import { RECEIVER_ORIGIN } from "./receiver";

export type Mode = "test" | "live";

/** One account's keys and fixtures in both modes. */
export interface TwoModes {
  accountId: string;
  keys: Record<Mode, string>;
  fixtures: Record<Mode, Fixtures>;
}

export const other = (mode: Mode): Mode => (mode === "test" ? "live" : "test");

/**
 * Copies a row of `table` as a live-mode row: a new id of `kind`, livemode 1, and `overrides`.
 * Returns the new id.
 */
export async function copyAsLive(table: string, kind: IdKind, id: string, overrides: Record<string, unknown> = {}): Promise<string> {
  const row = await env.DB.prepare(`SELECT * FROM "${table}" WHERE id = ?`).bind(id).first<Record<string, unknown>>();
  expect(row, `${table} ${id}`).not.toBeNull();
  // Generated columns (hidden 2 or 3 in table_xinfo, e.g. an invoice's number) are computed, not copied.
  const generated = await env.DB.prepare(`SELECT name FROM pragma_table_xinfo('${table}') WHERE hidden IN (2, 3)`).all<{ name: string }>();
  for (const column of generated.results) delete row![column.name];
  const copy: Record<string, unknown> = { ...row, id: newId(kind, Date.now()), livemode: 1, ...overrides };
  const columns = Object.keys(copy);
  await env.DB.prepare(`INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
    .bind(...columns.map((c) => copy[c]))
    .run();
  return copy.id as string;
}

async function created(path: string, key: string, body: unknown) {
  const res = await call(path, { key, body });
  expect(res.status, res.text).toBe(201);
  expect(res.body.livemode, `${path} in live mode`).toBe(true);
  return res.body;
}

/**
 * One object of every kind in live mode, beside the test-mode `test` fixtures of the same account.
 * Users, request ids, keys, plans, webhook endpoints and events through the API with the live key;
 * the rest copied from the test fixtures (see the header).
 */
export async function seedLive(account: Account, liveKey: string, test: Fixtures): Promise<Fixtures> {
  const live = { id: account.id, key: liveKey };
  const user = await createUser(live, { name: "Live User", email: "live.user@example.com" });
  const requestId = (await created("/api/request-id", liveKey, { purpose: "live proof" })).id;
  const key = (await createKey(live, ["users:read"], "live victim")).id;
  const plan = (await created("/subscription-plans", liveKey, { name: "Live Pro", price: 29.99, currency: "usd", interval: "month" })).id;
  const subscription = await copyAsLive("subscriptions", "subscription", test.subscription, { user_id: user.id, plan_id: plan });
  const payment = await copyAsLive("payments", "payment", test.payment, {
    subscription_id: subscription,
    user_id: user.id,
    charge_reference: `live-copy:${subscription}`,
  });
  const refund = await copyAsLive("refunds", "refund", test.refund, { payment_id: payment });
  // A live authorization: POST /payments is test mode only for now, so the test one is copied.
  const authorization = await copyAsLive("payments", "payment", test.authorization, { user_id: user.id, charge_reference: `live-copy:${test.authorization}` });
  const payout = await copyAsLive("payouts", "payout", test.payout);
  const clock = await copyAsLive("test_clocks", "testClock", test.clock);
  // The open invoice's past-due subscription and its periods, so that paying or voiding it finds them.
  const dunnedTest = (await env.DB.prepare("SELECT subscription_id FROM invoices WHERE id = ?").bind(test.invoice).first<{ subscription_id: string }>())!.subscription_id;
  const dunned = await copyAsLive("subscriptions", "subscription", dunnedTest, { user_id: user.id, plan_id: plan });
  const periods = await env.DB.prepare("SELECT id FROM subscription_periods WHERE subscription_id = ?").bind(dunnedTest).all<{ id: string }>();
  for (const period of periods.results) await copyAsLive("subscription_periods", "period", period.id, { subscription_id: dunned, payment_id: null });
  const invoice = await copyAsLive("invoices", "invoice", test.invoice, { subscription_id: dunned, user_id: user.id, payment_id: null });
  const lines = await env.DB.prepare("SELECT id FROM invoice_lines WHERE invoice_id = ?").bind(test.invoice).all<{ id: string }>();
  for (const line of lines.results) await copyAsLive("invoice_lines", "invoiceLine", line.id, { invoice_id: invoice });
  const event = (await call("/api/events?limit=1", { key: liveKey })).body.data[0].id;
  const webhook = (await created("/api/webhooks", liveKey, { url: `${RECEIVER_ORIGIN}/proof-live`, events: ["payout.paid"] })).id;
  const coupon = (await created("/coupons", liveKey, { name: "Live proof", percent_off: 10, duration: "once" })).id;
  const taxRate = (await created("/tax-rates", liveKey, { display_name: "Live VAT", percentage: "20", inclusive: false })).id;
  // A live credit note to the balance of a live copy of the paid invoice credit notes are made on.
  const creditedInvoice = await copyAsLive("invoices", "invoice", test.creditedInvoice, { subscription_id: subscription, user_id: user.id, payment_id: payment });
  const creditedLines = await env.DB.prepare("SELECT id FROM invoice_lines WHERE invoice_id = ?").bind(test.creditedInvoice).all<{ id: string }>();
  for (const line of creditedLines.results) await copyAsLive("invoice_lines", "invoiceLine", line.id, { invoice_id: creditedInvoice });
  const creditNote = (await created("/credit-notes", liveKey, { invoice_id: creditedInvoice, amount: 1, refund: false })).id;
  const meteredPlan = (await created("/subscription-plans", liveKey, { name: "Live calls", price: 0.01, currency: "usd", interval: "month", usage_type: "metered" })).id;
  const metered = await copyAsLive("subscriptions", "subscription", test.metered, { user_id: user.id, plan_id: meteredPlan });
  const paymentMethod = await copyAsLive("payment_methods", "paymentMethod", test.paymentMethod, { user_id: user.id, attach_reference: `live-copy:${user.id}` });
  PAYMENT_METHOD_OF.set(user.id, paymentMethod);
  RECOVERY_OF.set(webhook, await seedRecovery(liveKey, webhook));
  const checkoutSession = (await created("/checkout/sessions", liveKey, { mode: "payment", amount: 1500, currency: "usd", user_id: user.id, success_url: "https://shop.example.com/ok", cancel_url: "https://shop.example.com/cart" })).id;
  const portalSession = (await created("/portal/sessions", liveKey, { user_id: user.id, return_url: "https://shop.example.com/account" })).id;
  return { user: user.id, requestId, key, payout, payment, refund, webhook, event, plan, subscription, clock, invoice, coupon, taxRate, creditedInvoice, creditNote, metered, paymentMethod, authorization, checkoutSession, portalSession };
}

/** An account with one object of every kind in each mode. */
export async function seedBothModes(account: Account & { liveKey: string }): Promise<TwoModes> {
  const test = await seed(account);
  const live = await seedLive(account, account.liveKey, test);
  return { accountId: account.id, keys: { test: account.key, live: account.liveKey }, fixtures: { test, live } };
}
