// What the dashboard refuses: forms without the session's CSRF token or from another origin (403
// pages, and nothing changes), a restricted key's pages and actions beyond its scopes (the API's
// 403, shown as "this key cannot …"), and the internal principal keeps the key's guarantees.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { TEST_SHARD, env } from "../support/env";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../src/index";
import { withPrincipal } from "../../src/auth/principal";
import type { Auth } from "../../src/context";
import { type Account, BASE, call, signup } from "../support/http";
import { createKey, createUser, payoutWithoutSettlement } from "../support/fixtures";
import { dashboardFetch, formOf, signIn, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Guards");
  cookie = await signIn(acct.key);
});

describe("CSRF", () => {
  it("refuses a form without the token, with another session's token, or from another origin, with a 403 page; the payout stays pending", async () => {
    const payout = await payoutWithoutSettlement(acct);
    const action = `/dashboard/payouts/${payout.id}/cancel`;
    const list = await dashboardFetch("/dashboard/payouts", { cookie });
    const form = formOf(list.html, action);
    expect(form.csrf_token).toMatch(/^[0-9a-f]{64}$/);

    const { csrf_token: _, ...withoutToken } = form;
    const missing = await dashboardFetch(action, { cookie, form: withoutToken });
    expect(missing.status).toBe(403);
    expect(missing.headers.get("content-type")).toMatch(/^text\/html/);
    expect(textOf(missing.html)).toContain("This form has no CSRF token");

    const otherCookie = await signIn(acct.key);
    const otherPage = await dashboardFetch("/dashboard/payouts", { cookie: otherCookie });
    const wrong = await dashboardFetch(action, { cookie, form: { ...form, csrf_token: formOf(otherPage.html, action).csrf_token } });
    expect(wrong.status).toBe(403);
    expect(textOf(wrong.html)).toContain("does not belong to your session");

    const crossSite = await dashboardFetch(action, { cookie, form, headers: { origin: "https://evil.example" } });
    expect(crossSite.status).toBe(403);
    expect(textOf(crossSite.html)).toContain("sent from another site");

    const noOrigin = await dashboardFetch(action, { cookie, form, headers: { origin: "" } });
    expect(noOrigin.status).toBe(403);

    const sameSite = await dashboardFetch(action, { cookie, form, headers: { origin: "http://127.0.0.1:9999" } });
    expect(sameSite.status).toBe(403);

    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("pending");

    // Sign-in is origin-checked too (no login CSRF).
    const login = await dashboardFetch("/dashboard/sign-in", { form: { api_key: acct.key }, headers: { origin: "https://evil.example" } });
    expect(login.status).toBe(403);
    expect(login.headers.getSetCookie().some((c) => c.startsWith("tender_session="))).toBe(false);

    // The right token, from this origin, works.
    const ok = await dashboardFetch(action, { cookie, form });
    expect(ok.status).toBe(303);
  });

  it("refuses a form that is not form-encoded, and one without its idempotency key", async () => {
    const overview = await dashboardFetch("/dashboard/payouts", { cookie });
    const json = await dashboardFetch("/dashboard/plans", { cookie, form: { csrf_token: "x" }, headers: { "content-type": "application/json" } });
    expect(json.status).toBe(415);
    const token = /name="csrf_token" value="([0-9a-f]{64})"/.exec(overview.html)![1];
    const noKey = await dashboardFetch("/dashboard/plans", { cookie, form: { csrf_token: token, mode: "test", name: "X", currency: "usd", interval: "month", price: "1" } });
    expect(noKey.status).toBe(400);
    expect(textOf(noKey.html)).toContain("no valid idempotency key");
  });
});

