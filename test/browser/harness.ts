// The browser tests' harness, in Node: the Worker under `wrangler dev` (its local D1 migrated into
// a fresh persist directory, on a free port, ENVIRONMENT=development), a webhook receiver on
// 127.0.0.1 that fails until told to accept, and Debian's Chromium driven by playwright-core with
// a fresh profile. Nothing here measures time: waits poll until a condition holds or give up.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { type IncomingMessage, type Server, createServer } from "node:http";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, type Page, chromium } from "playwright-core";

export const ROOT = join(import.meta.dirname, "..", "..");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");

/** Debian's Chromium, or the one CHROMIUM_PATH names; undefined when neither exists. */
export function findChromium(): string | undefined {
  const candidates = [process.env.CHROMIUM_PATH, "/usr/bin/chromium"].filter((p): p is string => Boolean(p));
  return candidates.find((p) => existsSync(p));
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `probe` until it returns a value (not undefined/false) or `limitMs` passes. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, limitMs = 60_000, everyMs = 250): Promise<T> {
  const deadline = Date.now() + limitMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`Gave up waiting for ${what}${last ? `: ${last}` : ""}`);
}

export interface RunningWorker {
  origin: string;
  log: () => string;
  stop: () => Promise<void>;
}

/** Applies the migrations to a fresh local D1 and serves the Worker with `wrangler dev`; `vars` are extra wrangler vars (STRIPE_API_BASE, STRIPE_JS_URL). */
export async function startWorker(vars: Record<string, string> = {}): Promise<RunningWorker> {
  const persist = mkdtempSync(join(tmpdir(), "tender-browser-d1-"));
  const env = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" };
  for (const shard of ["DB_0", "DB_1"]) {
    const migrate = spawnSync(WRANGLER, ["d1", "migrations", "apply", shard, "--local", "--persist-to", persist], { cwd: ROOT, env, encoding: "utf8" });
    if (migrate.status !== 0) throw new Error(`wrangler d1 migrations apply ${shard} failed:\n${migrate.stdout}\n${migrate.stderr}`);
  }
  const port = await freePort();
  let output = "";
  const child: ChildProcess = spawn(
    WRANGLER,
    ["dev", "--persist-to", persist, "--port", String(port), "--ip", "127.0.0.1", "--inspector-port", "0", "--var", "ENVIRONMENT:development", ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`])],
    { cwd: ROOT, env, detached: true, stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const origin = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.pid) {
      const exited = new Promise((r) => child.once("exit", r));
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (child.exitCode === null) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    rmSync(persist, { recursive: true, force: true });
  };
  try {
    await until(
      "wrangler dev to answer /health",
      async () => {
        if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${output}`);
        const res = await fetch(`${origin}/health`);
        return res.ok;
      },
      120_000,
      300,
    );
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\n--- wrangler dev output ---\n${output}`);
  }
  return { origin, log: () => output, stop };
}

export interface Receiver {
  url: string;
  /** Every request received: its body and the status it was answered. */
  received: { body: string; status: number; headers: IncomingMessage["headers"] }[];
  /** From now on, answer 200. Until then every delivery gets a 500. */
  accept: () => void;
  close: () => Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  let accepting = false;
  const received: Receiver["received"] = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const status = accepting ? 200 : 500;
      received.push({ body, status, headers: req.headers });
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(accepting ? "ok, thanks" : `receiver down (request ${received.length})`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    received,
    accept: () => {
      accepting = true;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export interface RunningBrowser {
  context: BrowserContext;
  close: () => Promise<void>;
}

/** Headless Chromium with a fresh profile directory. */
export async function launchBrowser(executablePath: string): Promise<RunningBrowser> {
  const profile = mkdtempSync(join(tmpdir(), "tender-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Runs the Worker's scheduled handler once (the Cron Trigger `npm run dev` calls every minute): renewals, sweeps, expiries. */
export async function runCron(origin: string): Promise<void> {
  const res = await fetch(`${origin}/cdn-cgi/local/scheduled?cron=${encodeURIComponent("* * * * *")}&time=${Date.now()}&format=json`);
  const text = await res.text();
  if (!res.ok) throw new Error(`the scheduled handler answered ${res.status}: ${text.slice(0, 300)}`);
}

/** A JSON call to the API under test. */
export async function api(origin: string, path: string, key: string | undefined, body?: unknown, method?: string) {
  const res = await fetch(`${origin}${path}`, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, text };
}

/** The live stack a live page's tour needs: Tender under `wrangler dev` pointed at the fake Stripe (`npm run fake-stripe`, which serves the Stripe.js stand-in at /v3/), Chromium, and one account connected with a publishable key with one live user. */
export interface LiveTour {
  worker: RunningWorker;
  browser: RunningBrowser;
  fakeOrigin: string;
  liveKey: string;
  userId: string;
  /** Console errors and warnings and page errors of every page `newPage` opened. */
  problems: { page: string; text: string }[];
  /** A page at `viewport` whose console errors, warnings and page errors go to `problems`. */
  newPage: (viewport: { width: number; height: number }) => Promise<Page>;
  stop: () => Promise<void>;
}

/** `vars` are extra wrangler vars for the Worker (e.g. PUBLIC_URL, which hosted_invoice_url needs). */
export async function startLiveTour(executablePath: string, owner: { name: string; email: string }, vars: Record<string, string> = {}): Promise<LiveTour> {
  const fakePort = await freePort();
  const fakeOrigin = `http://127.0.0.1:${fakePort}`;
  let fakeLog = "";
  const fake = spawn("npm", ["run", "fake-stripe"], { cwd: ROOT, env: { ...process.env, FAKE_STRIPE_PORT: String(fakePort) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  fake.stdout!.on("data", (chunk) => (fakeLog += chunk));
  fake.stderr!.on("data", (chunk) => (fakeLog += chunk));
  const [worker, browser] = await Promise.all([startWorker({ ...vars, STRIPE_API_BASE: fakeOrigin, STRIPE_JS_URL: `${fakeOrigin}/v3/` }), launchBrowser(executablePath)]);
  const stop = async () => {
    await browser.close();
    await worker.stop();
    try {
      if (fake.pid) process.kill(-fake.pid, "SIGTERM");
    } catch {
      // already gone
    }
  };
  try {
    return await connectedTour();
  } catch (error) {
    await stop();
    throw error;
  }

  async function connectedTour(): Promise<LiveTour> {
  await until("the fake Stripe", async () => fakeLog.includes("Fake Stripe on"), 60_000);
  const account = await api(worker.origin, "/api/accounts", undefined, owner);
  if (account.status !== 201) throw new Error(`POST /api/accounts answered ${account.status}: ${account.text}`);
  const liveKey: string = account.body.live_api_key;
  const connected = await api(
    worker.origin,
    "/api/processor",
    liveKey,
    {
      provider: "stripe",
      secret_key: "sk_live_51AcmeLiveCheckout0000000000000000",
      publishable_key: "pk_live_51AcmeLiveCheckout0000000000000000",
      webhook_secret: "whsec_acmeplatformsigning000000000000000",
      connect_webhook_secret: "whsec_acmeconnectsigning00000000000000",
    },
    "PUT",
  );
  if (connected.status !== 200) throw new Error(`PUT /api/processor answered ${connected.status}: ${connected.text}`);
  const user = await api(worker.origin, "/api/users", liveKey, { name: "Grace Hopper", email: "grace@example.com" });
  if (user.status !== 201) throw new Error(`POST /api/users answered ${user.status}: ${user.text}`);
  const problems: LiveTour["problems"] = [];
  const newPage = async (viewport: { width: number; height: number }) => {
    const page = await browser.context.newPage();
    await page.setViewportSize(viewport);
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push({ page: page.url(), text: `console.${m.type()}: ${m.text()}` });
    });
    page.on("pageerror", (e) => problems.push({ page: page.url(), text: `page error: ${e}` }));
    return page;
  };
  return { worker, browser, fakeOrigin, liveKey, userId: user.body.id, problems, newPage, stop };
  }
}
