// The dashboard as deployed (ENVIRONMENT=production): the session cookie is Secure, a page after
// sign-in works over https with the same-origin form checks, and the endpoint form applies the
// production URL policy (no private hosts) before anything is sent, beside the URL field.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

const ORIGIN = "https://api.tender.test";

describe("dashboard in production", () => {
  it("sets the session cookie with Secure, HttpOnly and SameSite=Strict", async () => {
    const signup = await exports.default.fetch(`${ORIGIN}/api/accounts`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer test-admin-token" },
      body: JSON.stringify({ name: "Prod Dash", email: "ops@prod.test" }),
    });
    expect(signup.status).toBe(201);
    const key = ((await signup.json()) as { api_key: string }).api_key;
    const signIn = await exports.default.fetch(`${ORIGIN}/dashboard/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN },
      body: new URLSearchParams({ api_key: key }).toString(),
      redirect: "manual",
    });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers.getSetCookie().find((c) => c.startsWith("tender_session="))!;
    expect(cookie).toMatch(/; Secure/i);
    expect(cookie).toMatch(/; HttpOnly/i);
    expect(cookie).toMatch(/; SameSite=Strict/i);
    const overview = await exports.default.fetch(`${ORIGIN}/dashboard`, { headers: { cookie: cookie.split(";")[0] } });
    expect(overview.status).toBe(200);
    expect(overview.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(await overview.text()).toContain("Prod Dash");

    // A loopback receiver is refused beside the URL field, with the URL and the events kept.
    const session = cookie.split(";")[0];
    const webhooks = await (await exports.default.fetch(`${ORIGIN}/dashboard/webhooks`, { headers: { cookie: session } })).text();
    const csrf = /name="csrf_token" value="([0-9a-f]{64})"/.exec(webhooks)![1];
    const idempotency = /name="idempotency_key" value="(dash_[0-9A-Za-z]{32})"/.exec(webhooks)![1];
    const form = new URLSearchParams({ csrf_token: csrf, mode: "test", idempotency_key: idempotency, url: "https://127.0.0.1/hook", ordering: "none" });
    form.append("events", "customer.created");
    const refused = await exports.default.fetch(`${ORIGIN}/dashboard/webhooks`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, cookie: session },
      body: form.toString(),
      redirect: "manual",
    });
    expect(refused.status).toBe(400);
    const html = await refused.text();
    expect(html).toMatch(/<span class="field-error" id="[^"]+" data-problem="url">The URL points to a private, loopback or link-local address/);
    expect(html).toContain('value="https://127.0.0.1/hook"');
    expect(html).toContain('value="customer.created" checked=""');
  });
});
