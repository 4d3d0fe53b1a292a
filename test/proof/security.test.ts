// Security, for every operation of GET /openapi.json: credentials (none, malformed, unknown,
// revoked, revoked while cached, expired), scopes, and tenant isolation; then card data and
// secrets in the database and in the logs.
//
// Public operations are excluded from the credential and scope checks, because they take no
// bearer credential: GET /health, POST /api/accounts (open in development, ADMIN_TOKEN elsewhere:
// test/production) and POST /oauth/token (authenticates the API key it exchanges:
// test/foundation/oauth.test.ts). GET /openapi.json and GET /docs are not operations of the
// document; test/foundation/docs.test.ts reads them without a credential.
//
// The document does not expose each operation's scope, so the scopes come from SCOPE_OF in
// test/support/operations.ts; the first test checks that table against the document, and the scope tests
// check it against the Worker (the scope alone is enough, every other scope is not).
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCOPES } from "../../src/auth/scopes";
import { sha256Hex } from "../../src/lib/crypto";
import { type Account, type CallResult, call, expectErrorShape, fetchWith, signup } from "../support/http";
import { type Fixtures, createKey, mintToken, seed, warm } from "../support/fixtures";
import { captureLogs, cardFields, CARDS, expectNoCardData, payoutBody, PROOF_CARD, sentCvvs, sentPans } from "../support/cards";
import { changes, quiesce, snapshot } from "../support/db";
import { failingQueue, runJobs } from "../support/queue";
import { waitFor } from "../support/wait";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { type Operation, fixtureId, label, LIVE_SECRET_KEY_ONLY, SECRET_KEY_ONLY, operations, pathWith, SCOPE_OF, scopesWithout, validBody } from "../support/operations";

const receiver = installReceiver();
let ops: Operation[];
let owner: Account;
let other: Account;
let fx: Fixtures;
let fxOther: Fixtures;

beforeAll(async () => {
  ops = await operations({ includeProcessorWebhooks: true });
  owner = await signup("Owner");
  other = await signup("Other tenant");
  fx = await seed(owner);
  fxOther = await seed(other);
  await quiesce();
}, 30_000);

afterAll(async () => {
  receiver.restore();
  const scanned = await expectNoCardData();
  expect(scanned.cells).toBeGreaterThan(100);
});

const guarded = () => ops.filter((op) => !op.isPublic);
/** The guarded operations a scope opens (the processor connection is the live secret key's alone, the account a secret key's). */
const scopeGuarded = () => guarded().filter((op) => !LIVE_SECRET_KEY_ONLY.has(op.operationId) && !SECRET_KEY_ONLY.has(op.operationId));

/** Calls `op` on the fixtures `ids` with its valid body and the given headers. */
function send(op: Operation, ids: Fixtures, headers: Record<string, string>, overrides: { body?: unknown; id?: string } = {}) {
  const path = op.hasId ? pathWith(op, overrides.id ?? fixtureId(op, ids)) : op.path;
  const body = op.method === "get" ? undefined : "body" in overrides ? overrides.body : validBody(op, ids);
  return call(path, { method: op.method.toUpperCase(), headers, body });
}

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });

function expect401(res: CallResult, context: string) {
  expect(res.status, `${context}: ${res.text.slice(0, 300)}`).toBe(401);
  expectErrorShape(res, context);
  expect(res.body.error.type, context).toBe("authentication_error");
  expect(res.headers.get("www-authenticate"), context).toMatch(/^Bearer\b/);
}

/** Runs `fn`, then asserts that the database is exactly as it was. */
async function writesNothing(context: string, fn: () => Promise<void>) {
  const before = await snapshot();
  await fn();
  expect(changes(before, await snapshot()), context).toEqual({});
}

