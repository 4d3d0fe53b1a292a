// `npm run dev`: applies the D1 migrations to the local database (one line of output, or all of
// wrangler's output when one fails), serves the Worker with `wrangler dev` on 127.0.0.1:$PORT (8787)
// with ENVIRONMENT=development, and runs the Cron Trigger on wrangler.toml's schedule, as production
// does: wrangler dev serves the scheduled handler at /cdn-cgi/local/scheduled but never calls it
// itself. Each run prints one line. Arguments go on to `wrangler dev` (`--persist-to <dir>` to the
// migrations as well); STRIPE_API_BASE in the shell points live mode at another Stripe (the fake of
// `npm run fake-stripe`). SIGINT (Ctrl-C), SIGTERM and SIGHUP stop wrangler; the script exits as it did.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_readConfig } from "wrangler";
import { parseCron } from "./cron.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const wrangler = join(root, "node_modules", "wrangler", "bin", "wrangler.js");
const port = process.env.PORT || "8787";
const origin = `http://127.0.0.1:${port}`;
const devArgs = process.argv.slice(2);
const config = unstable_readConfig({ config: join(root, "wrangler.toml") }, { hideWarnings: true });

await migrate();
const child = spawn(
  process.execPath,
  // --test-scheduled only silences wrangler's warning that scheduled handlers are not run locally.
  [wrangler, "dev", "--ip", "127.0.0.1", "--port", port, "--var", "ENVIRONMENT:development", "--var", `PUBLIC_URL:${process.env.PUBLIC_URL || origin}`, ...stripeApiBase(), "--test-scheduled", ...devArgs],
  { cwd: root, stdio: "inherit" },
);
const cron = startCron(config.triggers?.crons ?? []);

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    cron.stop();
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  });
}
child.on("error", (error) => {
  console.error(`npm run dev: could not start wrangler dev: ${error.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  cron.stop();
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});

/** STRIPE_API_BASE and STRIPE_JS_URL from the shell (the fake Stripe of `npm run fake-stripe`), as wrangler vars. */
function stripeApiBase() {
  return ["STRIPE_API_BASE", "STRIPE_JS_URL"].flatMap((name) => (process.env[name] ? ["--var", `${name}:${process.env[name]}`] : []));
}

/** `wrangler d1 migrations apply` on every shard (DB_0, DB_1, …), its tables kept out of sight unless it fails. */
async function migrate() {
  const shards = config.d1_databases.filter((db) => /^DB_\d+$/.test(db.binding));
  for (const shard of shards) await migrateShard(shard);
}

async function migrateShard(database) {
  const at = devArgs.findIndex((arg) => arg === "--persist-to" || arg.startsWith("--persist-to="));
  const persist = at === -1 ? [] : devArgs[at].includes("=") ? [devArgs[at]] : devArgs.slice(at, at + 2);
  const run = spawn(process.execPath, [wrangler, "d1", "migrations", "apply", database.binding, "--local", ...persist], {
    cwd: root,
    env: { ...process.env, CI: "true" }, // answers wrangler's "continue?" prompt
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  run.stdout.on("data", (chunk) => (output += chunk));
  run.stderr.on("data", (chunk) => (output += chunk));
  const [code, signal] = await new Promise((resolve) => run.on("close", (...end) => resolve(end)));
  if (code !== 0) {
    process.stderr.write(output);
    console.error(`npm run dev: the D1 migrations of ${database.binding} failed (wrangler ${signal ?? `exited ${code}`}); wrangler dev was not started.`);
    process.exit(code || 1);
  }
  const total = readdirSync(join(root, database.migrations_dir ?? "migrations")).filter((name) => name.endsWith(".sql")).length;
  const applied = /About to apply (\d+) migration/.exec(output)?.[1];
  console.log(applied ? `D1 (local) ${database.binding}: applied ${applied} of ${total} migrations` : `D1 (local) ${database.binding}: up to date (${total} migrations)`);
}

/** Calls the scheduled handler at the start of each minute one of the crons names. */
function startCron(expressions) {
  const crons = expressions.flatMap((expression) => {
    try {
      return [{ expression, fires: parseCron(expression) }];
    } catch (error) {
      console.log(`[cron] ${error.message}: npm run dev will not run it`);
      return [];
    }
  });
  let stopped = crons.length === 0;
  let timer;
  let next = Math.floor(Date.now() / 60_000) * 60_000;
  const arm = () => {
    if (stopped) return;
    next = Math.max(next + 60_000, Math.floor(Date.now() / 60_000) * 60_000 + 60_000);
    timer = setTimeout(() => {
      for (const cron of crons) if (cron.fires(new Date(next))) void run(cron.expression, next);
      arm();
    }, next - Date.now());
  };
  const run = async (expression, time) => {
    const label = `[cron] ${expression} at ${new Date(time).toISOString().slice(11, 19)} UTC`;
    const url = `${origin}/cdn-cgi/local/scheduled?cron=${encodeURIComponent(expression)}&time=${time}&format=json`;
    const started = Date.now();
    for (;;) {
      try {
        const res = await fetch(url);
        const { outcome } = await res.json().catch(() => ({ outcome: `HTTP ${res.status}` }));
        const took = `${Date.now() - started} ms`;
        console.log(outcome === "ok" ? `${label}: ok (${took})` : `${label}: ${outcome} (${took}); see the Worker's log`);
        return;
      } catch (error) {
        // Not listening yet (still starting, or reloading): wait, within the minute.
        if (stopped || Date.now() - time > 50_000) {
          if (!stopped) console.log(`${label}: not run, the Worker did not answer (${error.cause?.code ?? error.message})`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  };
  arm();
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
