// `npm run move-account -- <account_id> <shard>`: moves an account to another shard (README "Shards")
// through POST /api/accounts/{id}/move of the Tender at TENDER_API_URL (http://127.0.0.1:8787), with
// ADMIN_TOKEN as its bearer outside development. Prints the proof of the copy, one line per table
// (rows and SHA-256, equal on both shards), and exits 0; on a refusal it prints the error and exits 1.
// A move that stopped half-way is finished by running the same command again.
const [accountId, shard] = process.argv.slice(2);
if (!accountId || shard === undefined || !/^\d+$/.test(shard)) {
  console.error("usage: npm run move-account -- <account_id> <shard>   (TENDER_API_URL, ADMIN_TOKEN from the environment)");
  process.exit(2);
}
const base = (process.env.TENDER_API_URL || "http://127.0.0.1:8787").replace(/\/$/, "");
const headers = { "content-type": "application/json", ...(process.env.ADMIN_TOKEN ? { authorization: `Bearer ${process.env.ADMIN_TOKEN}` } : {}) };
const response = await fetch(`${base}/api/accounts/${encodeURIComponent(accountId)}/move`, { method: "POST", headers, body: JSON.stringify({ to_shard: Number(shard) }) });
const body = await response.json().catch(() => null);
if (!response.ok) {
  console.error(`move refused: ${response.status} ${body?.error ? `${body.error.code}: ${body.error.message}` : "(no error body)"}`);
  process.exit(1);
}
if (body.finished_only) {
  console.log(`${body.account_id} is on shard ${body.to_shard}: a stopped move was finished (its keys are unpaused).`);
} else {
  console.log(`${body.account_id} moved from shard ${body.from_shard} to shard ${body.to_shard} in ${body.rounds} cop${body.rounds === 1 ? "y" : "ies"}; proof:`);
  for (const t of body.tables) console.log(`  ${t.table.padEnd(24)} ${String(t.rows).padStart(8)} rows  sha256 ${t.sha256}`);
}
