// The processor connection (PUT, GET, DELETE /api/processor): only the live secret key manages
// it, Stripe checks the key first, and the secrets never come back: not in an answer, the
// database (only ciphertexts bound to the account and field, under a key id), a log line, an
// event, an idempotency record or the dashboard.
import { env } from "../support/env";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createDb } from "../../src/db/client";
import { openSecrets, readConnection, reencryptConnections, sealedKeyIds } from "../../src/processor/connections";
import { SealedValueInvalid } from "../../src/lib/secret-box";
import { call, expectError, fetchWith, signup, withEnv } from "../support/http";
import { createKey, createPlan, mintToken } from "../support/fixtures";
import { countOf, snapshot } from "../support/db";
import { card } from "../support/cards";
import { type LiveAccount, connectStripe, installFakeStripe, newSecretKey, newSigningSecret, requestsOf } from "../support/live";
import { dashboardFetch, signIn } from "../dashboard/support";

const stripe = installFakeStripe();
afterAll(() => stripe.restore());

/** Every console line written while the test ran. */
const logged: string[] = [];
beforeAll(() => {
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    const original = console[method].bind(console);
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
      original(...args);
    });
  }
});
afterAll(() => vi.restoreAllMocks());

/** Every secret any test sent: none may be found in the database or the log afterwards. */
const secretsSent = new Set<string>();
afterEach(async () => {
  const rows = JSON.stringify(await snapshot());
  for (const secret of secretsSent) {
    expect(rows.includes(secret), "a processor secret in the database").toBe(false);
    expect(rows.includes(secret.slice(8)), "a processor secret's body in the database").toBe(false);
    expect(logged.join("\n").includes(secret), "a processor secret in the log").toBe(false);
  }
});

function body(overrides: Record<string, unknown> = {}) {
  const values = { provider: "stripe", secret_key: newSecretKey(), webhook_secret: newSigningSecret(), connect_webhook_secret: newSigningSecret(), ...overrides };
  for (const field of ["secret_key", "webhook_secret", "connect_webhook_secret"] as const) {
    const value = values[field];
    if (typeof value === "string" && value.length >= 30) secretsSent.add(value);
  }
  return values;
}

const put = (key: string, json: unknown, idempotencyKey?: string) => call("/api/processor", { method: "PUT", key, body: json, idempotencyKey });

let acct: LiveAccount;
beforeAll(async () => {
  acct = await signup("Connected");
});

