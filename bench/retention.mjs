// `node bench/retention.mjs` (part of `npm run bench`; alone: `npm run bench:retention`): the rows
// and bytes kept per shard after a day of the soak's load, with the retention purge run by the
// cron (issue 35). Tender under `wrangler dev --test-scheduled` on a fresh local D1 with two
// shards: one account on each, event_retention_days 1, three endpoints each taking every event
// (plain, per_object, rate_limit 100), whose receiver in this process fails the first attempt of
// every third event it sees per endpoint (a 500) and answers 200 otherwise: the soak's load
// (test/proof/soak.test.ts), scaled. Two "days" of it are run: yesterday, then today, each ROUNDS
// rounds per account of: a customer created, one of its first 40 customers renamed in turn (PUT), and
// every fourth round a payout (settled by its job: two events). Once every delivery has its 2xx,
// the cron runs (its /cdn-cgi/local/scheduled handler) with its time a day after yesterday's end,
// as it would the next day (Tender's cron reads that time as now), again until nothing more is
// purged (a run purges a page of 200 events per shard). Each shard's rows (events,
// webhook_deliveries, delivery_attempts: the tables the purge deletes from) and its database's
// bytes (PRAGMA page_count × page_size, the free pages among them, and the file's size) are read
// before and after from its local D1 file, opened read-only with node:sqlite (`wrangler d1 execute
// --local` refuses PRAGMA page_count: SQLITE_AUTH). The section between the `retention` markers of
// bench/RESULTS.md is replaced with the result.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { CARD, ROOT, freePort, replaceResultsSection, runScript, send, sleep, startTender } from "./harness.mjs";

const TMP = path.join(ROOT, "bench/.tmp/retention");
const STATE = path.join(TMP, "state");
/** Rounds of the load per account per day. */
const ROUNDS = Number(process.env.RETENTION_ROUNDS ?? 100);
/** The customers renamed in turn: each is renamed ROUNDS × 2 / this times (a per_object endpoint sends an object's events one after another). */
const CUSTOMERS_RENAMED = 40;
const CONCURRENCY = 4;
const DAY_MS = 24 * 60 * 60 * 1000;
const PURGE_PAGE = 200;
const SHARDS = [0, 1];

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

/** A receiver that fails the first request of every third (endpoint, event) it sees, per endpoint. */
async function receiver() {
  const seen = new Set();
  const firsts = new Map();
  const acknowledged = new Set();
  let requests = 0;
  let failed = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      requests++;
      const key = `${req.url} ${req.headers["webhook-id"]}`;
      let status = 200;
      if (!seen.has(key)) {
        seen.add(key);
        const n = (firsts.get(req.url) ?? 0) + 1;
        firsts.set(req.url, n);
        if (n % 3 === 0) status = 500;
      }
      if (status === 200) acknowledged.add(key);
      else failed++;
      res.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : "down");
    });
  });
  server.keepAliveTimeout = 60_000;
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { port, acknowledged, stats: () => ({ requests, failed, distinct: seen.size }), close: () => server.close() };
}

async function ok(port, request, status = [200, 201]) {
  const res = await send(port, agent, request);
  if (!status.includes(res.status)) throw new Error(`${request.method ?? "GET"} ${request.path} answered ${res.status}: ${res.text.slice(0, 300)}`);
  return JSON.parse(res.text);
}

/** Each shard's local D1 file (the SQLite file wrangler dev keeps under STATE), found by its account's name. */
function shardFiles() {
  const dir = path.join(STATE, "v3/d1/miniflare-D1DatabaseObject");
  const files = new Map();
  for (const name of fs.readdirSync(dir).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")) {
    const db = new DatabaseSync(path.join(dir, name), { readOnly: true });
    try {
      const shard = db.prepare("SELECT name FROM accounts WHERE name LIKE 'Retention %'").get()?.name.split(" ")[1];
      if (shard !== undefined) files.set(Number(shard), path.join(dir, name));
    } finally {
      db.close();
    }
  }
  return files;
}

let files = new Map();
/** One row of `sql` on a shard's local D1, read from its file (read-only, beside wrangler dev). */
function row(shard, sql) {
  const db = new DatabaseSync(files.get(shard), { readOnly: true });
  try {
    return db.prepare(sql).get();
  } finally {
    db.close();
  }
}

/** A shard's rows in the tables the purge deletes from, yesterday's events among them, and its bytes. */
function measure(shard, yesterdayEnd) {
  const before = `'${new Date(yesterdayEnd).toISOString()}'`;
  const counts = row(
    shard,
    `SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM webhook_deliveries) AS deliveries, (SELECT count(*) FROM delivery_attempts) AS attempts,
      (SELECT count(*) FROM events WHERE created_at < ${before}) AS yesterday,
      (SELECT count(*) FROM events AS e WHERE e.created_at < ${before}
        AND e.feed_position < (SELECT MAX(m.feed_position) FROM events AS m WHERE m.account_id = e.account_id AND m.livemode = e.livemode)
        AND (e.object_id IS NULL OR e.sequence < (SELECT MAX(o.sequence) FROM events AS o WHERE o.object_id = e.object_id))) AS yesterdayNotNewest`,
  );
  const pages = row(shard, "PRAGMA page_count").page_count;
  const size = row(shard, "PRAGMA page_size").page_size;
  const free = row(shard, "PRAGMA freelist_count").freelist_count;
  const file = files.get(shard);
  const fileBytes = fs.statSync(file).size + (fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0);
  return { ...counts, bytes: pages * size, freeBytes: free * size, fileBytes };
}

