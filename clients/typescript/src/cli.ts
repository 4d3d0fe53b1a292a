// The `tender` command: listen, trigger, events, deliveries, redeliver, recover.
//
// The command line is read by node:util's parseArgs (parseArgs below; a command's flags are its
// COMMANDS entry). Everything else runs on fetch alone, with its input and output passed in
// (`CliIo`): bin/tender.mjs wires process.argv, env, stdout, stderr and Ctrl-C to main(), and the
// tests call main() in Node (test/node/cli.test.ts, against `npm run dev`) or, inside the Worker
// suite, where node:util has no parseArgs, run() with a parsed command line.
// Data goes to stdout, progress and errors to stderr; the exit code says how it went (EXIT).
//
// To add a command: an entry in COMMANDS (its positional args, its flags and their kinds, the
// summary and usage that --help prints) and its case in run(). Flags are checked and converted
// from that entry; nothing else parses.
//
// Like src/index.ts, this file has no relative run-time imports, so Node's type stripping loads it.
import { parseArgs as readArgs } from "node:util";
import { Tender, TenderError, webhooks, type EventType, type Schemas } from "@tender/client";

/** Exit codes scripts can test. */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** The API answered an error (the message, type, code and request id are on stderr). */
  apiError: 1,
  /** Bad command line or configuration (unknown command or flag, missing argument, no API key). */
  usage: 2,
  /** The API could not be reached (after the client's retries). */
  unreachable: 3,
  /** `trigger` made its objects, but the event did not appear in the feed in time. */
  timeout: 4,
} as const;

export const VERSION = "0.1.0";
export const DEFAULT_API_URL = "http://127.0.0.1:8787";
/** The User-Agent of real deliveries (src/webhooks/consumer.ts), which `listen` sends too. */
export const DELIVERY_USER_AGENT = "Tender-Webhooks/1.0 (+https://tender.dev/docs/webhooks)";

export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  /** The fetch the API client uses (default globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** The fetch `listen` forwards events with (default globalThis.fetch). */
  forward?: (request: Request) => Promise<Response>;
  /** Ends `listen` (Ctrl-C). */
  signal?: AbortSignal;
  /** How the client waits between its retries (tests make it instant). */
  sleep?: (ms: number) => Promise<void>;
}

export class UsageError extends Error {}

/** Secrets a message may quote by mistake (a secret typed where another value belongs): shown by their last 4 only. */
const SECRET_TEXT = /\b(whsec_|[sr]k_(?:test|live)_|at_(?:test|live)_)[A-Za-z0-9+/=_-]+/g;
const withoutSecrets = (text: string) => text.replace(SECRET_TEXT, (secret, prefix: string) => `${prefix}…${secret.slice(-4)}`);

// ---------------------------------------------------------------------------------------------
// Arguments

type FlagKind = "string" | "boolean" | "number";
interface CommandSpec {
  /** Positional arguments, by name; all required. */
  args: string[];
  flags: Record<string, FlagKind>;
  summary: string;
  usage: string;
}

const PAGE_FLAGS = { limit: "number", "starting-after": "string", all: "boolean", json: "boolean" } as const;

export const COMMANDS: Record<string, CommandSpec> = {
  listen: {
    args: [],
    flags: { "forward-to": "string", events: "string", secret: "string", interval: "number", json: "boolean" },
    summary: "Follow the events feed and POST each new event, signed, to a URL",
    usage: [
      "tender listen --forward-to <url> [--events <type,type>] [--secret <whsec_…>] [--interval <ms>] [--json]",
      "",
      "Polls GET /api/events from the newest event on (no inbound connection, no tunnel), prints one",
      "line per event, and POSTs the event's exact body to <url> with the headers of a real delivery",
      "(X-Signature, webhook-id, webhook-timestamp, webhook-signature, Tender-Sequence, …), signed with",
      "a local secret: --secret, else TENDER_WEBHOOK_SECRET (neither is ever printed: only where it came",
      "from and its last 4 characters), else a new one, printed at start. The line ends with the",
      "target's status. --events keeps only those types. Ctrl-C stops it (exit 0).",
    ].join("\n"),
  },
  trigger: {
    args: ["event-type"],
    flags: { "no-wait": "boolean", timeout: "number", json: "boolean" },
    summary: "Create test-mode objects that make an event happen",
    usage: [
      "tender trigger <event-type> [--no-wait] [--timeout <seconds>] [--json]",
      "",
      "Creates what makes <event-type> happen (a user, a plan and a subscription, a payout, a refund,",
      "a test clock) with a test-mode key, then waits (default 30 s) until the event is in the feed",
      "and prints its id. `tender trigger --list` lists every event type and what it creates.",
    ].join("\n"),
  },
  events: {
    args: [],
    flags: { type: "string", object: "string", ...PAGE_FLAGS },
    summary: "List events, newest first",
    usage: "tender events [--type <type>] [--object <id>] [--limit <n>] [--starting-after <evt_…>] [--all] [--json]",
  },
  deliveries: {
    args: ["endpoint-id"],
    flags: { status: "string", ...PAGE_FLAGS },
    summary: "List a webhook endpoint's deliveries, newest first",
    usage: "tender deliveries <whk_…> [--status pending|delivered|failed] [--limit <n>] [--starting-after <dlv_…>] [--all] [--json]",
  },
  redeliver: {
    args: ["event-id"],
    flags: { endpoint: "string", json: "boolean" },
    summary: "Send an event again (where it was not delivered, or to one endpoint whatever its state)",
    usage: "tender redeliver <evt_…> [--endpoint <whk_…>] [--json]",
  },
  recover: {
    args: ["endpoint-id"],
    flags: { since: "string", until: "string", wait: "boolean", interval: "number", json: "boolean" },
    summary: "Send an endpoint every event of a time range it missed, once more",
    usage: [
      "tender recover <whk_…> --since <time> [--until <time>] [--wait] [--interval <ms>] [--json]",
      "",
      "Starts a recovery (POST /api/webhooks/{id}/recover): every event of [since, until) the endpoint",
      "takes and has no 2xx for is sent again, oldest first, by a background job. Times are ISO 8601",
      "with an offset (2026-11-27T09:00:00Z); --until defaults to now. Prints the recovery; with --wait,",
      "polls it (every --interval ms, default 1000) until it is done and prints it again.",
    ].join("\n"),
  },
};

