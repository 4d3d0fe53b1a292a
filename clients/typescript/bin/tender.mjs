#!/usr/bin/env node
// The `tender` command, on Node 20 or newer: it runs the CLI the package ships as JavaScript
// (dist/cli.js, built from src/cli.ts by `npm run build`, which `npm install` runs).
import { existsSync } from "node:fs";

const [major] = process.versions.node.split(".").map(Number);
if (major < 20) {
  process.stderr.write(`tender: Node 20 or newer is needed (this is ${process.version}).\n`);
  process.exit(2);
}
if (!existsSync(new URL("../dist/cli.js", import.meta.url))) {
  process.stderr.write("tender: dist/cli.js is missing; build it with `npm run build -w @tender/client` (npm install does).\n");
  process.exit(2);
}

const { main } = await import("../dist/cli.js");
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
