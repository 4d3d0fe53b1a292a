// Attacks on the one-statement read by id (src/routes/reads.ts readById: the caller's live key
// LEFT JOINed to the object, run with PreparedStatement.all()), on the D1 usage headers sent only
// when asked (src/middleware/request.ts), and on the pooled randomness of ids (src/domain/ids.ts).
//
// Every route that reads by id is driven with: its own object, another account's id (on this
// shard and on the other), an unknown id, a hostile id, the other mode's id, a key revoked while
// cached here, a key paused for a move, and access tokens; statuses, bodies and round trips are
// asserted exactly (they are what the two-statement batch answered before the change).
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { eq, sql } from "drizzle-orm";
import { OTHER_SHARD, env } from "../support/env";
import { type Account, type CallResult, call, expectError, roundTrips, signup } from "../support/http";
import { DESIGN_TIERS, createKey, createUser, mintToken, seed, warm } from "../support/fixtures";
import { changes, quiesce, snapshot } from "../support/db";
import { newApp } from "../../src/app";
import { createDb } from "../../src/db/client";
import { prepared } from "../../src/db/prepared";
import { accounts, apiKeys } from "../../src/db/schema";
import { newId, uuidv7, uuidv7Hex } from "../../src/domain/ids";
import { sha256Hex, toHex } from "../../src/lib/crypto";

const ZERO = "00000000000000000000000000";
const D1_HEADERS = ["tender-d1-round-trips", "tender-d1-rows-read", "tender-d1-rows-written", "tender-d1-statements-built"];
/** Every read scope a by-id GET needs, and the write scopes of the write routes that read by id. */
const SCOPES = ["users:read", "request_ids:read", "keys:read", "payouts:read", "payments:read", "refunds:read", "events:read", "plans:read", "subscriptions:write", "test_clocks:write", "invoices:write"];

/** The GET-by-id routes (path prefix, resource named in the 404, fixture key, round trips of a warm 200). */
const GETS = [
  ["/api/users/", "user", "user", 1],
  ["/api/request-id/", "request id", "requestId", 1],
  ["/api/keys/", "API key", "key", 1],
  ["/payouts/", "payout", "payout", 1],
  ["/payments/", "payment", "payment", 1],
  ["/refunds/", "refund", "refund", 1],
  ["/api/events/", "event", "event", 1],
  ["/subscription-plans/", "plan", "plan", 1],
  ["/subscriptions/", "subscription", "subscription", 1],
  // The clock's status is a second read.
  ["/api/test-clocks/", "test clock", "clock", 2],
] as const;

type Fx = Awaited<ReturnType<typeof seed>>;
let world: Promise<{ a: Account & { liveKey: string }; fx: Fx; b: Account; c: Account }> | undefined;

/** One seeded account A (every kind of object), B on this shard and C on the other, all warm. */
function theWorld() {
  world ??= (async () => {
    const a = await signup("Reader A");
    const fx = await seed(a);
    await quiesce();
    const b = await signup("Reader B");
    const made = await call("/api/accounts", { body: { name: "Reader C", email: "c@reader.test" }, headers: { "tender-shard": String(OTHER_SHARD) } });
    expect(made.status, made.text).toBe(201);
    const c = { id: made.body.id as string, key: made.body.api_key as string };
    for (const k of [a.key, b.key, c.key]) await warm(k);
    return { a, fx, b, c };
  })();
  return world;
}

/** The 404 a read by id answers, exactly. */
function expectMissing(res: CallResult, resource: string, id: string, param = "id") {
  const error = expectError(res, 404, "not_found_error", "resource_missing");
  expect(error).toEqual({ type: "not_found_error", code: "resource_missing", message: `No such ${resource}: '${id}'.`, param, request_id: error.request_id });
}

