// `node bench/usage.mjs` (part of `npm run bench`; alone: `npm run bench:usage`): usage events at
// volume (issue 37: at least 10,000 events a second accepted on the local stack, in calls of 100,
// counted exactly at the period's close). Tender runs under `wrangler dev` on a fresh local D1 with
// two shards; one account on each, each with metered subscriptions at 0.01 (one cent a unit) whose
// user is on a test clock. Calls of 100 events (one subscription each, quantities 1 to 9) go out
// over CONCURRENCY connections, alternating the shards; every answer must accept all 100. Then
// each clock is advanced past the period's end, and each account's invoices must total exactly the
// units sent, in cents. The section between the `usage` markers of bench/RESULTS.md is replaced.
import { execFileSync } from "node:child_process";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT, replaceResultsSection, runScript, send, sleep, startTender } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/usage");
const EVENTS = Number(process.env.USAGE_EVENTS ?? 100_000);
const PER_CALL = 100;
const CONCURRENCY = Number(process.env.USAGE_CONCURRENCY ?? 16);
const SUBSCRIPTIONS = 10;
const GOAL = 10_000;
const START = "2026-05-01T00:00:00.000Z";

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

async function ok(port, req, status = [200, 201]) {
  const res = await send(port, agent, req);
  if (!status.includes(res.status)) throw new Error(`${req.method ?? "GET"} ${req.path} answered ${res.status}: ${res.text.slice(0, 300)}`);
  return JSON.parse(res.text);
}

/** One account on `shard` with SUBSCRIPTIONS metered subscriptions on one test clock. */
async function seed(port, shard) {
  const acct = await ok(port, { method: "POST", path: "/api/accounts", body: { name: `Usage ${shard}`, email: `usage${shard}@example.com` }, headers: { "tender-shard": String(shard) } });
  const key = acct.api_key;
  const clock = await ok(port, { method: "POST", path: "/api/test-clocks", key, body: { frozen_time: START, name: "usage bench" } });
  const plan = await ok(port, { method: "POST", path: "/subscription-plans", key, body: { name: "Events", price: 0.01, currency: "usd", interval: "month", usage_type: "metered" } });
  const subs = [];
  for (let i = 0; i < SUBSCRIPTIONS; i++) {
    const user = await ok(port, { method: "POST", path: "/api/users", key, body: { name: `User ${i}`, email: `u${i}@example.com`, test_clock: clock.id } });
    const sub = await ok(port, {
      method: "POST",
      path: "/subscriptions",
      key,
      body: { user_id: user.id, plan_id: plan.id, payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2030, cvv: "123" },
    });
    subs.push(sub.id);
  }
  return { shard, key, clock: clock.id, subs, sent: 0, units: 0 };
}

