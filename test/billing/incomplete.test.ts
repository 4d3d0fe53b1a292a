// Incomplete subscriptions (src/billing/incomplete.ts): POST /subscriptions whose first charge asks
// for 3-D Secure answers 201 incomplete with latest_payment (requires_action, next_action to the
// challenge page); Complete activates it once (subscription_created then, the invoice paid), Fail
// or 23 hours without success expire it (the invoice voided), a success after the expiry is
// refunded, and nothing but a DELETE changes it meanwhile.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exports } from "cloudflare:workers";
import { type Account, BASE, call, expectError, signup } from "../support/http";
import { createPlan, createUser } from "../support/fixtures";
import { captureLogs, cardFields, expectNoCardData } from "../support/cards";
import { countOf, eventsFor, eventsOf, notificationsOf, one } from "../support/db";
import { INCOMPLETE_LIFETIME_MS, expireIncompleteSubscriptions } from "../../src/billing/incomplete";
import { recordAuthentication } from "../../src/payments/authentication";
import type { PaymentRow } from "../../src/payments/event-data";

const AUTH_CARD = "4000002760003184";

const logs = captureLogs();
let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let customer: { id: string; email: string };
let plan: Record<string, any>;

beforeAll(async () => {
  acct = await signup("Corner Shop");
  other = await signup("Other shop");
  customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  plan = await createPlan(acct, { price: 9.99, currency: "usd", interval: "month" });
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

interface Incomplete {
  id: string;
  status: string;
  latest_payment: { id: string; status: string; next_action: { type: string; url: string } };
}

async function incomplete(body: Record<string, unknown> = {}, pan = AUTH_CARD): Promise<Incomplete> {
  const res = await call("/subscriptions", {
    key: acct.key,
    body: { user_id: customer.id, plan_id: plan.id, return_url: "https://shop.example.com/subscribed", ...cardFields(pan), ...body },
  });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("incomplete");
  return res.body as Incomplete;
}

/** A browser's POST of a page's button: no key, redirects not followed. */
async function press(url: string, button: "complete" | "fail") {
  const res = await exports.default.fetch(`${url}/${button}`, { method: "POST", redirect: "manual" });
  await res.text();
  return { status: res.status, location: res.headers.get("location") };
}

const invoiceOf = (subscriptionId: string) =>
  one<{ id: string; status: string; number_sequence: number | null; payment_id: string | null }>(
    "SELECT id, status, number_sequence, payment_id FROM invoices WHERE subscription_id = ?",
    subscriptionId,
  );
const paymentRow = (id: string) => one<PaymentRow>("SELECT * FROM payments WHERE id = ?", id);
/** The row as drizzle reads it (camelCase), for recordAuthentication. */
async function paymentAsRead(id: string): Promise<PaymentRow> {
  const { createDb } = await import("../../src/db/client");
  const { payments } = await import("../../src/db/schema");
  const { eq } = await import("drizzle-orm");
  const [row] = await createDb(env.DB).select().from(payments).where(eq(payments.id, id));
  return row;
}

describe("POST /subscriptions whose first charge asks for 3-D Secure", () => {
  it("answers 201 incomplete with latest_payment requires_action, its invoice open and numbered, and no subscription_created yet", async () => {
    const sub = await incomplete();
    expect(sub.latest_payment).toMatchObject({ status: "requires_action", amount: 999, currency: "usd" });
    expect(sub.latest_payment.next_action).toEqual({ type: "redirect_to_url", url: expect.stringMatching(new RegExp(`^${BASE}/pay/authenticate/${sub.latest_payment.id}/[0-9A-Za-z]{40}$`)) });
    const invoice = await invoiceOf(sub.id);
    expect(invoice.status).toBe("open");
    expect(invoice.number_sequence).not.toBeNull();
    expect(await notificationsOf(acct.id, sub.id)).toEqual([]);
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body.status).toBe("incomplete");
    // Never renewed, never dunned: nothing is due.
    expect((await one<{ due_at: number | null }>("SELECT due_at FROM subscriptions WHERE id = ?", sub.id)).due_at).toBeNull();
  });

  it("asks for a saved pm_card_authenticationRequired and pm_card_authenticationRequiredOnSetup too", async () => {
    for (const token of ["pm_card_authenticationRequired", "pm_card_authenticationRequiredOnSetup"]) {
      const method = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: token } });
      expect(method.status, method.text).toBe(201);
      const res = await call("/subscriptions", { key: acct.key, body: { user_id: customer.id, plan_id: plan.id, payment_method: method.body.id } });
      expect(res.status, `${token}: ${res.text}`).toBe(201);
      expect(res.body).toMatchObject({ status: "incomplete", payment_method: method.body.id, latest_payment: { status: "requires_action" } });
    }
  });

  it("refuses a return_url that is not http(s), naming return_url, and creates nothing", async () => {
    const before = await countOf("SELECT COUNT(*) AS n FROM subscriptions WHERE account_id = ?", acct.id);
    const res = await call("/subscriptions", { key: acct.key, body: { user_id: customer.id, plan_id: plan.id, return_url: "javascript:alert(1)", ...cardFields(AUTH_CARD) } });
    expect(expectError(res, 400, "invalid_request_error").param).toBe("return_url");
    expect(await countOf("SELECT COUNT(*) AS n FROM subscriptions WHERE account_id = ?", acct.id)).toBe(before);
  });

  it("Complete activates it once: active, renewals scheduled, the invoice paid, subscription_created once; a double submit changes nothing", async () => {
    const sub = await incomplete();
    const [first, second] = await Promise.all([press(sub.latest_payment.next_action.url, "complete"), press(sub.latest_payment.next_action.url, "complete")]);
    expect(first.status).toBe(303);
    expect(second.status).toBe(303);
    expect(first.location).toBe(`https://shop.example.com/subscribed?payment_id=${sub.latest_payment.id}`);
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body.status).toBe("active");
    const row = await one<{ due_at: number; next_billing_date: string; periods_billed: number }>("SELECT due_at, next_billing_date, periods_billed FROM subscriptions WHERE id = ?", sub.id);
    expect(row.due_at).toBe(Date.parse(row.next_billing_date));
    expect(row.periods_billed).toBe(1);
    expect(await invoiceOf(sub.id)).toMatchObject({ status: "paid", payment_id: sub.latest_payment.id });
    expect((await one<{ status: string }>("SELECT status FROM subscription_periods WHERE subscription_id = ? AND period_index = 0", sub.id)).status).toBe("paid");
    expect((await paymentRow(sub.latest_payment.id)).status).toBe("completed");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_created:active"]);
    expect((await eventsFor(acct.id, sub.latest_payment.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.completed"]);
    const invoiceId = (await invoiceOf(sub.id)).id;
    expect((await eventsOf(acct.id, "invoice.paid")).filter((e) => e.body.data?.id === invoiceId)).toHaveLength(1);
  });

  it("Fail expires it: incomplete_expired, the invoice voided, subscription_updated, never active", async () => {
    const sub = await incomplete();
    expect((await press(sub.latest_payment.next_action.url, "fail")).status).toBe(303);
    const read = await call(`/subscriptions/${sub.id}`, { key: acct.key });
    expect(read.body.status).toBe("incomplete_expired");
    expect((await invoiceOf(sub.id)).status).toBe("void");
    expect((await paymentRow(sub.latest_payment.id)).status).toBe("failed");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_updated:incomplete_expired"]);
    // Then Complete (another tab) records nothing.
    await press(sub.latest_payment.next_action.url, "complete");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete_expired");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_updated:incomplete_expired"]);
  });

  it("the cron expires it 23 hours on, not before; a second run changes nothing; a success after it is refunded", async () => {
    const sub = await incomplete();
    const created = Date.parse((await one<{ created_at: string }>("SELECT created_at FROM subscriptions WHERE id = ?", sub.id)).created_at);
    const waiting = await paymentAsRead(sub.latest_payment.id);
    await expireIncompleteSubscriptions(env, created + INCOMPLETE_LIFETIME_MS - 1000);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete");
    await expireIncompleteSubscriptions(env, created + INCOMPLETE_LIFETIME_MS);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete_expired");
    expect((await paymentRow(sub.latest_payment.id)).status).toBe("canceled");
    expect((await invoiceOf(sub.id)).status).toBe("void");
    const events = await countOf("SELECT COUNT(*) AS n FROM events WHERE account_id = ?", acct.id);
    const again = await expireIncompleteSubscriptions(env, created + INCOMPLETE_LIFETIME_MS + 60_000);
    expect(again.expired).toBe(0);
    expect(await countOf("SELECT COUNT(*) AS n FROM events WHERE account_id = ?", acct.id)).toBe(events);
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_updated:incomplete_expired"]);
    // The processor says the payer finished after all (as Stripe's late event would): given back, never activated.
    const late = await recordAuthentication(env, waiting, { status: "succeeded", authorized: false, amount: 999, amountReceived: 999, currency: "usd" }, Date.now(), { fromProcessor: true });
    expect(late.recorded).toBe(false);
    expect(late.givenBack).toMatch(/^re_/);
    expect(await countOf("SELECT COUNT(*) AS n FROM refunds WHERE payment_id = ? AND amount = 999", sub.latest_payment.id)).toBe(1);
    // Once only: the page's return and the event both arriving refund once.
    await recordAuthentication(env, waiting, { status: "succeeded", authorized: false, amount: 999, amountReceived: 999, currency: "usd" }, Date.now(), { fromProcessor: true });
    expect(await countOf("SELECT COUNT(*) AS n FROM refunds WHERE payment_id = ?", sub.latest_payment.id)).toBe(1);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete_expired");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_updated:incomplete_expired"]);
  });
});

