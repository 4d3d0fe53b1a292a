// `node bench/floor.mjs` (part of `npm run bench`; alone: `npm run bench:floor`): Tender beside the
// floor of its own stack (issue 23). Both run under `wrangler dev` on this machine, each on a fresh
// local D1: Tender (src/index.ts, ENVIRONMENT=development) and the bare Worker of bench/floor/ (Hono,
// the same compatibility date and flags, one D1 binding, nothing else). Each pair of paths is
// measured in alternating rounds (Tender, then the floor, ROUNDS times; closed loop, CONCURRENCY
// connections, SECONDS each), and the report gives the medians, Tender's share of its floor, and
// the CPU per request of each side's workerd processes (utime + stime from /proc, before and after
// each round). POST /payout's settlement jobs are drained (the machine quiet) before the next round.
// The section between the `floor` markers of bench/RESULTS.md is replaced with the result.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { CARD, ROOT, must, quiet, replaceResultsSection, runScript, send, sleep, startSide, workerdCpu, workerdStats } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/floor");
const ROUNDS = Number(process.env.FLOOR_ROUNDS ?? 5);
const SECONDS = Number(process.env.FLOOR_SECONDS ?? 5);
const CONCURRENCY = Number(process.env.FLOOR_CONCURRENCY ?? 16);
const ACCOUNTS = 20; // Tender's per-key limit is 1000 requests / 10 s: the load is spread over keys
// A one-off payment with a saved card (issue 34) must keep at least the payout's share: the same
// kind of write (one batch: the payment, its idempotency record, its event), measured against the
// same floor: the two are measured in turn within each round, and both shares are of one pooled
// floor (every floor round of the two).
const TARGETS = { health: 0.9, read: 0.7, write: 0.6, payment: "write" };
/** A row's target: a number, or the share another row of the same run measured. */
const targetOf = (r, rows) => (typeof TARGETS[r.key] === "number" ? TARGETS[r.key] : (rows.find((x) => x.key === TARGETS[r.key])?.share ?? NaN));
const log = (...args) => console.log(`[floor ${((performance.now() / 1000) | 0).toString().padStart(4)}s]`, ...args);

/** Requests numbered across every round, so that each keyed write has its own Idempotency-Key. */
let sequence = 0;

// FLOOR_PERF=1: the first round of each side runs under `perf record` (Linux perf, on the side's
// workerd processes), and the report adds where each side's CPU per request goes, by kind of code,
// and the functions that differ most: the profile of what is left.
const PERF = process.env.FLOOR_PERF === "1";

/** Kinds of native code in a workerd profile, by symbol; first match wins. */
const KINDS = [
  ["SQLite: parsing and planning SQL", /^(sqlite3(RunParser|GetToken|Parser|Select|Expr|Walk|Resolve|FindFunction|Where|Insert|Update|Delete|Prepare|LocateTable|ColumnsFromExprList|KeywordCode|SrcList|IdList|ExprList|VdbeAdd|VdbeChange|VdbeMake|VdbeFinal|VdbeDelete|Dequote|StrICmp|HashFind|Fk|AuthCheck)|yy_|resolve|lookupName|tokenExpr|whereLoop|keywordCode|selectExpander|exprAnalyze)/],
  ["SQLite: running statements", /^(sqlite3|pcache|pager|btree|vdbe|unix|wal|balance|moveToChild|getAndInitPage|insertCell|fillInCell)/i],
  ["V8: JavaScript, its built-ins and GC", /^(v8::|Builtins_|\[JIT\]|Runtime_|Heap|Scavenger|cppgc|v8_inspector)|JIT/],
  ["workerd, KJ and Cap'n Proto (HTTP, RPC between isolates, I/O)", /^(workerd::|kj::|capnp::|edgeworker|std::)/],
  ["memory allocation", /malloc|Malloc|tcmalloc|TCMalloc|free\b|operator (new|delete)/],
  ["kernel (system calls, network)", /^\[k\]/],
];

function kindOf(symbol) {
  for (const [kind, pattern] of KINDS) if (pattern.test(symbol)) return kind;
  return "other (libc, unnamed)";
}

