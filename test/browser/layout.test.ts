// Every dashboard page, with data in it, in test mode and in live mode (the live key added from the
// mode switch), at a desktop (1280 px) and a phone (390 px) width: the document never scrolls sideways (long ids are cut short, tables scroll inside their card where a
// phone is too narrow for them), and the browser logs no console error or warning (a CSP refusal,
// a failed load such as a missing favicon, a script error). At 1280 px no table needs to scroll
// either. At 390 px the menu folds under a Menu button. The widths measured are printed, one line
// per page and viewport.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type Receiver, type RunningBrowser, type RunningWorker, findChromium, launchBrowser, startReceiver, startWorker } from "./harness";
import { type Seeded, seedAccount } from "./seed";

const chromiumPath = findChromium();
const DESKTOP = { width: 1280, height: 860 };
const PHONE = { width: 390, height: 844 };
/** Screenshots of the object pages and a phone's list (not tracked), to look at. */
const SCREENSHOTS = join(ROOT, "test", "browser", "screenshots");

/** What the page measures: the document's widths, and the tables that scroll inside their card. */
const MEASURE = `({
  scrollWidth: document.documentElement.scrollWidth,
  clientWidth: document.documentElement.clientWidth,
  scrollingTables: [...document.querySelectorAll(".table-wrap")].filter((w) => w.scrollWidth > w.clientWidth).length,
})`;

interface Measured {
  scrollWidth: number;
  clientWidth: number;
  scrollingTables: number;
}

