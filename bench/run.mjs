// `npm run bench`: starts the Worker locally with `wrangler dev` on a throwaway D1, drives it over
// HTTP from this process, and writes bench/RESULTS.md. Talks to 127.0.0.1 only; every phase is
// bounded in time and requests, and the whole run stays under ~5 minutes.
//
// Phases: GET /health (the ceiling), POST /payout, GET /api/users/{id} (closed loop, fixed
// concurrency); webhook latency (open loop: requests leave at their scheduled times whatever
// happened to earlier ones, and latency counts from the scheduled time, so a stall cannot hide);
// a burst of webhook deliveries; renewing 10,000 due subscriptions through the cron; D1 usage per
// operation from the Tender-D1-* headers; CPU per request from /proc for each process; and a
// V8 CPU profile of the Tender isolate per throughput phase (through wrangler's inspector), mapped
// to modules through the bundle's source map, to say what dominates.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { replaceResultsSection } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TMP_REL = "bench/.tmp";
const STATE_REL = `${TMP_REL}/state`;
const TMP = path.join(ROOT, TMP_REL);
const STATE = path.join(ROOT, STATE_REL);
const RESULTS = path.join(ROOT, "bench/RESULTS.md");

const CONFIG = {
  accounts: 30, // the per-key limit is 1000 requests / 10 s: load is spread over this many keys
  phaseSeconds: 8,
  warmupSeconds: 1,
  calibrationSeconds: 2,
  profileSeconds: 3, // a separate, profiled run after each throughput phase (the profiler slows the Worker)
  concurrencyCandidates: [8, 16, 32, 64],
  openLoopRate: 20, // POST /api/users per second, for webhook latency
  openLoopSeconds: 15,
  burst: 500, // events, for deliveries per second
  // Due subscriptions renewed in one phase (issue 11's target: 100,000 within 3 minutes).
  subscriptions: Number(process.env.BENCH_RENEWALS ?? 100_000),
  d1Samples: 5,
  renewalTimeoutMs: 180_000,
  renewalStallMs: 1_500, // no progress for this long: the queue has drained, run the cron again
  deliveryTimeoutMs: 45_000,
  quietTimeoutMs: 60_000,
  watchdogMs: 1_500_000, // the whole run, start to finish (two renewal runs of up to 5 minutes each)
};
// Issue 11's targets: POST /payout (with an Idempotency-Key) ≥ 0.35 × and GET /api/users/{id}
// ≥ 0.7 × GET /health; webhooks p50 ≤ 50 ms, p99 ≤ 100 ms (issue 35); the renewals within 3 minutes.
const GOALS = { payoutShare: 0.35, userGetShare: 0.7, webhookP50Ms: 50, webhookP99Ms: 100, renewalSeconds: 180, cpuMs: 1 };

const RUN = Date.now().toString(36);
const CARD = { payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2030, cvv: "123" };
const PAYOUT_BODY = { amount: 1000, currency: "usd", description: "bench", ...CARD };
const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();
const CHILD_ENV = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", FORCE_COLOR: "0" };

// ---------------------------------------------------------------------------------------------
// Small utilities

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fmt = (x, digits = 0) => (x === null || x === undefined || Number.isNaN(x) ? "n/a" : x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }));
const log = (...args) => console.log(`[bench ${((performance.now() - STARTED) / 1000).toFixed(1).padStart(5)}s]`, ...args);
const STARTED = performance.now();

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Non-2xx answers and transport errors, per phase: any of them makes the run unclean. */
const problems = [];
function recordProblems(phase, statuses, errors) {
  for (const [status, count] of statuses) problems.push({ phase, what: `HTTP ${status}`, count });
  for (const [message, count] of errors) problems.push({ phase, what: message, count });
}
const bump = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);

// ---------------------------------------------------------------------------------------------
// HTTP client (node:http with keep-alive: cheaper per request than fetch, so the client steals
// less CPU from the server on a small machine)

let PORT = 0;

function send(agent, { method = "GET", path: urlPath, key, body, idem, timeoutMs = 30_000, shard, usage = false }) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    // Sign-up onto a chosen shard (development only).
    const headers = shard === undefined ? {} : { "tender-shard": String(shard) };
    if (key) headers.authorization = `Bearer ${key}`;
    if (payload) {
      headers["content-type"] = "application/json";
      headers["content-length"] = payload.length;
    }
    if (idem) headers["idempotency-key"] = idem;
    // Development answers carry the request's D1 usage (Tender-D1-* headers) when asked.
    if (usage) headers["tender-d1-usage"] = "on";
    const req = http.request({ host: "127.0.0.1", port: PORT, method, path: urlPath, headers, agent }, (res) => {
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({ status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) });
      });
      res.on("error", reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(payload);
  });
}

const setupAgent = new http.Agent({ keepAlive: true, maxSockets: 16 });

/** A setup call that must succeed. */
async function must(request, expected = [200, 201]) {
  const res = await send(setupAgent, request);
  if (!expected.includes(res.status)) {
    throw new Error(`${request.method ?? "GET"} ${request.path} answered ${res.status}: ${res.text.slice(0, 500)}`);
  }
  return res;
}

/**
 * Closed loop: `concurrency` workers, each sending its next request as soon as the previous one
 * answered, for `seconds`. `make(n)` builds request n.
 */