async function main() {
  const loadAtStart = os.loadavg().map((x) => x.toFixed(2)).join(" ");
  // Tender under `wrangler dev` on TMP/state (STATE), both shards migrated, serving the cron's handler.
  const tender = await startTender(TMP, { args: ["--test-scheduled"] });
  const sink = await receiver();
  const started = Date.now();
  try {
    const { port } = tender;
    const accounts = [];
    for (const shard of SHARDS) {
      const acct = await ok(port, { method: "POST", path: "/api/accounts", body: { name: `Retention ${shard}`, email: `retention${shard}@example.com` }, headers: { "tender-shard": String(shard) } });
      const key = acct.api_key;
      await ok(port, { method: "PATCH", path: "/api/account", key, body: { event_retention_days: 1 } });
      for (const [hook, extra] of [["plain", {}], ["ordered", { ordering: "per_object" }], ["throttled", { rate_limit: 100 }]]) {
        await ok(port, { method: "POST", path: "/api/webhooks", key, body: { url: `http://127.0.0.1:${sink.port}/${shard}/${hook}`, events: ["*"], ...extra } });
      }
      accounts.push({ shard, key, customers: [], writes: 0, statuses: new Map() });
    }
    files = shardFiles();
    if (SHARDS.some((shard) => !files.has(shard))) throw new Error(`the local D1 files of the shards were not found under ${STATE}`);

    // One round of the load on one account: a customer created, one renamed, every fourth a payout.
    const round = async (acct, day, i) => {
      const tally = (res) => acct.statuses.set(res.status, (acct.statuses.get(res.status) ?? 0) + 1);
      const created = await send(port, agent, { method: "POST", path: "/api/users", key: acct.key, body: { name: `Day${day} Customer${i}`, email: `d${day}c${i}s${acct.shard}@example.com` } });
      tally(created);
      if (created.status === 201 && acct.customers.length < CUSTOMERS_RENAMED) acct.customers.push(JSON.parse(created.text));
      const customer = acct.customers[i % acct.customers.length];
      if (customer) tally(await send(port, agent, { method: "PUT", path: `/api/users/${customer.id}`, key: acct.key, body: { name: `Day${day} Renamed${i}`, email: customer.email } }));
      if (i % 4 === 0 && customer) tally(await send(port, agent, { method: "POST", path: "/payout", key: acct.key, body: { recipient_id: customer.id, amount: 1000 + i, currency: "usd", description: `day ${day} payout ${i}`, ...CARD } }));
      acct.writes += customer ? (i % 4 === 0 ? 3 : 2) : 1;
    };
    const day = async (n) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (;;) {
            const i = next++;
            if (i >= ROUNDS) return;
            await Promise.all(accounts.map((acct) => round(acct, n, i)));
          }
        }),
      );
    };
    await day(1);
    // Yesterday ends here: every event written so far (a settlement's too, once its job ran) is yesterday's.
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(500)) {
      if (SHARDS.every((shard) => row(shard, "SELECT count(*) AS n FROM payouts WHERE status = 'pending'").n === 0)) break;
    }
    await sleep(50);
    const yesterdayEnd = Date.now();
    await sleep(50);
    await day(2);

    // Every delivery to its 2xx: the failed first attempts are retried within about 10 s.
    // Given up only when nothing moved for a minute.
    let settledAt = 0;
    for (let last = -1, moved = Date.now(); Date.now() - moved < 60_000; await sleep(500)) {
      const left = SHARDS.reduce((sum, shard) => sum + row(shard, "SELECT (SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered') + (SELECT count(*) FROM payouts WHERE status = 'pending') AS n").n, 0);
      if (left === 0) {
        settledAt = Date.now();
        break;
      }
      if (left !== last) [last, moved] = [left, Date.now()];
    }
    if (!settledAt) throw new Error("deliveries were left undelivered, and none was delivered for a minute");
    const loadSeconds = (settledAt - started) / 1000;
    const before = SHARDS.map((shard) => measure(shard, yesterdayEnd));

    // The next day: the cron at yesterday's end + 1 day, until a run purges nothing more.
    const cronAt = yesterdayEnd + DAY_MS;
    let runs = 0;
    let purgeSeconds = 0;
    for (let last = before.map((b) => b.events); runs < 100; ) {
      const t = Date.now();
      const res = await send(port, agent, { path: `/cdn-cgi/local/scheduled?cron=${encodeURIComponent("* * * * *")}&time=${cronAt}&format=json` });
      purgeSeconds += (Date.now() - t) / 1000;
      runs++;
      if (res.status !== 200) throw new Error(`the cron answered ${res.status}: ${res.text.slice(0, 300)}`);
      const left = SHARDS.map((shard) => row(shard, "SELECT count(*) AS n FROM events").n);
      if (left.every((n, i) => n === last[i])) break;
      last = left;
    }
    const after = SHARDS.map((shard) => measure(shard, yesterdayEnd));
    const result = { loadAtStart, load: os.loadavg().map((x) => x.toFixed(2)).join(" "), accounts, before, after, runs, purgeSeconds, loadSeconds, receiver: sink.stats(), acknowledged: sink.acknowledged.size };
    report(result);
    for (const [i, a] of after.entries()) {
      if (a.yesterdayNotNewest !== 0) throw new Error(`DB_${i}: ${a.yesterdayNotNewest} of yesterday's events that are not their object's newest were kept`);
      if (a.events - a.yesterday !== before[i].events - before[i].yesterday) throw new Error(`DB_${i}: today's events were purged`);
    }
  } finally {
    sink.close();
    tender.stop();
  }
}

