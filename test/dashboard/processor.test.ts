// The dashboard's Processor page (live mode): the Stripe connection as the API answers it, connect
// (Stripe checks the key, the fake here), replace and disconnect through the API's own routes, a
// refused key shown beside its field, and no secret in any page: neither the key nor the signing
// secrets, not even in a refused form drawn again. Test mode and restricted keys cannot use it.
import { afterAll, describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { createKey } from "../support/fixtures";
import { installFakeStripe, newSecretKey, newSigningSecret } from "../support/live";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

const stripe = installFakeStripe();
afterAll(() => stripe.restore());

const PAGE = "/dashboard/processor";

/** Every page the session can draw after the action, checked for the secrets. */
async function expectNoSecret(cookie: string, secrets: string[]) {
  for (const path of [PAGE, "/dashboard", "/dashboard/keys", "/dashboard/events"]) {
    const page = await dashboardFetch(path, { cookie });
    for (const secret of secrets) expect(page.html, `${path} shows a secret`).not.toContain(secret);
  }
}

describe("the Processor page", () => {
  it("connects Stripe with the live secret key, shows the connection (last 4 only), and disconnects", async () => {
    const acct = await signup("Dashboard Stripe");
    const cookie = await signIn(acct.liveKey);
    const home = await dashboardFetch("/dashboard", { cookie });
    expect(home.html).toContain(`href="${PAGE}"`);
    const empty = await dashboardFetch(PAGE, { cookie });
    expect(empty.status).toBe(200);
    expect(empty.html).toContain('data-connection="none"');
    expect(textOf(empty.html)).toContain("Not connected");
    // Stripe's endpoints must exist before the keys are pasted: the page names their URL first.
    const before = /data-webhook-url="([^"]+)"/.exec(empty.html)?.[1];
    expect(before).toBe(`http://127.0.0.1:8787/processor-webhooks/stripe/${acct.id}`);
    expect(textOf(empty.html)).toContain(`${before} Copy`);
    expect(textOf(empty.html)).toMatch(/Connected accounts/);

    const secrets = { secret_key: newSecretKey(), webhook_secret: newSigningSecret(), connect_webhook_secret: newSigningSecret() };
    const connected = await submit(cookie, PAGE, PAGE, secrets);
    expect(connected.status, connected.html.slice(0, 500)).toBe(303);
    expect(connected.location).toMatch(/^\/dashboard\/processor\?done=processor_connected&id=acct_/);
    const shown = await dashboardFetch(connected.location!, { cookie });
    expect(shown.html).toContain('data-connection="connected"');
    const api = await call("/api/processor", { key: acct.liveKey });
    expect(api.status).toBe(200);
    expect(textOf(shown.html)).toContain(api.body.processor_account);
    expect(textOf(shown.html)).toContain(`…${secrets.secret_key.slice(-4)}`);
    expect(textOf(shown.html)).toContain(api.body.webhook_url);
    // The URL Stripe's endpoints were created at, shown before connecting, is the connection's.
    expect(before).toBe(api.body.webhook_url);
    await expectNoSecret(cookie, Object.values(secrets));

    const gone = await submit(cookie, PAGE, `${PAGE}/disconnect`);
    expect(gone.status, gone.html.slice(0, 500)).toBe(303);
    expect(gone.location).toMatch(/done=processor_disconnected/);
    expect((await call("/api/processor", { key: acct.liveKey })).status).toBe(404);
    expect((await dashboardFetch(PAGE, { cookie })).html).toContain('data-connection="none"');
  });

  it("a key Stripe refuses is shown beside its field, nothing is stored, and no secret is drawn again", async () => {
    const acct = await signup("Dashboard refused key");
    const cookie = await signIn(acct.liveKey);
    const secrets = { secret_key: newSecretKey(), webhook_secret: newSigningSecret(), connect_webhook_secret: newSigningSecret() };
    stripe.fake.rejectedKeys.add(secrets.secret_key);
    const refused = await submit(cookie, PAGE, PAGE, secrets);
    expect(refused.status).toBe(400);
    expect(refused.html).toMatch(/data-problem="secret_key">[^<]*processor_key_invalid/);
    expect(refused.html).toContain('name="secret_key" type="password"');
    for (const secret of Object.values(secrets)) expect(refused.html).not.toContain(secret);
    expect((await call("/api/processor", { key: acct.liveKey })).status).toBe(404);
  });

  it("a malformed key or secret is refused by the API's own schema before Stripe is asked", async () => {
    const acct = await signup("Dashboard bad form");
    const cookie = await signIn(acct.liveKey);
    const before = stripe.fake.requests.length;
    const refused = await submit(cookie, PAGE, PAGE, { secret_key: "pk_live_not_a_secret", webhook_secret: "nope", connect_webhook_secret: "" });
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('data-problem="secret_key"');
    expect(refused.html).toContain('data-problem="webhook_secret"');
    expect(refused.html).not.toContain("pk_live_not_a_secret");
    expect(stripe.fake.requests.length).toBe(before);
  });

  it("in test mode says processors are live mode's, and a test session cannot connect", async () => {
    const acct = await signup("Dashboard test mode");
    const cookie = await signIn(acct.key);
    expect((await dashboardFetch("/dashboard", { cookie })).html).not.toContain(`href="${PAGE}"`);
    const page = await dashboardFetch(PAGE, { cookie });
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain("belongs to live mode");
    expect(page.html).not.toContain('name="secret_key"');
    // A form posted anyway (its token from another page of the session) reaches the API, which refuses it.
    const keys = await dashboardFetch("/dashboard/keys", { cookie });
    const posted = await dashboardFetch(PAGE, { cookie, form: { ...formOf(keys.html, "/dashboard/keys"), secret_key: newSecretKey(), webhook_secret: newSigningSecret() } });
    expect(posted.status).toBe(403);
    expect(textOf(posted.html)).toContain("livemode_required");
    expect((await call("/api/processor", { key: acct.liveKey })).status).toBe(404);
  });

  it("a live restricted key's session does not list it, and its read is refused with the API's reason", async () => {
    const acct = await signup("Dashboard restricted live");
    const restricted = await createKey({ id: acct.id, key: acct.liveKey }, ["users:read"], "live reader");
    const cookie = await signIn(restricted.secret);
    expect((await dashboardFetch("/dashboard", { cookie })).html).not.toContain(`href="${PAGE}"`);
    const page = await dashboardFetch(PAGE, { cookie });
    expect(page.status).toBe(403);
    expect(textOf(page.html)).toContain("live_secret_key_required");
  });
});
