// `node bench/delivery-floor.mjs` (part of `npm run bench`; alone: `npm run bench:delivery-floor`):
// Tender's webhook delivery consumer beside the delivery floor (issue 35), the bare Worker of
// bench/delivery-floor/ that consumes a queue configured as Tender's and does only what a delivery
// must (read it, POST it signed, record the attempt). Both run under `wrangler dev` on this
// machine, each on a fresh local D1, and take the same burst: EVENTS events to ONE endpoint whose
// receiver (in this process, 127.0.0.1, answering 200 at once) counts each webhook-id once.
//
// The burst is a recovery, so that only delivery work is measured: the events are created first
// (Tender: EVENTS POST /api/users with no endpoint yet; the floor: POST /events), and each round
// adds a new endpoint and sends it every event (Tender: POST /api/webhooks/{id}/recover, whose
// job pages the deliveries onto the queue, 100 a batch; the floor: POST /recover, the same pages).
// Rounds alternate (each Tender side, then the floor, ROUNDS times). Per round: deliveries a second
// from the first receipt to the last (the recovery job's start-up is left out), and CPU per
// delivery, utime + stime of the side's workerd processes (the Worker and local D1) from the
// trigger to the last receipt and 300 ms after (the last attempts' records), over EVENTS. Medians;
// the share is Tender's over the floor's, for both. The machine's load average is reported with
// every round: on a shared machine the CPU per delivery is the steadier figure.
//
// DF_TENDER_ROOTS=label=dir,label=dir: several Tender checkouts side by side in the same run (an
// experiment's before and after; each dir a checkout with node_modules); default: this one.
// DF_TENDER_CONFIG=<file>: Tender under another wrangler config (e.g. another queue batch size).
// The section between the `delivery-floor` markers of bench/RESULTS.md is replaced with the result
// (DF_MARKER=<name>: another section, for an experiment).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT, freePort, must, quiet, replaceResultsSection, runScript, sleep, startSide, workerdCpu } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/delivery-floor");
const EVENTS = Number(process.env.DF_EVENTS ?? 600);
const ROUNDS = Number(process.env.DF_ROUNDS ?? 5);
const GOAL_SHARE = 0.6;
const MARKER = process.env.DF_MARKER ?? "delivery-floor";
const DELIVERY_TIMEOUT_MS = 120_000;
const log = (...args) => console.log(`[delivery-floor ${((performance.now() / 1000) | 0).toString().padStart(4)}s]`, ...args);
const load1 = () => os.loadavg()[0];

/** The receiver: per path (one per round), each delivery's webhook-id and when it came. */
async function receiver() {
  const byPath = new Map();
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (!byPath.has(req.url)) byPath.set(req.url, []);
      byPath.get(req.url).push({ id: String(req.headers["webhook-id"]), t: performance.now(), signed: Boolean(req.headers["webhook-signature"]) });
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  server.keepAliveTimeout = 60_000;
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { port, byPath, close: () => server.close() };
}

/** Creates the events on a Tender side (no endpoint yet): returns what a round needs. */
async function prepareTender(side) {
  const since = new Date(Date.now() - 1000).toISOString();
  const acct = await must(side, { method: "POST", path: "/api/accounts", body: { name: "Delivery floor", email: "df@example.com" } });
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < EVENTS) {
        const i = next++;
        await must(side, { method: "POST", path: "/api/users", key: acct.api_key, body: { name: `Burst ${i}`, email: `burst${i}@example.com` } });
      }
    }),
  );
  await quiet(side);
  return {
    async trigger(url) {
      const hook = await must(side, { method: "POST", path: "/api/webhooks", key: acct.api_key, body: { url, events: ["customer.created"] } });
      await must(side, { method: "POST", path: `/api/webhooks/${hook.id}/recover`, key: acct.api_key, body: { since } });
    },
  };
}

async function prepareFloor(side) {
  await must(side, { method: "POST", path: "/events", body: { count: EVENTS } });
  const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
  return {
    async trigger(url) {
      await must(side, { method: "POST", path: "/recover", body: { url, secret } });
    },
  };
}

/** One burst on one side: the trigger, then every event once at the receiver. */
async function burst(side, prepared, sink, tag) {
  const p = `/hook/${tag}`;
  const load = load1();
  const cpu0 = workerdCpu(side.child.pid);
  const t0 = performance.now();
  await prepared.trigger(`http://127.0.0.1:${sink.port}${p}`);
  const deadline = performance.now() + DELIVERY_TIMEOUT_MS;
  const got = () => sink.byPath.get(p) ?? [];
  while (new Set(got().map((r) => r.id)).size < EVENTS && performance.now() < deadline) await sleep(10);
  await sleep(300);
  const cpu = workerdCpu(side.child.pid) - cpu0;
  const received = got();
  const unique = new Set(received.map((r) => r.id)).size;
  const times = received.map((r) => r.t).sort((a, b) => a - b);
  const span = (times.at(-1) - times[0]) / 1000;
  const result = {
    perSecond: (unique - 1) / span,
    cpuMs: (cpu * 1000) / unique,
    firstMs: times[0] - t0,
    unique,
    duplicates: received.length - unique,
    unsigned: received.filter((r) => !r.signed).length,
    load,
  };
  if (unique !== EVENTS || result.duplicates !== 0 || result.unsigned !== 0) throw new Error(`${side.name} ${tag}: not every event once, signed: ${unique} of ${EVENTS}, ${result.duplicates} duplicates, ${result.unsigned} unsigned`);
  await quiet(side);
  return result;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x, d = 0) => (Number.isFinite(x) ? x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }) : "n/a");

