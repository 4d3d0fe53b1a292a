// The hosted checkout page in Chromium, under `wrangler dev`, in test mode: payment, subscription
// and setup sessions paid by typing a card as a payer does, at a desktop (1280 px) and a phone
// (390 px) width, each landing on success_url with the session's id; a declined card shown on the
// form, the session still open. No width scrolls sideways, and the browser logs no console error
// or warning (a CSP refusal, a failed load, a script error). Screenshots are saved to look at.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type RunningBrowser, type RunningWorker, api, findChromium, launchBrowser, startWorker } from "./harness";

const chromiumPath = findChromium();
const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const YEAR = String(new Date().getUTCFullYear() + 3);

describe.skipIf(!chromiumPath)("hosted checkout in Chromium", () => {
  let worker: RunningWorker;
  let browser: RunningBrowser;
  let key: string;
  let userId: string;
  let planId: string;
  const problems: { page: string; text: string }[] = [];

  beforeAll(async () => {
    [worker, browser] = await Promise.all([startWorker(), launchBrowser(chromiumPath!)]);
    const account = await api(worker.origin, "/api/accounts", undefined, { name: "Checkout Tour", email: "owner@checkout.test" });
    expect(account.status, account.text).toBe(201);
    key = account.body.api_key;
    const user = await api(worker.origin, "/api/users", key, { name: "Ada Lovelace", email: "ada@example.com" });
    expect(user.status, user.text).toBe(201);
    userId = user.body.id;
    const plan = await api(worker.origin, "/subscription-plans", key, { name: "Pro", price: 19.99, currency: "usd", interval: "month" });
    expect(plan.status, plan.text).toBe(201);
    planId = plan.body.id;
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await worker?.stop();
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

  async function session(body: Record<string, unknown>) {
    const res = await api(worker.origin, "/checkout/sessions", key, {
      user_id: userId,
      // Lands on this Worker (http://127.0.0.1 is a success_url only in development).
      success_url: `${worker.origin}/health?session={CHECKOUT_SESSION_ID}`,
      cancel_url: `${worker.origin}/health?canceled=1`,
      ...body,
    });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: string; url: string };
  }

  async function noSidewaysScroll(page: Page, what: string) {
    const { scrollWidth, clientWidth } = (await page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })")) as { scrollWidth: number; clientWidth: number };
    console.log(`${what}: scrollWidth ${scrollWidth}, clientWidth ${clientWidth}`);
    expect(scrollWidth, what).toBeLessThanOrEqual(clientWidth);
  }

  async function typeCard(page: Page, pan: string) {
    await page.getByLabel("Name on card").fill("Ada Lovelace");
    await page.getByLabel("Card number").fill(pan);
    await page.getByLabel("Month (MM)").fill("12");
    await page.getByLabel("Year (YYYY)").fill(YEAR);
    await page.getByLabel("Security code").fill("123");
  }

  const modes: [string, () => Record<string, unknown>, RegExp][] = [
    ["payment", () => ({ mode: "payment", amount: 2500, currency: "usd" }), /25\.00 USD/],
    ["subscription", () => ({ mode: "subscription", plan_id: planId }), /19\.99 USD/],
    ["setup", () => ({ mode: "setup" }), /Save a card/],
  ];

  for (const [viewportName, viewport] of Object.entries(VIEWPORTS)) {
    for (const [mode, body, shows] of modes) {
      it(`${mode} mode at ${viewport.width} px: typed card, lands on success_url, the session complete`, async () => {
        const page = await newPage(viewport);
        const made = await session(body());
        const response = await page.goto(made.url);
        expect(response?.status()).toBe(200);
        await expect(page.locator("main").textContent()).resolves.toMatch(shows);
        for (const name of ["cc-number", "cc-exp-month", "cc-exp-year", "cc-csc"]) expect(await page.locator(`input[autocomplete="${name}"]`).count(), name).toBe(1);
        expect(await page.locator("button").count()).toBe(1);
        await noSidewaysScroll(page, `${mode} ${viewportName}`);
        await page.screenshot({ path: join(SCREENSHOTS, `checkout-${mode}-${viewportName}.png`), fullPage: true });
        await typeCard(page, "4242424242424242");
        await Promise.all([page.waitForURL(/\/health\?session=/), page.locator("button").click()]);
        expect(page.url()).toBe(`${worker.origin}/health?session=${made.id}`);
        const read = await api(worker.origin, `/checkout/sessions/${made.id}`, key);
        expect(read.body).toMatchObject({ status: "complete", payment_method_id: expect.stringMatching(/^pmt_/) });
        if (mode === "subscription") expect(read.body.subscription_id).toMatch(/^sub_/);
        if (mode === "payment") expect(read.body.payment_id).toMatch(/^pay_/);
        // The page of a completed session takes no card (410).
        const again = await fetch(made.url);
        expect(again.status).toBe(410);
        expect(await again.text()).not.toContain("<form");
        await page.close();
      });
    }

    it(`a declined card at ${viewport.width} px: the message on the form, the session open`, async () => {
      const page = await newPage(viewport);
      const made = await session({ mode: "payment", amount: 1000, currency: "usd" });
      await page.goto(made.url);
      await typeCard(page, "4000000000000002");
      const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.locator("button").click()]);
      expect(response.status()).toBe(402);
      await page.waitForLoadState();
      await expect(page.getByRole("alert").textContent()).resolves.toMatch(/declined/i);
      expect(await page.locator("form").count()).toBe(1);
      await noSidewaysScroll(page, `decline ${viewportName}`);
      await page.screenshot({ path: join(SCREENSHOTS, `checkout-declined-${viewportName}.png`), fullPage: true });
      const read = await api(worker.origin, `/checkout/sessions/${made.id}`, key);
      expect(read.body.status).toBe("open");
      await page.close();
    });
  }

  it("logged no console error or warning on any page", () => {
    // A 402 answer is the decline the test asked for: Chromium reports the failed status of the document it loaded.
    const unexpected = problems.filter((p) => !/status of 402/.test(p.text));
    expect(unexpected).toEqual([]);
  });
});