async function closedLoop({ seconds, concurrency, make }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses = new Map();
  const errors = new Map();
  const latencies = [];
  let ok = 0;
  let n = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const request = make(n++);
        const t = performance.now();
        try {
          const res = await send(agent, request);
          latencies.push(performance.now() - t);
          if (res.status >= 200 && res.status < 300) ok++;
          else bump(statuses, res.status);
        } catch (error) {
          bump(errors, String(error.message ?? error));
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { ok, total: n, elapsed, rps: ok / elapsed, statuses, errors, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

// ---------------------------------------------------------------------------------------------
// Processes: wrangler dev and its workerd children, with CPU time from /proc

let dev = null;
const devPids = new Set();

function processTable() {
  const table = new Map();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const after = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      table.set(Number(entry), { ppid: Number(after[1]), ticks: Number(after[11]) + Number(after[12]) });
    } catch {
      // the process ended meanwhile
    }
  }
  return table;
}

function descendants(root, table = processTable()) {
  const children = new Map();
  for (const [pid, { ppid }] of table) {
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(pid);
  }
  const out = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift();
    for (const child of children.get(pid) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

function readProc(pid, file) {
  try {
    return fs.readFileSync(`/proc/${pid}/${file}`, "utf8");
  } catch {
    return "";
  }
}

/**
 * The processes of `wrangler dev`, by role: `worker` is the workerd that runs Tender (and, locally,
 * its D1, Queues and Durable Objects); `proxy` is the workerd that owns the public port and
 * forwards to it; `wrangler` is wrangler's Node process.
 */
function devProcesses() {
  const table = processTable();
  const roles = { worker: [], proxy: [], wrangler: [], other: [] };
  if (!dev) return { roles, table };
  for (const pid of descendants(dev.pid, table)) {
    devPids.add(pid);
    const comm = readProc(pid, "comm").trim();
    const cmdline = readProc(pid, "cmdline").replaceAll("\0", " ");
    if (comm === "workerd") roles[cmdline.includes(`entry=127.0.0.1:${PORT}`) ? "proxy" : "worker"].push(pid);
    else if (cmdline.includes("wrangler-dist/cli.js")) roles.wrangler.push(pid);
    else roles.other.push(pid);
  }
  return { roles, table };
}

/** Busy clock ticks of the whole machine (all CPUs), from the first line of /proc/stat. */
function machineBusyTicks() {
  const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  return fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + (fields[7] ?? 0);
}

function cpuSnapshot() {
  const { roles, table } = devProcesses();
  const ticks = (pids) => pids.reduce((sum, pid) => sum + (table.get(pid)?.ticks ?? 0), 0);
  const usage = process.cpuUsage();
  return {
    at: performance.now(),
    pids: [...roles.worker, ...roles.proxy, ...roles.wrangler].join(","),
    worker: ticks(roles.worker),
    proxy: ticks(roles.proxy),
    wrangler: ticks(roles.wrangler),
    other: ticks(roles.other),
    client: (usage.user + usage.system) / 1000,
    machine: machineBusyTicks(),
  };
}

/** CPU milliseconds each process used between two snapshots. */
function cpuDelta(a, b) {
  const ms = (t) => (t * 1000) / CLK_TCK;
  const ours = ms(b.worker - a.worker + b.proxy - a.proxy + b.wrangler - a.wrangler + b.other - a.other) + (b.client - a.client);
  return {
    wallMs: b.at - a.at,
    worker: ms(b.worker - a.worker),
    proxy: ms(b.proxy - a.proxy),
    wrangler: ms(b.wrangler - a.wrangler),
    client: b.client - a.client,
    // CPU that processes outside this benchmark used meanwhile (other work on a shared machine).
    foreign: Math.max(0, ms(b.machine - a.machine) - ours),
    restarted: a.pids !== b.pids,
  };
}

/** Waits until the worker process is idle (background queue work done): ≤ 2 ticks per 500 ms, twice. */
async function waitQuiet(maxMs = CONFIG.quietTimeoutMs) {
  const started = performance.now();
  const first = cpuSnapshot();
  let previous = first;
  let quiet = 0;
  while (performance.now() - started < maxMs) {
    await sleep(500);
    const current = cpuSnapshot();
    quiet = current.worker - previous.worker <= 2 ? quiet + 1 : 0;
    previous = current;
    if (quiet >= 2) break;
  }
  const delta = cpuDelta(first, previous);
  return { seconds: (performance.now() - started) / 1000, quiet: quiet >= 2, cpu: delta };
}

function killDev(signal) {
  if (!dev) return;
  const pids = new Set([...devPids, ...(dev.exitCode === null ? descendants(dev.pid) : [])]);
  try {
    process.kill(-dev.pid, signal); // the process group we created with detached: true
  } catch {
    // already gone
  }
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

async function stopDev() {
  if (!dev) return;
  killDev("SIGTERM");
  const deadline = performance.now() + 5000;
  while (performance.now() < deadline && [dev.pid, ...devPids].some(alive)) await sleep(100);
  if ([dev.pid, ...devPids].some(alive)) killDev("SIGKILL");
  dev = null;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function wrangler(args) {
  const result = spawnSync("npx", ["wrangler", ...args], { cwd: ROOT, env: CHILD_ENV, encoding: "utf8", timeout: 120_000, maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    throw new Error(`npx wrangler ${args.join(" ")} failed (${result.status ?? result.signal}):\n${(result.stdout ?? "").slice(-2000)}\n${(result.stderr ?? "").slice(-2000)}`);
  }
  return result.stdout;
}

/** `wrangler d1 execute --json` against a shard's bench database; the rows of the last statement. */
function d1Query(sqlText, shard = 0) {
  const out = wrangler(["d1", "execute", `DB_${shard}`, "--local", "--persist-to", STATE_REL, "--json", "--command", sqlText]);
  const parsed = JSON.parse(out.slice(out.indexOf("[")));
  return parsed[parsed.length - 1].results;
}

/** A read-only view of the SQLite file of the shard holding `accountId`, for polling without starting wrangler each time. */
async function openSqlite(accountId) {
  try {
    const { DatabaseSync } = await import("node:sqlite");
    const dir = path.join(STATE, "v3/d1/miniflare-D1DatabaseObject");
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")) {
      const db = new DatabaseSync(path.join(dir, file), { readOnly: true });
      if (db.prepare("SELECT count(*) AS n FROM accounts WHERE id = ?").get(accountId).n === 1) return db;
      db.close();
    }
    return null;
  } catch {
    return null;
  }
}

let devLogOffset = 0;
const DEV_LOG = path.join(TMP, "wrangler-dev.log");

/** Lines of the dev log since the last call that say the Worker was rebuilt (someone edited src/). */
function reloadsSinceLastCheck() {
  let text = "";
  try {
    const fd = fs.openSync(DEV_LOG, "r");
    const size = fs.fstatSync(fd).size;
    const buffer = Buffer.alloc(size - devLogOffset);
    fs.readSync(fd, buffer, 0, buffer.length, devLogOffset);
    fs.closeSync(fd);
    devLogOffset = size;
    text = buffer.toString("utf8");
  } catch {
    return [];
  }
  return text.split("\n").filter((line) => /reloading|local server updated|Detected changes/i.test(line));
}

async function startDev() {
  fs.rmSync(TMP, { recursive: true, force: true });
  fs.mkdirSync(TMP, { recursive: true });
  log(`applying migrations to a fresh ${STATE_REL}`);
  for (const shard of ["DB_0", "DB_1"]) wrangler(["d1", "migrations", "apply", shard, "--local", "--persist-to", STATE_REL]);
  PORT = await freePort();
  INSPECTOR_PORT = await freePort();
  log(`starting wrangler dev on 127.0.0.1:${PORT} (log: ${TMP_REL}/wrangler-dev.log)`);
  const out = fs.openSync(DEV_LOG, "w");
  DEV_STARTED_AT = Date.now();
  dev = spawn(
    "npx",
    [
      "wrangler", "dev", "--ip", "127.0.0.1", "--port", String(PORT), "--persist-to", STATE_REL, "--var", "ENVIRONMENT:development", "--test-scheduled",
      "--inspector-ip", "127.0.0.1", "--inspector-port", String(INSPECTOR_PORT),
    ],
    { cwd: ROOT, env: CHILD_ENV, detached: true, stdio: ["ignore", out, out] },
  );
  fs.closeSync(out);
  const deadline = performance.now() + 90_000;
  while (performance.now() < deadline) {
    if (dev.exitCode !== null) throw new Error(`wrangler dev exited with ${dev.exitCode}; see ${TMP_REL}/wrangler-dev.log`);
    try {
      const res = await send(setupAgent, { path: "/health", timeoutMs: 2000 });
      if (res.status === 200) break;
    } catch {
      // not up yet
    }
    await sleep(250);
  }
  if (performance.now() >= deadline) {
    const tail = fs.readFileSync(DEV_LOG, "utf8").split("\n").filter((l) => l && !l.startsWith("npm warn")).slice(-15).join("\n");
    throw new Error(`GET /health did not answer 200 within 90 s; the end of ${TMP_REL}/wrangler-dev.log:\n${tail}`);
  }
  const { roles } = devProcesses();
  log(`up: worker workerd ${roles.worker.join(",") || "?"}, proxy workerd ${roles.proxy.join(",") || "-"}, wrangler node ${roles.wrangler.join(",") || "?"}`);
  if (roles.worker.length === 0) throw new Error("could not find the workerd process under wrangler dev");
  reloadsSinceLastCheck();
}

// ---------------------------------------------------------------------------------------------
// The phases

const results = { rows: [], d1: [], cpu: [], notes: [], skipped: [], reloads: [] };

function checkReloads(phase) {
  const lines = reloadsSinceLastCheck();
  if (lines.length > 0) {
    results.reloads.push({ phase, lines });
    log(`WARNING: the Worker was rebuilt during ${phase} (src/ changed); its figures are suspect`);
  }
}

/** One closed-loop throughput phase: warm-up, then a measured window with CPU snapshots. */
async function throughputPhase(name, concurrency, make, { drain = false } = {}) {
  await closedLoop({ seconds: CONFIG.warmupSeconds, concurrency, make });
  const before = cpuSnapshot();
  const run = await closedLoop({ seconds: CONFIG.phaseSeconds, concurrency, make });
  const after = cpuSnapshot();
  recordProblems(name, run.statuses, run.errors);
  const cpu = cpuDelta(before, after);
  if (cpu.restarted) results.reloads.push({ phase: name, lines: ["the workerd processes changed during the phase"] });
  const per = (ms) => (run.total > 0 && !cpu.restarted ? ms / run.total : null);
  const row = {
    phase: name,
    requests: run.total,
    ok: run.ok,
    rps: run.rps,
    p50: run.p50,
    p99: run.p99,
    worker: per(cpu.worker),
    proxy: per(cpu.proxy),
    wrangler: per(cpu.wrangler),
    client: per(cpu.client),
    workerUtil: cpu.restarted ? null : cpu.worker / cpu.wallMs,
    totalUtil: cpu.restarted ? null : (cpu.worker + cpu.proxy + cpu.wrangler + cpu.client) / cpu.wallMs,
    foreignCpus: cpu.restarted ? null : cpu.foreign / cpu.wallMs,
  };
  results.cpu.push(row);
  const bad = [...run.statuses].map(([s, c]) => `${c}×${s}`).concat([...run.errors].map(([e, c]) => `${c}×${e}`));
  log(
    `${name}: ${fmt(run.rps)} req/s (${run.ok}/${run.total} 2xx in ${run.elapsed.toFixed(1)} s, c=${concurrency}, p50 ${fmt(run.p50, 1)} ms, p99 ${fmt(run.p99, 1)} ms); ` +
      `CPU/request: worker ${fmt(row.worker, 3)} ms, proxy ${fmt(row.proxy, 3)} ms, wrangler ${fmt(row.wrangler, 3)} ms, client ${fmt(row.client, 3)} ms; ` +
      `other processes on the machine: ${fmt(row.foreignCpus, 2)} CPUs` +
      (bad.length ? `; NON-2xx: ${bad.join(", ")}` : ""),
  );
  checkReloads(name);
  if (drain) {
    // Work the phase left on the queues (payout settlement jobs): part of its cost.
    row.background = await waitQuiet();
    row.backgroundPerRequest = row.background.cpu.restarted ? null : row.background.cpu.worker / Math.max(1, run.total);
    log(
      `${name}: background work after the phase for ${fmt(row.background.seconds, 1)} s${row.background.quiet ? "" : " (still busy)"}, ` +
        `worker CPU ${fmt(row.backgroundPerRequest, 3)} ms per request`,
    );
  }
  row.profile = await profilePhase(name, concurrency, make);
  checkReloads(`${name} (profile)`);
  await waitQuiet();
  return { ...run, cpu: row };
}

// ---------------------------------------------------------------------------------------------
// V8 CPU profile of the Tender isolate, through wrangler's inspector proxy (Chrome DevTools
// protocol). It says where the Worker's own JavaScript time goes; local D1, the queues and
// miniflare's plumbing run in other isolates of the same process and are not in it.

let INSPECTOR_PORT = 0;
let DEV_STARTED_AT = 0; // Date.now() when wrangler dev was spawned

// Source map of the bundle wrangler dev built (.wrangler/tmp/dev-*/index.js.map), to say which
// module each profiled function belongs to.
const B64 = new Map([..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].map((c, i) => [c, i]));

function decodeMappings(mappings) {
  const lines = [];
  let source = 0;
  let origLine = 0;
  let origCol = 0;
  let name = 0;
  for (const line of mappings.split(";")) {
    const segments = [];
    let column = 0;
    if (line) {
      for (const segment of line.split(",")) {
        const values = [];
        let value = 0;
        let shift = 0;
        for (const ch of segment) {
          const digit = B64.get(ch);
          value += (digit & 31) * 2 ** shift;
          if (digit & 32) shift += 5;
          else {
            values.push(value % 2 ? -Math.floor(value / 2) : value / 2);
            value = 0;
            shift = 0;
          }
        }
        column += values[0];
        if (values.length >= 4) {
          source += values[1];
          origLine += values[2];
          origCol += values[3];
          if (values.length >= 5) name += values[4];
          segments.push([column, source]);
        }
      }
    }
    lines.push(segments);
  }
  return lines;
}

/** The newest bundle map wrangler dev wrote since it started, decoded; null when not found. */
function loadBundleMap() {
  try {
    const dir = path.join(ROOT, ".wrangler/tmp");
    const candidates = fs
      .readdirSync(dir)
      .filter((d) => d.startsWith("dev-"))
      .map((d) => path.join(dir, d, "index.js.map"))
      .filter((f) => fs.existsSync(f) && fs.statSync(f).mtimeMs >= DEV_STARTED_AT - 1000)
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
    if (candidates.length === 0) return null;
    const map = JSON.parse(fs.readFileSync(candidates[0], "utf8"));
    return { sources: map.sources.map(moduleOf), lines: decodeMappings(map.mappings) };
  } catch {
    return null;
  }
}

/** A bundle source path as a module: `src/middleware/auth.ts`, `drizzle-orm`, `hono`, ... */
function moduleOf(source) {
  const nm = source.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const parts = source.slice(nm + "node_modules/".length).split("/");
    let pkg = parts[0].startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0];
    // drizzle-orm's published maps point at ../src/*.ts, which resolves to node_modules/src/.
    if (pkg === "src" && fs.existsSync(path.join(ROOT, "node_modules/drizzle-orm", parts.slice(1).join("/").replace(/\.ts$/, ".js")))) pkg = "drizzle-orm";
    return pkg === "wrangler" || pkg === "miniflare" ? "wrangler dev (local-only wrapper)" : pkg;
  }
  const src = source.indexOf("src/");
  if (src >= 0 && !source.includes("bundle-")) return source.slice(src);
  return "wrangler dev (local-only wrapper)";
}

function sourceAt(map, line, column) {
  const segments = map?.lines[line];
  if (!segments || segments.length === 0) return null;
  let lo = 0;
  let hi = segments.length - 1;
  if (segments[0][0] > column) return map.sources[segments[0][1]];
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (segments[mid][0] <= column) lo = mid;
    else hi = mid - 1;
  }
  return map.sources[segments[lo][1]];
}

async function inspectorSession() {
  const ws = new WebSocket(`ws://127.0.0.1:${INSPECTOR_PORT}/ws`, { headers: { Origin: "http://localhost" } });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("inspector: no connection within 5 s")), 5000);
    ws.onopen = () => (clearTimeout(timer), resolve());
    ws.onerror = (event) => (clearTimeout(timer), reject(new Error(`inspector: ${event.message ?? "connection failed"}`)));
  });
  const waiting = new Map();
  ws.onmessage = (event) => {
    const message = JSON.parse(String(event.data));
    const done = waiting.get(message.id);
    if (done) {
      waiting.delete(message.id);
      done(message);
    }
  };
  let id = 0;
  const call = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const mine = ++id;
      const timer = setTimeout(() => (waiting.delete(mine), reject(new Error(`inspector: ${method} timed out`))), 15_000);
      waiting.set(mine, (message) => {
        clearTimeout(timer);
        if (message.error) reject(new Error(`inspector: ${method}: ${message.error.message}`));
        else resolve(message.result);
      });
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  return { call, close: () => ws.close() };
}

