// `npm run check-deploy` (scripts/check-deploy.mjs): what `wrangler deploy --dry-run` accepts but a
// real deploy cannot use is refused first, each problem on its own line; a configuration with real
// database ids goes on to wrangler's dry run.
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./dev-server";

const SHIPPED = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
const ID_0 = "6f1c2a9e-3b4d-4e5f-8a7b-1c2d3e4f5a6b";
const ID_1 = "7a2b3c4d-5e6f-4a8b-9c0d-2e3f4a5b6c7d";

/** Runs the check on wrangler.toml with `edit` applied (a file beside it, removed afterwards). */
function check(edit: (toml: string) => string) {
  const file = `wrangler.check-${process.pid}-${Math.random().toString(36).slice(2)}.toml`;
  writeFileSync(join(ROOT, file), edit(SHIPPED));
  try {
    const run = spawnSync(process.execPath, [join(ROOT, "scripts", "check-deploy.mjs"), "--config", file], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(join(ROOT, file), { force: true });
  }
}
const realIds = (toml: string) =>
  toml.replace('database_id = "00000000-0000-0000-0000-000000000000"', `database_id = "${ID_0}"`).replace('database_id = "00000000-0000-0000-0000-000000000001"', `database_id = "${ID_1}"`);

describe("npm run check-deploy", () => {
  it("refuses the repository's placeholder database ids, naming each binding and the command that makes its database", () => {
    const { status, output } = check((toml) => toml);
    expect(status).toBe(1);
    expect(output).toContain("DB_0: database_id 00000000-0000-0000-0000-000000000000 is the repository's placeholder");
    expect(output).toContain("npx wrangler d1 create tender`");
    expect(output).toContain("DB_1: database_id 00000000-0000-0000-0000-000000000001 is the repository's placeholder");
    expect(output).not.toContain("--dry-run: exiting now");
  });

  it("refuses an id that is not a UUID, one database bound twice, and ENVIRONMENT=development", () => {
    const { status, output } = check((toml) =>
      realIds(toml).replace(ID_1, ID_0.toUpperCase()).replace(`database_id = "${ID_0}"`, 'database_id = "tender-prod"').replace('ENVIRONMENT = "production"', 'ENVIRONMENT = "development"'),
    );
    expect(status).toBe(1);
    expect(output).toContain('DB_0: database_id "tender-prod" is not a D1 database id');
    expect(output).not.toContain("is also"); // DB_0's id was refused, so DB_1's is not a repeat of it
    expect(output).toContain('ENVIRONMENT is "development"');

    const twice = check((toml) => realIds(toml).replace(ID_1, ID_0.toUpperCase()));
    expect(twice.status).toBe(1);
    expect(twice.output).toContain(`DB_1: database_id ${ID_0.toUpperCase()} is also DB_0's`);
  });

  it("refuses shards with a gap", () => {
    const { status, output } = check((toml) => realIds(toml).replace('binding = "DB_1"', 'binding = "DB_2"'));
    expect(status).toBe(1);
    expect(output).toContain("DB_1 is missing");
  });

  it("passes real ids on to wrangler's dry run, which builds the Worker", () => {
    const { status, output } = check(realIds);
    expect(output).toContain("2 D1 database(s), ENVIRONMENT=production");
    expect(output).toContain("--dry-run: exiting now");
    expect(status).toBe(0);
  });
});
