// The page frame and the pieces every page shares: navigation (only the pages the acting key's
// scopes can read, in the acting mode; the others are left out, not greyed), the mode switch and
// the coloured banner that says whose data the page shows (test or live), the signed-in key, the
// notice after an action, the API error panel (message, code, request id), empty states, cursor
// pagination links, and the hidden fields every form carries (the session's CSRF token, the mode
// the form was drawn in, and an Idempotency-Key made when the page was rendered).
import type { Context } from "hono";
import type { Child } from "hono/jsx";
import { hasScope, type Scope } from "../auth/scopes";
import { randomToken } from "../lib/crypto";
import type { ApiErrorBody, Page } from "./api";
import type { DashEnv } from "./context";
import { type DashboardSession, MODES, type Mode } from "./session";

export const SCRIPT_PATH = "/dashboard/assets/dashboard.js";
export const STYLES_PATH = "/dashboard/assets/dashboard.css";

interface NavItem {
  path: string;
  label: string;
  scope?: Scope;
  /** Shown only in this mode (test clocks exist in test mode only). */
  mode?: Mode;
  /** Shown only to a secret key's session (a restricted key cannot use it at all). */
  secretKeyOnly?: boolean;
}

export const NAV: NavItem[] = [
  { path: "/dashboard", label: "Overview" },
  { path: "/dashboard/webhooks", label: "Webhooks", scope: "webhooks:read" },
  { path: "/dashboard/events", label: "Events", scope: "events:read" },
  { path: "/dashboard/payouts", label: "Payouts", scope: "payouts:read" },
  { path: "/dashboard/payments", label: "Payments", scope: "payments:read" },
  { path: "/dashboard/subscriptions", label: "Subscriptions", scope: "subscriptions:read" },
  { path: "/dashboard/invoices", label: "Invoices", scope: "invoices:read" },
  { path: "/dashboard/plans", label: "Plans", scope: "plans:read" },
  { path: "/dashboard/coupons", label: "Coupons", scope: "coupons:read" },
  { path: "/dashboard/tax-rates", label: "Tax rates", scope: "tax_rates:read" },
  { path: "/dashboard/credit-notes", label: "Credit notes", scope: "credit_notes:read" },
  { path: "/dashboard/users", label: "Users", scope: "users:read" },
  { path: "/dashboard/keys", label: "API keys", scope: "keys:read" },
  { path: "/dashboard/test-clocks", label: "Test clocks", scope: "test_clocks:read", mode: "test" },
  { path: "/dashboard/processor", label: "Processor", mode: "live", secretKeyOnly: true },
  { path: "/dashboard/settings", label: "Settings", secretKeyOnly: true },
];

/** Where the mode switch may send the browser back to: a page of the menu (an object's page may not exist in the other mode). */
export const isSectionPath = (path: string) => NAV.some((item) => item.path === path);

