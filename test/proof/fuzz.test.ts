// Fuzzing with fast-check, for every operation of GET /openapi.json (read when this file loads):
// arbitrary JSON bodies for every mutating operation, arbitrary query strings for every list,
// arbitrary path parameters for every operation on an id. Properties: never a 5xx; every non-2xx
// answer has the documented error shape with a matching Request-Id header; Object.prototype is
// never polluted; a refused request leaves every row of every table as it was, and a GET never
// writes. Then the hostile bodies, explicitly: malformed JSON, wrong content types, bodies over
// 1 MB (with and without Content-Length), deep nesting, huge numbers, non-object bodies.
//
// Path ids are the real ids of one object of every kind (test/support/fixtures.ts seed), other kinds' ids,
// or random strings. Webhook deliveries all answer 200 (acceptAllOutbound), so no background
// work outlives a request for long: after any 2xx the test waits for the database to settle.
import fc from "fast-check";
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCOPES } from "../../src/auth/scopes";
import { settleRefund } from "../../src/payments/settle-refund";
import { type Account, type CallResult, call, expectErrorShape, signup } from "../support/http";
import { type Fixtures, createKey, payoutWithoutSettlement, seed } from "../support/fixtures";
import { expectNoCardData, PROOF_CARD, sentPans } from "../support/cards";
import { changes, quiesce, snapshot } from "../support/db";
import { acceptAllOutbound } from "../support/receiver";
import { type Operation, fixtureId, label, LIVE_SECRET_KEY_ONLY, SECRET_KEY_ONLY, operations, pathWith, validBody } from "../support/operations";
import { installFakeStripe } from "../support/live";
import { expectNoPollution, prototypeNames } from "../support/checks";

const OPS = await operations();
const MUTATING = OPS.filter((op) => op.method !== "get");
const LISTS = OPS.filter((op) => op.method === "get" && !op.hasId && op.query.length > 0);
const WITH_ID = OPS.filter((op) => op.hasId);
const RUNS = 30;

const baseline = prototypeNames();
const outbound = acceptAllOutbound();
// The processor connection's key check goes to the fake Stripe.
const stripe = installFakeStripe();
let acct: Account & { liveKey: string };
let fx: Fixtures;
/** A restricted key holding every scope, per operation: each stays far from the rate limit. */
const keys = new Map<string, string>();

beforeAll(async () => {
  acct = await signup("Fuzz");
  fx = await seed(acct);
  // The processor connection takes the account's live secret key only.
  for (const op of OPS) keys.set(op.operationId, LIVE_SECRET_KEY_ONLY.has(op.operationId) ? acct.liveKey : SECRET_KEY_ONLY.has(op.operationId) ? acct.key : (await createKey(acct, [...SCOPES], op.operationId)).secret);
  await quiesce();
}, 30_000);

afterAll(async () => {
  outbound.restore();
  stripe.restore();
  expectNoPollution(baseline);
  await expectNoCardData();
});

// ---------------------------------------------------------------------------------------------
// Arbitraries

/** Keys that name prototype members, the fields the API reads, and anything else. */
const NASTY_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "__defineGetter__",
  "polluted",
  "amount",
  "currency",
  // card_number and cvv come with the valid payout and subscription bodies; as free keys they
  // would be stored as request-id metadata keys, which the card-data scan (rightly) flags.
  "expiration_month",
  "expiration_year",
  "payment_method",
  "name",
  "email",
  "id",
  "account_id",
  "status",
  "metadata",
  "purpose",
  "url",
  "events",
  "scopes",
  "payment_id",
  "recipient_id",
  "user_id",
  "plan_id",
  "quantity",
  "price",
  "tiers",
  "pricing_model",
  "interval",
  "frozen_time",
  "grant_type",
  "scope",
  "client_secret",
  "endpoint_id",
  "test_clock",
  "reason",
  "active",
  "cancel_at_period_end",
];

