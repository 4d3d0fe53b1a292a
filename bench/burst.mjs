// `node bench/burst.mjs` (part of `npm run bench`; alone: `npm run bench:burst`): a burst of
// webhook events for ONE endpoint, delivered by Tender under `wrangler dev` on a fresh local D1,
// measured from outside (issue 35: 600 events delivered at 0.4 or more of the same server's
// GET /health rate, every event once). GET /health is measured first (closed loop, the ceiling of
// this server on this machine). Then two bursts, each of EVENTS POST /api/users (each emitting
// customer.created) sent as fast as the API takes them, from an account of its own to an endpoint
// of its own, whose receiver in this process (127.0.0.1, answering 200 at once) notes each
// delivery's webhook-id and time (GET /health is measured again after them; the share is over the
// mean of the two rates, which move with the machine's load):
//  - **held** (the issue's figure: the burst delivered once its events exist): the receiver holds
//    its answers while the creates run, so the first queue batch waits at the receiver and the
//    rest of the burst waits in the queue; once every create has answered (and HOLD_SETTLE_MS for
//    the last enqueues), the receiver answers and the consumer has the machine. Deliveries a
//    second: those received after the release, over the time from the release to the last one.
//    (On a machine so slow that the creates outlast HOLD_MAX_MS, the answers kept that long are
//    given, and the receiver holds again: no held delivery reaches its 15-second timeout.)
//  - **end to end** (the figure this bench reported before): the receiver answers at once; the
//    deliveries a second from the first create sent to the last delivery received. The creates
//    and the deliveries share one workerd, and no burst is delivered faster than it is created, so
//    this is bounded by the create rate (about 0.3 of /health).
// Each share is the rate over the /health rate. BURST_CONFIG=<file>: Tender under another wrangler
// config (an experiment's, e.g. another queue batch size). BURST_MARKER=<name>: the section of
// bench/RESULTS.md between those markers is replaced (default `burst`).
import { execFileSync } from "node:child_process";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT, freePort, replaceResultsSection, runScript, send, sleep, startTender } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/burst");
const EVENTS = Number(process.env.BURST_EVENTS ?? 600);
const CONFIG = process.env.BURST_CONFIG;
const MARKER = process.env.BURST_MARKER ?? "burst";
const CONCURRENCY = 16;
const HEALTH_SECONDS = 5;
const DELIVERY_TIMEOUT_MS = 120_000;
/** After the last create answered: its enqueue (sent after the answer) reaches the queue. */
const HOLD_SETTLE_MS = 500;
/** The longest the receiver holds an answer: well inside a delivery's 15-second timeout. */
const HOLD_MAX_MS = 10_000;
const GOAL_SHARE = 0.4;

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const load1 = () => os.loadavg()[0];

/**
 * A receiver answering 200: per path, each delivery's webhook-id and when it came. A held path
 * keeps its answers until release(path); an answer kept HOLD_MAX_MS is given then (with the others
 * kept), and the path holds again (`letGo` counts them), so no delivery times out while held.
 */
async function receiver() {
  const byPath = new Map();
  const held = new Map();
  const answerAll = (hold) => {
    clearTimeout(hold.timer);
    hold.timer = null;
    const answers = hold.answers.splice(0);
    for (const answer of answers) answer();
    return answers.length;
  };
  const release = (p) => {
    const hold = held.get(p);
    if (hold.releasedAt === null) {
      hold.releasedAt = performance.now();
      hold.kept = answerAll(hold);
    }
    return hold;
  };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (!byPath.has(req.url)) byPath.set(req.url, []);
      byPath.get(req.url).push({ id: String(req.headers["webhook-id"]), t: performance.now() });
      const answer = () => res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      const hold = held.get(req.url);
      if (!hold || hold.releasedAt !== null) return answer();
      hold.answers.push(answer);
      hold.timer ??= setTimeout(() => (hold.letGo += answerAll(hold)), HOLD_MAX_MS);
    });
  });
  server.keepAliveTimeout = 60_000;
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port,
    got: (p) => byPath.get(p) ?? [],
    hold: (p) => held.set(p, { answers: [], timer: null, releasedAt: null, kept: 0, letGo: 0 }),
    release,
    close: () => server.close(),
  };
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

