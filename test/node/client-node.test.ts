// @tender/client as a user outside this repository gets it, under the system's own Node (20 here,
// not the Node this project pins): `npm pack` makes the tarball a user is given (or the registry
// serves once published), and a project of its own installs it with npm (offline, from the cache
// the repository's own install filled); then plain JavaScript imports it, the user's TypeScript is
// compiled by tsc against the shipped types, and `npx tender` runs. The package once shipped only
// .ts files, which Node refuses under node_modules (ERR_UNKNOWN_FILE_EXTENSION). The node project's
// global setup builds dist/ first.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onlyEnv, ROOT } from "./dev-server";

const CLIENT = join(ROOT, "clients", "typescript");

/** The first `node` on the PATH that is not one npm put there (node_modules/.bin): the system's. */
function systemNode(): string | undefined {
  const found = spawnSync("which", ["-a", "node"], { encoding: "utf8" }).stdout.split("\n").filter(Boolean);
  return found.find((path) => !path.includes(join("node_modules", ".bin")) && !path.startsWith(ROOT));
}
const NODE = systemNode();

/** What the user's code does with the client: a typed call through an injected fetch, an error, a webhook round trip. */
const USER_CODE = `
import { API_VERSION, Tender, TenderError, webhooks } from "@tender/client";

const requests: Request[] = [];
const answers = [
  Response.json({ id: "usr_1", object: "user", name: "Ada", email: "ada@example.com", test_clock: null, created_at: "2026-11-23T00:00:00.000Z", updated_at: "2026-11-23T00:00:00.000Z" }, { status: 201 }),
  Response.json({ error: { type: "invalid_request_error", code: "parameter_invalid", message: "email: must be a valid e-mail address", param: "email", request_id: "req_1" } }, { status: 400 }),
];
const tender = new Tender({ apiKey: "sk_test_node", baseUrl: "http://tender.invalid", maxRetries: 0, fetch: async (request) => (requests.push(request), answers.shift()!) });

const user = await tender.POST("/api/users", { body: { name: "Ada", email: "ada@example.com" } });
const name: string = user.name;
// @ts-expect-error: the API has no such path, and the types the package ships know it
void (() => tender.GET("/no-such-path"));
let error: TenderError | undefined;
try {
  await tender.POST("/api/users", { body: { name: "Ada", email: "not-an-email" } });
} catch (caught) {
  if (caught instanceof TenderError) error = caught;
}

const secret = webhooks.newSecret();
const body = JSON.stringify({ id: "evt_1", type: "customer.created", data: { id: "usr_1" } });
const headers = await webhooks.sign(secret, { id: "evt_1", body });
const event = await webhooks.verify(body, headers, secret);

console.log(JSON.stringify({
  node: process.version,
  apiVersion: API_VERSION,
  user: user.id,
  name,
  request: { method: requests[0].method, url: requests[0].url, idempotencyKey: requests[0].headers.get("idempotency-key"), authorization: requests[0].headers.get("authorization") },
  error: error && { status: error.status, code: error.code, param: error.param },
  event: event.id,
}));
`;

let project: string;
let packed: string;
/** The system Node's directory first on the PATH: npm, npx and the bin's `#!/usr/bin/env node` use it. */
const systemPath = () => `${dirname(NODE!)}:${process.env.PATH}`;
/** `npm pack` of the package in `dir` into `packed`: the tarball's path. */
function pack(dir: string): string {
  const run = spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", packed], { cwd: dir, encoding: "utf8", env: { ...process.env, PATH: systemPath() } });
  if (run.status !== 0) throw new Error(`npm pack in ${dir} failed:\n${run.stdout}\n${run.stderr}`);
  return join(packed, (JSON.parse(run.stdout) as { filename: string }[])[0].filename);
}
/** The package's run-time dependencies, and theirs, as the repository's install placed them. */
function dependenciesOf(dir: string, found = new Set<string>()): Set<string> {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
  for (const name of Object.keys(manifest.dependencies ?? {})) {
    const placed = join(ROOT, "node_modules", name);
    if (!found.has(placed)) dependenciesOf(placed, found.add(placed));
  }
  return found;
}
beforeAll(() => {
  // The tarball, as `npm pack` in clients/typescript makes it (dist/ is built by the global setup).
  // Its dependencies come as tarballs too, packed from the repository's node_modules: the registry
  // is not asked (npm test runs offline), and npm installs them only because the package needs them.
  packed = mkdtempSync(join(tmpdir(), "tender-client-pack-"));
  const tarballs = [pack(CLIENT), ...[...dependenciesOf(CLIENT)].map(pack)];
  // A project outside this repository, which installs the tarball as a user would.
  project = mkdtempSync(join(tmpdir(), "tender-client-user-"));
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "user-project", private: true, type: "module" }));
  const install = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund", ...tarballs], { cwd: project, encoding: "utf8", env: { ...process.env, PATH: systemPath() } });
  if (install.status !== 0) throw new Error(`npm install of the tarball failed:\n${install.stdout}\n${install.stderr}`);
}, 120_000);
afterAll(() => {
  for (const dir of [project, packed]) if (dir) rmSync(dir, { recursive: true, force: true });
});