const GLOBAL_FLAGS: Record<string, FlagKind> = { help: "boolean", version: "boolean", "api-key": "string", "api-url": "string", list: "boolean" };

export interface Parsed {
  command: string | undefined;
  args: string[];
  flags: Record<string, string | number | boolean>;
}

/** A piece of the command line as node:util's parseArgs reads it (its `tokens`). */
type ArgToken =
  | { kind: "option"; name: string; rawName: string; index: number; value?: string; inlineValue?: boolean }
  | { kind: "positional"; index: number; value: string }
  | { kind: "option-terminator"; index: number };

/**
 * `args` split by node:util's parseArgs knowing these flags (so a string flag takes the next
 * argument as its value, `--flag=value` works, `-h` is --help, and `--` ends the options). It is
 * not strict: every check, and its message, is ours (flag below).
 */
function tokensOf(args: string[], known: Record<string, FlagKind>): ArgToken[] {
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = {};
  for (const [name, kind] of Object.entries(known)) options[name] = { type: kind === "boolean" ? "boolean" : "string", ...(name === "help" ? { short: "h" } : {}) };
  return (readArgs({ args, options, strict: false, allowPositionals: true, tokens: true }) as unknown as { tokens: ArgToken[] }).tokens;
}

/** Checks one option token against the flags `command` takes, and records its value in `flags`. */
function flag(token: Extract<ArgToken, { kind: "option" }>, known: Record<string, FlagKind>, command: string | undefined, flags: Parsed["flags"]) {
  const { name } = token;
  const kind = Object.hasOwn(known, name) ? known[name] : undefined;
  if (!kind) throw new UsageError(token.rawName.startsWith("--") ? `unknown option --${name}${command ? ` for '${command}'` : ""}` : `unknown option ${token.rawName}`);
  if (kind === "boolean") {
    if (token.value !== undefined) throw new UsageError(`--${name} takes no value`);
    flags[name] = true;
    return;
  }
  if (token.value === undefined || (!token.inlineValue && token.value.startsWith("--"))) throw new UsageError(`--${name} needs a value`);
  const value = token.value.trim();
  if (kind === "number") {
    if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number, not '${value}'`);
    flags[name] = Number(value);
  } else {
    flags[name] = value;
  }
}

/**
 * Parses `argv` (without node and the script) with node:util's parseArgs, in two steps: up to the
 * command (the first positional argument) only GLOBAL_FLAGS are known; after it, the command's
 * flags too (COMMANDS). Throws UsageError for anything it does not know.
 */
export function parseArgs(argv: string[]): Parsed {
  const flags: Parsed["flags"] = {};
  const positionals: string[] = [];
  let command: string | undefined;
  let commandArgs: string[] = [];
  for (const token of tokensOf(argv, GLOBAL_FLAGS)) {
    if (token.kind === "option") {
      flag(token, GLOBAL_FLAGS, undefined, flags);
      continue;
    }
    if (token.kind === "positional") {
      command = token.value;
      commandArgs = argv.slice(token.index + 1);
    } else {
      positionals.push(...argv.slice(token.index + 1)); // after `--`, arguments only: no command
    }
    break;
  }
  if (command !== undefined) {
    if (command !== "help" && !Object.hasOwn(COMMANDS, command)) throw new UsageError(`unknown command '${command}'`);
    const known = command === "help" ? GLOBAL_FLAGS : { ...GLOBAL_FLAGS, ...COMMANDS[command].flags };
    for (const token of tokensOf(commandArgs, known)) {
      if (token.kind === "option") flag(token, known, command, flags);
      else if (token.kind === "positional") positionals.push(token.value);
    }
  }
  if (command && command !== "help" && !flags.help && !(command === "trigger" && flags.list)) {
    const spec = COMMANDS[command];
    if (positionals.length < spec.args.length) throw new UsageError(`'${command}' needs <${spec.args[positionals.length]}>`);
    if (positionals.length > spec.args.length) throw new UsageError(`unexpected argument '${positionals[spec.args.length]}'`);
  }
  if (command === "help" && positionals.length > 1) throw new UsageError("help takes at most one command");
  return { command, args: positionals, flags };
}

export function helpText(command?: string): string {
  if (command && Object.hasOwn(COMMANDS, command)) return `Usage: ${COMMANDS[command].usage}\n\n${COMMON_HELP}`;
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  return [
    "tender: the Tender command line (test-mode webhooks on your machine, the events feed).",
    "",
    "Usage: tender <command> [options]",
    "",
    "Commands:",
    ...Object.entries(COMMANDS).map(([name, spec]) => `  ${name.padEnd(width)}  ${spec.summary}`),
    `  ${"help".padEnd(width)}  This text, or one command's: tender help <command>`,
    "",
    "Examples:",
    "  tender listen --forward-to http://localhost:3000/webhooks --events payment.completed,payment.failed",
    "  tender trigger payment.completed",
    "  tender events --type payout.paid --limit 5 --json",
    "  tender deliveries whk_… --status failed --all",
    "  tender redeliver evt_…",
    "  tender recover whk_… --since 2026-11-27T09:00:00Z --wait",
    "",
    COMMON_HELP,
  ].join("\n");
}

const COMMON_HELP = [
  "Options for every command:",
  "  --json                  one JSON object per line on stdout, for scripts",
  "  --api-key <key>         instead of TENDER_API_KEY",
  "  --api-url <url>         instead of TENDER_API_URL (default http://127.0.0.1:8787)",
  "  -h, --help              help; --version prints the version",
  "List commands (events, deliveries) print one page (--limit, default 10; the next page's",
  "--starting-after is printed on stderr), or every page with --all.",
  "",
  "Environment: TENDER_API_KEY, TENDER_API_URL, TENDER_WEBHOOK_SECRET (listen's signing secret).",
  "Data goes to stdout; progress and errors to stderr.",
  "Exit codes: 0 ok, 1 the API answered an error, 2 usage or configuration error,",
  "            3 the API could not be reached, 4 trigger's event did not appear in time.",
].join("\n");

// ---------------------------------------------------------------------------------------------
// Running

/** Runs one command line; returns the exit code. Never throws. */
export async function main(argv: string[], io: CliIo): Promise<number> {
  let parsed: Parsed;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr(`tender: ${withoutSecrets(error.message)}`);
    io.stderr("Run 'tender --help' for usage.");
    return EXIT.usage;
  }
  return run(parsed, io);
}

