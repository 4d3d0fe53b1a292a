// The `tender` CLI (clients/typescript/src/cli.ts, as built to dist/ by the node project's global
// setup) in Node, where node:util's parseArgs reads its command line: its arguments, exit codes and
// output, `trigger` for every event type of the catalog, and `listen` forwarding signed events,
// against `npm run dev` on a free port. bin/tender.mjs only wires Node's argv, env, stdout, stderr
// and Ctrl-C to the same main(). (workerd has no node:util parseArgs: the Worker suite's tests of
// the CLI call run() with a parsed command line, test/webhooks/event-feed.test.ts.)
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as util from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { EXIT, TRIGGERS, UsageError, main, parseArgs, type CliIo } from "@tender/client/cli";
import { webhooks } from "@tender/client";
import { EVENT_TYPES } from "../../src/webhooks/catalog";
import { waitFor } from "../support/wait";
import { type DevProcess, startDev, untilServing } from "./dev-server";

// node:util as it is, its parseArgs watched: the CLI must read its command line with it.
vi.mock("node:util", async (importOriginal) => {
  const original = await importOriginal<typeof import("node:util")>();
  return { ...original, parseArgs: vi.fn(original.parseArgs) };
});

let dev: DevProcess;
let BASE = "";

beforeAll(async () => {
  dev = await startDev();
  await untilServing(dev);
  BASE = dev.origin;
}, 150_000);

afterAll(async () => {
  await dev?.stop();
});

