// 3-D Secure for one-off payments in test mode (src/pages/authenticate.tsx,
// src/payments/authentication.ts): POST /payments with a card that asks answers requires_action
// with next_action; the sandbox challenge page (no key, its secret in the URL) shows the amount and
// the merchant, and Complete or Fail records the outcome once, with its events, then sends the
// payer to return_url. Wrong secrets, other accounts, double submits, cancel and expiry.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE, browse, call, expectError, signup, type Account } from "../support/http";
import { createUser } from "../support/fixtures";
import { captureLogs, cardFields, expectNoCardData } from "../support/cards";
import { eventsFor, one } from "../support/db";
import { AUTHORIZATION_LIFETIME_MS, expireAuthorizations } from "../../src/payments/intents";
import { sandboxProcessor } from "../../src/processor/sandbox";

const AUTH_CARD = "4000002760003184";
const AUTH_3DS2_CARD = "4000000000003220";

const logs = captureLogs();
let acct: Account & { liveKey: string };
let other: Account & { liveKey: string };
let customer: { id: string; email: string };

beforeAll(async () => {
  acct = await signup("Corner Shop");
  other = await signup("Other shop");
  customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});

const pay = (body: Record<string, unknown> = {}, pan = AUTH_CARD, key = acct.key) =>
  call("/payments", { key, body: { amount: 2599, currency: "eur", user_id: customer.id, return_url: "https://shop.example.com/orders/6735?ref=a", ...cardFields(pan), ...body } });

async function asked(body: Record<string, unknown> = {}, pan = AUTH_CARD) {
  const res = await pay(body, pan);
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("requires_action");
  return res.body as { id: string; next_action: { type: string; url: string }; status: string };
}

/** A browser request to a page: no key, no JSON; redirects are not followed. */

const pathOf = (url: string) => new URL(url).pathname;

