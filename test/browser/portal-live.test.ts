// The live customer portal in Chromium: `wrangler dev` with STRIPE_API_BASE and STRIPE_JS_URL
// pointed at the fake Stripe (`npm run fake-stripe`, which serves the Stripe.js stand-in at /v3/),
// an account connected with a publishable key, and a user who adds a card through the Payment
// Element on their portal: Stripe.js makes the PaymentMethod, the page posts its id, Tender
// attaches it to the user's Customer at the fake Stripe (a SetupIntent), and the portal lists it.
// At 1280 and 390 px, no sideways scroll and no console error.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LiveTour, ROOT, type RunningWorker, api, findChromium, startLiveTour } from "./harness";

const chromiumPath = findChromium();
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;

describe.skipIf(!chromiumPath)("the live customer portal in Chromium, against the fake Stripe", () => {
  let tour: LiveTour;
  let worker: RunningWorker;
  let liveKey: string;
  let userId: string;
  let problems: LiveTour["problems"];
  let newPage: LiveTour["newPage"];

  beforeAll(async () => {
    tour = await startLiveTour(chromiumPath!, { name: "Live Portal Tour", email: "owner@live-portal.test" });
    ({ worker, liveKey, userId, problems, newPage } = tour);
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await tour?.stop();
  });

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
