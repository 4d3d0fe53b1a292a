// The dashboard as deployed (ENVIRONMENT=production): the session cookie is Secure, and a page
// after sign-in works over https with the same-origin form checks.
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
  });
});
