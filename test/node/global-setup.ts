// Before the node project's tests: build @tender/client's dist/ from src/ as `npm install` does, so
// the system Node and the README's receiver run what src/ says now.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

export default function buildClient() {
  const build = spawnSync(process.execPath, [join(import.meta.dirname, "..", "..", "clients", "typescript", "scripts", "build.mjs")], { encoding: "utf8" });
  if (build.status !== 0) throw new Error(`@tender/client did not build:\n${build.stdout}\n${build.stderr}`);
}
