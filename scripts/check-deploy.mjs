#!/usr/bin/env node
// npm run check-deploy [-- --config wrangler.toml] [--env NAME]: refuses a configuration that
// cannot be deployed as it stands, then runs `wrangler deploy --dry-run` on it. It refuses:
//  - a D1 database_id that is a placeholder (the repository's 00000000-… ids) or not a UUID;
//  - two bindings on one database, or shards DB_0 … DB_{n-1} with a gap;
//  - ENVIRONMENT other than "production" (development opens sign-up and the Stripe stand-ins).
// Secrets live in Cloudflare, not in the file: `wrangler secret list` shows them (docs/deploying.md).
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";
import { unstable_readConfig } from "wrangler";

const { values } = parseArgs({ options: { config: { type: "string", short: "c", default: "wrangler.toml" }, env: { type: "string", short: "e" } } });
const config = unstable_readConfig({ config: values.config, env: values.env }, {});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PLACEHOLDER = /^0{8}-0{4}-0{4}-0{4}-0{8}[0-9a-f]{4}$/i;

/** What stops this configuration from being deployed, one sentence each. */
function problemsOf(config) {
  const problems = [];
  const databases = config.d1_databases ?? [];
  const seen = new Map();
  for (const db of databases) {
    const id = db.database_id ?? "";
    if (PLACEHOLDER.test(id)) {
      problems.push(`${db.binding}: database_id ${id} is the repository's placeholder. Create the database (\`npx wrangler d1 create ${db.database_name}\`) and put the id it prints here.`);
    } else if (!UUID.test(id)) {
      problems.push(`${db.binding}: database_id "${id}" is not a D1 database id (a UUID, as \`npx wrangler d1 list\` shows).`);
    } else if (seen.has(id.toLowerCase())) {
      problems.push(`${db.binding}: database_id ${id} is also ${seen.get(id.toLowerCase())}'s. Every shard is a database of its own.`);
    }
    seen.set(id.toLowerCase(), db.binding);
  }
  const shards = databases.map((db) => db.binding).filter((b) => /^DB_\d+$/.test(b));
  shards.forEach((_, n) => {
    if (!shards.includes(`DB_${n}`)) problems.push(`The shards must be DB_0 … DB_${shards.length - 1} without a gap: DB_${n} is missing.`);
  });
  if (shards.length === 0) problems.push("No D1 database is bound as DB_0: Tender keeps its accounts there.");
  const environment = config.vars?.ENVIRONMENT;
  if (environment !== "production") {
    problems.push(`ENVIRONMENT is ${JSON.stringify(environment)}: deploy with "production" (development opens sign-up and honours STRIPE_API_BASE).`);
  }
  return problems;
}

const problems = problemsOf(config);
if (problems.length > 0) {
  console.error(`${values.config} cannot be deployed yet:`);
  for (const p of problems) console.error(`  - ${p}`);
  console.error("docs/deploying.md walks through each step.");
  process.exit(1);
}
console.log(`${values.config}: ${config.d1_databases.length} D1 database(s), ENVIRONMENT=production. Building it (wrangler deploy --dry-run)…`);
const args = ["deploy", "--dry-run", "--outdir", ".wrangler/check-deploy", "--config", values.config, ...(values.env ? ["--env", values.env] : [])];
const dry = spawnSync("npx", ["wrangler", ...args], { stdio: "inherit" });
process.exit(dry.status ?? 1);
