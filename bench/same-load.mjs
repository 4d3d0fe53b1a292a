// `node bench/same-load.mjs "<portA>|<pathA>|<keyA>[|<header>:<value>],<portB>|<pathB>|<keyB>[|…]" [seconds] [rounds]`:
// two servers already running under `wrangler dev` (two builds of Tender, say, each started with
// `PORT=… npm run dev` in its own checkout), loaded at the same time with the same closed loop
// (8 connections each), so that whatever the machine does to one round it does to both. Reports
// each side's CPU per request: utime + stime of the workerd processes of its `wrangler dev` (the
// one listening on its port and its siblings), over the requests it answered in the round; and
// the median ratio B / A. Run it twice with the sides swapped: a side's place in the argument
// costs it up to 2% here. Used for the read path's changes in bench/RESULTS.md ("readpath").
import fs from "node:fs";
import http from "node:http";
import { execFileSync } from "node:child_process";

const [spec, seconds = "4", rounds = "5"] = process.argv.slice(2);
if (!spec) throw new Error('usage: node bench/same-load.mjs "<portA>|<pathA>|<keyA>,<portB>|<pathB>|<keyB>" [seconds] [rounds]');
const sides = spec.split(",").map((s) => {
  const [port, urlPath, key, header] = s.split("|");
  const extra = header ? { [header.slice(0, header.indexOf(":")).trim()]: header.slice(header.indexOf(":") + 1).trim() } : {};
  return { port, path: urlPath, key, extra };
});
const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

const statOf = (pid) => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
};
const workerds = () =>
  fs.readdirSync("/proc").filter((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      return fs.readFileSync(`/proc/${entry}/comm`, "utf8").startsWith("workerd");
    } catch {
      return false;
    }
  });
// A side's processes: the workerd listening on its port (`--socket-addr=entry=…:<port>`) and the
// workerd processes of the same parent (its wrangler dev).
const parents = new Map();
for (const pid of workerds()) {
  const match = /entry=(?:localhost|127\.0\.0\.1):(\d+)/.exec(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8"));
  if (match) parents.set(match[1], statOf(pid)[1]);
}
for (const side of sides) if (!parents.has(side.port)) throw new Error(`No wrangler dev workerd listens on port ${side.port}.`);
const cpuOf = (port) =>
  workerds()
    .filter((pid) => statOf(pid)[1] === parents.get(port))
    .reduce((sum, pid) => {
      const fields = statOf(pid);
      return sum + (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
    }, 0);

const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
const once = (side) =>
  new Promise((resolve) => {
    const headers = { ...side.extra, ...(side.key ? { authorization: `Bearer ${side.key}` } : {}) };
    const req = http.request({ host: "127.0.0.1", port: side.port, path: side.path, agent, headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("error", () => resolve(0));
    req.end();
  });
async function load(side, ms) {
  let answered = 0;
  const end = Date.now() + ms;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (Date.now() < end) if ((await once(side)) < 300) answered++;
    }),
  );
  return answered;
}

await Promise.all(sides.map((side) => load(side, 1500)));
const ratios = [];
for (let round = 1; round <= Number(rounds); round++) {
  const before = sides.map((side) => cpuOf(side.port));
  const answered = await Promise.all(sides.map((side) => load(side, Number(seconds) * 1000)));
  const perRequest = sides.map((side, i) => ((cpuOf(side.port) - before[i]) * 1e6) / answered[i]);
  ratios.push(perRequest[1] / perRequest[0]);
  console.log(`round ${round}: answered ${answered.join(" / ")}, CPU µs per request ${perRequest.map((x) => x.toFixed(0)).join(" / ")}, B / A ${(perRequest[1] / perRequest[0]).toFixed(3)}`);
}
ratios.sort((a, b) => a - b);
console.log(`median CPU per request, B / A: ${ratios[Math.floor(ratios.length / 2)].toFixed(3)}`);
process.exit(0);
