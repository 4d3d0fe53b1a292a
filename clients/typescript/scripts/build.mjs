#!/usr/bin/env node
// Builds what the package ships: dist/*.js (ES2022 modules) and dist/*.d.ts from src/*.ts, plus the
// generated src/*.d.ts copied as they are, so plain Node 20+ and any bundler or TypeScript project
// use @tender/client without compiling TypeScript from node_modules. `prepare` runs it on
// `npm install` / `npm ci` at the repository root; after editing src/, run it again
// (`npm run build -w @tender/client`). In this repository the tests and the typechecks read src/
// directly (the "tender-source" export condition), so only Node and outside users read dist/.
// tsc comes from the repository root's devDependencies.
import { spawnSync } from "node:child_process";
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(join(pkg, "dist"), { recursive: true, force: true });
const build = spawnSync(process.execPath, [tsc, "-p", join(pkg, "tsconfig.build.json")], { stdio: "inherit" });
if (build.status !== 0) {
  console.error("@tender/client: the build (tsc -p tsconfig.build.json) failed");
  process.exit(build.status ?? 1);
}
for (const name of readdirSync(join(pkg, "src")).filter((file) => file.endsWith(".d.ts"))) {
  copyFileSync(join(pkg, "src", name), join(pkg, "dist", name));
}
// tsc keeps a declaration's relative imports as src/ wrote them ("./schema", "./api-version.ts");
// a project on "moduleResolution": "node16"/"nodenext" needs "./schema.js", or it reads them as any.
for (const name of readdirSync(join(pkg, "dist")).filter((file) => file.endsWith(".d.ts"))) {
  const file = join(pkg, "dist", name);
  const text = readFileSync(file, "utf8");
  const fixed = text.replace(/(from\s+|import\()(["'])(\.\.?\/[^"']+?)(?:\.ts)?\2/g, (whole, keyword, quote, path) =>
    path.endsWith(".js") ? whole : `${keyword}${quote}${path}.js${quote}`,
  );
  if (fixed !== text) writeFileSync(file, fixed);
}