function expectRevoked(res: CallResult) {
  const error = expectError(res, 401, "authentication_error", "api_key_revoked");
  expect(error.message).toBe("The API key behind this credential has been revoked.");
  expect(res.headers.get("www-authenticate")).toBe('Bearer realm="tender"');
}

/** A restricted key of `acct` with every scope above, used once so this isolate caches it. */
async function cachedKey(acct: Account) {
  const key = await createKey(acct, SCOPES);
  await warm(key.secret);
  return key;
}

const revokeInD1 = (keyId: string) => env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), keyId).run();

describe("read by id: what each route answers", () => {
  it("its own object: the same body as the list's item and as an access token's read, decoded (booleans, JSON, generated columns), in the route's round trips", async () => {
    const { a, fx } = await theWorld();
    const token = await mintToken(a.key);
    await warm(token);
    const lists: Record<string, string> = {
      "/api/users/": "/api/users?limit=100",
      "/api/request-id/": "/api/request-id?limit=100",
      "/api/keys/": "/api/keys?limit=100",
      "/payouts/": "/payouts?limit=100",
      "/payments/": "/payments?limit=100",
      "/refunds/": "/refunds?limit=100",
      "/subscription-plans/": "/subscription-plans?limit=100",
      "/subscriptions/": "/subscriptions?limit=100",
    };
    for (const [path, , fixture, trips] of GETS) {
      const id = fx[fixture];
      await call(path + id, { key: a.key }); // the first read in this isolate may prepare its statement
      const res = await call(path + id, { key: a.key });
      expect(res.status, `${path}: ${res.text}`).toBe(200);
      expect(res.body.id, path).toBe(id);
      expect(res.body.livemode, path).toBe(false);
      expect(roundTrips(res), path).toBe(trips);
      // The clock's status query is built per request (as before the change); every read by id is prepared.
      if (fixture !== "clock") expect(res.headers.get("tender-d1-statements-built"), path).toBe("0");
      expect((await call(path + id, { key: token })).text, `${path} with a token`).toBe(res.text);
      if (lists[path]) {
        const list = await call(lists[path], { key: a.key });
        expect(list.body.data.find((item: { id: string }) => item.id === id), `${path}: as listed`).toEqual(res.body);
      }
    }
    // JSON and boolean columns through the join: a plan's tiers and active, a key's scopes, a subscription's flags.
    const tiered = await call("/subscription-plans", {
      key: a.key,
      body: { name: "Tiered", currency: "usd", interval: "month", pricing_model: "graduated", tiers: DESIGN_TIERS },
    });
    expect(tiered.status, tiered.text).toBe(201);
    const plan = await call(`/subscription-plans/${tiered.body.id}`, { key: a.key });
    expect(plan.body).toEqual(tiered.body);
    expect(plan.body.active).toBe(true);
    const key = await call(`/api/keys/${fx.key}`, { key: a.key });
    expect(key.body.scopes).toEqual(["users:read"]);
    const sub = await call(`/subscriptions/${fx.subscription}`, { key: a.key });
    expect(typeof sub.body.cancel_at_period_end).toBe("boolean");
  });

  it("another account's id (this shard and the other), an unknown id and a hostile id: the exact 404, in one round trip", async () => {
    const { fx, b, c } = await theWorld();
    for (const [path, resource, fixture] of GETS) {
      const id = fx[fixture];
      for (const [label, key] of [["same shard", b.key], ["other shard", c.key]] as const) {
        const res = await call(path + id, { key });
        expectMissing(res, resource, id);
        expect(res.text, `${path} ${label}`).not.toContain("Proof User");
        expect(roundTrips(res), `${path} ${label}`).toBe(1);
      }
      const unknown = fixture === "requestId" ? "01a00000-0000-7000-8000-000000000000" : `${id.slice(0, id.indexOf("_"))}_${ZERO}`;
      const missing = await call(path + unknown, { key: b.key });
      expectMissing(missing, resource, unknown);
      expect(roundTrips(missing), path).toBe(1);
      const hostile = "x' OR 1=1--";
      const injected = await call(path + encodeURIComponent(hostile), { key: b.key });
      expectMissing(injected, resource, hostile);
    }
  });

  it("the other mode's id: 404 both ways (test key on a live object, live key on a test object), and each mode reads its own", async () => {
    const { a, fx } = await theWorld();
    const live = { id: a.id, key: a.liveKey };
    const liveUser = await createUser(live, { name: "Live", email: "live@reader.test" });
    const liveRid = (await call("/api/request-id", { key: a.liveKey, body: { purpose: "live" } })).body.id;
    const liveKey = await createKey(live, ["users:read"]);
    for (const [path, resource, testId, liveId] of [
      ["/api/users/", "user", fx.user, liveUser.id],
      ["/api/request-id/", "request id", fx.requestId, liveRid],
      ["/api/keys/", "API key", fx.key, liveKey.id],
    ] as const) {
      expectMissing(await call(path + liveId, { key: a.key }), resource, liveId);
      expectMissing(await call(path + testId, { key: a.liveKey }), resource, testId);
      const own = await call(path + liveId, { key: a.liveKey });
      expect(own.status, own.text).toBe(200);
      expect(own.body.livemode).toBe(true);
    }
  });

  it("a key revoked elsewhere while cached here: 401 api_key_revoked on every route, whether the id is its own, unknown or another account's; two round trips (the read, then why)", async () => {
    const { a, fx, b } = await theWorld();
    for (const [path, , fixture] of GETS) {
      const id = fx[fixture];
      const otherAccounts = (await call("/api/users?limit=1", { key: b.key })).body.data[0]?.id ?? `usr_${ZERO}`;
      for (const target of [id, `${fixture === "requestId" ? "usr" : id.slice(0, id.indexOf("_"))}_${ZERO}`, otherAccounts]) {
        const key = await cachedKey(a);
        await revokeInD1(key.id);
        const res = await call(path + target, { key: key.secret });
        expectRevoked(res);
        expect(res.text, path).not.toContain('"object"');
        expect(roundTrips(res), `${path}${target}`).toBe(2);
        // Forgotten: the next request looks it up, and does not find it live.
        expectError(await call(path + target, { key: key.secret }), 401, "authentication_error", "invalid_api_key");
      }
    }
  });

  it("an access token of a key revoked while both are cached: 401 api_key_revoked on every route", async () => {
    const { a, fx } = await theWorld();
    for (const [path, , fixture] of GETS) {
      const key = await createKey(a, SCOPES);
      const token = await mintToken(key.secret);
      await warm(token);
      expect((await call(path + fx[fixture], { key: token })).status, path).toBe(200);
      await revokeInD1(key.id);
      expectRevoked(await call(path + fx[fixture], { key: token }));
    }
  });

  it("a key paused for an account move: 503 account_moving with Retry-After on every route, for its own and an unknown id; 200 again once unpaused", async () => {
    const { a, fx } = await theWorld();
    for (const [path, , fixture] of GETS) {
      const key = await cachedKey(a);
      await env.DB.prepare("UPDATE api_keys SET paused_at = ? WHERE id = ?").bind(new Date().toISOString(), key.id).run();
      for (const target of [fx[fixture], `usr_${ZERO}`]) {
        const res = await call(path + target, { key: key.secret });
        expectError(res, 503, "api_error", "account_moving");
        expect(res.headers.get("retry-after"), path).toBe("2");
      }
      await env.DB.prepare("UPDATE api_keys SET paused_at = NULL WHERE id = ?").bind(key.id).run();
      expect((await call(path + fx[fixture], { key: key.secret })).status, path).toBe(200);
    }
  });

  it("write routes that read by id first: another account's invoice, clock or plan answers 404 (param plan_id for a plan in a body) and writes nothing; a revoked cached key writes nothing", async () => {
    const { a, fx, b } = await theWorld();
    const before = await snapshot();
    expectMissing(await call(`/invoices/${fx.invoice}/void`, { key: b.key, method: "POST" }), "invoice", fx.invoice);
    expectMissing(await call(`/invoices/${fx.invoice}/pay`, { key: b.key, method: "POST" }), "invoice", fx.invoice);
    expectMissing(await call(`/api/test-clocks/${fx.clock}/advance`, { key: b.key, body: { frozen_time: "2031-01-01T00:00:00.000Z" } }), "test clock", fx.clock);
    expect(changes(before, await snapshot())).toEqual({});
    const otherPlan = (await call("/subscription-plans", { key: b.key, body: { name: "B plan", price: 5, currency: "usd", interval: "month" } })).body.id;
    const mid = await snapshot();
    expectMissing(await call(`/subscriptions/${fx.subscription}`, { key: a.key, method: "PUT", body: { plan_id: otherPlan } }), "plan", otherPlan, "plan_id");
    expect(changes(mid, await snapshot())).toEqual({});
    const key = await cachedKey(a);
    await revokeInD1(key.id);
    const beforeVoid = await snapshot();
    expectRevoked(await call(`/invoices/${fx.invoice}/void`, { key: key.secret, method: "POST" }));
    expect(changes(beforeVoid, await snapshot())).toEqual({});
    expect((await call(`/invoices/${fx.invoice}`, { key: a.key })).body.status).toBe("open");
  });

  it("sixty reads at once by three accounts and a revoked key, over every table: each answer is its own caller's", async () => {
    const { a, fx, b, c } = await theWorld();
    const revoked = await cachedKey(a);
    await revokeInD1(revoked.id);
    const jobs: Promise<[string, string, CallResult]>[] = [];
    for (let round = 0; round < 2; round++) {
      for (const [path, , fixture] of GETS) {
        const id = fx[fixture];
        jobs.push(call(path + id, { key: a.key }).then((r) => ["own", path, r]));
        jobs.push(call(path + id, { key: b.key }).then((r) => ["other", path, r]));
        jobs.push(call(path + id, { key: c.key }).then((r) => ["other", path, r]));
      }
    }
    jobs.push(call(`/api/users/${fx.user}`, { key: revoked.secret }).then((r) => ["revoked", "/api/users/", r]));
    for (const [kind, path, res] of await Promise.all(jobs)) {
      if (kind === "own") expect([res.status, res.body.livemode], `${path}: ${res.text.slice(0, 200)}`).toEqual([200, false]);
      if (kind === "other") expect(res.status, `${path}: ${res.text.slice(0, 200)}`).toBe(404);
      if (kind === "revoked") expect(res.status, res.text).toBe(401);
    }
  });
});

