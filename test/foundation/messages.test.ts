// Every validation message is a sentence written for its field, never a validator's text. Walks
// every operation of GET /openapi.json: each field of each body (nested objects and list items
// included) with values its documented schema refuses, each required field left out, each query
// parameter with refused values, and each path id too long. Every answer must be a 400 in the
// documented error shape, with `param` naming the field, and a message that names the field and
// holds none of zod's own English (the phrases come from zod's locale, so a new field whose schema
// has no written message fails here).
import { en } from "zod/locales";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCOPES } from "../../src/auth/scopes";
import { CURRENT_API_VERSION } from "../../src/domain/api-versions";
import { type Account, type CallResult, call, expectErrorShape, signup } from "../support/http";
import { type Fixtures, createKey, seed } from "../support/fixtures";
import { PROOF_CARD, cardFields, expectNoCardData } from "../support/cards";
import { quiesce } from "../support/db";
import { acceptAllOutbound } from "../support/receiver";
import { type Operation, fixtureId, label, LIVE_SECRET_KEY_ONLY, SECRET_KEY_ONLY, operations, pathWith, validBody } from "../support/operations";
import {
  type Document,
  bodySchema,
  fieldsOf,
  openapiDocument,
  queryParameters,
  refusedQueryValues,
  refusedValues,
  valueAt,
  withValue,
} from "../support/request-schemas";

// ---------------------------------------------------------------------------------------------
// zod's own phrases, from its English locale

const { localeError } = en();
const SAMPLE_ISSUES: Record<string, unknown>[] = [
  { code: "invalid_type", expected: "string", input: 1 },
  { code: "invalid_type", expected: "number", input: Number.NaN },
  { code: "invalid_value", values: ["a"], input: "b" },
  { code: "invalid_value", values: ["a", "b"], input: "c" },
  { code: "too_big", origin: "string", maximum: 3, inclusive: true, input: "abcd" },
  { code: "too_big", origin: "number", maximum: 3, inclusive: false, input: 4 },
  { code: "too_big", origin: "array", maximum: 1, inclusive: true, input: [1, 2] },
  { code: "too_small", origin: "string", minimum: 1, inclusive: true, input: "" },
  { code: "too_small", origin: "number", minimum: 0, inclusive: false, input: 0 },
  { code: "too_small", origin: "array", minimum: 1, inclusive: true, input: [] },
  ...["regex", "email", "url", "uuid", "datetime", "date", "starts_with", "ends_with", "includes"].map((format) => ({
    code: "invalid_format",
    format,
    pattern: "x",
    prefix: "x",
    suffix: "x",
    includes: "x",
  })),
  { code: "not_multiple_of", divisor: 2 },
  { code: "unrecognized_keys", keys: ["a"] },
  { code: "unrecognized_keys", keys: ["a", "b"] },
  { code: "invalid_key", origin: "record" },
  { code: "invalid_union", errors: [] },
  { code: "invalid_element", origin: "map" },
  { code: "custom" },
];
/** zod's default messages, cut at their punctuation: "Invalid input", "expected string", "Too big", … */
const ZOD_PHRASES = [
  ...new Set(
    SAMPLE_ISSUES.map((issue) => localeError(issue as never) as string)
      .flatMap((message) => message.split(/[:,]/))
      .map((part) => part.trim())
      .filter((part) => part.length >= 6),
  ),
  "Invalid input",
];

