#!/usr/bin/env node
// Regenerates the client's types from the API's OpenAPI document:
//   1. gets the document the Worker serves at /openapi.json,
//   2. writes it to clients/typescript/openapi.json (the committed snapshot),
//   3. runs openapi-typescript on it into src/schema.d.ts, whose first line records the snapshot's
//      SHA-256, so test/client/openapi.test.ts can tell when the types are older than the document.
//      Its `webhooks` interface holds the body of every event type (src/events.ts names them).
//
// Where the document comes from:
//   (default)        starts `wrangler dev` from the repository root on a free port, offline (local
//                    mode, a throw-away state directory), reads /openapi.json and stops it;
//   --url <url>      reads it from a running Tender instead (e.g. http://127.0.0.1:8787/openapi.json);
//   --file <path>    reads a saved copy.
// --check writes nothing and exits 1 when openapi.json or schema.d.ts would change.
//
//   npm run generate -w @tender/client
//   npm run generate -w @tender/client -- --url http://127.0.0.1:8787/openapi.json
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "..");
const root = join(pkg, "..", "..");
const SNAPSHOT = join(pkg, "openapi.json");
const SCHEMA = join(pkg, "src", "schema.d.ts");
const VERSION = join(pkg, "src", "api-version.ts");
/** `npm run dev`'s origin (the CLI's default TENDER_API_URL). */
const DEFAULT_ORIGIN = "http://127.0.0.1:8787";

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};
const check = args.includes("--check");

/** The SHA-256 (hex) of the snapshot's exact text: recorded in schema.d.ts, checked by the tests. */
export const sha256 = (text) => createHash("sha256").update(text, "utf8").digest("hex");

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function fromWranglerDev() {
  const [port, inspector] = [await freePort(), await freePort()];
  const state = mkdtempSync(join(tmpdir(), "tender-openapi-"));
  const wrangler = join(root, "node_modules", ".bin", "wrangler");
  if (!existsSync(join(root, "public", "docs", "scalar.js"))) {
    await run(process.execPath, [join(root, "scripts", "copy-assets.mjs")]);
  }
  console.error(`generate: starting wrangler dev on 127.0.0.1:${port} to read /openapi.json`);
  const child = spawn(
    wrangler,
    ["dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector), "--persist-to", state, "--var", "ENVIRONMENT:development", "--log-level", "error"],
    { cwd: root, stdio: ["ignore", "ignore", "pipe"], detached: true, env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" } },
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const stop = () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
    rmSync(state, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${stderr}`);
      try {
        const response = await fetch(`http://127.0.0.1:${port}/openapi.json`);
        if (response.ok) return await response.json();
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`wrangler dev did not answer within 90 s:\n${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  } finally {
    stop();
  }
}

function run(command, argv) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: "inherit" });
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

async function readDocument() {
  const url = option("--url");
  if (url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url} answered ${response.status}`);
    return response.json();
  }
  const file = option("--file");
  if (file) return JSON.parse(readFileSync(file, "utf8"));
  return fromWranglerDev();
}

const document = await readDocument();
if (typeof document?.openapi !== "string" || typeof document.paths !== "object") throw new Error("not an OpenAPI document");
if (typeof document.webhooks !== "object" || Object.keys(document.webhooks).length === 0) throw new Error("the document has no webhooks section: the client's event types come from it");
// The document names the origin that served it; the snapshot names the default local one,
// whichever port it was read from.
for (const server of document.servers ?? []) server.url = DEFAULT_ORIGIN;
const snapshot = `${JSON.stringify(document, null, 2)}\n`;
const types = astToString(await openapiTS(document, { alphabetize: false, defaultNonNullable: false }));
const schema = [
  `// openapi.json sha256: ${sha256(snapshot)}`,
  "// Generated by `npm run generate -w @tender/client` (scripts/generate.mjs) from openapi.json with",
  "// openapi-typescript. Do not edit: regenerate after a change to the API's routes or schemas.",
  "",
  types,
].join("\n");

// The API version the types describe: the client sends it as Tender-Version unless told otherwise,
// so answers always have the shape the types say.
if (!/^\d{4}-\d{2}-\d{2}$/.test(document.info?.version ?? "")) throw new Error(`info.version is not an API version: ${document.info?.version}`);
const versionModule = [
  `// Generated by scripts/generate.mjs from openapi.json's info.version. Do not edit.`,
  `/** The API version the generated types describe; sent as Tender-Version by default. */`,
  `export const API_VERSION = ${JSON.stringify(document.info.version)};`,
  "",
].join("\n");

const current = (path) => (existsSync(path) ? readFileSync(path, "utf8") : "");
if (check) {
  const stale = [[SNAPSHOT, snapshot], [SCHEMA, schema], [VERSION, versionModule]].filter(([path, text]) => current(path) !== text).map(([path]) => path);
  if (stale.length) {
    console.error(`generate --check: out of date: ${stale.join(", ")}. Run: npm run generate -w @tender/client`);
    process.exit(1);
  }
  console.error("generate --check: openapi.json and src/schema.d.ts are up to date");
} else {
  writeFileSync(SNAPSHOT, snapshot);
  writeFileSync(SCHEMA, schema);
  writeFileSync(VERSION, versionModule);
  console.error(`generate: wrote ${SNAPSHOT} (${Object.keys(document.paths).length} paths) and ${SCHEMA}`);
}