/** Messages shown after a successful action (the redirect names one; nothing else is echoed). */
export const NOTICES: Record<string, (id: string) => string> = {
  webhook_test_sent: (id) => `Test event ${id} sent.`,
  webhook_enabled: (id) => `Endpoint ${id} enabled.`,
  webhook_rate_limit_set: (id) => `Endpoint ${id}'s rate limit set.`,
  webhook_disabled: (id) => `Endpoint ${id} disabled.`,
  webhook_deleted: (id) => `Endpoint ${id} deleted.`,
  redelivered: (id) => `Event ${id} redelivered: a new attempt is on its way.`,
  recovery_started: (id) => `Recovery ${id} started: the missed events are on their way.`,
  payout_canceled: (id) => `Payout ${id} canceled.`,
  refund_created: (id) => `Refund ${id} initiated.`,
  payment_captured: (id) => `Payment ${id} captured.`,
  payment_canceled: (id) => `Payment ${id} canceled: what was authorized is released.`,
  subscription_canceled: (id) => `Subscription ${id} canceled.`,
  subscription_cancel_scheduled: (id) => `Subscription ${id} will cancel at the end of its period.`,
  plan_created: (id) => `Plan ${id} created.`,
  coupon_created: (id) => `Coupon ${id} created.`,
  coupon_deleted: (id) => `Coupon ${id} deleted: it can no longer be redeemed.`,
  key_revoked: (id) => `Key ${id} revoked.`,
  clock_created: (id) => `Test clock ${id} created.`,
  clock_advanced: (id) => `Test clock ${id} advanced.`,
  live_key_added: (id) => `Live key ${id} added to this session: you are viewing live data.`,
  invoice_paid: (id) => `Invoice ${id} paid.`,
  invoice_voided: (id) => `Invoice ${id} voided: its period will not be charged.`,
  processor_connected: (id) => `Stripe account ${id} connected: live mode charges, refunds and pays out through it.`,
  processor_disconnected: (id) => `Stripe account ${id} disconnected.`,
  settings_saved: () => "Settings saved: invoices finalized from now on print them.",
  test_key_added: (id) => `Test key ${id} added to this session: you are viewing test data.`,
};

export const can = (session: DashboardSession, scope: Scope) => hasScope(session.auth.scopes, scope);

/** The menu: the pages the acting key can read in the acting mode (test clocks in test mode only); the others are not shown. */
export const visibleNav = (session: DashboardSession) =>
  NAV.filter(
    (item) =>
      (!item.mode || session.auth.mode === item.mode) &&
      (!item.scope || can(session, item.scope)) &&
      (!item.secretKeyOnly || session.keys[session.auth.mode]?.restricted === false),
  );

export const MODE_NAMES: Record<Mode, string> = { test: "Test data", live: "Live data" };

/**
 * The mode switch: a two-way toggle, the acting mode pressed. Choosing the other mode acts in it
 * when the session holds its key, and otherwise asks for that key (/dashboard/mode/{mode}).
 */
export function ModeSwitch({ session, back }: { session: DashboardSession; back: string }) {
  return (
    <form method="post" action="/dashboard/mode" class="mode-switch" aria-label="Data shown">
      <input type="hidden" name="csrf_token" value={session.csrfToken} />
      <input type="hidden" name="back" value={back} />
      {MODES.map((mode) => (
        <button
          type="submit"
          name="to"
          value={mode}
          class={`mode-option mode-option-${mode}`}
          aria-pressed={session.auth.mode === mode ? "true" : "false"}
          data-held={session.keys[mode] ? "true" : "false"}
          title={session.auth.mode === mode ? `Showing ${mode} data` : session.keys[mode] ? `View ${mode} data` : `View ${mode} data: asks for a ${mode} key of this account`}
        >
          {MODE_NAMES[mode]}
        </button>
      ))}
    </form>
  );
}

/** One button that switches to `to` (the test clocks page in live mode offers it). */
export function SwitchButton({ session, to, back, children }: { session: DashboardSession; to: Mode; back: string; children?: Child }) {
  return (
    <form method="post" action="/dashboard/mode" class="inline">
      <input type="hidden" name="csrf_token" value={session.csrfToken} />
      <input type="hidden" name="back" value={back} />
      <button type="submit" name="to" value={to} class="primary">
        {children}
      </button>
    </form>
  );
}

/** The coloured strip across the top of every page: whose data it shows. */
export function ModeBanner({ mode }: { mode: Mode }) {
  return (
    <div class={`mode-banner mode-banner-${mode}`} role="note" data-mode={mode}>
      <strong>{MODE_NAMES[mode]}</strong>
      <span>{mode === "test" ? "Objects made with test keys, charged through the sandbox: no real money moves." : "Real customers and real money: actions here move it."}</span>
    </div>
  );
}

