// Dashboard sign-in: a good key opens a session (cookie attributes), a bad key is refused, a
// revoked key ends its session at once, sign-out ends it too; the CSP and framing headers.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createKey } from "../support/fixtures";
import { expireRecords } from "../../src/jobs/expiry";
import { dashboardFetch, formOf, sessionCookie, signIn, textOf } from "./support";

describe("dashboard sign-in", () => {
  it("a good key opens a session whose cookie is HttpOnly, SameSite=Strict, Path=/dashboard (no Secure in development)", async () => {
    const acct = await signup("Dash Sign-in");
    const page = await dashboardFetch("/dashboard/sign-in", { form: { api_key: acct.key } });
    expect(page.status).toBe(303);
    expect(page.location).toBe("/dashboard");
    const set = page.headers.getSetCookie().find((c) => c.startsWith("tender_session="))!;
    expect(set).toMatch(/^tender_session=[0-9A-Za-z]{43};/);
    expect(set).toMatch(/; HttpOnly/i);
    expect(set).toMatch(/; SameSite=Strict/i);
    expect(set).toMatch(/; Path=\/dashboard/);
    expect(set).not.toMatch(/; Secure/i);
    expect(set).toMatch(/; Max-Age=28800/);
    // Stored only as its hash.
    const token = set.split(";")[0].split("=")[1];
    const rows = await env.DB.prepare("SELECT token_hash, test_key_id, live_key_id, livemode FROM dashboard_sessions WHERE account_id = ?").bind(acct.id).all<{ token_hash: string; test_key_id: string | null; live_key_id: string | null; livemode: number }>();
    expect(rows.results).toHaveLength(1);
    expect(rows.results[0]).toMatchObject({ test_key_id: expect.stringMatching(/^key_/), live_key_id: null, livemode: 0 });
    expect(rows.results[0].token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows.results[0].token_hash).not.toContain(token);

    const overview = await dashboardFetch("/dashboard", { cookie: sessionCookie(page) });
    expect(overview.status).toBe(200);
    expect(overview.html).toMatch(/^<!DOCTYPE html>/);
    expect(textOf(overview.html)).toContain("Dash Sign-in");
    expect(textOf(overview.html)).toContain("Test data");
  });

  it("refuses a wrong key, a malformed one, an access token and an empty field, with a 4xx page", async () => {
    const unknown = await dashboardFetch("/dashboard/sign-in", { form: { api_key: `sk_test_${"x".repeat(32)}` } });
    expect(unknown.status).toBe(401);
    expect(textOf(unknown.html)).toContain("This API key is not valid");
    expect(unknown.headers.getSetCookie().some((c) => c.startsWith("tender_session="))).toBe(false);

    const malformed = await dashboardFetch("/dashboard/sign-in", { form: { api_key: "hello" } });
    expect(malformed.status).toBe(401);
    expect(textOf(malformed.html)).toContain("That is not an API key");

    const token = await dashboardFetch("/dashboard/sign-in", { form: { api_key: `at_test_${"a".repeat(40)}` } });
    expect(token.status).toBe(400);
    expect(textOf(token.html)).toContain("access token");

    const empty = await dashboardFetch("/dashboard/sign-in", { form: { api_key: "  " } });
    expect(empty.status).toBe(400);
    expect(textOf(empty.html)).toContain("Enter an API key");
  });

  it("without a session, pages redirect to sign-in and a POST answers 401", async () => {
    const page = await dashboardFetch("/dashboard/payouts");
    expect(page.status).toBe(303);
    expect(page.location).toBe("/dashboard/sign-in");
    const forged = await dashboardFetch("/dashboard/sign-in", { cookie: "tender_session=" + "A".repeat(43) });
    expect(forged.status).toBe(200);
    const post = await dashboardFetch("/dashboard/payouts/po_x/cancel", { form: { csrf_token: "x" } });
    expect(post.status).toBe(401);
    expect(textOf(post.html)).toContain("Your session has ended");
  });

  it("revoking the key ends its session at once", async () => {
    const acct = await signup("Dash Revoke");
    const reader = await createKey(acct, ["payouts:read", "users:read"], "dash reader");
    const cookie = await signIn(reader.secret);
    expect((await dashboardFetch("/dashboard/users", { cookie })).status).toBe(200);
    const revoked = await call(`/api/keys/${reader.id}`, { method: "DELETE", key: acct.key });
    expect(revoked.status, revoked.text).toBe(200);
    const after = await dashboardFetch("/dashboard/users", { cookie });
    expect(after.status).toBe(303);
    expect(after.location).toBe("/dashboard/sign-in");
    // A revoked key cannot open a new one either.
    const again = await dashboardFetch("/dashboard/sign-in", { form: { api_key: reader.secret } });
    expect(again.status).toBe(401);
  });

  it("an expired session is refused", async () => {
    const acct = await signup("Dash Expiry");
    const cookie = await signIn(acct.key);
    await env.DB.prepare("UPDATE dashboard_sessions SET expires_at = ? WHERE account_id = ?").bind(Date.now() - 1, acct.id).run();
    const page = await dashboardFetch("/dashboard", { cookie });
    expect(page.status).toBe(303);
    expect(page.location).toBe("/dashboard/sign-in");
  });

  it("the cron deletes expired sessions and keeps live ones", async () => {
    const acct = await signup("Dash Sweep");
    await signIn(acct.key);
    await signIn(acct.key);
    const count = async () => (await env.DB.prepare("SELECT COUNT(*) AS n FROM dashboard_sessions WHERE account_id = ?").bind(acct.id).first<{ n: number }>())!.n;
    expect(await count()).toBe(2);
    await env.DB.prepare("UPDATE dashboard_sessions SET expires_at = ? WHERE rowid = (SELECT MIN(rowid) FROM dashboard_sessions WHERE account_id = ?)").bind(Date.now() - 1, acct.id).run();
    const swept = await expireRecords(env, Date.now());
    expect(swept.dashboardSessions).toBeGreaterThanOrEqual(1);
    expect(await count()).toBe(1);
  });

  it("sign-out deletes the session and clears the cookie", async () => {
    const acct = await signup("Dash Sign-out");
    const cookie = await signIn(acct.key);
    const overview = await dashboardFetch("/dashboard", { cookie });
    const out = await dashboardFetch("/dashboard/sign-out", { cookie, form: formOf(overview.html, "/dashboard/sign-out") });
    expect(out.status).toBe(303);
    expect(out.location).toBe("/dashboard/sign-in");
    expect(out.headers.getSetCookie().find((c) => c.startsWith("tender_session="))).toMatch(/Max-Age=0/);
    const count = await env.DB.prepare("SELECT count(*) AS n FROM dashboard_sessions WHERE account_id = ?").bind(acct.id).first<{ n: number }>();
    expect(count!.n).toBe(0);
    expect((await dashboardFetch("/dashboard", { cookie })).status).toBe(303);
  });
});

