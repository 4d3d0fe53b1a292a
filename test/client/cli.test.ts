// The `tender` CLI (clients/typescript/src/cli.ts) run inside the Worker suite: its arguments, exit
// codes and output, `trigger` for every event type of the catalog, and `listen` forwarding signed
// events. bin/tender.mjs only wires Node's argv, env, stdout, stderr and Ctrl-C to the same main().
import { describe, expect, it } from "vitest";
import { EXIT, TRIGGERS, UsageError, main, parseArgs, type CliIo } from "@tender/client/cli";
import { webhooks } from "@tender/client";
import { EVENT_TYPES } from "../../src/webhooks/catalog";
import { BASE, call, signup } from "../support/http";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { workerFetch } from "./support";

function io(apiKey?: string, extra: Partial<CliIo> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const value: CliIo = {
    env: { TENDER_API_URL: BASE, ...(apiKey ? { TENDER_API_KEY: apiKey } : {}) },
    stdout: (line) => void out.push(line),
    stderr: (line) => void err.push(line),
    fetch: workerFetch().fetch,
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
    const receiver = installReceiver();
    try {
      const acct = await signup();
      const endpoint = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/cli`, events: ["customer.created"] } });
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
      receiver.restore();
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
    const run = io(acct.key, { signal: stop.signal, forward: async () => new Response(null, { status: 200 }) });
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
