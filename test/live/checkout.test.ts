// The hosted checkout page in live mode, against the fake Stripe: Stripe's Payment Element with
// the connection's publishable key (Stripe.js and its frames allowed by the page's CSP, nothing
// else), and a submit that carries only the PaymentMethod id Stripe.js made: attached to the
// user's Stripe Customer, then charged or subscribed through the live paths, once. Card fields
// posted to a live page are refused and never reach Stripe.
import { exports } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Account, BASE, call, signup } from "../support/http";
import { createPlan } from "../support/fixtures";
import { countRows, eventsOf } from "../support/db";
import { type Connected, type LiveAccount, STRIPE_CARDS, connectStripe, deliverStripeEvents, expectSpecClean, installFakeStripe, requestsOf } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
afterAll(() => {
  expectSpecClean(fake);
  stripe.restore();
});

const PUBLISHABLE_KEY = "pk_live_51AcmeCheckout0000000000";
let acct: LiveAccount;
let live: Account;
let userId: string;
let planId: string;
let connected: Connected;

beforeAll(async () => {
  acct = await signup("Live checkout");
  live = { id: acct.id, key: acct.liveKey };
  connected = await connectStripe(acct, { rawCardData: false, publishableKey: PUBLISHABLE_KEY });
  planId = (await createPlan(live, { price: 20, currency: "usd" })).id;
  userId = (await call("/api/users", { key: live.key, body: { name: "Grace Hopper", email: "grace@example.com" } })).body.id;
});

