// Sign-in and sign-out. Sign-in takes an API key (test or live, secret or restricted) and opens a
// session for it, in its mode (src/dashboard/session.ts); the other mode's key is added later from
// the mode switch. The key itself is not kept.
import type { Context, Hono } from "hono";
import { field } from "../actions";
import type { DashEnv } from "../context";
import { ErrorPanel, render } from "../layout";
import { SignInRefused, signIn, signOut } from "../session";

function SignInForm({ error }: { error?: SignInRefused & { requestId?: string }; requestId: string }) {
  return (
    <div class="panel">
      <h1>Tender dashboard</h1>
      <p class="muted">
        Sign in with an API key: the sk_test_… or sk_live_… key from sign-up (POST /api/accounts), or a restricted rk_… key, which sees only what its scopes allow. The dashboard
        shows the data of the key's mode; the switch in the sidebar adds the other mode's key.
      </p>
      <form method="post" action="/dashboard/sign-in">
        <label>
          API key
          <input name="api_key" type="password" autocomplete="off" spellcheck={false} required placeholder="sk_test_…" autofocus />
        </label>
        <p>
          <button class="primary" type="submit">
            Sign in
          </button>
        </p>
      </form>
    </div>
  );
}

export function registerSignInPages(dash: Hono<DashEnv>) {
  dash.get("/sign-in", (c) => {
    if (c.var.session) return c.redirect("/dashboard", 303);
    return render(c, 200, { title: "Sign in", children: <SignInForm requestId={c.var.requestId} /> });
  });
  dash.post("/sign-in", async (c: Context<DashEnv>) => {
    try {
      await signIn(c, field(c, "api_key"));
    } catch (error) {
      if (!(error instanceof SignInRefused)) throw error;
      return render(c, error.status, {
        title: "Sign in",
        session: undefined,
        children: (
          <>
            <ErrorPanel status={error.status} title="Sign-in refused" error={{ type: "authentication_error", code: error.code, message: error.message, request_id: c.var.requestId }} />
            <SignInForm requestId={c.var.requestId} />
          </>
        ),
      });
    }
    return c.redirect("/dashboard", 303);
  });
  dash.post("/sign-out", async (c) => {
    await signOut(c, c.var.session!);
    return c.redirect("/dashboard/sign-in", 303);
  });
}
