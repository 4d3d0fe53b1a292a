// `npm run bench`: the benchmarks in turn (bench/run.mjs, bench/floor.mjs, bench/heap.mjs, bench/burst.mjs, bench/usage.mjs, bench/delivery-floor.mjs, bench/retention.mjs),
// each writing its section of bench/RESULTS.md. A missed goal in one does not skip the others; the
// exit code is the first non-zero one.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
let code = 0;
for (const script of ["run.mjs", "floor.mjs", "heap.mjs", "burst.mjs", "usage.mjs", "delivery-floor.mjs", "retention.mjs"]) {
  const { status } = spawnSync(process.execPath, [path.join(here, script)], { stdio: "inherit" });
  if (code === 0 && status !== 0) code = status ?? 1;
}
process.exit(code);
