// The dashboard's mode switch: a session holds one key per mode (signed in with one, the other
// added from the switch), and the switch chooses which one acts. Both keys belong to one account;
// revoking either ends its mode in the session at once; the switch is CSRF- and origin-checked; a
// form drawn in one mode never acts in the other; each key keeps its own scopes; every page and
// figure shows the acting mode's objects only; migration 0012 keeps the sessions open before it.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "../support/env";
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createKey, createUser, mintToken, payoutWithoutSettlement } from "../support/fixtures";
import { copyAsLive, seedBothModes, type Mode, type TwoModes } from "../support/modes";
import { quiesce } from "../support/db";
import { type Page, dashboardFetch, formOf, signIn, submit, textOf } from "./support";

type Live = Account & { liveKey: string };

/** The mode the page's banner says it shows, and the mode pressed in the switch: they must agree. */
function modeShown(page: Page): Mode {
  const banner = /<div class="mode-banner mode-banner-(test|live)" role="note" data-mode="(test|live)">/.exec(page.html);
  expect(banner, "the page has a mode banner").not.toBeNull();
  const pressed = [...page.html.matchAll(/<button type="submit" name="to" value="(test|live)"[^>]*aria-pressed="true"/g)].map((m) => m[1]);
  expect(pressed, "one mode is pressed in the switch").toEqual([banner![2]]);
  return banner![2] as Mode;
}

/** Chooses `to` in the switch of `from` (a page), as a click would. */
async function choose(cookie: string, to: Mode, from = "/dashboard"): Promise<Page> {
  const loaded = await dashboardFetch(from, { cookie });
  expect(loaded.status, loaded.html.slice(0, 300)).toBe(200);
  return dashboardFetch("/dashboard/mode", { cookie, form: { ...formOf(loaded.html, "/dashboard/mode"), to } });
}

/** Chooses `mode`, is asked for its key, and enters `key`. Returns the answer to the key's form. */
async function addKey(cookie: string, mode: Mode, key: string, from = "/dashboard"): Promise<Page> {
  const chosen = await choose(cookie, mode, from);
  expect(chosen.status).toBe(303);
  expect(chosen.location).toBe(`/dashboard/mode/${mode}?${new URLSearchParams({ back: from })}`);
  const asked = await dashboardFetch(chosen.location!, { cookie });
  expect(asked.status).toBe(200);
  expect(textOf(asked.html)).toContain(`it has no ${mode} key yet`);
  return dashboardFetch(`/dashboard/mode/${mode}`, { cookie, form: { ...formOf(asked.html, `/dashboard/mode/${mode}`), api_key: key } });
}

/** The stored row of the session whose cookie this is (looked up by the token's SHA-256). */
async function sessionRow(cookie: string) {
  const token = cookie.split("=")[1];
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  const hash = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const row = await env.DB.prepare("SELECT * FROM dashboard_sessions WHERE token_hash = ?").bind(hash).first<Record<string, unknown>>();
  expect(row, "the session's row").not.toBeNull();
  return row!;
}

const keyIdOf = async (key: string) => (await call("/api/keys?limit=100", { key })).body.data.find((k: { prefix: string }) => key.startsWith(k.prefix.split("…")[0]) && key.endsWith(k.prefix.split("…")[1])).id as string;