/** An account with its key warm (WARM creates before its endpoint exists), then its endpoint at `p`. */
async function account(port, sink, name, p) {
  const acct = JSON.parse((await send(port, agent, { method: "POST", path: "/api/accounts", body: { name, email: `${name.toLowerCase().replace(/\W/g, "")}@example.com` } })).text);
  for (let i = 0; i < 20; i++) await send(port, agent, { method: "POST", path: "/api/users", key: acct.api_key, body: { name: `Warm ${i}`, email: `warm${i}@example.com` } });
  const hook = await send(port, agent, { method: "POST", path: "/api/webhooks", key: acct.api_key, body: { url: `http://127.0.0.1:${sink.port}${p}`, events: ["customer.created"] } });
  if (hook.status !== 201) throw new Error(`POST /api/webhooks answered ${hook.status}: ${hook.text.slice(0, 300)}`);
  return acct.api_key;
}

/** EVENTS POST /api/users over CONCURRENCY connections: when they began and ended, and the answers' statuses. */
async function creates(port, key, tag) {
  const statuses = new Map();
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < EVENTS) {
        const i = next++;
        const res = await send(port, agent, { method: "POST", path: "/api/users", key, body: { name: `Burst ${tag} ${i}`, email: `burst-${tag}-${i}@example.com` } }).catch((e) => ({ status: e.message }));
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  return { start, end: performance.now(), statuses, created: statuses.get(201) ?? 0 };
}

async function allReceived(sink, p, count) {
  const deadline = performance.now() + DELIVERY_TIMEOUT_MS;
  while (new Set(sink.got(p).map((r) => r.id)).size < count && performance.now() < deadline) await sleep(10);
  const received = sink.got(p);
  const unique = new Set(received.map((r) => r.id)).size;
  const times = received.map((r) => r.t).sort((a, b) => a - b);
  return { received: received.length, unique, duplicates: received.length - unique, times };
}

/** The end-to-end burst: the receiver answers at once; from the first create sent to the last receipt. */
async function endToEnd(port, sink) {
  const p = "/hook/end-to-end";
  const key = await account(port, sink, "Burst end to end", p);
  const load = load1();
  const api = await creates(port, key, "e2e");
  const got = await allReceived(sink, p, api.created);
  const last = got.times.at(-1) ?? api.start;
  return { ...api, ...got, load, seconds: (last - api.start) / 1000, perSecond: got.unique / ((last - api.start) / 1000), apiSeconds: (api.end - api.start) / 1000 };
}

/** The held burst: every create answered (its events in the queue), then the receiver answers; from the release to the last receipt. */
async function heldBurst(port, sink) {
  const p = "/hook/held";
  const key = await account(port, sink, "Burst held", p);
  sink.hold(p);
  const load = load1();
  const api = await creates(port, key, "held");
  await sleep(HOLD_SETTLE_MS);
  const { releasedAt: release, kept, letGo } = sink.release(p);
  const got = await allReceived(sink, p, api.created);
  const after = sink.got(p).filter((r) => r.t >= release);
  const last = got.times.at(-1) ?? release;
  return {
    ...api,
    ...got,
    load,
    kept,
    letGo,
    before: got.received - after.length,
    after: after.length,
    seconds: (last - release) / 1000,
    perSecond: after.length / ((last - release) / 1000),
    apiSeconds: (api.end - api.start) / 1000,
  };
}

async function main() {
  const startLoad = os.loadavg().map((x) => x.toFixed(2)).join(" ");
  const tender = await startTender(TMP, { config: CONFIG });
  const { port } = tender;
  const sink = await receiver();
  try {
    // Warm-up: every code path of the create and the delivery loaded once, then a quiet second.
    const warm = "/hook/warm";
    const key = await account(port, sink, "Burst warm-up", warm);
    for (let i = 0; i < 20; i++) await send(port, agent, { method: "POST", path: "/api/users", key, body: { name: `Warm ${i}`, email: `warm-d${i}@example.com` } });
    for (const deadline = Date.now() + 30_000; sink.got(warm).length < 20 && Date.now() < deadline; ) await sleep(50);
    await sleep(1000);
    // GET /health before the bursts and after them: on a shared machine the rate moves with the
    // load, and the share is over the mean of the two.
    const healthLoad = load1();
    const healthBefore = await healthRate(port);
    const held = await heldBurst(port, sink);
    await sleep(1000);
    const e2e = await endToEnd(port, sink);
    await sleep(1000);
    const healthAfter = await healthRate(port);
    const health = (healthBefore + healthAfter) / 2;
    const result = { startLoad, health, healthBefore, healthAfter, healthLoad, held, e2e };
    report(result);
    for (const [name, r] of [["held", held], ["end to end", e2e]]) {
      if (r.created !== EVENTS || r.unique !== r.created || r.duplicates !== 0) throw new Error(`${name}: not every event once: ${r.created} created, ${r.unique} received, ${r.duplicates} duplicates`);
    }
  } finally {
    sink.close();
    tender.stop();
  }
}

