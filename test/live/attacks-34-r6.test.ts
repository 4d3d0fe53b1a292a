// Issue 34 review (R6), live mode against the fake Stripe: the 3-D Secure page's ?from=invoice on
// the live return (POST …/return), for an incomplete subscription's first invoice. Its every 303
// answers with the hosted headers (its Location holds the invoice page's secret); a foreign or
// doubled marker never leads off this origin; the other mode's secret answers 404.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browse, call, signup } from "../support/http";
import { captureLogs, card } from "../support/cards";
import { quiesce } from "../support/db";
import { type LiveAccount, STRIPE_CARDS, connectStripe, expectSpecClean, installFakeStripe, skipStripeEvents } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
const logs = captureLogs();
let acct: LiveAccount;
let userId: string;
let planId: string;
const RETURN = "https://shop.example.com/done";

beforeAll(async () => {
  acct = await signup("Live marker shop R6");
  await connectStripe(acct, { publishableKey: "pk_live_51MarkerShopR6000000" });
  userId = (await call("/api/users", { key: acct.liveKey, body: { name: "Live Payer", email: "live.r6@example.com" } })).body.id;
  const plan = await call("/subscription-plans", { key: acct.liveKey, body: { name: "Live monthly", price: 12, currency: "eur", interval: "month" } });
  expect(plan.status, plan.text).toBe(201);
  planId = plan.body.id;
});

afterAll(async () => {
  await quiesce();
  expectSpecClean(fake);
  logs.restore();
  stripe.restore();
});

function expectHostedHeaders(res: { headers: Headers }, what: string) {
  expect(res.headers.get("content-security-policy"), what).toContain("frame-ancestors 'none'");
  expect(res.headers.get("cache-control"), what).toBe("no-store");
  expect(res.headers.get("referrer-policy"), what).toBe("no-referrer");
}
const intentOf = async (paymentId: string) => {
  const row = await env.DB.prepare("SELECT processor_reference FROM payments WHERE id = ?").bind(paymentId).first<{ processor_reference: string }>();
  return fake.paymentIntents.get(row!.processor_reference)!;
};

describe("live: the marked challenge's return", () => {
  it("closed, then completed, then returned again: each 303 carries the hosted headers and leads to this origin's invoice page (a foreign marker to return_url)", async () => {
    skipStripeEvents(fake);
    const res = await call("/subscriptions", { key: acct.liveKey, body: { user_id: userId, plan_id: planId, return_url: RETURN, ...card(STRIPE_CARDS.needsAuthentication) } });
    expect(res.body.status, res.text).toBe("incomplete");
    const payment = res.body.latest_payment.id as string;
    const path = new URL(res.body.latest_payment.next_action.url).pathname;
    const [invoice] = (await call(`/invoices?subscription_id=${res.body.id}&status=open`, { key: acct.liveKey })).body.data;
    const page = await browse(`${path}?from=invoice`);
    expect(page.status).toBe(200);
    expectHostedHeaders(page, "the live challenge");
    expect(page.text).not.toContain(new URL(invoice.hosted_invoice_url).pathname.split("/").pop()!);
    // Closed at Stripe: back to the challenge, still marked, with the headers.
    const closed = await browse(`${path}/return?from=invoice&from=https://evil.example`, {});
    expect(closed.status).toBe(303);
    expect(closed.location).toBe(`${path}?from=invoice`);
    expectHostedHeaders(closed, "the closed challenge's 303");
    fake.authenticate((await intentOf(payment)).id, "complete");
    const back = await browse(`${path}/return?from=invoice`, {});
    expect(back.status).toBe(303);
    expect(back.location).toBe(`${invoice.hosted_invoice_url}?payment_id=${payment}`);
    expectHostedHeaders(back, "the completed return's 303");
    const again = await browse(`${path}/return?from=invoice`, {});
    expect(again.location).toBe(back.location);
    expectHostedHeaders(again, "a second return's 303");
    const foreign = await browse(`${path}/return?from=https%3A%2F%2Fevil.example`, {});
    expect(foreign.location).toBe(`${RETURN}?payment_id=${payment}`);
    expectHostedHeaders(foreign, "return_url's 303");
    expect((await call(`/subscriptions/${res.body.id}`, { key: acct.liveKey })).body.status).toBe("active");
    // The sandbox's buttons are not the live page's: 404 with the marker too.
    expect((await browse(`${path}/complete?from=invoice`, {})).status).toBe(404);
  });
});
