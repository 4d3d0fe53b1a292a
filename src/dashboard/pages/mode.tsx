// The mode switch's pages. POST /dashboard/mode { to, back } acts in `to` when the session holds
// that mode's key; when it holds none it asks for one (GET /dashboard/mode/{mode}), and
// POST /dashboard/mode/{mode} { api_key, back } adds that key to the session
// (src/dashboard/session.ts: same account, that mode, unrevoked) and acts in its mode. Then back
// to `back`, a page of the menu: an object's page would not exist in the other mode. Both POSTs
// carry the session's CSRF token and are origin-checked like every dashboard form (index.tsx);
// they are not bound to the mode they were drawn in, since choosing a mode means the same from
// any page.
import type { Context, Hono } from "hono";
import { field, redirectWithNotice, refuse } from "../actions";
import type { DashEnv } from "../context";
import { ErrorPanel, MODE_NAMES, SwitchButton, isSectionPath, render } from "../layout";
import { type Mode, SignInRefused, addKey, switchMode } from "../session";

const isMode = (value: string): value is Mode => value === "test" || value === "live";
const backOf = (value: string | undefined) => (value && isSectionPath(value) ? value : "/dashboard");

function AddKeyPage(c: Context<DashEnv>, mode: Mode, back: string, status: number, refused?: SignInRefused) {
  const session = c.var.session!;
  const held = session.keys[mode];
  const prefixes = mode === "live" ? "sk_live_…" : "sk_test_…";
  return render(c, status, {
    title: `View ${mode} data`,
    back,
    children: (
      <>
        {refused ? (
          <ErrorPanel status={refused.status} title={`This ${mode} key was refused`} error={{ type: "authentication_error", code: refused.code, message: refused.message, request_id: c.var.requestId }} />
        ) : null}
        <section class="panel">
          {held ? (
            <>
              <p>
                This session holds a {mode} key, <span class="mono">{held.prefix}</span>
                {held.restricted ? " (restricted)" : ""}.
              </p>
              {session.auth.mode === mode ? (
                <p class="muted">It is the key the dashboard acts with now.</p>
              ) : (
                <SwitchButton session={session} to={mode} back={back}>
                  View {mode} data
                </SwitchButton>
              )}
            </>
          ) : (
            <>
              <p>
                This session was opened with a {session.auth.mode} key, so it has no {mode} key yet. Enter a {mode} key of <strong>{session.accountName}</strong>: the {prefixes} key from
                sign-up, or a restricted {mode === "live" ? "rk_live_…" : "rk_test_…"} key, which sees only what its scopes allow.
              </p>
              <p class="muted">
                The dashboard keeps it for this session only, and then acts with it whenever {MODE_NAMES[mode].toLowerCase()} is chosen. Tender stores which key it is, never the key itself; signing
                out forgets it, and revoking it ends {mode} mode in this session at once.
              </p>
              <form method="post" action={`/dashboard/mode/${mode}`}>
                <input type="hidden" name="csrf_token" value={session.csrfToken} />
                <input type="hidden" name="back" value={back} />
                <label>
                  {mode === "live" ? "Live" : "Test"} API key
                  <input name="api_key" type="password" autocomplete="off" spellcheck={false} required placeholder={prefixes} autofocus />
                </label>
                <p>
                  <button class="primary" type="submit">
                    View {mode} data
                  </button>{" "}
                  <a href={back}>Cancel</a>
                </p>
              </form>
            </>
          )}
        </section>
      </>
    ),
  });
}

export function registerModePages(dash: Hono<DashEnv>) {
  dash.get("/mode/:mode", (c) => {
    const mode = c.req.param("mode");
    if (!isMode(mode)) return refuse(c, 404, `There is no ${mode} mode: the modes are test and live.`, "/dashboard", "page_not_found");
    return AddKeyPage(c, mode, backOf(c.req.query("back")), 200);
  });

  dash.post("/mode", async (c) => {
    const session = c.var.session!;
    const to = field(c, "to");
    if (!isMode(to)) return refuse(c, 400, "Choose test or live data.", "/dashboard", "invalid_mode", "to");
    const back = backOf(field(c, "back"));
    if (session.auth.mode === to || (await switchMode(c, session, to))) return c.redirect(back, 303);
    // No key of that mode in this session: ask for one.
    return c.redirect(`/dashboard/mode/${to}?${new URLSearchParams({ back })}`, 303);
  });

  dash.post("/mode/:mode", async (c) => {
    const mode = c.req.param("mode");
    if (!isMode(mode)) return refuse(c, 404, `There is no ${mode} mode: the modes are test and live.`, "/dashboard", "page_not_found");
    const back = backOf(field(c, "back"));
    try {
      const added = await addKey(c, c.var.session!, mode, field(c, "api_key"));
      return redirectWithNotice(c, back, mode === "live" ? "live_key_added" : "test_key_added", added.id);
    } catch (error) {
      if (!(error instanceof SignInRefused)) throw error;
      return AddKeyPage(c, mode, back, error.status, error);
    }
  });
}
