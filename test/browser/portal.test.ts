// The customer portal in Chromium, under `wrangler dev`, in test mode, at a desktop (1280 px) and a
// phone (390 px) width: a user with a subscription on a saved card opens their portal, adds a card
// through the hosted card form, makes it the default (the subscription moves to it), removes the
// old one, cancels the subscription at the period's end after confirming, and opens an invoice's
// PDF. No width scrolls sideways, and the browser logs no console error or warning. Screenshots
// are saved to look at.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type RunningBrowser, type RunningWorker, api, findChromium, launchBrowser, startWorker } from "./harness";

const chromiumPath = findChromium();
const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const YEAR = String(new Date().getUTCFullYear() + 3);

describe.skipIf(!chromiumPath)("the customer portal in Chromium", () => {
  let worker: RunningWorker;
  let browser: RunningBrowser;
  let key: string;
  let planId: string;
  const problems: { page: string; text: string }[] = [];

  beforeAll(async () => {
    [worker, browser] = await Promise.all([startWorker(), launchBrowser(chromiumPath!)]);
    const account = await api(worker.origin, "/api/accounts", undefined, { name: "Portal Tour", email: "owner@portal.test" });
    expect(account.status, account.text).toBe(201);
    key = account.body.api_key;
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

  async function noSidewaysScroll(page: Page, what: string) {
    const { scrollWidth, clientWidth } = (await page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })")) as { scrollWidth: number; clientWidth: number };
    expect(scrollWidth, what).toBeLessThanOrEqual(clientWidth);
  }

  /** A user with a saved Visa and a subscription charging it (so a paid invoice). */
  async function customer(name: string) {
    const user = await api(worker.origin, "/api/users", key, { name, email: `${name.split(" ")[0].toLowerCase()}@example.com` });
    expect(user.status, user.text).toBe(201);
    const card = await api(worker.origin, `/api/users/${user.body.id}/payment-methods`, key, { processor_token: "pm_card_visa" });
    expect(card.status, card.text).toBe(201);
    const sub = await api(worker.origin, "/subscriptions", key, { user_id: user.body.id, plan_id: planId, payment_method: card.body.id });
    expect(sub.status, sub.text).toBe(201);
    return { userId: user.body.id as string, cardId: card.body.id as string, subId: sub.body.id as string };
  }

  for (const [viewportName, viewport] of Object.entries(VIEWPORTS)) {
    it(`at ${viewport.width} px: add a card, make it the default, remove the old one, cancel at period end, open a PDF`, async () => {
      const { userId, cardId, subId } = await customer(`Ada ${viewportName}`);
      const session = await api(worker.origin, "/portal/sessions", key, { user_id: userId, return_url: `${worker.origin}/health?back=1` });
      expect(session.status, session.text).toBe(201);
      const page = await newPage(viewport);
      const response = await page.goto(session.body.url);
      expect(response?.status()).toBe(200);
      const base = new URL(session.body.url).pathname;
      await expect(page.locator("main").textContent()).resolves.toMatch(/19\.99 USD per month/);
      expect(await page.getByRole("link", { name: /Return to Portal Tour/ }).getAttribute("href")).toBe(`${worker.origin}/health?back=1`);
      await noSidewaysScroll(page, `portal ${viewportName}`);
      await page.screenshot({ path: join(SCREENSHOTS, `portal-${viewportName}.png`), fullPage: true });

      // Add a card through the hosted card form.
      await Promise.all([page.waitForURL(/\/payment-methods\/new$/), page.getByRole("link", { name: "Add a card" }).click()]);
      await noSidewaysScroll(page, `add a card ${viewportName}`);
      await page.getByLabel("Name on card").fill("Ada Lovelace");
      await page.getByLabel("Card number").fill("5555555555554444");
      await page.getByLabel("Month (MM)").fill("12");
      await page.getByLabel("Year (YYYY)").fill(YEAR);
      await page.getByLabel("Security code").fill("123");
      await Promise.all([page.waitForURL(/\?done=added$/), page.getByRole("button", { name: "Save card" }).click()]);
      await expect(page.getByRole("status").textContent()).resolves.toContain("Your card was added.");
      const mastercard = page.locator("[data-payment-method]", { hasText: "•••• 4444" });
      const visa = page.locator(`[data-payment-method="${cardId}"]`);

      // Make it the default: the subscription charges it from now on.
      await Promise.all([page.waitForURL(/\?done=default$/), mastercard.getByRole("button", { name: "Make default" }).click()]);
      await expect(page.locator("[data-payment-method]", { hasText: "•••• 4444" }).locator(".badge").textContent()).resolves.toBe("Default");
      const newCardId = await page.locator("[data-payment-method]", { hasText: "•••• 4444" }).getAttribute("data-payment-method");
      expect((await api(worker.origin, `/subscriptions/${subId}`, key)).body.payment_method).toBe(newCardId);

      // Remove the old one.
      await Promise.all([page.waitForURL(/\?done=removed$/), visa.getByRole("button", { name: "Remove" }).click()]);
      expect(await page.locator(`[data-payment-method="${cardId}"]`).count()).toBe(0);

      // Cancel at the period's end, after confirming.
      await Promise.all([page.waitForURL(/\/cancel$/), page.getByRole("link", { name: "Cancel at period end" }).click()]);
      await expect(page.locator("h1").textContent()).resolves.toBe("Cancel Pro?");
      await noSidewaysScroll(page, `cancel ${viewportName}`);
      await Promise.all([page.waitForURL(/\?done=canceled$/), page.getByRole("button", { name: "Cancel at period end" }).click()]);
      const sub = (await api(worker.origin, `/subscriptions/${subId}`, key)).body;
      expect(sub).toMatchObject({ status: "active", cancel_at_period_end: true });
      await expect(page.locator(`[data-subscription="${subId}"]`).textContent()).resolves.toContain(`Cancels on ${sub.next_billing_date.slice(0, 10)}`);
      await noSidewaysScroll(page, `portal after ${viewportName}`);
      await page.screenshot({ path: join(SCREENSHOTS, `portal-after-${viewportName}.png`), fullPage: true });

      // The invoice's PDF.
      const pdfHref = await page.locator("[data-invoice]").first().getByRole("link", { name: "PDF" }).getAttribute("href");
      expect(pdfHref).toMatch(new RegExp(`^${base}/invoices/in_[0-9a-z]+/pdf$`));
      const pdf = await page.request.get(`${worker.origin}${pdfHref}`);
      expect(pdf.status()).toBe(200);
      expect(pdf.headers()["content-type"]).toBe("application/pdf");
      expect((await pdf.body()).subarray(0, 5).toString()).toBe("%PDF-");
      await page.close();
    });
  }

  it("logged no console error or warning on any page", () => {
    expect(problems).toEqual([]);
  });
});