describe("PreparedStatement.all(): the mapping by column position", () => {
  // readById's own tables have distinct column names, so it holds there. The method is general,
  // though: these are the queries it silently mis-maps (drizzle keys the row by column name, then
  // reads Object.values by position: a repeated name collapses, an integer-like name moves first).
  const joined = prepared((db) =>
    db.select({ keyId: apiKeys.id, accountId: accounts.id, mode: apiKeys.mode }).from(apiKeys).innerJoin(accounts, eq(accounts.id, apiKeys.accountId)).where(eq(apiKeys.accountId, sql.placeholder("a"))).limit(1),
  );
  const constant = prepared((db) => db.select({ keyId: apiKeys.id, zero: sql<number>`0` }).from(apiKeys).where(eq(apiKeys.accountId, sql.placeholder("a"))).limit(1));

  it("answers what execute() answers, or refuses, for columns of one name in two tables and for an integer-like column name", async () => {
    const acct = await signup("Mapping");
    const db = createDb(env.DB);
    for (const statement of [joined, constant]) {
      const expected = await statement(db).execute({ a: acct.id });
      expect(expected).toHaveLength(1);
      let got: unknown;
      try {
        got = await statement(db).all({ a: acct.id });
      } catch {
        continue; // refusing is as good as mapping right
      }
      expect(got).toEqual(expected);
    }
  });
});

