// Packs the pinned API reference script from its npm package into generated/scalar.js.gz, which
// the Worker bundles as a Data module (wrangler.toml [[rules]]) and serves at /docs/scalar.js
// (src/routes/docs-script.ts), so /docs loads its script from Tender's own origin and never from a
// CDN. It is gzipped here once, at level 9, and sent as it is to every browser that accepts gzip.
// wrangler runs this before `wrangler dev` and `wrangler deploy` (wrangler.toml [build]); the
// tests and the benchmarks run it themselves. It rewrites nothing that is already current, so
// wrangler dev's rebuild on a source change does not rebuild again. It runs scripts/pack-fonts.mjs
// too, which packs the invoice PDF's fonts the same way.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// The invoice PDF's fonts first (scripts/pack-fonts.mjs: generated/invoice-fonts.bin).
execFileSync(process.execPath, [join(root, "scripts", "pack-fonts.mjs")], { stdio: "inherit" });
const pkg = join(root, "node_modules", "@scalar", "api-reference");
const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
const source = join(pkg, "dist", "browser", "standalone.js");
const target = join(root, "generated", "scalar.js.gz");
// Node's gzip header carries no time or name, so the same script always packs to the same bytes.
const packed = gzipSync(readFileSync(source), { level: 9 });
if (existsSync(target) && readFileSync(target).equals(packed)) process.exit(0);
mkdirSync(dirname(target), { recursive: true });
writeFileSync(target, packed);
console.error(`copy-assets: @scalar/api-reference ${version} -> generated/scalar.js.gz (${packed.length} bytes)`);
