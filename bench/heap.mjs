// `node bench/heap.mjs` (part of `npm run bench`; alone: `npm run bench:heap`): the Tender isolate's
// own memory (issue 23). `wrangler dev` and local D1 grow by themselves under load, so their process
// sizes say nothing about Tender's isolate; its V8 heap does. Tender runs under `wrangler dev` with
// its inspector open on a fresh local D1; after a warm-up, and after each of two rounds of MIXED
// requests (reads, creates with Idempotency-Keys, payouts, lists, request ids with metadata, 404s,
// bad bodies), a full GC (a heap snapshot) and the used heap (Runtime.getHeapUsage).
// The section between the `heap` markers of bench/RESULTS.md is replaced with the result.
import { execFileSync } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { CARD, ROOT, freePort, replaceResultsSection, runScript, send, sleep, startTender } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/heap");
const MIXED = Number(process.env.HEAP_REQUESTS ?? 10_000);
const CONCURRENCY = 16;
const ACCOUNTS = 20;

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

async function inspector(port) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { Origin: "http://localhost" } });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = (event) => reject(new Error(`inspector: ${event.message ?? "connection failed"}`));
  });
  const waiting = new Map();
  ws.onmessage = (event) => {
    const message = JSON.parse(String(event.data));
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
  };
  let id = 0;
  const call = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const mine = ++id;
      const timer = setTimeout(() => (waiting.delete(mine), reject(new Error(`inspector: ${method} got no answer within 60 s`))), 60_000);
      waiting.set(mine, (m) => (clearTimeout(timer), m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result)));
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  return { call, close: () => ws.close() };
}

/**
 * The used V8 heap after a full GC, in bytes (the median of three reads, each after its own GC).
 * workerd's inspector does not answer HeapProfiler.collectGarbage; a heap snapshot collects first
 * (its chunks are ignored).
 */
async function heapAfterGc(session) {
  const reads = [];
  for (let i = 0; i < 3; i++) {
    await session.call("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
    reads.push((await session.call("Runtime.getHeapUsage")).usedSize);
    await sleep(200);
  }
  return reads.sort((a, b) => a - b)[1];
}

async function main() {
  const inspectorPort = await freePort();
  const tender = await startTender(TMP, { args: ["--inspector-ip", "127.0.0.1", "--inspector-port", String(inspectorPort)] });
  const { port } = tender;
  try {
    const accounts = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const acct = JSON.parse((await send(port, agent, { method: "POST", path: "/api/accounts", body: { name: `Heap ${i}`, email: `heap${i}@example.com` } })).text);
      const user = JSON.parse((await send(port, agent, { method: "POST", path: "/api/users", key: acct.api_key, body: { name: `U ${i}`, email: `u${i}@example.com` } })).text);
      accounts.push({ key: acct.api_key, user: user.id });
    }
    const run = Date.now().toString(36);
    let n = 0;
    const mixed = (i) => {
      const a = accounts[i % ACCOUNTS];
      switch (i % 10) {
        case 0:
        case 1:
        case 2:
        case 3:
          return { path: `/api/users/${a.user}`, key: a.key };
        case 4:
          return { method: "POST", path: "/api/users", key: a.key, idem: `heap-u-${run}-${i}`, body: { name: `Grace ${i}`, email: `g${i}@example.com` } };
        case 5:
          return { method: "POST", path: "/payout", key: a.key, idem: `heap-p-${run}-${i}`, body: { recipient_id: a.user, amount: 100 + (i % 900), currency: "usd", description: `bench ${i}`, ...CARD } };
        case 6:
          return { path: "/api/users?limit=10", key: a.key };
        case 7:
          // Metadata keys and values that differ on every request: anything keyed by request input would grow.
          return { method: "POST", path: "/api/request-id", key: a.key, body: { purpose: `p-${i}`, metadata: { [`k${i}`]: `v${i}` } } };
        case 8:
          return { path: `/api/users/usr_${String(i).padStart(26, "0")}`, key: a.key };
        default:
          return { method: "POST", path: "/api/users", key: a.key, body: `{"name": "bad ${i}", "email": ` };
      }
    };
    async function round(count) {
      const statuses = new Map();
      const end = n + count;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (n < end) {
            const res = await send(port, agent, mixed(n++)).catch((e) => ({ status: e.message }));
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          }
        }),
      );
      return statuses;
    }
    await round(500); // warm-up: every code path loaded and every statement prepared
    await sleep(8000); // the payouts' settlement jobs run and finish
    const session = await inspector(inspectorPort);
    await session.call("HeapProfiler.enable");
    const start = await heapAfterGc(session);
    const first = await round(MIXED);
    await sleep(8000);
    const afterFirst = await heapAfterGc(session);
    const second = await round(MIXED);
    await sleep(8000);
    const afterSecond = await heapAfterGc(session);
    session.close();
    report({ start, afterFirst, afterSecond, first, second });
  } finally {
    tender.stop();
  }
}

function report({ start, afterFirst, afterSecond, first, second }) {
  const mb = (bytes) => (bytes / 1024 / 1024).toFixed(2);
  const kb = (bytes) => (bytes / 1024).toFixed(0);
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const mix = (statuses) => [...statuses].sort().map(([s, c]) => `${s}×${c}`).join(", ");
  const section = [
    "<!-- heap -->",
    "## The Tender isolate's heap under mixed requests (issue 23)",
    "",
    `Command: \`npm run bench:heap\` (bench/heap.mjs; also part of \`npm run bench\`), run ${new Date().toISOString()} at commit ${commit}. ` +
      "Tender under `wrangler dev` with its inspector open, a fresh local D1; after 500 warm-up requests and after each round of " +
      `${MIXED.toLocaleString("en-US")} mixed requests (16 connections: reads by id 40%, creates with an Idempotency-Key 10%, payouts with one 10%, lists 10%, request ids whose metadata keys differ every time 10%, 404s 10%, malformed bodies 10%, over 20 accounts), a full GC and the used V8 heap (a heap snapshot collects first, as workerd does not answer HeapProfiler.collectGarbage; then Runtime.getHeapUsage; the median of three reads).`,
    "",
    "| Moment | Used heap after GC | Change |",
    "|---|---|---|",
    `| After the warm-up | ${mb(start)} MB | — |`,
    `| After ${MIXED.toLocaleString("en-US")} mixed requests | ${mb(afterFirst)} MB | ${afterFirst >= start ? "+" : ""}${kb(afterFirst - start)} KB |`,
    `| After ${(2 * MIXED).toLocaleString("en-US")} | ${mb(afterSecond)} MB | ${afterSecond >= afterFirst ? "+" : ""}${kb(afterSecond - afterFirst)} KB over the second round |`,
    "",
    `Answers, first round: ${mix(first)}; second round: ${mix(second)}. A production isolate has 128 MB. The per-isolate caches are bounded: credentials by hash (10,000 entries, oldest out first), imported HMAC keys (1,000), processor key rings (8), prepared statements by shape (a finite set: tables and the filters a list has, never request input), stored-answer specs (one per table); in development only, the rate limiter's counts (the keys of the current 10-second window, src/lib/rate-limiter.ts).`,
    "<!-- /heap -->",
  ].join("\n");
  replaceResultsSection("heap", section);
  console.log(section);
}

runScript("heap", main, 10);