/**
 * Self time of the busy samples, by module (Tender's own files under src/, each npm package,
 * the runtime's native code) and by function.
 */
function summarizeProfile(profile, map, top = 8) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map();
  for (const sample of profile.samples) counts.set(sample, (counts.get(sample) ?? 0) + 1);
  const modules = new Map();
  const functions = new Map();
  let busy = 0;
  let gc = 0;
  for (const [nodeId, count] of counts) {
    const frame = byId.get(nodeId).callFrame;
    if (frame.functionName === "(idle)") continue;
    busy += count;
    if (frame.functionName === "(garbage collector)") gc += count;
    const module =
      frame.functionName === "(garbage collector)"
        ? "GC"
        : frame.functionName === "(program)"
          ? "(program): V8 and runtime outside JavaScript"
          : !frame.url
            ? "native built-ins (Response, fetch, crypto, …)"
            : frame.url === "index.js" || frame.url.endsWith("/index.js")
              ? (sourceAt(map, frame.lineNumber, frame.columnNumber) ?? "bundle (unmapped)")
              : frame.url.startsWith("cloudflare-internal:d1")
                ? "workerd's D1 binding (JavaScript)"
                : frame.url;
    const group = module.startsWith("src/") ? "Tender (src/)" : module;
    modules.set(group, (modules.get(group) ?? 0) + count);
    const fn = `${frame.functionName || "(anonymous)"} [${module}]`;
    functions.set(fn, (functions.get(fn) ?? 0) + count);
  }
  const share = ([name, count]) => ({ name, share: count / Math.max(1, busy) });
  return {
    samples: busy,
    mapped: map !== null,
    gc: gc / Math.max(1, busy),
    modules: [...modules].sort((a, b) => b[1] - a[1]).slice(0, top).map(share),
    functions: [...functions].sort((a, b) => b[1] - a[1]).slice(0, top).map(share),
  };
}

/**
 * A V8 CPU profile of the Tender isolate while `work()` runs, saved beside the bench's other files
 * (for Chrome DevTools). Returns the profile and what `work` returned.
 */
async function captureProfile(name, work) {
  const session = await inspectorSession();
  try {
    await session.call("Profiler.enable");
    await session.call("Profiler.setSamplingInterval", { interval: 200 });
    await session.call("Profiler.start");
    const result = await work();
    const { profile } = await session.call("Profiler.stop");
    await session.call("Profiler.disable").catch(() => {});
    fs.writeFileSync(path.join(TMP, `${name.replace(/[^a-z0-9]+/gi, "-").replace(/^-|-$/g, "").toLowerCase()}.cpuprofile`), JSON.stringify(profile));
    return { profile, result };
  } finally {
    session.close();
  }
}

/** A CPU profile of the Worker isolate while `work()` runs, printed module by module and function by function. */
async function profileWhile(name, work) {
  if (!INSPECTOR_PORT) return null;
  const { profile } = await captureProfile(name, work);
  const summary = summarizeProfile(profile, loadBundleMap(), 30);
  log(`${name} profile: ${fmt(summary.samples)} busy samples (the isolate's JavaScript busy ${fmt(((summary.samples * 0.2) / (profile.endTime - profile.startTime)) * 1e5, 1)}% of the time), GC ${fmt(summary.gc * 100)}%`);
  log(`  by module: ${summary.modules.map((t) => `${t.name} ${fmt(t.share * 100, 1)}%`).join(", ")}`);
  for (const t of summary.functions) log(`  ${fmt(t.share * 100, 1)}% ${t.name}`);
  return summary;
}

/** A short profiled closed-loop run; null (with a note) when the inspector cannot be reached. */
async function profilePhase(name, concurrency, make) {
  if (!INSPECTOR_PORT) return null;
  try {
    const { profile, result: run } = await captureProfile(name, () => closedLoop({ seconds: CONFIG.profileSeconds, concurrency, make }));
    const summary = summarizeProfile(profile, loadBundleMap());
    const top = summary.modules.slice(0, 5).map((t) => `${t.name} ${fmt(t.share * 100)}%`).join(", ");
    log(`${name} profile: ${fmt(summary.samples)} busy samples; self time by module: ${top}`);
    return { ...summary, requests: run.total, rps: run.rps };
  } catch (error) {
    results.notes.push(`No CPU profile for ${name}: ${error.message}.`);
    log(`${name} profile: unavailable (${error.message})`);
    return null;
  }
}

async function signup(count) {
  const accounts = [];
  for (let i = 0; i < count; i++) {
    const res = await must({ method: "POST", path: "/api/accounts", body: { name: `Bench ${i}`, email: `bench${i}@example.com` } });
    accounts.push({ key: res.json().api_key });
  }
  // One user per account, for the reads.
  await Promise.all(
    accounts.map(async (account, i) => {
      const res = await must({ method: "POST", path: "/api/users", key: account.key, body: { name: `Reader ${i}`, email: `reader${i}@example.com` } });
      account.userId = res.json().id;
    }),
  );
  return accounts;
}

async function calibrate() {
  // Warm the isolate (JIT) first, so the first candidate is not measured cold.
  await closedLoop({ seconds: 2, concurrency: 16, make: () => ({ path: "/health" }) });
  const tries = [];
  for (const concurrency of CONFIG.concurrencyCandidates) {
    const run = await closedLoop({ seconds: CONFIG.calibrationSeconds, concurrency, make: () => ({ path: "/health" }) });
    recordProblems(`calibration c=${concurrency}`, run.statuses, run.errors);
    tries.push({ concurrency, rps: run.rps });
  }
  // The smallest concurrency within 5% of the best: saturated, without piling up a queue.
  const best = Math.max(...tries.map((t) => t.rps));
  const chosen = tries.find((t) => t.rps >= best * 0.95);
  log(`calibration on GET /health: ${tries.map((t) => `c=${t.concurrency}: ${fmt(t.rps)}/s`).join(", ")} -> c=${chosen.concurrency}`);
  return { chosen: chosen.concurrency, tries };
}