async function main() {
  const tender = await startTender(TMP);
  const { port } = tender;
  try {
    const accounts = [await seed(port, 0), await seed(port, 1)];
    const callOf = (n) => {
      const acct = accounts[n % 2];
      const sub = acct.subs[Math.floor(n / 2) % SUBSCRIPTIONS];
      const events = Array.from({ length: PER_CALL }, (_, i) => ({ id: `b${n}-${i}`, subscription_id: sub, quantity: 1 + ((n + i) % 9) }));
      return { acct, events };
    };
    // Warm-up: one call per account, counted like the rest.
    let accepted = 0;
    let duplicates = 0;
    const failures = [];
    const calls = Math.ceil(EVENTS / PER_CALL);
    const post = async (n) => {
      const { acct, events } = callOf(n);
      const res = await send(port, agent, { method: "POST", path: "/usage-events", key: acct.key, body: { events } }).catch((e) => ({ status: e.message, text: "" }));
      if (res.status !== 200) return void failures.push(`${res.status} ${res.text.slice(0, 200)}`);
      const body = JSON.parse(res.text);
      accepted += body.accepted;
      duplicates += body.duplicates;
      if (body.accepted !== events.length) failures.push(`call ${n}: ${res.text.slice(0, 200)}`);
      acct.sent += body.accepted;
      for (const e of events) acct.units += e.quantity;
    };
    await post(0);
    await post(1);
    let next = 2;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < calls) await post(next++);
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    const timedEvents = accepted - 2 * PER_CALL;
    // A retry of an accepted call is all duplicates and writes nothing.
    const retry = callOf(5);
    const again = JSON.parse((await send(port, agent, { method: "POST", path: "/usage-events", key: retry.acct.key, body: { events: retry.events } })).text);
    if (again.accepted !== 0 || again.duplicates !== PER_CALL) failures.push(`the retried call answered ${JSON.stringify(again)}`);

    // The period's close: each clock past the period's end; its invoices total the units, in cents.
    const totals = [];
    for (const acct of accounts) {
      await ok(port, { method: "POST", path: `/api/test-clocks/${acct.clock}/advance`, key: acct.key, body: { frozen_time: "2026-06-01T00:01:00.000Z" } });
      let invoiced = 0;
      let count = 0;
      for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(500)) {
        invoiced = 0;
        count = 0;
        for (const sub of acct.subs) {
          const list = await ok(port, { path: `/invoices?subscription_id=${sub}&limit=10`, key: acct.key });
          for (const inv of list.data) {
            invoiced += inv.total;
            count++;
          }
        }
        if (count >= acct.subs.length) break;
      }
      totals.push({ shard: acct.shard, units: acct.units, invoiced, invoices: count, exact: invoiced === acct.units });
    }
    const result = { accepted, duplicates, timedEvents, seconds, perSecond: timedEvents / seconds, failures, totals, load: os.loadavg() };
    report(result);
    if (failures.length > 0) throw new Error(`calls not fully accepted: ${failures.slice(0, 3).join("; ")}`);
    if (!totals.every((t) => t.exact)) throw new Error(`the period's close does not bill the units sent: ${JSON.stringify(totals)}`);
  } finally {
    tender.stop();
  }
}

function report(r) {
  const fmt = (x, d = 0) => x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const section = [
    "<!-- usage -->",
    `## Usage events at volume (issue 37)`,
    "",
    `Command: \`npm run bench:usage\` (bench/usage.mjs; also part of \`npm run bench\`), run ${new Date().toISOString()} at commit ${commit}, on ${os.cpus().length} CPUs, load average ${r.load.map((l) => fmt(l, 2)).join(" / ")} at the end. Tender under \`wrangler dev\` on a fresh local D1 with two shards: one account on each, ${SUBSCRIPTIONS} metered subscriptions each at 0.01 a unit on a test clock; ${fmt(EVENTS)} events in calls of ${PER_CALL} (one subscription a call), ${CONCURRENCY} connections, alternating the shards.`,
    "",
    "| Figure | Value | Goal |",
    "|---|---|---|",
    `| **Events accepted a second** | **${fmt(r.perSecond)} /s** (${fmt(r.timedEvents)} in ${fmt(r.seconds, 2)} s) | ≥ ${fmt(GOAL)} ${r.perSecond >= GOAL ? "(met)" : "(missed)"} |`,
    `| Calls not wholly accepted | ${r.failures.length} | 0 |`,
    ...r.totals.map((t) => `| DB_${t.shard}: invoiced at the period's close | ${fmt(t.invoiced)} cents over ${t.invoices} invoices, for ${fmt(t.units)} units sent | equal ${t.exact ? "(exact)" : "(NOT EXACT)"} |`),
    "",
    `A retry of an accepted call answered all ${PER_CALL} as duplicates. Each call is one INSERT … SELECT over json_each on its account's shard (src/billing/usage-events.ts).`,
    "<!-- /usage -->",
  ].join("\n");
  replaceResultsSection("usage", section);
  console.log(section);
}

runScript("usage", main, 15);
