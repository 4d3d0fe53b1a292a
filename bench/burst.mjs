// `node bench/burst.mjs` (part of `npm run bench`; alone: `npm run bench:burst`): a burst of
// webhook events for ONE endpoint, delivered by Tender under `wrangler dev` on a fresh local D1,
// measured from outside (issue 35: 600 events at 0.4 or more of the same server's GET /health
// rate, every event once). GET /health is measured first (closed loop, the ceiling of this
// server on this machine); then 600 POST /api/users, each emitting customer.created, go out as
// fast as the API takes them, and a receiver in this process (127.0.0.1, answering 200 at once)
// notes each delivery's webhook-id and time. The share is the deliveries a second, from the first
// create sent to the last delivery received, over the /health rate. The section between the
// `burst` markers of bench/RESULTS.md is replaced with the result.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { CHILD_ENV, ROOT, WRANGLER, freePort, replaceResultsSection, runScript, send, sleep } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/burst");
const EVENTS = Number(process.env.BURST_EVENTS ?? 600);
const CONCURRENCY = 16;
const HEALTH_SECONDS = 5;
const DELIVERY_TIMEOUT_MS = 120_000;
const GOAL_SHARE = 0.4;

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

/** A receiver answering 200 at once; notes each delivery's webhook-id and when it came. */
async function receiver() {
  const received = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received.push({ id: String(req.headers["webhook-id"]), t: performance.now() });
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  server.keepAliveTimeout = 60_000;
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { port, received, close: () => server.close() };
}

async function healthRate(port) {
  const healthAgent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const warm = performance.now() + 1000;
  let ok = 0;
  let started = 0;
  const end = performance.now() + 1000 + HEALTH_SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const res = await send(port, healthAgent, { path: "/health" });
        if (res.status === 200 && performance.now() >= warm) {
          if (!started) started = performance.now();
          ok++;
        }
      }
    }),
  );
  healthAgent.destroy();
  return ok / ((performance.now() - started) / 1000);
}

async function main() {
  const load = os.loadavg().map((x) => x.toFixed(2)).join(" ");
  fs.rmSync(TMP, { recursive: true, force: true });
  fs.mkdirSync(TMP, { recursive: true });
  const state = path.join(TMP, "state");
  for (const shard of ["DB_0", "DB_1"]) execFileSync(process.execPath, [WRANGLER, "d1", "migrations", "apply", shard, "--local", "--persist-to", state], { cwd: ROOT, env: CHILD_ENV, stdio: "ignore" });
  const port = await freePort();
  const out = fs.openSync(path.join(TMP, "wrangler-dev.log"), "w");
  const dev = spawn(process.execPath, [WRANGLER, "dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", state, "--var", "ENVIRONMENT:development"], {
    cwd: ROOT,
    env: CHILD_ENV,
    detached: true,
    stdio: ["ignore", out, out],
  });
  const sink = await receiver();
  try {
    for (const deadline = Date.now() + 90_000; ; await sleep(250)) {
      if ((await send(port, agent, { path: "/health" }).catch(() => null))?.status === 200) break;
      if (Date.now() > deadline) throw new Error("Tender did not answer /health within 90 s");
    }
    const acct = JSON.parse((await send(port, agent, { method: "POST", path: "/api/accounts", body: { name: "Burst", email: "burst@example.com" } })).text);
    const hook = await send(port, agent, { method: "POST", path: "/api/webhooks", key: acct.api_key, body: { url: `http://127.0.0.1:${sink.port}/hook`, events: ["customer.created"] } });
    if (hook.status !== 201) throw new Error(`POST /api/webhooks answered ${hook.status}: ${hook.text.slice(0, 300)}`);
    // Warm-up: every code path of the create and the delivery loaded once, then a quiet second.
    for (let i = 0; i < 20; i++) await send(port, agent, { method: "POST", path: "/api/users", key: acct.api_key, body: { name: `Warm ${i}`, email: `warm${i}@example.com` } });
    for (const deadline = Date.now() + 30_000; sink.received.length < 20 && Date.now() < deadline; ) await sleep(50);
    await sleep(1000);
    const health = await healthRate(port);
    sink.received.length = 0;

    const statuses = new Map();
    let next = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < EVENTS) {
          const i = next++;
          const res = await send(port, agent, { method: "POST", path: "/api/users", key: acct.api_key, body: { name: `Burst ${i}`, email: `burst${i}@example.com` } }).catch((e) => ({ status: e.message }));
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }),
    );
    const apiDone = performance.now();
    const created = statuses.get(201) ?? 0;
    const deadline = performance.now() + DELIVERY_TIMEOUT_MS;
    while (new Set(sink.received.map((r) => r.id)).size < created && performance.now() < deadline) await sleep(20);
    const unique = new Set(sink.received.map((r) => r.id)).size;
    const times = sink.received.map((r) => r.t).sort((a, b) => a - b);
    const last = times.at(-1) ?? start;
    const result = {
      load,
      health,
      created,
      statuses,
      received: sink.received.length,
      unique,
      duplicates: sink.received.length - unique,
      apiSeconds: (apiDone - start) / 1000,
      allSeconds: (last - start) / 1000,
      perSecond: unique / ((last - start) / 1000),
      receiverSeconds: (last - (times[0] ?? last)) / 1000,
    };
    result.share = result.perSecond / health;
    report(result);
    if (created !== EVENTS || unique !== created || result.duplicates !== 0) throw new Error(`not every event once: ${created} created, ${unique} received, ${result.duplicates} duplicates`);
  } finally {
    sink.close();
    process.kill(-dev.pid, "SIGTERM");
  }
}

function report(r) {
  const fmt = (x, d = 0) => x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const mix = [...r.statuses].sort().map(([s, c]) => `${s}×${c}`).join(", ");
  const section = [
    "<!-- burst -->",
    `## A burst of ${EVENTS} events for one endpoint (issue 35)`,
    "",
    `Command: \`npm run bench:burst\` (bench/burst.mjs; also part of \`npm run bench\`), run ${new Date().toISOString()} at commit ${commit}, on ${os.cpus().length} CPUs, load average ${r.load} at the start. Tender under \`wrangler dev\` on a fresh local D1; GET /health for ${HEALTH_SECONDS} s (${CONCURRENCY} connections) is the ceiling; then ${EVENTS} POST /api/users (${CONCURRENCY} connections, one account), each emitting customer.created to one endpoint with no rate_limit, whose receiver in the bench process answers 200 at once.`,
    "",
    "| Figure | Value | Goal |",
    "|---|---|---|",
    `| GET /health | ${fmt(r.health)} /s | — |`,
    `| Deliveries/s, first create sent → last delivery received | ${fmt(r.perSecond)} /s (${fmt(r.unique)} in ${fmt(r.allSeconds, 2)} s) | — |`,
    `| **Share of GET /health** | **${fmt(r.share, 2)}** | ≥ ${GOAL_SHARE} ${r.share >= GOAL_SHARE ? "(met)" : "(missed)"} |`,
    `| Every event once | ${r.unique} of ${r.created} received, ${r.duplicates} duplicates | all, none |`,
    "",
    `The API took ${fmt(r.apiSeconds, 2)} s for the ${EVENTS} creates (answers: ${mix}); the receiver saw its first to last delivery over ${fmt(r.receiverSeconds, 2)} s. The same workerd process serves the API and runs the delivery consumer, so the creates and the deliveries share its CPU.`,
    "<!-- /burst -->",
  ].join("\n");
  replaceResultsSection("burst", section);
  console.log(section);
}

runScript("burst", main, 10);