async function webhookPhase(accounts, concurrency) {
  // The receiver: answers 200 at once and records when each delivery arrived.
  const receipts = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const t = performance.now();
      let body = null;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        // counted as unmatched
      }
      receipts.push({ t, eventId: req.headers["webhook-id"], userId: body?.data?.id, type: body?.type });
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const hookPort = server.address().port;
  try {
    const hookAccounts = accounts.slice(0, 2);
    for (const account of hookAccounts) {
      await must({ method: "POST", path: "/api/webhooks", key: account.key, body: { url: `http://127.0.0.1:${hookPort}/hook`, events: ["customer.created"] } });
    }

    // Open loop: request i leaves at t0 + i / rate, whether or not earlier ones have answered.
    const openAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
    const count = CONFIG.openLoopRate * CONFIG.openLoopSeconds;
    const scheduledOf = new Map(); // user id -> scheduled send time
    const statuses = new Map();
    const errors = new Map();
    const apiLatencies = [];
    let maxLag = 0;
    const pending = [];
    const t0 = performance.now() + 200;
    for (let i = 0; i < count; i++) {
      const scheduled = t0 + (i * 1000) / CONFIG.openLoopRate;
      const wait = scheduled - performance.now();
      if (wait > 0) await sleep(wait);
      maxLag = Math.max(maxLag, performance.now() - scheduled);
      pending.push(
        send(openAgent, {
          method: "POST",
          path: "/api/users",
          key: hookAccounts[0].key,
          body: { name: `Hooked ${i}`, email: `hooked${i}@example.com` },
        }).then(
          (res) => {
            apiLatencies.push(performance.now() - scheduled);
            if (res.status === 201) scheduledOf.set(res.json().id, scheduled);
            else bump(statuses, res.status);
          },
          (error) => bump(errors, String(error.message ?? error)),
        ),
      );
    }
    await Promise.all(pending);
    recordProblems("webhook open loop (POST /api/users)", statuses, errors);
    const deadline = performance.now() + CONFIG.deliveryTimeoutMs;
    const firstReceipt = () => {
      const first = new Map();
      for (const r of receipts) if (scheduledOf.has(r.userId) && !first.has(r.userId)) first.set(r.userId, r.t);
      return first;
    };
    while (firstReceipt().size < scheduledOf.size && performance.now() < deadline) await sleep(100);
    const received = firstReceipt();
    const latencies = [...received].map(([userId, t]) => t - scheduledOf.get(userId)).sort((a, b) => a - b);
    const missing = scheduledOf.size - received.size;
    if (missing > 0) problems.push({ phase: "webhook latency", what: `deliveries not received within ${CONFIG.deliveryTimeoutMs / 1000} s of the last send`, count: missing });
    apiLatencies.sort((a, b) => a - b);
    const open = {
      sent: count,
      created: scheduledOf.size,
      received: received.size,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: latencies.at(-1) ?? null,
      apiP50: percentile(apiLatencies, 50),
      apiP99: percentile(apiLatencies, 99),
      maxLag,
    };
    log(
      `webhook latency (open loop, ${CONFIG.openLoopRate}/s for ${CONFIG.openLoopSeconds} s): p50 ${fmt(open.p50)} ms, p99 ${fmt(open.p99)} ms, max ${fmt(open.max)} ms; ` +
        `${open.received}/${open.created} received; API p50 ${fmt(open.apiP50, 1)} ms, p99 ${fmt(open.apiP99, 1)} ms; max send lag ${fmt(maxLag, 1)} ms`,
    );
    checkReloads("webhook latency");
    openAgent.destroy();
    await waitQuiet(15_000);

    // Burst: as many POST /api/users as fast as the API takes them, over two accounts (each with
    // its endpoint), then the time until every delivery has arrived.
    const burstIds = new Set();
    const burstStatuses = new Map();
    const burstErrors = new Map();
    const burstAgent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    let next = 0;
    const burstStart = performance.now();
    let apiDone = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < CONFIG.burst) {
          const i = next++;
          try {
            const res = await send(burstAgent, {
              method: "POST",
              path: "/api/users",
              key: hookAccounts[i % hookAccounts.length].key,
              body: { name: `Burst ${i}`, email: `burst${i}@example.com` },
            });
            if (res.status === 201) burstIds.add(res.json().id);
            else bump(burstStatuses, res.status);
          } catch (error) {
            bump(burstErrors, String(error.message ?? error));
          }
        }
      }),
    );
    apiDone = performance.now();
    burstAgent.destroy();
    recordProblems("webhook burst (POST /api/users)", burstStatuses, burstErrors);
    const burstDeadline = performance.now() + CONFIG.deliveryTimeoutMs;
    const burstReceived = () => {
      const seen = new Map();
      for (const r of receipts) if (burstIds.has(r.userId) && !seen.has(r.userId)) seen.set(r.userId, r.t);
      return seen;
    };
    while (burstReceived().size < burstIds.size && performance.now() < burstDeadline) await sleep(50);
    const seen = [...burstReceived().values()].sort((a, b) => a - b);
    const burstMissing = burstIds.size - seen.length;
    if (burstMissing > 0) problems.push({ phase: "webhook burst", what: `deliveries not received within ${CONFIG.deliveryTimeoutMs / 1000} s`, count: burstMissing });
    const lastAt = seen.at(-1) ?? burstStart;
    const burst = {
      events: burstIds.size,
      received: seen.length,
      allSeconds: (lastAt - burstStart) / 1000,
      apiSeconds: (apiDone - burstStart) / 1000,
      perSecond: seen.length / ((lastAt - burstStart) / 1000),
      spreadPerSecond: seen.length > 1 ? (seen.length - 1) / ((lastAt - seen[0]) / 1000) : null,
      duplicates: receipts.filter((r) => burstIds.has(r.userId)).length - seen.length,
    };
    log(
      `webhook burst: ${burst.received}/${burst.events} events received ${fmt(burst.allSeconds, 2)} s after the first send ` +
        `(${fmt(burst.perSecond)} deliveries/s; the API took ${fmt(burst.apiSeconds, 2)} s for the ${CONFIG.burst} creates)`,
    );
    checkReloads("webhook burst");
    return { open, burst, duplicates: receipts.length - new Set(receipts.map((r) => r.eventId)).size };
  } finally {
    server.closeAllConnections?.();
    server.close();
  }
}

async function d1Phase(account) {
  const headerOf = (res) => ({
    trips: Number(res.headers["tender-d1-round-trips"]),
    read: Number(res.headers["tender-d1-rows-read"]),
    written: Number(res.headers["tender-d1-rows-written"]),
    built: Number(res.headers["tender-d1-statements-built"]),
  });
  // Warm the key (auth is cached per isolate for 30 s, so a warm request costs no auth read).
  await must({ path: `/api/users/${account.userId}`, key: account.key });
  const plan = await must({ method: "POST", path: "/subscription-plans", key: account.key, body: { name: "Bench", price: 9.99, currency: "usd", interval: "month" } });
  const ops = [
    { name: "POST /api/users (Idempotency-Key)", make: (i) => ({ method: "POST", path: "/api/users", key: account.key, idem: `bench-d1-u-${RUN}-${i}`, body: { name: `D1 ${i}`, email: `d1-${i}@example.com` } }) },
    { name: "POST /api/users (no key)", make: (i) => ({ method: "POST", path: "/api/users", key: account.key, body: { name: `D1 plain ${i}`, email: `d1p-${i}@example.com` } }) },
    { name: "GET /api/users/{id}", make: () => ({ path: `/api/users/${account.userId}`, key: account.key }) },
    { name: "POST /payout (Idempotency-Key)", make: (i) => ({ method: "POST", path: "/payout", key: account.key, idem: `bench-d1-p-${RUN}-${i}`, body: { ...PAYOUT_BODY, recipient_id: account.userId } }), needs: "/payout" },
    { name: "PUT /api/users/{id} (Idempotency-Key)", make: (i) => ({ method: "PUT", path: `/api/users/${account.userId}`, key: account.key, idem: `bench-d1-put-${RUN}-${i}`, body: { name: `Reader renamed ${i}`, email: "reader@example.com" } }) },
    { name: "PATCH /subscription-plans/{id} (Idempotency-Key)", make: (i) => ({ method: "PATCH", path: `/subscription-plans/${plan.json().id}`, key: account.key, idem: `bench-d1-plan-${RUN}-${i}`, body: { name: `Bench ${i}` } }), expect: 200 },
    { name: "GET /api/users (list, limit 10)", make: () => ({ path: "/api/users", key: account.key }) },
    { name: "GET /api/users/{id} (another account's id: 404)", make: () => ({ path: `/api/users/${account.otherUserId}`, key: account.key }), expect: 404 },
  ];
  for (const op of ops) {
    if (op.needs && !results.available.has(op.needs)) {
      results.d1.push({ name: op.name, skipped: true });
      continue;
    }
    const samples = [];
    const statuses = new Map();
    for (let i = 0; i < CONFIG.d1Samples; i++) {
      const request = op.make(i);
      const res = await send(setupAgent, { ...request, usage: true });
      if (res.status !== (op.expect ?? (request.method === "POST" ? 201 : 200))) bump(statuses, res.status);
      samples.push(headerOf(res));
    }
    recordProblems(`D1 sample ${op.name}`, statuses, new Map());
    const pick = (k) => median(samples.map((s) => s[k]));
    const spread = (k) => {
      const values = samples.map((s) => s[k]);
      return Math.min(...values) === Math.max(...values) ? "" : ` (${Math.min(...values)}–${Math.max(...values)})`;
    };
    results.d1.push({ name: op.name, trips: pick("trips"), read: pick("read"), written: pick("written"), built: pick("built"), spread: { trips: spread("trips"), read: spread("read"), written: spread("written"), built: spread("built") }, samples: samples.length });
    log(`D1 ${op.name}: ${pick("trips")} round trips, ${pick("read")} rows read, ${pick("written")} rows written`);
  }
}

/**
 * Seeds `count` due subscriptions for one account (on its shard): four templates made over HTTP,
 * a quarter each (a fixed plan, a graduated tiered plan at quantity 6, a metered plan at 0.35 cent
 * per unit with 1,000 units in each clone's period, and the fixed plan with a 20%-off coupon), then
 * cloned with wrangler d1 execute on the account's shard.
 */
