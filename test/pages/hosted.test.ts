// What every hosted page shares (src/pages/hosted.tsx): its stylesheet, its Content-Security-Policy
// (this origin only on a test page; Stripe.js and its frames on a live one; never framed), the
// development-only STRIPE_JS_URL, and the constant-time secret comparison.
import { describe, expect, it } from "vitest";
import { HOSTED_STYLES_PATH, hostedCsp, hostedHeaders, pageSecretMatches, stripeJsUrl, newPageSecret } from "../../src/pages/hosted";
import { call } from "../support/http";

describe("hosted pages' shared frame", () => {
  it("serves the stylesheet as CSS from this origin", async () => {
    const res = await call(HOSTED_STYLES_PATH);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/css/);
    expect(res.text).toContain(".card{");
  });

  it("allows only this origin on a test page and is never framed", () => {
    const csp = hostedCsp(null);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("frame-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("stripe");
    expect(hostedHeaders(null)["X-Frame-Options"]).toBe("DENY");
    expect(hostedHeaders(null)["Cache-Control"]).toBe("no-store");
  });

  it("adds Stripe.js's origin and frames on a live page, and nothing else", () => {
    const csp = hostedCsp("https://js.stripe.com/v3/");
    expect(csp).toContain("script-src 'self' https://js.stripe.com;");
    expect(csp).toContain("frame-src https://js.stripe.com https://hooks.stripe.com;");
    expect(csp).toContain("connect-src 'self' https://js.stripe.com https://api.stripe.com;");
    const local = hostedCsp("http://127.0.0.1:12111/v3/");
    expect(local).toContain("script-src 'self' http://127.0.0.1:12111;");
  });

  it("honours STRIPE_JS_URL in development only", () => {
    expect(stripeJsUrl({ ENVIRONMENT: "development", STRIPE_JS_URL: "http://127.0.0.1:12111/v3/" })).toBe("http://127.0.0.1:12111/v3/");
    expect(stripeJsUrl({ ENVIRONMENT: "production", STRIPE_JS_URL: "http://127.0.0.1:12111/v3/" })).toBe("https://js.stripe.com/v3/");
    expect(stripeJsUrl({ ENVIRONMENT: "development", STRIPE_JS_URL: "" })).toBe("https://js.stripe.com/v3/");
  });

  it("compares page secrets exactly, and refuses a missing one", () => {
    const secret = newPageSecret();
    expect(secret).toMatch(/^[0-9A-Za-z]{40}$/);
    expect(newPageSecret()).not.toBe(secret);
    expect(pageSecretMatches(secret, secret)).toBe(true);
    expect(pageSecretMatches(secret, `${secret.slice(0, 39)}x`)).toBe(false);
    expect(pageSecretMatches(secret, secret.slice(0, 20))).toBe(false);
    expect(pageSecretMatches(secret, null)).toBe(false);
    expect(pageSecretMatches(null, secret)).toBe(false);
  });
});
