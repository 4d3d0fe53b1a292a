// The dashboard: HTML pages at /dashboard, served by the same Worker and mounted on the app with
// one call (registerDashboard). Plain Hono routes, not OpenAPI operations, so the API document does
// not list them. Every page and action goes through the API in process (src/dashboard/api.ts) as
// the session's key. This module owns the order of things for every dashboard request: security
// headers (a strict CSP, no framing), the two static files, the session, the form of a POST (its
// origin, CSRF token and the mode it was drawn in), then the pages; errors become pages, never JSON.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { Hono } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import type { AppEnv } from "../context";
import { isDevelopment } from "../env";
import { ApiError } from "../lib/errors";
import { refuse } from "./actions";
import { BOOKMARK_COOKIE, apiClient } from "./api";
import { DASHBOARD_SCRIPT, DASHBOARD_STYLES } from "./assets";
import type { DashEnv } from "./context";
import { CSRF_MESSAGES, csrfRefusal, fromSameOrigin } from "./csrf";
import { ErrorPanel, render } from "./layout";
import { overviewPage } from "./pages/overview";
import { registerEventPages } from "./pages/events";
import { registerInvoicePages } from "./pages/invoices";
import { registerKeyPages } from "./pages/keys";
import { registerModePages } from "./pages/mode";
import { registerPaymentPages } from "./pages/payments";
import { registerPayoutPages } from "./pages/payouts";
import { registerPlanPages } from "./pages/plans";
import { registerCouponPages } from "./pages/coupons";
import { registerTaxRatePages } from "./pages/tax-rates";
import { registerCreditNotePages } from "./pages/credit-notes";
import { registerProcessorPages } from "./pages/processor";
import { registerSettingsPages } from "./pages/settings";
import { registerSignInPages } from "./pages/sign-in";
import { registerSubscriptionPages } from "./pages/subscriptions";
import { registerTestClockPages } from "./pages/test-clocks";
import { registerUserPages } from "./pages/users";
import { registerWebhookPages } from "./pages/webhooks";
import { loadSession } from "./session";

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join("; ");

/** Form bodies larger than this are refused (the largest form, a plan with tiers, is under 2 KB). */
const MAX_FORM_BYTES = 64 * 1024;
const PUBLIC_PATHS = new Set(["/dashboard/sign-in"]);
/** POSTs that mean the same in either mode, so their forms do not say which one they were drawn in. */
const MODELESS_POSTS = new Set(["/dashboard/sign-out", "/dashboard/mode", "/dashboard/mode/test", "/dashboard/mode/live"]);

/**
 * Why a session's form must not act: it was drawn in another mode than the one the session acts in
 * now (switched in another tab, or the mode's key revoked), so it would act on the other mode's data.
 */
function modeRefusal(acting: "test" | "live", drawnIn: unknown): string | null {
  if (drawnIn === acting) return null;
  if (drawnIn !== "test" && drawnIn !== "live") return "This form does not say which mode it was drawn in. Reload the page and submit it again.";
  return `This form was drawn in ${drawnIn} mode, but the dashboard now shows ${acting} data (the mode was switched in another tab, or its key was revoked). Nothing was sent. Reload the page and submit the form again.`;
}

