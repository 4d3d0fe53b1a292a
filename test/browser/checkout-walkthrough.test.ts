// docs/checkout.md's walk-through, run as written: a subscription-mode checkout paid with a card
// that asks for 3-D Secure, in test mode (the blocks after `<!-- checkout-walk-through -->`) and
// in live mode against `npm run fake-stripe` (`<!-- checkout-live-walk-through -->`). Each mode's
// blocks run in order in one bash (`set -euo pipefail`, the reader's own `node`, a recording
// `curl` as in the README's walk-through tests) against `npm run dev` started as the live section
// says (STRIPE_API_BASE and STRIPE_JS_URL at the fake; test mode does not use them). While the
// script waits for the session to complete, Chromium does what the text says the payer does: opens
// the printed URL, types 4000 0027 6000 3184, completes the challenge and lands on success_url.
// Then the script's own answers must show the session complete and the subscription active, and
// the docs' receiver must print the checkout.session.completed it verified. Only addresses
// change: 127.0.0.1:8787 becomes the dev server's, the receivers' 4002 and 4003 free ports.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevProcess, onlyEnv, startDev, untilServing } from "../node/dev-server";
import { RECORDING_CURL, type RecordedCall, readersPath, readmeBlocks, recordedCalls } from "../node/walkthrough";
import { ROOT, type RunningBrowser, findChromium, freePort, launchBrowser, until } from "./harness";

const chromiumPath = findChromium();
const TEST_BLOCKS = readmeBlocks("checkout-walk-through", ["docs/checkout.md"]);
const LIVE_BLOCKS = readmeBlocks("checkout-live-walk-through", ["docs/checkout.md"]);
const YEAR = String(new Date().getUTCFullYear() + 3);

interface Run {
  code: number | null;
  output: string;
  calls: RecordedCall[];
  landedOn: string;
  problems: string[];
}

