// What bench/floor.mjs and bench/heap.mjs share: a free port, an HTTP request to 127.0.0.1, a
// section of bench/RESULTS.md replaced between its markers, and the script's run with a watchdog.
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const WRANGLER = path.join(ROOT, "node_modules/wrangler/bin/wrangler.js");
export const CHILD_ENV = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" };
export const CARD = { payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2030, cvv: "123" };
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RESULTS = path.join(ROOT, "bench/RESULTS.md");

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** One request to 127.0.0.1:`port`; `body` is JSON unless it is a string (sent as it is). */
export function send(port, agent, { method = "GET", path: p, key, body, idem, headers: extra = {} }) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    const headers = { ...extra };
    if (key) headers.authorization = `Bearer ${key}`;
    if (idem) headers["idempotency-key"] = idem;
    if (payload) Object.assign(headers, { "content-type": "application/json", "content-length": payload.length });
    const req = http.request({ host: "127.0.0.1", port, method, path: p, headers, agent }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(payload);
  });
}

/** Replaces the section between `<!-- marker -->` and `<!-- /marker -->` of bench/RESULTS.md (appends it the first time). */
export function replaceResultsSection(marker, section) {
  const open = `<!-- ${marker} -->`;
  const close = `<!-- /${marker} -->`;
  let text = fs.existsSync(RESULTS) ? fs.readFileSync(RESULTS, "utf8") : "# Benchmark results\n";
  const a = text.indexOf(open);
  const b = text.indexOf(close);
  text = a >= 0 && b > a ? text.slice(0, a) + section + text.slice(b + close.length) : `${text.trimEnd()}\n\n${section}\n`;
  fs.writeFileSync(RESULTS, text);
}

/** Runs `main`, exiting 0 when it ends, 1 when it throws or takes longer than `minutes`. */
export function runScript(name, main, minutes) {
  const watchdog = setTimeout(() => {
    console.error(`${name}: the run took over ${minutes} minutes; stopping`);
    process.exit(1);
  }, minutes * 60_000);
  watchdog.unref();
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