/** Number literals JSON.stringify cannot write: -0, overflow, underflow, exponents, long integers. */
const NUMBER_LITERALS = [
  "-0",
  "0",
  "-1",
  "1e308",
  "-1e308",
  "1e999",
  "-1e999",
  "1e-400",
  "5e-324",
  "123456789012345678901234567890",
  "9007199254740993",
  "99999999999",
  "100000000000",
  "100.00",
  "0.1",
  "1E2",
  "4.2e1",
  "12",
  "2030",
];

const NASTY_STRINGS = [
  "",
  " ",
  "NaN",
  "Infinity",
  "-Infinity",
  "-0",
  "1e308",
  "null",
  "undefined",
  "true",
  "0x10",
  "\u0000",
  "\u202e",
  "💳",
  "'; DROP TABLE users; --",
  '" OR 1=1 --',
  "%00",
  "%",
  "../../etc/passwd",
  "<script>alert(1)</script>",
  "usd",
  "card",
  "client_credentials",
  "*",
  "month",
  "2030-01-01T00:00:00.000Z",
  "https://receiver.example.com/x",
  "http://127.0.0.1:1/x",
  "x".repeat(256),
  "y".repeat(5000),
];

/**
 * Generated text never holds the proof card's CVV: a fuzzed value that happened to be "739" and
 * was stored would look like a stored CVV to the card-data scan.
 */
const noCvv = (text: string) => !text.includes(PROOF_CARD.cvv);

const keyArb = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...NASTY_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 45 }).filter((k) => noCvv(k) && k !== "cvv" && k !== "card_number") });

const leafText = fc.oneof(
  fc.constantFrom(...NUMBER_LITERALS),
  fc.constantFrom(...NASTY_STRINGS).map((s) => JSON.stringify(s)),
  fc.constantFrom("null", "true", "false", "{}", "[]"),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.string({ maxLength: 200 }).map((s) => JSON.stringify(s)),
  fc.string({ unit: "grapheme", maxLength: 50 }).map((s) => JSON.stringify(s)),
  fc.constantFrom("user", "plan", "payment", "payout", "webhook", "event").map((k) => `"$id:${k}"`),
).filter(noCvv);