async function main() {
  fs.mkdirSync(TMP, { recursive: true });
  const startLoad = os.loadavg().map((x) => x.toFixed(2)).join(" ");
  const roots = process.env.DF_TENDER_ROOTS ? process.env.DF_TENDER_ROOTS.split(",").map((s) => s.split("=")) : [["Tender", ROOT]];
  const tenderConfig = process.env.DF_TENDER_CONFIG ? ["-c", process.env.DF_TENDER_CONFIG] : [];
  const sink = await receiver();
  const sides = [];
  try {
    for (const [label, dir] of roots) {
      log(`starting ${label} (${dir})`);
      const name = label.replace(/\W/g, "_");
      const side = await startSide(name, { cwd: dir, configArgs: tenderConfig, devArgs: ["--var", "ENVIRONMENT:development"], persist: path.join(TMP, `${name}-state`), databases: ["DB_0", "DB_1"], logDir: TMP, maxSockets: 16, waitMs: 120_000 });
      sides.push({ label, side, prepared: null, rounds: [], tender: true });
    }
    log("starting the delivery floor");
    const floor = await startSide("floor", { configArgs: ["-c", "bench/delivery-floor/wrangler.toml"], persist: path.join(TMP, "floor-state"), databases: ["DB"], logDir: TMP, maxSockets: 16, waitMs: 120_000 });
    sides.push({ label: "Floor", side: floor, prepared: null, rounds: [], tender: false });
    for (const s of sides) {
      log(`${s.label}: creating ${EVENTS} events`);
      s.prepared = s.tender ? await prepareTender(s.side) : await prepareFloor(s.side);
    }
    // A warm-up burst on each side (every code path loaded once), not counted.
    for (const s of sides) await burst(s.side, s.prepared, sink, `${s.side.name}-warm`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of sides) s.rounds.push(await burst(s.side, s.prepared, sink, `${s.side.name}-${round}`));
      log(`round ${round}: ${sides.map((s) => `${s.label} ${f(s.rounds.at(-1).perSecond)}/s ${f(s.rounds.at(-1).cpuMs, 2)} ms CPU (load ${f(s.rounds.at(-1).load, 2)})`).join(", ")}`);
    }
    report(sides, startLoad, tenderConfig);
  } finally {
    sink.close();
    for (const s of sides) s.side.stop();
  }
}

function report(sides, startLoad, tenderConfig) {
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const floor = sides.at(-1);
  const med = (s, k) => median(s.rounds.map((r) => r[k]));
  const fr = med(floor, "perSecond");
  const fc = med(floor, "cpuMs");
  const lines = [
    `<!-- ${MARKER} -->`,
    `## Deliveries against the delivery floor (issue 35)${MARKER === "delivery-floor" ? "" : `: ${MARKER}`}`,
    "",
    `Command: \`${MARKER === "delivery-floor" ? "npm run bench:delivery-floor" : `DF_MARKER=${MARKER}${process.env.DF_TENDER_ROOTS ? ` DF_TENDER_ROOTS=${process.env.DF_TENDER_ROOTS.replace(/=[^,]*/g, "=…")}` : ""}${tenderConfig.length ? ` DF_TENDER_CONFIG=${tenderConfig[1]}` : ""} node bench/delivery-floor.mjs`}\` (bench/delivery-floor.mjs), run ${new Date().toISOString()} at commit ${commit}, ` +
      `on ${os.cpus().length} CPUs, load average ${startLoad} at the start. ${EVENTS} events to one endpoint per round, sent by a recovery (Tender) or its bare equivalent (the floor); ` +
      `${ROUNDS} alternating rounds after a warm-up; medians. Deliveries/s from the first receipt to the last; CPU per delivery is utime + stime of the side's workerd processes over the burst, over ${EVENTS}. Every round: every event once, signed.`,
    "",
    "| Side | Deliveries/s (rounds) | CPU per delivery, ms (rounds) | Load average per round | Share of the floor: rate / CPU |",
    "|---|---|---|---|---|",
    ...sides.map((s) => {
      const r = med(s, "perSecond");
      const c = med(s, "cpuMs");
      const share = s === floor ? "—" : `**${f(r / fr, 2)}** / **${f(fc / c, 2)}** (goal ≥ ${GOAL_SHARE}: ${r / fr >= GOAL_SHARE ? "met" : "missed"} / ${fc / c >= GOAL_SHARE ? "met" : "missed"})`;
      return `| ${s.label} | ${f(r)} (${s.rounds.map((x) => f(x.perSecond)).join(", ")}) | ${f(c, 2)} (${s.rounds.map((x) => f(x.cpuMs, 2)).join(", ")}) | ${s.rounds.map((x) => f(x.load, 2)).join(", ")} | ${share} |`;
    }),
    `<!-- /${MARKER} -->`,
  ];
  const section = lines.join("\n");
  replaceResultsSection(MARKER, section);
  console.log(section);
}

runScript("delivery-floor", main, 30);