function report({ startLoad, health, healthBefore, healthAfter, healthLoad, held, e2e }) {
  const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }) : "n/a");
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const mix = (statuses) => [...statuses].sort().map(([s, c]) => `${s}×${c}`).join(", ");
  const share = held.perSecond / health;
  const section = [
    `<!-- ${MARKER} -->`,
    `## A burst of ${EVENTS} events for one endpoint (issue 35)${MARKER === "burst" ? "" : `: ${MARKER}`}`,
    "",
    `Command: \`${MARKER === "burst" && !CONFIG ? "npm run bench:burst" : `${MARKER === "burst" ? "" : `BURST_MARKER=${MARKER} `}${CONFIG ? `BURST_CONFIG=${CONFIG} ` : ""}node bench/burst.mjs`}\` (bench/burst.mjs; also part of \`npm run bench\`), run ${new Date().toISOString()} at commit ${commit}, on ${os.cpus().length} CPUs, load average ${startLoad} at the start. ` +
      `Tender under \`wrangler dev\`${CONFIG ? ` (config ${CONFIG})` : ""} on a fresh local D1; GET /health for ${HEALTH_SECONDS} s (${CONCURRENCY} connections) before the bursts and again after them is the ceiling (the mean of the two); the two bursts, each of ${EVENTS} POST /api/users (${CONCURRENCY} connections, an account of its own), each create emitting customer.created to the account's one endpoint (no rate_limit), whose receiver in the bench process answers 200. ` +
      `**Held**: the receiver holds its answers until every create has answered (and ${HOLD_SETTLE_MS} ms more), so the burst waits in the queue, then answers: deliveries a second from the release to the last receipt, counting those received after the release. **End to end**: the receiver answers at once; deliveries a second from the first create sent to the last receipt, which no burst beats its creates at.`,
    "",
    "| Figure | Value | Share of GET /health | Goal | Load average (1 min) |",
    "|---|---|---|---|---|",
    `| GET /health, the mean of before and after the bursts | ${fmt(health)} /s (${fmt(healthBefore)} before, ${fmt(healthAfter)} after) | — | — | ${fmt(healthLoad, 2)} |`,
    `| **Held: deliveries/s once the events exist** (release → last receipt) | ${fmt(held.perSecond)} /s (${fmt(held.after)} in ${fmt(held.seconds, 2)} s after the release; ${held.before} came before it${held.letGo ? `, ${held.letGo} of them answered while the creates ran (held ${HOLD_MAX_MS / 1000} s)` : ""}) | **${fmt(share, 2)}** | ≥ ${GOAL_SHARE} ${share >= GOAL_SHARE ? "(met)" : "(missed)"} | ${fmt(held.load, 2)} |`,
    `| End to end: deliveries/s, first create sent → last receipt (the figure reported before) | ${fmt(e2e.perSecond)} /s (${fmt(e2e.unique)} in ${fmt(e2e.seconds, 2)} s) | ${fmt(e2e.perSecond / health, 2)} | — | ${fmt(e2e.load, 2)} |`,
    `| Creates: ${EVENTS} POST /api/users, held burst / end to end | ${fmt(EVENTS / held.apiSeconds)} /s / ${fmt(EVENTS / e2e.apiSeconds)} /s | ${fmt(EVENTS / held.apiSeconds / health, 2)} / ${fmt(EVENTS / e2e.apiSeconds / health, 2)} | — | — |`,
    `| Every event once | held: ${held.unique} of ${held.created} received, ${held.duplicates} duplicates; end to end: ${e2e.unique} of ${e2e.created}, ${e2e.duplicates} duplicates | — | all, none | — |`,
    "",
    `Answers: held ${mix(held.statuses)}; end to end ${mix(e2e.statuses)}. The same workerd process serves the API and runs the delivery consumer.`,
    `<!-- /${MARKER} -->`,
  ].join("\n");
  replaceResultsSection(MARKER, section);
  console.log(section);
}

runScript("burst", main, 10);
