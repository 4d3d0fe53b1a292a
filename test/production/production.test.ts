// The Worker as deployed (ENVIRONMENT=production): what development relaxes is enforced here.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

async function call(url: string, init: RequestInit = {}) {
  const response = await exports.default.fetch(url, init);
  return { status: response.status, headers: response.headers, body: (await response.json().catch(() => null)) as any };
}

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

async function signup() {
  const res = await call("https://api.tender.test/api/accounts", json({ name: "Acme", email: "ops@acme.test" }, { authorization: "Bearer test-admin-token" }));
  expect(res.status).toBe(201);
  return res.body.api_key as string;
}

describe("production mode", () => {
  it("counts requests with the Rate Limiting binding: the 1001st of a key within the window answers 429, another key's are unaffected", async () => {
    // The binding's local emulation counts in windows aligned to the wall clock: start early in one.
    if (Date.now() % 10_000 > 4_000) await new Promise((resolve) => setTimeout(resolve, 10_000 - (Date.now() % 10_000) + 50));
    const hot = await signup();
    const other = await signup();
    const statuses: number[] = [];
    for (let sent = 0; sent < 1050; sent += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => call("https://api.tender.test/api/users?limit=0", { headers: { authorization: `Bearer ${hot}` } })));
      statuses.push(...batch.map((r) => r.status));
    }
    expect(statuses.filter((s) => s === 400)).toHaveLength(1000);
    expect(statuses.filter((s) => s === 429)).toHaveLength(50);
    const limited = await call("https://api.tender.test/api/users", { headers: { authorization: `Bearer ${hot}` } });
    expect(limited.status).toBe(429);
    expect(limited.body.error).toMatchObject({ type: "rate_limit_error", code: "rate_limited" });
    expect((await call("https://api.tender.test/api/users", { headers: { authorization: `Bearer ${other}` } })).status).toBe(200);
  }, 30_000);

  it("refuses plain http with the error shape, and sends HSTS over https", async () => {
    const plain = await call("http://api.tender.test/health");
    expect(plain.status).toBe(400);
    expect(plain.body.error).toMatchObject({ type: "invalid_request_error", code: "https_required", request_id: expect.any(String) });
    // Asked for, the development-only D1 usage headers are still not sent.
    const secure = await call("https://api.tender.test/health", { headers: { "tender-d1-usage": "on" } });
    expect(secure.status).toBe(200);
    expect(secure.headers.get("strict-transport-security")).toMatch(/max-age=\d+/);
    expect(secure.headers.get("tender-d1-round-trips")).toBeNull();
  });

  it("guards sign-up with ADMIN_TOKEN", async () => {
    const open = await call("https://api.tender.test/api/accounts", json({ name: "Acme", email: "ops@acme.test" }));
    expect(open.status).toBe(401);
    expect(open.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const wrong = await call("https://api.tender.test/api/accounts", json({ name: "Acme", email: "ops@acme.test" }, { authorization: "Bearer nope" }));
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe("invalid_admin_token");
    expect(await signup()).toMatch(/^sk_test_/);
  });

  it("guards an account's move with ADMIN_TOKEN, ignores the development Tender-Shard header, and names no shard in answers", async () => {
    const signup = await call("https://api.tender.test/api/accounts", json({ name: "Placed", email: "placed@acme.test" }, { authorization: "Bearer test-admin-token", "tender-shard": "9" }));
    // Outside development the header chooses nothing (9 is no shard, and sign-up still succeeds) and answers carry no Tender-Shard.
    expect(signup.status).toBe(201);
    expect(signup.headers.get("tender-shard")).toBeNull();
    const path = `https://api.tender.test/api/accounts/${signup.body.id}/move`;
    const open = await call(path, json({ to_shard: 1, drain_seconds: 0 }));
    expect(open.status).toBe(401);
    expect(open.body.error.code).toBe("missing_credential");
    const wrong = await call(path, json({ to_shard: 1, drain_seconds: 0 }, { authorization: "Bearer nope" }));
    expect(wrong.status).toBe(401);
    const shard = Number(signup.body.api_key.charAt(8));
    const moved = await call(path, json({ to_shard: 1 - shard, drain_seconds: 0 }, { authorization: "Bearer test-admin-token" }));
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ from_shard: shard, to_shard: 1 - shard });
    const users = await call("https://api.tender.test/api/users", { headers: { authorization: `Bearer ${signup.body.api_key}` } });
    expect(users.status).toBe(200);
  });

  it("refuses private, loopback and plain-http webhook targets", async () => {
    const key = await signup();
    for (const url of ["http://127.0.0.1:4000/hook", "https://127.0.0.1/hook", "https://localhost/hook", "https://10.0.0.5/hook", "https://169.254.169.254/", "https://[::1]/hook"]) {
      const res = await call("https://api.tender.test/api/webhooks", json({ url, events: ["customer.created"] }, { authorization: `Bearer ${key}` }));
      expect(res.status, url).toBe(400);
      expect(res.body.error).toMatchObject({ code: "url_invalid", param: "url" });
    }
    const ok = await call("https://api.tender.test/api/webhooks", json({ url: "https://hooks.example.com/tender", events: ["customer.created"] }, { authorization: `Bearer ${key}` }));
    expect(ok.status).toBe(201);
  });

  it("refuses IPv6 forms that embed or reach private IPv4, and other non-public IPv6 targets", async () => {
    const key = await signup();
    for (const url of [
      "https://[::ffff:127.0.0.1]/hook",
      "https://[::7f00:1]/hook",
      "https://[::a9fe:a9fe]/latest/meta-data",
      "https://[64:ff9b::7f00:1]/hook",
      "https://[64:ff9b::a9fe:a9fe]/hook",
      "https://[2002:7f00:1::]/hook",
      "https://[2002:a9fe:a9fe::]/hook",
      "https://[2001::1]/hook",
      "https://[fec0::1]/hook",
      "https://[fd00:ec2::254]/hook",
      "https://[fe80::1]/hook",
      "https://0x7f.1/hook",
    ]) {
      const res = await call("https://api.tender.test/api/webhooks", json({ url, events: ["customer.created"] }, { authorization: `Bearer ${key}` }));
      expect(res.status, url).toBe(400);
      expect(res.body.error, url).toMatchObject({
        type: "invalid_request_error",
        code: "url_invalid",
        param: "url",
        message: "The URL points to a private, loopback or link-local address; webhooks go to public hosts only.",
        request_id: expect.any(String),
      });
    }
    const ok = await call("https://api.tender.test/api/webhooks", json({ url: "https://[2606:4700::1111]/tender", events: ["customer.created"] }, { authorization: `Bearer ${key}` }));
    expect(ok.status).toBe(201);
  });
  it("refuses return_url, success_url and cancel_url that are not public https (localhost, loopback, private, credentials) before anything else", async () => {
    const key = await signup();
    const auth = (idempotencyKey: string) => ({ authorization: `Bearer ${key}`, "idempotency-key": idempotencyKey });
    const bad = ["https://localhost/done", "https://127.0.0.1/done", "https://10.0.0.5/done", "https://[::1]/done", "http://localhost:3000/done", "https://user:pw@shop.example.com/done", "javascript:alert(1)", "data:text/html,hi"];
    for (const [i, url] of bad.entries()) {
      const payment = await call(
        "https://api.tender.test/payments",
        json({ amount: 1000, currency: "usd", user_id: "usr_01jd2x4k5m6n7p8q9r0s1t2v3w", payment_method: "pmt_01jd2x4k5m6n7p8q9r0s1t2v3w", return_url: url }, auth(`r34-pay-${i}`)),
      );
      expect(payment.status, url).toBe(400);
      expect(payment.body.error, url).toMatchObject({ code: "url_invalid", param: "return_url" });
      for (const field of ["success_url", "cancel_url"]) {
        const session = await call(
          "https://api.tender.test/checkout/sessions",
          json({ mode: "setup", user_id: "usr_01jd2x4k5m6n7p8q9r0s1t2v3w", success_url: "https://shop.example.com/ok", cancel_url: "https://shop.example.com/cart", [field]: url }, auth(`r34-cs-${field}-${i}`)),
        );
        expect(session.status, `${field} ${url}`).toBe(400);
        expect(session.body.error, `${field} ${url}`).toMatchObject({ param: field });
      }
    }
  });
});
