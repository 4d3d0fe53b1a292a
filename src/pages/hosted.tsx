// The pages Tender serves to a payer rather than to a developer: the 3-D Secure challenge, hosted
// checkout and the hosted invoice. They share what this file holds, so that each is as safe as
// the others:
//
// - No API key and no secret. A page is reached by an unguessable secret in its URL
//   (`newPageSecret` in src/pages/links.ts, ~238 bits), stored with the object it opens and compared
//   in constant time (`pageSecretMatches`); a wrong or missing one answers the same 404 as an unknown object.
// - A Content-Security-Policy of this origin only (`hostedCsp`), plus Stripe.js and its frames on
//   a live page, which runs Stripe.js with the connection's publishable key; no other site may
//   frame a page (`frame-ancestors 'none'`, X-Frame-Options DENY); nothing is cached or sent as a
//   Referer.
// - One stylesheet (`HOSTED_STYLES_PATH`), no inline style or script, readable from 390 px up.
//
// STRIPE_JS_URL, like STRIPE_API_BASE and only in development, points live pages at the stand-in
// for Stripe.js that `npm run fake-stripe` serves, so a browser test can finish a live page.
import type { Context } from "hono";
import type { Child } from "hono/jsx";
import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { processorConnections } from "../db/schema";
export { newPageSecret, pageSecretMatches } from "./links";

export const HOSTED_STYLES_PATH = "/pay/assets/hosted.css";
/** Stripe.js, as Stripe serves it (https://docs.stripe.com/js: always loaded from js.stripe.com). */
export const STRIPE_JS_URL = "https://js.stripe.com/v3/";
/** Where Stripe.js opens its frames (the Payment Element, the 3-D Secure challenge). */
const STRIPE_FRAME_ORIGINS = ["https://js.stripe.com", "https://hooks.stripe.com"];
const STRIPE_CONNECT_ORIGINS = ["https://api.stripe.com"];

/** The publishable key of the account's Stripe connection, which a live page hands Stripe.js; null when it has none. */
export async function publishableKeyOf(db: Db, accountId: string): Promise<string | null> {
  const [row] = await db.select({ key: processorConnections.publishableKey }).from(processorConnections).where(eq(processorConnections.accountId, accountId)).limit(1);
  return row?.key ?? null;
}

/** The Stripe.js a live page loads: STRIPE_JS_URL in development when set, js.stripe.com otherwise. */
export function stripeJsUrl(env: { ENVIRONMENT: string; STRIPE_JS_URL?: string }): string {
  return env.ENVIRONMENT === "development" && env.STRIPE_JS_URL ? env.STRIPE_JS_URL : STRIPE_JS_URL;
}

/**
 * The Content-Security-Policy of a hosted page. `stripe` is the Stripe.js URL a live page loads
 * (its origin may script, frame and be called; Stripe's frames and API too), null on a test page.
 * No `form-action`: a page's own form posts to this origin and is then redirected to the
 * merchant's success or return URL, which Chromium would check against form-action.
 */