describe("the operations", () => {
  it("the scope table names every operation that needs a credential, and nothing else", () => {
    expect(scopeGuarded().map((op) => op.operationId).sort()).toEqual(Object.keys(SCOPE_OF).sort());
    expect(guarded().filter((op) => LIVE_SECRET_KEY_ONLY.has(op.operationId)).map((op) => op.operationId).sort()).toEqual([...LIVE_SECRET_KEY_ONLY].sort());
    expect(guarded().filter((op) => SECRET_KEY_ONLY.has(op.operationId)).map((op) => op.operationId).sort()).toEqual([...SECRET_KEY_ONLY].sort());
    for (const scope of Object.values(SCOPE_OF)) expect(SCOPES).toContain(scope);
  });

  it("the public operations are exactly health, sign-up and an account's move (the operator's: ADMIN_TOKEN outside development), the token exchange and Stripe's webhook route (signed by Stripe)", () => {
    expect(ops.filter((op) => op.isPublic).map(label).sort()).toEqual([
      "GET /health",
      "POST /api/accounts",
      "POST /api/accounts/{account_id}/move",
      "POST /oauth/token",
      "POST /processor-webhooks/stripe/{account_id}",
    ]);
  });

  it("every fixture is real: the owner reads each object it will be denied", async () => {
    for (const op of guarded().filter((o) => o.hasId && o.method === "get")) {
      const res = await send(op, fx, bearer(owner.key));
      expect(res.status, `${label(op)}: ${res.text.slice(0, 200)}`).toBe(200);
    }
  });
});

describe("401 for a missing or bad credential, on every guarded operation", () => {
  it("no credential, malformed ones, unknown keys and tokens: 401 with WWW-Authenticate: Bearer, nothing written", async () => {
    const cases: [string, Record<string, string>][] = [
      ["no credential", {}],
      ["an empty Authorization header", { authorization: "" }],
      ["a Basic credential", { authorization: `Basic ${btoa(`${owner.key}:`)}` }],
      ["the key without a scheme", { authorization: owner.key }],
      ["Bearer with no credential", { authorization: "Bearer" }],
      ["Bearer with two words", { authorization: `Bearer ${owner.key} extra` }],
      ["an unknown secret key", bearer(`sk_test_${"0".repeat(32)}`)],
      ["an unknown restricted key", bearer(`rk_test_${"A".repeat(32)}`)],
      ["an unknown live key", bearer(`sk_live_${"z".repeat(32)}`)],
      ["an unknown access token", bearer(`at_test_${"b".repeat(40)}`)],
      ["the owner's key with a character changed", bearer(`${owner.key.slice(0, -1)}${owner.key.endsWith("x") ? "y" : "x"}`)],
      ["a key too long", bearer(`${owner.key}0`)],
      ["garbage", bearer("' OR 1=1 --")],
    ];
    await writesNothing("bad credentials", async () => {
      for (const op of guarded()) {
        for (const [name, headers] of cases) expect401(await send(op, fx, headers), `${label(op)} with ${name}`);
      }
    });
  });

  it("a revoked key, and an access token minted from it: 401", async () => {
    const revoked = await createKey(owner, [...SCOPES], "to revoke");
    const token = await mintToken(revoked.secret);
    await warm(revoked.secret);
    const res = await call(`/api/keys/${revoked.id}`, { key: owner.key, method: "DELETE" });
    expect(res.status).toBe(200);
    await writesNothing("revoked key", async () => {
      for (const op of guarded()) {
        for (const [name, credential] of [
          ["revoked key", revoked.secret],
          ["token of a revoked key", token],
        ]) {
          expect401(await send(op, fx, bearer(credential)), `${label(op)} with a ${name}`);
        }
      }
    });
  });

  it("a key revoked in another isolate while this one still caches it: 401 on its very next request", async () => {
    for (const op of guarded()) {
      const key = await createKey(owner, [...SCOPES], `cached ${op.operationId}`);
      await warm(key.secret);
      // As another isolate's DELETE /api/keys/{id} does: this isolate's cache still holds the key.
      await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), key.id).run();
      await writesNothing(label(op), async () => {
        expect401(await send(op, fx, bearer(key.secret)), `${label(op)} with a cached, revoked key`);
      });
    }
    // A key and a full snapshot per operation: the time grows with the document.
  }, 30_000);

  it("an expired access token: 401 token_expired", async () => {
    const token = await mintToken(owner.key);
    await env.DB.prepare("UPDATE access_tokens SET expires_at = ? WHERE hash = ?")
      .bind(new Date(Date.now() - 1000).toISOString(), await sha256Hex(token))
      .run();
    await writesNothing("expired token", async () => {
      for (const op of guarded()) {
        const res = await send(op, fx, bearer(token));
        expect401(res, `${label(op)} with an expired token`);
        expect(res.body.error.code).toBe("token_expired");
      }
    });
  });
});