describe("PUT /api/processor", () => {
  it("checks the key with Stripe and answers the connection, with the secrets nowhere in it", async () => {
    const sent = body();
    const res = await put(acct.liveKey, sent);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      object: "processor_connection",
      provider: "stripe",
      livemode: true,
      processor_account: stripe.fake.platformAccount,
      secret_key_last4: sent.secret_key.slice(-4),
      webhook_url: `http://127.0.0.1:8787/processor-webhooks/stripe/${acct.id}`,
      publishable_key: null,
      raw_card_data: false,
      created_at: expect.stringMatching(/Z$/),
    });
    for (const secret of [sent.secret_key, sent.webhook_secret, sent.connect_webhook_secret]) expect(res.text).not.toContain(secret);
    // Stripe was asked with the key itself: GET /v1/account.
    const check = requestsOf(stripe.fake, "GET /v1/account").at(-1)!;
    expect(check.status).toBe(200);
    expect((await call("/api/processor", { key: acct.liveKey })).body).toEqual(res.body);
  });

  it("stores only ciphertexts, each naming its key id and bound to its account and field", async () => {
    const sent = body();
    expect((await put(acct.liveKey, sent)).status).toBe(200);
    const row = (await readConnection(createDb(env.DB), acct.id))!;
    expect(sealedKeyIds(row)).toEqual(["development", "development", "development"]);
    expect(row.secretKeyEncrypted).toMatch(/^development:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(row.secretKeyLast4).toBe(sent.secret_key.slice(-4));
    expect(await openSecrets(env, row)).toEqual({ secretKey: sent.secret_key, webhookSecret: sent.webhook_secret, connectWebhookSecret: sent.connect_webhook_secret });
    // A ciphertext copied to another field, or another account's row, does not open.
    await expect(openSecrets(env, { ...row, webhookSecretEncrypted: row.secretKeyEncrypted })).rejects.toBeInstanceOf(SealedValueInvalid);
    const other = await signup("Other");
    await expect(openSecrets(env, { ...row, accountId: other.id })).rejects.toBeInstanceOf(SealedValueInvalid);
    // Two sealings of one secret differ (a fresh IV each time).
    expect((await put(acct.liveKey, { ...sent })).status).toBe(200);
    expect((await readConnection(createDb(env.DB), acct.id))!.secretKeyEncrypted).not.toBe(row.secretKeyEncrypted);
  });

  it("replaces the connection (a rolled key), keeping created_at, and drops a connect secret not sent again", async () => {
    const first = await put(acct.liveKey, body());
    const { connect_webhook_secret: _, ...withoutConnect } = body();
    const second = await put(acct.liveKey, withoutConnect);
    expect(second.status, second.text).toBe(200);
    expect(second.body.created_at).toBe(first.body.created_at);
    expect(second.body.secret_key_last4).toBe(withoutConnect.secret_key.slice(-4));
    expect((await openSecrets(env, (await readConnection(createDb(env.DB), acct.id))!)).connectWebhookSecret).toBeNull();
  });

  it("a key Stripe refuses (401) answers 400 processor_key_invalid and stores nothing", async () => {
    const fresh = await signup("Refused key");
    const sent = body();
    stripe.fake.rejectedKeys.add(sent.secret_key);
    const res = await put(fresh.liveKey, sent);
    const error = expectError(res, 400, "invalid_request_error", "processor_key_invalid");
    expect(error.param).toBe("secret_key");
    expect(res.text).not.toContain(sent.secret_key);
    expect(await countOf("SELECT count(*) AS n FROM processor_connections WHERE account_id = ?", fresh.id)).toBe(0);
  });

  it("Stripe not answering the key check answers 500 processor_unavailable and stores nothing", async () => {
    const fresh = await signup("Stripe down");
    // The first try and the connector's three retries (same request) all answer 500.
    stripe.fake.inject({ kind: "status", status: 500, operation: "GET /v1/account", times: 4 });
    const res = await put(fresh.liveKey, body());
    expectError(res, 500, "api_error", "processor_unavailable");
    expect(stripe.fake.pendingFaults()).toEqual([]);
    expect(await countOf("SELECT count(*) AS n FROM processor_connections WHERE account_id = ?", fresh.id)).toBe(0);
  });

  it("a Stripe test key is accepted in development (it moves no real money); production refuses it", async () => {
    const fresh = await signup("Stripe test key");
    const res = await put(fresh.liveKey, body({ secret_key: `sk_test_${"a".repeat(30)}` }));
    expect(res.status, res.text).toBe(200);
  });

  it("refuses malformed fields with their own message, never repeating the value", async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ secret_key: "pk_live_abcdefghijkl" }, "secret_key", "parameter_invalid"],
      [{ secret_key: "sk_live_short" }, "secret_key", "parameter_invalid"],
      [{ webhook_secret: "not-a-secret" }, "webhook_secret", "parameter_invalid"],
      [{ connect_webhook_secret: 42 }, "connect_webhook_secret", "parameter_invalid"],
      [{ provider: "adyen" }, "provider", "parameter_invalid"],
      [{ secret_key: undefined }, "secret_key", "parameter_missing"],
      [{ extra: 1 }, "extra", "parameter_unknown"],
    ];
    for (const [overrides, param, code] of cases) {
      const sent = body(overrides);
      const res = await put(acct.liveKey, sent);
      const error = expectError(res, 400, "invalid_request_error", code);
      expect(error.param, JSON.stringify(overrides)).toBe(param);
      if (param !== "provider" && typeof overrides[param] === "string") expect(error.message).not.toContain(overrides[param]);
    }
  });
});

describe("only the live secret key manages the connection", () => {
  it("test keys, live restricted keys and access tokens answer 403, and change nothing", async () => {
    const fresh = await signup("Credentials");
    const liveRestricted = await createKey({ id: fresh.id, key: fresh.liveKey }, ["users:read"], "live restricted");
    const testRestricted = await createKey(fresh, ["users:read"], "test restricted");
    const credentials: [string, string, string][] = [
      ["test secret key", fresh.key, "livemode_required"],
      ["test restricted key", testRestricted.secret, "livemode_required"],
      ["test access token", await mintToken(fresh.key), "livemode_required"],
      ["live restricted key", liveRestricted.secret, "live_secret_key_required"],
      ["live access token", await mintToken(fresh.liveKey), "live_secret_key_required"],
    ];
    const before = await snapshot();
    const checks = requestsOf(stripe.fake, "GET /v1/account").length;
    for (const [name, key, code] of credentials) {
      for (const [method, json] of [["PUT", body()], ["GET", undefined], ["DELETE", undefined]] as const) {
        const res = await call("/api/processor", { method, key, body: json });
        expect(res.status, `${method} with a ${name}`).toBe(403);
        expect(res.body.error, `${method} with a ${name}`).toMatchObject({ type: "permission_error", code });
      }
    }
    // Refused before Stripe was asked anything.
    expect(requestsOf(stripe.fake, "GET /v1/account").length).toBe(checks);
    const after = await snapshot();
    expect(after.processor_connections).toEqual(before.processor_connections);
  });

  it("a live key of another account never sees this account's connection", async () => {
    const owner = await signup("Owner");
    await connectStripe(owner);
    const stranger = await signup("Stranger");
    expectError(await call("/api/processor", { key: stranger.liveKey }), 404, "not_found_error", "resource_missing");
  });
});

