// Copies the pinned API reference script from its npm package into public/, which wrangler serves
// as Workers Static Assets, so /docs loads its script from Tender's own origin and never from a
// CDN. wrangler runs it before `wrangler dev` and `wrangler deploy` (wrangler.toml [build]); the
// tests and the benchmarks run it themselves. It rewrites nothing that is already current, so
// wrangler dev's rebuild on a source change does not also reload the assets.
import { copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = join(root, "node_modules", "@scalar", "api-reference");
const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
const source = join(pkg, "dist", "browser", "standalone.js");
const target = join(root, "public", "docs", "scalar.js");
if (existsSync(target) && readFileSync(target).equals(readFileSync(source))) process.exit(0);
mkdirSync(dirname(target), { recursive: true });
copyFileSync(source, target);
console.error(`copy-assets: @scalar/api-reference ${version} -> public/docs/scalar.js`);