/** A call to the dev server, as test/support/http.ts's call is to the Worker in workerd. */
async function call(path: string, options: { key?: string; body?: unknown; method?: string } = {}) {
  const headers: Record<string, string> = {};
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${BASE}${path}`, {
    method: options.method ?? (options.body !== undefined ? "POST" : "GET"),
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await response.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  return { status: response.status, body, text };
}

let signups = 0;
async function signup(name = "Acme") {
  signups++;
  const res = await call("/api/accounts", { body: { name, email: `cli${signups}@acme.test` } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id as string, key: res.body.api_key as string };
}

/** A webhook receiver on a free local port, as a customer runs one: it answers 200 and records what it got. */
async function startReceiver() {
  const received: { url: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const server: Server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      received.push({ url: request.url ?? "", headers: request.headers, body });
      response.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, received, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function io(apiKey?: string, extra: Partial<CliIo> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const value: CliIo = {
    env: { TENDER_API_URL: BASE, ...(apiKey ? { TENDER_API_KEY: apiKey } : {}) },
    stdout: (line) => void out.push(line),
    stderr: (line) => void err.push(line),
    sleep: async () => {},
    ...extra,
  };
  return { io: value, out, err };
}

describe("arguments", () => {
  it("parses commands, positionals and --flag value / --flag=value", () => {
    expect(parseArgs(["listen", "--forward-to", "http://localhost:3000/webhooks", "--events=payment.completed,payment.failed", "--json"])).toEqual({
      command: "listen",
      args: [],
      flags: { "forward-to": "http://localhost:3000/webhooks", events: "payment.completed,payment.failed", json: true },
    });
    expect(parseArgs(["deliveries", "whk_1", "--limit", "5", "--all"])).toEqual({ command: "deliveries", args: ["whk_1"], flags: { limit: 5, all: true } });
    expect(parseArgs(["trigger", "payment.completed", "--api-url", "http://x:1"])).toMatchObject({ args: ["payment.completed"], flags: { "api-url": "http://x:1" } });
    expect(parseArgs(["-h"]).flags.help).toBe(true);
    expect(parseArgs(["help", "listen"])).toMatchObject({ command: "help", args: ["listen"] });
    expect(parseArgs(["events", "--help"]).flags.help).toBe(true);
  });

  it("parses recover's <endpoint> --since --until --wait, and needs <endpoint-id>", () => {
    expect(parseArgs(["recover", "whk_1", "--since", "2026-11-27T09:00:00Z", "--until=2026-11-27T10:00:00Z", "--wait"])).toEqual({
      command: "recover",
      args: ["whk_1"],
      flags: { since: "2026-11-27T09:00:00Z", until: "2026-11-27T10:00:00Z", wait: true },
    });
    expect(() => parseArgs(["recover"])).toThrow(/needs <endpoint-id>/);
  });

  it("reads the command line with node:util's parseArgs (no parser of its own)", () => {
    vi.mocked(util.parseArgs).mockClear();
    expect(parseArgs(["--api-url", "http://x:1", "deliveries", "whk_1", "--status=failed"])).toEqual({
      command: "deliveries",
      args: ["whk_1"],
      flags: { "api-url": "http://x:1", status: "failed" },
    });
    // Up to the command with the global flags; after it with the command's own as well.
    const calls = vi.mocked(util.parseArgs).mock.calls.map(([config]) => config as { args: string[]; options: Record<string, unknown> });
    expect(calls.map((config) => config.args)).toEqual([["--api-url", "http://x:1", "deliveries", "whk_1", "--status=failed"], ["whk_1", "--status=failed"]]);
    expect(Object.keys(calls[1].options)).toEqual(expect.arrayContaining(["status", "limit", "api-url"]));
  });

  it("refuses what it does not know with a UsageError", () => {
    const refused: [string[], RegExp][] = [
      [["frobnicate"], /unknown command 'frobnicate'/],
      [["events", "--nope"], /unknown option --nope for 'events'/],
      [["listen", "--forward-to"], /--forward-to needs a value/],
      [["events", "--limit", "ten"], /whole number/],
      [["events", "--json=yes"], /takes no value/],
      [["redeliver"], /needs <event-id>/],
      [["deliveries", "whk_1", "extra"], /unexpected argument 'extra'/],
      [["events", "-x"], /unknown option -x/],
      [["trigger", "a", "--forward-to", "x"], /unknown option --forward-to for 'trigger'/],
      [["--forward-to", "x", "listen"], /unknown option --forward-to$/],
      [["listen", "--forward-to", "--json"], /--forward-to needs a value/],
      [["toString"], /unknown command 'toString'/],
    ];
    for (const [argv, message] of refused) expect(() => parseArgs(argv), argv.join(" ")).toThrow(new RegExp(message.source));
    expect(() => parseArgs(["frobnicate"])).toThrow(UsageError);
  });

  it("exit codes: --help 0 (usage on stdout), nothing or a bad command 2 (on stderr), no API key 2", async () => {
    const help = io();
    expect(await main(["--help"], help.io)).toBe(EXIT.ok);
    expect(help.out.join("\n")).toMatch(/Usage: tender <command>/);
    expect(help.out.join("\n")).toMatch(/Exit codes: 0 ok, 1 the API answered an error, 2 usage/);
    expect(help.err).toEqual([]);
    const listenHelp = io();
    expect(await main(["help", "listen"], listenHelp.io)).toBe(0);
    expect(listenHelp.out[0]).toMatch(/^Usage: tender listen --forward-to <url>/);
    const none = io();
    expect(await main([], none.io)).toBe(EXIT.usage);
    expect(none.out).toEqual([]);
    expect(none.err.join("\n")).toMatch(/Usage: tender/);
    const bad = io("sk_test_x");
    expect(await main(["events", "--limit", "0"], bad.io)).toBe(EXIT.usage);
    expect(bad.err[0]).toMatch(/--limit must be 1 to 100/);
    const keyless = io();
    expect(await main(["events"], keyless.io)).toBe(EXIT.usage);
    expect(keyless.err[0]).toMatch(/TENDER_API_KEY/);
    const version = io();
    expect(await main(["--version"], version.io)).toBe(0);
    expect(version.out).toEqual(["0.1.0"]);
  });

  it("an unknown flag or a missing value: one line saying which, then where help is (exit 2); --help per command", async () => {
    for (const [argv, line] of [
      [["events", "--nope"], "tender: unknown option --nope for 'events'"],
      [["listen", "--forward-to"], "tender: --forward-to needs a value"],
      [["deliveries"], "tender: 'deliveries' needs <endpoint-id>"],
    ] as const) {
      const run = io("sk_test_x");
      expect(await main([...argv], run.io), argv.join(" ")).toBe(EXIT.usage);
      expect(run.out).toEqual([]);
      expect(run.err).toEqual([line, "Run 'tender --help' for usage."]);
    }
    for (const command of ["listen", "trigger", "events", "deliveries", "redeliver"]) {
      const run = io();
      expect(await main([command, "--help"], run.io)).toBe(EXIT.ok);
      expect(run.out[0]).toMatch(new RegExp(`^Usage: tender ${command} `));
      const short = io();
      expect(await main([command, "-h"], short.io)).toBe(EXIT.ok);
      expect(short.out).toEqual(run.out);
    }
  });

  it("exit code 1 for an API error (with type, code and request id on stderr), 3 when the API cannot be reached", async () => {
    const acct = await signup();
    const missing = io(acct.key);
    expect(await main(["redeliver", "evt_00000000000000000000000000"], missing.io)).toBe(EXIT.apiError);
    expect(missing.out).toEqual([]);
    expect(missing.err[0]).toMatch(/^tender: 404 not_found_error\/resource_missing: .*request req_/);
    const unauthorized = io("sk_test_wrong");
    expect(await main(["events"], unauthorized.io)).toBe(EXIT.apiError);
    expect(unauthorized.err[0]).toMatch(/401 authentication_error/);
    const down = io(acct.key, { fetch: async () => Promise.reject(new TypeError("connect ECONNREFUSED 127.0.0.1:8787")) });
    expect(await main(["events"], down.io)).toBe(EXIT.unreachable);
    expect(down.err[0]).toMatch(/Could not reach .*ECONNREFUSED/);
  });
});

describe("tender trigger", () => {
  it("has a plan for every event type of the catalog, and only those", () => {
    expect(Object.keys(TRIGGERS).sort()).toEqual([...EVENT_TYPES].sort());
  });

  it("makes every event type happen, and prints the event", { timeout: 90_000 }, async () => {
    const acct = await signup();
    const runs = await Promise.all(
      EVENT_TYPES.map(async (type) => {
        const run = io(acct.key);
        const code = await main(["trigger", type, "--json", "--timeout", "60"], run.io);
        return { type, code, out: run.out, err: run.err };
      }),
    );
    for (const run of runs) {
      expect(run.code, `${run.type}: ${run.err.join("\n")}`).toBe(EXIT.ok);
      expect(run.out, run.type).toHaveLength(1);
      const printed = JSON.parse(run.out[0]) as { type: string; event: string; object_id: string; objects: Record<string, string> };
      expect(printed.type).toBe(run.type);
      const event = await call(`/api/events/${printed.event}`, { key: acct.key });
      expect(event.status).toBe(200);
      expect(event.body).toMatchObject({ type: run.type, object_id: printed.object_id });
      expect(run.err[0]).toMatch(new RegExp(`^Triggering ${run.type.replace(".", "\\.")}: creating `));
    }
    const renewal = runs.find((r) => r.type === "subscription_renewal")!;
    const renewed = JSON.parse(renewal.out[0]);
    const renewalEvent = (await call(`/api/events/${renewed.event}`, { key: acct.key })).body;
    expect(renewalEvent.payload).toMatchObject({ type: "subscription_renewal", status: "success", subscription_id: renewed.object_id });
    expect(renewalEvent.data).toMatchObject({ object: "subscription", id: renewed.object_id, status: "active" });
    const failed = runs.find((r) => r.type === "payment.failed")!;
    expect((await call(`/api/events/${JSON.parse(failed.out[0]).event}`, { key: acct.key })).body.data).toMatchObject({ status: "failed" });
  });

  it("prints the event id in text mode; refuses an unknown type and a live key (exit 2)", async () => {
    const acct = await signup();
    const run = io(acct.key);
    expect(await main(["trigger", "customer.created"], run.io)).toBe(EXIT.ok);
    expect(run.out).toHaveLength(1);
    expect(run.out[0]).toMatch(/^evt_\w{26}  customer\.created  usr_\w{26}$/);
    expect(run.err.at(-1)).toMatch(/^Triggered customer\.created: evt_/);
    const unknown = io(acct.key);
    expect(await main(["trigger", "payment.refunded"], unknown.io)).toBe(EXIT.usage);
    expect(unknown.err[0]).toMatch(/unknown event type 'payment\.refunded'\. Known: .*payment\.completed/);
    const live = io("sk_live_0123456789abcdef");
    expect(await main(["trigger", "customer.created"], live.io)).toBe(EXIT.usage);
    expect(live.err[0]).toMatch(/test-mode key/);
    const list = io();
    expect(await main(["trigger", "--list"], list.io)).toBe(EXIT.ok);
    expect(list.out).toHaveLength(EVENT_TYPES.length);
  });
});

describe("tender events, deliveries, redeliver", () => {
  it("events: one page with the next cursor on stderr, --all every page, --json one object per line", async () => {
    const acct = await signup();
    for (let i = 0; i < 3; i++) await call("/api/users", { key: acct.key, body: { name: `U ${i}`, email: `u${i}@example.com` } });
    const page = io(acct.key);
    expect(await main(["events", "--limit", "2", "--json"], page.io)).toBe(0);
    const events = page.out.map((line) => JSON.parse(line));
    expect(events.map((e) => e.type)).toEqual(["customer.created", "customer.created"]);
    expect(page.err).toEqual([`More: --starting-after ${events[1].id} (or --all)`]);
    const rest = io(acct.key);
    expect(await main(["events", "--limit", "2", "--starting-after", events[1].id, "--json"], rest.io)).toBe(0);
    expect(rest.out).toHaveLength(1);
    expect(rest.err).toEqual([]);
    const all = io(acct.key);
    expect(await main(["events", "--all", "--limit", "1", "--type", "customer.created"], all.io)).toBe(0);
    expect(all.out).toHaveLength(3);
    expect(all.out[0]).toMatch(/^evt_\w{26}  \d{4}-\d\d-\d\dT.*Z  customer\.created\s+usr_\w{26}$/);
  });

  it("deliveries lists an endpoint's deliveries; redeliver queues the event again", async () => {
    const receiver = await startReceiver();
    try {
      const acct = await signup();
      const endpoint = await call("/api/webhooks", { key: acct.key, body: { url: `${receiver.origin}/cli`, events: ["customer.created"] } });
      await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
      await waitFor(() => expect(receiver.received).toHaveLength(1), 8000, 25);
      const listed = await waitFor(async () => {
        const run = io(acct.key);
        expect(await main(["deliveries", endpoint.body.id, "--json"], run.io)).toBe(0);
        expect(JSON.parse(run.out[0])).toMatchObject({ status: "delivered", endpoint_id: endpoint.body.id, last_status_code: 200 });
        return run;
      });
      const eventId = JSON.parse(listed.out[0]).event_id;
      const text = io(acct.key);
      expect(await main(["deliveries", endpoint.body.id, "--status", "delivered"], text.io)).toBe(0);
      expect(text.out[0]).toMatch(new RegExp(`^dlv_\\w+  delivered  attempts=1  last=200  ${eventId}  `));
      const wrongStatus = io(acct.key);
      expect(await main(["deliveries", endpoint.body.id, "--status", "lost"], wrongStatus.io)).toBe(EXIT.usage);

      // Delivered already: nothing to redeliver without --endpoint, and it says why.
      const nothing = io(acct.key);
      expect(await main(["redeliver", eventId], nothing.io)).toBe(0);
      expect(nothing.out).toEqual([]);
      expect(nothing.err.join("\n")).toContain(`Not redelivered to ${endpoint.body.id}: already delivered`);
      expect(nothing.err.join("\n")).toContain("Nothing to redeliver: pass --endpoint");
      const again = io(acct.key);
      expect(await main(["redeliver", eventId, "--endpoint", endpoint.body.id, "--json"], again.io)).toBe(0);
      expect(JSON.parse(again.out[0])).toMatchObject({ object: "redelivery", event_id: eventId, deliveries: [expect.stringMatching(/^dlv_/)], skipped: [] });
      await waitFor(() => expect(receiver.received).toHaveLength(2), 8000, 25);
      expect(receiver.received[1].headers["webhook-id"]).toBe(eventId);
    } finally {
      await receiver.stop();
    }
  });
});

describe("tender listen", () => {
  it("forwards each new event once, signed with its secret and a real delivery's headers, and prints the target's status", { timeout: 30_000 }, async () => {
    const acct = await signup();
    await call("/api/users", { key: acct.key, body: { name: "Before", email: "before@example.com" } }); // not forwarded: it predates listen
    const secret = webhooks.newSecret();
    const forwarded: { url: string; headers: Headers; body: string }[] = [];
    const stop = new AbortController();
    const run = io(acct.key, {
      signal: stop.signal,
      forward: async (request) => {
        forwarded.push({ url: request.url, headers: request.headers, body: await request.text() });
        return new Response(null, { status: forwarded.length === 1 ? 202 : 500 });
      },
    });
    const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--events", "customer.created,payout.created", "--interval", "20", "--secret", secret], run.io);
    await waitFor(() => expect(run.err.join("\n")).toContain(`Signing with the secret from --secret (whsec_…${secret.slice(-4)})`), 5000, 10);

    const user = await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    await call(`/api/users/${user.body.id}`, { key: acct.key, method: "PUT", body: { name: "Ada King", email: "ada@example.com" } }); // filtered out
    await waitFor(() => expect(forwarded).toHaveLength(1), 5000, 10);
    const payout = await call("/payout", {
      key: acct.key,
      body: { recipient_id: user.body.id, amount: 700, currency: "usd", payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: new Date().getUTCFullYear() + 2, cvv: "123" },
    });
    await waitFor(() => expect(forwarded).toHaveLength(2), 5000, 10);

    await new Promise((resolve) => setTimeout(resolve, 100)); // a few more polls: nothing is sent twice
    stop.abort();
    expect(await listening).toBe(EXIT.ok);
    expect(forwarded).toHaveLength(2);

    const feed = (await call(`/api/events?limit=10`, { key: acct.key })).body.data as { id: string; type: string; payload: unknown; object_id: string; sequence: number }[];
    const created = feed.find((e) => e.type === "customer.created" && e.object_id === user.body.id)!;
    const payoutCreated = feed.find((e) => e.type === "payout.created")!;
    expect(forwarded.map((f) => JSON.parse(f.body).id)).toEqual([created.id, payoutCreated.id]);
    for (const [i, event] of [created, payoutCreated].entries()) {
      const { url, headers, body } = forwarded[i];
      expect(url).toBe("http://localhost:3000/webhooks");
      expect(JSON.parse(body)).toEqual(event.payload);
      expect(headers.get("content-type")).toBe("application/json");
      expect(headers.get("user-agent")).toMatch(/^Tender-Webhooks\/1\.0/);
      expect(headers.get("tender-delivery-attempt")).toBe("1");
      expect(headers.get("tender-sequence")).toBe(`${event.object_id}/${event.sequence}`);
      expect(headers.get("webhook-id")).toBe(event.id);
      // Both signature styles verify with the printed secret, and not with another.
      const standard = new Headers(headers);
      standard.delete("x-signature");
      expect((await webhooks.verify(body, standard, secret)).id).toBe(event.id);
      expect((await webhooks.verify(body, { "x-signature": headers.get("x-signature")! }, secret)).id).toBe(event.id);
      await expect(webhooks.verify(body, headers, webhooks.newSecret())).rejects.toMatchObject({ code: "signature_invalid" });
    }
    expect(run.out).toHaveLength(2);
    expect(run.out[0]).toMatch(new RegExp(`^\\S+Z  --> customer\\.created\\s+${created.id}  <-- 202 http://localhost:3000/webhooks \\d+ ms$`));
    expect(run.out[1]).toMatch(new RegExp(`--> payout\\.created\\s+${payoutCreated.id}  <-- 500 `));
    expect(run.err.at(-1)).toBe("Stopped.");
  });

  it("a target that cannot be reached is reported on the event's line, and listening goes on", { timeout: 15_000 }, async () => {
    const acct = await signup();
    const stop = new AbortController();
    let calls = 0;
    const run = io(acct.key, {
      signal: stop.signal,
      forward: async () => {
        calls++;
        throw new TypeError("fetch failed");
      },
    });
    const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", "20", "--json"], run.io);
    await waitFor(() => expect(run.err.join("\n")).toMatch(/new webhook signing secret is whsec_/), 5000, 10);
    await call("/api/users", { key: acct.key, body: { name: "A", email: "a@example.com" } });
    await call("/api/users", { key: acct.key, body: { name: "B", email: "b@example.com" } });
    await waitFor(() => expect(run.out).toHaveLength(2), 5000, 10);
    stop.abort();
    expect(await listening).toBe(0);
    expect(calls).toBe(2);
    expect(JSON.parse(run.out[0])).toMatchObject({ type: "customer.created", status: null, error: "fetch failed" });
  });

  it("never prints a signing secret it was given (TENDER_WEBHOOK_SECRET or --secret): only where it came from and its last 4 characters; a new one is printed whole", async () => {
    const acct = await signup();
    const given = webhooks.newSecret();
    const runs = [
      { argv: [], env: { TENDER_WEBHOOK_SECRET: given }, source: "TENDER_WEBHOOK_SECRET" },
      { argv: ["--secret", given], env: {}, source: "--secret" },
    ];
    for (const { argv, env: extraEnv, source } of runs) {
      const stop = new AbortController();
      const run = io(acct.key, { signal: stop.signal, forward: async () => new Response(null, { status: 200 }) });
      run.io.env = { ...run.io.env, ...extraEnv };
      const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", "20", ...argv], run.io);
      await waitFor(() => expect(run.err.join("\n")).toContain("Ctrl-C"), 5000, 10);
      stop.abort();
      expect(await listening).toBe(EXIT.ok);
      const printed = [...run.out, ...run.err].join("\n");
      expect(printed, source).not.toContain(given);
      expect(printed, source).not.toContain(given.slice(6, 30));
      expect(printed).toContain(`Signing with the secret from ${source} (whsec_…${given.slice(-4)})`);
    }
    const stop = new AbortController();
    const fresh = io(acct.key, { signal: stop.signal });
    const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", "20"], fresh.io);
    await waitFor(() => expect(fresh.err.join("\n")).toMatch(/Your new webhook signing secret is whsec_[A-Za-z0-9+/]{43}=/), 5000, 10);
    stop.abort();
    expect(await listening).toBe(EXIT.ok);
  });

  it("never prints a user name or password the --forward-to URL carries", async () => {
    const acct = await signup();
    const stop = new AbortController();
    const sent: Request[] = [];
    const run = io(acct.key, { signal: stop.signal, forward: async (request) => (sent.push(request), new Response(null, { status: 200 })) });
    const listening = main(["listen", "--forward-to", "http://hook-user:hook-pass-1234@localhost:3000/webhooks", "--interval", "20"], run.io);
    await waitFor(() => expect(run.err.join("\n")).toContain("Ctrl-C"), 5000, 10);
    await call("/api/users", { key: acct.key, body: { name: "Ada", email: "ada@example.com" } });
    await waitFor(() => expect(run.out.join("\n")).toContain("customer.created"), 5000, 10);
    stop.abort();
    expect(await listening).toBe(EXIT.ok);
    const printed = [...run.out, ...run.err].join("\n");
    expect(printed).not.toContain("hook-user");
    expect(printed).not.toContain("hook-pass-1234");
    expect(printed).toContain("http://***@localhost:3000/webhooks");
    // Sent as curl sends them, as HTTP Basic credentials (Node's fetch refuses them in the URL).
    expect(run.out.join("\n")).toMatch(/<-- 200 /);
    expect(sent[0].url).toBe("http://localhost:3000/webhooks");
    expect(sent[0].headers.get("authorization")).toBe(`Basic ${Buffer.from("hook-user:hook-pass-1234").toString("base64")}`);
  });

  it("refuses a bad --forward-to, an unknown --events type, or a malformed secret (exit 2)", async () => {
    for (const argv of [
      ["listen"],
      ["listen", "--forward-to", "not a url"],
      ["listen", "--forward-to", "ftp://x"],
      ["listen", "--forward-to", "http://x", "--events", "payment.done"],
      ["listen", "--forward-to", "http://x", "--secret", "hunter2"],
    ]) {
      const run = io("sk_test_x");
      expect(await main(argv, run.io), argv.join(" ")).toBe(EXIT.usage);
      expect(run.err[0]).toMatch(/^tender: /);
    }
  });
});

