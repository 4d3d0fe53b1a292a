// Strict input: an unknown body field or query parameter answers 400 `parameter_unknown` naming
// it (with the field it probably meant), nothing is written, and the OpenAPI document says so
// (`additionalProperties: false`). Free-form metadata keys stay free; the OAuth token endpoint
// ignores unknown parameters, as RFC 6749 §3.2 requires. A filter over a closed set (an event
// type, a status) refuses a value outside it and names the allowed ones; an empty value filters
// nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCOPES } from "../../src/auth/scopes";
import { EVENT_TYPES } from "../../src/webhooks/catalog";
import { type Account, call, expectError, signup } from "../support/http";
import { type Fixtures, createKey, createUser, seed } from "../support/fixtures";
import { CARDS, PROOF_CARD, cardFields, expectNoCardData, payoutBody } from "../support/cards";
import { changes, countRows, quiesce, snapshot } from "../support/db";
import { acceptAllOutbound } from "../support/receiver";
import { type Operation, fixtureId, label, LIVE_SECRET_KEY_ONLY, SECRET_KEY_ONLY, operations, pathWith, validBody } from "../support/operations";
import { type Document, bodySchema, objectsOf, openapiDocument, queryParameters } from "../support/request-schemas";

const OPS = await operations();
const doc: Document = await openapiDocument();
let acct: Account & { liveKey: string };
let fx: Fixtures;
const keys = new Map<string, string>();
const outbound = acceptAllOutbound();

beforeAll(async () => {
  acct = await signup("Strict");
  fx = await seed(acct);
  // The processor connection takes the live secret key only; every other operation a key with every scope.
  for (const op of OPS) {
    if (!op.isPublic) keys.set(op.operationId, LIVE_SECRET_KEY_ONLY.has(op.operationId) ? acct.liveKey : SECRET_KEY_ONLY.has(op.operationId) ? acct.key : (await createKey(acct, [...SCOPES], op.operationId)).secret);
  }
  // A delivery to list: the deliveries' status filter is checked on something.
  expect((await call(`/api/webhooks/${fx.webhook}/test`, { key: acct.key, method: "POST" })).status).toBeLessThan(300);
  await quiesce();
}, 60_000);

afterAll(async () => {
  outbound.restore();
  await expectNoCardData();
});

const pathOf = (op: Operation) => (op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path);

async function send(op: Operation, body: unknown, query = "") {
  return call(pathOf(op) + query, { method: op.method.toUpperCase(), key: keys.get(op.operationId), body });
}

/** Sends the request and asserts 400 parameter_unknown on `param`; nothing may change. */
async function refusedUnknown(op: Operation, body: unknown, param: string, query = "") {
  const before = await snapshot();
  const res = await send(op, body, query);
  const error = expectError(res, 400, "invalid_request_error", "parameter_unknown");
  expect(error.param, `${label(op)}: ${error.message}`).toBe(param);
  expect(changes(before, await snapshot()), label(op)).toEqual({});
  return error;
}

const TOKEN = "createAccessToken";

describe("the OpenAPI document", () => {
  it("closes every object of every request body (additionalProperties: false), except metadata and the OAuth token request", () => {
    const open: string[] = [];
    let closed = 0;
    for (const op of OPS.filter((o) => o.hasBody)) {
      for (const { path, schema } of objectsOf(doc, bodySchema(doc, op)!)) {
        if (schema.additionalProperties === false) closed++;
        else open.push(`${op.operationId} ${path}`);
      }
    }
    expect(closed).toBeGreaterThanOrEqual(17);
    // metadata takes free-form keys by design; the token endpoint follows RFC 6749 §3.2.
    expect(open.sort()).toEqual(["createAccessToken (body)", "createCheckoutSession metadata", "createPayment metadata", "createRequestId metadata"]);
  });
});

