// /docs in a real browser: the API reference (a pinned copy of @scalar/api-reference served by this
// Worker) renders the operations, logs no console error or warning (a CSP refusal is an error),
// makes no request to another origin, and shows none of Scalar's hosted features that cannot work
// here (Ask AI, Generate MCP, the developer toolbar with Configure / Share / Deploy). The page is
// served at 127.0.0.1, which is where Scalar turns those features on by default.
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningBrowser, type RunningWorker, findChromium, launchBrowser, startWorker } from "./harness";

const chromiumPath = findChromium();
const HOSTED_FEATURES = ["Ask AI", "Generate MCP", "Developer Tools", "Configure", "Share", "Deploy", "VS Code", "Cursor"];

describe.skipIf(!chromiumPath)("/docs in Chromium", () => {
  let worker: RunningWorker;
  let browser: RunningBrowser;
  let page: Page;
  const problems: string[] = [];
  const requests: string[] = [];

  beforeAll(async () => {
    worker = await startWorker();
    browser = await launchBrowser(chromiumPath!);
    page = await browser.context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push(`console.${m.type()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`page error: ${e}`));
    page.on("request", (r) => requests.push(r.url()));
    page.on("response", (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await worker?.stop();
  });

  it("renders the reference without Scalar's hosted features, console errors or requests to another origin", async () => {
    const response = await page.goto(`${worker.origin}/docs`);
    expect(response!.status()).toBe(200);
    await page.getByText("Liveness check").first().waitFor({ timeout: 60_000 });
    expect(await page.getByText("Tender API").count()).toBeGreaterThan(0);

    // Search and the in-page client ("Test Request") are Scalar's own and work offline.
    await page.keyboard.press("Control+k");
    await page.keyboard.type("payout");
    await page.getByRole("dialog").getByText("/payout").first().waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("button", { name: /Test Request/ }).first().click();
    await page.getByText("Close Client").first().waitFor({ state: "attached" });

    // The introduction, the Authorize box for a bearer key, and the client's code sample.
    const intro = await page.locator("body").innerText();
    expect(intro).toContain("Getting started");
    expect(intro).toMatch(/Authori[sz]/);
    expect(await page.getByText("@tender/client").count()).toBeGreaterThan(0);

    const text = await page.locator("body").innerText();
    for (const feature of HOSTED_FEATURES) expect(text, `"${feature}" on /docs`).not.toContain(feature);
    const elsewhere = [...new Set(requests)].filter((url) => new URL(url).origin !== worker.origin);
    expect(elsewhere).toEqual([]);
    // The favicon: browsers ask for it on every page, and a 404 is logged as a console error.
    const icon = await page.request.get(`${worker.origin}/favicon.ico`);
    expect(icon.status()).toBe(200);
    expect(icon.headers()["content-type"]).toBe("image/x-icon");
    expect(problems).toEqual([]);
  });
});