describe("403 without the operation's scope", () => {
  it("a restricted key, and a token, holding every scope but the resource's own: 403 missing_scope, nothing written", async () => {
    const byResource = new Map<string, { key: string; token: string }>();
    for (const op of scopeGuarded()) {
      const resource = SCOPE_OF[op.operationId].split(":")[0];
      if (!byResource.has(resource)) {
        const scopes = scopesWithout(SCOPE_OF[op.operationId]);
        const key = await createKey(owner, scopes, `without ${resource}`);
        byResource.set(resource, { key: key.secret, token: await mintToken(owner.key, scopes.join(" ")) });
      }
    }
    await writesNothing("missing scope", async () => {
      for (const op of scopeGuarded()) {
        const scope = SCOPE_OF[op.operationId];
        for (const [name, credential] of Object.entries(byResource.get(scope.split(":")[0])!)) {
          const res = await send(op, fx, bearer(credential));
          const context = `${label(op)} with a ${name} lacking ${scope}`;
          expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(403);
          expectErrorShape(res, context);
          expect(res.body.error).toMatchObject({ type: "permission_error", code: "missing_scope" });
          expect(res.body.error.message).toContain(scope);
        }
      }
    });
  });

  it("a read scope never lets a write through", async () => {
    const readers = await createKey(owner, SCOPES.filter((s) => s.endsWith(":read")), "all reads");
    await writesNothing("read scopes", async () => {
      for (const op of scopeGuarded().filter((o) => o.method !== "get")) {
        const res = await send(op, fx, bearer(readers.secret));
        expect(res.status, label(op)).toBe(403);
        expect(res.body.error.code).toBe("missing_scope");
      }
    });
  });

  it("the operation's scope alone is enough to get past the scope check", async () => {
    const scoped = await signup("Scoped");
    const own = await seed(scoped);
    await quiesce();
    const keys = new Map<string, string>();
    for (const op of scopeGuarded()) {
      const scope = SCOPE_OF[op.operationId];
      if (!keys.has(scope)) keys.set(scope, (await createKey(scoped, [scope], scope)).secret);
      const res = await send(op, own, bearer(keys.get(scope)!));
      expect(res.status, `${label(op)} with only ${scope}: ${res.text.slice(0, 200)}`).not.toBe(401);
      if (res.status === 403) expect(res.body.error.code, `${label(op)} with only ${scope}`).not.toBe("missing_scope");
      expect(res.status, `${label(op)} with only ${scope}: ${res.text.slice(0, 200)}`).toBeLessThan(500);
    }
    await quiesce();
  }, 30_000);
});

describe("the processor connection: the live secret key only", () => {
  it("every other credential, whatever its scopes, answers 403 on each of its operations, and nothing is written", async () => {
    const acct = await signup("Live credentials");
    const credentials: [string, string, string][] = [
      ["test secret key", acct.key, "livemode_required"],
      ["test restricted key with every scope", (await createKey(acct, [...SCOPES], "all test")).secret, "livemode_required"],
      ["test access token", await mintToken(acct.key), "livemode_required"],
      ["live restricted key with every scope", (await createKey({ id: acct.id, key: acct.liveKey }, [...SCOPES], "all live")).secret, "live_secret_key_required"],
      ["live access token", await mintToken(acct.liveKey), "live_secret_key_required"],
    ];
    await writesNothing("processor connection", async () => {
      for (const op of guarded().filter((o) => LIVE_SECRET_KEY_ONLY.has(o.operationId))) {
        for (const [name, credential, code] of credentials) {
          const res = await send(op, fx, bearer(credential));
          const context = `${label(op)} with a ${name}`;
          expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(403);
          expectErrorShape(res, context);
          expect(res.body.error, context).toMatchObject({ type: "permission_error", code });
        }
      }
    });
  });
});

describe("the account: a secret key only", () => {
  it("a restricted key or an access token of either mode, whatever its scopes, answers 403 secret_key_required, and nothing is written", async () => {
    const acct = await signup("Account credentials");
    const credentials: [string, string][] = [
      ["test restricted key with every scope", (await createKey(acct, [...SCOPES], "all test")).secret],
      ["test access token", await mintToken(acct.key)],
      ["live restricted key with every scope", (await createKey({ id: acct.id, key: acct.liveKey }, [...SCOPES], "all live")).secret],
      ["live access token", await mintToken(acct.liveKey)],
    ];
    await writesNothing("account", async () => {
      for (const op of guarded().filter((o) => SECRET_KEY_ONLY.has(o.operationId))) {
        for (const [name, credential] of credentials) {
          const res = await send(op, fx, bearer(credential));
          const context = `${label(op)} with a ${name}`;
          expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(403);
          expectErrorShape(res, context);
          expect(res.body.error, context).toMatchObject({ type: "permission_error", code: "secret_key_required" });
        }
      }
    });
  });
});

