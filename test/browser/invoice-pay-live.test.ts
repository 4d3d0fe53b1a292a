// The live hosted invoice page in Chromium, against the fake Stripe (`npm run fake-stripe`, whose
// Stripe.js stand-in the pages load through STRIPE_JS_URL): a live subscription's trial ends, the
// Cron Trigger charges it off session and the bank refuses for want of 3-D Secure (the fake told
// to answer authentication_required), so the subscription is past_due with its invoice open. The
// payer opens hosted_invoice_url and pays with the subscription's card, on session: the bank asks
// again, the 3-D Secure page runs Stripe.js handleNextAction, Complete, and the payer lands on the
// invoice's page, paid. At 1280 and 390 px, no sideways scroll, no console error or warning.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LiveTour, ROOT, api, findChromium, runCron, startLiveTour, until } from "./harness";

const chromiumPath = findChromium();
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");
const VIEWPORTS = { desktop: { width: 1280, height: 860 }, phone: { width: 390, height: 844 } } as const;
/** The invoices' hosted_invoice_url origin: the page is found by its id and secret, so the test opens it on the worker's origin. */
const PUBLIC_URL = "http://invoices.test";

describe.skipIf(!chromiumPath)("the live hosted invoice page in Chromium, against the fake Stripe", () => {
  let tour: LiveTour;
  let origin: string;
  let planId: string;
  let paymentMethod: string;

  /** The fake Stripe's control API (docs/live-mode.md, "A fake Stripe"). */
  async function fakeStripe(path: string, body: unknown) {
    const res = await fetch(`${tour.fakeOrigin}/_fake${path}`, { method: "POST", body: JSON.stringify(body) });
    expect(res.status, path).toBe(200);
    return res.json() as Promise<Record<string, any>>;
  }

  beforeAll(async () => {
    tour = await startLiveTour(chromiumPath!, { name: "Live Invoice Tour", email: "owner@live-invoice.test" }, { PUBLIC_URL });
    origin = tour.worker.origin;
    const plan = await api(origin, "/subscription-plans", tour.liveKey, { name: "Pro", price: 30, currency: "usd", interval: "month" });
    expect(plan.status, plan.text).toBe(201);
    planId = plan.body.id;
    // The user's card, made by Stripe.js (the fake's tokenization) and saved as their payment method.
    const pm = await fakeStripe("/payment_methods", { number: "4242424242424242", exp_month: 12, exp_year: new Date().getUTCFullYear() + 3 });
    const saved = await api(origin, `/api/users/${tour.userId}/payment-methods`, tour.liveKey, { processor_token: pm.id });
    expect(saved.status, saved.text).toBe(201);
    paymentMethod = saved.body.id;
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    await tour?.stop();
  });

  /** A live subscription past due: its trial ended and the bank refused the off-session charge for want of 3-D Secure. */
  async function pastDueInvoice(): Promise<{ id: string; url: string; sub: string }> {
    const trialEnd = new Date(Date.now() + 5_000).toISOString();
    const sub = await api(origin, "/subscriptions", tour.liveKey, { user_id: tour.userId, plan_id: planId, payment_method: paymentMethod, trial_end: trialEnd });
    expect(sub.status, sub.text).toBe(201);
    expect(sub.body.status).toBe("trialing");
    // The next charge Stripe is asked for (the trial's end, off session) answers authentication_required.
    await fakeStripe("/faults", { kind: "card", behaviour: "authentication_required", operation: "POST /v1/payment_intents", times: 1 });
    await until("the trial's end", async () => Date.now() > Date.parse(trialEnd) + 1_000, 30_000);
    const invoice = await until(
      "the subscription past due with its invoice open",
      async () => {
        await runCron(origin);
        const read = await api(origin, `/subscriptions/${sub.body.id}`, tour.liveKey);
        if (read.body?.status !== "past_due") return undefined;
        const list = await api(origin, `/invoices?subscription_id=${sub.body.id}&status=open`, tour.liveKey);
        return list.body?.data?.[0] as { id: string; hosted_invoice_url: string } | undefined;
      },
      90_000,
      1_000,
    );
    const events = await api(origin, "/api/events?limit=100", tour.liveKey);
    expect(events.body.data.filter((e: { type: string; data: { id: string } }) => e.type === "invoice.payment_action_required" && e.data.id === invoice.id)).toHaveLength(1);
    return { id: invoice.id, url: invoice.hosted_invoice_url.replace(PUBLIC_URL, origin), sub: sub.body.id };
  }

  async function expectNoSidewaysScroll(page: Page, where: string) {
    const { scrollWidth, clientWidth } = (await page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth })")) as { scrollWidth: number; clientWidth: number };
    expect(scrollWidth, where).toBeLessThanOrEqual(clientWidth);
  }

  for (const [viewportName, viewport] of Object.entries(VIEWPORTS)) {
    it(`at ${viewport.width} px: pays the open invoice with the subscription's card through Stripe.js's 3-D Secure, Complete, and lands on the paid invoice`, async () => {
      const invoice = await pastDueInvoice();
      const page = await tour.newPage(viewport);
      const response = await page.goto(invoice.url);
      expect(response?.status()).toBe(200);
      const pay = page.getByRole("button", { name: "Pay 30.00 USD with Visa •••• 4242" });
      await pay.waitFor();
      // The stand-in Stripe.js mounted the Payment Element for another card.
      await page.locator("#stripe-number").waitFor();
      await expectNoSidewaysScroll(page, `invoice at ${viewport.width} px`);
      await page.screenshot({ path: join(SCREENSHOTS, `invoice-pay-live-${viewportName}.png`), fullPage: true });
      // The bank asks again, on session: the charge that learns it, then the PaymentIntent the payer authenticates.
      await fakeStripe("/faults", { kind: "card", behaviour: "authentication_required", operation: "POST /v1/payment_intents", times: 2 });
      await Promise.all([page.waitForURL((url) => url.pathname.startsWith("/pay/authenticate/")), pay.click()]);
      const challenge = page.locator("[data-fake-stripe-challenge^=pi_]");
      await challenge.waitFor();
      await expectNoSidewaysScroll(page, `challenge at ${viewport.width} px`);
      await page.screenshot({ path: join(SCREENSHOTS, `invoice-pay-live-challenge-${viewportName}.png`), fullPage: true });
      await Promise.all([page.waitForURL((url) => url.href.startsWith(`${invoice.url}?payment_id=`)), challenge.getByRole("button", { name: "Complete authentication" }).click()]);
      await expect(page.textContent("body")).resolves.toContain("30.00 USD paid");
      expect(await page.locator("form").count()).toBe(0);
      await expectNoSidewaysScroll(page, `paid invoice at ${viewport.width} px`);
      await page.screenshot({ path: join(SCREENSHOTS, `invoice-paid-live-${viewportName}.png`), fullPage: true });
      const paid = await api(origin, `/invoices/${invoice.id}`, tour.liveKey);
      expect(paid.body).toMatchObject({ status: "paid", livemode: true, amount_paid: 3000 });
      const payment = await api(origin, `/payments/${paid.body.payment_id}`, tour.liveKey);
      expect(payment.body).toMatchObject({ status: "completed", amount: 3000, livemode: true });
      expect((await api(origin, `/subscriptions/${invoice.sub}`, tour.liveKey)).body.status).toBe("active");
      await page.close();
    });
  }

  it("logged no console error or warning", () => {
    expect(tour.problems).toEqual([]);
  });
});