/**
 * Runs a parsed command line; returns the exit code. Never throws. (The Worker suite calls it
 * directly: workerd has no node:util parseArgs.)
 */
export async function run(parsed: Parsed, io: CliIo): Promise<number> {
  const { command, flags } = parsed;
  if (flags.version) {
    io.stdout(VERSION);
    return EXIT.ok;
  }
  if (command === "help" || flags.help) {
    io.stdout(helpText(command === "help" ? parsed.args[0] : command));
    return EXIT.ok;
  }
  if (command === undefined) {
    io.stderr(helpText());
    return EXIT.usage;
  }
  if (command === "trigger" && flags.list) {
    for (const [type, plan] of Object.entries(TRIGGERS)) io.stdout(flags.json ? JSON.stringify({ type, creates: plan.creates }) : `${type.padEnd(22)}  ${plan.creates}`);
    return EXIT.ok;
  }
  const apiKey = (flags["api-key"] as string | undefined) ?? io.env.TENDER_API_KEY;
  if (!apiKey) {
    io.stderr("tender: no API key: set TENDER_API_KEY (or pass --api-key). Sign up with POST /api/accounts for a test key.");
    return EXIT.usage;
  }
  const baseUrl = (flags["api-url"] as string | undefined) ?? io.env.TENDER_API_URL ?? DEFAULT_API_URL;
  const tender = new Tender({ apiKey, baseUrl, fetch: io.fetch, sleep: io.sleep });
  try {
    switch (command) {
      case "listen":
        return await listen(tender, parsed, io);
      case "trigger":
        return await trigger(tender, parsed, io, apiKey);
      case "events":
        return await listPages(tender, io, flags, "/api/events", { type: flags.type, object_id: flags.object }, undefined, formatEvent);
      case "deliveries":
        if (flags.status !== undefined && !["pending", "delivered", "failed"].includes(flags.status as string)) {
          throw new UsageError("--status must be pending, delivered or failed");
        }
        return await listPages(tender, io, flags, "/api/webhooks/{id}/deliveries", { status: flags.status }, { id: parsed.args[0] }, formatDelivery);
      case "redeliver":
        return await redeliver(tender, parsed, io);
      case "recover":
        return await recover(tender, parsed, io);
    }
    return EXIT.usage;
  } catch (error) {
    return reportError(error, io);
  }
}

function reportError(error: unknown, io: CliIo): number {
  if (error instanceof UsageError) {
    io.stderr(`tender: ${withoutSecrets(error.message)}`);
    return EXIT.usage;
  }
  if (error instanceof TenderError) {
    if (error.type === "api_connection_error") {
      io.stderr(`tender: ${error.message}`);
      return EXIT.unreachable;
    }
    const where = [error.param && `param ${error.param}`, error.request_id && `request ${error.request_id}`].filter(Boolean).join(", ");
    io.stderr(`tender: ${error.status} ${error.type}/${error.code}: ${error.message}${where ? ` (${where})` : ""}`);
    return EXIT.apiError;
  }
  io.stderr(`tender: ${withoutSecrets(error instanceof Error ? error.message : String(error))}`);
  return EXIT.apiError;
}

type Row = Record<string, unknown>;
type Format = (row: Row) => string;

const formatEvent: Format = (e) => [e.id, e.created_at, String(e.type).padEnd(22), e.object_id ?? "-"].join("  ");
const formatDelivery: Format = (d) =>
  [d.id, String(d.status).padEnd(9), `attempts=${d.attempt_count}`, `last=${d.last_status_code ?? "-"}`, d.event_id, d.created_at].join("  ");

/** One page (or every page with --all) of a list, one line per item. */
async function listPages(
  tender: Tender,
  io: CliIo,
  flags: Parsed["flags"],
  path: "/api/events" | "/api/webhooks/{id}/deliveries",
  filters: Record<string, unknown>,
  pathParams: { id: string } | undefined,
  format: Format,
): Promise<number> {
  const limit = flags.limit as number | undefined;
  if (limit !== undefined && (limit < 1 || limit > 100)) throw new UsageError("--limit must be 1 to 100");
  const query = Object.fromEntries(
    Object.entries({ ...filters, limit: limit ?? (flags.all ? 100 : 10), starting_after: flags["starting-after"] }).filter(([, v]) => v !== undefined),
  );
  const print = (row: Row) => io.stdout(flags.json ? JSON.stringify(row) : format(row));
  if (flags.all) {
    for await (const row of tender.list(path as "/api/events", query, pathParams as never)) print(row as Row);
    return EXIT.ok;
  }
  const init = { params: { query, ...(pathParams ? { path: pathParams } : {}) } };
  const page = (await (tender.GET as (p: string, i: object) => Promise<unknown>)(path, init)) as { data: Row[]; has_more: boolean };
  page.data.forEach(print);
  if (page.has_more) io.stderr(`More: --starting-after ${page.data[page.data.length - 1].id} (or --all)`);
  return EXIT.ok;
}

async function redeliver(tender: Tender, parsed: Parsed, io: CliIo): Promise<number> {
  const [id] = parsed.args;
  const endpoint = parsed.flags.endpoint as string | undefined;
  const result = await tender.POST("/api/events/{id}/redeliver", { params: { path: { id } }, body: endpoint ? { endpoint_id: endpoint } : {} });
  if (parsed.flags.json) {
    io.stdout(JSON.stringify(result));
  } else {
    for (const delivery of result.deliveries) io.stdout(delivery);
    for (const skipped of result.skipped) io.stderr(`  Not redelivered to ${skipped.endpoint_id}: ${skipped.reason.replaceAll("_", " ")} (${skipped.delivery_id})`);
    io.stderr(`Redelivering ${id}: ${result.deliveries.length} ${result.deliveries.length === 1 ? "delivery" : "deliveries"} queued.`);
    if (result.deliveries.length === 0) io.stderr("Nothing to redeliver: pass --endpoint <whk_…> to send it to an endpoint anyway.");
  }
  return EXIT.ok;
}

const formatRecovery: Format = (r) => [r.id, String(r.status).padEnd(7), `total=${r.total}`, `sent=${r.sent}`, `${r.since}..${r.until}`, r.endpoint_id].join("  ");