export function Layout(props: { title: string; session?: DashboardSession; active?: string; back?: string; notice?: string; children?: Child }) {
  const { session } = props;
  const back = props.back ?? (props.active && isSectionPath(props.active) ? props.active : "/dashboard");
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>{`${props.title} · Tender dashboard`}</title>
        <link rel="icon" href="/favicon.ico" />
        <link rel="stylesheet" href={STYLES_PATH} />
        <script src={SCRIPT_PATH} defer></script>
      </head>
      <body>
        {session ? (
          <div class="shell">
            <aside class="sidebar">
              {/* Below 760 px the menu folds under a "Menu" button: a checkbox and its label, so it works without the script. */}
              <input type="checkbox" id="menu-toggle" class="menu-toggle" aria-label="Show the menu" />
              <div class="brand">
                Tender
                <label for="menu-toggle" class="menu-button" aria-hidden="true">
                  <span class="bars"></span>
                  Menu
                </label>
              </div>
              {/* Outside the folding menu: the switch stays in view on a phone. */}
              <ModeSwitch session={session} back={back} />
              <div class="menu">
                <div class="account">
                  {session.accountName}
                  <br />
                  <span class="mono">{session.keyPrefix}</span>
                  {session.auth.credential === "restricted_key" ? " (restricted)" : ""}
                </div>
                <nav aria-label="Dashboard">
                  {visibleNav(session).map((item) => (
                    <a href={item.path} class={props.active === item.path ? "active" : undefined} aria-current={props.active === item.path ? "page" : undefined}>
                      {item.label}
                    </a>
                  ))}
                </nav>
                <form method="post" action="/dashboard/sign-out">
                  <input type="hidden" name="csrf_token" value={session.csrfToken} />
                  <button type="submit">Sign out</button>
                </form>
              </div>
            </aside>
            <main class="main">
              <ModeBanner mode={session.auth.mode} />
              <div class="topbar">
                <h1>{props.title}</h1>
              </div>
              {session.modeEnded ? (
                <div class="warning" role="alert">
                  The {session.modeEnded} key of this session has been revoked, so the session no longer shows {session.modeEnded} data: it shows {session.auth.mode} data now. Choose {MODE_NAMES[session.modeEnded]} in the switch to
                  enter another {session.modeEnded} key.
                </div>
              ) : null}
              {props.notice ? (
                <div class="notice" role="status">
                  {props.notice}
                </div>
              ) : null}
              {props.children}
            </main>
          </div>
        ) : (
          <main class="signin">{props.children}</main>
        )}
      </body>
    </html>
  );
}

/** Renders a page with its status; pages are never cached (they can show secrets once). */
export async function render(c: Context<DashEnv>, status: number, props: Parameters<typeof Layout>[0]) {
  const done = c.req.method === "GET" ? c.req.query("done") : undefined;
  const id = c.req.query("id") ?? "";
  const notice = props.notice ?? (done && NOTICES[done] && /^[A-Za-z0-9_]{1,120}$/.test(id) ? NOTICES[done](id) : undefined);
  const html = await (<Layout {...props} session={props.session ?? c.var.session} notice={notice} />);
  return c.html(`<!DOCTYPE html>${html}`, status as 200);
}

export function ErrorPanel({ error, status, title }: { error: ApiErrorBody; status: number; title?: string }) {
  return (
    <div class="error" role="alert">
      <h2>{title ?? "The request was refused"}</h2>
      <div>{error.message}</div>
      <dl>
        <dt>Status</dt>
        <dd>{status}</dd>
        <dt>Code</dt>
        <dd class="mono">{error.code}</dd>
        {error.param ? (
          <>
            <dt>Field</dt>
            <dd class="mono">{error.param}</dd>
          </>
        ) : null}
        <dt>Request id</dt>
        <dd class="mono">{error.request_id}</dd>
      </dl>
    </div>
  );
}

