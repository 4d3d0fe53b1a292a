// The customer portal in live mode, against the fake Stripe: adding a card runs Stripe's Payment
// Element with the connection's publishable key (its CSP allows Stripe.js and its frames only) and
// posts only the PaymentMethod id Stripe.js made, which is attached to the user's Stripe Customer
// and set up for off-session charges with a SetupIntent (payment_method.attached); card fields
// posted to the live page are refused and never reach Stripe.
import { exports } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Account, BASE, call, signup } from "../support/http";
import { eventsOf } from "../support/db";
import { type LiveAccount, STRIPE_CARDS, connectStripe, expectSpecClean, installFakeStripe, requestsOf } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(() => {
  expectSpecClean(fake);
  stripe.restore();
});

const PUBLISHABLE_KEY = "pk_live_51AcmePortal00000000000";
let acct: LiveAccount;
let live: Account;
let userId: string;

beforeAll(async () => {
  acct = await signup("Live portal");
  live = { id: acct.id, key: acct.liveKey };
  await connectStripe(acct, { rawCardData: false, publishableKey: PUBLISHABLE_KEY });
  userId = (await call("/api/users", { key: live.key, body: { name: "Grace Hopper", email: "grace@example.com" } })).body.id;
});

async function page(path: string, init: RequestInit = {}) {
  const response = await exports.default.fetch(`${BASE}${path}`, { redirect: "manual", ...init });
  return { status: response.status, headers: response.headers, html: await response.text() };
}

const submit = (path: string, form: Record<string, string>) =>
  page(path, { method: "POST", body: new URLSearchParams(form), headers: { "content-type": "application/x-www-form-urlencoded", origin: BASE } });

async function openPortal() {
  const res = await call("/portal/sessions", { key: live.key, body: { user_id: userId, return_url: "https://shop.example.com/account" } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.livemode).toBe(true);
  return new URL(res.body.url).pathname;
}

describe("the live customer portal", () => {
  it("adds a card through Stripe's Payment Element: attached to the user's Customer, set up off-session, payment_method.attached", async () => {
    const base = await openPortal();
    const form = await page(`${base}/payment-methods/new`);
    expect(form.status).toBe(200);
    expect(form.html).toContain('<script src="https://js.stripe.com/v3/"');
    expect(form.html).toContain('<script src="/pay/assets/checkout.js"');
    expect(form.html).toContain(`data-publishable-key="${PUBLISHABLE_KEY}"`);
    expect(form.html).toContain('data-mode="setup"');
    expect(form.html).toContain('id="payment-element"');
    expect(form.html).not.toContain('autocomplete="cc-number"');
    expect(form.headers.get("content-security-policy")).toContain("script-src 'self' https://js.stripe.com;");
    const actionKey = /name="action_key" value="([0-9A-Za-z]+)"/.exec(form.html)![1];
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 12, expYear: 2031 });
    const res = await submit(`${base}/payment-methods`, { processor_token: pm, action_key: actionKey });
    expect(res.status, res.html).toBe(303);
    expect(res.headers.get("location")).toBe(`${base}?done=added`);
    expect(fake.paymentMethods.get(pm)!.customer).toBeTruthy();
    const [setup] = requestsOf(fake, "POST /v1/setup_intents").filter((r) => r.params.payment_method === pm);
    expect(setup.params).toMatchObject({ confirm: "true", usage: "off_session" });
    const cards = (await call(`/api/users/${userId}/payment-methods`, { key: live.key })).body.data;
    expect(cards).toHaveLength(1);
    expect(cards[0]).toMatchObject({ livemode: true, card: { last4: "4242" } });
    expect((await eventsOf(acct.id, "payment_method.attached")).filter((e) => e.body.data.id === cards[0].id)).toHaveLength(1);
    const shown = await page(base);
    expect(shown.html).toContain("Visa •••• 4242");
  });

  it("refuses card fields posted to the live page, and sends nothing to Stripe", async () => {
    const base = await openPortal();
    const before = requestsOf(fake, "POST /v1/payment_methods").length + requestsOf(fake, "POST /v1/setup_intents").length;
    const res = await submit(`${base}/payment-methods`, { card_number: STRIPE_CARDS.succeeds, exp_month: "12", exp_year: "2031", cvc: "123" });
    expect(res.status).toBe(400);
    expect(res.html).not.toContain(STRIPE_CARDS.succeeds);
    expect(requestsOf(fake, "POST /v1/payment_methods").length + requestsOf(fake, "POST /v1/setup_intents").length).toBe(before);
  });
});