async function recover(tender: Tender, parsed: Parsed, io: CliIo): Promise<number> {
  const [endpointId] = parsed.args;
  const since = parsed.flags.since as string | undefined;
  if (since === undefined) throw new UsageError("'recover' needs --since <time> (ISO 8601, such as 2026-11-27T09:00:00Z)");
  const until = parsed.flags.until as string | undefined;
  const print = (row: Row) => io.stdout(parsed.flags.json ? JSON.stringify(row) : formatRecovery(row));
  let recovery = await tender.recoverWebhook(endpointId, { since, ...(until === undefined ? {} : { until }) });
  print(recovery);
  if (!parsed.flags.wait) return EXIT.ok;
  const interval = (parsed.flags.interval as number | undefined) ?? 1000;
  const sleep = io.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  while (recovery.status !== "done") {
    if (io.signal?.aborted) return EXIT.ok;
    await sleep(interval);
    recovery = await tender.getWebhookRecovery(endpointId, recovery.id);
    if (!parsed.flags.json) io.stderr(`  ${recovery.status}: ${recovery.sent} of ${recovery.total} looked at sent again`);
  }
  print(recovery);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// listen

type FeedEvent = Schemas["Event"];

/**
 * Every event that committed after the event `cursor` (an id the feed gave), oldest first. The
 * feed is in commit order, so this never skips an event that commits late. With no cursor (the
 * feed was empty when listening began), every event of the feed.
 */
async function eventsAfter(tender: Tender, after: string | undefined): Promise<FeedEvent[]> {
  const out: FeedEvent[] = [];
  if (after === undefined) {
    // From the newest back to the first; what commits meanwhile comes after the newest, next poll.
    for await (const event of tender.list("/api/events", { limit: 100 })) out.push(event);
    return out.reverse();
  }
  for (let cursor: string = after; ; ) {
    // ending_before walks toward the newest: each page holds the 100 events right after the cursor.
    const page: { data: FeedEvent[]; has_more: boolean } = await tender.GET("/api/events", { params: { query: { ending_before: cursor, limit: 100 } } });
    out.push(...[...page.data].reverse());
    if (!page.has_more || page.data.length === 0) return out;
    cursor = page.data[0].id;
  }
}

const abortableSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done);
  });

async function listen(tender: Tender, parsed: Parsed, io: CliIo): Promise<number> {
  const { flags } = parsed;
  const target = flags["forward-to"] as string | undefined;
  if (!target) throw new UsageError("listen needs --forward-to <url>");
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new UsageError(`--forward-to is not a URL: '${target}'`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError("--forward-to must be an http(s) URL");
  // What is printed of the target: never a user name or password it carries.
  const shown = new URL(url.href);
  if (shown.username || shown.password) [shown.username, shown.password] = ["***", ""];
  // A user name and password in the URL go as HTTP Basic credentials, as curl sends them: fetch
  // refuses a URL that carries them (Node's Request throws, quoting the URL).
  const destination = new URL(url.href);
  const basicAuth: Record<string, string> = destination.username || destination.password ? { Authorization: `Basic ${base64(`${decodeURIComponent(destination.username)}:${decodeURIComponent(destination.password)}`)}` } : {};
  [destination.username, destination.password] = ["", ""];
  const types = flags.events === undefined ? null : new Set(String(flags.events).split(",").map((t) => t.trim()).filter(Boolean));
  const known = new Set<string>([...Object.keys(TRIGGERS), "webhook.test"]);
  for (const type of types ?? []) if (!known.has(type)) throw new UsageError(`unknown event type '${type}' in --events (see tender trigger --list)`);
  // A secret the user gave is never printed (it may be their real endpoint's): only where it came
  // from and its last 4 characters. A new one is printed whole: the receiver needs it.
  const source = flags.secret !== undefined ? "--secret" : io.env.TENDER_WEBHOOK_SECRET !== undefined ? "TENDER_WEBHOOK_SECRET" : undefined;
  const secret = (flags.secret as string | undefined) ?? io.env.TENDER_WEBHOOK_SECRET ?? webhooks.newSecret();
  if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)) throw new UsageError("the signing secret must be whsec_ followed by base64");
  const interval = (flags.interval as number | undefined) ?? 1000;
  const forward = io.forward ?? ((request: Request) => globalThis.fetch(request));

  // Start from now: what the feed already holds is not forwarded. The cursor is the newest event
  // read; each poll reads what committed after it.
  const newest = await tender.GET("/api/events", { params: { query: { limit: 1 } } });
  let cursor: string | undefined = newest.data[0]?.id;
  io.stderr(`Ready. Forwarding ${types ? [...types].join(", ") : "every event"} to ${shown.href}`);
  io.stderr(source ? `Signing with the secret from ${source} (whsec_…${secret.slice(-4)}) (Ctrl-C to stop)` : `Your new webhook signing secret is ${secret} (Ctrl-C to stop)`);

  while (!io.signal?.aborted) {
    for (const event of await eventsAfter(tender, cursor)) {
      cursor = event.id;
      if (types && !types.has(event.type)) continue;
      const outcome = await forwardEvent(forward, destination, basicAuth, secret, event);
      if (flags.json) {
        io.stdout(JSON.stringify({ id: event.id, type: event.type, created_at: event.created_at, status: outcome.status ?? null, error: outcome.error ?? null, ms: outcome.ms }));
      } else {
        io.stdout(`${event.created_at}  --> ${event.type.padEnd(22)} ${event.id}  <-- ${outcome.status ?? `error (${outcome.error})`} ${shown.href} ${outcome.ms} ms`);
      }
      if (io.signal?.aborted) break;
    }
    await abortableSleep(interval, io.signal);
  }
  io.stderr("Stopped.");
  return EXIT.ok;
}

/** Base64 of a string's UTF-8 bytes. */
const base64 = (text: string) => btoa(Array.from(new TextEncoder().encode(text), (byte) => String.fromCharCode(byte)).join(""));

/** POSTs the event's exact body with a real delivery's headers, signed with the local secret. */
async function forwardEvent(forward: NonNullable<CliIo["forward"]>, url: URL, credentials: Record<string, string>, secret: string, event: FeedEvent) {
  const body = JSON.stringify(event.payload);
  const headers: Record<string, string> = {
    ...credentials,
    "Content-Type": "application/json",
    "User-Agent": DELIVERY_USER_AGENT,
    "Tender-Delivery-Attempt": "1",
    ...(event.object_id && event.sequence !== null && event.sequence !== undefined ? { "Tender-Sequence": `${event.object_id}/${event.sequence}` } : {}),
    ...(await webhooks.sign(secret, { id: event.id, body })),
  };
  const started = Date.now();
  try {
    const response = await forward(new Request(url, { method: "POST", headers, body, redirect: "manual", signal: AbortSignal.timeout(15_000) }));
    await response.body?.cancel();
    return { status: response.status, error: undefined, ms: Date.now() - started };
  } catch (error) {
    return { status: undefined, error: error instanceof Error ? error.message : String(error), ms: Date.now() - started };
  }
}