function run(file: string, args: string[] = [], cwd = project) {
  return spawnSync(NODE!, [file, ...args], { cwd, encoding: "utf8", env: onlyEnv({ PATH: process.env.PATH, HOME: process.env.HOME }) });
}

describe.skipIf(!NODE)(`@tender/client under the system's Node (${NODE ?? "none found"})`, () => {
  it("is a Node other than the one this project pins", () => {
    const version = spawnSync(NODE!, ["--version"], { encoding: "utf8" }).stdout.trim();
    expect(NODE!.startsWith(ROOT)).toBe(false);
    expect(version).toMatch(/^v\d+\./);
  });

  it("imports from plain JavaScript and makes a typed call, an error and a webhook round trip", () => {
    writeFileSync(join(project, "plain.mjs"), USER_CODE.replace(/: (Request\[\]|string|TenderError \| undefined)(?= =|;)/g, "").replace("answers.shift()!", "answers.shift()"));
    const result = run("plain.mjs");
    expect(result.stderr).not.toContain("ERR_UNKNOWN_FILE_EXTENSION");
    expect(result.status, result.stderr).toBe(0);
    expectUserCodeRan(JSON.parse(result.stdout));
  });

  // skipLibCheck off and an expected error: the shipped declarations resolve (not read as any) under nodenext.
  it("runs the user's own TypeScript, compiled by tsc against the types the package ships", () => {
    writeFileSync(join(project, "app.ts"), USER_CODE);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { module: "nodenext", moduleResolution: "nodenext", target: "es2022", strict: true, skipLibCheck: false, outDir: "out", types: ["node"], typeRoots: [join(ROOT, "node_modules", "@types")] },
        files: ["app.ts"],
      }),
    );
    const tsc = spawnSync(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", project], { encoding: "utf8" });
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
    const result = run(join("out", "app.js"));
    expect(result.status, result.stderr).toBe(0);
    expectUserCodeRan(JSON.parse(result.stdout));
  });

  it("installs as a package, not a link: its files are the tarball's, with the fields a registry shows", () => {
    const installed = join(project, "node_modules", "@tender", "client");
    expect(readdirSync(installed).sort()).toEqual(expect.arrayContaining(["LICENSE", "README.md", "bin", "dist", "package.json"]));
    expect(readdirSync(installed)).not.toContain("scripts");
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
    expect(manifest).toMatchObject({ name: "@tender/client", license: "MIT", types: "./dist/index.d.ts", engines: { node: ">=20" }, bin: { tender: "./bin/tender.mjs" } });
    expect(manifest.exports["."]).toMatchObject({ types: "./dist/index.d.ts", default: "./dist/index.js" });
  });

  it("runs `npx tender`: --help answers 0, an unknown command 2", () => {
    const npx = (args: string[]) => spawnSync("npx", ["--no-install", "tender", ...args], { cwd: project, encoding: "utf8", env: onlyEnv({ PATH: systemPath(), HOME: process.env.HOME }) });
    const help = npx(["--help"]);
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toContain("Usage: tender <command> [options]");
    expect(help.stdout).toMatch(/listen/);
    const unknown = npx(["no-such-command"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/no-such-command/);
  });
});

function expectUserCodeRan(output: Record<string, any>) {
  expect(output.node).toBe(spawnSync(NODE!, ["--version"], { encoding: "utf8" }).stdout.trim());
  expect(output.apiVersion).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  expect(output).toMatchObject({
    user: "usr_1",
    name: "Ada",
    request: { method: "POST", url: "http://tender.invalid/api/users", authorization: "Bearer sk_test_node", idempotencyKey: expect.stringMatching(/^[0-9a-f-]{36}$/) },
    error: { status: 400, code: "parameter_invalid", param: "email" },
    event: "evt_1",
  });
}
