// The live customer portal in Chromium: `wrangler dev` with STRIPE_API_BASE and STRIPE_JS_URL
// pointed at the fake Stripe (`npm run fake-stripe`, which serves the Stripe.js stand-in at /v3/),
// an account connected with a publishable key, and a user who adds a card through the Payment
// Element on their portal: Stripe.js makes the PaymentMethod, the page posts its id, Tender
// attaches it to the user's Customer at the fake Stripe (a SetupIntent), and the portal lists it.
// At 1280 and 390 px, no sideways scroll and no console error.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type RunningBrowser, type RunningWorker, api, findChromium, freePort, launchBrowser, startWorker, until } from "./harness";

const chromiumPath = findChromium();
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;

describe.skipIf(!chromiumPath)("the live customer portal in Chromium, against the fake Stripe", () => {
  let worker: RunningWorker;
  let browser: RunningBrowser;
  let fake: ChildProcess;
  let fakeLog = "";
  let fakeOrigin: string;
  let liveKey: string;
  let userId: string;
  const problems: { page: string; text: string }[] = [];

  beforeAll(async () => {
    const fakePort = await freePort();
    fakeOrigin = `http://127.0.0.1:${fakePort}`;
    fake = spawn("npm", ["run", "fake-stripe"], { cwd: ROOT, env: { ...process.env, FAKE_STRIPE_PORT: String(fakePort) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    fake.stdout!.on("data", (chunk) => (fakeLog += chunk));
    fake.stderr!.on("data", (chunk) => (fakeLog += chunk));
    [worker, browser] = await Promise.all([startWorker({ STRIPE_API_BASE: fakeOrigin, STRIPE_JS_URL: `${fakeOrigin}/v3/` }), launchBrowser(chromiumPath!)]);
    await until("the fake Stripe", async () => fakeLog.includes("Fake Stripe on"), 60_000);
    const account = await api(worker.origin, "/api/accounts", undefined, { name: "Live Portal Tour", email: "owner@live-portal.test" });
    expect(account.status, account.text).toBe(201);
    liveKey = account.body.live_api_key;
    const connected = await api(
      worker.origin,
      "/api/processor",
      liveKey,
      {
        provider: "stripe",
        secret_key: "sk_live_51AcmeLiveCheckout0000000000000000",
        publishable_key: "pk_live_51AcmeLiveCheckout0000000000000000",
        webhook_secret: "whsec_acmeplatformsigning000000000000000",
        connect_webhook_secret: "whsec_acmeconnectsigning00000000000000",
      },
      "PUT",
    );
    expect(connected.status, connected.text).toBe(200);
    const user = await api(worker.origin, "/api/users", liveKey, { name: "Grace Hopper", email: "grace@example.com" });
    expect(user.status, user.text).toBe(201);
    userId = user.body.id;
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await worker?.stop();
    try {
      if (fake?.pid) process.kill(-fake.pid, "SIGTERM");
    } catch {
      // already gone
    }
  });

  async function newPage(viewport: { width: number; height: number }): Promise<Page> {
    const page = await browser.context.newPage();
    await page.setViewportSize(viewport);
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push({ page: page.url(), text: `console.${m.type()}: ${m.text()}` });
    });
    page.on("pageerror", (e) => problems.push({ page: page.url(), text: `page error: ${e}` }));
    return page;
  }

  for (const [viewportName, viewport] of Object.entries(VIEWPORTS)) {
    it(`adds a card through Stripe.js on the live portal at ${viewport.width} px`, async () => {
      const session = await api(worker.origin, "/portal/sessions", liveKey, { user_id: userId, return_url: `${worker.origin}/health?back=1` });
      expect(session.status, session.text).toBe(201);
      const page = await newPage(viewport);
      const response = await page.goto(session.body.url);
      expect(response?.status()).toBe(200);
      await Promise.all([page.waitForURL(/\/payment-methods\/new$/), page.getByRole("link", { name: "Add a card" }).click()]);
      // The stand-in Stripe.js mounted its card fields into the Payment Element's place.
      await page.locator("#stripe-number").waitFor();
      const { scrollWidth, clientWidth } = (await page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })")) as { scrollWidth: number; clientWidth: number };
      expect(scrollWidth).toBeLessThanOrEqual(clientWidth);
      await page.locator("#stripe-number").fill("4242424242424242");
      await page.locator("#stripe-exp_month").fill("12");
      await page.locator("#stripe-exp_year").fill(String(new Date().getUTCFullYear() + 3));
      await page.locator("#stripe-cvc").fill("123");
      await Promise.all([page.waitForURL(/\?done=added$/), page.locator("button[type=submit]").click()]);
      await expect(page.getByRole("status").textContent()).resolves.toContain("Your card was added.");
      await page.screenshot({ path: join(SCREENSHOTS, `portal-live-${viewportName}.png`), fullPage: true });
      const cards = await api(worker.origin, `/api/users/${userId}/payment-methods`, liveKey);
      expect(cards.body.data[0]).toMatchObject({ livemode: true, card: { last4: "4242" } });
      await page.close();
    });
  }

  it("logged no console error or warning", () => {
    expect(problems).toEqual([]);
  });
});
