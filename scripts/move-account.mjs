// `npm run move-account -- <account_id> <shard>`: moves an account to another shard (docs/operations.md "Shards")
// through POST /api/accounts/{id}/move of the Tender at TENDER_API_URL (http://127.0.0.1:8787), with
// ADMIN_TOKEN as its bearer outside development; DRAIN_SECONDS sets the move's drain_seconds. Prints the proof of the copy, one line per table
// (rows and SHA-256, equal on both shards), and exits 0; on a refusal it prints the error and exits 1.
// A move that stopped half-way is finished by running the same command again.
import http from "node:http";
import https from "node:https";

const [accountId, shard] = process.argv.slice(2);
if (!accountId || shard === undefined || !/^\d+$/.test(shard)) {
  console.error("usage: npm run move-account -- <account_id> <shard>   (TENDER_API_URL, ADMIN_TOKEN from the environment)");
  process.exit(2);
}
const base = (process.env.TENDER_API_URL || "http://127.0.0.1:8787").replace(/\/$/, "");
const headers = { "content-type": "application/json", ...(process.env.ADMIN_TOKEN ? { authorization: `Bearer ${process.env.ADMIN_TOKEN}` } : {}) };
// node:http, not fetch: a large account's move can take longer than fetch waits for an answer
// (300 s), and the move goes on in the Worker whether or not anyone waits.
const url = new URL(`${base}/api/accounts/${encodeURIComponent(accountId)}/move`);
const payload = JSON.stringify({ to_shard: Number(shard), ...(process.env.DRAIN_SECONDS ? { drain_seconds: Number(process.env.DRAIN_SECONDS) } : {}) });
const { status, text } = await new Promise((resolve, reject) => {
  const request = (url.protocol === "https:" ? https : http).request(url, { method: "POST", headers: { ...headers, "content-length": Buffer.byteLength(payload) } }, (response) => {
    let data = "";
    response.on("data", (chunk) => (data += chunk));
    response.on("end", () => resolve({ status: response.statusCode, text: data }));
  });
  request.on("error", reject);
  request.end(payload);
});
let body = null;
try {
  body = JSON.parse(text);
} catch {
  // not JSON
}
if (status < 200 || status >= 300) {
  console.error(`move refused: ${status} ${body?.error ? `${body.error.code}: ${body.error.message}` : "(no error body)"}`);
  process.exit(1);
}
if (body.finished_only) {
  console.log(`${body.account_id} is on shard ${body.to_shard}: a stopped move was finished (its keys are unpaused).`);
} else {
  console.log(`${body.account_id} moved from shard ${body.from_shard} to shard ${body.to_shard} in ${body.rounds} cop${body.rounds === 1 ? "y" : "ies"}; proof:`);
  for (const t of body.tables) console.log(`  ${t.table.padEnd(24)} ${String(t.rows).padStart(8)} rows  sha256 ${t.sha256}`);
}
