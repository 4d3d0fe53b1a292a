// The dashboard in a real browser: headless Chromium (Debian's, through playwright-core) against
// the Worker under `wrangler dev`. A new user signs in with the key from sign-up, registers an
// endpoint at a local receiver, sees the failed delivery with its attempts, redelivers it from the
// page and sees it delivered; cancels a payout, refunds a payment, cancels a subscription; a plan
// form with several bad fields comes back with each problem beside its field; a restricted key
// cannot see or do what its scopes lack (its menu lists only what it can read); a form without its
// CSRF token is refused; the live key is added from the mode switch, the pages show live data under
// a "Live data" banner, and the switch goes back to test data.
// Screenshots of the overview and the deliveries page are written to test/browser/screenshots/
// (not tracked); with UPDATE_SCREENSHOTS=1 they are written to docs/, where the README shows them.
// Skipped, with a plain message, when no Chromium is found (/usr/bin/chromium or CHROMIUM_PATH).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type Receiver, type RunningBrowser, type RunningWorker, api, findChromium, launchBrowser, startReceiver, startWorker, until } from "./harness";

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(ROOT, "docs") : join(ROOT, "test", "browser", "screenshots");
const screenshotPath = (name: string) => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return join(SCREENSHOTS, name);
};

const chromiumPath = findChromium();
if (!chromiumPath) {
  console.warn(
    `Browser tests skipped: no Chromium at ${process.env.CHROMIUM_PATH ? `CHROMIUM_PATH (${process.env.CHROMIUM_PATH}) or ` : ""}/usr/bin/chromium. Install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH.`,
  );
}

const CARD = { payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: new Date().getUTCFullYear() + 3, cvv: "123" };