describe("POST /payments with a card that asks for 3-D Secure", () => {
  it("answers 201 requires_action with next_action redirect_to_url to the page, and payment.requires_action", async () => {
    const payment = await asked();
    expect(payment.next_action).toEqual({ type: "redirect_to_url", url: expect.stringMatching(new RegExp(`^${BASE}/pay/authenticate/${payment.id}/[0-9A-Za-z]{40}$`)) });
    expect(payment).toMatchObject({ amount_capturable: 0, amount_received: 0, capture_before: null });
    const events = await eventsFor(acct.id, payment.id);
    expect(events.map((e) => e.type)).toEqual(["payment.requires_action"]);
    expect(events[0].body.data).toMatchObject({ id: payment.id, status: "requires_action", next_action: payment.next_action });
    const read = await call(`/payments/${payment.id}`, { key: acct.key });
    expect(read.body.next_action).toEqual(payment.next_action);
    const row = await one<{ return_url: string; page_secret: string }>("SELECT return_url, page_secret FROM payments WHERE id = ?", payment.id);
    expect(row.return_url).toBe("https://shop.example.com/orders/6735?ref=a");
    expect(payment.next_action.url.endsWith(row.page_secret)).toBe(true);
  });

  it("asks for the 3-D Secure 2 card and a saved pm_card_authenticationRequiredOnSetup too", async () => {
    await asked({}, AUTH_3DS2_CARD);
    const method = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_authenticationRequiredOnSetup" } });
    expect(method.status, method.text).toBe(201);
    const res = await call("/payments", { key: acct.key, body: { amount: 500, currency: "usd", user_id: customer.id, payment_method: method.body.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe("requires_action");
  });

  it("a subscription's first charge asks too (incomplete, test/billing/incomplete.test.ts); the on-setup card is charged off session", async () => {
    const plan = await call("/subscription-plans", { key: acct.key, body: { name: "Monthly", price: 9.99, currency: "usd", interval: "month" } });
    expect(plan.status, plan.text).toBe(201);
    for (const token of ["pm_card_authenticationRequired", "pm_card_authenticationRequiredOnSetup"]) {
      const method = await call(`/api/users/${customer.id}/payment-methods`, { key: acct.key, body: { processor_token: token } });
      const res = await call("/subscriptions", { key: acct.key, body: { user_id: customer.id, plan_id: plan.body.id, payment_method: method.body.id } });
      expect(res.status, `${token}: ${res.text}`).toBe(201);
      expect(res.body).toMatchObject({ status: "incomplete", latest_payment: { status: "requires_action" } });
    }
    // The on-setup card: on session it asks, off session (a renewal) it is charged.
    const attached = await sandboxProcessor.attachPaymentMethod({ processorToken: "pm_card_authenticationRequiredOnSetup", customer: { id: customer.id, email: null }, reference: "r" });
    if (attached.status !== "attached") throw new Error("not attached");
    expect(await sandboxProcessor.chargeToken({ token: attached.token, amount: 999, currency: "usd", reference: "r1" })).toMatchObject({ status: "succeeded" });
    expect(await sandboxProcessor.chargeToken({ token: attached.token, amount: 999, currency: "usd", reference: "r2", customerPresent: true })).toMatchObject({ status: "failed", code: "authentication_required" });
  });

  it("refuses a return_url that is not http(s), or plain http to another host, naming return_url", async () => {
    for (const url of ["ftp://shop.example.com/x", "javascript:alert(1)", "http://shop.example.com/x", "not a url"]) {
      const res = await pay({ return_url: url });
      expect(expectError(res, 400, "invalid_request_error").param, url).toBe("return_url");
    }
    // Development takes localhost over http.
    expect((await pay({ return_url: "http://localhost:3000/done" })).status).toBe(201);
  });
});

describe("the sandbox challenge page", () => {
  it("shows the amount and the merchant with Complete and Fail, carries no key, and is never framed", async () => {
    const payment = await asked();
    const page = await browse(payment.next_action.url);
    expect(page.status).toBe(200);
    expect(page.text).toContain("Corner Shop");
    expect(page.text).toContain("25.99 EUR");
    expect(page.text).toMatch(/<form method="post" action="[^"]+\/complete"><button type="submit">Complete<\/button>/);
    expect(page.text).toContain(">Fail</button>");
    expect(page.text).not.toContain(acct.key);
    expect(page.text).not.toContain("sk_");
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(page.headers.get("cache-control")).toBe("no-store");
  });

  it("answers 404 for a wrong secret, an unknown payment and a payment of another account's secret, and records nothing", async () => {
    const payment = await asked();
    const path = pathOf(payment.next_action.url);
    const secret = path.split("/").pop()!;
    const wrong = path.replace(secret, `${secret.slice(0, 39)}${secret.endsWith("a") ? "b" : "a"}`);
    const theirs = await call("/payments", { key: other.key, body: { amount: 100, currency: "usd", user_id: (await createUser(other)).id, return_url: "https://other.example.com/", ...cardFields(AUTH_CARD) } });
    const theirSecret = pathOf(theirs.body.next_action.url).split("/").pop()!;
    for (const url of [wrong, `/pay/authenticate/${payment.id}/${theirSecret}`, `/pay/authenticate/pay_01jd2x4k5m6n7p8q9r0s1t2v3w/${secret}`, `/pay/authenticate/${payment.id}/short`]) {
      expect((await browse(url)).status, url).toBe(404);
      expect((await browse(`${url}/complete`, {})).status, url).toBe(404);
    }
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.status).toBe("requires_action");
    // Another account's key reads neither payment of the other.
    expectError(await call(`/payments/${payment.id}`, { key: other.key }), 404, "not_found_error");
  });

  it("Complete captures an automatic payment: completed, payment.completed, 303 to return_url with payment_id", async () => {
    const payment = await asked();
    const done = await browse(`${payment.next_action.url}/complete`, {});
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`https://shop.example.com/orders/6735?ref=a&payment_id=${payment.id}`);
    const read = (await call(`/payments/${payment.id}`, { key: acct.key })).body;
    expect(read).toMatchObject({ status: "completed", amount_received: 2599, next_action: null });
    const events = await eventsFor(acct.id, payment.id);
    expect(events.map((e) => e.type)).toEqual(["payment.requires_action", "payment.completed"]);
    expect(events[1].body.data).toMatchObject({ transaction_id: payment.id, amount: 2599, status: "completed", customer: { id: customer.id } });
  });

  it("Complete authorizes a manual payment: requires_capture for 7 days, payment.authorized, then capture works", async () => {
    const payment = await asked({ capture_method: "manual" });
    expect((await browse(`${payment.next_action.url}/complete`, {})).status).toBe(303);
    const read = (await call(`/payments/${payment.id}`, { key: acct.key })).body;
    expect(read).toMatchObject({ status: "requires_capture", amount_capturable: 2599, amount_received: 0, next_action: null });
    expect(Date.parse(read.capture_before) - Date.now()).toBeGreaterThan(AUTHORIZATION_LIFETIME_MS - 60_000);
    const captured = await call(`/payments/${payment.id}/capture`, { key: acct.key, body: { amount: 2000 } });
    expect(captured.status, captured.text).toBe(200);
    expect((await eventsFor(acct.id, payment.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.authorized", "payment.completed"]);
  });

  it("Fail fails it: failed, failure_code authentication_failed, payment.failed, 303 to return_url", async () => {
    const payment = await asked();
    const done = await browse(`${payment.next_action.url}/fail`, {});
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toContain(`payment_id=${payment.id}`);
    const read = (await call(`/payments/${payment.id}`, { key: acct.key })).body;
    expect(read).toMatchObject({ status: "failed", failure_code: "authentication_failed", next_action: null, amount_received: 0 });
    const events = await eventsFor(acct.id, payment.id);
    expect(events.map((e) => e.type)).toEqual(["payment.requires_action", "payment.failed"]);
    expect(events[1].body.data).toMatchObject({ transaction_id: payment.id, status: "failed" });
  });

  it("a second submit (double click, the other button, another tab) records nothing new and lands on the same place", async () => {
    const payment = await asked();
    const [first, second] = await Promise.all([browse(`${payment.next_action.url}/complete`, {}), browse(`${payment.next_action.url}/complete`, {})]);
    const third = await browse(`${payment.next_action.url}/fail`, {});
    for (const res of [first, second, third]) {
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toBe(`https://shop.example.com/orders/6735?ref=a&payment_id=${payment.id}`);
    }
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.status).toBe("completed");
    expect((await eventsFor(acct.id, payment.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.completed"]);
  });

  it("without a return_url lands on the page, which shows the result and no button", async () => {
    const payment = await asked({ return_url: undefined });
    const done = await browse(`${payment.next_action.url}/fail`, {});
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(pathOf(payment.next_action.url));
    const page = await browse(payment.next_action.url);
    expect(page.status).toBe(200);
    expect(page.text).toContain("Payment failed");
    expect(page.text).not.toContain("<button");
    expect(page.text).not.toContain("<form");
  });
});

describe("while the account is being moved to another shard", () => {
  it("the page records nothing and asks the payer to try again (409); afterwards Complete works", async () => {
    const payment = await asked();
    await env.DB.prepare("UPDATE accounts SET move_token = 'move-test', move_until = ? WHERE id = ?").bind(Date.now() + 60_000, acct.id).run();
    try {
      const refused = await browse(`${payment.next_action.url}/complete`, {});
      expect(refused.status).toBe(409);
      expect(refused.text).toContain("Please try again");
      expect((await one<{ status: string }>("SELECT status FROM payments WHERE id = ?", payment.id)).status).toBe("requires_action");
    } finally {
      await env.DB.prepare("UPDATE accounts SET move_token = NULL, move_until = NULL WHERE id = ?").bind(acct.id).run();
    }
    expect((await browse(`${payment.next_action.url}/complete`, {})).status).toBe(303);
    expect((await eventsFor(acct.id, payment.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.completed"]);
  });
});

describe("cancel and expiry of a payment waiting for its payer", () => {
  it("POST /payments/{id}/cancel cancels it (payment.canceled); its page then shows canceled and records nothing", async () => {
    const payment = await asked();
    const res = await call(`/payments/${payment.id}/cancel`, { key: acct.key, body: { cancellation_reason: "requested_by_customer" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "canceled", next_action: null, cancellation_reason: "requested_by_customer" });
    const done = await browse(`${payment.next_action.url}/complete`, {});
    expect(done.status).toBe(303);
    const page = await browse(payment.next_action.url);
    expect(page.text).toContain("Payment canceled");
    expect(page.text).not.toContain("<button");
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.status).toBe("canceled");
    expect((await eventsFor(acct.id, payment.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.canceled"]);
    // Another account cannot cancel it.
    expectError(await call(`/payments/${payment.id}/cancel`, { key: other.key, body: {} }), 404, "not_found_error");
  });

  it("the cron cancels one left unauthenticated for 7 days (cancellation_reason abandoned), and leaves a younger one", async () => {
    const old = await asked();
    const young = await asked();
    await env.DB.prepare("UPDATE payments SET created_at = ? WHERE id = ?").bind(new Date(Date.now() - 60_000).toISOString(), young.id).run();
    await env.DB.prepare("UPDATE payments SET created_at = ? WHERE id = ?").bind(new Date(Date.now() - AUTHORIZATION_LIFETIME_MS - 120_000).toISOString(), old.id).run();
    const result = await expireAuthorizations(env, Date.now());
    expect(result.canceled).toBeGreaterThanOrEqual(1);
    expect((await call(`/payments/${old.id}`, { key: acct.key })).body).toMatchObject({ status: "canceled", cancellation_reason: "abandoned", next_action: null });
    expect((await call(`/payments/${young.id}`, { key: acct.key })).body.status).toBe("requires_action");
    expect((await eventsFor(acct.id, old.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.canceled"]);
    // A second run changes nothing.
    await expireAuthorizations(env, Date.now());
    expect((await eventsFor(acct.id, old.id)).map((e) => e.type)).toEqual(["payment.requires_action", "payment.canceled"]);
  });
});

describe("review of issue 34: attacks on the challenge", () => {
  const outcomes = (types: string[]) => types.filter((t) => t !== "payment.requires_action");

  it("Complete and Fail at once, several times each: one outcome, one event, every submit lands on return_url", async () => {
    const payment = await asked();
    const submits = await Promise.all([0, 1, 2, 3].map((i) => browse(`${payment.next_action.url}/${i % 2 === 0 ? "complete" : "fail"}`, {})));
    for (const res of submits) {
      expect(res.status, res.text).toBe(303);
      expect(res.headers.get("location")).toBe(`https://shop.example.com/orders/6735?ref=a&payment_id=${payment.id}`);
    }
    const status = (await call(`/payments/${payment.id}`, { key: acct.key })).body.status;
    expect(["completed", "failed"]).toContain(status);
    expect(outcomes((await eventsFor(acct.id, payment.id)).map((e) => e.type))).toEqual([status === "completed" ? "payment.completed" : "payment.failed"]);
  });

  it("the merchant's cancel and a late Complete at once: one of them wins, with its one event, never both", async () => {
    for (let round = 0; round < 3; round++) {
      const payment = await asked();
      const [cancel, complete] = await Promise.all([call(`/payments/${payment.id}/cancel`, { key: acct.key, body: {} }), browse(`${payment.next_action.url}/complete`, {})]);
      expect(complete.status).toBe(303);
      const now = (await call(`/payments/${payment.id}`, { key: acct.key })).body;
      const types = outcomes((await eventsFor(acct.id, payment.id)).map((e) => e.type));
      if (now.status === "canceled") {
        expect(cancel.status, cancel.text).toBe(200);
        expect(types).toEqual(["payment.canceled"]);
      } else {
        expect(now).toMatchObject({ status: "completed", canceled_at: null, amount_received: 2599 });
        expectError(cancel, 409, "invalid_request_error", "payment_unexpected_state");
        expect(types).toEqual(["payment.completed"]);
      }
    }
  });

  it("the cron's 7-day abandon and a late Complete at once: one outcome, one event", async () => {
    const payment = await asked();
    await env.DB.prepare("UPDATE payments SET created_at = ? WHERE id = ?").bind(new Date(Date.now() - AUTHORIZATION_LIFETIME_MS - 120_000).toISOString(), payment.id).run();
    const [, complete] = await Promise.all([expireAuthorizations(env, Date.now()), browse(`${payment.next_action.url}/complete`, {})]);
    expect(complete.status).toBe(303);
    const now = (await call(`/payments/${payment.id}`, { key: acct.key })).body;
    const types = outcomes((await eventsFor(acct.id, payment.id)).map((e) => e.type));
    expect(types).toEqual([now.status === "canceled" ? "payment.canceled" : "payment.completed"]);
    if (now.status === "canceled") expect(now).toMatchObject({ cancellation_reason: "abandoned", amount_received: 0 });
  });

  it("a retried POST /payments with the same Idempotency-Key while (and after) the payment waits: the same payment, charged once", async () => {
    const body = { amount: 2599, currency: "eur", user_id: customer.id, return_url: "https://shop.example.com/orders/1", ...cardFields(AUTH_CARD) };
    const [first, second] = await Promise.all([call("/payments", { key: acct.key, idempotencyKey: "r34-retry-3ds", body }), call("/payments", { key: acct.key, idempotencyKey: "r34-retry-3ds", body })]);
    const created = [first, second].find((r) => r.status === 201)!;
    expect(created, `${first.status} ${second.status}`).toBeDefined();
    for (const res of [first, second]) if (res.status === 201) expect(res.body.id).toBe(created.body.id);
    await browse(`${created.body.next_action.url}/complete`, {});
    const again = await call("/payments", { key: acct.key, idempotencyKey: "r34-retry-3ds", body });
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(created.body.id);
    expect(await one<{ n: number }>("SELECT COUNT(*) AS n FROM payments WHERE account_id = ? AND charge_reference LIKE '%r34-retry-3ds%'", acct.id)).toEqual({ n: 1 });
    expect(outcomes((await eventsFor(acct.id, created.body.id)).map((e) => e.type))).toEqual(["payment.completed"]);
  });

  it("a page URL whose secret has the wrong length or odd characters answers the 404 page, never a 500, and records nothing", async () => {
    const payment = await asked();
    const secret = pathOf(payment.next_action.url).split("/").pop()!;
    const odd = [`${secret}a`, secret.slice(0, 39), `${secret.slice(0, 39)}%00`, `${secret.slice(0, 38)}%C3%A9`, `${secret.slice(0, 39)}%2F`, "%FF%FE", `${secret.toLowerCase() === secret ? secret.toUpperCase() : secret.toLowerCase()}`];
    for (const bad of odd) {
      const url = `/pay/authenticate/${payment.id}/${bad}`;
      const page = await browse(url);
      expect(page.status, url).toBe(404);
      expect(page.headers.get("content-security-policy"), url).toContain("frame-ancestors 'none'");
      expect((await browse(`${url}/complete`, {})).status, url).toBe(404);
    }
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.status).toBe("requires_action");
  });

  it("the challenge page carries no secret but its own URL's: no API key, no card number, no client secret; the CSP is this origin only", async () => {
    const payment = await asked();
    const page = await browse(payment.next_action.url);
    expect(page.text).not.toMatch(/sk_(test|live)_|pi_[A-Za-z0-9]+_secret|client_secret|4000002760003184|2760003184/);
    expect(page.headers.get("content-security-policy")).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-src 'none'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    );
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("referrer-policy")).toBe("no-referrer");
  });
});