describe.skipIf(!chromiumPath)("docs/checkout.md's walk-through: a subscription checkout with 3-D Secure, test mode then live", () => {
  let dev: DevProcess;
  let browser: RunningBrowser;
  let fake: ChildProcess;
  let fakeLog = "";
  let trace: string;

  beforeAll(async () => {
    const fakePort = await freePort();
    const fakeOrigin = `http://127.0.0.1:${fakePort}`;
    fake = spawn("npm", ["run", "fake-stripe"], { cwd: ROOT, env: { ...process.env, FAKE_STRIPE_PORT: String(fakePort) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    fake.stdout!.on("data", (chunk) => (fakeLog += chunk));
    fake.stderr!.on("data", (chunk) => (fakeLog += chunk));
    dev = await startDev({ env: { STRIPE_API_BASE: fakeOrigin, STRIPE_JS_URL: `${fakeOrigin}/v3/` } });
    [browser] = await Promise.all([launchBrowser(chromiumPath!), untilServing(dev)]);
    await until("the fake Stripe", async () => fakeLog.includes("Fake Stripe on"), 60_000);
    trace = mkdtempSync(join(tmpdir(), "tender-checkout-walk-"));
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await dev?.stop();
    try {
      if (fake?.pid) process.kill(-fake.pid, "SIGTERM");
    } catch {
      // already gone
    }
    if (trace) rmSync(trace, { recursive: true, force: true });
  });

  /** Runs one mode's blocks; when the script prints the session's URL, `pay` does the payer's part in Chromium. */
  async function walk(name: string, blocks: string[], receiverAddress: string, pay: (page: Page, subscriptionsNow: () => Promise<any[]>) => Promise<void>): Promise<Run> {
    const receiverPort = await freePort();
    const script = blocks
      .join("\n")
      .replaceAll("127.0.0.1:8787", `127.0.0.1:${dev.port}`)
      .replaceAll(`127.0.0.1:${receiverAddress}`, `127.0.0.1:${receiverPort}`)
      .replaceAll(`/dev/tcp/127.0.0.1/${receiverAddress}`, `/dev/tcp/127.0.0.1/${receiverPort}`)
      .replaceAll(`PORT=${receiverAddress}`, `PORT=${receiverPort}`);
    const file = join(trace, `${name}.sh`);
    writeFileSync(file, `set -euo pipefail\n${RECORDING_CURL}\n${script}`);
    const traceDir = join(trace, name);
    mkdirSync(traceDir);
    const bash = spawn("bash", [file], {
      cwd: ROOT,
      env: onlyEnv({ HOME: process.env.HOME, PATH: readersPath(), TRACE: traceDir, LANG: "C.UTF-8", NO_COLOR: "1" }),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    bash.stdout!.on("data", (chunk) => (output += chunk));
    bash.stderr!.on("data", (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => bash.once("exit", resolve));
    const timer = setTimeout(() => process.kill(-bash.pid!, "SIGKILL"), 170_000);
    const problems: string[] = [];
    let landedOn = "";
    try {
      const url = await until(
        "the walk-through to print the session's url",
        async () => {
          if (bash.exitCode !== null) throw new Error(`the walk-through ended (${bash.exitCode}):\n${output}`);
          return output.match(/^Open in your browser: (\S+)$/m)?.[1];
        },
        120_000,
        200,
      );
      const page = await browser.context.newPage();
      page.on("console", (m) => {
        if (m.type() === "error" || m.type() === "warning") problems.push(`${page.url()}: console.${m.type()}: ${m.text()}`);
      });
      page.on("pageerror", (e) => problems.push(`${page.url()}: page error: ${e}`));
      const opened = await page.goto(url);
      expect(opened?.status(), await page.content()).toBe(200);
      // The user's subscriptions as the script's key sees them (the key from its recorded sign-up).
      const subscriptionsNow = async () => {
        const signup = recordedCalls(traceDir).find((c) => c.method === "POST" && c.url.pathname === "/api/accounts")!;
        const res = await fetch(`${dev.origin}/subscriptions`, { headers: { authorization: `Bearer ${name === "live" ? signup.body.live_api_key : signup.body.api_key}` } });
        return ((await res.json()) as { data: any[] }).data;
      };
      await pay(page, subscriptionsNow);
      landedOn = page.url();
      await page.close();
      const code = await exited;
      // The receiver prints each delivery it verified: wait for the one the walk-through promises.
      await until("the receiver to print checkout.session.completed", async () => output.includes("receiver: verified checkout.session.completed"), 30_000, 200).catch(() => undefined);
      return { code, output, calls: recordedCalls(traceDir), landedOn, problems };
    } finally {
      clearTimeout(timer);
      try {
        process.kill(-bash.pid!, "SIGTERM");
      } catch {
        // the receiver had already gone
      }
    }
  }

  function lastRead(run: Run, path: RegExp): RecordedCall {
    const found = run.calls.filter((c) => c.status === 200 && path.test(c.url.pathname));
    expect(found.length, `a 200 for ${path}`).toBeGreaterThan(0);
    return found.at(-1)!;
  }

  function expectWalkedThrough(run: Run, livemode: boolean) {
    expect(run.code, `${run.output}\n--- fake Stripe ---\n${fakeLog}`).toBe(0);
    const made = run.calls.find((c) => c.method === "POST" && c.url.pathname === "/checkout/sessions")!;
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ mode: "subscription", status: "open", livemode });
    // Landed on success_url, with the session's id put in.
    expect(run.landedOn).toBe(`${dev.origin}/health?session=${made.body.id}`);
    const session = lastRead(run, new RegExp(`^/checkout/sessions/${made.body.id}$`));
    expect(session.body).toMatchObject({ id: made.body.id, status: "complete", livemode, subscription_id: expect.stringMatching(/^sub_/), payment_id: expect.stringMatching(/^pay_/) });
    const subscription = lastRead(run, /^\/subscriptions\/sub_\w+$/);
    expect(subscription.body).toMatchObject({ id: session.body.subscription_id, status: "active", livemode });
    expect(run.output).toMatch(/receiver: verified checkout\.session\.completed evt_\w+/);
    expect(run.output).not.toContain("receiver: refused");
    expect(run.problems).toEqual([]);
  }

  it("has its blocks marked, each mode printing the url and waiting for the session", () => {
    for (const blocks of [TEST_BLOCKS, LIVE_BLOCKS]) {
      expect(blocks).toHaveLength(2);
      expect(blocks[0]).toContain("Open in your browser:");
      expect(blocks[1]).toContain("= complete ]");
    }
    expect(TEST_BLOCKS.join("\n")).toContain("127.0.0.1:4002");
    expect(LIVE_BLOCKS.join("\n")).toContain("127.0.0.1:4003");
  });

  it("test mode: types 4000 0027 6000 3184, presses Complete, lands on success_url; the subscription active, checkout.session.completed delivered", async () => {
    const run = await walk("test", TEST_BLOCKS, "4002", async (page, subscriptionsNow) => {
      await page.getByLabel("Name on card").fill("Ada Lovelace");
      await page.getByLabel("Card number").fill("4000 0027 6000 3184");
      await page.getByLabel("Month (MM)").fill("12");
      await page.getByLabel("Year (YYYY)").fill(YEAR);
      await page.getByLabel("Security code").fill("123");
      await Promise.all([page.waitForURL((url) => !url.pathname.startsWith("/pay/checkout/")), page.locator("button").click()]);
      // The sandbox's challenge.
      const complete = page.getByRole("button", { name: "Complete", exact: true });
      await complete.waitFor();
      // While the payer authenticates, the subscription is incomplete.
      expect(await subscriptionsNow()).toEqual([expect.objectContaining({ status: "incomplete", livemode: false })]);
      await Promise.all([page.waitForURL((url) => url.pathname === "/health"), complete.click()]);
    });
    expectWalkedThrough(run, false);
  });

  it("live mode against the fake Stripe: types the card into Stripe.js, completes its challenge, lands on success_url; the subscription active, checkout.session.completed delivered", async () => {
    const run = await walk("live", LIVE_BLOCKS, "4003", async (page, subscriptionsNow) => {
      // The stand-in Stripe.js mounted its card fields into the Payment Element's place.
      await page.locator("#stripe-number").waitFor();
      await page.locator("#stripe-number").fill("4000002760003184");
      await page.locator("#stripe-exp_month").fill("12");
      await page.locator("#stripe-exp_year").fill(YEAR);
      await page.locator("#stripe-cvc").fill("123");
      await page.locator("button").click();
      // Stripe.js handleNextAction's stand-in challenge.
      const complete = page.getByRole("button", { name: "Complete authentication" });
      await complete.waitFor({ timeout: 60_000 });
      expect(await subscriptionsNow()).toEqual([expect.objectContaining({ status: "incomplete", livemode: true })]);
      await Promise.all([page.waitForURL((url) => url.pathname === "/health", { timeout: 60_000 }), complete.click()]);
    });
    expectWalkedThrough(run, true);
    // Stripe asked for authentication, and no card number went through Tender to Stripe.
    expect(fakeLog).toMatch(/^POST \/v1\/payment_methods\/pm_\w+\/attach -> 200/m);
    expect(fakeLog).not.toMatch(/^POST \/v1\/payment_methods -> /m);
  });
});