describe("GET and DELETE /api/processor", () => {
  it("before connecting, GET's 404 names the webhook_url to create Stripe's endpoints at (the documented error shape)", async () => {
    const fresh = await signup("Before");
    const res = await call("/api/processor", { key: fresh.liveKey });
    const error = expectError(res, 404, "not_found_error", "resource_missing");
    expect(Object.keys(error).sort()).toEqual(["code", "message", "request_id", "type"]);
    expect(error.message).toContain(`http://127.0.0.1:8787/processor-webhooks/stripe/${fresh.id}:`);
    expect(error.message).toMatch(/Connect one for payouts/);
    // Another account's URL is never named.
    const other = await signup("Other");
    expect((await call("/api/processor", { key: other.liveKey })).body.error.message).not.toContain(fresh.id);
  });

  it("reads, removes, then 404s; a live money request then answers 400 livemode_unavailable", async () => {
    const fresh = await signup("Disconnect");
    const connected = await connectStripe(fresh);
    expect((await call("/api/processor", { key: fresh.liveKey })).body.processor_account).toBe(connected.processorAccount);
    const removed = await call("/api/processor", { method: "DELETE", key: fresh.liveKey });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body).toEqual({ object: "processor_connection", provider: "stripe", livemode: true, processor_account: connected.processorAccount, deleted: true });
    expectError(await call("/api/processor", { key: fresh.liveKey }), 404, "not_found_error", "resource_missing");
    expectError(await call("/api/processor", { method: "DELETE", key: fresh.liveKey }), 404, "not_found_error", "resource_missing");
    const refund = await call("/refunds", { key: fresh.liveKey, body: { payment_id: "pay_01jd2x4k5m6n7p8q9r0s1t2v3w" } });
    const error = expectError(refund, 400, "invalid_request_error", "livemode_unavailable");
    expect(error.message).toMatch(/PUT \/api\/processor/);
  });

  it("refuses to disconnect, or to switch Stripe accounts, while a live subscription depends on it (409 processor_in_use)", async () => {
    const fresh = await signup("In use");
    await connectStripe(fresh);
    const live = { id: fresh.id, key: fresh.liveKey };
    const user = await call("/api/users", { key: fresh.liveKey, body: { name: "Live Customer", email: "live@example.com" } });
    const plan = await createPlan(live);
    const sub = await call("/subscriptions", { key: fresh.liveKey, body: { user_id: user.body.id, plan_id: plan.id, ...card("4242424242424242") } });
    expect(sub.status, sub.text).toBe(201);
    expectError(await call("/api/processor", { method: "DELETE", key: fresh.liveKey }), 409, "invalid_request_error", "processor_in_use");
    // Another Stripe account: the fake answers GET /v1/account with its platform, so a second fake is that other account.
    const other = installFakeStripe();
    try {
      expectError(await put(fresh.liveKey, body()), 409, "invalid_request_error", "processor_in_use");
    } finally {
      installFakeStripe(stripe.fake);
    }
    // The same Stripe account with a rolled key is fine.
    expect((await put(fresh.liveKey, body())).status).toBe(200);
    expect(other.fake.requests.length).toBe(1);
    expect(await countOf("SELECT count(*) AS n FROM processor_connections WHERE account_id = ? AND processor_account = ?", fresh.id, stripe.fake.platformAccount)).toBe(1);
    expect((await call(`/subscriptions/${sub.body.id}`, { key: fresh.liveKey, method: "DELETE" })).status).toBe(200);
    expect((await call("/api/processor", { method: "DELETE", key: fresh.liveKey })).status).toBe(200);
  });
});