describe("D1 usage headers, asked or not", () => {
  it("development: errors (404, 401, 400) carry the four headers when asked and none otherwise; Tender-Shard always", async () => {
    const { a, b } = await theWorld();
    const revoked = await cachedKey(a);
    await revokeInD1(revoked.id);
    const revoked2 = await cachedKey(a);
    await revokeInD1(revoked2.id);
    const cases: [string, (ask: boolean) => Promise<CallResult>, number, string][] = [
      ["404", (ask) => call(`/api/users/usr_${ZERO}`, { key: b.key, headers: ask ? {} : { "tender-d1-usage": undefined } }), 404, "1"],
      ["401", (ask) => call(`/api/users/usr_${ZERO}`, { key: ask ? revoked.secret : revoked2.secret, headers: ask ? {} : { "tender-d1-usage": undefined } }), 401, "2"],
      ["400", (ask) => call("/api/users", { key: b.key, body: { name: "x", email: "nope" }, headers: ask ? {} : { "tender-d1-usage": undefined } }), 400, "0"],
    ];
    for (const [label, send, status, trips] of cases) {
      const asked = await send(true);
      expect(asked.status, label).toBe(status);
      expect(asked.headers.get("tender-d1-round-trips"), label).toBe(trips);
      for (const name of D1_HEADERS) expect(asked.headers.get(name), `${label} ${name}`).toMatch(/^\d+$/);
      expect(asked.headers.get("tender-shard"), label).toMatch(/^[01]$/);
      const plain = await send(false);
      expect(plain.status, label).toBe(status);
      for (const name of D1_HEADERS) expect(plain.headers.get(name), `${label} ${name} unasked`).toBeNull();
      expect(plain.headers.get("tender-shard"), label).toBe(asked.headers.get("tender-shard"));
    }
    // Any value asks, even an empty one.
    const empty = await call("/health", { headers: { "tender-d1-usage": "" } });
    expect(empty.headers.get("tender-d1-round-trips")).toBe("0");
  });

  it("production: never, asked or not, on a read by id, its 404, a revoked key's 401, or a validation error", async () => {
    const { a, fx, b } = await theWorld();
    const app = newApp();
    const production = { ...env, ENVIRONMENT: "production" };
    const revoked = await cachedKey(a);
    await revokeInD1(revoked.id);
    const send = async (path: string, key: string, init: RequestInit = {}) => {
      const ctx = createExecutionContext();
      const headers = new Headers(init.headers);
      headers.set("authorization", `Bearer ${key}`);
      headers.set("tender-d1-usage", "on");
      const response = await app.fetch(new Request(`https://api.tender.test${path}`, { ...init, headers }), production, ctx);
      await waitOnExecutionContext(ctx);
      await response.text();
      return response;
    };
    for (const [label, response, status] of [
      ["200", await send(`/api/users/${fx.user}`, a.key), 200],
      ["404", await send(`/api/users/${fx.user}`, b.key), 404],
      ["401", await send(`/api/users/${fx.user}`, revoked.secret), 401],
      ["400", await send("/api/users", a.key, { method: "POST", body: JSON.stringify({ name: "x", email: "nope" }), headers: { "content-type": "application/json" } }), 400],
    ] as const) {
      expect(response.status, label).toBe(status);
      for (const name of [...D1_HEADERS, "tender-shard"]) expect(response.headers.get(name), `${label} ${name}`).toBeNull();
      expect(response.headers.get("strict-transport-security"), label).toMatch(/max-age=\d+/);
    }
  });

  it("the tests' roundTrips() cannot read an answer that did not ask as zero round trips", async () => {
    // roundTrips is Number(header): an answer without the header reads 0, so every toBe(0) and
    // toBeLessThanOrEqual(n) on it would pass were the header ever not sent.
    const unasked = await call("/api/users", { key: (await theWorld()).b.key, headers: { "tender-d1-usage": undefined } });
    expect(unasked.status).toBe(200);
    expect(unasked.headers.get("tender-d1-round-trips")).toBeNull();
    expect(() => roundTrips(unasked)).toThrow();
  });
});