/** Whether Linux perf can be run here; FLOOR_PERF=1 without it says so and profiles nothing. */
const PERF_AVAILABLE = PERF && spawnSync("perf", ["--version"], { stdio: "ignore" }).status === 0;
if (PERF && !PERF_AVAILABLE) console.error("FLOOR_PERF=1: perf is not installed (Debian: apt-get install linux-perf); no profiles");

function startPerf(side, name) {
  if (!PERF_AVAILABLE) return null;
  const file = path.join(TMP, `${name}.perf.data`);
  const pids = workerdStats(side.child.pid).map((s) => s.pid);
  const perf = spawn("perf", ["record", "-F", "999", "-p", pids.join(","), "-o", file, "--", "sleep", String(SECONDS)], { stdio: "ignore" });
  const done = new Promise((resolve) => perf.on("exit", resolve).on("error", resolve));
  return { file, done };
}

/** Samples by symbol (kernel ones marked [k]) from a perf.data file. */
function perfSamples(file) {
  const out = execFileSync("perf", ["report", "-i", file, "--stdio", "--no-children", "-F", "sample,sym"], { encoding: "utf8", maxBuffer: 64 << 20, stdio: ["ignore", "pipe", "ignore"] });
  const bySymbol = new Map();
  for (const line of out.split("\n")) {
    const m = /^\s*(\d+)\s+\[(.)\]\s+(.*?)\s*$/.exec(line);
    if (!m) continue;
    const symbol = m[2] === "k" ? `[k] ${m[3]}` : m[3];
    bySymbol.set(symbol, (bySymbol.get(symbol) ?? 0) + Number(m[1]));
  }
  return bySymbol;
}

async function closedLoop(side, make, perfName = null) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let ok = 0;
  const bad = new Map();
  const perf = perfName ? startPerf(side, perfName) : null;
  const cpuBefore = workerdCpu(side.child.pid);
  const started = performance.now();
  const end = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const res = await send(side.port, agent, make(sequence++)).catch((e) => ({ status: String(e.message) }));
        if (typeof res.status === "number" && res.status < 300) ok++;
        else bad.set(res.status, (bad.get(res.status) ?? 0) + 1);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = workerdCpu(side.child.pid) - cpuBefore;
  agent.destroy();
  let profile = null;
  if (perf) {
    await perf.done;
    // 999 samples a second of CPU: a sample is about 1.001 ms of it.
    const samples = perfSamples(perf.file);
    profile = new Map([...samples].map(([symbol, n]) => [symbol, (n * 1000) / 999 / ok]));
  }
  return { rps: ok / seconds, cpuMs: ok ? (cpu * 1000) / ok : NaN, bad: [...bad].map(([s, c]) => `${s}×${c}`).join(", "), profile };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x, d = 0) => (Number.isFinite(x) ? x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }) : "n/a");