export function hostedCsp(stripe: string | null): string {
  const stripeOrigin = stripe ? new URL(stripe).origin : null;
  const scripts = ["'self'", ...(stripeOrigin ? [stripeOrigin] : [])];
  const frames = stripeOrigin ? [...new Set([stripeOrigin, ...STRIPE_FRAME_ORIGINS])] : ["'none'"];
  const connect = ["'self'", ...(stripeOrigin ? [...new Set([stripeOrigin, ...STRIPE_CONNECT_ORIGINS])] : [])];
  return [
    "default-src 'self'",
    `script-src ${scripts.join(" ")}`,
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${connect.join(" ")}`,
    `frame-src ${frames.join(" ")}`,
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The headers every hosted page answers with; `stripe` as for hostedCsp. */
export function hostedHeaders(stripe: string | null): Record<string, string> {
  return {
    "Content-Security-Policy": hostedCsp(stripe),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
  };
}

interface LayoutProps {
  title: string;
  livemode: boolean;
  /** Scripts the page loads, in order (Stripe.js first on a live page, then the page's own). */
  scripts?: string[];
  /** A wider card, for a page of lists (the customer portal). */
  wide?: boolean;
  children?: Child;
}

/** The frame of every hosted page: a test-mode banner where it applies, a card in the middle. */
export function HostedLayout({ title, livemode, scripts = [], wide = false, children }: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="robots" content="noindex" />
        <title>{title}</title>
        <link rel="stylesheet" href={HOSTED_STYLES_PATH} />
        {scripts.map((src) => (
          <script src={src} defer />
        ))}
      </head>
      <body>
        {livemode ? null : <div class="test-banner">Test mode: no real card is charged.</div>}
        <main class={wide ? "card wide" : "card"}>{children}</main>
      </body>
    </html>
  );
}

/**
 * A page that says why it cannot be used (unknown, expired, completed): the status a browser and a
 * test can read (404, 410), and no form.
 */
export function messagePage(c: Context, status: 404 | 410 | 409 | 400, title: string, message: string, livemode = false) {
  return c.html(
    <HostedLayout title={title} livemode={livemode}>
      <h1>{title}</h1>
      <p>{message}</p>
    </HostedLayout>,
    status,
    hostedHeaders(null),
  );
}

export const HOSTED_STYLES = `*,*::before,*::after{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1a1f36;background:#f6f8fa}
.test-banner{background:#ffe8cc;color:#7a3e00;text-align:center;padding:.4rem 1rem;font-size:.875rem}
.card{max-width:28rem;margin:2rem auto;padding:1.5rem;background:#fff;border:1px solid #e3e8ee;border-radius:.5rem}
h1{font-size:1.25rem;margin:0 0 1rem}
h2{font-size:1.05rem;margin:0 0 .5rem}
.pay{margin-top:1.5rem;padding-top:1rem;border-top:1px solid #e3e8ee}
p{margin:.5rem 0}
.amount{font-size:1.75rem;font-weight:600;margin:.25rem 0 1rem}
.muted{color:#697386;font-size:.875rem}
.error{color:#b3093c;margin:.5rem 0}
label{display:block;margin:.75rem 0 .25rem;font-size:.875rem;color:#3c4257}
input{width:100%;padding:.6rem .7rem;font:inherit;border:1px solid #cfd7df;border-radius:.375rem}
.row{display:flex;gap:.75rem}.row>*{flex:1;min-width:0;overflow-wrap:anywhere}
button,.button{display:block;width:100%;margin-top:1rem;padding:.7rem 1rem;font:inherit;font-weight:600;color:#fff;background:#635bff;border:0;border-radius:.375rem;cursor:pointer;text-align:center;text-decoration:none}
button.secondary{background:#fff;color:#3c4257;border:1px solid #cfd7df}
table{width:100%;border-collapse:collapse;font-size:.875rem}td,th{padding:.35rem 0;text-align:left;border-bottom:1px solid #e3e8ee}td.num,th.num{text-align:right}
.card.wide{max-width:44rem}
h2{font-size:1.05rem;margin:1.5rem 0 .5rem}
.notice{background:#e6f6ec;color:#0b5a2a;padding:.5rem .75rem;border-radius:.375rem;margin:.5rem 0}
.item{padding:.75rem 0;border-bottom:1px solid #e3e8ee;overflow-wrap:anywhere}
.line{display:flex;flex-wrap:wrap;justify-content:space-between;gap:.25rem .75rem}
.badge{display:inline-block;margin-left:.5rem;padding:0 .4rem;font-size:.75rem;font-weight:600;color:#3d4eac;background:#e5e9fb;border-radius:.25rem}
.actions{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin-top:.5rem}
.actions form{margin:0}
.actions button,.actions .button{display:inline-block;width:auto;margin:0;padding:.4rem .8rem;font-size:.875rem}
@media (max-width:480px){.card{margin:0;border-radius:0;border-left:0;border-right:0}}
`;

/** Serves the hosted pages' stylesheet. */
export const hostedStyles = (c: Context) =>
  c.body(HOSTED_STYLES, 200, { "Content-Type": "text/css; charset=utf-8", "Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff" });