describe("404 for another tenant's objects", () => {
  it("every operation on an id answers 404 to another account, and changes nothing", async () => {
    const withId = guarded().filter((op) => op.hasId);
    expect(withId.length).toBeGreaterThan(20);
    const token = await mintToken(other.key);
    await writesNothing("other tenant", async () => {
      for (const op of withId) {
        for (const [name, credential] of [
          ["secret key", other.key],
          ["access token", token],
        ]) {
          const res = await send(op, fx, bearer(credential));
          const context = `${label(op)} on the owner's object with the other tenant's ${name}`;
          expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(404);
          expectErrorShape(res, context);
          expect(res.body.error).toMatchObject({ type: "not_found_error", code: "resource_missing" });
          // The answer names the id it was given and nothing of the object.
          expect(res.text).not.toContain("Proof User");
        }
      }
    });
  });

  it("another tenant's ids inside a body answer 404 naming the parameter, and write nothing", async () => {
    const cases: [string, string, unknown, string][] = [
      ["POST", "/payout", payoutBody({ recipient_id: fx.user }, PROOF_CARD.pan, PROOF_CARD.cvv), "recipient_id"],
      ["POST", "/refunds", { payment_id: fx.payment, amount: 1 }, "payment_id"],
      ["POST", "/subscriptions", { user_id: fx.user, plan_id: fxOther.plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) }, "user_id"],
      ["POST", "/subscriptions", { user_id: fxOther.user, plan_id: fx.plan, ...cardFields(PROOF_CARD.pan, PROOF_CARD.cvv) }, "plan_id"],
      ["PUT", `/subscriptions/${fxOther.subscription}`, { plan_id: fx.plan }, "plan_id"],
      ["POST", "/api/users", { name: "Mallory", email: "mallory@example.com", test_clock: fx.clock }, "test_clock"],
      ["POST", `/api/events/${fxOther.event}/redeliver`, { endpoint_id: fx.webhook }, "endpoint_id"],
    ];
    await writesNothing("ids in bodies", async () => {
      for (const [method, path, body, param] of cases) {
        const res = await call(path, { key: other.key, method, body });
        const context = `${method} ${path} with the owner's ${param}`;
        expect(res.status, `${context}: ${res.text.slice(0, 200)}`).toBe(404);
        expectErrorShape(res, context);
        expect(res.body.error).toMatchObject({ type: "not_found_error", code: "resource_missing", param });
      }
    });
  });

  it("lists filtered by, or paged from, another tenant's ids show only the caller's own objects", async () => {
    const lists: [string, string][] = [
      [`/payouts?recipient_id=${fx.user}`, "payouts"],
      [`/payments?user_id=${fx.user}`, "payments"],
      [`/payments?subscription_id=${fx.subscription}`, "payments"],
      [`/refunds?payment_id=${fx.payment}`, "refunds"],
      [`/subscriptions?user_id=${fx.user}`, "subscriptions"],
    ];
    for (const [path] of lists) {
      const res = await call(path, { key: other.key });
      expect(res.status, path).toBe(200);
      expect(res.body.data, path).toEqual([]);
    }
    const ownerIds = new Set(Object.values(fx));
    for (const op of guarded().filter((o) => o.method === "get" && !o.hasId && o.query.includes("ending_before"))) {
      for (const cursor of ["ending_before", "starting_after"]) {
        for (const id of Object.values(fx)) {
          const res = await call(`${op.path}?${cursor}=${encodeURIComponent(id)}&limit=100`, { key: other.key });
          expect(res.status, `${label(op)} ${cursor}=${id}: ${res.text.slice(0, 200)}`).toBeLessThan(500);
          if (res.status === 200) for (const item of res.body.data) expect(ownerIds.has(item.id), `${label(op)} leaked ${item.id}`).toBe(false);
          else expectErrorShape(res, label(op));
        }
      }
    }
  }, 30_000);
});