async function main() {
  fs.mkdirSync(TMP, { recursive: true });
  const load = os.loadavg().map((x) => x.toFixed(2)).join(" ");
  log("starting Tender and the bare Worker under wrangler dev");
  // FLOOR_TENDER_CONFIG=<file>: Tender under another wrangler config (an experiment's; the report names it).
  const tenderConfig = process.env.FLOOR_TENDER_CONFIG ? ["-c", process.env.FLOOR_TENDER_CONFIG] : [];
  const side = (name, configArgs, devArgs, databases) => startSide(name, { configArgs, devArgs, persist: path.join(TMP, `${name === "tender" ? "tender" : "bare"}-state`), databases, logDir: TMP, maxSockets: 8, waitMs: 90_000 });
  const tender = await side("tender", tenderConfig, ["--var", "ENVIRONMENT:development"], ["DB_0", "DB_1"]);
  const floor = await side("bare", ["-c", "bench/floor/wrangler.toml"], [], ["DB"]);
  try {
    const accounts = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const acct = await must(tender, { method: "POST", path: "/api/accounts", body: { name: `Floor ${i}`, email: `floor${i}@example.com` } });
      const user = await must(tender, { method: "POST", path: "/api/users", key: acct.api_key, body: { name: `User ${i}`, email: `user${i}@example.com` } });
      // A saved card (test mode's Stripe test PaymentMethod) for POST /payments.
      const card = await must(tender, { method: "POST", path: `/api/users/${user.id}/payment-methods`, key: acct.api_key, body: { processor_token: "pm_card_visa" } });
      accounts.push({ key: acct.api_key, user: user.id, card: card.id });
    }
    const item = await must(floor, { method: "POST", path: "/items", body: { name: "Ada" } });
    const run = Date.now().toString(36);
    const pairs = [
      { key: "health", label: "GET /health", floorLabel: "GET /health", tender: () => ({ path: "/health" }), floor: () => ({ path: "/health" }) },
      {
        key: "read",
        label: "GET /api/users/{id}",
        floorLabel: "a read by id",
        tender: (n) => ({ path: `/api/users/${accounts[n % ACCOUNTS].user}`, key: accounts[n % ACCOUNTS].key }),
        floor: () => ({ path: `/items/${item.id}` }),
      },
      {
        key: "write",
        label: "POST /payout with an Idempotency-Key",
        floorLabel: "a batch of 3 INSERTs",
        shared: "batch",
        drain: true,
        tender: (n) => {
          const a = accounts[n % ACCOUNTS];
          return { method: "POST", path: "/payout", key: a.key, idem: `floor-${run}-${n}`, body: { recipient_id: a.user, amount: 1000, currency: "usd", description: "floor", ...CARD } };
        },
        floor: (n) => ({ method: "POST", path: "/batch", idem: `floor-${run}-${n}`, body: { recipient_id: "usr", amount: 1000, currency: "usd", description: "floor" } }),
      },
      {
        key: "payment",
        label: "POST /payments with a saved card and an Idempotency-Key",
        floorLabel: "a batch of 3 INSERTs",
        shared: "batch",
        drain: true,
        tender: (n) => {
          const a = accounts[n % ACCOUNTS];
          return { method: "POST", path: "/payments", key: a.key, idem: `floor-pay-${run}-${n}`, body: { user_id: a.user, amount: 1000, currency: "usd", payment_method: a.card, description: "floor" } };
        },
        floor: (n) => ({ method: "POST", path: "/batch", idem: `floor-pay-${run}-${n}`, body: { user_id: "usr", amount: 1000, currency: "usd", description: "floor" } }),
      },
    ];
    const rows = [];
    // FLOOR_PAIRS=health,read: only those pairs (the report then has only their rows).
    const only = process.env.FLOOR_PAIRS?.split(",");
    const chosen = pairs.filter((p) => !only || only.includes(p.key));
    // Pairs with the same `shared` floor (the payout and the saved-card payment: the same bare batch)
    // are measured in one run of rounds, each round taking them in turn (and in the other order the
    // next round), with a floor round after each: every share is then against one pooled floor.
    const groups = [];
    for (const pair of chosen) {
      const group = pair.shared && groups.find((g) => g[0].shared === pair.shared);
      if (group) group.push(pair);
      else groups.push([pair]);
    }
    for (const group of groups) {
      const t = new Map(group.map((p) => [p.key, []]));
      const b = [];
      for (let round = 1; round <= ROUNDS; round++) {
        for (const pair of round % 2 ? group : [...group].reverse()) {
          t.get(pair.key).push(await closedLoop(tender, pair.tender, round === 1 ? `tender-${pair.key}` : null));
          if (pair.drain) await quiet(tender);
          b.push(await closedLoop(floor, pair.floor, round === 1 && pair === group[0] ? `floor-${pair.key}` : null));
          if (pair.drain) await quiet(floor);
          log(`${pair.label} round ${round}: Tender ${f(t.get(pair.key).at(-1).rps)}/s, floor ${f(b.at(-1).rps)}/s`);
        }
      }
      const br = median(b.map((x) => x.rps));
      const bc = median(b.map((x) => x.cpuMs));
      for (const pair of group) {
        const tp = t.get(pair.key);
        const tr = median(tp.map((x) => x.rps));
        rows.push({ ...pair, tender: tp, floor: b, tr, br, share: tr / br, tc: median(tp.map((x) => x.cpuMs)), bc, pooled: group.length > 1 });
      }
    }
    report(rows, load);
  } finally {
    tender.stop();
    floor.stop();
  }
}