describe("pooled randomness", () => {
  const UUID_HEX_V7 = /^[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/;

  it("a thousand UUIDv7s of one millisecond, across several refills of the pool: version and variant bits, the time, and no random bytes shared", () => {
    const now = Date.now();
    const hexes = Array.from({ length: 1000 }, () => uuidv7Hex(now));
    const time = now.toString(16).padStart(12, "0");
    for (const hex of hexes) {
      expect(hex).toMatch(UUID_HEX_V7);
      expect(hex.slice(0, 12)).toBe(time);
    }
    expect(new Set(hexes).size).toBe(1000);
    // The last 7 bytes are pure pool bytes: no two ids share them (a reused slice would).
    expect(new Set(hexes.map((h) => h.slice(18))).size).toBe(1000);
    const dashed = uuidv7(now);
    expect(dashed).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("ids interleaved with UUIDs draw disjoint bytes, fresh ones each new millisecond, and increase within one", () => {
    const base = Date.now();
    let overlaps = 0;
    const tails = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const hex = uuidv7Hex(base + i);
      const id = newId("user", base + i + 1);
      const digits = id.slice(-16);
      const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
      // Were the id's 16 bytes the UUID's, digits 9..15 would be those bytes' low five bits.
      const fromUuid = Array.from({ length: 7 }, (_, k) => ALPHABET[parseInt(hex.slice(18 + 2 * k, 20 + 2 * k), 16) & 31]).join("");
      if (digits.slice(9) === fromUuid) overlaps++;
      tails.add(digits);
    }
    expect(overlaps).toBe(0);
    expect(tails.size).toBe(300);
    // Within one millisecond, across a refill (256 draws of 16 bytes), strictly increasing.
    const ms = base + 400;
    const burst = Array.from({ length: 600 }, () => newId("payout", ms));
    for (let i = 1; i < burst.length; i++) expect(burst[i] > burst[i - 1], `${burst[i - 1]} < ${burst[i]}`).toBe(true);
  });

  it("ids of consecutive new milliseconds share no run of their random digits (each draws its own 16 pool bytes)", () => {
    // Runs last among the id tests: it takes milliseconds up to a second and a half ahead.
    const base = Date.now() + 1000;
    const randoms = Array.from({ length: 300 }, (_, i) => newId("event", base + i).slice(-16));
    const seen = new Map<string, number>();
    for (const [i, digits] of randoms.entries()) {
      for (let at = 0; at + 8 <= 16; at++) {
        const window = digits.slice(at, at + 8);
        const before = seen.get(window);
        expect(before === undefined || before === i, `ids ${before} and ${i} share ${window}`).toBe(true);
        seen.set(window, i);
      }
    }
  });

  it("request ids over three hundred requests: unique, req_ and a UUIDv7's 32 hex digits", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const res = await call("/health", { headers: { "tender-d1-usage": undefined } });
      const id = res.headers.get("request-id")!;
      expect(id).toMatch(/^req_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
      ids.add(id);
    }
    expect(ids.size).toBe(300);
  });

  it("toHex: every byte, an ArrayBuffer, a view at an offset, and SHA-256's known answer", async () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    const reference = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    expect(toHex(all)).toBe(reference(all));
    expect(toHex(all.buffer)).toBe(reference(all));
    const view = new Uint8Array(all.buffer, 250, 6);
    expect(toHex(view)).toBe("fafbfcfdfeff");
    expect(toHex(new Uint8Array(0))).toBe("");
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});
