#!/usr/bin/env node
// The `tender` command. The CLI is TypeScript (src/cli.ts, on the typed client), which Node runs
// with its built-in type stripping: on by default from Node 22.18 / 23.6; on Node 22.12–22.17
// this launcher starts Node again with --experimental-strip-types.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  process.stderr.write(`tender: Node 22.12 or newer is needed (this is ${process.version}). From the repository, \`npx tender\` uses the Node it pins.\n`);
  process.exit(2);
}
if (!process.features.typescript) {
  const again = spawnSync(process.execPath, ["--experimental-strip-types", "--disable-warning=ExperimentalWarning", fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: "inherit" });
  process.exit(again.status ?? 1);
}

const { main } = await import("../src/cli.ts");
const stop = new AbortController();
let interrupted = false;
process.on("SIGINT", () => {
  // The first Ctrl-C stops `listen` cleanly; a second one quits at once.
  if (interrupted) process.exit(130);
  interrupted = true;
  stop.abort();
});
// A closed pipe (`tender events | head`) ends the command quietly.
process.stdout.on("error", (error) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});
process.exitCode = await main(process.argv.slice(2), {
  env: process.env,
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
  signal: stop.signal,
});
if (stop.signal.aborted || process.exitCode !== 0) process.exit();
