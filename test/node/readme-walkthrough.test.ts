// The README's shell walk-through, run as written: every ```sh block after a `<!-- walk-through -->`
// line of README.md, then of docs/billing.md and docs/operations.md (which go on from it in the same
// terminal), in order, in one bash (`set -euo pipefail`), against `npm run dev` on a free port, with
// the system's own `node` first on the PATH as in a reader's terminal. Only the addresses change:
// BASE's default 127.0.0.1:8787 becomes the dev server's port and the receiver's 4000 a free one. A `curl` function
// put before the script records each request's arguments, status and body (and otherwise runs curl
// as asked), so every answer is checked below; the README's own receiver must print the
// customer.created and customer.updated deliveries it verified.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevProcess, freePort, onlyEnv, ROOT, startDev, untilServing } from "./dev-server";
import { RECORDING_CURL, readersPath, readmeBlocks, recordedCalls, systemHasNode } from "./walkthrough";

export const WALK_THROUGH_FILES = ["README.md", "docs/billing.md", "docs/operations.md"];
const BLOCKS = readmeBlocks("walk-through", WALK_THROUGH_FILES);

interface Call {
  method: string;
  path: string;
  status: number;
  body: Record<string, any>;
  text: string;
}

let dev: DevProcess;
let trace: string;
let run: { code: number | null; output: string; calls: Call[] };
let receiverPort: number;

beforeAll(async () => {
  dev = await startDev();
  await untilServing(dev);
  receiverPort = await freePort();
  trace = mkdtempSync(join(tmpdir(), "tender-readme-"));
  run = await runWalkThrough();
}, 150_000);

afterAll(async () => {
  await dev?.stop();
  if (trace) rmSync(trace, { recursive: true, force: true });
});