describe("card data and secrets", () => {
  it("card-bearing requests, failures and deliveries never log a card number, CVV, key, token or webhook secret", async () => {
    const logs = captureLogs();
    const secrets: [string, string][] = [];
    let brokenRequestId = "";
    try {
      const acct = await signup("Logged");
      secrets.push(["secret key", acct.key]);
      const restricted = await createKey(acct, [...SCOPES], "logged");
      secrets.push(["restricted key", restricted.secret]);
      const token = await mintToken(acct.key);
      secrets.push(["access token", token]);
      const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/logged`, events: ["*"] } });
      expect(hook.status).toBe(201);
      secrets.push(["webhook secret", hook.body.secret]);
      const rotated = await call(`/api/webhooks/${hook.body.id}/rotate-secret`, { key: acct.key, method: "POST" });
      secrets.push(["rotated webhook secret", rotated.body.secret]);
      // The receiver fails first, so deliveries are retried and their failures logged.
      receiver.answer(500, 200);

      const user = (await call("/api/users", { key: token, body: { name: "Card Holder", email: "holder@example.com" } })).body;
      const plan = (await call("/subscription-plans", { key: restricted.secret, body: { name: "Logged", price: 10, currency: "usd", interval: "month" } })).body;
      const cvvs = { visa: "831", amex: "5274", declined: "642", bad: "88888" };
      const answers: CallResult[] = [
        await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.visa, cvvs.visa) }),
        await call("/payout", { key: token, body: payoutBody({}, CARDS.amex, cvvs.amex) }),
        await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.processingError, cvvs.visa) }),
        await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.visa, cvvs.bad) }),
        await call("/payout", { key: acct.key, body: payoutBody({}, "4242424242424241", cvvs.visa) }),
        await call("/payout", { key: acct.key, body: payoutBody({ expiration_year: 2001 }, CARDS.mastercard, cvvs.visa) }),
        await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa, cvvs.visa) } }),
        await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.declined, cvvs.declined) } }),
        await call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa, cvvs.bad) } }),
        // A failing enqueue after the commit is logged (with the payout id only).
        await fetchWith({ JOB_QUEUE: failingQueue() }, "/payout", { key: acct.key, json: payoutBody({}, CARDS.mastercard, cvvs.visa) }),
        // Idempotent requests store a fingerprint of the card fields, and replay.
        await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.visa, cvvs.visa), idempotencyKey: "logged-payout" }),
        await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.visa, cvvs.visa), idempotencyKey: "logged-payout" }),
        await call("/payout", { key: acct.key, body: payoutBody({}, CARDS.mastercard, cvvs.visa), idempotencyKey: "logged-payout" }),
      ];
      sentCvvs.add(cvvs.bad);
      const subscription = answers[6].body;
      answers.push(await call(`/subscriptions/${subscription.id}`, { key: acct.key, method: "PUT", body: cardFields(CARDS.mastercard, cvvs.visa) }));
      expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 400, 400, 400, 201, 402, 400, 201, 201, 201, 422, 200]);
      for (const answer of answers) {
        for (const pan of sentPans) expect(answer.text).not.toContain(pan);
        for (const cvv of Object.values(cvvs)) expect(answer.text).not.toMatch(new RegExp(`"${cvv}"`));
      }

      // A server error logs its details: make one (a row the serializer cannot read).
      const rid = (await call("/api/request-id", { key: acct.key, body: { purpose: "to corrupt" } })).body;
      await env.DB.prepare("UPDATE request_ids SET metadata = '{not json' WHERE id = ?").bind(rid.id).run();
      const broken = await call(`/api/request-id/${rid.id}`, { key: token });
      expect(broken.status).toBe(500);
      expectErrorShape(broken, "500");
      brokenRequestId = broken.body.error.request_id;

      // Settle the payouts (a processing error, a decline) and let the deliveries run.
      for (const payout of answers.filter((a) => a.body?.object === "payout")) await runJobs({ kind: "settlePayout", payoutId: payout.body.id });
      await waitFor(() => expect(receiver.received.filter((r) => r.url.endsWith("/logged")).length).toBeGreaterThan(5));
      await quiesce();
    } finally {
      logs.restore();
    }
    expect(logs.lines.length).toBeGreaterThan(0);
    // The server error is logged with its request id (and only there with details).
    expect(logs.lines.some((l) => l.includes(brokenRequestId))).toBe(true);
    logs.expectNoCardData();
    const text = logs.lines.join("\n");
    for (const pan of sentPans) {
      expect(text.includes(pan), "PAN logged").toBe(false);
      expect(text.includes(pan.slice(0, 12)), "PAN prefix logged").toBe(false);
    }
    for (const [name, secret] of secrets) {
      expect(text.includes(secret), `${name} logged`).toBe(false);
      expect(text.includes(secret.slice(-16)), `part of the ${name} logged`).toBe(false);
    }
    expect(text).not.toMatch(/"(card_number|cvv)"\s*:/);
  }, 30_000);
});
