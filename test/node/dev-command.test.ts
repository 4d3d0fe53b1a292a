// `npm run dev` (scripts/dev.mjs) as a person runs it: the migrations in one line (or wrangler's
// whole error when one fails, and no server), then wrangler dev, and the Cron Trigger run by the
// script at the start of each minute as production runs it, one line per run, failures included.
// Ctrl-C and SIGTERM stop wrangler and everything it started. Each test waits for a real minute
// boundary, so they run at the same time.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, it } from "vitest";
import { answers, type DevProcess, freshPersistDir, MIGRATIONS, ROOT, startDev, untilOutput, untilServing, wranglerD1 } from "./dev-server";

const started: DevProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((dev) => dev.stop()));
});
async function dev(options: Parameters<typeof startDev>[0] = {}) {
  const running = await startDev(options);
  started.push(running);
  return running;
}

const CRON = /crons = \["([^"]+)"\]/.exec(readFileSync(join(ROOT, "wrangler.toml"), "utf8"))![1];
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** One run's line: `[cron] * * * * * at 20:31:00 UTC: ok (108 ms)`. */
const cronLine = (outcome: string) => new RegExp(`\\[cron\\] ${escape(CRON)} at (\\d\\d):(\\d\\d):00 UTC: ${outcome}`);
/** The UTC minute a cron line names, as a time on or after `from`. */
function minuteOf(match: RegExpMatchArray, from: number): number {
  const day = new Date(from);
  const at = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate(), Number(match[1]), Number(match[2]));
  return at < from - 60_000 ? at + 86_400_000 : at;
}

describe.concurrent("npm run dev", () => {
  it("migrates in one line, serves, runs the scheduled handler at the next minute, and Ctrl-C stops it all", async ({ expect }) => {
    expect(CRON).toBe("* * * * *");
    const begun = Date.now();
    const server = await dev();
    await untilServing(server);
    const run = await untilOutput(server, cronLine("ok \\((\\d+) ms\\)"), 75_000);

    const output = server.output();
    // Every shard is migrated, one line each.
    for (const shard of ["DB_0", "DB_1"]) expect(output).toContain(`D1 (local) ${shard}: applied ${MIGRATIONS.length} of ${MIGRATIONS.length} migrations`);
    // wrangler's migration tables (a row per file) are not printed, nor its warning that crons do not run.
    expect(output).not.toContain(MIGRATIONS[0]);
    expect(output).not.toContain("┌");
    expect(output).not.toContain("not automatically triggered");
    // The run is at a minute boundary after the start, as a Cron Trigger's scheduled time is.
    const at = minuteOf(run, begun);
    expect(at).toBeGreaterThan(begun);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(output.indexOf("Ready on")).toBeLessThan(output.indexOf(run[0]));

    // Ctrl-C: the terminal sends SIGINT to the whole foreground group (npm, the script, wrangler).
    process.kill(-server.child.pid!, "SIGINT");
    const end = await server.exited;
    expect(end.code === 130 || end.signal === "SIGINT", `npm run dev ended with ${JSON.stringify(end)}`).toBe(true);
    await expect.poll(() => server.groupAlive(), { timeout: 10_000 }).toBe(false);
    expect(await answers(server.origin)).toBe(false);
  });

  it("says when a run of the scheduled handler fails, and SIGTERM to the script stops wrangler", async ({ expect }) => {
    // A database the cron cannot work on: migrated, then a table its record expiry deletes from is gone.
    const persist = freshPersistDir();
    wranglerD1(persist, "migrations", "apply", "DB_0");
    wranglerD1(persist, "migrations", "apply", "DB_1");
    wranglerD1(persist, "execute", "DB_1", "--command", "DROP TABLE dashboard_sessions");
    const server = await dev({ persist, direct: true });
    await untilServing(server);
    await untilOutput(server, cronLine("exception \\(\\d+ ms\\); see the Worker's log"), 75_000);
    // The Worker's own log of the failure, which wrangler prints as it comes.
    await untilOutput(server, /cron task failed.*no such table: dashboard_sessions/, 10_000);
    const output = server.output();
    for (const shard of ["DB_0", "DB_1"]) expect(output).toContain(`D1 (local) ${shard}: up to date (${MIGRATIONS.length} migrations)`);
    expect(output).not.toMatch(cronLine("ok"));

    // SIGTERM to the script alone (as a process manager sends it): it stops wrangler and ends as it did.
    process.kill(server.child.pid!, "SIGTERM");
    const end = await server.exited;
    expect(end.code === 143 || end.signal === "SIGTERM", `scripts/dev.mjs ended with ${JSON.stringify(end)}`).toBe(true);
    await expect.poll(() => server.groupAlive(), { timeout: 10_000 }).toBe(false);
    expect(await answers(server.origin)).toBe(false);
  });

  it("prints wrangler's error and exits 1 without serving when a migration fails", async ({ expect }) => {
    // The first migration creates this table; made beforehand, it makes that migration fail.
    const table = /CREATE TABLE `(\w+)`/.exec(readFileSync(join(ROOT, "migrations", MIGRATIONS[0]), "utf8"))![1];
    const persist = freshPersistDir();
    wranglerD1(persist, "execute", "DB_0", "--command", `CREATE TABLE ${table} (x)`);
    const server = await dev({ persist, direct: true });
    const end = await server.exited;
    const output = server.output();
    expect(end).toEqual({ code: 1, signal: null });
    expect(output).toContain(`table \`${table}\` already exists`);
    expect(output).toContain(MIGRATIONS[0]);
    expect(output).toContain("npm run dev: the D1 migrations of DB_0 failed (wrangler exited 1); wrangler dev was not started.");
    expect(output).not.toContain("Ready on");
    expect(await answers(server.origin)).toBe(false);
  });
});