async function runWalkThrough() {
  const walkThrough = BLOCKS.join("\n")
    .replaceAll("127.0.0.1:8787", `127.0.0.1:${dev.port}`)
    .replaceAll("127.0.0.1:4000", `127.0.0.1:${receiverPort}`)
    .replaceAll("/dev/tcp/127.0.0.1/4000", `/dev/tcp/127.0.0.1/${receiverPort}`)
    .replaceAll("PORT=4000", `PORT=${receiverPort}`);
  const script = join(trace, "walk-through.sh");
  writeFileSync(script, `set -euo pipefail\n${RECORDING_CURL}\n${walkThrough}`);
  const traceDir = join(trace, "calls");
  mkdirSync(traceDir);
  // Its own process group: the README leaves its receiver running in the background.
  const bash = spawn("bash", [script], {
    cwd: ROOT,
    env: onlyEnv({ HOME: process.env.HOME, PATH: readersPath(), TRACE: traceDir, LANG: "C.UTF-8" }),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  bash.stdout!.on("data", (chunk) => (output += chunk));
  bash.stderr!.on("data", (chunk) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => bash.once("exit", resolve));
  // The receiver prints each delivery it verified: wait for the two the walk-through promises.
  const deadline = Date.now() + 30_000;
  while (!(output.includes("customer.created") && output.includes("customer.updated")) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  try {
    process.kill(-bash.pid!, "SIGTERM");
  } catch {
    // the receiver had already gone
  }
  const calls: Call[] = recordedCalls(traceDir).map((c) => ({ method: c.method, path: c.url.pathname + c.url.search, status: c.status, body: c.body, text: c.text }));
  return { code, output, calls };
}

describe("README.md, the shell walk-through", () => {
  it("has its blocks marked, and names the addresses this test moves", () => {
    expect(BLOCKS.length).toBeGreaterThanOrEqual(4);
    const text = BLOCKS.join("\n");
    // One BASE, defaulting to the local server, for every URL of the API.
    expect(BLOCKS[0]).toMatch(/^BASE=\$\{BASE:-http:\/\/127\.0\.0\.1:8787\}$/m);
    expect(text.match(/127\.0\.0\.1:8787/g)).toHaveLength(1);
    expect(text).toContain("/dev/tcp/127.0.0.1/4000");
    expect(text).toContain("127.0.0.1:4000");
    expect(text).toContain("PORT=4000");
    // Nothing for the reader to fill in.
    expect(text).not.toMatch(/\b(usr|po|plan|sub|pay|clock|whk|re)_\.\.\.|sk_test_\.\.\./);
  });

  it("runs to the end under set -euo pipefail with the reader's node", () => {
    expect(run.code, run.output).toBe(0);
    const node = spawnSync("bash", ["-c", "command -v node"], { env: onlyEnv({ PATH: readersPath() }), encoding: "utf8" }).stdout.trim();
    if (systemHasNode()) expect(node).not.toContain(join("node_modules", ".bin"));
  });

  it("gets the answer each command promises", () => {
    const { calls } = run;
    const expected: [method: string, path: RegExp, status: number, check: (body: any) => void][] = [
      ["POST", /^\/api\/accounts$/, 201, (b) => expect(b.api_key).toMatch(/^sk_test_/)],
      ["POST", /^\/api\/webhooks$/, 201, (b) => expect(b).toMatchObject({ events: ["customer.created", "customer.updated"], secret: expect.stringMatching(/^whsec_/) })],
      ["POST", /^\/api\/request-id$/, 201, (b) => expect(b).toMatchObject({ purpose: "checkout", metadata: { order: "A-1001" } })],
      ["POST", /^\/api\/users$/, 201, (b) => expect(b).toMatchObject({ object: "user", name: "Ada Lovelace" })],
      ["PUT", /^\/api\/users\/usr_\w+$/, 200, (b) => expect(b).toMatchObject({ id: calls[3].body.id, name: "Ada King" })],
      ["POST", /^\/api\/keys$/, 201, (b) => expect(b).toMatchObject({ kind: "restricted", scopes: ["users:read"] })],
      ["POST", /^\/oauth\/token$/, 200, (b) => expect(b).toMatchObject({ token_type: "Bearer", scope: "users:read" })],
      ["POST", /^\/payout$/, 201, (b) => expect(b).toMatchObject({ status: "pending", amount: 5000, recipient_id: calls[3].body.id })],
      // Paid after the 5-second cancel window the README sleeps through (pending if settling is late).
      ["GET", /^\/payouts\/po_\w+$/, 200, (b) => expect(b).toMatchObject({ id: calls[7].body.id, status: expect.stringMatching(/^(paid|pending)$/) })],
      ["POST", /^\/subscription-plans$/, 201, (b) => expect(b).toMatchObject({ name: "Pro", unit_amount: 1999 })],
      ["POST", /^\/subscription-plans$/, 201, (b) => expect(b).toMatchObject({ name: "Seats", pricing_model: "volume" })],
      ["POST", /^\/subscriptions$/, 201, (b) => expect(b).toMatchObject({ status: "active", quantity: 6, plan_id: calls[10].body.id })],
      ["GET", /^\/payments\?subscription_id=sub_\w+$/, 200, (b) => expect(b.data).toMatchObject([{ subscription_id: calls[11].body.id, amount: 3900, status: "completed" }])],
      ["POST", /^\/refunds$/, 201, (b) => expect(b).toMatchObject({ payment_id: calls[12].body.data[0].id, amount: 500 })],
      ["DELETE", /^\/subscriptions\/sub_\w+\?at_period_end=true$/, 200, (b) => expect(b).toMatchObject({ id: calls[11].body.id, status: "active", cancel_at_period_end: true })],
      ["POST", /^\/api\/test-clocks$/, 201, (b) => expect(b).toMatchObject({ frozen_time: "2026-01-31T12:00:00.000Z" })],
      ["POST", /^\/api\/users$/, 201, (b) => expect(b).toMatchObject({ name: "Grace", test_clock: calls[15].body.id })],
      ["POST", /^\/subscriptions$/, 201, (b) => expect(b).toMatchObject({ status: "active", next_billing_date: "2026-02-28T12:00:00.000Z" })],
      ["POST", /^\/api\/test-clocks\/clock_\w+\/advance$/, 200, (b) => expect(b).toMatchObject({ frozen_time: "2026-03-31T12:00:00.000Z" })],
      // Declined on February 28, retried March 1, 3 and 5, then canceled: what the README says.
      ["GET", /^\/subscriptions\/sub_\w+$/, 200, (b) => expect(b).toMatchObject({ id: calls[17].body.id, status: "canceled", canceled_at: "2026-03-05T12:00:00.000Z" })],
      // Billing depth on a clock of its own: a trial with a coupon, and a metered plan.
      ["POST", /^\/api\/test-clocks$/, 201, (b) => expect(b).toMatchObject({ frozen_time: "2026-05-01T00:00:00.000Z" })],
      ["POST", /^\/api\/users$/, 201, (b) => expect(b).toMatchObject({ name: "Mia", test_clock: calls[20].body.id })],
      ["POST", /^\/coupons$/, 201, (b) => expect(b).toMatchObject({ id: "LAUNCH20", percent_off: 20, duration: "repeating", duration_in_months: 2 })],
      ["POST", /^\/subscriptions$/, 201, (b) => expect(b).toMatchObject({ status: "trialing", trial_end: "2026-05-15T00:00:00.000Z", discount: { coupon: "LAUNCH20" } })],
      ["POST", /^\/subscription-plans$/, 201, (b) => expect(b).toMatchObject({ usage_type: "metered", unit_amount_decimal: "0.35" })],
      ["POST", /^\/subscriptions$/, 201, (b) => expect(b).toMatchObject({ status: "active", plan_id: calls[24].body.id, next_billing_date: "2026-06-01T00:00:00.000Z" })],
      ["POST", /^\/subscriptions\/sub_\w+\/usage$/, 201, (b) => expect(b).toMatchObject({ quantity: 1000, subscription_id: calls[25].body.id })],
      ["POST", /^\/api\/test-clocks\/clock_\w+\/advance$/, 200, (b) => expect(b).toMatchObject({ frozen_time: "2026-06-01T00:01:00.000Z" })],
      // Newest first: the metered period (June 1: 3.50), then the trial's first period (May 15: 19.99 less 20%).
      ["GET", /^\/invoices\?user_id=usr_\w+$/, 200, (b) =>
        expect(b.data.map((i: any) => [i.status, i.subtotal, i.discount, i.total])).toEqual([
          ["paid", 350, 0, 350],
          ["paid", 1999, 400, 1599],
        ])],
      // README "Shards": the account's shard, in the answer's Tender-Shard header and in its key.
      ["GET", /^\/api\/users\/usr_\w+$/, 200, () => expect(calls[29].text).toMatch(new RegExp(`^tender-shard: ${calls[0].body.api_key.charAt(8)}\\r?$`, "im"))],
    ];
    expect(calls.map((c) => `${c.method} ${c.path}`)).toHaveLength(expected.length);
    expected.forEach(([method, path, status, check], i) => {
      const call = calls[i];
      const about = `request ${i + 1}, ${call.method} ${call.path}: ${call.status} ${JSON.stringify(call.body)}`;
      expect(call.method, about).toBe(method);
      expect(call.path, about).toMatch(path);
      expect(call.status, about).toBe(status);
      check(call.body);
    });
  });

  it("delivers customer.created (and customer.updated) to the README's receiver, verified", async () => {
    expect(run.output).toMatch(/receiver: listening on http:\/\/127\.0\.0\.1:\d+\/webhooks/);
    expect(run.output).toMatch(/receiver: verified customer\.created evt_\w+/);
    expect(run.output).toMatch(/receiver: verified customer\.updated evt_\w+/);
    expect(run.output).not.toContain("receiver: refused");
  });

  it("has its receiver listening before the first event, so customer.created is printed first", () => {
    const verified = [...run.output.matchAll(/receiver: verified (\S+)/g)].map((m) => m[1]);
    expect(verified.slice(0, 2)).toEqual(["customer.created", "customer.updated"]);
  });

  it("prints every answer on a line of its own", () => {
    // An answer printed without a newline runs into the next answer: `}{` or `}[`. The background
    // receiver's lines are taken out first: it prints whole lines, but whenever a delivery lands
    // between curl's answer and the README's `echo`, the two processes' output interleaves.
    const answers = run.output.replace(/receiver: [^\n]*\n/g, "");
    expect(answers).not.toMatch(/\}(\{|\[)/);
    // The README's own blocks: every curl whose answer is printed ends its line with `; echo`.
    const commands: string[] = [];
    let open = "";
    for (const line of BLOCKS.join("\n").split("\n")) {
      open += open ? ` ${line.trim()}` : line;
      // A command goes on after a trailing backslash or while a single quote is open.
      if (open.endsWith("\\") || (open.match(/'/g)?.length ?? 0) % 2 === 1) open = open.replace(/\\$/, "");
      else [commands[commands.length], open] = [open, ""];
    }
    // Piped answers (to grep, to `field`) end their own lines.
    const printed = commands.filter((command) => command.startsWith("curl ") && !command.includes(" | "));
    expect(printed.length).toBeGreaterThanOrEqual(4);
    for (const command of printed) expect(command).toMatch(/; echo$/);
  });

  it("sees the payout paid a few seconds later, as the README says", async () => {
    const payout = run.calls[7].body.id;
    const key = run.calls[0].body.api_key;
    const deadline = Date.now() + 30_000;
    let status = "";
    while (Date.now() < deadline) {
      const res = await fetch(`${dev.origin}/payouts/${payout}`, { headers: { authorization: `Bearer ${key}` } });
      status = ((await res.json()) as { status: string }).status;
      if (status !== "pending") break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(status).toBe("paid");
  });
});