function report(r) {
  const fmt = (x, d = 0) => Number(x).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  const kb = (bytes) => `${fmt(bytes / 1024)} KB`;
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const mix = r.accounts.map((a) => `DB_${a.shard}: ${[...a.statuses].sort().map(([s, c]) => `${s}×${c}`).join(", ")}`).join("; ");
  const rows = SHARDS.flatMap((shard, i) => {
    const b = r.before[i];
    const a = r.after[i];
    return [
      `| DB_${shard} | events | ${fmt(b.events)} (${fmt(b.yesterday)} yesterday's) | ${fmt(a.events)} (${fmt(a.yesterday)} yesterday's, each its object's or its account's newest) |`,
      `| DB_${shard} | webhook_deliveries | ${fmt(b.deliveries)} | ${fmt(a.deliveries)} |`,
      `| DB_${shard} | delivery_attempts | ${fmt(b.attempts)} | ${fmt(a.attempts)} |`,
      `| DB_${shard} | database bytes: page_count × page_size (free pages among them); the file with its WAL | ${kb(b.bytes)} (${kb(b.freeBytes)} free); ${kb(b.fileBytes)} | ${kb(a.bytes)} (${kb(a.freeBytes)} free); ${kb(a.fileBytes)} |`,
    ];
  });
  const section = [
    "<!-- retention -->",
    "## Rows and bytes kept per shard after a day of the soak's load (issue 35)",
    "",
    `Command: \`npm run bench:retention\` (bench/retention.mjs; also part of \`npm run bench\`), run ${new Date().toISOString()} at commit ${commit}, on ${os.cpus().length} CPUs, load average ${r.loadAtStart} at the start and ${r.load} at the end. Tender under \`wrangler dev\` on a fresh local D1 with two shards, one account on each with \`event_retention_days: 1\` and three endpoints taking every event (plain, per_object, rate_limit 100); the receiver fails the first attempt of every third event per endpoint (500) and answers 200 otherwise. **The day is scaled**: ${ROUNDS} rounds per account per day (a customer created, one of the first ${CUSTOMERS_RENAMED} customers renamed in turn, a payout every fourth round, settled by its job), ${CONCURRENCY} rounds at a time, two days (yesterday, then today) in ${fmt(r.loadSeconds)} s of real time with every delivery's 2xx. Then the cron runs with its time set to yesterday's end + 24 hours (Tender's cron reads that time as now), ${r.runs} runs until nothing more was purged (${fmt(r.purgeSeconds, 1)} s in all; a run purges a page of ${PURGE_PAGE} events per shard). Rows and bytes read from each shard's local D1 file (node:sqlite, read-only; \`wrangler d1 execute --local\` refuses PRAGMA page_count).`,
    "",
    "| Shard | Table | After the two days | After the next day's purge |",
    "|---|---|---|---|",
    ...rows,
    "",
    `Writes answered: ${mix}. The receiver got ${fmt(r.receiver.requests)} requests for ${fmt(r.receiver.distinct)} (endpoint, event) pairs, ${fmt(r.receiver.failed)} of them failed first attempts; ${fmt(r.acknowledged)} pairs acknowledged. Yesterday's events that stay are each the newest of their object (a customer's last rename, a payout's settlement) or of their account and mode: the purge keeps those for the feed's positions and \`sequence\` (src/webhooks/retention.ts), so the rows kept grow with the objects an account has, not only with the days kept. SQLite does not give pages back without VACUUM (which D1 does not run): the purge turns pages into free pages that later rows reuse, so a database's bytes stop growing rather than shrink.`,
    "<!-- /retention -->",
  ].join("\n");
  replaceResultsSection("retention", section);
  console.log(section);
}

runScript("retention", main, 15);