describe("adding the other mode's key from the switch", () => {
  it("test key first: View live data asks for a live key, keeps it, and the switch toggles which key acts", async () => {
    const acct = await signup("Switch Test First");
    await createUser(acct, { name: "Tess Testmode", email: "tess@example.com" });
    await createUser({ id: acct.id, key: acct.liveKey }, { name: "Liv Livemode", email: "liv@example.com" });
    const cookie = await signIn(acct.key);

    const first = await dashboardFetch("/dashboard/users", { cookie });
    expect(modeShown(first)).toBe("test");
    expect(textOf(first.html)).toContain("Test data");
    expect(textOf(first.html)).toContain("Tess Testmode");
    expect(textOf(first.html)).not.toContain("Liv Livemode");
    // The switch says it will ask for a live key: the session holds none yet.
    expect(first.html).toMatch(/value="live"[^>]*data-held="false"/);

    const added = await addKey(cookie, "live", acct.liveKey, "/dashboard/users");
    expect(added.status, added.html.slice(0, 500)).toBe(303);
    expect(added.location).toMatch(/^\/dashboard\/users\?done=live_key_added&id=key_\w+$/);
    const live = await dashboardFetch(added.location!, { cookie });
    expect(modeShown(live)).toBe("live");
    expect(textOf(live.html)).toContain("Live data");
    expect(textOf(live.html)).toContain("added to this session: you are viewing live data");
    expect(textOf(live.html)).toContain("Liv Livemode");
    expect(textOf(live.html)).not.toContain("Tess Testmode");
    expect(live.html).toContain(acct.liveKey.slice(0, 12));

    // Stored: which keys the session holds and which acts; the keys themselves nowhere.
    const row = await sessionRow(cookie);
    expect(row).toMatchObject({ test_key_id: await keyIdOf(acct.key), live_key_id: await keyIdOf(acct.liveKey), livemode: 1 });
    expect(JSON.stringify(row)).not.toContain(acct.key.slice(8));
    expect(JSON.stringify(row)).not.toContain(acct.liveKey.slice(8));
    expect(JSON.stringify(row)).not.toContain(cookie.split("=")[1]);

    // Back and forth, no key asked again: each choice lands on the page it was made from.
    const toTest = await choose(cookie, "test", "/dashboard/users");
    expect(toTest.status).toBe(303);
    expect(toTest.location).toBe("/dashboard/users");
    const test = await dashboardFetch("/dashboard/users", { cookie });
    expect(modeShown(test)).toBe("test");
    expect(textOf(test.html)).toContain("Tess Testmode");
    expect(test.html).toMatch(/value="live"[^>]*data-held="true"/);
    const toLive = await choose(cookie, "live", "/dashboard/users");
    expect(toLive.location).toBe("/dashboard/users");
    expect(modeShown(await dashboardFetch("/dashboard/users", { cookie }))).toBe("live");
    expect((await sessionRow(cookie)).livemode).toBe(1);
  });

  it("live key first: View test data asks for a test key the same way", async () => {
    const acct = await signup("Switch Live First");
    const cookie = await signIn(acct.liveKey);
    expect(modeShown(await dashboardFetch("/dashboard", { cookie }))).toBe("live");
    const added = await addKey(cookie, "test", acct.key);
    expect(added.status, added.html.slice(0, 500)).toBe(303);
    expect(added.location).toMatch(/^\/dashboard\?done=test_key_added&id=key_\w+$/);
    expect(modeShown(await dashboardFetch("/dashboard", { cookie }))).toBe("test");
    expect(await sessionRow(cookie)).toMatchObject({ test_key_id: await keyIdOf(acct.key), live_key_id: await keyIdOf(acct.liveKey), livemode: 0 });
  });

  it("refuses another account's key, a key of the wrong mode, an unknown, revoked or malformed key and an access token, and adds nothing", async () => {
    const acct = await signup("Switch Refusals");
    const stranger = await signup("Switch Stranger");
    const revoked = await createKey({ id: acct.id, key: acct.liveKey }, ["users:read"], "revoked live");
    expect((await call(`/api/keys/${revoked.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    const cookie = await signIn(acct.key);
    const before = await sessionRow(cookie);

    const cases: [string, number, string, string][] = [
      [stranger.liveKey, 403, "key_account_mismatch", "belongs to another account"],
      [acct.key, 400, "key_mode_mismatch", "That is a test key"],
      [`sk_live_${"Z".repeat(32)}`, 401, "invalid_api_key", "unknown or has been revoked"],
      [revoked.secret, 401, "invalid_api_key", "unknown or has been revoked"],
      ["sk_live_short", 401, "invalid_api_key", "That is not an API key"],
      [await mintToken(acct.liveKey), 400, "api_key_required", "access token"],
      ["", 400, "parameter_missing", "Enter an API key"],
    ];
    for (const [key, status, code, message] of cases) {
      const refused = await addKey(cookie, "live", key);
      expect(refused.status, code).toBe(status);
      const text = textOf(refused.html);
      expect(text, code).toContain(code);
      expect(text, code).toContain(message);
      // The key typed is not echoed back.
      if (key) expect(refused.html, code).not.toContain(key);
      // The form is drawn again, the session still in test mode.
      expect(refused.html).toContain('action="/dashboard/mode/live"');
      expect(modeShown(refused)).toBe("test");
      expect(await sessionRow(cookie), code).toEqual(before);
    }
    // The other account's data never shows.
    expect(modeShown(await dashboardFetch("/dashboard", { cookie }))).toBe("test");
  });

  it("a mode whose key the session holds is not replaced: the key page offers the switch, a second key is refused", async () => {
    const acct = await signup("Switch Held");
    const second = await createKey({ id: acct.id, key: acct.liveKey }, ["users:read"], "second live");
    const cookie = await signIn(acct.key);
    expect((await addKey(cookie, "live", acct.liveKey)).status).toBe(303);
    await choose(cookie, "test");
    const page = await dashboardFetch("/dashboard/mode/live", { cookie });
    expect(textOf(page.html)).toContain(`This session holds a live key, ${acct.liveKey.slice(0, 12)}`);
    expect(page.html).not.toContain('action="/dashboard/mode/live"');
    const again = await dashboardFetch("/dashboard/mode/live", { cookie, form: { ...formOf(page.html, "/dashboard/mode"), api_key: second.secret } });
    expect(again.status).toBe(409);
    expect(textOf(again.html)).toContain("mode_key_held");
    expect((await sessionRow(cookie)).live_key_id).toBe(await keyIdOf(acct.liveKey));
  });

  it("only the two modes exist, and `back` only names a page of the menu", async () => {
    const acct = await signup("Switch Inputs");
    const cookie = await signIn(acct.key);
    const overview = await dashboardFetch("/dashboard", { cookie });
    const form = formOf(overview.html, "/dashboard/mode");
    const bad = await dashboardFetch("/dashboard/mode", { cookie, form: { ...form, to: "staging" } });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("invalid_mode");
    expect((await dashboardFetch("/dashboard/mode/staging", { cookie })).status).toBe(404);
    for (const back of ["https://evil.example/", "//evil.example", "/dashboard/webhooks/whk_x", "/dashboard/../x"]) {
      const moved = await dashboardFetch("/dashboard/mode", { cookie, form: { ...form, to: "live", back } });
      expect(moved.location, back).toBe(`/dashboard/mode/live?${new URLSearchParams({ back: "/dashboard" })}`);
    }
  });
});

describe("revoking a key ends its mode in the session at once", () => {
  let acct: Live;
  let liveReader: { id: string; secret: string };
  let testReader: { id: string; secret: string };
  beforeAll(async () => {
    acct = await signup("Switch Revocation");
    await createUser(acct, { name: "Tess Revocation", email: "tess.r@example.com" });
    await createUser({ id: acct.id, key: acct.liveKey }, { name: "Liv Revocation", email: "liv.r@example.com" });
  });

  /** A session holding a restricted test key and a restricted live key (so the secret keys can revoke them), acting in `acting`. */
  async function twoKeySession(acting: Mode) {
    testReader = await createKey(acct, ["users:read", "plans:read", "plans:write"], "test reader");
    liveReader = await createKey({ id: acct.id, key: acct.liveKey }, ["users:read", "plans:read", "plans:write"], "live reader");
    const cookie = await signIn(testReader.secret);
    expect((await addKey(cookie, "live", liveReader.secret)).status).toBe(303);
    if (acting === "test") await choose(cookie, "test");
    return cookie;
  }

  it("the acting live key revoked: the next page shows test data, says why, and live data needs a key again", async () => {
    const cookie = await twoKeySession("live");
    const drawnInLive = await dashboardFetch("/dashboard/plans", { cookie });
    expect(modeShown(drawnInLive)).toBe("live");
    expect((await call(`/api/keys/${liveReader.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);

    const after = await dashboardFetch("/dashboard/users", { cookie });
    expect(after.status).toBe(200);
    expect(modeShown(after)).toBe("test");
    const text = textOf(after.html);
    expect(text).toContain("The live key of this session has been revoked");
    expect(text).toContain("Tess Revocation");
    expect(text).not.toContain("Liv Revocation");
    // Said once: the session now acts in test mode.
    expect(textOf((await dashboardFetch("/dashboard/users", { cookie })).html)).not.toContain("has been revoked");
    expect(await dashboardFetch("/dashboard/users", { cookie }).then(modeShown)).toBe("test");
    // Live data asks for a key again.
    expect((await choose(cookie, "live")).location).toBe(`/dashboard/mode/live?${new URLSearchParams({ back: "/dashboard" })}`);
  });

  it("a form drawn in live mode before the live key was revoked does not act in test mode", async () => {
    const cookie = await twoKeySession("live");
    const drawnInLive = await dashboardFetch("/dashboard/plans", { cookie });
    expect((await call(`/api/keys/${liveReader.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    const sent = await dashboardFetch("/dashboard/plans", { cookie, form: { ...formOf(drawnInLive.html, "/dashboard/plans"), name: "Made after revocation", currency: "usd", interval: "month", price: "5" } });
    expect(sent.status).toBe(409);
    expect(textOf(sent.html)).toContain("mode_mismatch");
    expect(textOf(sent.html)).toContain("This form was drawn in live mode, but the dashboard now shows test data");
    for (const key of [acct.key, acct.liveKey]) {
      expect(((await call("/subscription-plans?limit=100", { key })).body.data as { name: string }[]).map((p) => p.name)).not.toContain("Made after revocation");
    }
  });

  it("the other mode's key revoked: the acting mode goes on, and choosing the other mode asks for a key", async () => {
    const cookie = await twoKeySession("live");
    expect((await call(`/api/keys/${testReader.id}`, { method: "DELETE", key: acct.key })).status).toBe(200);
    const page = await dashboardFetch("/dashboard/users", { cookie });
    expect(modeShown(page)).toBe("live");
    expect(textOf(page.html)).not.toContain("has been revoked");
    expect(page.html).toMatch(/value="test"[^>]*data-held="false"/);
    expect((await choose(cookie, "test", "/dashboard/users")).location).toBe(`/dashboard/mode/test?${new URLSearchParams({ back: "/dashboard/users" })}`);
    // A revoked key's mode can take a new key.
    const fresh = await createKey(acct, ["users:read"], "fresh test");
    expect((await addKey(cookie, "test", fresh.secret, "/dashboard/users")).status).toBe(303);
    expect(modeShown(await dashboardFetch("/dashboard/users", { cookie }))).toBe("test");
  });

  it("the acting test key revoked while live is held: the session moves to live", async () => {
    const cookie = await twoKeySession("test");
    expect((await call(`/api/keys/${testReader.id}`, { method: "DELETE", key: acct.key })).status).toBe(200);
    const page = await dashboardFetch("/dashboard/users", { cookie });
    expect(modeShown(page)).toBe("live");
    expect(textOf(page.html)).toContain("The test key of this session has been revoked");
    expect(textOf(page.html)).toContain("Liv Revocation");
    expect(textOf(page.html)).not.toContain("Tess Revocation");
  });

  it("both keys revoked: the session ends", async () => {
    const cookie = await twoKeySession("live");
    expect((await call(`/api/keys/${liveReader.id}`, { method: "DELETE", key: acct.liveKey })).status).toBe(200);
    expect((await call(`/api/keys/${testReader.id}`, { method: "DELETE", key: acct.key })).status).toBe(200);
    const page = await dashboardFetch("/dashboard/users", { cookie });
    expect(page.status).toBe(303);
    expect(page.location).toBe("/dashboard/sign-in");
  });

  it("a key of another account or of the wrong mode written into the session row counts as no key", async () => {
    const stranger = await signup("Switch Row Stranger");
    const cookie = await signIn(acct.key);
    const tokenHash = (await sessionRow(cookie)).token_hash as string;
    expect(tokenHash).toMatch(/^[0-9a-f]{64}$/);
    // Not reachable through the dashboard (addKey refuses both): the lookup refuses them as well.
    await env.DB.prepare("UPDATE dashboard_sessions SET live_key_id = ? WHERE token_hash = ?").bind(await keyIdOf(stranger.liveKey), tokenHash).run();
    expect((await choose(cookie, "live")).location).toMatch(/^\/dashboard\/mode\/live\?/);
    await env.DB.prepare("UPDATE dashboard_sessions SET live_key_id = ?, livemode = 1 WHERE token_hash = ?").bind(await keyIdOf(acct.key), tokenHash).run();
    expect(modeShown(await dashboardFetch("/dashboard", { cookie }))).toBe("test");
    await env.DB.prepare("UPDATE dashboard_sessions SET test_key_id = ? WHERE token_hash = ?").bind(await keyIdOf(stranger.key), tokenHash).run();
    expect((await dashboardFetch("/dashboard", { cookie })).status).toBe(303);
  });
});

describe("the switch is a form like the others", () => {
  it("refuses it without the session's CSRF token, with another session's, or from another origin; the mode stays", async () => {
    const acct = await signup("Switch CSRF");
    const cookie = await signIn(acct.key);
    expect((await addKey(cookie, "live", acct.liveKey)).status).toBe(303);
    await choose(cookie, "test");
    const overview = await dashboardFetch("/dashboard", { cookie });
    const form: Record<string, string> = { ...formOf(overview.html, "/dashboard/mode"), to: "live" };
    const other = formOf((await dashboardFetch("/dashboard", { cookie: await signIn(acct.key) })).html, "/dashboard/mode");

    const { csrf_token: _, ...withoutToken } = form;
    const refusals: [Page, string][] = [
      [await dashboardFetch("/dashboard/mode", { cookie, form: withoutToken }), "This form has no CSRF token"],
      [await dashboardFetch("/dashboard/mode", { cookie, form: { ...form, csrf_token: other.csrf_token } }), "does not belong to your session"],
      [await dashboardFetch("/dashboard/mode", { cookie, form, headers: { origin: "https://evil.example" } }), "sent from another site"],
      [await dashboardFetch("/dashboard/mode", { cookie, form, headers: { origin: "" } }), "sent from another site"],
    ];
    for (const [page, message] of refusals) {
      expect(page.status).toBe(403);
      expect(textOf(page.html)).toContain(message);
    }
    expect((await sessionRow(cookie)).livemode).toBe(0);
    expect(modeShown(await dashboardFetch("/dashboard", { cookie }))).toBe("test");
    expect((await dashboardFetch("/dashboard/mode", { cookie, form })).location).toBe("/dashboard");
    expect((await sessionRow(cookie)).livemode).toBe(1);
  });

  it("refuses a key added from another origin or without the token: no key is added", async () => {
    const acct = await signup("Switch CSRF Add");
    const cookie = await signIn(acct.key);
    const asked = await dashboardFetch("/dashboard/mode/live", { cookie });
    const form: Record<string, string> = { ...formOf(asked.html, "/dashboard/mode/live"), api_key: acct.liveKey };
    const crossSite = await dashboardFetch("/dashboard/mode/live", { cookie, form, headers: { origin: "https://evil.example" } });
    expect(crossSite.status).toBe(403);
    const { csrf_token: _, ...withoutToken } = form;
    expect((await dashboardFetch("/dashboard/mode/live", { cookie, form: withoutToken })).status).toBe(403);
    expect(await sessionRow(cookie)).toMatchObject({ live_key_id: null, livemode: 0 });
    // Without a session, no key can be added to one.
    expect((await dashboardFetch("/dashboard/mode/live", { form })).status).toBe(401);
  });

  it("a form drawn in one mode is refused once the session acts in the other (another tab), and one that does not say its mode too", async () => {
    const acct = await signup("Switch Tabs");
    const cookie = await signIn(acct.key);
    expect((await addKey(cookie, "live", acct.liveKey)).status).toBe(303);
    await choose(cookie, "test");
    const drawnInTest = await dashboardFetch("/dashboard/plans", { cookie });
    const form: Record<string, string> = { ...formOf(drawnInTest.html, "/dashboard/plans"), name: "Meant for test", currency: "usd", interval: "month", price: "5" };
    expect(form.mode).toBe("test");
    await choose(cookie, "live");
    const sent = await dashboardFetch("/dashboard/plans", { cookie, form });
    expect(sent.status).toBe(409);
    expect(textOf(sent.html)).toContain("This form was drawn in test mode, but the dashboard now shows live data");
    const { mode: _, ...unsaid } = form;
    const noMode = await dashboardFetch("/dashboard/plans", { cookie, form: unsaid });
    expect(noMode.status).toBe(409);
    expect(textOf(noMode.html)).toContain("does not say which mode it was drawn in");
    for (const key of [acct.key, acct.liveKey]) {
      expect(((await call("/subscription-plans?limit=100", { key })).body.data as { name: string }[]).map((p) => p.name)).not.toContain("Meant for test");
    }
    // Back in test mode the same form acts, once.
    await choose(cookie, "test");
    expect((await dashboardFetch("/dashboard/plans", { cookie, form })).status).toBe(303);
    expect(((await call("/subscription-plans?limit=100", { key: acct.key })).body.data as { name: string }[]).filter((p) => p.name === "Meant for test")).toHaveLength(1);
  });

  it("sign-out forgets both keys", async () => {
    const acct = await signup("Switch Sign-out");
    const cookie = await signIn(acct.key);
    expect((await addKey(cookie, "live", acct.liveKey)).status).toBe(303);
    const out = await submit(cookie, "/dashboard", "/dashboard/sign-out");
    expect(out.status).toBe(303);
    expect((await env.DB.prepare("SELECT count(*) AS n FROM dashboard_sessions WHERE account_id = ?").bind(acct.id).first<{ n: number }>())!.n).toBe(0);
  });
});

describe("each key keeps its own scopes", () => {
  it("a full test key and a restricted live key: the menu and the buttons follow the acting key", async () => {
    const acct = await signup("Switch Scopes");
    const testPayout = await payoutWithoutSettlement(acct);
    const livePayout = await copyAsLive("payouts", "payout", (await payoutWithoutSettlement(acct)).id);
    const liveReader = await createKey({ id: acct.id, key: acct.liveKey }, ["users:read", "payouts:read"], "live support");
    const cookie = await signIn(acct.key);
    expect((await addKey(cookie, "live", liveReader.secret)).status).toBe(303);
    const nav = (page: Page) => textOf(/<nav aria-label="Dashboard"[^>]*>([\s\S]*?)<\/nav>/.exec(page.html)![1]);

    const liveOverview = await dashboardFetch("/dashboard", { cookie });
    expect(modeShown(liveOverview)).toBe("live");
    expect(nav(liveOverview)).toBe("Overview Payouts Users");
    expect(textOf(liveOverview.html)).toContain("(restricted)");
    const livePayouts = await dashboardFetch("/dashboard/payouts", { cookie });
    expect(livePayouts.html).toContain(livePayout);
    expect(livePayouts.html).not.toContain(`/dashboard/payouts/${livePayout}/cancel`);
    const liveWebhooks = await dashboardFetch("/dashboard/webhooks", { cookie });
    expect(liveWebhooks.status).toBe(403);
    expect(textOf(liveWebhooks.html)).toContain("webhooks:read");

    await choose(cookie, "test");
    const testOverview = await dashboardFetch("/dashboard", { cookie });
    expect(nav(testOverview)).toBe("Overview Webhooks Events Payouts Payments Subscriptions Invoices Plans Coupons Tax rates Credit notes Users API keys Test clocks Settings");
    expect(textOf(testOverview.html)).not.toContain("(restricted)");
    const testPayouts = await dashboardFetch("/dashboard/payouts", { cookie });
    expect(testPayouts.html).toContain(`/dashboard/payouts/${testPayout.id}/cancel`);
    expect(testPayouts.html).not.toContain(livePayout);
    expect((await dashboardFetch("/dashboard/webhooks", { cookie })).status).toBe(200);
  });
});

describe("every page shows the acting mode's objects only", () => {
  let both: TwoModes;
  let cookie: string;
  beforeAll(async () => {
    const acct = await signup("Switch Pages");
    both = await seedBothModes(acct);
    // One more user in test mode, so that the two modes' user counts differ.
    await createUser(acct, { name: "Second Test User", email: "second.test@example.com" });
    await quiesce();
    cookie = await signIn(acct.key);
    expect((await addKey(cookie, "live", acct.liveKey)).status).toBe(303);
  }, 60_000);

  const LISTS: [string, keyof TwoModes["fixtures"]["test"]][] = [
    ["/dashboard/users", "user"],
    ["/dashboard/plans", "plan"],
    ["/dashboard/subscriptions", "subscription"],
    ["/dashboard/payments", "payment"],
    ["/dashboard/payouts", "payout"],
    ["/dashboard/webhooks", "webhook"],
    ["/dashboard/events", "event"],
    ["/dashboard/keys", "key"],
  ];

  for (const mode of ["test", "live"] as const) {
    const theirs: Mode = mode === "test" ? "live" : "test";
    it(`in ${mode} mode: every list holds ${mode} objects and none of ${theirs} mode's; the other mode's object pages are not found`, async () => {
      await choose(cookie, mode);
      const mine = both.fixtures[mode];
      const other = both.fixtures[theirs];
      for (const [path, kind] of LISTS) {
        const page = await dashboardFetch(path, { cookie });
        expect(page.status, path).toBe(200);
        expect(modeShown(page), path).toBe(mode);
        expect(page.html, `${path} shows the ${mode} ${kind}`).toContain(mine[kind]);
        expect(page.html, `${path} hides the ${theirs} ${kind}`).not.toContain(other[kind]);
      }
      for (const path of [`/dashboard/webhooks/${other.webhook}`, `/dashboard/events/${other.event}`]) {
        const page = await dashboardFetch(path, { cookie });
        expect(page.status, path).toBe(404);
        expect(modeShown(page)).toBe(mode);
      }
      for (const path of [`/dashboard/webhooks/${mine.webhook}`, `/dashboard/events/${mine.event}`]) {
        expect((await dashboardFetch(path, { cookie })).status, path).toBe(200);
      }
    });
  }

  it("the overview's figures are the acting mode's: each equals what that mode's key lists, and they differ between the modes", async () => {
    const card = (html: string, label: string) => {
      const match = new RegExp(`<div class="label">${label}</div><div class="value">([\\d,]+)</div>`).exec(html);
      expect(match, label).not.toBeNull();
      return Number(match![1].replaceAll(",", ""));
    };
    const figures: Record<Mode, Record<string, number>> = { test: {}, live: {} };
    for (const mode of ["test", "live"] as const) {
      await choose(cookie, mode);
      const overview = await dashboardFetch("/dashboard", { cookie });
      expect(modeShown(overview)).toBe(mode);
      const key = both.keys[mode];
      const count = async (path: string) => ((await call(`${path}${path.includes("?") ? "&" : "?"}limit=100`, { key })).body.data as unknown[]).length;
      figures[mode] = { users: card(overview.html, "Users"), payments: card(overview.html, "Payments, 30 days"), events: card(overview.html, "Events, 30 days"), endpoints: card(overview.html, "Webhook endpoints") };
      expect(figures[mode]).toEqual({ users: await count("/api/users"), payments: await count("/payments"), events: await count("/api/events"), endpoints: await count("/api/webhooks") });
    }
    expect(figures.test.users).not.toBe(figures.live.users);
    expect(figures.test.events).not.toBe(figures.live.events);
  });

  it("test clocks: listed in test mode; in live mode the page says they exist in test mode only, and its button switches to test mode", async () => {
    await choose(cookie, "test");
    const test = await dashboardFetch("/dashboard/test-clocks", { cookie });
    expect(test.status).toBe(200);
    expect(test.html).toContain(both.fixtures.test.clock);
    expect(test.html).not.toContain(both.fixtures.live.clock);

    await choose(cookie, "live");
    const live = await dashboardFetch("/dashboard/test-clocks", { cookie });
    expect(live.status).toBe(403);
    expect(modeShown(live)).toBe("live");
    expect(textOf(live.html)).toContain("Test clocks exist in test mode only");
    expect(live.html).not.toContain('href="/dashboard/test-clocks"');
    expect(live.html).not.toContain(both.fixtures.live.clock);
    // The page's own button (the second form posting to the switch; the first is the sidebar's).
    const panel = live.html.slice(live.html.indexOf('<section class="panel">'));
    const button = formOf(panel, "/dashboard/mode");
    expect(button.back).toBe("/dashboard/test-clocks");
    expect(panel).toContain('name="to" value="test"');
    const moved = await dashboardFetch("/dashboard/mode", { cookie, form: { ...button, to: "test" } });
    expect(moved.location).toBe("/dashboard/test-clocks");
    const back = await dashboardFetch("/dashboard/test-clocks", { cookie });
    expect(back.status).toBe(200);
    expect(modeShown(back)).toBe("test");
    expect(back.html).toContain(both.fixtures.test.clock);
  });
});

describe("migration 0012_dashboard_session_modes", () => {
  type Migrations = Parameters<typeof applyD1Migrations>[1];
  const scratch = () => (env as unknown as { MIGRATION_SCRATCH: D1Database }).MIGRATION_SCRATCH;
  const migrations = () => (env as unknown as { TEST_MIGRATIONS: Migrations }).TEST_MIGRATIONS;

  it("keeps the sessions open before it, each in its key's mode, and refuses a session without its acting key", async () => {
    const db = scratch();
    await applyD1Migrations(db, migrations().filter((m) => m.name < "0012"));
    await db.batch([
      db.prepare("INSERT INTO accounts (id, name, email, created_at) VALUES ('acct_m', 'M', 'm@example.com', '2026-11-01T00:00:00.000Z')"),
      ...["test", "live"].map((mode) =>
        db.prepare("INSERT INTO api_keys (id, account_id, kind, mode, prefix, hash, scopes, created_at) VALUES (?, 'acct_m', 'secret', ?, 'sk_…', ?, '[\"*\"]', '2026-11-01T00:00:00.000Z')").bind(`key_${mode}`, mode, `hash_${mode}`),
      ),
      db.prepare("INSERT INTO dashboard_sessions (token_hash, account_id, key_id, created_at, expires_at) VALUES ('h_test', 'acct_m', 'key_test', '2026-11-01T00:00:00.000Z', 1)"),
      db.prepare("INSERT INTO dashboard_sessions (token_hash, account_id, key_id, created_at, expires_at) VALUES ('h_live', 'acct_m', 'key_live', '2026-11-01T00:00:00.000Z', 2)"),
    ]);
    await applyD1Migrations(db, migrations().filter((m) => m.name.startsWith("0012")));
    const { results } = await db.prepare("SELECT token_hash, account_id, test_key_id, live_key_id, livemode, created_at, expires_at FROM dashboard_sessions ORDER BY token_hash").all();
    expect(results).toEqual([
      { token_hash: "h_live", account_id: "acct_m", test_key_id: null, live_key_id: "key_live", livemode: 1, created_at: "2026-11-01T00:00:00.000Z", expires_at: 2 },
      { token_hash: "h_test", account_id: "acct_m", test_key_id: "key_test", live_key_id: null, livemode: 0, created_at: "2026-11-01T00:00:00.000Z", expires_at: 1 },
    ]);
    const indexes = await db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'dashboard_sessions' AND name NOT LIKE 'sqlite_%' ORDER BY name").all();
    expect(indexes.results.map((r) => r.name)).toEqual(["dashboard_sessions_expiry", "dashboard_sessions_live_key", "dashboard_sessions_test_key"]);
    // The acting mode's key must be there.
    await expect(db.prepare("INSERT INTO dashboard_sessions (token_hash, account_id, test_key_id, livemode, created_at, expires_at) VALUES ('h_bad', 'acct_m', 'key_test', 1, 'x', 3)").run()).rejects.toThrow(/CHECK constraint failed/);
    await expect(db.prepare("UPDATE dashboard_sessions SET livemode = 0 WHERE token_hash = 'h_live'").run()).rejects.toThrow(/CHECK constraint failed/);
  });
});