function expectWrittenMessage(res: CallResult, param: string, context: string) {
  expect(res.status, `${context}: ${res.text.slice(0, 300)}`).toBe(400);
  expectErrorShape(res, context);
  const { message } = res.body.error as { message: string };
  expect(res.body.error.param, `${context}: ${message}`).toBe(param);
  for (const phrase of ZOD_PHRASES) expect(message, `${context}: zod's "${phrase}"`).not.toContain(phrase);
  // A sentence about this field: it names the field (or says it in words: "expiration month").
  const names = param.split(".").filter((segment) => !/^\d+$/.test(segment));
  const lower = message.toLowerCase();
  expect(
    names.some((name) => lower.includes(name.toLowerCase()) || lower.includes(name.replaceAll("_", " ").toLowerCase())),
    `${context}: "${message}" does not name ${param}`,
  ).toBe(true);
  expect(message, context).toMatch(/^[A-Za-z"(].*[.?]$/);
}

// ---------------------------------------------------------------------------------------------

const OPS = await operations();
const doc: Document = await openapiDocument();
let acct: Account & { liveKey: string };
let fx: Fixtures;
const keys = new Map<string, string>();
const outbound = acceptAllOutbound();

beforeAll(async () => {
  acct = await signup("Messages");
  fx = await seed(acct);
  // The processor connection takes the live secret key only; every other operation a key with every scope.
  for (const op of OPS) {
    if (!op.isPublic) keys.set(op.operationId, LIVE_SECRET_KEY_ONLY.has(op.operationId) ? acct.liveKey : SECRET_KEY_ONLY.has(op.operationId) ? acct.key : (await createKey(acct, [...SCOPES], op.operationId)).secret);
  }
  await quiesce();
}, 60_000);

afterAll(async () => {
  outbound.restore();
  await expectNoCardData();
});

/**
 * A body with every documented field set to a value its schema accepts (the handler may still
 * refuse the mix: a fixed price beside tiers), so one field at a time can be made wrong.
 */
function fullBody(op: Operation): unknown {
  if (op.operationId === "createPlan") {
    return {
      name: "Seats",
      default_tax_rates: [fx.taxRate],
      price: 5,
      unit_amount: 500,
      unit_amount_decimal: "0.35",
      currency: "usd",
      interval: "month",
      description: "Per seat",
      pricing_model: "volume",
      trial_period_days: 14,
      usage_type: "licensed",
      aggregate_usage: "sum",
      tiers: [
        { up_to: 5, unit_price: 7, unit_amount: 700, unit_amount_decimal: "700", flat_price: 1, flat_amount: 100 },
        { up_to: null, unit_price: 6 },
      ],
    };
  }
  if (op.operationId === "updateSubscription") return { quantity: 2, plan_id: fx.plan, proration_behavior: "none", at_period_end: false, cancel_at_period_end: false, coupon: fx.coupon, default_tax_rates: [fx.taxRate], ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) };
  if (op.operationId === "updatePlan") return { name: "Basic+", description: null, active: true, default_tax_rates: [fx.taxRate] };
  if (op.operationId === "createTaxRate") return { display_name: "VAT", percentage: "20", inclusive: false, country: "FR", state: "IDF", description: "French VAT" };
  if (op.operationId === "createCreditNote") return { invoice_id: fx.invoice, amount: 1, lines: [{ invoice_line_id: "il_01jd2x4k5m6n7p8q9r0s1t2v3w", amount: 1 }], reason: "order_change", refund: false, memo: "Proof" };
  if (op.operationId === "updateTaxRate") return { display_name: "VAT (FR)", description: "French VAT", active: true };
  if (op.operationId === "updateWebhook") return { url: "https://receiver.example.com/x", events: ["payout.paid"], status: "active", ordering: "none", rate_limit: 10 };
  if (op.operationId === "redeliverEvent") return { endpoint_id: fx.webhook };
  if (op.operationId === "recoverWebhook") return { since: new Date(Date.now() - 60_000).toISOString(), until: new Date().toISOString() };
  if (op.operationId === "testWebhook") return { exhaust: false };
  if (op.operationId === "createUser") return { name: "Grace Hopper", email: "grace@example.com", test_clock: fx.clock, stripe_account: "acct_1Nv0FGQ9RKHgCVdK", ...BUYER };
  if (op.operationId === "updateUser") return { name: "Grace B. Hopper", email: "grace@example.com", stripe_account: "acct_1Nv0FGQ9RKHgCVdK", ...BUYER };
  if (op.operationId === "updateAccount") return { event_retention_days: 30, business_name: "Messages Ltd", address: ADDRESS, tax_id: "GB123456789", invoice_footer: "Thank you." };
  if (op.operationId === "createPayout") return { ...(validBody(op, fx) as object), recipient_id: fx.user };
  if (op.operationId === "createPayment") return { ...(validBody(op, fx) as object), description: "Order 6735", metadata: { order_id: "6735" }, return_url: "https://shop.example.com/done" };
  if (op.operationId === "createRefund") return { payment_id: fx.payment, amount: 1, reason: "duplicate" };
  if (op.operationId === "createAccessToken") return { grant_type: "client_credentials", scope: "users:read", client_id: "x", client_secret: "sk_test_x" };
  if (op.operationId === "createWebhook") return { ...(validBody(op, fx) as object), ordering: "per_object", rate_limit: 10 };
  if (op.operationId === "createSubscription") return { ...(validBody(op, fx) as object), quantity: 1, coupon: fx.coupon, trial_period_days: 7, trial_end: "2099-01-01T00:00:00Z", default_tax_rates: [fx.taxRate], return_url: "https://shop.example.com/done" };
  if (op.operationId === "createUsageRecord") return { quantity: 3, timestamp: "2020-01-01T00:00:00Z", action: "set" };
  if (op.operationId === "createUsageEvents") return { events: [{ id: "proof-1", subscription_id: fx.metered, quantity: 3, timestamp: "2020-01-01T00:00:00Z" }] };
  if (op.operationId === "moveAccount") return { to_shard: 1, drain_seconds: 0 };
  if (op.operationId === "createCheckoutSession") return { ...(validBody(op, fx) as object), plan_id: fx.plan, metadata: { order_id: "6735" } };
  if (op.operationId === "createPaymentMethod") return { processor_token: "pm_card_visa", ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) };
  if (op.operationId === "connectProcessor") return { ...(validBody(op, fx) as object), publishable_key: `pk_live_${"P".repeat(24)}`, raw_card_data: false };
  if (op.operationId === "createCoupon") {
    return { id: "PROOF10", name: "Proof", percent_off: 10, amount_off: 100, currency: "usd", duration: "repeating", duration_in_months: 2, max_redemptions: 5, redeem_by: "2099-01-01T00:00:00Z" };
  }
  return validBody(op, fx);
}