describe("an incomplete subscription's other requests", () => {
  it("PUT answers 409 subscription_incomplete and changes nothing", async () => {
    const sub = await incomplete();
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { quantity: 2 } });
    expect(expectError(res, 409, "invalid_request_error").code).toBe("subscription_incomplete");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body).toMatchObject({ status: "incomplete", quantity: 1 });
  });

  it("DELETE cancels it (canceled, subscription_canceled), cancels its payment and voids its invoice; Complete then records nothing", async () => {
    const sub = await incomplete();
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe("canceled");
    expect((await paymentRow(sub.latest_payment.id)).status).toBe("canceled");
    expect((await invoiceOf(sub.id)).status).toBe("void");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_canceled:canceled"]);
    await press(sub.latest_payment.next_action.url, "complete");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("canceled");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_canceled:canceled"]);
  });

  it("another account's key answers 404 for it, on GET, PUT and DELETE, and changes nothing", async () => {
    const sub = await incomplete();
    expectError(await call(`/subscriptions/${sub.id}`, { key: other.key }), 404, "not_found_error");
    expectError(await call(`/subscriptions/${sub.id}`, { key: other.key, method: "PUT", body: { quantity: 2 } }), 404, "not_found_error");
    expectError(await call(`/subscriptions/${sub.id}`, { key: other.key, method: "DELETE" }), 404, "not_found_error");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete");
    expect((await paymentRow(sub.latest_payment.id)).status).toBe("requires_action");
  });
});