describe("tender listen never prints a secret", () => {
  // (Moved from test/proof/attacks-5.test.ts with the CLI's parsing.)
  const withEnv = (apiKey: string | undefined, extra: Partial<CliIo> = {}, env: Record<string, string> = {}) => {
    const run = io(apiKey, extra);
    run.io.env = { ...run.io.env, ...env };
    return run;
  };
  const createUser = async (acct: { key: string }, { name }: { name: string }) => {
    const res = await call("/api/users", { key: acct.key, body: { name, email: `${name.split(" ")[0].toLowerCase()}@example.com` } });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: string };
  };

  it("with the secret in TENDER_WEBHOOK_SECRET: forwarding, a failing target, an API error while listening and --json print neither it nor any part of it but its last 4", async () => {
    const owner = await signup("Listener");
    const secret = webhooks.newSecret();
    for (const argv of [[], ["--json"]]) {
      const stop = new AbortController();
      let calls = 0;
      const forward = async () => {
        calls++;
        if (calls === 1) return new Response("ok", { status: 200 });
        throw new Error("connect ECONNREFUSED 127.0.0.1:3000");
      };
      const run = withEnv(owner.key, { signal: stop.signal, forward }, { TENDER_WEBHOOK_SECRET: secret });
      const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", "10", ...argv], run.io);
      await waitFor(() => expect(run.err.join("\n")).toContain("Ctrl-C"), 5000, 10);
      await createUser(owner, { name: "Heard One" });
      await createUser(owner, { name: "Heard Two" });
      await waitFor(() => expect(calls).toBeGreaterThanOrEqual(2), 5000, 10);
      stop.abort();
      await listening;
      const printed = [...run.out, ...run.err].join("\n");
      expect(run.out.length, printed).toBeGreaterThanOrEqual(2);
      expect(printed).not.toContain(secret);
      expect(printed).not.toContain(secret.slice(6, -4));
      expect(printed).not.toContain(secret.slice(6, 14));
    }
    // The API key revoked while listening: the error is printed, the secret is not.
    const createdKey = await call("/api/keys", { key: owner.key, body: { name: "test key", scopes: ["events:read"] } });
    expect(createdKey.status, createdKey.text).toBe(201);
    const restricted = createdKey.body as { id: string; secret: string };
    const stop = new AbortController();
    const run = withEnv(restricted.secret, { signal: stop.signal, forward: async () => new Response("ok") }, { TENDER_WEBHOOK_SECRET: secret });
    const listening = main(["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", "10"], run.io);
    await waitFor(() => expect(run.err.join("\n")).toContain("Ctrl-C"), 5000, 10);
    expect((await call(`/api/keys/${restricted.id}`, { key: owner.key, method: "DELETE" })).status).toBe(200);
    const code = await Promise.race([listening, new Promise((resolve) => setTimeout(() => resolve("still listening"), 3000))]);
    stop.abort();
    await listening;
    expect(code).not.toBe("still listening");
    const printed = [...run.out, ...run.err].join("\n");
    expect(printed).toMatch(/401/);
    expect(printed).not.toContain(secret.slice(6, -4));
    expect(printed).not.toContain(restricted.secret);
  });

  it("a secret or an API key typed where another value belongs is not repeated in the usage error", async () => {
    const owner = await signup("Typos");
    const secret = webhooks.newSecret();
    const cases = [
      ["listen", "--forward-to", "http://localhost:3000/webhooks", secret],
      ["listen", "--forward-to", secret],
      ["listen", "--forward-to", "http://localhost:3000/webhooks", "--interval", secret],
      ["listen", "--forward-to", "http://localhost:3000/webhooks", "--events", secret],
      ["listen", "--forward-to", "http://localhost:3000/webhooks", owner.key],
      ["events", owner.key],
      [secret],
    ];
    for (const argv of cases) {
      const run = io(owner.key);
      expect(await main(argv, run.io), argv.join(" ")).toBe(EXIT.usage);
      const printed = [...run.out, ...run.err].join("\n");
      expect(printed, argv.join(" ")).toMatch(/^tender: /);
      expect(printed, argv.join(" ")).not.toContain(secret.slice(6, -4));
      expect(printed, argv.join(" ")).not.toContain(owner.key);
    }
  });
});