async function seedRenewals(target, count, tag) {
  const { key, shard } = target;
  const user = (await must({ method: "POST", path: "/api/users", key, body: { name: "Subscriber", email: "subscriber@example.com" } })).json();
  const planOf = async (name, body) => (await must({ method: "POST", path: "/subscription-plans", key, idem: `bench-plan-${name.replace(/\W/g, "-")}-${tag}`, body: { name, currency: "usd", interval: "month", ...body } })).json();
  const fixed = await planOf("Bench", { price: 10 });
  const tiered = await planOf("Bench tiers", { pricing_model: "graduated", tiers: [{ up_to: 5, unit_price: 7 }, { up_to: null, unit_price: 6.5 }] });
  const metered = await planOf("Bench usage", { usage_type: "metered", unit_amount_decimal: "0.35" });
  const couponId = `BENCH${tag}`.slice(0, 64).replace(/[^A-Za-z0-9_-]/g, "_");
  await must({ method: "POST", path: "/coupons", key, idem: `bench-coupon-${tag}`, body: { id: couponId, name: "Bench 20% off", percent_off: 20, duration: "forever" } });
  const subscribe = async (name, body) =>
    (await must({ method: "POST", path: "/subscriptions", key, idem: `bench-sub-${name}-${tag}`, body: { user_id: user.id, quantity: 1, ...body, ...CARD } })).json();
  const templates = [
    await subscribe("fixed", { plan_id: fixed.id }),
    await subscribe("tiered", { plan_id: tiered.id, quantity: 6 }),
    await subscribe("metered", { plan_id: metered.id }),
    await subscribe("discounted", { plan_id: fixed.id, coupon: couponId }),
  ];
  for (const sub of templates) if (!/^sub_[0-9a-z]{26}$/.test(sub.id)) throw new Error(`unexpected subscription id ${sub.id}`);
  const templateIds = templates.map((t) => `'${t.id}'`).join(", ");
  const rows = d1Query(`SELECT * FROM subscriptions WHERE id IN (${templateIds})`, shard);
  if (rows.length !== templates.length) throw new Error(`the template subscriptions were not found on DB_${shard} with wrangler d1 execute`);
  const columns = Object.keys(rows[0]);
  for (const needed of ["id", "due_at", "periods_billed", "status", "plan_id"]) {
    if (!columns.includes(needed)) throw new Error(`subscriptions has no ${needed} column; the bench's seeding needs updating`);
  }
  const template = rows[0];
  // Clones: distinct ids (a template's time and first random characters, its index, then a counter),
  // due an hour ago. Their next period starts a month from now, so each renews exactly once.
  const dueAt = Date.now() - 60 * 60 * 1000;
  const share = Math.ceil(count / templates.length);
  const counts = templates.map((_, k) => Math.max(0, Math.min(share, count - k * share)));
  const select = (k) => columns.map((c) => (c === "id" ? `'sub_' || substr(t.id, 5, 15) || '${k}' || printf('%010d', n.i)` : c === "due_at" ? String(dueAt) : `t.${c}`));
  const seedSql = templates
    .map(
      (t, k) => `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${counts[k]})
INSERT INTO subscriptions (${columns.join(", ")})
SELECT ${select(k).join(", ")}
FROM subscriptions AS t, n WHERE t.id = '${t.id}';`,
    )
    .join("\n");
  // Each metered clone's usage: 1,000 units in the period it is invoiced for (its first).
  const usageSql = `INSERT INTO usage_records (id, account_id, livemode, subscription_id, period_index, quantity, action, timestamp, created_at)
SELECT 'mbur_' || substr(s.id, 5), s.account_id, s.livemode, s.id, 0, 1000, 'increment', s.billing_anchor, s.created_at
FROM subscriptions AS s WHERE s.plan_id = '${metered.id}' AND s.id <> '${templates[2].id}';`;
  const file = path.join(TMP, `seed-subscriptions-${tag}.sql`);
  fs.writeFileSync(file, `${seedSql}\n${usageSql}\n`);
  wrangler(["d1", "execute", `DB_${shard}`, "--local", "--persist-to", STATE_REL, "--file", path.relative(ROOT, file)]);
  // A metered subscription's first period is billed at its end (periods_billed 0); the others' next.
  const baseOf = `(CASE WHEN plan_id = '${metered.id}' THEN 0 ELSE 1 END)`;
  const where = `account_id = '${template.account_id}' AND id NOT IN (${templateIds})`;
  const [{ n: seeded }] = d1Query(`SELECT COUNT(*) AS n FROM subscriptions WHERE ${where} AND due_at <= ${Date.now()} AND status = 'active'`, shard);
  if (seeded !== count) throw new Error(`seeded ${seeded} due subscriptions on DB_${shard}, expected ${count}`);
  return { shard, accountId: template.account_id, templateIds, where, baseOf, count };
}

/**
 * Renews CONFIG.subscriptions due subscriptions spread evenly over `targets` (an account on each
 * shard used), driven through the cron, which fans out on every shard side by side.
 */
async function renewalPhase(targets, label) {
  const billing = ["/subscription-plans", "/subscriptions"].filter((p) => !results.available.has(p));
  if (billing.length > 0) {
    results.skipped.push(`Renewing ${fmt(CONFIG.subscriptions)} due subscriptions: not available (the Worker serves no ${billing.join(" or ")} route yet).`);
    log(`renewals: skipped (${billing.join(", ")} not served)`);
    return null;
  }
  log(`renewals (${label}): seeding ${fmt(CONFIG.subscriptions)} clones of fixed, tiered, metered and discounted subscriptions over ${targets.map((t) => `DB_${t.shard}`).join(" and ")}`);
  const seeded = [];
  for (const [i, target] of targets.entries()) {
    const count = Math.floor(CONFIG.subscriptions / targets.length) + (i < CONFIG.subscriptions % targets.length ? 1 : 0);
    seeded.push(await seedRenewals(target, count, `${RUN}-${label.replace(/\W/g, "")}-${i}`));
  }
  const countSqlOf = (s) => `SELECT
    SUM(CASE WHEN periods_billed > ${s.baseOf} THEN 1 ELSE 0 END) AS renewed,
    SUM(CASE WHEN status <> 'active' THEN 1 ELSE 0 END) AS not_active
    FROM subscriptions WHERE ${s.where}`;
  const sqlites = await Promise.all(seeded.map((s) => openSqlite(s.accountId)));
  const polled = sqlites.every(Boolean);
  const progress = () => {
    let renewed = 0;
    let notActive = 0;
    for (const [i, s] of seeded.entries()) {
      const row = polled ? sqlites[i].prepare(countSqlOf(s)).get() : d1Query(countSqlOf(s), s.shard)[0];
      renewed += Number(row.renewed ?? 0);
      notActive += Number(row.not_active ?? 0);
    }
    return { renewed, notActive };
  };

  await waitQuiet(15_000);
  const before = cpuSnapshot();
  const started = performance.now();
  let triggers = 0;
  let last = progress();
  let lastChange = performance.now();
  const renewStatuses = new Map();
  const trigger = async () => {
    triggers++;
    // A trigger the busy dev server drops (socket hang up) is counted, not fatal: the next stall triggers again.
    const res = await send(setupAgent, { path: "/__scheduled?cron=*+*+*+*+*", timeoutMs: 60_000 }).catch((error) => ({ status: `error: ${error.message}` }));
    if (res.status !== 200) bump(renewStatuses, res.status);
    lastChange = performance.now();
  };
  await trigger();
  // BENCH_PROFILE_RENEWALS=<seconds>: a V8 CPU profile of the Worker isolate that long, 20 s into
  // the run (the profiler slows the Worker: that run's time is not comparable).
  const profileSeconds = Number(process.env.BENCH_PROFILE_RENEWALS ?? 0);
  if (profileSeconds > 0) await sleep(20_000).then(() => profileWhile(`renewals ${label}`, () => sleep(profileSeconds * 1000)));
  let doneAt = null;
  while (performance.now() - started < CONFIG.renewalTimeoutMs) {
    // Polling reads the SQLite file beside miniflare: each read holds a lock its writer waits on
    // (SQLITE_BUSY, retried by the queue), so once a second is enough.
    await sleep(polled ? 1000 : 2000);
    const now = progress();
    if (now.renewed >= CONFIG.subscriptions) {
      doneAt = performance.now();
      last = now;
      break;
    }
    if (now.renewed !== last.renewed) lastChange = performance.now();
    last = now;
    // The cron enqueues at most MAX_RENEWAL_MESSAGES_PER_RUN chunks per run and shard; once the queue
    // has drained (no progress for renewalStallMs), the next run picks up the rest, as the next minute would.
    if (performance.now() - lastChange > CONFIG.renewalStallMs) await trigger();
  }
  recordProblems(`renewals, ${label} (/__scheduled)`, renewStatuses, new Map());
  for (const db of sqlites) db?.close();
  // Past the time limit, chunks already on the queue still commit: let them, so that the counts
  // below (renewed periods, payments, invoices) are read at one quiet moment, not mid-commit.
  if (doneAt === null) await waitQuiet(120_000);
  // The CPU of all the work counted below (not only the time limit's), so that per renewal it is
  // the CPU of all renewals over their number.
  const after = cpuSnapshot();
  const total = { renewed: 0, notActive: 0, payments: 0, invoices: 0, periods: 0, twice: 0 };
  for (const s of seeded) {
    // One statement per shard, so its counts are of one moment even if a chunk still commits.
    const [final] = d1Query(
      `SELECT
        (SELECT SUM(CASE WHEN periods_billed > ${s.baseOf} THEN 1 ELSE 0 END) FROM subscriptions WHERE ${s.where}) AS renewed,
        (SELECT SUM(CASE WHEN status <> 'active' THEN 1 ELSE 0 END) FROM subscriptions WHERE ${s.where}) AS not_active,
        (SELECT COUNT(*) FROM payments WHERE account_id = '${s.accountId}' AND subscription_id IS NOT NULL AND subscription_id NOT IN (${s.templateIds})) AS payments,
        (SELECT COUNT(*) FROM invoices WHERE account_id = '${s.accountId}' AND subscription_id NOT IN (${s.templateIds})) AS invoices,
        (SELECT COUNT(DISTINCT subscription_id || ':' || period_index) FROM invoices WHERE account_id = '${s.accountId}' AND subscription_id NOT IN (${s.templateIds})) AS periods,
        (SELECT COUNT(*) FROM subscriptions WHERE ${s.where} AND periods_billed > ${s.baseOf} + 1) AS twice`,
      s.shard,
    );
    total.renewed += Number(final.renewed ?? 0);
    total.notActive += Number(final.not_active ?? 0);
    total.payments += Number(final.payments);
    total.invoices += Number(final.invoices);
    total.periods += Number(final.periods);
    total.twice += Number(final.twice);
  }
  const cpu = cpuDelta(before, after);
  if (cpu.restarted) results.reloads.push({ phase: `renewals, ${label}`, lines: ["the workerd processes changed during the phase"] });
  const renewal = {
    label,
    shards: targets.length,
    seconds: doneAt === null ? null : (doneAt - started) / 1000,
    renewed: total.renewed,
    notActive: total.notActive,
    payments: total.payments,
    invoices: total.invoices,
    withinLimit: last.renewed,
    triggers,
    workerCpuPerSub: cpu.restarted ? null : cpu.worker / Math.max(1, total.renewed),
    foreignCpus: cpu.restarted ? null : cpu.foreign / cpu.wallMs,
  };
  const phase = `renewals, ${label}`;
  if (doneAt === null) problems.push({ phase, what: `only ${last.renewed} of ${CONFIG.subscriptions} renewed within ${CONFIG.renewalTimeoutMs / 1000} s (${renewal.renewed} once the queue was quiet)`, count: CONFIG.subscriptions - last.renewed });
  if (renewal.notActive > 0) problems.push({ phase, what: "subscriptions left past_due or canceled", count: renewal.notActive });
  // One payment per renewed period: more would be a period charged twice.
  if (renewal.payments !== renewal.renewed) problems.push({ phase, what: `${renewal.payments} payments for ${renewal.renewed} renewed periods`, count: Math.abs(renewal.payments - renewal.renewed) });
  // One invoice per renewed period, never two for one period.
  if (total.invoices !== renewal.renewed || total.periods !== total.invoices) problems.push({ phase, what: `${total.invoices} invoices (${total.periods} periods) for ${renewal.renewed} renewed periods`, count: Math.abs(total.invoices - renewal.renewed) });
  if (total.twice > 0) problems.push({ phase, what: "subscriptions that advanced more than one period", count: total.twice });
  log(
    `renewals (${label}): ${fmt(renewal.renewed)}/${fmt(CONFIG.subscriptions)} renewed in ${renewal.seconds === null ? `n/a (timed out; ${fmt(renewal.withinLimit)} within the limit)` : `${fmt(renewal.seconds, 1)} s`} ` +
      `with ${triggers} cron trigger(s); ${fmt(renewal.payments)} payments, ${fmt(renewal.invoices)} invoices; worker CPU ${fmt(renewal.workerCpuPerSub, 2)} ms per renewal`,
  );
  checkReloads(phase);
  return renewal;
}