describe("dashboard headers", () => {
  it("every page carries a strict CSP, no framing, and is not cached; the script is a file of this origin", async () => {
    const acct = await signup("Dash CSP");
    const cookie = await signIn(acct.key);
    for (const path of ["/dashboard/sign-in", "/dashboard", "/dashboard/nope"]) {
      const page = await dashboardFetch(path, { cookie });
      const csp = page.headers.get("content-security-policy")!;
      expect(csp, path).toContain("default-src 'self'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).toContain("form-action 'self'");
      expect(csp, path).not.toContain("unsafe-inline");
      expect(page.headers.get("x-frame-options"), path).toBe("DENY");
      expect(page.headers.get("cache-control"), path).toBe("no-store");
    }
    const overview = await dashboardFetch("/dashboard", { cookie });
    // No inline script or style: scripts come from the Worker's own route.
    expect(overview.html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(overview.html).not.toMatch(/ style="/);
    expect(overview.html).toContain('<script src="/dashboard/assets/dashboard.js" defer');
    const script = await dashboardFetch("/dashboard/assets/dashboard.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(script.html).toContain("data-copy");
    const missing = await dashboardFetch("/dashboard/nope", { cookie });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toMatch(/^text\/html/);
  });

  it("/dashboard is not an operation of the OpenAPI document", async () => {
    const doc = await call("/openapi.json");
    expect(Object.keys(doc.body.paths).filter((p) => p.startsWith("/dashboard"))).toEqual([]);
  });
});