describe.skipIf(!chromiumPath)("dashboard layout in Chromium", () => {
  let worker: RunningWorker;
  let receiver: Receiver;
  let browser: RunningBrowser;
  let page: Page;
  let seeded: Seeded;
  /** Console errors and warnings, failed loads and script errors, each with the page it came from. */
  const problems: { page: string; resource: string; text: string }[] = [];

  beforeAll(async () => {
    [worker, receiver] = await Promise.all([startWorker(), startReceiver()]);
    browser = await launchBrowser(chromiumPath!);
    page = await browser.context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push({ page: page.url(), resource: m.location().url, text: `console.${m.type()}: ${m.text()}` });
    });
    page.on("pageerror", (e) => problems.push({ page: page.url(), resource: page.url(), text: `page error: ${e}` }));
    seeded = await seedAccount(worker.origin, receiver);
  });

  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await worker?.stop();
  });

  /**
   * Loads `path` at each width and checks it. An error page (expectedStatus >= 400) is allowed the
   * one console line Chromium writes about its own status ("Failed to load resource" for itself).
   */
  async function measure(path: string, expectedStatus = 200) {
    const lines: string[] = [];
    for (const viewport of [DESKTOP, PHONE]) {
      await page.setViewportSize(viewport);
      const before = problems.length;
      const response = await page.goto(`${worker.origin}${path}`);
      expect(response!.status(), path).toBe(expectedStatus);
      await page.waitForLoadState("load");
      const size = await page.evaluate<Measured>(MEASURE);
      const logged = problems.slice(before).filter((p) => !(expectedStatus >= 400 && p.resource === response!.url() && p.text.includes("Failed to load resource")));
      lines.push(`${path} @${viewport.width}: document ${size.scrollWidth}/${size.clientWidth} px, tables scrolling in their card: ${size.scrollingTables}, console problems: ${logged.length}`);
      expect.soft(size.scrollWidth, `${path} at ${viewport.width} px is ${size.scrollWidth} px wide`).toBeLessThanOrEqual(size.clientWidth);
      if (viewport === DESKTOP) expect.soft(size.scrollingTables, `tables scrolling in their card on ${path} at 1280 px`).toBe(0);
      expect.soft(logged.map((p) => p.text), `${path} at ${viewport.width} px`).toEqual([]);
    }
    console.log(lines.join("\n"));
  }

  /** Signs in with the seeded account's key, unless this browser already has a session. */
  async function signedIn() {
    await page.setViewportSize(DESKTOP);
    if ((await browser.context.cookies(`${worker.origin}/dashboard`)).some((c) => c.name === "tender_session")) return;
    await page.goto(`${worker.origin}/dashboard/sign-in`);
    await page.fill('input[name="api_key"]', seeded.key);
    await page.click('button[type="submit"]');
    await page.waitForURL(`${worker.origin}/dashboard`);
  }

  it("the sign-in page fits at 1280 and 390 px", async () => {
    await measure("/dashboard/sign-in");
  });

  /** Every page of the menu, and an endpoint's and an event's page, in the acting mode. */
  const pagesOf = (endpointId: string, eventId: string) => [
    "/dashboard",
    "/dashboard/webhooks",
    `/dashboard/webhooks/${endpointId}`,
    "/dashboard/events",
    `/dashboard/events/${eventId}`,
    "/dashboard/payouts",
    "/dashboard/payments",
    "/dashboard/subscriptions",
    "/dashboard/plans",
    "/dashboard/users",
    "/dashboard/keys",
  ];

  /** The mode the page shows: its banner's, which the switch's pressed button must agree with. */
  async function modeShown(): Promise<string> {
    const banner = await page.locator(".mode-banner").getAttribute("data-mode");
    const pressed = await page.locator('.mode-switch button[aria-pressed="true"]').getAttribute("value");
    expect(pressed).toBe(banner);
    return banner!;
  }

  it("every page, with data, fits at 1280 and 390 px and logs no console error, in test mode", async () => {
    await signedIn();
    for (const path of [...pagesOf(seeded.endpointId, seeded.eventId), "/dashboard/test-clocks", "/dashboard/mode/live"]) {
      await measure(path);
      expect(await modeShown(), path).toBe("test");
    }
    await measure("/dashboard/no-such-page", 404);
  });

  it("every page, with data, fits at 1280 and 390 px and logs no console error, in live mode", async () => {
    await signedIn();
    // The live key, added from the switch, as a user would.
    await page.goto(`${worker.origin}/dashboard`);
    await page.click('.mode-switch button[value="live"]');
    await page.waitForURL(/\/dashboard\/mode\/live\?/);
    await page.fill('input[name="api_key"]', seeded.liveKey);
    await page.click('form[action="/dashboard/mode/live"] button[type="submit"]');
    await page.waitForURL(/\/dashboard\?done=live_key_added/);
    for (const path of pagesOf(seeded.live.endpointId, seeded.live.eventId)) {
      await measure(path);
      expect(await modeShown(), path).toBe("live");
    }
    // Test clocks exist in test mode only: the page says so (403) and offers the switch.
    await measure("/dashboard/test-clocks", 403);
    expect(await modeShown()).toBe("live");
    await measure("/dashboard/mode/test");
    await measure("/dashboard/no-such-page", 404);
    // Back to test mode for the tests that follow.
    await page.click('.mode-switch button[value="test"]');
    await page.waitForURL(`${worker.origin}/dashboard`);
    expect(await modeShown()).toBe("test");
  });

  it("the pages of a user, a subscription, a payment and a payout fit at 1280 and 390 px and log no console error", async () => {
    await signedIn();
    mkdirSync(SCREENSHOTS, { recursive: true });
    for (const [name, path] of [
      ["user", `/dashboard/users/${seeded.users[0].id}`],
      ["clocked-user", `/dashboard/users/${seeded.clockedUser.id}`],
      ["subscription", `/dashboard/subscriptions/${seeded.subscriptions[0].id}`],
      ["payment", `/dashboard/payments/${seeded.payments[0].id}`],
      ["authorized-payment", `/dashboard/payments/${seeded.authorized.id}`],
      ["payout", `/dashboard/payouts/${seeded.payouts[0].id}`],
    ]) {
      await measure(path);
      expect(await modeShown(), path).toBe("test");
      await page.screenshot({ path: join(SCREENSHOTS, `page-${name}-390.png`), fullPage: true });
    }
    await page.setViewportSize(PHONE);
    await page.goto(`${worker.origin}/dashboard/payments`);
    await page.screenshot({ path: join(SCREENSHOTS, "list-payments-390.png"), fullPage: true });
    await page.goto(`${worker.origin}/dashboard`);
    await page.screenshot({ path: join(SCREENSHOTS, "overview-390.png"), fullPage: true });
    await page.setViewportSize(DESKTOP);
    await page.goto(`${worker.origin}/dashboard/users/${seeded.users[0].id}`);
    await page.screenshot({ path: join(SCREENSHOTS, "page-user-1280.png"), fullPage: true });
    // Linked from the lists, and the clocked user's page shows the clock's time.
    await page.setViewportSize(DESKTOP);
    await page.goto(`${worker.origin}/dashboard/payments`);
    await page.locator(`a[href="/dashboard/payments/${seeded.payments[0].id}"]`).first().click();
    await page.waitForURL(new RegExp(`/dashboard/payments/${seeded.payments[0].id}$`));
    await page.goto(`${worker.origin}/dashboard/users/${seeded.clockedUser.id}`);
    expect(await page.locator("[data-clock-time]").innerText()).toMatch(/Leap-year renewals for the annual plans: 2026-01-31\s+12:00:00 UTC/);
  });

  /** Where each email on the page breaks its line: the characters either side of each break. */
  const EMAIL_BREAKS = `[...document.querySelectorAll(".email")].map((el) => {
    const chars = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) for (let i = 0; i < node.length; i++) chars.push([node, i]);
    const range = document.createRange();
    const breaks = [];
    let lastTop = null;
    chars.forEach(([node, i], at) => {
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) return;
      if (lastTop !== null && rect.top > lastTop + 2) breaks.push(el.textContent[at - 1] + el.textContent[at]);
      lastTop = rect.top;
    });
    return { email: el.textContent, breaks };
  })`;

  it("at 1280 px an email breaks only before its @ or a dot, or after a hyphen; at 390 px amount, status and actions lead each row; chart labels are readable", async () => {
    await signedIn();
    await page.setViewportSize(DESKTOP);
    for (const path of ["/dashboard/users", "/dashboard/subscriptions", "/dashboard/payouts", `/dashboard/users/${seeded.users[0].id}`]) {
      await page.goto(`${worker.origin}${path}`);
      const emails = await page.evaluate<{ email: string; breaks: string[] }[]>(EMAIL_BREAKS);
      expect(emails.length, path).toBeGreaterThan(0);
      for (const { email, breaks } of emails) expect(breaks.filter((pair) => !/^-|^.[@.]$/.test(pair)), `${email} on ${path}`).toEqual([]);
    }

    await page.setViewportSize(PHONE);
    for (const [path, row, first] of [
      ["/dashboard/payments", `tr[data-payment="${seeded.payments[0].id}"]`, "td.num"],
      ["/dashboard/payouts", `tr[data-payout="${seeded.payouts[0].id}"]`, "td.num"],
      ["/dashboard/subscriptions", `tr[data-subscription="${seeded.subscriptions[1].id}"]`, "td.lead"],
    ] as const) {
      await page.goto(`${worker.origin}${path}`);
      const cells = await page.locator(`${row} > td`).evaluateAll((tds) =>
        tds.filter((td) => td.getBoundingClientRect().height > 0).map((td) => ({ lead: td.classList.contains("lead"), top: Math.round(td.getBoundingClientRect().top) })),
      );
      const firstOther = Math.min(...cells.filter((c) => !c.lead).map((c) => c.top));
      for (const cell of cells.filter((c) => c.lead)) expect(cell.top, `a leading cell of ${row} on ${path}`).toBeLessThan(firstOther);
      const top = await page.locator(`${row} ${first}`).first().boundingBox();
      expect(top!.y, `${first} of ${row} comes first on ${path}`).toBeLessThanOrEqual(Math.min(...cells.map((c) => c.top)) + 1);
    }

    // Chart labels: at least 9 px tall on a phone, as on a laptop.
    for (const viewport of [PHONE, DESKTOP]) {
      await page.setViewportSize(viewport);
      await page.goto(`${worker.origin}/dashboard`);
      const heights = await page.locator("svg.chart:visible text").evaluateAll((texts) => texts.map((t) => t.getBoundingClientRect().height));
      expect(heights.length, `chart labels at ${viewport.width} px`).toBeGreaterThan(0);
      expect(Math.min(...heights), `the smallest chart label at ${viewport.width} px`).toBeGreaterThanOrEqual(9);
    }
  });

  it("a form drawn again with its problems fits at 1280 and 390 px", async () => {
    await signedIn();
    const lines: string[] = [];
    for (const viewport of [DESKTOP, PHONE]) {
      await page.setViewportSize(viewport);
      await page.goto(`${worker.origin}/dashboard/plans`);
      const before = problems.length;
      const form = page.locator('form[action="/dashboard/plans"]');
      await form.locator('input[name="name"]').fill("A plan name long enough to wrap on a phone, with more words");
      await form.locator('input[name="currency"]').fill("zzz");
      await form.locator('input[name="price"]').fill("not a price at all, really not");
      await form.locator('input[name="tier_up_to"]').first().fill("seven");
      await Promise.all([page.waitForResponse((r) => r.url().endsWith("/dashboard/plans") && r.request().method() === "POST"), form.locator('button[type="submit"]').click()]);
      await page.waitForLoadState("load");
      expect(await page.locator("[data-problem]").count()).toBe(3);
      const size = await page.evaluate<Measured>(MEASURE);
      const logged = problems.slice(before).filter((p) => !p.text.includes("Failed to load resource: the server responded with a status of 400"));
      lines.push(`POST /dashboard/plans (3 problems) @${viewport.width}: document ${size.scrollWidth}/${size.clientWidth} px, console problems: ${logged.length}`);
      expect.soft(size.scrollWidth).toBeLessThanOrEqual(size.clientWidth);
      expect.soft(logged.map((p) => p.text)).toEqual([]);
    }
    console.log(lines.join("\n"));
  });

  it("lists show the user's name and email and the plan's name, the id on hover", async () => {
    await signedIn();
    await page.setViewportSize(DESKTOP);
    await page.goto(`${worker.origin}/dashboard/subscriptions`);
    const [first] = seeded.subscriptions;
    const row = page.locator(`tr[data-subscription="${first.id}"]`);
    const user = seeded.users.find((u) => u.id === first.user_id)!;
    const plan = seeded.plans.find((p) => p.id === first.plan_id)!;
    expect(await row.locator(`[data-user-ref="${user.id}"]`).innerText()).toBe(`${user.name}\n${user.email}`);
    expect(await row.locator(`[data-user-ref="${user.id}"]`).getAttribute("title")).toBe(user.id);
    expect(await row.locator(`[data-plan-ref="${plan.id}"]`).innerText()).toBe(plan.name);

    await page.goto(`${worker.origin}/dashboard/payouts`);
    const payout = seeded.payouts[0];
    expect(await page.locator(`tr[data-payout="${payout.id}"] [data-user-ref]`).innerText()).toContain(seeded.users[0].name);
  });

  it("a long id is cut in the middle on screen, and its full value is its title and its text", async () => {
    await signedIn();
    await page.setViewportSize(DESKTOP);
    await page.goto(`${worker.origin}/dashboard/webhooks/${seeded.endpointId}`);
    const ids = page.locator("tr[data-delivery] > td:first-child .id");
    const full = (await ids.first().getAttribute("title"))!;
    expect(full).toMatch(/^dlv_[0-9a-z]{52}$/);
    expect(await ids.first().innerText()).toBe(full);
    // On screen: the start, an ellipsis, and the end of the event's part (the endpoint's part is the
    // same on every row); no two deliveries on the page look alike.
    const shown = await ids.evaluateAll((els) => els.map((el) => [...el.children].filter((c) => c.className !== "id-rest").map((c) => (c as unknown as { offsetWidth: number; textContent: string }).textContent).join("|")));
    expect(shown.length).toBeGreaterThan(2);
    expect(shown[0]).toBe(`${full.slice(0, 24)}|${full.slice(24, 30)}`);
    const ends = shown.map((s) => s.split("|")[1]);
    expect(new Set(ends).size).toBe(ends.length);
    const width = await ids.first().evaluate((el) => (el as unknown as { getBoundingClientRect(): { width: number } }).getBoundingClientRect().width);
    expect(width).toBeLessThan(150);
  });

  it("at 390 px the menu folds under a Menu button that opens it", async () => {
    await signedIn();
    await page.setViewportSize(PHONE);
    await page.goto(`${worker.origin}/dashboard`);
    const link = page.locator('nav a[href="/dashboard/payments"]');
    expect(await link.isVisible()).toBe(false);
    await page.getByText("Menu", { exact: true }).click();
    expect(await link.isVisible()).toBe(true);
    await link.click();
    await page.waitForURL(`${worker.origin}/dashboard/payments`);
    expect(await page.locator("h1").innerText()).toBe("Payments");
    // At 1280 px there is no Menu button: the sidebar shows the menu.
    await page.setViewportSize(DESKTOP);
    expect(await page.getByText("Menu", { exact: true }).isVisible()).toBe(false);
    expect(await link.isVisible()).toBe(true);
  });
});
