// Copies the pinned API reference script from its npm package into public/, which wrangler serves
// as Workers Static Assets. Run before `wrangler dev`, the tests and a deploy (npm scripts do),
// so /docs loads its script from Tender's own origin and never from a CDN.
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

const root = join(dirname(new URL(import.meta.url).pathname), "..");
const pkg = join(root, "node_modules", "@scalar", "api-reference");
const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
const target = join(root, "public", "docs");
mkdirSync(target, { recursive: true });
copyFileSync(join(pkg, "dist", "browser", "standalone.js"), join(target, "scalar.js"));
console.error(`copy-assets: @scalar/api-reference ${version} -> public/docs/scalar.js`);