/** The title of an API error page: a 403 says plainly what this key cannot do. */
export function errorTitle(status: number, what: string): string {
  if (status === 403) return `This key cannot ${what}`;
  if (status === 404) return "Not found";
  if (status === 409) return `Could not ${what}: the object's state does not allow it`;
  if (status === 401) return "Your key is no longer valid";
  return `Could not ${what}`;
}

/** A table that scrolls inside its card when it is wider than the card (a phone), never the page. */
export function TableWrap({ children }: { children?: Child }) {
  return <div class="table-wrap">{children}</div>;
}

export function Empty({ title, children }: { title: string; children?: Child }) {
  return (
    <div class="empty">
      <strong>{title}</strong>
      {children}
    </div>
  );
}

/** Newer / older links from the API's own cursors (Stripe's rules for has_more in each direction). */
export function Pager({ page, query, base }: { page: Page<{ id: string }>; query: Record<string, string | undefined>; base: string }) {
  if (page.data.length === 0) return null;
  const pagingBack = query.ending_before !== undefined;
  const keep = Object.entries(query).filter(([k, v]) => v !== undefined && v !== "" && k !== "starting_after" && k !== "ending_before" && k !== "done" && k !== "id");
  const link = (cursor: "starting_after" | "ending_before", id: string) => `${base}?${new URLSearchParams([...(keep as [string, string][]), [cursor, id]])}`;
  const newer = pagingBack ? page.has_more : query.starting_after !== undefined;
  const older = pagingBack ? true : page.has_more;
  if (!newer && !older) return null;
  return (
    <div class="pager">
      <span>{newer ? <a href={link("ending_before", page.data[0].id)}>← Newer</a> : null}</span>
      <span>{older ? <a href={link("starting_after", page.data[page.data.length - 1].id)}>Older →</a> : null}</span>
    </div>
  );
}

/** "Show: all a b c" links that filter a list by status; the current one is not a link. */
export function StatusFilter({ statuses, current, base }: { statuses: string[]; current: string | undefined; base: string }) {
  return (
    <>
      Show:{" "}
      {["all", ...statuses].map((s) => (
        <>
          {(current ?? "all") === s ? <strong>{s}</strong> : <a href={s === "all" ? base : `${base}?status=${s}`}>{s}</a>}{" "}
        </>
      ))}
    </>
  );
}

/** The hidden fields of a form: the session's CSRF token, the acting mode, and an Idempotency-Key for this render. */
export function FormFields({ session }: { session: DashboardSession }) {
  return (
    <>
      <input type="hidden" name="csrf_token" value={session.csrfToken} />
      {/* The mode the form was drawn in: a form from a page of the other mode is refused (index.tsx). */}
      <input type="hidden" name="mode" value={session.auth.mode} />
      <input type="hidden" name="idempotency_key" value={`dash_${randomToken(32)}`} />
    </>
  );
}

export function StatusBadge({ status }: { status: string }) {
  const tone =
    ["active", "delivered", "paid", "completed", "succeeded", "ready", "valid", "done"].includes(status) ? "ok"
    : ["pending", "past_due", "partially_refunded", "advancing", "incomplete", "running", "requires_action", "requires_capture"].includes(status) ? "warn"
    : ["failed", "disabled", "canceled", "revoked", "deleted", "incomplete_expired"].includes(status) ? "bad"
    : "";
  return <span class={`badge ${tone}`}>{status}</span>;
}

/** A secret shown once, with a copy button. */
export function SecretOnce({ label, secret }: { label: string; secret: string | null }) {
  if (secret === null) {
    return <p class="muted">The {label} was shown when this form was first submitted and is not shown again. Rotate it or create a new one if it was lost.</p>;
  }
  return (
    <div>
      <p>
        <strong>Copy the {label} now:</strong> it is shown this once and Tender does not keep it where it can show it again.
      </p>
      <div class="secret">
        <code id="secret-value">{secret}</code>
        <button type="button" data-copy={secret}>
          Copy
        </button>
      </div>
    </div>
  );
}