async function openSession(body: Record<string, unknown>) {
  const res = await call("/checkout/sessions", { key: live.key, body: { user_id: userId, success_url: "https://shop.example.com/thanks?session={CHECKOUT_SESSION_ID}", cancel_url: "https://shop.example.com/cart", ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; url: string; livemode: boolean };
}

async function page(path: string, init: RequestInit = {}) {
  const response = await exports.default.fetch(`${BASE}${path}`, { redirect: "manual", ...init });
  return { status: response.status, headers: response.headers, html: await response.text() };
}

const submit = (session: { url: string }, form: Record<string, string>) =>
  page(new URL(session.url).pathname, { method: "POST", body: new URLSearchParams(form), headers: { "content-type": "application/x-www-form-urlencoded", origin: BASE } });

const readSession = async (id: string) => (await call(`/checkout/sessions/${id}`, { key: live.key })).body as Record<string, any>;

describe("the live checkout page", () => {
  it("runs Stripe's Payment Element with the connection's publishable key, and its CSP allows Stripe.js and its frames only", async () => {
    const session = await openSession({ mode: "payment", amount: 2500, currency: "usd" });
    const res = await page(new URL(session.url).pathname);
    expect(res.status).toBe(200);
    expect(res.html).toContain('<script src="https://js.stripe.com/v3/"');
    expect(res.html).toContain('<script src="/pay/assets/checkout.js"');
    expect(res.html).toContain(`data-publishable-key="${PUBLISHABLE_KEY}"`);
    expect(res.html).toContain('id="payment-element"');
    expect(res.html).not.toContain('autocomplete="cc-number"');
    expect(res.html).not.toMatch(/sk_live_|whsec_/);
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain("script-src 'self' https://js.stripe.com;");
    expect(csp).toContain("frame-ancestors 'none'");
    const script = await page("/pay/assets/checkout.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/javascript/);
    expect(script.html).toContain("createPaymentMethod");
  });

  it("pays with the PaymentMethod Stripe.js made: attached to the user's Customer, one PaymentIntent, the session complete", async () => {
    const session = await openSession({ mode: "payment", amount: 2500, currency: "usd" });
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 12, expYear: 2031 });
    const before = requestsOf(fake, "POST /v1/payment_intents").length;
    const res = await submit(session, { processor_token: pm });
    expect(res.status, res.html).toBe(303);
    expect(res.headers.get("location")).toBe(`https://shop.example.com/thanks?session=${session.id}`);
    const done = await readSession(session.id);
    expect(done).toMatchObject({ status: "complete", livemode: true, payment_id: expect.stringMatching(/^pay_/), payment_method_id: expect.stringMatching(/^pmt_/) });
    expect(fake.paymentMethods.get(pm)!.customer).toBeTruthy();
    expect(requestsOf(fake, "POST /v1/payment_intents").length - before).toBe(1);
    const payment = (await call(`/payments/${done.payment_id}`, { key: live.key })).body;
    expect(payment).toMatchObject({ status: "completed", amount: 2500, livemode: true });
    // Again: nothing more at Stripe.
    expect((await submit(session, { processor_token: pm })).status).toBe(303);
    expect(requestsOf(fake, "POST /v1/payment_intents").length - before).toBe(1);
  });

  it("a setup session sets the card up with a SetupIntent (usage off_session) and completes; a payment session's charge sets it up, so it makes none", async () => {
    const session = await openSession({ mode: "setup" });
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    const res = await submit(session, { processor_token: pm });
    expect(res.status, res.html).toBe(303);
    expect(await readSession(session.id)).toMatchObject({ status: "complete", payment_id: null, payment_method_id: expect.stringMatching(/^pmt_/) });
    const [setup] = requestsOf(fake, "POST /v1/setup_intents").filter((r) => r.params.payment_method === pm);
    expect(setup.params).toMatchObject({ confirm: "true", usage: "off_session", customer: fake.paymentMethods.get(pm)!.customer });
    expect(setup.idempotencyKey).toMatch(/:setup_intent$/);
    expect([...fake.setupIntents.values()].find((i) => i.payment_method === pm)!.status).toBe("succeeded");

    const paying = await openSession({ mode: "payment", amount: 1500, currency: "usd" });
    const card = fake.tokenize({ number: STRIPE_CARDS.succeeds });
    expect((await submit(paying, { processor_token: card })).status).toBe(303);
    expect(requestsOf(fake, "POST /v1/setup_intents").filter((r) => r.params.payment_method === card)).toHaveLength(0);
  });

  it("a setup session whose card asks to authenticate runs Stripe.js handleNextAction with the SetupIntent's client secret; the return saves the card once and completes", async () => {
    const session = await openSession({ mode: "setup" });
    const pm = fake.tokenize({ number: STRIPE_CARDS.needsAuthentication });
    const res = await submit(session, { processor_token: pm });
    expect(res.status, res.html).toBe(200);
    const intent = [...fake.setupIntents.values()].find((i) => i.payment_method === pm)!;
    expect(intent.status).toBe("requires_action");
    expect(res.html).toContain(`data-client-secret="${intent.client_secret}"`);
    const returnUrl = `${new URL(session.url).pathname}/return`;
    expect(res.html).toContain(`data-return-url="${returnUrl}"`);
    expect((await readSession(session.id)).status).toBe("open");
    // Before the payer finished: nothing saved, the page says so.
    expect((await page(`${returnUrl}?setup_intent=${intent.id}`)).status).toBe(409);
    // What the stand-in's handleNextAction does when the payer completes the challenge.
    fake.authenticateSetup(intent.id, "complete");
    const back = await page(`${returnUrl}?setup_intent=${intent.id}`);
    expect(back.status, back.html).toBe(303);
    expect(back.headers.get("location")).toBe(`https://shop.example.com/thanks?session=${session.id}`);
    const done = await readSession(session.id);
    expect(done).toMatchObject({ status: "complete", payment_method_id: expect.stringMatching(/^pmt_/) });
    const method = (await call(`/api/users/${userId}/payment-methods`, { key: live.key })).body.data.filter((m: any) => m.id === done.payment_method_id);
    expect(method).toHaveLength(1);
    expect((await page(`${returnUrl}?setup_intent=${intent.id}`)).status).toBe(303);
    const [read] = requestsOf(fake, "GET /v1/setup_intents/{intent}").filter((r) => r.path === `/v1/setup_intents/${intent.id}`);
    expect(read.params).toMatchObject({ expand: ["payment_method"] });
  });

  it("a setup session whose payer fails the bank's check stays open and saves nothing; another SetupIntent's id is refused", async () => {
    const session = await openSession({ mode: "setup" });
    const pm = fake.tokenize({ number: STRIPE_CARDS.needsAuthentication });
    expect((await submit(session, { processor_token: pm })).status).toBe(200);
    const intent = [...fake.setupIntents.values()].find((i) => i.payment_method === pm)!;
    fake.authenticateSetup(intent.id, "fail");
    const returnUrl = `${new URL(session.url).pathname}/return`;
    expect((await page(`${returnUrl}?setup_intent=${intent.id}`)).status).toBe(402);
    expect((await page(`${returnUrl}?setup_intent=seti_NotThere000`)).status).toBe(400);
    expect(await readSession(session.id)).toMatchObject({ status: "open", payment_method_id: null });
  });

  for (const order of ["event first", "return first"] as const) {
    it(`Stripe's setup_intent.succeeded and the payer's return save the card and complete the session once, ${order}`, async () => {
      const session = await openSession({ mode: "setup" });
      const pm = fake.tokenize({ number: STRIPE_CARDS.needsAuthentication });
      expect((await submit(session, { processor_token: pm })).status).toBe(200);
      const intent = [...fake.setupIntents.values()].find((i) => i.payment_method === pm)!;
      expect(intent.metadata.tender_checkout_session).toBe(session.id);
      const event = fake.authenticateSetup(intent.id, "complete")!;
      expect(event.type).toBe("setup_intent.succeeded");
      const returnUrl = `${new URL(session.url).pathname}/return?setup_intent=${intent.id}`;
      const deliver = async () => (await deliverStripeEvents(fake, connected, { events: [event] }))[0].status;
      if (order === "event first") {
        expect(await deliver()).toBe(200);
        expect((await readSession(session.id)).status).toBe("complete");
        expect((await page(returnUrl)).status).toBe(303);
      } else {
        expect((await page(returnUrl)).status).toBe(303);
        expect(await deliver()).toBe(200);
      }
      expect(await deliver()).toBe(200);
      const done = await readSession(session.id);
      expect(done).toMatchObject({ status: "complete", payment_method_id: expect.stringMatching(/^pmt_/) });
      expect((await eventsOf(acct.id, "checkout.session.completed")).filter((e) => e.body.data.id === session.id)).toHaveLength(1);
      expect(await countRows("payment_methods", "processor_token LIKE ?", `%${pm}`)).toBe(1);
    });
  }

  it("a setup_intent.succeeded naming another user than the session's, or a session of no setup, saves nothing and leaves the session open", async () => {
    const session = await openSession({ mode: "setup" });
    const pm = fake.tokenize({ number: STRIPE_CARDS.needsAuthentication });
    expect((await submit(session, { processor_token: pm })).status).toBe(200);
    const intent = [...fake.setupIntents.values()].find((i) => i.payment_method === pm)!;
    const event = fake.authenticateSetup(intent.id, "complete")!;
    const forged = structuredClone(event);
    forged.id = `${event.id}x`;
    forged.data.object.metadata.tender_user = "usr_01someoneelse00000000000000";
    const paying = await openSession({ mode: "payment", amount: 1500, currency: "usd" });
    const other = structuredClone(event);
    other.id = `${event.id}y`;
    other.data.object.metadata.tender_checkout_session = paying.id;
    const answers = await deliverStripeEvents(fake, connected, { events: [forged, other] });
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(await readSession(session.id)).toMatchObject({ status: "open", payment_method_id: null });
    expect((await readSession(paying.id)).status).toBe("open");
    expect(await countRows("payment_methods", "processor_token LIKE ?", `%${pm}`)).toBe(0);
  });

  it("subscribes with it in subscription mode", async () => {
    const session = await openSession({ mode: "subscription", plan_id: planId });
    const res = await submit(session, { processor_token: fake.tokenize({ number: STRIPE_CARDS.succeeds }) });
    expect(res.status, res.html).toBe(303);
    const done = await readSession(session.id);
    expect(done).toMatchObject({ status: "complete", subscription_id: expect.stringMatching(/^sub_/) });
    expect((await call(`/subscriptions/${done.subscription_id}`, { key: live.key })).body.status).toBe("active");
  });

  it("shows Stripe's decline on the page (402) and keeps the session open", async () => {
    const session = await openSession({ mode: "payment", amount: 900, currency: "usd" });
    const res = await submit(session, { processor_token: fake.tokenize({ number: STRIPE_CARDS.declined }) });
    expect(res.status).toBe(402);
    expect(res.html).toContain('id="payment-element"');
    expect((await readSession(session.id)).status).toBe("open");
  });

  it("refuses card fields, or anything but a PaymentMethod id, and sends nothing to Stripe", async () => {
    const session = await openSession({ mode: "setup" });
    const before = fake.requests.length;
    const forms: Record<string, string>[] = [
      { card_number: STRIPE_CARDS.succeeds, exp_month: "12", exp_year: "2031", cvc: "123" },
      { processor_token: "pm_card_visa", card_number: STRIPE_CARDS.succeeds },
      { processor_token: "tok_visa" },
      {},
    ];
    for (const form of forms) {
      const res = await submit(session, form);
      expect(res.status, JSON.stringify(form)).toBe(400);
      expect(res.html).not.toContain(STRIPE_CARDS.succeeds);
    }
    expect(fake.requests.length).toBe(before);
    expect((await readSession(session.id)).status).toBe("open");
  });
});