export function registerDashboard(app: OpenAPIHono<AppEnv>) {
  const dash = new Hono<DashEnv>();

  dash.use("*", async (c, next) => {
    await next();
    c.header("Content-Security-Policy", CONTENT_SECURITY_POLICY);
    c.header("X-Frame-Options", "DENY");
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "same-origin");
    if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
  });

  dash.get("/assets/dashboard.js", (c) => {
    c.header("Cache-Control", "public, max-age=300");
    return c.body(DASHBOARD_SCRIPT, 200, { "Content-Type": "text/javascript; charset=utf-8" });
  });
  dash.get("/assets/dashboard.css", (c) => {
    c.header("Cache-Control", "public, max-age=300");
    return c.body(DASHBOARD_STYLES, 200, { "Content-Type": "text/css; charset=utf-8" });
  });

  dash.use("*", async (c, next) => {
    c.set("api", apiClient(app, c));
    c.set("form", {});
    const bookmark = getCookie(c, BOOKMARK_COOKIE);
    if (bookmark && /^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/.test(bookmark)) c.set("bookmark", bookmark);
    c.set("session", await loadSession(c));
    const path = new URL(c.req.url).pathname;
    const isPublic = PUBLIC_PATHS.has(path);
    if (c.req.method === "POST") {
      if (!fromSameOrigin(c)) return refuse(c, 403, CSRF_MESSAGES.cross_origin, "/dashboard", "cross_origin");
      const type = c.req.header("content-type") ?? "";
      if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)\b/i.test(type)) {
        return refuse(c, 415, "Dashboard forms are sent as application/x-www-form-urlencoded.", "/dashboard", "unsupported_media_type");
      }
      if (Number(c.req.header("content-length") ?? 0) > MAX_FORM_BYTES) return refuse(c, 413, "This form is too large.", "/dashboard", "body_too_large");
      c.set("form", (await c.req.parseBody({ all: true })) as Record<string, string | string[]>);
    }
    const session = c.var.session;
    if (!session && !isPublic) {
      if (c.req.method === "GET" || c.req.method === "HEAD") return c.redirect("/dashboard/sign-in", 303);
      return render(c, 401, {
        title: "Signed out",
        children: (
          <div class="panel">
            <ErrorPanel status={401} title="Your session has ended" error={{ type: "authentication_error", code: "session_missing", message: "Sign in again: the session expired, was signed out, or its API key was revoked.", request_id: c.var.requestId }} />
            <a href="/dashboard/sign-in">Sign in</a>
          </div>
        ),
      });
    }
    if (session && c.req.method === "POST") {
      const refusal = csrfRefusal(session.csrfToken, c.var.form.csrf_token);
      if (refusal) return refuse(c, 403, CSRF_MESSAGES[refusal], "/dashboard", refusal);
      const wrongMode = MODELESS_POSTS.has(path) ? null : modeRefusal(session.auth.mode, c.var.form.mode);
      if (wrongMode) return refuse(c, 409, wrongMode, "/dashboard", "mode_mismatch");
    }
    await next();
    // The page after an action reads at least as fresh as the action's write.
    const reached = c.var.bookmark;
    if (reached && reached !== bookmark) setCookie(c, BOOKMARK_COOKIE, reached, { path: "/dashboard", httpOnly: true, sameSite: "Strict", secure: !isDevelopment(c.env), maxAge: 3600 });
  });

  registerSignInPages(dash);
  registerModePages(dash);
  dash.get("/", overviewPage);
  registerWebhookPages(dash);
  registerEventPages(dash);
  registerPayoutPages(dash);
  registerPaymentPages(dash);
  registerSubscriptionPages(dash);
  registerInvoicePages(dash);
  registerPlanPages(dash);
  registerCouponPages(dash);
  registerTaxRatePages(dash);
  registerCreditNotePages(dash);
  registerUserPages(dash);
  registerKeyPages(dash);
  registerTestClockPages(dash);
  registerProcessorPages(dash);
  registerSettingsPages(dash);
  dash.all("*", (c) => refuse(c, 404, `There is no dashboard page at ${new URL(c.req.url).pathname}.`, "/dashboard", "page_not_found"));

  dash.onError((error, c) => {
    if (error instanceof ApiError && error.status < 500) {
      return refuse(c, error.status as 400, error.message, "/dashboard", error.code);
    }
    console.error(JSON.stringify({ request_id: c.var.requestId, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error), stack: (error as Error)?.stack }));
    return render(c, 500, {
      title: "Something went wrong",
      children: (
        <ErrorPanel status={500} title="Something went wrong" error={{ type: "api_error", code: "internal_error", message: "An unexpected error occurred. It has been logged; please retry later.", request_id: c.var.requestId ?? "unknown" }} />
      ),
    });
  });

  app.route("/dashboard", dash as unknown as Hono<AppEnv>);
}
