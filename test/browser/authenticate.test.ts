// The 3-D Secure page in Chromium, at 1280 and 390 px: no sideways scroll, no console error or
// warning, and the payer lands on return_url with ?payment_id=…:
// - test mode: the sandbox challenge, each of Complete and Fail;
// - live mode: the page runs the stand-in Stripe.js (STRIPE_JS_URL, served by `npm run fake-stripe`)
//   whose challenge is finished in the browser; Tender reads the PaymentIntent from the fake Stripe.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type Receiver, type RunningBrowser, type RunningWorker, api, findChromium, freePort, launchBrowser, startReceiver, startWorker, until } from "./harness";

const chromiumPath = findChromium();
const VIEWPORTS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
];
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const AUTH_CARD = { payment_method: "card", card_number: "4000002760003184", expiration_month: 12, expiration_year: new Date().getUTCFullYear() + 2, cvv: "123" };

describe.skipIf(!chromiumPath)("the 3-D Secure page in Chromium", () => {
  let worker: RunningWorker;
  let receiver: Receiver;
  let browser: RunningBrowser;
  let page: Page;
  let fake: ChildProcess;
  let fakeLog = "";
  let fakeOrigin: string;
  let key: string;
  let liveKey: string;
  let userId: string;
  let liveUserId: string;
  const problems: { page: string; text: string }[] = [];

  beforeAll(async () => {
    const fakePort = await freePort();
    fakeOrigin = `http://127.0.0.1:${fakePort}`;
    fake = spawn("npm", ["run", "fake-stripe"], { cwd: ROOT, env: { ...process.env, FAKE_STRIPE_PORT: String(fakePort) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    fake.stdout!.on("data", (chunk) => (fakeLog += chunk));
    fake.stderr!.on("data", (chunk) => (fakeLog += chunk));
    [worker, receiver] = await Promise.all([startWorker({ STRIPE_API_BASE: fakeOrigin, STRIPE_JS_URL: `${fakeOrigin}/v3/` }), startReceiver()]);
    receiver.accept();
    await until("the fake Stripe to listen", async () => fakeLog.includes("Fake Stripe on"), 30_000);
    browser = await launchBrowser(chromiumPath!);
    page = await browser.context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push({ page: page.url(), text: `console.${m.type()}: ${m.text()}` });
    });
    page.on("pageerror", (e) => problems.push({ page: page.url(), text: `page error: ${e}` }));
    const signup = await api(worker.origin, "/api/accounts", undefined, { name: "Corner Shop", email: `ops+${Date.now()}@3ds.test` });
    expect(signup.status, signup.text).toBe(201);
    key = signup.body.api_key;
    liveKey = signup.body.live_api_key;
    userId = (await api(worker.origin, "/api/users", key, { name: "Ada Lovelace", email: "ada@example.com" })).body.id;
    liveUserId = (await api(worker.origin, "/api/users", liveKey, { name: "Live Payer", email: "live.payer@example.com" })).body.id;
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await worker?.stop();
    try {
      if (fake?.pid) process.kill(-fake.pid, "SIGTERM");
    } catch {
      // already gone
    }
  });

  const returnUrl = () => `${receiver.url.replace("/webhooks", "/orders/6735")}`;

  async function widths() {
    return page.evaluate<{ scrollWidth: number; clientWidth: number }>("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })");
  }

  for (const viewport of VIEWPORTS) {
    for (const button of ["Complete", "Fail"] as const) {
      it(`test mode at ${viewport.width} px: ${button} lands on return_url with the payment ${button === "Complete" ? "completed" : "failed"}`, async () => {
        const made = await api(worker.origin, "/payments", key, { amount: 2599, currency: "eur", user_id: userId, return_url: returnUrl(), ...AUTH_CARD });
        expect(made.status, made.text).toBe(201);
        expect(made.body.status).toBe("requires_action");
        await page.setViewportSize(viewport);
        const before = problems.length;
        const response = await page.goto(made.body.next_action.url);
        expect(response!.status()).toBe(200);
        await expect(page.getByText("25.99 EUR")).toBeTruthy();
        expect(await page.textContent("body")).toContain("Corner Shop");
        const size = await widths();
        expect(size.scrollWidth, `${viewport.width} px`).toBeLessThanOrEqual(size.clientWidth);
        await page.screenshot({ path: join(SCREENSHOTS, `authenticate-test-${viewport.width}.png`), fullPage: true });
        await Promise.all([page.waitForURL((url) => url.href.startsWith(returnUrl())), page.getByRole("button", { name: button, exact: true }).click()]);
        expect(new URL(page.url()).searchParams.get("payment_id")).toBe(made.body.id);
        const now = await api(worker.origin, `/payments/${made.body.id}`, key);
        expect(now.body.status).toBe(button === "Complete" ? "completed" : "failed");
        // Back on the page: its result, and no button.
        await page.goto(made.body.next_action.url);
        expect(await page.locator("button").count()).toBe(0);
        expect(problems.slice(before)).toEqual([]);
      });
    }
  }

  it("live mode: the stand-in Stripe.js runs the challenge, Tender reads the PaymentIntent from the fake Stripe, and the payer lands on return_url", async () => {
    const connected = await api(worker.origin, "/api/processor", liveKey, { provider: "stripe", secret_key: `sk_live_${"a".repeat(40)}`, webhook_secret: `whsec_${"b".repeat(32)}`, raw_card_data: true, publishable_key: "pk_live_51CornerShop" }, "PUT");
    expect(connected.status, connected.text).toBe(200);
    for (const viewport of VIEWPORTS) {
      const made = await api(worker.origin, "/payments", liveKey, { amount: 4200, currency: "eur", user_id: liveUserId, return_url: returnUrl(), ...AUTH_CARD });
      expect(made.status, made.text).toBe(201);
      expect(made.body).toMatchObject({ livemode: true, status: "requires_action" });
      await page.setViewportSize(viewport);
      const before = problems.length;
      await page.goto(made.body.next_action.url);
      const complete = page.getByRole("button", { name: "Complete authentication" });
      await complete.waitFor();
      const size = await widths();
      expect(size.scrollWidth, `${viewport.width} px`).toBeLessThanOrEqual(size.clientWidth);
      await page.screenshot({ path: join(SCREENSHOTS, `authenticate-live-${viewport.width}.png`), fullPage: true });
      await Promise.all([page.waitForURL((url) => url.href.startsWith(returnUrl()), { timeout: 30_000 }), complete.click()]);
      expect(new URL(page.url()).searchParams.get("payment_id")).toBe(made.body.id);
      const now = await api(worker.origin, `/payments/${made.body.id}`, liveKey);
      expect(now.body).toMatchObject({ status: "completed", amount_received: 4200 });
      expect(problems.slice(before)).toEqual([]);
    }
  });
});