const ADDRESS = { line1: "1 Main Street", line2: "Suite 4", city: "London", postal_code: "EC1A 1BB", state: "Greater London", country: "GB" };
const BUYER = { address: ADDRESS, tax_ids: [{ type: "gb_vat", value: "GB123456789" }] };

async function send(op: Operation, body: unknown, query = "", id?: string) {
  const path = (op.hasId ? pathWith(op, id ?? fixtureId(op, fx)) : op.path) + query;
  // The document describes the current version (the suite's accounts are pinned to an older one,
  // test/support/http.ts): each request asks for the version the document describes.
  return call(path, { method: op.method.toUpperCase(), key: keys.get(op.operationId), body, headers: { "tender-version": CURRENT_API_VERSION } });
}

describe("zod's phrases", () => {
  it("are read from its English locale, and include the ones callers used to see", () => {
    for (const phrase of ["Invalid input", "Invalid option", "Too big", "Too small", "Unrecognized key", "expected number", "received NaN"]) {
      expect(ZOD_PHRASES).toContain(phrase);
    }
  });
});

describe("body fields: every field of every body, with values its schema refuses", () => {
  const withBody = OPS.filter((op) => op.hasBody);

  it("covers every operation that documents a body", () => {
    expect(withBody.length).toBeGreaterThanOrEqual(17);
  });

  for (const op of withBody) {
    it(`${label(op)}: 400, the field in param, a message written for it`, async () => {
      const body = fullBody(op);
      const schema = bodySchema(doc, op)!;
      const fields = fieldsOf(doc, schema);
      expect(fields.length, label(op)).toBeGreaterThan(0);
      for (const field of fields) {
        // The full body holds every field, so that a new one is walked with a value of its own.
        expect(valueAt(body, field.keys), `${label(op)}: add ${field.path} to fullBody in this file`).not.toBe(undefined);
        const validItem = Array.isArray(valueAt(body, field.keys)) ? valueAt(body, field.keys)[0] : undefined;
        for (const value of refusedValues(field.schema, validItem)) {
          const context = `${label(op)} ${field.path}=${JSON.stringify(value)?.slice(0, 60)}`;
          const res = await send(op, withValue(body, field.keys, value));
          // A usage event's quantity and timestamp are checked per event: the call answers 200,
          // that event rejected with the field in its param (src/billing/usage-events.ts).
          if (op.operationId === "createUsageEvents" && /^events\.\d+\.(quantity|timestamp)$/.test(field.path)) {
            expect(res.status, `${context}: ${res.text}`).toBe(200);
            expect(res.body.rejected, `${context}: ${res.text}`).toMatchObject([{ index: 0, param: field.keys.at(-1) }]);
            continue;
          }
          expectWrittenMessage(res, expectedParam(field.path, value), context);
        }
        if (field.required) {
          const res = await send(op, withValue(body, field.keys, undefined));
          expectWrittenMessage(res, field.path, `${label(op)} without ${field.path}`);
          expect(res.body.error.code, `${label(op)} without ${field.path}: ${res.text}`).toBe("parameter_missing");
        }
      }
      for (const whole of [[], "text", 42, null]) {
        const res = await call(op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path, {
          method: op.method.toUpperCase(),
          key: keys.get(op.operationId),
          rawBody: JSON.stringify(whole),
          headers: { "content-type": "application/json" },
        });
        expect(res.status, `${label(op)} ${JSON.stringify(whole)}: ${res.text}`).toBe(400);
        for (const phrase of ZOD_PHRASES) expect(res.body.error.message).not.toContain(phrase);
      }
    }, 120_000);
  }
});