describe("a restricted key's session", () => {
  it("sees only what its scopes allow: no link, a 403 page saying what it cannot do, and actions refused by the API", async () => {
    await createUser(acct, { name: "Visible User", email: "visible@example.com" });
    const payout = await payoutWithoutSettlement(acct);
    const reader = await createKey(acct, ["users:read", "payouts:read"], "dash limited");
    const limited = await signIn(reader.secret);

    const overview = await dashboardFetch("/dashboard", { cookie: limited });
    expect(overview.status).toBe(200);
    expect(overview.html).toContain('href="/dashboard/users"');
    expect(overview.html).not.toContain('href="/dashboard/webhooks"');
    expect(overview.html).not.toContain('href="/dashboard/keys"');
    // Pages it cannot read are not in the menu at all (no greyed-out entry, no lock glyph).
    const nav = /<nav aria-label="Dashboard"[^>]*>([\s\S]*?)<\/nav>/.exec(overview.html)![1];
    expect(textOf(nav)).toBe("Overview Payouts Users");
    expect(overview.html).not.toContain("🔒");
    expect(textOf(overview.html)).toContain("This key cannot read payments");
    expect(textOf(overview.html)).toContain("(restricted)");

    const users = await dashboardFetch("/dashboard/users", { cookie: limited });
    expect(textOf(users.html)).toContain("Visible User");

    const webhooks = await dashboardFetch("/dashboard/webhooks", { cookie: limited });
    expect(webhooks.status).toBe(403);
    const text = textOf(webhooks.html);
    expect(text).toContain("This key cannot read webhook endpoints");
    expect(text).toContain("missing_scope");
    expect(text).toContain("webhooks:read");

    for (const path of ["/dashboard/keys", "/dashboard/events", "/dashboard/payments", "/dashboard/subscriptions", "/dashboard/plans", "/dashboard/test-clocks"]) {
      const page = await dashboardFetch(path, { cookie: limited });
      expect(page.status, path).toBe(403);
      expect(textOf(page.html), path).toContain("This key cannot");
    }

    // It can read payouts but not cancel them: no button, and a forged POST meets the API's 403.
    const payouts = await dashboardFetch("/dashboard/payouts", { cookie: limited });
    expect(payouts.status).toBe(200);
    expect(payouts.html).toContain(payout.id);
    expect(payouts.html).not.toContain(`/dashboard/payouts/${payout.id}/cancel`);
    const token = /name="csrf_token" value="([0-9a-f]{64})"/.exec(payouts.html)![1];
    const forced = await dashboardFetch(`/dashboard/payouts/${payout.id}/cancel`, { cookie: limited, form: { csrf_token: token, mode: "test", idempotency_key: `dash_${"a".repeat(32)}` } });
    expect(forced.status).toBe(403);
    expect(textOf(forced.html)).toContain("This key cannot cancel this payout");
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("pending");
  });
});

describe("the internal principal", () => {
  async function asPrincipal(auth: Auth, path: string, init: RequestInit = {}) {
    const ctx = createExecutionContext();
    const response = await worker.fetch(new Request(`${BASE}${path}`, init) as never, withPrincipal(env as never, auth) as never, ctx);
    await waitOnExecutionContext(ctx);
    return { status: response.status, body: (await response.json()) as any };
  }

  it("acts exactly as its key: the key's scopes, its account only, and nothing once the key is revoked", async () => {
    const other = await signup("Dash Other Tenant");
    const otherUser = await createUser(other, { name: "Other", email: "other@example.com" });
    const key = await createKey(acct, ["users:read"], "principal");
    const auth: Auth = { shard: TEST_SHARD, accountId: acct.id, keyId: key.id, mode: "test", livemode: false, scopes: ["users:read"], credential: "restricted_key", apiVersion: "2026-11-01" };
    expect((await asPrincipal(auth, "/api/users")).status).toBe(200);
    expect((await asPrincipal(auth, "/payouts")).status).toBe(403);
    expect((await asPrincipal(auth, `/api/users/${otherUser.id}`)).status).toBe(404);
    await call(`/api/keys/${key.id}`, { method: "DELETE", key: acct.key });
    const revoked = await asPrincipal(auth, "/api/users");
    expect(revoked.status).toBe(401);
    expect(revoked.body.error.code).toBe("api_key_revoked");
  });

  it("cannot be sent over HTTP: a request without a credential is still refused", async () => {
    const res = await call("/api/users", { headers: { "x-dashboard-principal": JSON.stringify({ accountId: acct.id }) } });
    expect(res.status).toBe(401);
  });
});
