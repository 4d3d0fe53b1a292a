// The node project's harness: `npm run dev` (scripts/dev.mjs) started as a person starts it, on a
// free port with its own local D1 (--persist-to a fresh directory), in its own process group, its
// output collected. Also wrangler's D1 commands on such a directory, to prepare broken databases.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const ROOT = join(import.meta.dirname, "..", "..");
const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
/** wrangler's output without colours or telemetry prompts, as in CI. */
const QUIET = { NO_COLOR: "1", WRANGLER_SEND_METRICS: "false", CI: "true" };

/** The migration files wrangler applies, in order. */
export const MIGRATIONS = readdirSync(join(ROOT, "migrations")).filter((name) => name.endsWith(".sql")).sort();

/** An environment of just these variables (wrangler's generated types require the Worker's vars in ProcessEnv). */
export function onlyEnv(vars: Record<string, string | undefined>): NodeJS.ProcessEnv {
  return vars as unknown as NodeJS.ProcessEnv;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export function freshPersistDir(): string {
  return mkdtempSync(join(tmpdir(), "tender-dev-d1-"));
}

/** Runs `wrangler d1 <args> --local --persist-to <dir>` to its end; throws with its output if it fails. */
export function wranglerD1(persist: string, ...args: string[]): string {
  const run = spawnSync(process.execPath, [WRANGLER, "d1", ...args, "--local", "--persist-to", persist], { cwd: ROOT, env: { ...process.env, ...QUIET }, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`wrangler d1 ${args.join(" ")} failed:\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

export interface DevProcess {
  origin: string;
  port: number;
  persist: string;
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output: () => string;
  /** Resolves with how the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Whether any process of its group (wrangler, workerd) is still alive. */
  groupAlive: () => boolean;
  /** Ends the whole group (SIGKILL after 5 s) and removes the D1 directory. */
  stop: () => Promise<void>;
}

/**
 * Starts `npm run dev -- --persist-to <dir>` (or, with `direct`, `node scripts/dev.mjs` itself,
 * so a signal reaches the script and nothing between) with PORT set to a free port.
 */
export async function startDev(options: { persist?: string; direct?: boolean; env?: Record<string, string> } = {}): Promise<DevProcess> {
  const persist = options.persist ?? freshPersistDir();
  const port = await freePort();
  const [command, args] = options.direct
    ? [process.execPath, [join(ROOT, "scripts", "dev.mjs"), "--persist-to", persist]]
    : ["npm", ["run", "dev", "--", "--persist-to", persist]];
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...QUIET, ...options.env, PORT: String(port) },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const groupAlive = () => {
    try {
      process.kill(-child.pid!, 0);
      return true;
    } catch {
      return false;
    }
  };
  const stop = async () => {
    for (const [signal, waitMs] of [["SIGTERM", 5000], ["SIGKILL", 2000]] as const) {
      if (!groupAlive()) break;
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // already gone
      }
      const deadline = Date.now() + waitMs;
      while (groupAlive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    }
    rmSync(persist, { recursive: true, force: true });
  };
  return { origin: `http://127.0.0.1:${port}`, port, persist, child, output: () => output, exited, groupAlive, stop };
}

/** Waits until the Worker answers /health; throws, with the output so far, if the process ends first. */
export async function untilServing(dev: DevProcess, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await answers(dev.origin))) {
    if (dev.child.exitCode !== null || dev.child.signalCode !== null) throw new Error(`npm run dev ended early:\n${dev.output()}`);
    if (Date.now() > deadline) throw new Error(`npm run dev did not serve ${dev.origin} within ${timeoutMs} ms:\n${dev.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Waits until the output matches `pattern` and returns the match; throws with the output after `timeoutMs`. */
export async function untilOutput(dev: DevProcess, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = dev.output().match(pattern);
    if (match) return match;
    if (Date.now() > deadline) throw new Error(`npm run dev never printed ${pattern} within ${timeoutMs} ms:\n${dev.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Whether anything still accepts connections on the port. */
export async function answers(origin: string): Promise<boolean> {
  return fetch(`${origin}/health`).then(
    () => true,
    () => false,
  );
}
