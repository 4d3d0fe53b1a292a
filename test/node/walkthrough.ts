// What both walk-through tests share: the blocks under a marker in the README and docs/, a `curl` function
// that records each call for the checks, the PATH of a reader's terminal (the system's own `node`
// first), and the recorded calls read back.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { ROOT } from "./dev-server";

/** Every ```sh block after a `<!-- marker -->` line of these files (the README's, by default), in order: file by file. */
export function readmeBlocks(marker: string, files: string[] = ["README.md"]): string[] {
  return files.flatMap((file) => {
    const text = readFileSync(join(ROOT, file), "utf8");
    return [...text.matchAll(new RegExp(`^<!-- ${marker} -->\\n\`\`\`sh\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]);
  });
}

/** curl, recording each call as $TRACE/<n>.args (NUL-separated), <n>.status and <n>.body. */
export const RECORDING_CURL = `
curl() {
  local n; n=$(printf '%03d' "$(find "$TRACE" -name '*.status' | wc -l)")
  printf '%s\\0' "$@" > "$TRACE/$n.args"
  local rc=0
  command curl -o "$TRACE/$n.body" -w '%{http_code}' "$@" > "$TRACE/$n.status" || rc=$?
  cat "$TRACE/$n.body"
  return $rc
}
`;

const outsideNpm = (dir: string) => !dir.includes(join("node_modules", ".bin"));
export const systemHasNode = () => (process.env.PATH ?? "").split(delimiter).filter(outsideNpm).some((dir) => existsSync(join(dir, "node")));

/**
 * The PATH a reader's terminal has: without the node_modules/.bin directories npm puts first (where
 * the pinned Node is), so `node` is the system's own; the whole PATH where the system has none.
 */
export function readersPath(): string {
  const entries = (process.env.PATH ?? "").split(delimiter);
  return (systemHasNode() ? entries.filter(outsideNpm) : entries).join(delimiter);
}

export interface RecordedCall {
  method: string;
  url: URL;
  status: number;
  text: string;
  /** The answer as JSON; null when it is not JSON (or there was none). */
  body: any;
}

/** The calls the recording curl made, in order. A call with no body file got no answer. */
export function recordedCalls(traceDir: string): RecordedCall[] {
  return readdirSync(traceDir)
    .filter((name) => name.endsWith(".status"))
    .sort()
    .map((name) => {
      const n = name.replace(".status", "");
      const args = readFileSync(join(traceDir, `${n}.args`), "utf8").split("\0").slice(0, -1);
      const url = new URL(args.find((arg) => arg.startsWith("http"))!);
      const method = args.includes("-X") ? args[args.indexOf("-X") + 1] : args.includes("-d") ? "POST" : "GET";
      const text = existsSync(join(traceDir, `${n}.body`)) ? readFileSync(join(traceDir, `${n}.body`), "utf8") : "";
      let body: unknown = null;
      try {
        body = text ? JSON.parse(text) : {};
      } catch {
        body = null;
      }
      return { method, url, status: Number(readFileSync(join(traceDir, name), "utf8")), text, body };
    });
}