// ---------------------------------------------------------------------------------------------
// trigger

export const TEST_CARDS = { success: "4242424242424242", declined: "4000000000000002", disputed: "4000000000000259", authenticationRequired: "4000002760003184" } as const;

export interface TriggerContext {
  tender: Tender;
  /** Progress, on stderr. */
  say: (line: string) => void;
  /** The current time (ms). */
  now: number;
}

export interface Triggered {
  /** What was created, by kind: { user: "usr_…", payout: "po_…", … }. */
  objects: Record<string, string>;
  /** The object the event is about (its object_id in the feed). */
  objectId: string;
}

interface TriggerPlan {
  /** What it creates, for --list and help. */
  creates: string;
  run(ctx: TriggerContext): Promise<Triggered>;
}

const card = (ctx: TriggerContext, pan: string) => ({
  payment_method: "card" as const,
  card_number: pan,
  expiration_month: 12,
  expiration_year: new Date(ctx.now).getUTCFullYear() + 3,
  cvv: "123",
});

async function user(ctx: TriggerContext, testClock?: string) {
  const created = await ctx.tender.POST("/api/users", {
    body: { name: "Tender Trigger", email: "trigger@example.com", ...(testClock ? { test_clock: testClock } : {}) },
  });
  ctx.say(`Created user ${created.id}`);
  return created;
}

async function plan(ctx: TriggerContext) {
  const created = await ctx.tender.POST("/subscription-plans", {
    body: { name: "Trigger plan", price: 19.99, currency: "usd", interval: "month", description: "Created by tender trigger" },
  });
  ctx.say(`Created plan ${created.id} (19.99 USD a month)`);
  return created;
}

async function subscription(ctx: TriggerContext, testClock?: string, extra: { trial_period_days?: number } = {}, pan: string = TEST_CARDS.success) {
  const customer = await user(ctx, testClock);
  const fixed = await plan(ctx);
  const sub = await ctx.tender.POST("/subscriptions", { body: { user_id: customer.id, plan_id: fixed.id, ...extra, ...card(ctx, pan) } });
  ctx.say(`Created subscription ${sub.id} (${sub.status === "trialing" ? `trialing until ${sub.trial_end}` : "first period charged"})`);
  return { user: customer.id, plan: fixed.id, subscription: sub.id, sub };
}

async function firstPayment(ctx: TriggerContext, pan: string = TEST_CARDS.success) {
  const made = await subscription(ctx, undefined, {}, pan);
  const payments = await ctx.tender.GET("/payments", { params: { query: { subscription_id: made.subscription, limit: 1 } } });
  const payment = payments.data[0]?.id;
  if (!payment) throw new Error(`no payment found for ${made.subscription}`);
  return { ...made, payment };
}

/** A user and a card saved for it from Stripe's test PaymentMethod pm_card_visa. */
async function savedCard(ctx: TriggerContext) {
  const customer = await user(ctx);
  const method = await ctx.tender.POST("/api/users/{id}/payment-methods", { params: { path: { id: customer.id } }, body: { processor_token: "pm_card_visa" } });
  ctx.say(`Saved payment method ${method.id} (${method.card.brand} ending ${method.card.last4})`);
  return { user: customer.id, payment_method: method.id };
}

/** A checkout session (payment mode, 25.00 USD) for a new user. */
async function checkoutSession(ctx: TriggerContext) {
  const payer = await user(ctx);
  const session = await ctx.tender.createCheckoutSession({
    mode: "payment",
    amount: 2500,
    currency: "usd",
    user_id: payer.id,
    success_url: "https://example.com/checkout/success?session={CHECKOUT_SESSION_ID}",
    cancel_url: "https://example.com/checkout/cancel",
  });
  ctx.say(`Created checkout session ${session.id} (25.00 USD)`);
  return { user: payer.id, session };
}

/** Pays a test-mode checkout session on its page, as a payer's browser submits its card form (the answer is the 303 to success_url). */
async function payOnPage(ctx: TriggerContext, session: { id: string; url: string | null }) {
  if (!session.url) throw new Error(`checkout session ${session.id} has no page`);
  const { card_number, expiration_month, expiration_year, cvv } = card(ctx, TEST_CARDS.success);
  const form = new URLSearchParams({ cardholder_name: "Tender Trigger", card_number, exp_month: String(expiration_month), exp_year: String(expiration_year), cvc: cvv });
  const { response } = await ctx.tender.raw.POST(new URL(session.url).pathname as never, {
    body: form as never,
    bodySerializer: (body: unknown) => String(body),
    headers: { "content-type": "application/x-www-form-urlencoded" },
    redirect: "manual",
    parseAs: "text",
  } as never);
  if (response.status !== 303) throw new Error(`the checkout page answered ${response.status}, not the redirect to success_url`);
  ctx.say(`Paid checkout session ${session.id} on its page with ${TEST_CARDS.success}`);
}

async function authorization(ctx: TriggerContext) {
  const payer = await user(ctx);
  const created = await ctx.tender.payments.create({
    amount: 2500,
    currency: "usd",
    user_id: payer.id,
    capture_method: "manual",
    description: "Created by tender trigger",
    ...card(ctx, TEST_CARDS.success),
  });
  ctx.say(`Authorized payment ${created.id} (25.00 USD, requires_capture)`);
  return { user: payer.id, payment: created.id };
}

async function payout(ctx: TriggerContext, pan: string) {
  const recipient = await user(ctx);
  const created = await ctx.tender.POST("/payout", {
    body: { recipient_id: recipient.id, amount: 2500, currency: "usd", description: "Created by tender trigger", ...card(ctx, pan) },
  });
  ctx.say(`Created payout ${created.id} (25.00 USD, ${pan === TEST_CARDS.success ? "settles paid" : "settles failed"} in a few seconds)`);
  return { user: recipient.id, payout: created.id };
}