/** Any JSON text, as raw text, so keys like __proto__ and literals like -0 reach the Worker as typed. */
const { json: jsonText } = fc.letrec<{ json: string; array: string; object: string }>((tie) => ({
  json: fc.oneof({ maxDepth: 4, depthIdentifier: "json", withCrossShrink: true }, leafText, tie("array"), tie("object")),
  array: fc.array(tie("json"), { maxLength: 5, depthIdentifier: "json" }).map((items) => `[${items.join(",")}]`),
  object: fc
    .array(fc.tuple(keyArb, tie("json")), { maxLength: 8, depthIdentifier: "json" })
    .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`),
}));

/** A hostile value of the same JSON type as `value`: strings for strings, numbers for numbers. */
function sameType(value: unknown): fc.Arbitrary<string> {
  if (typeof value === "string") {
    return fc.oneof(
      fc.constantFrom(...NASTY_STRINGS).map((s) => JSON.stringify(s)),
      fc.string({ maxLength: 300 }).map((s) => JSON.stringify(s)),
      fc.string({ unit: "grapheme", maxLength: 30 }).map((s) => JSON.stringify(s)),
      fc.constant(JSON.stringify(`${value} `)),
      fc.constant(JSON.stringify(value.toUpperCase())),
    ).filter(noCvv);
  }
  if (typeof value === "number") return fc.oneof(fc.constantFrom(...NUMBER_LITERALS), fc.integer().map(String)).filter(noCvv);
  if (typeof value === "boolean") return fc.constantFrom("true", "false");
  return jsonText;
}

/**
 * A valid body, mostly kept (so the request reaches the handler), with some fields dropped,
 * given a hostile value of the same type, replaced by any JSON, or joined by extra keys.
 */
function mutatedValid(valid: unknown) {
  const entries = valid && typeof valid === "object" ? Object.entries(valid) : [];
  const fate = fc.oneof(
    { weight: 12, arbitrary: fc.constant("keep" as const) },
    { weight: 1, arbitrary: fc.constant("drop" as const) },
    { weight: 2, arbitrary: fc.constant("retype" as const) },
    { weight: 1, arbitrary: fc.constant("replace" as const) },
  );
  return fc
    .tuple(
      fc.tuple(...entries.map(([, v]) => fc.tuple(fate, sameType(v), jsonText))),
      fc.array(fc.tuple(keyArb, jsonText), { maxLength: 3 }),
    )
    .map(([fates, extra]) => {
      const parts: string[] = [];
      entries.forEach(([k, v], i) => {
        const [what, retyped, replaced] = fates[i];
        if (what === "keep") parts.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
        if (what === "retype") parts.push(`${JSON.stringify(k)}:${retyped}`);
        if (what === "replace") parts.push(`${JSON.stringify(k)}:${replaced}`);
      });
      for (const [k, v] of extra) parts.push(`${JSON.stringify(k)}:${v}`);
      return `{${parts.join(",")}}`;
    });
}

/** Replaces "$id:kind" placeholders with a real id of that kind. */
const withIds = (text: string) =>
  text.replace(/"\$id:(\w+)"/g, (_, kind: keyof Fixtures) => JSON.stringify(fx[kind] ?? kind));

const printableAscii = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 60 });

/** Usually none; else mostly a valid key (so replays and 422s happen), sometimes an invalid one. */
const idempotencyKeyArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant(null) },
  { weight: 4, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,12}$/).filter(noCvv) },
  { weight: 1, arbitrary: fc.oneof(printableAscii.filter(noCvv), fc.constant("k".repeat(300)), fc.constant("")) },
);

/**
 * A new object for the operations that end their object (revoke, delete, cancel), so that each
 * fuzzed operation starts from a live one rather than from what an earlier test left.
 */
async function liveId(op: Operation): Promise<string> {
  const id = fixtureId(op, fx);
  if (id === fx.webhook) {
    const res = await call("/api/webhooks", { key: acct.key, body: { url: "https://receiver.example.com/fuzz", events: ["payout.paid"] } });
    return res.body.id;
  }
  if (id === fx.key) return (await createKey(acct, ["users:read"], "fuzz victim")).id;
  if (id === fx.payout) return (await payoutWithoutSettlement(acct)).id;
  if (id === fx.subscription) {
    const res = await call("/subscriptions", { key: acct.key, body: validBody(MUTATING.find((o) => o.operationId === "createSubscription")!, fx) });
    return res.body.id;
  }
  return id;
}

/** Path ids: the operation's real object, another kind's id, or any string. */
const idArb = (op: Operation, real: string = fixtureId(op, fx)) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constant(real) },
    { weight: 1, arbitrary: fc.constantFrom(...(Object.values(fx) as string[])) },
    { weight: 2, arbitrary: fc.string({ maxLength: 120 }) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 30 }) },
    { weight: 1, arbitrary: fc.constantFrom("..", ".", "%", "%2F", "0", "-1", "null", "__proto__", "constructor", "x".repeat(101), "usr_", "po_00000000000000000000000000") },
  );

// ---------------------------------------------------------------------------------------------
// The properties

function expectAnswer(res: CallResult, context: string) {
  expect(res.status, `${context}: ${res.text.slice(0, 300)}`).toBeLessThan(500);
  expect(res.headers.get("request-id"), context).toMatch(/^req_/);
  if (res.status < 200 || res.status >= 300) expectErrorShape(res, context);
}

/** After a 2xx: stop what it started in the background, then let the database settle. */
async function afterSuccess(res: CallResult) {
  // A new payout's settlement message arrives after its hold; canceled first, it does nothing.
  if (res.body?.object === "payout" && res.body.status === "pending") {
    await call(`/payouts/${res.body.id}/cancel`, { key: acct.key, method: "POST" });
  }
  // A new refund's settlement waits for the job queue's batch; settled here, that message finds
  // it settled and does nothing.
  if (res.body?.object === "refund" && res.body.status === "pending") await settleRefund({ kind: "settleRefund", refundId: res.body.id }, env);
  await quiesce();
}

async function sendBody(op: Operation, path: string, text: string | undefined, idempotencyKey: string | null) {
  const headers: Record<string, string> = {};
  if (!op.isPublic) headers.authorization = `Bearer ${keys.get(op.operationId)}`;
  if (text !== undefined) headers["content-type"] = "application/json";
  if (idempotencyKey !== null) headers["idempotency-key"] = idempotencyKey;
  return call(path, { method: op.method.toUpperCase(), headers, rawBody: text });
}

describe("arbitrary JSON bodies, for every mutating operation of the document", () => {
  it("covers every mutating operation", () => {
    expect(MUTATING.length).toBeGreaterThanOrEqual(20);
  });

  for (const op of MUTATING) {
    it(`${label(op)}: no 5xx, the error shape, nothing half-written`, async () => {
      const valid = validBody(op, fx);
      const bodies = fc.oneof(
        { weight: 2, arbitrary: jsonText },
        { weight: 3, arbitrary: mutatedValid(valid) },
        { weight: 1, arbitrary: fc.constant(undefined) },
      );
      const ids = op.hasId ? idArb(op, await liveId(op)) : fc.constant("");
      await quiesce();
      // Nothing runs in the background between two runs (afterSuccess waits for it), so the
      // snapshot taken after one run is the one before the next.
      let before = await snapshot();
      await fc.assert(
        fc.asyncProperty(bodies, ids, idempotencyKeyArb, async (body, id, idempotencyKey) => {
          const path = op.hasId ? pathWith(op, id) : op.path;
          const text = body === undefined ? undefined : withIds(body);
          const res = await sendBody(op, path, text, idempotencyKey);
          const context = `${label(op)} ${path} ${String(text).slice(0, 200)}`;
          expectAnswer(res, context);
          if (res.status >= 200 && res.status < 300) await afterSuccess(res);
          const after = await snapshot();
          if (res.status < 200 || res.status >= 300) expect(changes(before, after), context).toEqual({});
          before = after;
          expectNoPollution(baseline);
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    }, 60_000);
  }
});

describe("arbitrary query strings, for every list of the document", () => {
  for (const op of LISTS) {
    it(`${label(op)}: no 5xx, the error shape, no writes`, async () => {
      const names = fc.oneof(fc.constantFrom(...op.query, "limit", "starting_after", "ending_before", "__proto__", "constructor"), fc.string({ maxLength: 20 }));
      const values = fc.oneof(
        fc.constantFrom("0", "1", "10", "100", "101", "-1", "1e2", "1.5", "NaN", "Infinity", "", "abc", "true", "pending", "active", "failed", "customer.created"),
        fc.constantFrom(...(Object.values(fx) as string[])),
        fc.string({ maxLength: 120 }),
        fc.string({ unit: "grapheme", maxLength: 30 }),
      );
      const query = fc.oneof(
        { weight: 4, arbitrary: fc.array(fc.tuple(names, values), { maxLength: 5 }).map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&")) },
        // Unencoded: stray %, &, =, +, and # cut the query where a browser would.
        { weight: 1, arbitrary: printableAscii },
      );
      const before = await snapshot();
      await fc.assert(
        fc.asyncProperty(query, async (q) => {
          const res = await call(`${op.path}?${q}`, { key: keys.get(op.operationId) });
          expectAnswer(res, `${label(op)}?${q}`);
          if (res.status === 200) expect(res.body).toMatchObject({ object: "list", data: expect.any(Array), has_more: expect.any(Boolean) });
          expect(changes(before, await snapshot()), `${label(op)}?${q}`).toEqual({});
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    }, 60_000);
  }
});

describe("arbitrary path parameters, for every GET on an id", () => {
  for (const op of WITH_ID.filter((o) => o.method === "get")) {
    it(`${label(op)}: no 5xx, the error shape, no writes`, async () => {
      const raw = fc.oneof(idArb(op).map((id) => pathWith(op, id)), printableAscii.map((s) => op.path.replace("{id}", s)));
      const before = await snapshot();
      await fc.assert(
        fc.asyncProperty(raw, async (path) => {
          const res = await call(path, { key: keys.get(op.operationId) });
          expectAnswer(res, `${label(op)} as ${path}`);
          expect(changes(before, await snapshot()), path).toEqual({});
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    }, 60_000);
  }
});

// ---------------------------------------------------------------------------------------------
// Hostile bodies, explicitly, for every mutating operation

/** Sends `init` to `op` (on its real object) and asserts the refusal; the database must not change. */
async function refused(op: Operation, init: { body?: BodyInit; headers?: Record<string, string>; idempotencyKey?: string }, status: number, code?: string) {
  const path = op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path;
  const headers: Record<string, string> = { ...init.headers };
  if (!op.isPublic) headers.authorization = `Bearer ${keys.get(op.operationId)}`;
  if (init.idempotencyKey) headers["idempotency-key"] = init.idempotencyKey;
  const before = await snapshot();
  const res = await call(path, { method: op.method.toUpperCase(), headers, rawBody: init.body });
  const context = `${label(op)}`;
  expect(res.status, `${context}: ${res.text.slice(0, 300)}`).toBe(status);
  expectErrorShape(res, context);
  if (code) expect(res.body.error.code, context).toBe(code);
  expect(changes(before, await snapshot()), context).toEqual({});
  return res;
}

const JSON_TYPE = { "content-type": "application/json" };

describe("hostile bodies", () => {
  it("malformed JSON: 400 invalid_json", async () => {
    const texts = ['{"name": "Ada",', "{'a': 1}", "nope", '{"a":1}}', "[1,]", '{"a":01}', '{"a":NaN}', "\u0000", '{"a":"\\x"}'];
    for (const op of MUTATING) {
      for (const body of texts) await refused(op, { body, headers: JSON_TYPE, idempotencyKey: "malformed" }, 400, "invalid_json");
    }
  }, 30_000);

  it("wrong content types: 415 unsupported_media_type (form bodies only where documented)", async () => {
    const form = new FormData();
    form.append("name", "Ada");
    for (const op of MUTATING) {
      await refused(op, { body: '{"name":"Ada"}', headers: { "content-type": "text/plain" } }, 415, "unsupported_media_type");
      await refused(op, { body: "<a/>", headers: { "content-type": "application/xml" } }, 415, "unsupported_media_type");
      await refused(op, { body: form }, 415, "unsupported_media_type");
      // No Content-Type at all (a byte body gets none from fetch).
      await refused(op, { body: new TextEncoder().encode('{"name":"Ada"}') }, 415, "unsupported_media_type");
      if (op.operationId !== "createAccessToken") {
        await refused(op, { body: "name=Ada", headers: { "content-type": "application/x-www-form-urlencoded" } }, 415, "unsupported_media_type");
      }
    }
    // One request (or a few) per mutating operation: the time grows with the document.
  }, 30_000);

  it("bodies over 1 MB, with and without Content-Length: 413 body_too_large", async () => {
    const big = `{"name":"${"x".repeat(1024 * 1024)}"}`;
    for (const op of MUTATING) {
      await refused(op, { body: big, headers: JSON_TYPE }, 413, "body_too_large");
      const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent === 0) controller.enqueue(new TextEncoder().encode('{"name":"'));
          if (sent > 1.5 * 1024 * 1024) return controller.close();
          sent += chunk.byteLength;
          controller.enqueue(chunk);
        },
      });
      await refused(op, { body: stream, headers: JSON_TYPE }, 413, "body_too_large");
    }
  });

  it("deep nesting: 400, never a stack overflow, with or without an Idempotency-Key", async () => {
    const deep = (n: number, open: string, close: string) => open.repeat(n) + close.repeat(n);
    const cases = [
      "[".repeat(100_000),
      deep(100_000, "[", "]"),
      deep(100_000, '{"a":', "}").replace(/}+$/, (m) => `1${m}`),
      `{"name":"Ada","email":"ada@example.com","x":${deep(3000, "[", "]")}}`,
      `{"name":"Ada","email":"ada@example.com","x":${deep(2000, '{"a":', "}").replace(/}+$/, (m) => `1${m}`)}}`,
      `{"purpose":"x","metadata":${deep(1000, '{"a":', "}").replace(/}+$/, (m) => `1${m}`)}}`,
    ];
    for (const op of MUTATING) {
      for (const [i, body] of cases.entries()) {
        // The fingerprint of an Idempotency-Key walks the parsed body: the nested, parseable cases.
        for (const idempotencyKey of i < 3 ? [undefined] : [undefined, `deep-${op.operationId}`]) {
          const res = await refused(op, { body, headers: JSON_TYPE, idempotencyKey }, 400, "invalid_json");
          expect(res.text.length).toBeLessThan(1000);
        }
      }
    }
    // One request (or a few) per mutating operation: the time grows with the document.
  }, 30_000);

  it("the nesting limit: 64 levels of arrays and objects are read, 65 are refused before parsing", async () => {
    const nested = (levels: number) => `{"name":"Ada","email":"ada@example.com","extra":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`;
    // 64 levels are parsed and reach validation, which refuses the unknown field (no body nests deeper than a few levels).
    const read = await call("/api/users", { key: acct.key, rawBody: nested(64), headers: JSON_TYPE, idempotencyKey: "nested-64" });
    expect(read.status, read.text).toBe(400);
    expect(read.body.error).toMatchObject({ code: "parameter_unknown", param: "extra" });
    // Brackets inside strings do not count.
    const quoted = await call("/api/users", { key: acct.key, rawBody: `{"name":"${"[{".repeat(500)}","email":"ada@example.com"}`, headers: JSON_TYPE });
    expect(quoted.status).toBe(400);
    expect(quoted.body.error.param).toBe("name");
    const users = MUTATING.find((o) => o.operationId === "createUser")!;
    const res = await refused(users, { body: nested(65), headers: JSON_TYPE, idempotencyKey: "nested-65" }, 400, "invalid_json");
    expect(res.body.error.message).toContain("64 levels");
  });

  it("a JSON array, string, number, boolean or null as the whole body: 400 where a body is documented", async () => {
    for (const op of MUTATING.filter((o) => o.hasBody)) {
      for (const body of ["[]", '[{"name":"Ada"}]', '"Ada"', "42", "-0", "1e308", "true", "null"]) {
        const res = await refused(op, { body, headers: JSON_TYPE }, 400);
        expect(["parameter_invalid", "parameter_missing", "invalid_request"]).toContain(res.body.error.code);
      }
    }
    // One request (or a few) per mutating operation: the time grows with the document.
  }, 30_000);

  it("huge and odd numbers in every field a body documents: never a 5xx, refusals write nothing", async () => {
    for (const op of MUTATING.filter((o) => o.hasBody)) {
      const valid = validBody(op, fx) as Record<string, unknown>;
      for (const field of Object.keys(valid)) {
        for (const literal of ["-0", "1e308", "-1e999", "1e-400", "123456789012345678901234567890", "100.00", "12"]) {
          const text = JSON.stringify(valid).replace(`"${field}":${JSON.stringify(valid[field])}`, `"${field}":${literal}`);
          const before = await snapshot();
          const res = await sendBody(op, op.hasId ? pathWith(op, fixtureId(op, fx)) : op.path, text, null);
          const context = `${label(op)} ${field}=${literal}`;
          expectAnswer(res, context);
          if (res.status >= 200 && res.status < 300) await afterSuccess(res);
          else expect(changes(before, await snapshot()), context).toEqual({});
        }
      }
    }
  }, 60_000);

  it("money amounts: 1e308, -0, an integer past 2^53 and 100.00 are refused with the parameter named", async () => {
    const payout = MUTATING.find((o) => o.operationId === "createPayout")!;
    const valid = JSON.stringify(validBody(payout, fx));
    for (const [literal, code] of [
      ["1e308", "amount_not_integer"],
      ["-0", "parameter_invalid"],
      ["123456789012345678901234567890", "parameter_invalid"],
      ["100.00", "amount_not_integer"],
      ["1e999", "amount_not_integer"],
    ]) {
      const res = await refused(payout, { body: valid.replace('"amount":1234', `"amount":${literal}`), headers: JSON_TYPE }, 400, code);
      expect(res.body.error.param).toBe("amount");
    }
  });
});

describe("prototype names as data", () => {
  it("metadata keys named after Object.prototype members are stored as sent, and __proto__ is refused, never silently dropped", async () => {
    const stored = await call("/api/request-id", {
      key: acct.key,
      rawBody: '{"purpose":"proto","metadata":{"constructor":"c","toString":"t","prototype":"p","hasOwnProperty":1,"valueOf":true}}',
      headers: JSON_TYPE,
    });
    expect(stored.status, stored.text).toBe(201);
    const expected = { constructor: "c", toString: "t", prototype: "p", hasOwnProperty: 1, valueOf: true };
    expect(stored.body.metadata).toEqual(expected);
    expect((await call(`/api/request-id/${stored.body.id}`, { key: acct.key })).body.metadata).toEqual(expected);

    for (const metadata of ['{"__proto__":{"polluted":"yes"}}', '{"a":"b","__proto__":"x"}']) {
      const before = await snapshot();
      const res = await call("/api/request-id", { key: acct.key, rawBody: `{"purpose":"proto","metadata":${metadata}}`, headers: JSON_TYPE });
      expect(res.status, res.text).toBe(400);
      expectErrorShape(res, metadata);
      expect(res.body.error).toMatchObject({ code: "parameter_invalid", param: "metadata.__proto__" });
      expect(changes(before, await snapshot())).toEqual({});
    }
    expectNoPollution(baseline);
  });

  it("a webhook endpoint cannot subscribe to an inherited property name as an event type", async () => {
    const hook = await call("/api/webhooks", { key: acct.key, body: { url: "https://receiver.example.com/proto", events: ["payout.paid"] } });
    expect(hook.status).toBe(201);
    for (const type of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) {
      const before = await snapshot();
      const res = await call("/api/webhooks", { key: acct.key, body: { url: "https://receiver.example.com/proto", events: [type] } });
      expect(res.status, `${type}: ${res.text}`).toBe(400);
      expect(res.body.error).toMatchObject({ code: "parameter_invalid", param: "events.0" });
      expect(changes(before, await snapshot())).toEqual({});
      const update = await call(`/api/webhooks/${hook.body.id}`, { key: acct.key, method: "PATCH", body: { events: ["payout.paid", type] } });
      expect(update.status, `${type}: ${update.text}`).toBe(400);
    }
    expect((await call(`/api/webhooks/${hook.body.id}`, { key: acct.key })).body.events).toEqual(["payout.paid"]);
  });

  it("a JSON body with __proto__ keys at every level pollutes nothing, on every mutating operation", async () => {
    for (const op of MUTATING) {
      const text = '{"__proto__":{"polluted":"yes","isAdmin":true},"constructor":{"prototype":{"polluted":"yes"}},"a":[{"__proto__":{"polluted":"yes"}}]}';
      const res = await sendBody(op, op.hasId ? pathWith(op, "__proto__") : op.path, text, "proto-pollution");
      expectAnswer(res, label(op));
      if (res.status >= 200 && res.status < 300) await afterSuccess(res);
      expectNoPollution(baseline);
    }
  });
});

describe("card data", () => {
  it("no PAN the fuzzing sent was stored (checked again after the file, in afterAll)", async () => {
    expect(sentPans.size).toBeGreaterThan(0);
    const scanned = await expectNoCardData();
    expect(scanned.tables).toBeGreaterThan(10);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM batch_guards").first<{ n: number }>()).toEqual({ n: 0 });
  });
});