describe("unknown body fields", () => {
  for (const op of OPS.filter((o) => o.method !== "get" && o.operationId !== TOKEN)) {
    it(`${label(op)}: an unknown field answers 400 parameter_unknown and writes nothing`, async () => {
      const body = op.hasBody ? { ...(validBody(op, fx) as object), zz_unknown: "x" } : { zz_unknown: "x" };
      const error = await refusedUnknown(op, body, "zz_unknown");
      expect(error.message).toMatch(/^Unknown field zz_unknown\. /);
    });
  }

  for (const op of OPS.filter((o) => o.hasBody && o.operationId !== TOKEN)) {
    it(`${label(op)}: a typo of each field names the field it meant`, async () => {
      const valid = validBody(op, fx) as Record<string, unknown>;
      // card_number is left out: its value under any other name is refused as a card number in text.
      for (const field of Object.keys(valid).filter((f) => f.length >= 4 && f !== "card_number")) {
        const middle = Math.floor(field.length / 2);
        const typo = field.slice(0, middle) + field.slice(middle + 1);
        const { [field]: value, ...rest } = valid;
        const error = await refusedUnknown(op, { ...rest, [typo]: value }, typo);
        expect(error.message, label(op)).toBe(`Unknown field ${typo}. Did you mean ${field}?`);
      }
    });
  }

  it("issue 19's examples: phone on a user, descripton on a payout and a subscription", async () => {
    const user = await createUser(acct, { name: "Ada", email: "ada@example.com" });
    const updates = await countRows("events", "account_id = ? AND type = 'customer.updated'", acct.id);
    const phone = expectError(
      await call(`/api/users/${user.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "ada@example.com", phone: "+44 20 7946 0000" } }),
      400,
      "invalid_request_error",
      "parameter_unknown",
    );
    expect(phone).toMatchObject({ param: "phone", message: "Unknown field phone. This request takes name, email, stripe_account, address and tax_ids." });
    expect((await call(`/api/users/${user.id}`, { key: acct.key })).body).toMatchObject({ name: "Ada", email: "ada@example.com" });
    expect(await countRows("events", "account_id = ? AND type = 'customer.updated'", acct.id)).toBe(updates);

    const payouts = await countRows("payouts", "account_id = ?", acct.id);
    const payout = expectError(
      await call("/payout", { key: acct.key, body: { ...payoutBody({}, PROOF_CARD.pan, PROOF_CARD.cvv), description: undefined, descripton: "Invoice 7" } }),
      400,
      "invalid_request_error",
      "parameter_unknown",
    );
    expect(payout).toMatchObject({ param: "descripton", message: "Unknown field descripton. Did you mean description?" });
    expect(await countRows("payouts", "account_id = ?", acct.id)).toBe(payouts);

    const payments = await countRows("payments", "account_id = ?", acct.id);
    const subscriptions = await countRows("subscriptions", "account_id = ?", acct.id);
    const subscription = expectError(
      await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: fx.plan, descripton: "Team seats", ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) } }),
      400,
      "invalid_request_error",
      "parameter_unknown",
    );
    expect(subscription.param).toBe("descripton");
    expect(subscription.message).toMatch(/^Unknown field descripton\. This request takes user_id, plan_id, quantity, coupon, default_tax_rates, trial_period_days, trial_end, payment_method, card_number, /);
    // No charge was made for a request that was refused.
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(payments);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(subscriptions);
  });

  it("a nested object's unknown field is named by its path: tiers.1.flat_prce", async () => {
    const body = {
      name: "Seats",
      currency: "usd",
      interval: "month",
      pricing_model: "graduated",
      tiers: [
        { up_to: 5, unit_price: 7 },
        { up_to: null, unit_price: 6, flat_prce: 2 },
      ],
    };
    const plans = await countRows("plans", "account_id = ?", acct.id);
    const error = expectError(await call("/subscription-plans", { key: acct.key, body }), 400, "invalid_request_error", "parameter_unknown");
    expect(error).toMatchObject({ param: "tiers.1.flat_prce", message: "Unknown field tiers.1.flat_prce. Did you mean tiers.1.flat_price?" });
    const far = expectError(
      await call("/subscription-plans", { key: acct.key, body: { ...body, tiers: [{ up_to: null, unit_price: 6, colour: "red" }] } }),
      400,
      "invalid_request_error",
      "parameter_unknown",
    );
    expect(far).toMatchObject({ param: "tiers.0.colour", message: "Unknown field tiers.0.colour. tiers.0 takes up_to, unit_price, unit_amount, unit_amount_decimal, flat_price and flat_amount." });
    expect(await countRows("plans", "account_id = ?", acct.id)).toBe(plans);
  });

  it("several unknown fields are all named; the first is the param; an unknown field is reported before the field it left missing", async () => {
    const error = expectError(
      await call("/api/users", { key: acct.key, body: { nme: "Ada", email: "ada@example.com", colour: "red" } }),
      400,
      "invalid_request_error",
      "parameter_unknown",
    );
    expect(error).toMatchObject({ param: "nme", message: "Unknown fields nme and colour. Did you mean name?" });
  });

  it("metadata keeps free-form keys", async () => {
    const res = await call("/api/request-id", { key: acct.key, body: { purpose: "strict", metadata: { descripton: "kept", any_key: 1, "with space": true } } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.metadata).toEqual({ descripton: "kept", any_key: 1, "with space": true });
  });

  it("a card-taking route refuses an unknown field without repeating the card, and keeps no card data", async () => {
    const res = await call("/payout", { key: acct.key, body: { ...payoutBody({}, CARDS.mastercard, "321"), cardholder: "A. Lovelace" } });
    expect(expectError(res, 400, "invalid_request_error", "parameter_unknown").param).toBe("cardholder");
    const error = JSON.stringify({ ...res.body.error, request_id: undefined });
    expect(error).not.toContain(CARDS.mastercard);
    expect(error).not.toContain("321");
  });

  it("a field name that looks like a card number is refused as card data, never repeated", async () => {
    const res = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com", [CARDS.visa]: "x" } });
    expect(res.status).toBe(400);
    expect(res.text).not.toContain(CARDS.visa);
  });

  it("the OAuth token endpoint ignores unknown parameters (RFC 6749 §3.2), form-encoded or JSON", async () => {
    const form = await call("/oauth/token", {
      method: "POST",
      headers: { authorization: `Bearer ${acct.key}`, "content-type": "application/x-www-form-urlencoded" },
      rawBody: "grant_type=client_credentials&scope=users:read&audience=tender",
    });
    expect(form.status, form.text).toBe(200);
    expect(form.body.scope).toBe("users:read");
    const json = await call("/oauth/token", { key: acct.key, body: { grant_type: "client_credentials", scope: "users:read", audience: "tender" } });
    expect(json.status, json.text).toBe(200);
    const query = await call("/oauth/token?audience=tender", { key: acct.key, body: { grant_type: "client_credentials" } });
    expect(query.status, query.text).toBe(200);
  });
});

describe("unknown query parameters", () => {
  // GET /health (a liveness check, outside the API's routes) takes whatever a monitor appends.
  for (const op of OPS.filter((o) => o.operationId !== TOKEN && o.operationId !== "health")) {
    it(`${label(op)}: an unknown query parameter answers 400 parameter_unknown`, async () => {
      const body = op.hasBody ? validBody(op, fx) : undefined;
      const error = await refusedUnknown(op, body, "zz_unknown", "?zz_unknown=1");
      expect(error.message).toMatch(/^Unknown query parameter zz_unknown\. /);
      if (op.query.length === 0) expect(error.message).toBe("Unknown query parameter zz_unknown. This request takes no query parameters.");
    });
  }

  it("a typo names the parameter it meant", async () => {
    const error = expectError(await call("/api/events?typ=customer.created", { key: acct.key }), 400, "invalid_request_error", "parameter_unknown");
    expect(error).toMatchObject({ param: "typ", message: "Unknown query parameter typ. Did you mean type?" });
    const limit = expectError(await call("/payouts?limt=5", { key: acct.key }), 400, "invalid_request_error", "parameter_unknown");
    expect(limit.message).toBe("Unknown query parameter limt. Did you mean limit?");
    const far = expectError(await call("/api/users?sort=name", { key: acct.key }), 400, "invalid_request_error", "parameter_unknown");
    expect(far.message).toBe("Unknown query parameter sort. This request takes limit, starting_after and ending_before.");
  });

  it("a parameter name that looks like a card number is not repeated", async () => {
    const res = await call(`/api/users?${CARDS.visa}=1`, { key: acct.key });
    expect(expectError(res, 400, "invalid_request_error", "parameter_unknown").message).toBe(
      "Unknown query parameter (a name that looks like a card number). This request takes limit, starting_after and ending_before.",
    );
    expect(res.body.error.param).toBeUndefined();
    expect(res.text).not.toContain(CARDS.visa);
  });
});

describe("closed-set query filters", () => {
  const filters = OPS.flatMap((op) => queryParameters(doc, op).filter(({ schema }) => schema.enum).map(({ name, schema }) => ({ op, name, values: schema.enum as string[] })));

  it("are every status filter, the events' type and at_period_end", () => {
    expect(filters.map(({ op, name }) => `${op.operationId} ${name}`).sort()).toEqual([
      "cancelSubscription at_period_end",
      "listCheckoutSessions status",
      "listEvents type",
      "listInvoices status",
      "listPayouts status",
      "listSubscriptions status",
      "listWebhookDeliveries status",
    ]);
  });

  it("a value outside the set answers 400 naming the parameter, every allowed value and the one sent; nothing is written", async () => {
    for (const { op, name, values } of filters) {
      const before = await snapshot();
      const res = await send(op, undefined, `?${name}=bogus`);
      const error = expectError(res, 400, "invalid_request_error", "parameter_invalid");
      expect(error.param, label(op)).toBe(name);
      expect(error.message, label(op)).toMatch(new RegExp(`^${name} must be `));
      for (const value of values) expect(error.message, label(op)).toContain(value);
      expect(error.message).toContain('"bogus" is not one.');
      expect(changes(before, await snapshot()), label(op)).toEqual({});
    }
  });

  it("GET /api/events?type=bogus answers 400 with the event types, as webhook registration does", async () => {
    const error = expectError(await call("/api/events?type=bogus", { key: acct.key }), 400, "invalid_request_error", "parameter_invalid");
    expect(error.param).toBe("type");
    for (const type of [...EVENT_TYPES, "webhook.test"]) expect(error.message).toContain(type);
    const registration = expectError(
      await call("/api/webhooks", { key: acct.key, body: { url: "https://receiver.example.com/x", events: ["bogus"] } }),
      400,
      "invalid_request_error",
      "parameter_invalid",
    );
    expect(registration.param).toBe("events.0");
    expect(registration.message).toContain('"bogus" is not one.');
  });

  it("an empty filter value filters nothing; an empty at_period_end (not a filter) is refused", async () => {
    for (const { op, name } of filters.filter((f) => f.name !== "at_period_end")) {
      const plain = await send(op, undefined, "?limit=100");
      const empty = await send(op, undefined, `?limit=100&${name}=`);
      expect(empty.status, `${label(op)}: ${empty.text}`).toBe(200);
      expect(empty.body.data.map((o: { id: string }) => o.id), label(op)).toEqual(plain.body.data.map((o: { id: string }) => o.id));
      expect(plain.body.data.length, label(op)).toBeGreaterThan(0);
    }
    const cancel = OPS.find((o) => o.operationId === "cancelSubscription")!;
    const error = expectError(await send(cancel, undefined, "?at_period_end="), 400, "invalid_request_error", "parameter_invalid");
    expect(error).toMatchObject({ param: "at_period_end", message: 'at_period_end must be true or false; "" is not one.' });
    expect((await call(`/subscriptions/${fx.subscription}`, { key: acct.key })).body.status).toBe("active");
  });
});
