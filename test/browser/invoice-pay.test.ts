// The hosted invoice page in Chromium, at 1280 and 390 px (no sideways scroll, no console error or
// warning): an open invoice whose off-session renewal the bank refused for want of 3-D Secure is
// paid on its page with the subscription's card, through the sandbox challenge; Complete lands on
// the invoice's page, paid; Fail lands there with the invoice still payable. An incomplete
// subscription's first invoice continues its first payment's challenge instead, and comes back.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type RunningBrowser, type RunningWorker, api, findChromium, launchBrowser, startWorker, until } from "./harness";

const chromiumPath = findChromium();
const VIEWPORTS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
];
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
/** The invoices' hosted_invoice_url origin: the page is found by its id and secret, so the test opens it on the worker's origin. */
const PUBLIC_URL = "http://invoices.test";
const AUTH_CARD = { payment_method: "card", card_number: "4000002760003184", expiration_month: 12, expiration_year: new Date().getUTCFullYear() + 2, cvv: "123" };

describe.skipIf(!chromiumPath)("the hosted invoice page in Chromium", () => {
  let worker: RunningWorker;
  let browser: RunningBrowser;
  let page: Page;
  let key: string;
  let payers = 0;
  const problems: { page: string; text: string }[] = [];

  beforeAll(async () => {
    worker = await startWorker({ PUBLIC_URL });
    browser = await launchBrowser(chromiumPath!);
    page = await browser.context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push({ page: page.url(), text: `console.${m.type()}: ${m.text()}` });
    });
    page.on("pageerror", (e) => problems.push({ page: page.url(), text: `page error: ${e}` }));
    const signup = await api(worker.origin, "/api/accounts", undefined, { name: "Corner Shop", email: `ops+${Date.now()}@invoice.test` });
    expect(signup.status, signup.text).toBe(201);
    key = signup.body.api_key;
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await worker?.stop();
  });

  /** A past-due subscription's open invoice: a 7-day trial on a test clock, its end refused off session (3-D Secure). */
  async function openInvoice(): Promise<{ id: string; url: string; sub: string }> {
    const start = "2026-03-01T09:00:00.000Z";
    const clock = await api(worker.origin, "/api/test-clocks", key, { frozen_time: start, name: "clock" });
    expect(clock.status, clock.text).toBe(201);
    const user = await api(worker.origin, "/api/users", key, { name: "Ada Lovelace", email: `ada+${++payers}@example.com`, test_clock: clock.body.id });
    expect(user.status, user.text).toBe(201);
    const plan = await api(worker.origin, "/subscription-plans", key, { name: "Pro", price: 30, currency: "usd", interval: "month" });
    expect(plan.status, plan.text).toBe(201);
    const sub = await api(worker.origin, "/subscriptions", key, { user_id: user.body.id, plan_id: plan.body.id, trial_period_days: 7, ...AUTH_CARD });
    expect(sub.status, sub.text).toBe(201);
    const advanced = await api(worker.origin, `/api/test-clocks/${clock.body.id}/advance`, key, { frozen_time: "2026-03-08T09:01:00.000Z" });
    expect(advanced.status, advanced.text).toBe(200);
    const invoice = await until("the open invoice", async () => {
      const list = await api(worker.origin, `/invoices?subscription_id=${sub.body.id}&status=open`, key);
      return list.body?.data?.[0] as { id: string; hosted_invoice_url: string } | undefined;
    });
    return { id: invoice.id, url: invoice.hosted_invoice_url.replace(PUBLIC_URL, worker.origin), sub: sub.body.id };
  }

  async function widths() {
    return page.evaluate<{ scrollWidth: number; clientWidth: number }>("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })");
  }

  for (const viewport of VIEWPORTS) {
    it(`at ${viewport.width} px: paying an open invoice whose card asks for 3-D Secure, Complete lands on the paid invoice`, async () => {
      const invoice = await openInvoice();
      await page.setViewportSize(viewport);
      const before = problems.length;
      const response = await page.goto(invoice.url);
      expect(response!.status()).toBe(200);
      const pay = page.getByRole("button", { name: "Pay 30.00 USD with Visa •••• 3184" });
      await pay.waitFor();
      let size = await widths();
      expect(size.scrollWidth, `${viewport.width} px`).toBeLessThanOrEqual(size.clientWidth);
      await page.screenshot({ path: join(SCREENSHOTS, `invoice-pay-${viewport.width}.png`), fullPage: true });
      await Promise.all([page.waitForURL((url) => url.pathname.startsWith("/pay/authenticate/")), pay.click()]);
      size = await widths();
      expect(size.scrollWidth, `${viewport.width} px`).toBeLessThanOrEqual(size.clientWidth);
      await Promise.all([page.waitForURL((url) => url.href.startsWith(invoice.url)), page.getByRole("button", { name: "Complete", exact: true }).click()]);
      expect(await page.textContent("body")).toContain("30.00 USD paid");
      expect(await page.locator("form").count()).toBe(0);
      await page.screenshot({ path: join(SCREENSHOTS, `invoice-paid-${viewport.width}.png`), fullPage: true });
      const now = await api(worker.origin, `/invoices/${invoice.id}`, key);
      expect(now.body.status).toBe("paid");
      expect((await api(worker.origin, `/subscriptions/${invoice.sub}`, key)).body.status).toBe("active");
      expect(problems.slice(before)).toEqual([]);
    });
  }

  it("an incomplete subscription's first invoice: its button continues the first payment's challenge, and Complete lands back on it, paid", async () => {
    const user = await api(worker.origin, "/api/users", key, { name: "Ada Lovelace", email: `ada+${++payers}@example.com` });
    const plan = await api(worker.origin, "/subscription-plans", key, { name: "Pro", price: 30, currency: "usd", interval: "month" });
    const sub = await api(worker.origin, "/subscriptions", key, { user_id: user.body.id, plan_id: plan.body.id, return_url: "https://shop.example.com/done", ...AUTH_CARD });
    expect(sub.body.status, sub.text).toBe("incomplete");
    const [invoice] = (await api(worker.origin, `/invoices?subscription_id=${sub.body.id}&status=open`, key)).body.data;
    const url = invoice.hosted_invoice_url.replace(PUBLIC_URL, worker.origin);
    await page.setViewportSize(VIEWPORTS[1]);
    const before = problems.length;
    await page.goto(url);
    expect(await page.textContent("body")).toContain("This payment needs authentication");
    expect(await page.locator("form").count()).toBe(0);
    const size = await widths();
    expect(size.scrollWidth).toBeLessThanOrEqual(size.clientWidth);
    // The seller's and buyer's blocks side by side: a long email wraps inside its own column, never over the other.
    const spilled = await page.evaluate<string[]>(
      `[...document.querySelectorAll("[data-parties] p")].filter((p) => p.scrollWidth > p.clientWidth).map((p) => p.textContent)`,
    );
    expect(spilled).toEqual([]);
    await page.screenshot({ path: join(SCREENSHOTS, "invoice-incomplete-390.png"), fullPage: true });
    await Promise.all([
      page.waitForURL((u) => u.pathname === new URL(sub.body.latest_payment.next_action.url).pathname),
      page.getByRole("link", { name: "Continue to your bank's check" }).click(),
    ]);
    // Back on the invoice's page (not the merchant's return_url), paid.
    await Promise.all([page.waitForURL((u) => u.href.startsWith(url)), page.getByRole("button", { name: "Complete", exact: true }).click()]);
    expect(await page.textContent("body")).toContain("30.00 USD paid");
    expect((await api(worker.origin, `/subscriptions/${sub.body.id}`, key)).body.status).toBe("active");
    expect(problems.slice(before)).toEqual([]);
  });

  it("Fail lands on the invoice's page with the invoice still open and payable", async () => {
    const invoice = await openInvoice();
    await page.setViewportSize(VIEWPORTS[1]);
    const before = problems.length;
    await page.goto(invoice.url);
    await Promise.all([page.waitForURL((url) => url.pathname.startsWith("/pay/authenticate/")), page.getByRole("button", { name: /^Pay 30\.00 USD with Visa/ }).click()]);
    await Promise.all([page.waitForURL((url) => url.href.startsWith(invoice.url)), page.getByRole("button", { name: "Fail", exact: true }).click()]);
    expect(await page.textContent("body")).toContain("did not succeed");
    expect(await page.getByRole("button", { name: /^Pay 30\.00 USD with Visa/ }).count()).toBe(1);
    const size = await widths();
    expect(size.scrollWidth).toBeLessThanOrEqual(size.clientWidth);
    await page.screenshot({ path: join(SCREENSHOTS, "invoice-pay-failed-390.png"), fullPage: true });
    expect((await api(worker.origin, `/invoices/${invoice.id}`, key)).body.status).toBe("open");
    expect(problems.slice(before)).toEqual([]);
  });
});
