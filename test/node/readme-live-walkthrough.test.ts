// The live walk-through (docs/live-mode.md), run as written: every ```sh block after
// a `<!-- live-walk-through -->` line, in order, in one bash (`set -euo pipefail`), with the reader's
// own `node`, against `npm run fake-stripe` and `STRIPE_API_BASE=… npm run dev`, each on a free
// port. Only addresses change: 127.0.0.1:8787 becomes the dev server's, 127.0.0.1:12111 the fake
// Stripe's, the receiver's 4001 a free port, and `wrangler d1 execute --local` gets the dev server's
// --persist-to directory. A `curl` function records each request (as in readme-walkthrough.test.ts)
// so that every answer is checked below, and the fake Stripe's own log shows what Stripe was asked.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevProcess, freePort, onlyEnv, ROOT, startDev, untilServing } from "./dev-server";
import { RECORDING_CURL, type RecordedCall, readersPath, readmeBlocks, recordedCalls } from "./walkthrough";

const BLOCKS = readmeBlocks("live-walk-through", ["docs/live-mode.md"]);

type Call = RecordedCall;

let dev: DevProcess;
let fake: ChildProcess;
let fakeLog = "";
let fakePort: number;
let trace: string;
let run: { code: number | null; output: string; calls: Call[] };

beforeAll(async () => {
  fakePort = await freePort();
  fake = spawn("npm", ["run", "fake-stripe"], { cwd: ROOT, env: { ...process.env, FAKE_STRIPE_PORT: String(fakePort) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  fake.stdout!.on("data", (chunk) => (fakeLog += chunk));
  fake.stderr!.on("data", (chunk) => (fakeLog += chunk));
  dev = await startDev({ env: { STRIPE_API_BASE: `http://127.0.0.1:${fakePort}` } });
  await untilServing(dev);
  const deadline = Date.now() + 30_000;
  while (!fakeLog.includes("Fake Stripe on") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  expect(fakeLog).toContain("Fake Stripe on");
  trace = mkdtempSync(join(tmpdir(), "tender-live-readme-"));
  run = await runWalkThrough(await freePort());
}, 240_000);

afterAll(async () => {
  await dev?.stop();
  try {
    if (fake?.pid) process.kill(-fake.pid, "SIGTERM");
  } catch {
    // already gone
  }
  if (trace) rmSync(trace, { recursive: true, force: true });
});

async function runWalkThrough(receiverPort: number) {
  const walkThrough = BLOCKS.join("\n")
    .replaceAll("127.0.0.1:8787", `127.0.0.1:${dev.port}`)
    .replaceAll("127.0.0.1:12111", `127.0.0.1:${fakePort}`)
    .replaceAll("127.0.0.1:4001", `127.0.0.1:${receiverPort}`)
    .replaceAll("PORT=4001", `PORT=${receiverPort}`)
    .replaceAll("wrangler d1 execute DB_$SHARD --local", `wrangler d1 execute DB_$SHARD --local --persist-to ${dev.persist}`);
  const script = join(trace, "live-walk-through.sh");
  writeFileSync(script, `set -euo pipefail\n${RECORDING_CURL}\n${walkThrough}`);
  const traceDir = join(trace, "calls");
  mkdirSync(traceDir);
  const bash = spawn("bash", [script], {
    cwd: ROOT,
    env: onlyEnv({ HOME: process.env.HOME, PATH: readersPath(), TRACE: traceDir, LANG: "C.UTF-8", NO_COLOR: "1", CI: "true", WRANGLER_SEND_METRICS: "false" }),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  bash.stdout!.on("data", (chunk) => (output += chunk));
  bash.stderr!.on("data", (chunk) => (output += chunk));
  const timer = setTimeout(() => process.kill(-bash.pid!, "SIGKILL"), 180_000);
  const code = await new Promise<number | null>((resolve) => bash.once("exit", resolve));
  clearTimeout(timer);
  // The receiver prints each delivery it verified: wait for the payout.paid the walk-through promises.
  const deadline = Date.now() + 30_000;
  while (!output.includes("receiver: verified payout.paid") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  try {
    process.kill(-bash.pid!, "SIGTERM");
  } catch {
    // the receiver had already gone
  }
  const calls = recordedCalls(traceDir);
  return { code, output, calls };
}

/** The one call matching, asserting there is exactly one (or the last of several, with `last`). */
function callTo(method: string, path: RegExp, options: { last?: boolean } = {}): Call {
  const found = run.calls.filter((c) => c.method === method && path.test(c.url.pathname + c.url.search));
  if (!options.last) expect(found.map((c) => `${c.method} ${c.url.pathname}`), `${method} ${path}`).toHaveLength(1);
  expect(found.length, `${method} ${path}`).toBeGreaterThan(0);
  return found.at(-1)!;
}

describe("docs/live-mode.md, the live walk-through against the fake Stripe", () => {
  it("has its blocks marked and names the addresses this test moves", () => {
    expect(BLOCKS.length).toBeGreaterThanOrEqual(1);
    const text = BLOCKS.join("\n");
    for (const address of ["127.0.0.1:8787", "127.0.0.1:12111", "127.0.0.1:4001", "PORT=4001", "wrangler d1 execute DB_$SHARD --local"]) expect(text).toContain(address);
  });

  it("runs to the end under set -euo pipefail with the reader's node", () => {
    expect(run.code, `${run.output}\n--- fake Stripe ---\n${fakeLog}`).toBe(0);
  });

  it("signs up with both keys, makes a live key with the live secret key, and connects Stripe", () => {
    const signup = callTo("POST", /^\/api\/accounts$/);
    expect(signup.status).toBe(201);
    expect(signup.body).toMatchObject({ api_key: expect.stringMatching(/^sk_test_/), live_api_key: expect.stringMatching(/^sk_live_/) });
    const key = callTo("POST", /^\/api\/keys$/);
    expect(key.status, key.text).toBe(201);
    expect(key.body).toMatchObject({ livemode: true, mode: "live", kind: "restricted", secret: expect.stringMatching(/^rk_live_/) });
    const connect = callTo("PUT", /^\/api\/processor$/);
    expect(connect.status, connect.text).toBe(200);
    expect(connect.body).toMatchObject({ provider: "stripe", livemode: true, secret_key_last4: "0000", webhook_url: `${dev.origin}/processor-webhooks/stripe/${signup.body.id}` });
    // The secrets are never answered.
    expect(connect.text).not.toContain("sk_live_51Acme");
    expect(connect.text).not.toContain("whsec_acme");
  });

  it("charges the subscription through Stripe, then its renewal off-session", () => {
    const sub = callTo("POST", /^\/subscriptions$/);
    expect(sub.status, sub.text).toBe(201);
    expect(sub.body).toMatchObject({ status: "active", livemode: true });
    const payments = callTo("GET", /^\/payments\?subscription_id=sub_\w+$/, { last: true });
    expect(payments.body.data).toHaveLength(2);
    for (const payment of payments.body.data) expect(payment).toMatchObject({ status: "completed", amount: 1999, livemode: true, subscription_id: sub.body.id });
    // Stripe was asked for a first charge and for an off-session renewal: two PaymentIntents.
    expect(fakeLog.match(/^POST \/v1\/payment_intents -> 200/gm)).toHaveLength(2);
    expect(fakeLog).toMatch(/^POST \/v1\/customers -> 200/m);
    // The card came from Stripe.js (the fake's stand-in): Tender attached its PaymentMethod to the
    // customer, and no card number went through Tender to Stripe.
    const saved = callTo("POST", /^\/api\/users\/usr_\w+\/payment-methods$/);
    expect(saved.status, saved.text).toBe(201);
    expect(sub.body.payment_method).toBe(saved.body.id);
    expect(fakeLog).toMatch(/^POST \/v1\/payment_methods\/pm_\w+\/attach -> 200/m);
    expect(fakeLog).not.toMatch(/^POST \/v1\/payment_methods -> /m);
  });

  it("refunds part of the first payment through a Stripe Refund", () => {
    const refund = callTo("POST", /^\/refunds$/);
    expect(refund.status, refund.text).toBe(201);
    expect(refund.body).toMatchObject({ amount: 500, livemode: true });
    expect(fakeLog).toMatch(/^POST \/v1\/refunds -> 200/m);
  });

  it("pays the recipient out through Connect, settled by Stripe's signed payout.paid, and delivers Tender's payout.paid", () => {
    const payout = callTo("POST", /^\/payout$/);
    expect(payout.status, payout.text).toBe(201);
    expect(payout.body).toMatchObject({ status: "pending", amount: 2500, livemode: true });
    expect(fakeLog).toMatch(/^POST \/v1\/transfers -> 200/m);
    expect(fakeLog).toMatch(/^POST \/v1\/payouts -> 200/m);
    const delivered = callTo("POST", /^\/_fake\/events\/deliver$/);
    expect(delivered.body.delivered).toContainEqual({ eventId: expect.stringMatching(/^evt_/), type: "payout.paid", status: 200 });
    // The live key's last read (the test key's 404 comes after it).
    const paid = run.calls.filter((c) => c.url.pathname === `/payouts/${payout.body.id}` && c.status === 200).at(-1)!;
    expect(paid.body).toMatchObject({ id: payout.body.id, status: "paid" });
    expect(run.output).toMatch(/receiver: verified payout\.paid evt_\w+/);
    expect(run.output).toMatch(/receiver: verified payment\.completed evt_\w+/);
    expect(run.output).not.toContain("receiver: refused");
  });

  it("shows none of it to the test key", () => {
    const payout = callTo("POST", /^\/payout$/);
    const asTest = run.calls.filter((c) => c.url.pathname === `/payouts/${payout.body.id}` && c.status === 404);
    expect(asTest).toHaveLength(1);
    expect(asTest[0].body.error).toMatchObject({ type: "not_found_error", code: "resource_missing" });
    const subscriptions = callTo("GET", /^\/subscriptions$/);
    expect(subscriptions.status).toBe(200);
    expect(subscriptions.body.data).toEqual([]);
  });
});
