// What the benches share: a free port, an HTTP request to 127.0.0.1, Tender started under
// `wrangler dev` on a fresh local D1 (startTender), a section of bench/RESULTS.md replaced between
// its markers, the script's run with a watchdog, and the CPU a wrangler dev tree's workerd
// processes used (from /proc), with a wait until they are quiet.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const WRANGLER = path.join(ROOT, "node_modules/wrangler/bin/wrangler.js");
export const CHILD_ENV = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" };
export const CARD = { payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2030, cvv: "123" };
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RESULTS = path.join(ROOT, "bench/RESULTS.md");

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** One request to 127.0.0.1:`port`; `body` is JSON unless it is a string (sent as it is). */
export function send(port, agent, { method = "GET", path: p, key, body, idem, headers: extra = {} }) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    const headers = { ...extra };
    if (key) headers.authorization = `Bearer ${key}`;
    if (idem) headers["idempotency-key"] = idem;
    if (payload) Object.assign(headers, { "content-type": "application/json", "content-length": payload.length });
    const req = http.request({ host: "127.0.0.1", port, method, path: p, headers, agent }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * Tender under `wrangler dev` (ENVIRONMENT=development) on a fresh local D1: `tmp` is emptied, both
 * shards' migrations are applied to the state kept in it, and wrangler's output goes to
 * `tmp/wrangler-dev.log`. `args`: more `wrangler dev` arguments (an inspector's, say); `config`: a
 * wrangler config other than wrangler.toml (an experiment's, for the migrations as well). Resolves
 * once GET /health answers 200, with the port, the child process, and `stop()`, which ends its
 * process group.
 */
export async function startTender(tmp, { args = [], config, waitMs = 90_000 } = {}) {
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  const state = path.join(tmp, "state");
  const configArgs = config ? ["-c", config] : [];
  for (const shard of ["DB_0", "DB_1"]) {
    execFileSync(process.execPath, [WRANGLER, "d1", "migrations", "apply", shard, "--local", "--persist-to", state, ...configArgs], { cwd: ROOT, env: CHILD_ENV, stdio: "ignore" });
  }
  const port = await freePort();
  const log = path.join(tmp, "wrangler-dev.log");
  const out = fs.openSync(log, "w");
  const child = spawn(process.execPath, [WRANGLER, "dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", state, "--var", "ENVIRONMENT:development", ...configArgs, ...args], {
    cwd: ROOT,
    env: CHILD_ENV,
    detached: true,
    stdio: ["ignore", out, out],
  });
  const stop = () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
  };
  const agent = new http.Agent({ keepAlive: false });
  try {
    for (const deadline = Date.now() + waitMs; ; await sleep(250)) {
      if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}); see ${path.relative(ROOT, log)}`);
      if ((await send(port, agent, { path: "/health" }).catch(() => null))?.status === 200) break;
      if (Date.now() > deadline) throw new Error(`Tender did not answer /health within ${waitMs / 1000} s; see ${path.relative(ROOT, log)}`);
    }
  } catch (error) {
    stop();
    throw error;
  } finally {
    agent.destroy();
  }
  return { port, child, stop };
}

/**
 * One side of a floor bench (bench/floor.mjs, bench/delivery-floor.mjs): a Worker under `wrangler dev`
 * (the wrangler of `cwd`, which may be another checkout of Tender) on a fresh local D1 in `persist`,
 * each of `databases` migrated, its log in `logDir`; answers once /health does, with a keep-alive
 * agent of `maxSockets`.
 */
export async function startSide(name, { cwd = ROOT, configArgs = [], devArgs = [], persist, databases, logDir, maxSockets, waitMs }) {
  fs.rmSync(persist, { recursive: true, force: true });
  const wrangler = path.join(cwd, "node_modules/wrangler/bin/wrangler.js");
  for (const db of databases) execFileSync(process.execPath, [wrangler, "d1", "migrations", "apply", db, "--local", "--persist-to", persist, ...configArgs], { cwd, env: CHILD_ENV, stdio: "ignore" });
  const port = await freePort();
  const log = path.join(logDir, `${name}.log`);
  const out = fs.openSync(log, "w");
  const child = spawn(process.execPath, [wrangler, "dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persist, ...configArgs, ...devArgs], {
    cwd,
    env: CHILD_ENV,
    detached: true,
    stdio: ["ignore", out, out],
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  for (const deadline = Date.now() + waitMs; Date.now() < deadline; await sleep(250)) {
    if (child.exitCode !== null) throw new Error(`${name}: wrangler dev exited; see ${path.relative(ROOT, log)}`);
    const up = await send(port, agent, { path: "/health" }).catch(() => null);
    if (up?.status === 200) return { name, port, child, agent, stop: () => process.kill(-child.pid, "SIGTERM") };
  }
  throw new Error(`${name}: /health did not answer within ${waitMs / 1000} s`);
}

/** A request to a side that must succeed: its JSON body, or an error naming the side and the answer. */
export async function must(side, request) {
  const res = await send(side.port, side.agent, request);
  if (res.status >= 300) throw new Error(`${side.name} ${request.method ?? "GET"} ${request.path}: ${res.status} ${res.text.slice(0, 300)}`);
  return JSON.parse(res.text);
}

/** Replaces the section between `<!-- marker -->` and `<!-- /marker -->` of bench/RESULTS.md (appends it the first time). */
export function replaceResultsSection(marker, section) {
  const open = `<!-- ${marker} -->`;
  const close = `<!-- /${marker} -->`;
  let text = fs.existsSync(RESULTS) ? fs.readFileSync(RESULTS, "utf8") : "# Benchmark results\n";
  const a = text.indexOf(open);
  const b = text.indexOf(close);
  text = a >= 0 && b > a ? text.slice(0, a) + section + text.slice(b + close.length) : `${text.trimEnd()}\n\n${section}\n`;
  fs.writeFileSync(RESULTS, text);
}

/** Runs `main`, exiting 0 when it ends, 1 when it throws or takes longer than `minutes`. */
export function runScript(name, main, minutes) {
  const watchdog = setTimeout(() => {
    console.error(`${name}: the run took over ${minutes} minutes; stopping`);
    process.exit(1);
  }, minutes * 60_000);
  watchdog.unref();
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}

const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** The pids of `root`'s process tree, from /proc. */
function tree(root) {
  const children = new Map();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(entry));
    } catch {
      // gone
    }
  }
  const out = [];
  const walk = (pid) => {
    out.push(pid);
    for (const child of children.get(pid) ?? []) walk(child);
  };
  walk(root);
  return out;
}

/** The `/proc/<pid>/stat` fields of the workerd processes of a wrangler dev tree (after the command's name). */
export function workerdStats(root) {
  const stats = [];
  for (const pid of tree(root)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      if (name.startsWith("workerd")) stats.push({ pid, fields: stat.slice(stat.lastIndexOf(")") + 2).split(" ") });
    } catch {
      // gone
    }
  }
  return stats;
}

/** CPU seconds (utime + stime) of the workerd processes of a wrangler dev tree. */
export function workerdCpu(root) {
  return workerdStats(root).reduce((ticks, { fields }) => ticks + Number(fields[11]) + Number(fields[12]), 0) / CLK_TCK;
}

/** Waits until the side's workerd processes use under 5% of a CPU for a second (queued work drained). */
export async function quiet(side, maxMs = 60_000) {
  const deadline = Date.now() + maxMs;
  let last = workerdCpu(side.child.pid);
  while (Date.now() < deadline) {
    await sleep(1000);
    const now = workerdCpu(side.child.pid);
    if (now - last < 0.05) return;
    last = now;
  }
}