describe("its payment canceled another way", () => {
  it("POST /payments/{id}/cancel of its waiting payment expires the subscription with it (never left incomplete for good)", async () => {
    const sub = await incomplete();
    const res = await call(`/payments/${sub.latest_payment.id}/cancel`, { key: acct.key, body: {} });
    expect(res.status, res.text).toBe(200);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete_expired");
    expect((await invoiceOf(sub.id)).status).toBe("void");
    expect(await notificationsOf(acct.id, sub.id)).toEqual(["subscription_updated:incomplete_expired"]);
  });

  it("the 7-day cancel of abandoned payments expires it too, should the 23-hour expiry not have", async () => {
    const { AUTHORIZATION_LIFETIME_MS, expireAuthorizations } = await import("../../src/payments/intents");
    const sub = await incomplete();
    const created = Date.parse((await paymentRow(sub.latest_payment.id) as unknown as { created_at: string }).created_at);
    await expireAuthorizations(env, created + AUTHORIZATION_LIFETIME_MS);
    expect((await paymentRow(sub.latest_payment.id)).status).toBe("canceled");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete_expired");
  });
});

describe("a DELETE retried with its Idempotency-Key", () => {
  it("answers the same canceled subscription again", async () => {
    const sub = await incomplete();
    const first = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: `cancel-${sub.id}` });
    expect(first.status, first.text).toBe(200);
    const again = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE", idempotencyKey: `cancel-${sub.id}` });
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ id: sub.id, status: "canceled" });
  });
});

describe("review (r3): a credit note on an incomplete subscription's open invoice", () => {
  it("is refused (409 invoice_not_creditable): its expiry voids the invoice, which would leave a balance credit for a charge never made", async () => {
    const sub = await incomplete();
    const open = (await call(`/invoices?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect(open.status).toBe("open");
    const res = await call("/credit-notes", { key: acct.key, body: { invoice_id: open.id, amount: 999, refund: false } });
    expectError(res, 409, "invalid_request_error", "invoice_not_creditable");
    expect((await call(`/api/users/${customer.id}`, { key: acct.key })).body.balance).toBe(0);
  });
});