describe("the secrets stay secret", () => {
  it("an Idempotency-Key replays the answer; its record holds neither secret, and another secret with the key is refused (422)", async () => {
    const fresh = await signup("Idempotent connect");
    const sent = body();
    const first = await put(fresh.liveKey, sent, "connect-1");
    expect(first.status, first.text).toBe(200);
    const again = await put(fresh.liveKey, sent, "connect-1");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    const record = await env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND key = 'connect-1'").bind(fresh.id).first<Record<string, string>>();
    expect(record).not.toBeNull();
    for (const secret of [sent.secret_key, sent.webhook_secret, sent.connect_webhook_secret]) expect(JSON.stringify(record)).not.toContain(secret);
    const other = await put(fresh.liveKey, { ...sent, secret_key: newSecretKey() }, "connect-1");
    expect(other.status, other.text).toBe(422);
  });

  it("the dashboard, signed in with the live key, shows no secret", async () => {
    const fresh = await signup("Dashboard");
    const sent = body();
    expect((await put(fresh.liveKey, sent)).status).toBe(200);
    const cookie = await signIn(fresh.liveKey);
    for (const page of ["/dashboard", "/dashboard/events", "/dashboard/keys"]) {
      const res = await dashboardFetch(page, { cookie });
      expect(res.status, page).toBe(200);
      for (const secret of [sent.secret_key, sent.webhook_secret, sent.connect_webhook_secret]) expect(res.html, page).not.toContain(secret);
    }
  });
});

describe("rotating PROCESSOR_ENCRYPTION_KEY", () => {
  const key = (text: string) => btoa(text.padEnd(32, "!").slice(0, 32));
  const development = `development:${btoa("tender-development-only-key-0000")}`;

  it("the cron seals old rows under the ring's first key; every key of the ring opens what names it", async () => {
    const fresh = await signup("Rotation");
    const sent = body();
    expect((await put(fresh.liveKey, sent)).status).toBe(200);
    const rotated = withEnv({ PROCESSOR_ENCRYPTION_KEY: `k2026:${key("rotation key 2026")},${development}` });
    // Before the cron: still under the old key, readable by the new ring.
    expect(await openSecrets(rotated, (await readConnection(createDb(env.DB), fresh.id))!)).toMatchObject({ secretKey: sent.secret_key });
    expect((await reencryptConnections(rotated, Date.now())).resealed).toBeGreaterThanOrEqual(1);
    const row = (await readConnection(createDb(env.DB), fresh.id))!;
    expect(sealedKeyIds(row)).toEqual(["k2026", "k2026", "k2026"]);
    expect(await openSecrets(rotated, row)).toEqual({ secretKey: sent.secret_key, webhookSecret: sent.webhook_secret, connectWebhookSecret: sent.connect_webhook_secret });
    // A second run finds nothing left to do.
    expect((await reencryptConnections(rotated, Date.now())).resealed).toBe(0);
    // The ring without k2026 cannot open the row: a clear error naming the key id, never a plaintext.
    await expect(openSecrets(env, row)).rejects.toThrow(/k2026/);
    // Requests that need the key open it with the new ring (a 404 for the unknown payment, not a 500).
    const refund = await fetchWith({ PROCESSOR_ENCRYPTION_KEY: `k2026:${key("rotation key 2026")}` }, "/refunds", {
      key: fresh.liveKey,
      json: { payment_id: "pay_01jd2x4k5m6n7p8q9r0s1t2v3w" },
    });
    expect(refund.status, refund.text).toBe(404);
    // Back to the development key, for the other tests of this file.
    const back = withEnv({ PROCESSOR_ENCRYPTION_KEY: `${development},k2026:${key("rotation key 2026")}` });
    expect((await reencryptConnections(back, Date.now())).resealed).toBeGreaterThanOrEqual(1);
    expect(sealedKeyIds((await readConnection(createDb(env.DB), fresh.id))!)).toEqual(["development", "development", "development"]);
  });

  it("a malformed key ring is a clear 500 that stores nothing", async () => {
    const fresh = await signup("Bad ring");
    for (const ring of ["no-colon", `k1:${btoa("short")}`, `k1:${key("a")},k1:${key("b")}`, "bad id!:AAAA"]) {
      const res = await fetchWith({ PROCESSOR_ENCRYPTION_KEY: ring }, "/api/processor", { method: "PUT", key: fresh.liveKey, json: body() });
      expect(res.status, ring).toBe(500);
      expect(res.body.error.code, ring).toBe("processor_encryption_key_invalid");
    }
    expect(await countOf("SELECT count(*) AS n FROM processor_connections WHERE account_id = ?", fresh.id)).toBe(0);
  });
});