async function refund(ctx: TriggerContext) {
  const made = await firstPayment(ctx);
  const created = await ctx.tender.POST("/refunds", { body: { payment_id: made.payment, amount: 500, reason: "requested_by_customer" } });
  ctx.say(`Created refund ${created.id} (5.00 USD of payment ${made.payment})`);
  return { user: made.user, plan: made.plan, subscription: made.subscription, payment: made.payment, refund: created.id };
}

/** A subscription's first invoice, and a 5.00 credit note of it to the user's balance. */
async function creditNote(ctx: TriggerContext) {
  const { sub: _sub, ...objects } = await subscription(ctx);
  const invoice = await firstInvoice(ctx, { subscription_id: objects.subscription });
  const note = await ctx.tender.POST("/credit-notes", { body: { invoice_id: invoice, amount: 500, reason: "order_change", refund: false } });
  ctx.say(`Issued credit note ${note.number} (5.00 USD of invoice ${invoice}, to the user's balance)`);
  return { ...objects, invoice, credit_note: note.id };
}

/** The invoice of a subscription's first period, or of a user's refused first charge. */
async function firstInvoice(ctx: TriggerContext, query: { subscription_id?: string; user_id?: string }) {
  const invoices = await ctx.tender.GET("/invoices", { params: { query: { ...query, limit: 1 } } });
  const invoice = invoices.data[0]?.id;
  if (!invoice) throw new Error(`no invoice found for ${query.subscription_id ?? query.user_id}`);
  return invoice;
}

async function paidInvoice(ctx: TriggerContext) {
  const { sub: _sub, ...objects } = await subscription(ctx);
  const invoice = await firstInvoice(ctx, { subscription_id: objects.subscription });
  ctx.say(`Invoice ${invoice} was issued and paid with the first charge`);
  return { objects: { ...objects, invoice }, objectId: invoice };
}

async function refusedInvoice(ctx: TriggerContext) {
  const customer = await user(ctx);
  const fixed = await plan(ctx);
  try {
    await ctx.tender.POST("/subscriptions", { body: { user_id: customer.id, plan_id: fixed.id, ...card(ctx, TEST_CARDS.declined) } });
    throw new Error("the declined test card was charged");
  } catch (error) {
    if (!(error instanceof TenderError) || error.status !== 402) throw error;
    ctx.say(`Subscription refused as expected: 402 ${error.decline_code ?? error.code}`);
  }
  const invoice = await firstInvoice(ctx, { user_id: customer.id });
  return { objects: { user: customer.id, plan: fixed.id, invoice }, objectId: invoice };
}

/**
 * A throwaway endpoint, for an event about an endpoint: at a URL that is never sent anything (its
 * one delivery is ended, or it is disabled, before a send), and deleted once the event is made.
 * Health events never go to the endpoint they are about, so the account's other endpoints get it.
 */
async function throwawayEndpoint(ctx: TriggerContext) {
  const endpoint = await ctx.tender.POST("/api/webhooks", {
    body: { url: "https://tender-trigger.invalid/webhooks", events: ["customer.created"] },
  });
  ctx.say(`Registered endpoint ${endpoint.id} (https://tender-trigger.invalid/webhooks, nothing is sent there)`);
  return endpoint;
}

async function removeThrowaway(ctx: TriggerContext, id: string) {
  await ctx.tender.DELETE("/api/webhooks/{id}", { params: { path: { id } } });
  ctx.say(`Deleted endpoint ${id}`);
}

