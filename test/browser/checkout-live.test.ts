// A live checkout, end to end in Chromium: `wrangler dev` with STRIPE_API_BASE and STRIPE_JS_URL
// pointed at the fake Stripe (`npm run fake-stripe`, which serves the Stripe.js stand-in at /v3/),
// an account connected with a publishable key, and a payer who types a card into the Payment
// Element: Stripe.js makes the PaymentMethod, the page posts its id, Tender attaches and charges
// it at the fake Stripe, and the browser lands on success_url. At 1280 and 390 px, no sideways
// scroll and no console error (the page's CSP lets the stand-in's origin script and connect).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LiveTour, ROOT, type RunningWorker, api, findChromium, startLiveTour } from "./harness";

const chromiumPath = findChromium();
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;

describe.skipIf(!chromiumPath)("live hosted checkout in Chromium, against the fake Stripe", () => {
  let tour: LiveTour;
  let worker: RunningWorker;
  let liveKey: string;
  let userId: string;
  let problems: LiveTour["problems"];
  let newPage: LiveTour["newPage"];

  beforeAll(async () => {
    tour = await startLiveTour(chromiumPath!, { name: "Live Checkout Tour", email: "owner@live-checkout.test" });
    ({ worker, liveKey, userId, problems, newPage } = tour);
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await tour?.stop();
  });

  for (const [viewportName, viewport] of Object.entries(VIEWPORTS)) {
    it(`pays a live payment session at ${viewport.width} px through Stripe.js, and lands on success_url`, async () => {
      const made = await api(worker.origin, "/checkout/sessions", liveKey, {
        mode: "payment",
        amount: 2500,
        currency: "usd",
        user_id: userId,
        success_url: `${worker.origin}/health?session={CHECKOUT_SESSION_ID}`,
        cancel_url: `${worker.origin}/health?canceled=1`,
      });
      expect(made.status, made.text).toBe(201);
      const page = await newPage(viewport);
      const response = await page.goto(made.body.url);
      expect(response?.status()).toBe(200);
      // The stand-in Stripe.js mounted its card fields into the Payment Element's place.
      await page.locator("#stripe-number").waitFor();
      const { scrollWidth, clientWidth } = (await page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })")) as { scrollWidth: number; clientWidth: number };
      expect(scrollWidth).toBeLessThanOrEqual(clientWidth);
      await page.screenshot({ path: join(SCREENSHOTS, `checkout-live-${viewportName}.png`), fullPage: true });
      await page.locator("#stripe-number").fill("4242424242424242");
      await page.locator("#stripe-exp_month").fill("12");
      await page.locator("#stripe-exp_year").fill(String(new Date().getUTCFullYear() + 3));
      await page.locator("#stripe-cvc").fill("123");
      await Promise.all([page.waitForURL(/\/health\?session=/), page.locator("button").click()]);
      expect(page.url()).toBe(`${worker.origin}/health?session=${made.body.id}`);
      const read = await api(worker.origin, `/checkout/sessions/${made.body.id}`, liveKey);
      expect(read.body).toMatchObject({ status: "complete", livemode: true, payment_id: expect.stringMatching(/^pay_/) });
      const payment = await api(worker.origin, `/payments/${read.body.payment_id}`, liveKey);
      expect(payment.body).toMatchObject({ status: "completed", amount: 2500, livemode: true });
      await page.close();
    });
  }

  it("saves a card that asks for 3-D Secure on setup in a live setup session: Stripe.js handleNextAction, Complete, then success_url", async () => {
    const made = await api(worker.origin, "/checkout/sessions", liveKey, {
      mode: "setup",
      user_id: userId,
      success_url: `${worker.origin}/health?session={CHECKOUT_SESSION_ID}`,
      cancel_url: `${worker.origin}/health?canceled=1`,
    });
    expect(made.status, made.text).toBe(201);
    const page = await newPage(VIEWPORTS.phone);
    await page.goto(made.body.url);
    await page.locator("#stripe-number").waitFor();
    await page.locator("#stripe-number").fill("4000002760003184");
    await page.locator("#stripe-exp_month").fill("12");
    await page.locator("#stripe-exp_year").fill(String(new Date().getUTCFullYear() + 3));
    await page.locator("#stripe-cvc").fill("123");
    await page.locator("button[type=submit]").click();
    // The page came back asking for the bank's check: the stand-in's challenge over it.
    const challenge = page.locator("[data-fake-stripe-challenge^=seti_]");
    await challenge.waitFor();
    const { scrollWidth, clientWidth } = (await page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })")) as { scrollWidth: number; clientWidth: number };
    expect(scrollWidth).toBeLessThanOrEqual(clientWidth);
    await Promise.all([page.waitForURL(/\/health\?session=/), challenge.getByText("Complete authentication").click()]);
    expect(page.url()).toBe(`${worker.origin}/health?session=${made.body.id}`);
    const read = await api(worker.origin, `/checkout/sessions/${made.body.id}`, liveKey);
    expect(read.body).toMatchObject({ status: "complete", livemode: true, payment_method_id: expect.stringMatching(/^pmt_/) });
    await page.close();
  });

  it("logged no console error or warning", () => {
    expect(problems).toEqual([]);
  });
});