describe.skipIf(!chromiumPath)("dashboard in Chromium", () => {
  let worker: RunningWorker;
  let receiver: Receiver;
  let browser: RunningBrowser;
  let page: Page;
  let key: string;
  let liveKey: string;
  let origin: string;
  /** What each confirmation asked, in order; declineNext answers the next one "Cancel". */
  const asked: string[] = [];
  let declineNext = false;

  beforeAll(async () => {
    [worker, receiver] = await Promise.all([startWorker(), startReceiver()]);
    origin = worker.origin;
    browser = await launchBrowser(chromiumPath!);
    page = await browser.context.newPage();
    // Destructive forms ask for confirmation (dashboard.js); the user says yes, unless a test says no.
    page.on("dialog", (dialog) => {
      asked.push(dialog.message());
      void (declineNext ? dialog.dismiss() : dialog.accept());
      declineNext = false;
    });
  });

  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await worker?.stop();
  });

  const text = (selector: string) => page.locator(selector).innerText();

  it("a new user signs up, then signs in at /dashboard with the key from sign-up", async () => {
    const signup = await api(origin, "/api/accounts", undefined, { name: "Browser Co", email: "ops@browser.test" });
    expect(signup.status, signup.text).toBe(201);
    key = signup.body.api_key;
    liveKey = signup.body.live_api_key;
    await page.goto(`${origin}/dashboard`);
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    await page.fill('input[name="api_key"]', "sk_test_wrongwrongwrongwrongwrongwrong12");
    await page.click('button[type="submit"]');
    expect(await text(".error")).toContain("This API key is not valid");
    await page.fill('input[name="api_key"]', key);
    await page.click('button[type="submit"]');
    await page.waitForURL(`${origin}/dashboard`);
    expect(await text("h1")).toBe("Overview");
    expect(await text(".sidebar")).toContain("Browser Co");
    const cookie = (await browser.context.cookies(`${origin}/dashboard`)).find((c) => c.name === "tender_session");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/dashboard" });
  });

  it("registers an endpoint at a local receiver, sees the failed delivery with its attempts, redelivers it and sees it delivered", async () => {
    await page.click('nav a[href="/dashboard/webhooks"]');
    expect(await text(".empty")).toContain("No webhook endpoints yet");
    await page.fill('input[name="url"]', receiver.url);
    await page.check('input[name="events"][value="customer.created"]');
    await page.click('form[action="/dashboard/webhooks"] button[type="submit"]');
    expect(await text("h1")).toBe("Endpoint registered");
    expect(await text("#secret-value")).toMatch(/^whsec_/);
    await page.click("text=Continue to the endpoint");
    const endpointPath = new URL(page.url()).pathname;
    expect(endpointPath).toMatch(/^\/dashboard\/webhooks\/whk_/);
    expect(await text(".empty")).toContain("No deliveries yet");

    // An event the endpoint subscribed to; the receiver answers 500 until told otherwise.
    const user = await api(origin, "/api/users", key, { name: "Grace Hopper", email: "grace@example.com" });
    expect(user.status, user.text).toBe(201);
    await until("the failed first attempt to show on the page", async () => {
      await page.reload();
      return (await page.locator('tr[data-attempt="1"]').count()) > 0;
    });
    const delivery = page.locator("tr[data-delivery]").first();
    expect(await delivery.getAttribute("data-status")).not.toBe("delivered");
    const firstAttempt = await text('tr[data-attempt="1"]');
    expect(firstAttempt).toContain("500");
    expect(firstAttempt).toContain("receiver down");

    receiver.accept();
    await page.click('form[action$="/redeliver"] button');
    expect(await text(".notice")).toContain("redelivered");
    await until("the delivery to show delivered", async () => {
      await page.reload();
      return (await page.locator('tr[data-delivery][data-status="delivered"]').count()) === 1;
    });
    const attempts = await page.locator("tr[data-attempt]").allInnerTexts();
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts[0]).toContain("500");
    expect(attempts[attempts.length - 1]).toContain("200");
    expect(receiver.received.at(-1)!.status).toBe(200);
    expect(JSON.parse(receiver.received.at(-1)!.body)).toMatchObject({ type: "customer.created", data: { id: user.body.id } });
    await page.screenshot({ path: screenshotPath("dashboard-deliveries.png"), fullPage: true });
  });

  it("cancels a pending payout", async () => {
    // A payout can be canceled only before it is sent (its first 5 seconds). Should this machine
    // be slow enough to miss that window, the page says so (409) and we try with a new payout.
    let canceled: string | undefined;
    const vendor = await api(origin, "/api/users", key, { name: "Vendor", email: "vendor@example.com" });
    expect(vendor.status, vendor.text).toBe(201);
    for (let attempt = 0; attempt < 4 && !canceled; attempt++) {
      const payout = await api(origin, "/payout", key, { amount: 4200, currency: "usd", description: "Vendor payout", recipient_id: vendor.body.id, ...CARD });
      expect(payout.status, payout.text).toBe(201);
      await page.goto(`${origin}/dashboard/payouts`);
      const row = page.locator(`tr[data-payout="${payout.body.id}"]`);
      expect(await row.innerText()).toContain("42.00 USD");
      const button = row.locator("button", { hasText: "Cancel" });
      if ((await button.count()) === 0) continue;
      await button.click();
      const notice = page.locator(".notice");
      if ((await notice.count()) === 0) {
        expect(await text(".error")).toContain("payout_not_pending");
        continue;
      }
      expect(await notice.innerText()).toContain(`Payout ${payout.body.id} canceled.`);
      expect(await page.locator(`tr[data-payout="${payout.body.id}"]`).innerText()).toContain("canceled");
      canceled = payout.body.id;
    }
    expect(canceled).toBeDefined();
    const events = await api(origin, `/api/events?object_id=${canceled}`, key);
    expect(events.body.data.map((e: { type: string }) => e.type)).toContain("payout.canceled");
  });

  it("refunds part of a payment, and cancels a subscription", async () => {
    const user = await api(origin, "/api/users", key, { name: "Ada Lovelace", email: "ada@example.com" });
    const plan = await api(origin, "/subscription-plans", key, { name: "Pro", price: 19.99, currency: "usd", interval: "month" });
    const sub = await api(origin, "/subscriptions", key, { user_id: user.body.id, plan_id: plan.body.id, ...CARD });
    expect(sub.status, sub.text).toBe(201);
    const payments = await api(origin, `/payments?subscription_id=${sub.body.id}`, key);
    const paymentId = payments.body.data[0].id;

    await page.goto(`${origin}/dashboard/payments`);
    const row = page.locator(`tr[data-payment="${paymentId}"]`);
    expect(await row.innerText()).toContain("19.99 USD");
    // An empty amount is everything left: the question says so, and "Cancel" refunds nothing.
    declineNext = true;
    await row.locator("button", { hasText: "Refund" }).click();
    expect(asked.at(-1)).toBe("Refund everything left on this payment: 19.99 USD?");
    expect((await api(origin, `/refunds?payment_id=${paymentId}`, key)).body.data).toEqual([]);
    await row.locator('input[name="amount"]').fill("5.00");
    await row.locator("button", { hasText: "Refund" }).click();
    expect(asked.at(-1)).toBe("Refund 5.00 USD of the 19.99 USD left on this payment?");
    expect(await text(".notice")).toMatch(/Refund re_\w+ initiated\./);
    const after = await page.locator(`tr[data-payment="${paymentId}"]`).innerText();
    expect(after).toContain("partially_refunded");
    expect(after).toContain("5.00 USD");
    await page.locator(`tr[data-payment="${paymentId}"]`).locator("button", { hasText: "Refund" }).click();
    expect(asked.at(-1)).toBe("Refund everything left on this payment: 14.99 USD?");
    expect(await text(".notice")).toMatch(/Refund re_\w+ initiated\./);

    await page.goto(`${origin}/dashboard/subscriptions`);
    await page.locator(`tr[data-subscription="${sub.body.id}"]`).locator("button", { hasText: "Cancel now" }).click();
    expect(await text(".notice")).toContain(`Subscription ${sub.body.id} canceled.`);
    expect(await page.locator(`tr[data-subscription="${sub.body.id}"]`).innerText()).toContain("canceled");

    await page.goto(`${origin}/dashboard`);
    // Each chart is drawn for a laptop and for a phone; the stylesheet shows one of the two.
    expect(await page.locator("svg.chart:visible").count()).toBe(2);
    expect(await text("#volume-title")).toContain("USD");
    await page.screenshot({ path: screenshotPath("dashboard-overview.png"), fullPage: true });
  });

  it("a plan form with several bad fields comes back with each problem beside its field and what was typed kept", async () => {
    await page.goto(`${origin}/dashboard/plans`);
    const form = page.locator('form[action="/dashboard/plans"]');
    await form.locator('input[name="name"]').fill("Half-typed plan");
    await form.locator('input[name="currency"]').fill("zzz");
    await form.locator('input[name="price"]').fill("abc");
    await form.locator('input[name="tier_unit_price"]').first().fill("5");
    const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/dashboard/plans") && r.request().method() === "POST"), form.locator('button[type="submit"]').click()]);
    expect(response.status()).toBe(400);
    expect(await text("h1")).toBe("Plans");
    const again = page.locator('form[action="/dashboard/plans"]');
    expect(await again.locator(".form-problems").innerText()).toContain("3 fields need a change");
    const problems = await again.locator("[data-problem]").evaluateAll((els) => els.map((el) => el.getAttribute("data-problem")));
    expect(problems.sort()).toEqual(["currency", "price", "tiers"]);
    // Each problem sits beside its field and describes it.
    for (const name of ["currency", "price"]) {
      const input = again.locator(`input[name="${name}"]`);
      expect(await input.getAttribute("aria-invalid")).toBe("true");
      const described = await input.getAttribute("aria-describedby");
      expect(await page.locator(`#${described}`).getAttribute("data-problem")).toBe(name);
    }
    expect(await again.locator('input[name="name"]').inputValue()).toBe("Half-typed plan");
    expect(await again.locator('input[name="currency"]').inputValue()).toBe("zzz");
    expect(await again.locator('input[name="price"]').inputValue()).toBe("abc");
    expect(await again.locator('input[name="tier_unit_price"]').first().inputValue()).toBe("5");
    const plans = await api(origin, "/subscription-plans?limit=100", key);
    expect(plans.body.data.map((p: { name: string }) => p.name)).not.toContain("Half-typed plan");
  });

  it("refuses a form posted without its CSRF token with a 403 page", async () => {
    await page.goto(`${origin}/dashboard/plans`);
    const form = page.locator('form[action="/dashboard/plans"]');
    await form.locator('input[name="name"]').fill("No token");
    await form.locator('input[name="price"]').fill("1.00");
    await form.locator('input[name="csrf_token"]').evaluate((input) => input.remove());
    const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/dashboard/plans") && r.request().method() === "POST"), form.locator('button[type="submit"]').click()]);
    expect(response.status()).toBe(403);
    expect(await text(".error")).toContain("This form has no CSRF token");
    const plans = await api(origin, "/subscription-plans?limit=100", key);
    expect(plans.body.data.map((p: { name: string }) => p.name)).not.toContain("No token");
  });

  it("adds the live key from the switch, shows live data under a Live data banner, and switches back to test data", async () => {
    const live = await api(origin, "/api/users", liveKey, { name: "Liv Livemode", email: "liv@example.com" });
    expect(live.status, live.text).toBe(201);
    expect(live.body.livemode).toBe(true);
    const banner = page.locator(".mode-banner");
    const colour = () => banner.evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle(el).backgroundColor);

    await page.setViewportSize({ width: 1280, height: 860 });
    await page.goto(`${origin}/dashboard/users`);
    expect(await banner.innerText()).toContain("Test data");
    const testColour = await colour();
    expect(await page.locator("tr[data-user]").allInnerTexts()).toEqual(expect.arrayContaining([expect.stringContaining("Ada Lovelace")]));
    expect(await page.locator(`tr[data-user="${live.body.id}"]`).count()).toBe(0);

    // "Live data" in the sidebar: this session holds no live key yet, so it asks for one.
    await page.click('.sidebar .mode-switch button[value="live"]');
    await page.waitForURL(`${origin}/dashboard/mode/live?back=%2Fdashboard%2Fusers`);
    expect(await text("h1")).toBe("View live data");
    await page.fill('input[name="api_key"]', key);
    await page.click('form[action="/dashboard/mode/live"] button[type="submit"]');
    expect(await text(".error")).toContain("That is a test key");
    await page.fill('input[name="api_key"]', liveKey);
    await page.click('form[action="/dashboard/mode/live"] button[type="submit"]');
    await page.waitForURL(/\/dashboard\/users\?done=live_key_added/);
    expect(await text(".notice")).toContain("you are viewing live data");
    expect(await banner.innerText()).toContain("Live data");
    expect(await colour()).not.toBe(testColour);
    expect(await page.locator('.mode-switch button[aria-pressed="true"]').innerText()).toBe("Live data");
    const liveRows = await page.locator("tr[data-user]").allInnerTexts();
    expect(liveRows).toHaveLength(1);
    expect(liveRows[0]).toContain("Liv Livemode");
    expect(await text(".sidebar")).toContain(liveKey.slice(0, 12));
    await page.screenshot({ path: screenshotPath("dashboard-live.png"), fullPage: true });
    // Test clocks are not in live mode's menu, and their page switches back to test mode.
    expect(await page.locator('nav a[href="/dashboard/test-clocks"]').count()).toBe(0);
    const clocks = await page.goto(`${origin}/dashboard/test-clocks`);
    expect(clocks!.status()).toBe(403);
    expect(await text(".empty")).toContain("Test clocks exist in test mode only");
    await page.click('.main button:has-text("View test data")');
    await page.waitForURL(`${origin}/dashboard/test-clocks`);
    expect(await banner.innerText()).toContain("Test data");
    expect(await text("h1")).toBe("Test clocks");

    // On a phone the switch stays in view with the menu folded; no key is asked again.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${origin}/dashboard/users`);
    expect(await page.locator('nav a[href="/dashboard/payments"]').isVisible()).toBe(false);
    await page.click('.mode-switch button[value="live"]');
    await page.waitForURL(`${origin}/dashboard/users`);
    expect(await banner.innerText()).toContain("Live data");
    expect(await page.locator(`tr[data-user="${live.body.id}"]`).count()).toBe(1);
    await page.click('.mode-switch button[value="test"]');
    await page.waitForURL(`${origin}/dashboard/users`);
    expect(await banner.innerText()).toContain("Test data");
    expect(await page.locator(`tr[data-user="${live.body.id}"]`).count()).toBe(0);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it("a restricted key cannot see or do what its scopes lack", async () => {
    const restricted = await api(origin, "/api/keys", key, { name: "support", scopes: ["users:read", "payouts:read"] });
    expect(restricted.status, restricted.text).toBe(201);
    await page.click('form[action="/dashboard/sign-out"] button');
    await page.waitForURL(`${origin}/dashboard/sign-in`);
    await page.fill('input[name="api_key"]', restricted.body.secret);
    await page.click('button[type="submit"]');
    await page.waitForURL(`${origin}/dashboard`);
    expect(await text(".sidebar")).toContain("(restricted)");
    // The menu lists the pages this key can read, and nothing else (no greyed-out entries).
    expect(await page.locator("nav").innerText()).toBe("Overview\nPayouts\nUsers");
    expect(await page.locator('nav a[href="/dashboard/webhooks"]').count()).toBe(0);
    expect(await page.locator('nav a[href="/dashboard/users"]').count()).toBe(1);

    const webhooks = await page.goto(`${origin}/dashboard/webhooks`);
    expect(webhooks!.status()).toBe(403);
    expect(await text("h1")).toBe("This key cannot read webhook endpoints");
    expect(await text(".error")).toContain("missing_scope");

    // Payouts are readable, but there is no cancel button for this key.
    await page.goto(`${origin}/dashboard/payouts`);
    expect(await page.locator("tr[data-payout]").count()).toBeGreaterThan(0);
    expect(await page.locator('form[action$="/cancel"]').count()).toBe(0);
  });
});