/** For every event type in the catalog (src/webhooks/catalog.ts), what makes it happen. */
export const TRIGGERS: Record<EventType, TriggerPlan> = {
  "customer.created": {
    creates: "a user",
    async run(ctx) {
      const made = await user(ctx);
      return { objects: { user: made.id }, objectId: made.id };
    },
  },
  "customer.updated": {
    creates: "a user, then a change to its name",
    async run(ctx) {
      const made = await user(ctx);
      await ctx.tender.PUT("/api/users/{id}", { params: { path: { id: made.id } }, body: { name: "Tender Trigger (renamed)", email: made.email } });
      ctx.say(`Updated user ${made.id}`);
      return { objects: { user: made.id }, objectId: made.id };
    },
  },
  "payment.completed": {
    creates: "a user, a plan and a subscription (its first charge succeeds)",
    async run(ctx) {
      const { sub: _sub, ...objects } = await firstPayment(ctx);
      return { objects, objectId: objects.payment };
    },
  },
  "payment.authorized": {
    creates: "a user and a one-off payment authorized for manual capture (requires_capture)",
    async run(ctx) {
      const objects = await authorization(ctx);
      return { objects, objectId: objects.payment };
    },
  },
  "payment.requires_action": {
    creates: "a user and a one-off payment with the 3-D Secure test card (requires_action, next_action.url opens the sandbox challenge)",
    async run(ctx) {
      const payer = await user(ctx);
      const created = await ctx.tender.payments.create({
        amount: 2500,
        currency: "usd",
        user_id: payer.id,
        description: "Created by tender trigger",
        ...card(ctx, TEST_CARDS.authenticationRequired),
      });
      ctx.say(`Created payment ${created.id} (25.00 USD, requires_action: ${created.next_action?.url ?? "no next_action"})`);
      return { objects: { user: payer.id, payment: created.id }, objectId: created.id };
    },
  },
  "payment.canceled": {
    creates: "a user and a one-off payment authorized for manual capture, then canceled",
    async run(ctx) {
      const objects = await authorization(ctx);
      await ctx.tender.payments.cancel(objects.payment, { cancellation_reason: "requested_by_customer" });
      ctx.say(`Canceled payment ${objects.payment}`);
      return { objects, objectId: objects.payment };
    },
  },
  "payment.disputed": {
    creates: "a user, a plan and a subscription paid with the dispute test card (its holder disputes the charge at once)",
    async run(ctx) {
      const { sub: _sub, ...objects } = await firstPayment(ctx, TEST_CARDS.disputed);
      return { objects, objectId: objects.payment };
    },
  },
  "payment.failed": {
    creates: "a user, a plan and a subscription with a declined card (402)",
    async run(ctx) {
      const customer = await user(ctx);
      const fixed = await plan(ctx);
      try {
        await ctx.tender.POST("/subscriptions", { body: { user_id: customer.id, plan_id: fixed.id, ...card(ctx, TEST_CARDS.declined) } });
        throw new Error("the declined test card was charged");
      } catch (error) {
        if (!(error instanceof TenderError) || error.status !== 402) throw error;
        ctx.say(`Subscription refused as expected: 402 ${error.decline_code ?? error.code}`);
      }
      const payments = await ctx.tender.GET("/payments", { params: { query: { user_id: customer.id, limit: 1 } } });
      const payment = payments.data[0]?.id;
      if (!payment) throw new Error(`no failed payment found for ${customer.id}`);
      return { objects: { user: customer.id, plan: fixed.id, payment }, objectId: payment };
    },
  },
  "refund.initiated": {
    creates: "a subscription's payment, then a partial refund of it",
    async run(ctx) {
      const objects = await refund(ctx);
      return { objects, objectId: objects.refund };
    },
  },
  "refund.completed": {
    creates: "a subscription's payment, then a partial refund (settles in a moment)",
    async run(ctx) {
      const objects = await refund(ctx);
      return { objects, objectId: objects.refund };
    },
  },
  "invoice.created": { creates: "a user, a plan and a subscription (its first invoice)", run: paidInvoice },
  "invoice.finalized": { creates: "a user, a plan and a subscription (its first invoice, numbered)", run: paidInvoice },
  "invoice.paid": { creates: "a user, a plan and a subscription (its first invoice is paid by the first charge)", run: paidInvoice },
  "invoice.payment_failed": { creates: "a user, a plan and a subscription with a declined card (402)", run: refusedInvoice },
  "invoice.payment_action_required": {
    creates: "a test clock, a user on it and a subscription with a 7-day trial on a card that asks for 3-D Secure on every charge, then advances the clock past the trial (its off-session charge needs the payer)",
    async run(ctx) {
      const start = new Date(Math.floor(ctx.now / 1000) * 1000).toISOString();
      const testClock = await ctx.tender.POST("/api/test-clocks", { body: { frozen_time: start, name: "tender trigger invoice.payment_action_required" } });
      ctx.say(`Created test clock ${testClock.id} at ${start}`);
      const { sub, ...objects } = await subscription(ctx, testClock.id, { trial_period_days: 7 }, TEST_CARDS.authenticationRequired);
      const to = new Date(Date.parse(sub.trial_end ?? start) + 60_000).toISOString();
      await ctx.tender.POST("/api/test-clocks/{id}/advance", { params: { path: { id: testClock.id } }, body: { frozen_time: to } });
      ctx.say(`Advanced test clock ${testClock.id} to ${to} (past the trial's end on ${sub.trial_end})`);
      const invoice = await firstInvoice(ctx, { subscription_id: objects.subscription });
      ctx.say(`Invoice ${invoice} is open: its payer must authenticate the charge on its hosted page`);
      return { objects: { test_clock: testClock.id, ...objects, invoice }, objectId: invoice };
    },
  },
  "invoice.voided": { creates: "a user, a plan and a subscription with a declined card (402: its invoice is voided)", run: refusedInvoice },
  "credit_note.created": {
    creates: "a user, a plan and a subscription, then a 5.00 credit note of its first invoice to the user's balance",
    async run(ctx) {
      const objects = await creditNote(ctx);
      return { objects, objectId: objects.credit_note };
    },
  },
  "credit_note.voided": {
    creates: "a user, a plan and a subscription, a 5.00 credit note of its first invoice to the balance, then voids it",
    async run(ctx) {
      const objects = await creditNote(ctx);
      await ctx.tender.POST("/credit-notes/{id}/void", { params: { path: { id: objects.credit_note } } });
      ctx.say(`Voided credit note ${objects.credit_note}`);
      return { objects, objectId: objects.credit_note };
    },
  },
  "checkout.session.completed": {
    creates: "a user and a checkout session (payment mode, 25.00 USD), paid on its page with a test card",
    async run(ctx) {
      const { user: payer, session } = await checkoutSession(ctx);
      await payOnPage(ctx, session);
      return { objects: { user: payer, checkout_session: session.id }, objectId: session.id };
    },
  },
  "checkout.session.expired": {
    creates: "a user and a checkout session, then expires it (POST /checkout/sessions/{id}/expire)",
    async run(ctx) {
      const { user: payer, session } = await checkoutSession(ctx);
      await ctx.tender.expireCheckoutSession(session.id);
      ctx.say(`Expired checkout session ${session.id}`);
      return { objects: { user: payer, checkout_session: session.id }, objectId: session.id };
    },
  },
  "payment_method.attached": {
    creates: "a user and a saved card (Stripe's test PaymentMethod pm_card_visa)",
    async run(ctx) {
      const objects = await savedCard(ctx);
      return { objects, objectId: objects.payment_method };
    },
  },
  "payment_method.detached": {
    creates: "a user and a saved card, then detaches it",
    async run(ctx) {
      const objects = await savedCard(ctx);
      await ctx.tender.DELETE("/api/users/{id}/payment-methods/{pm_id}", { params: { path: { id: objects.user, pm_id: objects.payment_method } } });
      ctx.say(`Detached payment method ${objects.payment_method}`);
      return { objects, objectId: objects.payment_method };
    },
  },
  "payout.created": {
    creates: "a user and a payout to a test card",
    async run(ctx) {
      const objects = await payout(ctx, TEST_CARDS.success);
      return { objects, objectId: objects.payout };
    },
  },
  "payout.paid": {
    creates: "a user and a payout that settles paid (after its 5 s cancel window)",
    async run(ctx) {
      const objects = await payout(ctx, TEST_CARDS.success);
      return { objects, objectId: objects.payout };
    },
  },
  "payout.failed": {
    creates: "a user and a payout to a declining card (fails after its 5 s cancel window)",
    async run(ctx) {
      const objects = await payout(ctx, TEST_CARDS.declined);
      return { objects, objectId: objects.payout };
    },
  },
  "payout.canceled": {
    creates: "a user and a payout, canceled at once",
    async run(ctx) {
      const objects = await payout(ctx, TEST_CARDS.success);
      await ctx.tender.POST("/payouts/{id}/cancel", { params: { path: { id: objects.payout } } });
      ctx.say(`Canceled payout ${objects.payout}`);
      return { objects, objectId: objects.payout };
    },
  },
  "webhook_endpoint.disabled": {
    creates: "a webhook endpoint, disabled at once by PATCH (disabled_reason manual), then deleted",
    async run(ctx) {
      const endpoint = await throwawayEndpoint(ctx);
      await ctx.tender.PATCH("/api/webhooks/{id}", { params: { path: { id: endpoint.id } }, body: { status: "disabled" } });
      ctx.say(`Disabled endpoint ${endpoint.id}`);
      await removeThrowaway(ctx, endpoint.id);
      return { objects: { webhook_endpoint: endpoint.id }, objectId: endpoint.id };
    },
  },
  "webhook_delivery.exhausted": {
    creates: "a webhook endpoint and a test event whose delivery's 24 hours end at once (POST /api/webhooks/{id}/test with exhaust), then deletes the endpoint",
    async run(ctx) {
      const endpoint = await throwawayEndpoint(ctx);
      const test = await ctx.tender.POST("/api/webhooks/{id}/test", { params: { path: { id: endpoint.id } }, body: { exhaust: true } });
      ctx.say(`Sent test event ${test.event_id}: its delivery ${test.delivery_id} ran out unsent`);
      await removeThrowaway(ctx, endpoint.id);
      return { objects: { webhook_endpoint: endpoint.id, event: test.event_id, webhook_delivery: test.delivery_id }, objectId: endpoint.id };
    },
  },
  subscription_created: {
    creates: "a user, a plan and a subscription",
    async run(ctx) {
      const { sub: _sub, ...objects } = await subscription(ctx);
      return { objects, objectId: objects.subscription };
    },
  },
  subscription_updated: {
    creates: "a subscription, then new card details for it",
    async run(ctx) {
      const { sub: _sub, ...objects } = await subscription(ctx);
      await ctx.tender.PUT("/subscriptions/{id}", { params: { path: { id: objects.subscription } }, body: card(ctx, "5555555555554444") });
      ctx.say(`Updated subscription ${objects.subscription} (new card)`);
      return { objects, objectId: objects.subscription };
    },
  },
  subscription_canceled: {
    creates: "a subscription, then cancels it",
    async run(ctx) {
      const { sub: _sub, ...objects } = await subscription(ctx);
      await ctx.tender.DELETE("/subscriptions/{id}", { params: { path: { id: objects.subscription } } });
      ctx.say(`Canceled subscription ${objects.subscription}`);
      return { objects, objectId: objects.subscription };
    },
  },
  subscription_trial_will_end: {
    creates: "a test clock, a user on it and a subscription with a 14-day trial, then advances the clock 11 days",
    async run(ctx) {
      const start = new Date(Math.floor(ctx.now / 1000) * 1000).toISOString();
      const testClock = await ctx.tender.POST("/api/test-clocks", { body: { frozen_time: start, name: "tender trigger subscription_trial_will_end" } });
      ctx.say(`Created test clock ${testClock.id} at ${start}`);
      const { sub, ...objects } = await subscription(ctx, testClock.id, { trial_period_days: 14 });
      const to = new Date(Date.parse(sub.trial_end ?? start) - 3 * 86_400_000 + 60_000).toISOString();
      await ctx.tender.POST("/api/test-clocks/{id}/advance", { params: { path: { id: testClock.id } }, body: { frozen_time: to } });
      ctx.say(`Advanced test clock ${testClock.id} to ${to} (three days before the trial ends on ${sub.trial_end})`);
      return { objects: { test_clock: testClock.id, ...objects }, objectId: objects.subscription };
    },
  },
  subscription_renewal: {
    creates: "a test clock, a user on it and a subscription, then advances the clock past the renewal",
    async run(ctx) {
      const start = new Date(Math.floor(ctx.now / 1000) * 1000).toISOString();
      const testClock = await ctx.tender.POST("/api/test-clocks", { body: { frozen_time: start, name: "tender trigger subscription_renewal" } });
      ctx.say(`Created test clock ${testClock.id} at ${start}`);
      const { sub, ...objects } = await subscription(ctx, testClock.id);
      const renewal = Date.parse(sub.next_billing_date ?? start);
      const to = new Date(renewal + 60_000).toISOString();
      await ctx.tender.POST("/api/test-clocks/{id}/advance", { params: { path: { id: testClock.id } }, body: { frozen_time: to } });
      ctx.say(`Advanced test clock ${testClock.id} to ${to} (past the renewal on ${sub.next_billing_date})`);
      return { objects: { test_clock: testClock.id, ...objects }, objectId: objects.subscription };
    },
  },
};

