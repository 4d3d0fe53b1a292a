// Adds lock-file entries for workerd's platform packages that npm could not record here.
//
// The registry this project installs from serves workerd's Linux binaries only, so `npm install`
// leaves the macOS and Windows packages out of package-lock.json, and `npm ci` then refuses the
// lock as out of sync. An entry with the version, os and cpu is all `npm ci` needs: it skips a
// package built for another platform, and fetches it (from the public registry) on that platform.
// Run after any change to the dependencies: `npm install && npm run lock:platforms`. An existing
// entry is left alone, and a plain `npm install` keeps the entries as written here.
import { readFileSync, writeFileSync } from "node:fs";

const PLATFORMS = {
  "@cloudflare/workerd-darwin-64": { os: ["darwin"], cpu: ["x64"] },
  "@cloudflare/workerd-darwin-arm64": { os: ["darwin"], cpu: ["arm64"] },
  "@cloudflare/workerd-linux-64": { os: ["linux"], cpu: ["x64"] },
  "@cloudflare/workerd-linux-arm64": { os: ["linux"], cpu: ["arm64"] },
  "@cloudflare/workerd-windows-64": { os: ["win32"], cpu: ["x64"] },
};

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
let added = 0;
for (const [location, entry] of Object.entries(lock.packages)) {
  if (!location.endsWith("node_modules/workerd") || !entry.optionalDependencies) continue;
  const base = location.slice(0, -"workerd".length);
  for (const [name, version] of Object.entries(entry.optionalDependencies)) {
    // Resolved the way Node resolves: beside workerd first, then up the tree.
    const candidates = [`${base}${name}`, `node_modules/${name}`];
    if (candidates.some((c) => lock.packages[c]?.version === version)) continue;
    const platform = PLATFORMS[name];
    if (!platform) throw new Error(`Unknown workerd platform package ${name}`);
    // In npm's own key order, so a later `npm install` leaves the entry as it is.
    lock.packages[`${base}${name}`] = { version, cpu: platform.cpu, dev: true, license: "Apache-2.0", optional: true, os: platform.os, engines: { node: ">=16" } };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))));
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lock-platforms: added ${added} entr${added === 1 ? "y" : "ies"}`);