// ---------------------------------------------------------------------------------------------
// Report

function machine() {
  const cpuinfo = fs.readFileSync("/proc/cpuinfo", "utf8");
  const meminfo = fs.readFileSync("/proc/meminfo", "utf8");
  const memKb = Number(/MemTotal:\s+(\d+)/.exec(meminfo)?.[1] ?? 0);
  let wranglerVersion = "unknown";
  try {
    wranglerVersion = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/wrangler/package.json"), "utf8")).version;
  } catch {
    // leave unknown
  }
  let commit = "unknown";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  } catch {
    // not a git checkout
  }
  return {
    nproc: os.availableParallelism?.() ?? os.cpus().length,
    cpu: /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1]?.trim() ?? "unknown",
    memGiB: memKb / 1024 / 1024,
    node: process.version,
    wrangler: wranglerVersion,
    kernel: `${os.type()} ${os.release()}`,
    loadavg: os.loadavg().map((x) => x.toFixed(2)).join(" "),
    commit,
  };
}

/** A queue consumer's settings from wrangler.toml, e.g. { max_batch_size: "10", max_batch_timeout: "0" }. */
function queueConsumer(queue) {
  try {
    const toml = fs.readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
    for (const block of toml.split("[[queues.consumers]]").slice(1)) {
      const body = block.split(/\n\s*\[/)[0];
      if (!new RegExp(`queue\\s*=\\s*"${queue}"`).test(body)) continue;
      return Object.fromEntries([...body.matchAll(/^\s*(\w+)\s*=\s*"?([^"\n]+)"?/gm)].map((m) => [m[1], m[2].trim()]));
    }
  } catch {
    // no wrangler.toml
  }
  return null;
}

/** An exported numeric constant of a source file, e.g. RENEWAL_CHUNK_SIZE; null when absent. */
function sourceConstant(file, name) {
  try {
    const m = new RegExp(`export const ${name}\\s*=\\s*([\\d_]+)`).exec(fs.readFileSync(path.join(ROOT, file), "utf8"));
    return m ? Number(m[1].replaceAll("_", "")) : null;
  } catch {
    return null;
  }
}

function table(headers, rows) {
  const lines = [`| ${headers.join(" | ")} |`, `|${headers.map(() => "---").join("|")}|`];
  for (const row of rows) lines.push(`| ${row.join(" | ")} |`);
  return lines.join("\n");
}

function report({ date, env, concurrency, calibration, health, payout, userGet, hooks, renewals }) {
  const renewal = renewals[0];
  const met = (ok) => (ok === null ? "n/a" : ok ? "yes" : "**no**");
  const rows = [];
  rows.push(["GET /health throughput (the ceiling)", `${fmt(health.rps)} req/s`, "—", "—"]);
  if (payout) {
    const share = payout.rps / health.rps;
    rows.push(["POST /payout throughput", `${fmt(payout.rps)} req/s = ${fmt(share, 2)} × ceiling`, `≥ ${GOALS.payoutShare} × ceiling`, met(share >= GOALS.payoutShare)]);
  } else {
    rows.push(["POST /payout throughput", "not available", `≥ ${GOALS.payoutShare} × ceiling`, "n/a"]);
  }
  const userShare = userGet.rps / health.rps;
  rows.push(["GET /api/users/{id} throughput", `${fmt(userGet.rps)} req/s = ${fmt(userShare, 2)} × ceiling`, `≥ ${GOALS.userGetShare} × ceiling`, met(userShare >= GOALS.userGetShare)]);
  const o = hooks.open;
  rows.push([`Webhook latency p50 (open loop, ${CONFIG.openLoopRate}/s × ${CONFIG.openLoopSeconds} s)`, `${fmt(o.p50)} ms`, `≤ ${GOALS.webhookP50Ms} ms`, met(o.p50 === null ? null : o.p50 <= GOALS.webhookP50Ms)]);
  rows.push(["Webhook latency p99", `${fmt(o.p99)} ms`, `≤ ${GOALS.webhookP99Ms} ms`, met(o.p99 === null ? null : o.p99 <= GOALS.webhookP99Ms)]);
  rows.push(["Webhook latency max", `${fmt(o.max)} ms (${o.received}/${o.created} received)`, "—", "—"]);
  const b = hooks.burst;
  rows.push([
    `Webhook deliveries/s (burst of ${CONFIG.burst})`,
    `${fmt(b.perSecond)} /s (all ${b.received}/${b.events} within ${fmt(b.allSeconds, 2)} s of the first send; ${fmt(b.spreadPerSecond)} /s from first to last arrival)`,
    "—",
    "—",
  ]);
  for (const renewal of renewals.filter(Boolean)) {
    rows.push([
      `Renew ${fmt(CONFIG.subscriptions)} due subscriptions (a quarter each fixed, tiered, metered, discounted), ${renewal.label}`,
      renewal.seconds === null ? `timed out: ${fmt(renewal.withinLimit)} renewed in ${CONFIG.renewalTimeoutMs / 1000} s (then ${fmt(renewal.renewed)} once the queued chunks committed: ${fmt(renewal.payments)} payments, ${fmt(renewal.invoices)} invoices)` : `${fmt(renewal.seconds, 1)} s (${fmt(CONFIG.subscriptions / renewal.seconds)} /s, ${renewal.triggers} cron runs; ${fmt(renewal.payments)} payments and ${fmt(renewal.invoices)} invoices for ${fmt(renewal.renewed)} periods)`,
      `≤ ${GOALS.renewalSeconds} s, one invoice and one charge per period`,
      met(renewal.seconds !== null && renewal.seconds <= GOALS.renewalSeconds && renewal.payments === renewal.renewed && renewal.invoices === renewal.renewed),
    ]);
  }
  if (!renewal) rows.push([`Renew ${fmt(CONFIG.subscriptions)} due subscriptions`, "not available", "—", "n/a"]);
  const cpuPhases = results.cpu;
  for (const c of cpuPhases) {
    rows.push([`CPU per request (mean), ${c.phase} (worker workerd)`, `${fmt(c.worker, 3)} ms`, `≤ ${GOALS.cpuMs} ms`, met(c.worker === null ? null : c.worker <= GOALS.cpuMs)]);
  }
  const medianCpu = median(cpuPhases.map((c) => c.worker).filter((x) => x !== null));
  rows.push(["CPU per request, median of the three phases' means (worker workerd)", `${fmt(medianCpu, 3)} ms`, `≤ ${GOALS.cpuMs} ms`, met(medianCpu === null ? null : medianCpu <= GOALS.cpuMs)]);

  const d1Rows = results.d1.map((d) =>
    d.skipped ? [d.name, "not available", "", "", "", ""] : [d.name, `${d.trips}${d.spread.trips}`, `${d.read}${d.spread.read}`, `${d.written}${d.spread.written}`, `${d.built}${d.spread.built}`, String(d.samples)],
  );
  const cpuRows = cpuPhases.map((c) => [
    c.phase,
    fmt(c.requests),
    fmt(c.worker, 3),
    fmt(c.proxy, 3),
    fmt(c.wrangler, 3),
    fmt(c.client, 3),
    `${fmt(c.workerUtil * 100)}% / ${fmt(c.totalUtil * 100)}%`,
    fmt(c.foreignCpus, 2),
    `${fmt(c.p50, 1)} / ${fmt(c.p99, 1)}`,
  ]);

  const notes = [];
  const total = (c) => c.worker + c.proxy + c.wrangler + c.client;
  notes.push(
    `The client, wrangler's Node process, the proxy workerd and the worker workerd share ${env.nproc} CPUs. ` +
      `Under GET /health the four used ${fmt(cpuPhases[0].totalUtil * 100)}% of one CPU in total, of which the worker workerd ${fmt(cpuPhases[0].workerUtil * 100)}%: ` +
      `per request, worker ${fmt(cpuPhases[0].worker, 3)} ms, proxy ${fmt(cpuPhases[0].proxy, 3)} ms, wrangler ${fmt(cpuPhases[0].wrangler, 3)} ms, client ${fmt(cpuPhases[0].client, 3)} ms. ` +
      "The ceiling is the local dev stack's, not the Worker's: in production there is no proxy workerd, no wrangler process and no client on the same machine.",
  );
  for (const c of cpuPhases.slice(1)) {
    const extra = c.worker - cpuPhases[0].worker;
    notes.push(
      `${c.phase}: the worker workerd spent ${fmt(c.worker, 3)} ms per request, ${fmt(extra, 3)} ms more than GET /health; that difference is the route (auth, validation, ` +
        "idempotency, serialization) plus local D1, which runs as SQLite inside the same workerd process here (in production D1 runs elsewhere and is not Worker CPU time). " +
        `All four processes together: ${fmt(total(c), 3)} ms per request.`,
    );
  }
  const allFour = (c) => (c.worker === null ? null : c.worker + c.proxy + c.wrangler + c.client);
  if (payout && allFour(payout.cpu) !== null && allFour(cpuPhases[0]) !== null) {
    const payoutCpu = allFour(payout.cpu) + (payout.cpu.backgroundPerRequest ?? 0);
    notes.push(
      `In CPU terms, which other load on the machine does not change: a GET /health costs ${fmt(allFour(cpuPhases[0]), 3)} ms across the four processes and a POST /payout ` +
        `${fmt(payoutCpu, 3)} ms including its settlement, so on this CPU-bound setup the payout/ceiling ratio cannot much exceed ${fmt(allFour(cpuPhases[0]) / payoutCpu, 2)}. ` +
        `The worker workerd runs on one thread: at about ${fmt(payout.cpu.worker + (payout.cpu.backgroundPerRequest ?? 0), 3)} ms per payout including its settlement, it alone would hold ` +
        `sustained payouts (with settlement keeping up) near ${fmt(1000 / (payout.cpu.worker + (payout.cpu.backgroundPerRequest ?? 0)))}/s; within the ${CONFIG.phaseSeconds}-second window the settlement queue fell behind instead.`,
    );
  }
  if (payout?.cpu.background) {
    const bg = payout.cpu.background;
    notes.push(
      `After the POST /payout window, the worker workerd kept working for ${fmt(bg.seconds, 1)} s${bg.quiet ? "" : " (and was still busy when the bench moved on)"} ` +
        `on the settlement jobs the payouts had enqueued: ${fmt(payout.cpu.backgroundPerRequest, 3)} ms of CPU per payout on top of the ${fmt(payout.cpu.worker, 3)} ms measured in the window ` +
        "(which already includes the settlements that ran during it).",
    );
  }
  const deliveries = queueConsumer("tender-webhook-deliveries");
  notes.push(
    `Webhook latency counts from each request's scheduled send time to the delivery's arrival at a receiver in this process (matched by the user id in data.id); ` +
      `the API answered POST /api/users in p50 ${fmt(o.apiP50, 1)} ms, p99 ${fmt(o.apiP99, 1)} ms during that phase, so the rest is the outbox enqueue, the delivery queue's ` +
      `batching${deliveries ? ` (max_batch_size ${deliveries.max_batch_size ?? "default"}, max_batch_timeout ${deliveries.max_batch_timeout ?? "default"} s)` : ""} ` +
      "and the consumer's D1 reads and writes before and after the POST. " +
      `In the burst, the API created the ${CONFIG.burst} users in ${fmt(b.apiSeconds, 2)} s while the same workerd process also ran the delivery consumer.`,
  );
  if (renewal) {
    const chunk = sourceConstant("src/billing/renewals.ts", "RENEWAL_CHUNK_SIZE");
    const maxMessages = sourceConstant("src/billing/renewals.ts", "MAX_RENEWAL_MESSAGES_PER_RUN");
    const perRun = chunk && maxMessages ? chunk * maxMessages : null;
    notes.push(
      `Renewals are driven through /__scheduled (wrangler dev --test-scheduled), triggered again whenever progress stopped for ${fmt(CONFIG.renewalStallMs / 1000, 1)} s (the queue had drained), as the next cron minute would. ` +
        (perRun
          ? `A cron run starts one fan-out, whose steps enqueue ${maxMessages} chunks of ${chunk} (${fmt(perRun)} subscriptions) each and continue on the job queue, so there is no per-run cap: ${fmt(CONFIG.subscriptions)} due subscriptions need one cron run. `
          : "") +
        `Worker CPU per renewal: ${fmt(renewal.workerCpuPerSub, 2)} ms (the select, the claim batch, the sandbox charge and the settle batch with its events, local D1 included).`,
    );
  }
  const noisy = cpuPhases.filter((c) => c.foreignCpus !== null && c.foreignCpus > 0.2);
  if (noisy.length > 0 || (renewal?.foreignCpus ?? 0) > 0.2) {
    notes.push(
      `Other processes on this shared machine used CPU during the run (${[...noisy.map((c) => `${c.phase}: ${fmt(c.foreignCpus, 2)} CPUs`), ...((renewal?.foreignCpus ?? 0) > 0.2 ? [`renewals: ${fmt(renewal.foreignCpus, 2)} CPUs`] : [])].join("; ")} of ${env.nproc}); ` +
        "those throughput and latency figures are lower than an idle machine would give. Per-request CPU times are not affected.",
    );
  }
  const rowsReadZero = results.d1.filter((d) => !d.skipped && d.read === 0 && /^GET/.test(d.name));
  notes.push(
    "Rows read come from D1's result meta, which the counting wrapper sees only for run()/all() and batches; drizzle's select and relational queries go through raw(), " +
      "which returns no meta, so their rows are not counted" +
      (rowsReadZero.length > 0 ? ` (hence 0 for ${rowsReadZero.map((d) => d.name).join(", ")})` : "") +
      ". Rows read are therefore a lower bound; round trips and rows written are exact.",
  );

  const lines = [];
  lines.push("# Benchmark results", "");
  lines.push(`Command: \`npm run bench\` (bench/run.mjs), run ${date} at commit ${env.commit} (the working tree may hold uncommitted changes).`, "");
  lines.push(
    `Machine: ${env.nproc} CPUs (${env.cpu}), ${fmt(env.memGiB, 1)} GiB RAM, ${env.kernel}, Node ${env.node}, wrangler ${env.wrangler}; load average ${env.loadavg} at the start. ` +
      `The Worker ran under \`wrangler dev\` (local workerd, with D1, Queues and Durable Objects simulated locally) on 127.0.0.1, on the same machine as the client.`,
    "",
  );
  lines.push(
    `Load: closed loop with ${concurrency} requests in flight (chosen on GET /health from ${calibration.tries.map((t) => `c=${t.concurrency}: ${fmt(t.rps)}/s`).join(", ")}: ` +
      `the smallest within 5% of the best), ${CONFIG.warmupSeconds} s warm-up then ${CONFIG.phaseSeconds} s measured per phase, spread over ${CONFIG.accounts} accounts' keys ` +
      `(the limit is 1000 requests per 10 s per key).`,
    "",
  );
  lines.push(table(["Figure", "Value", "Goal", "Met"], rows), "");
  lines.push("## D1 per operation (warm key, median of the samples; a range shows when samples differed)", "");
  lines.push(table(["Operation", "Round trips", "Rows read", "Rows written", "Statements built", "Samples"], d1Rows), "");
  lines.push("## CPU per request by process (ms, mean over the phase)", "");
  lines.push(
    table(["Phase", "Requests", "Worker workerd", "Proxy workerd", "wrangler (Node)", "Bench client", "CPU use: worker / all four (% of one CPU)", "Other processes (CPUs)", "Latency p50 / p99 (ms)"], cpuRows),
    "",
  );
  lines.push(
    "CPU times are utime + stime from /proc/<pid>/stat (clock ticks of 1/" + CLK_TCK + " s) before and after each measured window, divided by the requests sent in it. " +
      "They are means per request, not medians: /proc gives no per-request figure. The worker workerd's share includes local D1 (SQLite), the queues and the Durable Objects.",
    "",
  );
  const profiled = cpuPhases.filter((c) => c.profile);
  if (profiled.length > 0) {
    lines.push("## Where the Tender isolate's time goes (V8 CPU profile)", "");
    lines.push(
      `After each measured phase, a separate ${CONFIG.profileSeconds}-second run of the same load under the V8 sampling profiler (through wrangler's inspector; the .cpuprofile files are in ${TMP_REL}/ for Chrome DevTools). ` +
        "Shares are of the samples in which the Tender isolate was busy, by the module of the function running (self time, mapped through the bundle's source map). " +
        "Local D1, the queues and miniflare's own workers are other isolates and do not appear; the calls into them show as the binding's `fetch`." +
        (payout ? " The POST /payout profile includes the settlement jobs the payouts enqueue." : ""),
      "",
    );
    for (const c of profiled) {
      const p = c.profile;
      lines.push(
        `- **${c.phase}** (${fmt(p.samples)} busy samples, GC ${fmt(p.gc * 100)}%${p.mapped ? "" : ", no source map found"}): ` +
          `by module: ${p.modules.map((t) => `${t.name} ${fmt(t.share * 100)}%`).join(", ")}. ` +
          `Top functions: ${p.functions.map((t) => `${t.name} ${fmt(t.share * 100)}%`).join(", ")}.`,
      );
    }
    lines.push("");
  }
  lines.push("## Notes", "");
  for (const note of [...notes, ...results.notes]) lines.push(`- ${note}`);
  lines.push("");
  if (results.skipped.length > 0) {
    lines.push("## Skipped", "");
    for (const s of results.skipped) lines.push(`- ${s}`);
    lines.push("");
  }
  lines.push("## Errors", "");
  if (problems.length === 0 && results.reloads.length === 0) lines.push("None: every request of every phase answered 2xx (no 429s), and every delivery arrived.");
  for (const p of problems) lines.push(`- ${p.phase}: ${p.count} × ${p.what}`);
  for (const r of results.reloads) lines.push(`- ${r.phase}: the Worker was rebuilt during the phase (${r.lines[0].trim()}); rerun for clean figures.`);
  lines.push("");
  return { markdown: lines.join("\n"), rows };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main() {
  const date = new Date().toISOString();
  const env = machine();
  log(`Tender bench: ${env.nproc} CPUs (${env.cpu}), Node ${env.node}, wrangler ${env.wrangler}, load average ${env.loadavg}`);
  await startDev();

  const paths = Object.keys((await must({ path: "/openapi.json" })).json().paths ?? {});
  results.available = new Set(paths);
  // BENCH_PRETEND_MISSING=/payout,/subscriptions exercises the skip paths.
  for (const missing of (process.env.BENCH_PRETEND_MISSING ?? "").split(",").filter(Boolean)) results.available.delete(missing);

  // BENCH_ONLY=renewals runs the renewal phases alone and prints them (RESULTS.md is left as it is).
  const renewalsOnly = process.env.BENCH_ONLY === "renewals";
  const onShard = async (shard, name) => ({ key: (await must({ method: "POST", path: "/api/accounts", shard, body: { name, email: `${name.replace(/\W/g, "").toLowerCase()}@example.com` } })).json().api_key, shard });
  const renewalRuns = async () => {
    // The same renewal load on one shard, then spread over two (issue 22), in the same run. Each uses
    // fresh accounts on the shards named, so the first run's renewed clones are not due in the second.
    const runs = [await renewalPhase([await onShard(0, "Renewals one shard")], "one shard (DB_0)")];
    await waitQuiet();
    runs.push(await renewalPhase([await onShard(0, "Renewals shard 0"), await onShard(1, "Renewals shard 1")], "two shards (DB_0 and DB_1, half each)"));
    return runs;
  };
  // BENCH_ONLY=profile: a V8 CPU profile of each throughput path (BENCH_PROFILE_SECONDS each, 16
  // connections), printed function by function; nothing else runs and RESULTS.md is left as it is.
  if (process.env.BENCH_ONLY === "profile") {
    const accounts = await signup(CONFIG.accounts);
    const seconds = Number(process.env.BENCH_PROFILE_SECONDS ?? 6);
    const loops = {
      "GET /health": () => ({ path: "/health" }),
      "GET /api/users/{id}": (n) => ({ path: `/api/users/${accounts[n % accounts.length].userId}`, key: accounts[n % accounts.length].key }),
      "POST /payout": (n) => ({ method: "POST", path: "/payout", key: accounts[n % accounts.length].key, idem: `bench-po-${RUN}-${n}`, body: { ...PAYOUT_BODY, recipient_id: accounts[n % accounts.length].userId } }),
    };
    for (const [name, make] of Object.entries(loops)) {
      await closedLoop({ seconds: 1, concurrency: 16, make });
      await profileWhile(name, () => closedLoop({ seconds, concurrency: 16, make }).then((run) => log(`${name}: ${fmt(run.rps)} req/s while profiled`)));
      await waitQuiet();
    }
    return 0;
  }
  // BENCH_ONLY=webhooks: the webhook latency (open loop) and burst phases alone (`npm run
  // bench:latency`), into their own section of RESULTS.md (between the `latency` markers).
  if (process.env.BENCH_ONLY === "webhooks") {
    const accounts = await signup(2);
    const hooks = await webhookPhase(accounts, 16);
    const o = hooks.open;
    const b = hooks.burst;
    const ok = (x, goal) => (x !== null && x <= goal ? "met" : "**missed**");
    replaceResultsSection(
      "latency",
      [
        "<!-- latency -->",
        "## Webhook latency from API call to receipt (issue 35)",
        "",
        `Command: \`npm run bench:latency\` (BENCH_ONLY=webhooks node bench/run.mjs; \`npm run bench\` measures the same in its table at the top), run ${date} at commit ${env.commit}, on ${env.nproc} CPUs, load average ${env.loadavg} at the start. ` +
          `Open loop: ${CONFIG.openLoopRate} POST /api/users a second for ${CONFIG.openLoopSeconds} s, each sent on schedule whether or not the earlier ones answered; one endpoint (events: customer.created) answering 200 at once; latency is from the request's scheduled send to the delivery's arrival at the receiver.`,
        "",
        "| Figure | Value | Goal |",
        "|---|---|---|",
        `| p50 | ${fmt(o.p50)} ms | ≤ ${GOALS.webhookP50Ms} ms (${ok(o.p50, GOALS.webhookP50Ms)}) |`,
        `| p99 | ${fmt(o.p99)} ms | ≤ ${GOALS.webhookP99Ms} ms (${ok(o.p99, GOALS.webhookP99Ms)}) |`,
        `| max | ${fmt(o.max)} ms (${o.received}/${o.created} received) | — |`,
        `| API answer p50 / p99 | ${fmt(o.apiP50, 1)} / ${fmt(o.apiP99, 1)} ms | — |`,
        `| Burst of ${CONFIG.burst} (two endpoints, closed loop of 16) | ${fmt(b.perSecond)} deliveries/s, all ${b.received}/${b.events} within ${fmt(b.allSeconds, 2)} s of the first send; ${hooks.duplicates} duplicate receipts | — |`,
        "<!-- /latency -->",
      ].join("\n"),
    );
    for (const p of problems) console.log(`  ${p.phase}: ${p.count} × ${p.what}`);
    return problems.length === 0 && o.p50 !== null && o.p50 <= GOALS.webhookP50Ms && o.p99 <= GOALS.webhookP99Ms ? 0 : 1;
  }
  if (renewalsOnly) {
    await renewalRuns();
    for (const p of problems) console.log(`  ${p.phase}: ${p.count} × ${p.what}`);
    return problems.length === 0 ? 0 : 1;
  }

  log(`signing up ${CONFIG.accounts} accounts, one user each`);
  const accounts = await signup(CONFIG.accounts);
  accounts[2].otherUserId = accounts[3].userId;

  const calibration = await calibrate();
  const concurrency = calibration.chosen;

  const health = await throughputPhase("GET /health", concurrency, () => ({ path: "/health" }));

  let payout = null;
  if (results.available.has("/payout")) {
    payout = await throughputPhase(
      "POST /payout",
      concurrency,
      (n) => ({ method: "POST", path: "/payout", key: accounts[n % accounts.length].key, idem: `bench-po-${RUN}-${n}`, body: { ...PAYOUT_BODY, recipient_id: accounts[n % accounts.length].userId } }),
      { drain: true },
    );
  } else {
    results.skipped.push("POST /payout throughput: not available (the Worker serves no /payout route yet).");
    log("POST /payout: not available, skipped");
  }

  const userGet = await throughputPhase("GET /api/users/{id}", concurrency, (n) => {
    const account = accounts[n % accounts.length];
    return { path: `/api/users/${account.userId}`, key: account.key };
  });

  const hooks = await webhookPhase(accounts, concurrency);
  await waitQuiet();

  await d1Phase(accounts[2]);
  const renewals = await renewalRuns();

  const { markdown, rows } = report({ date, env, concurrency, calibration, health, payout, userGet, hooks, renewals });
  // The sections other benches write (bench/floor.mjs, bench/heap.mjs: <!-- name --> … <!-- /name -->) are kept.
  const previous = fs.existsSync(RESULTS) ? fs.readFileSync(RESULTS, "utf8") : "";
  const kept = [...previous.matchAll(/<!-- ([a-z]+) -->[\s\S]*?<!-- \/\1 -->/g)].map((m) => m[0]);
  fs.writeFileSync(RESULTS, kept.length ? `${markdown.trimEnd()}\n\n${kept.join("\n\n")}\n` : markdown);
  console.log("");
  console.log(table(["Figure", "Value", "Goal", "Met"], rows));
  console.log("");
  for (const skipped of results.skipped) console.log(`Skipped: ${skipped}`);
  if (problems.length > 0 || results.reloads.length > 0) {
    console.log("Errors:");
    for (const p of problems) console.log(`  ${p.phase}: ${p.count} × ${p.what}`);
    for (const r of results.reloads) console.log(`  ${r.phase}: the Worker was rebuilt during the phase`);
  }
  log(`wrote ${path.relative(ROOT, RESULTS)}`);
  return problems.length === 0 && results.reloads.length === 0 ? 0 : 1;
}

const watchdog = setTimeout(() => {
  console.error(`bench: still running after ${CONFIG.watchdogMs / 1000} s; stopping`);
  killDev("SIGKILL");
  process.exit(2);
}, CONFIG.watchdogMs);
watchdog.unref();

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    killDev("SIGKILL");
    process.exit(130);
  });
}
process.on("exit", () => killDev("SIGKILL"));

let code = 1;
try {
  code = await main();
} catch (error) {
  console.error("bench failed:", error?.stack ?? error);
  code = 1;
} finally {
  setupAgent.destroy();
  await stopDev();
}
process.exit(code);