/** Where each side's CPU per request went in its profiled round (FLOOR_PERF=1), by kind and by function. */
function profileSection(rows) {
  const profiled = rows.filter((r) => r.tender[0]?.profile && r.floor[0]?.profile);
  if (profiled.length === 0) return [];
  const lines = [
    "",
    "**Profiles** (`FLOOR_PERF=1`: Linux `perf record` at 999 Hz on each side's workerd processes during its first round; ms of CPU per request, by kind of code, then the functions whose cost differs most):",
    "",
  ];
  for (const r of profiled) {
    const [t, b] = [r.tender[0].profile, r.floor[0].profile];
    const byKind = (profile) => {
      const kinds = new Map();
      for (const [symbol, ms] of profile) kinds.set(kindOf(symbol), (kinds.get(kindOf(symbol)) ?? 0) + ms);
      return kinds;
    };
    const [tk, bk] = [byKind(t), byKind(b)];
    const kinds = [...new Set([...tk.keys(), ...bk.keys()])].sort((x, y) => (tk.get(y) ?? 0) - (tk.get(x) ?? 0));
    const sum = (m) => [...m.values()].reduce((a, v) => a + v, 0);
    lines.push(`- **${r.label}** (Tender ${f(sum(t), 2)} ms, floor ${f(sum(b), 2)} ms per request in the profiled round):`);
    lines.push(`  ${kinds.map((k) => `${k}: ${f(tk.get(k) ?? 0, 2)} / ${f(bk.get(k) ?? 0, 2)}`).join("; ")}.`);
    const symbols = [...new Set([...t.keys(), ...b.keys()])].map((s) => [s, (t.get(s) ?? 0) - (b.get(s) ?? 0)]).sort((x, y) => y[1] - x[1]).slice(0, 12);
    lines.push(`  Most added by Tender: ${symbols.map(([s, d]) => `\`${s.slice(0, 60)}\` +${f(d * 1000)} µs`).join(", ")}.`);
  }
  return lines;
}

function report(rows, load) {
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const lines = [
    "<!-- floor -->",
    "## Against the floor: a bare Worker doing the same D1 work (issue 23)",
    "",
    `Command: \`npm run bench:floor\` (bench/floor.mjs; also the last part of \`npm run bench\`), run ${new Date().toISOString()} at commit ${commit}. ` +
      `${ROUNDS} alternating rounds (Tender, then the bare Worker of bench/floor/) of ${SECONDS} s each, closed loop, ${CONCURRENCY} connections; medians. ` +
      `Both under \`wrangler dev\` on this machine (${os.cpus().length} CPUs, load average ${load} at the start), each on a fresh local D1. ` +
      "CPU per request is utime + stime of each side's workerd processes (the Worker and local D1; wrangler's Node process left out), divided by the requests answered in the round." +
      (rows.some((r) => r.pooled)
        ? " The payout and the saved-card payment are measured in turn within each round (in the other order the next round), each followed by a round of the bare batch: both shares are of that one pooled floor (its rounds listed on both rows)."
        : ""),
    "",
    "| Path (Tender / floor) | Tender req/s (rounds) | Floor req/s (rounds) | Share | Target | Met | CPU per request, Tender / floor (ms) |",
    "|---|---|---|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| ${r.label} / ${r.floorLabel} | ${f(r.tr)} (${r.tender.map((x) => f(x.rps)).join(", ")}) | ${f(r.br)} (${r.floor.map((x) => f(x.rps)).join(", ")}) | ${f(r.share, 2)} | ≥ ${typeof TARGETS[r.key] === "number" ? TARGETS[r.key] : `${f(targetOf(r, rows), 2)} (the payout's)`} | ${Number.isFinite(r.share) && r.share >= targetOf(r, rows) ? "yes" : "**no**"} | ${f(r.tc, 2)} / ${f(r.bc, 2)} |`,
    ),
    "",
    ...rows.flatMap((r) => [...r.tender, ...r.floor].filter((x) => x.bad).map((x) => `- ${r.label}: non-2xx answers in a round: ${x.bad}`)),
    ...profileSection(rows),
    "<!-- /floor -->",
  ];
  const section = lines.join("\n");
  replaceResultsSection("floor", section);
  console.log(section);
}

runScript("floor", main, 15);