async function trigger(tender: Tender, parsed: Parsed, io: CliIo, apiKey: string): Promise<number> {
  const type = parsed.args[0];
  if (!Object.hasOwn(TRIGGERS, type)) {
    throw new UsageError(`unknown event type '${type}'. Known: ${Object.keys(TRIGGERS).join(", ")}`);
  }
  if (/^(sk|rk)_live_/.test(apiKey)) throw new UsageError("trigger creates objects and moves (test) money: use a test-mode key, not a live one");
  const timeoutS = (parsed.flags.timeout as number | undefined) ?? 30;
  const started = Date.now();
  io.stderr(`Triggering ${type}: creating ${TRIGGERS[type as EventType].creates}`);
  const result = await TRIGGERS[type as EventType].run({ tender, say: (line) => io.stderr(`  ${line}`), now: started });

  let event: FeedEvent | undefined;
  if (!parsed.flags["no-wait"]) {
    const deadline = Date.now() + timeoutS * 1000;
    for (;;) {
      const page = await tender.GET("/api/events", { params: { query: { type: type as EventType, object_id: result.objectId, limit: 1 } } });
      event = page.data[0];
      if (event || Date.now() > deadline) break;
      await abortableSleep(250, io.signal);
    }
  }
  if (parsed.flags.json) {
    io.stdout(JSON.stringify({ type, event: event?.id ?? null, object_id: result.objectId, objects: result.objects }));
  } else if (event) {
    io.stdout(`${event.id}  ${event.type}  ${result.objectId}`);
  } else if (parsed.flags["no-wait"]) {
    io.stdout(`${type}  ${result.objectId}`);
  }
  if (!event && !parsed.flags["no-wait"]) {
    io.stderr(`tender: ${type} about ${result.objectId} did not appear in the events feed within ${timeoutS} s`);
    return EXIT.timeout;
  }
  io.stderr(event ? `Triggered ${type}: ${event.id}` : `Created the objects for ${type} (not waiting for the event)`);
  return EXIT.ok;
}