/** Where a refused value is reported: a free-form map's key or value names itself under the map. */
function expectedParam(path: string, value: unknown): string {
  if (value && typeof value === "object" && !Array.isArray(value) && path === "metadata") {
    const [key] = Object.keys(value);
    if (key !== "nested") return `metadata.${key}`;
  }
  return path;
}

describe("query parameters: every parameter of every operation, with values its schema refuses", () => {
  const withQuery = OPS.filter((op) => op.query.length > 0);

  it("covers every list and the cancel's at_period_end", () => {
    expect(withQuery.map((op) => op.operationId)).toEqual(expect.arrayContaining(["listEvents", "listPayouts", "listSubscriptions", "cancelSubscription"]));
  });

  for (const op of withQuery) {
    it(`${label(op)}: 400, the parameter in param, a message written for it`, async () => {
      for (const { name, schema } of queryParameters(doc, op)) {
        const values = refusedQueryValues(schema);
        expect(values.length, `${label(op)} ${name}: its schema refuses nothing (no enum, length or range)`).toBeGreaterThan(0);
        for (const value of values) {
          const res = await send(op, undefined, `?${name}=${encodeURIComponent(value)}`);
          expectWrittenMessage(res, name, `${label(op)} ?${name}=${value.slice(0, 40)}`);
        }
        // Sent twice: a list of values where one is expected.
        const twice = await send(op, undefined, `?${name}=a&${name}=b`);
        expectWrittenMessage(twice, name, `${label(op)} ?${name} twice`);
      }
    }, 60_000);
  }
});

describe("path ids", () => {
  for (const op of OPS.filter((o) => o.hasId)) {
    it(`${label(op)}: an id over 100 characters answers a written message`, async () => {
      const res = await send(op, op.method === "get" || op.method === "delete" || !op.hasBody ? undefined : fullBody(op), "", "x".repeat(101));
      expectWrittenMessage(res, "id", label(op));
    });
  }
});
