// Recovery through @tender/client (recoverWebhook, getWebhookRecovery) and the CLI
// (`tender recover <whk_…> --since <time> [--until <time>] [--wait]`), against the Worker in this
// isolate, with the real job and delivery queues. workerd has no node:util parseArgs: the CLI runs
// here from a parsed command line (run()); how `recover`'s arguments are read is proven in Node
// (test/node/cli.test.ts).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EXIT, run, type CliIo } from "@tender/client/cli";
import { TenderError } from "@tender/client";
import { env } from "../support/env";
import { BASE, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { tenderFor, workerFetch } from "./support";

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

function io(apiKey: string) {
  const out: string[] = [];
  const err: string[] = [];
  const value: CliIo = {
    env: { TENDER_API_URL: BASE, TENDER_API_KEY: apiKey },
    stdout: (line) => void out.push(line),
    stderr: (line) => void err.push(line),
    fetch: workerFetch().fetch,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 50))),
  };
  return { io: value, out, err };
}

/** An account whose endpoint missed one event: its delivery failed for good. */
async function missedOne(path: string) {
  const acct = await signup();
  const since = new Date(Date.now() - 1000).toISOString();
  const hook = await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}${path}`, events: ["customer.created"] } });
  expect(hook.status, hook.text).toBe(201);
  receiver.answer(500);
  await createUser(acct, { name: "Missed One" });
  const delivery = await waitFor(async () => {
    const row = await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE endpoint_id = ? AND attempt_count >= 1").bind(hook.body.id).first<{ id: string }>();
    expect(row).not.toBeNull();
    return row!.id;
  }, 8000, 25);
  await env.DB.prepare("UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL WHERE id = ?").bind(delivery).run();
  receiver.answer(200);
  return { acct, endpoint: hook.body.id as string, since, delivery };
}

describe("the client", () => {
  it("recoverWebhook starts a recovery (Date or text times) and getWebhookRecovery reads it to done", async () => {
    const { acct, endpoint, since, delivery } = await missedOne("/client");
    const { tender, sent } = tenderFor(acct.key);
    const started = await tender.recoverWebhook(endpoint, { since: new Date(since) });
    expect(started).toMatchObject({ object: "webhook_recovery", endpoint_id: endpoint, since, status: "running", total: 0, sent: 0 });
    expect(sent[0].headers.get("idempotency-key")).toBeTruthy();
    const done = await waitFor(async () => {
      const read = await tender.getWebhookRecovery(endpoint, started.id);
      expect(read.status).toBe("done");
      return read;
    }, 10_000, 50);
    expect(done).toMatchObject({ id: started.id, total: 1, sent: 1 });
    await waitFor(async () => expect((await env.DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(delivery).first<{ status: string }>())!.status).toBe("delivered"), 8000, 25);
    // An overlapping one while none runs is taken; a bad range is a TenderError naming the field.
    const error = await tender.recoverWebhook(endpoint, { since: "yesterday" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TenderError);
    expect(error).toMatchObject({ status: 400, code: "parameter_invalid", param: "since" });
  });
});

describe("tender recover", () => {
  it("needs --since, and its help names it", async () => {
    const acct = await signup();
    const noSince = io(acct.key);
    expect(await run({ command: "recover", args: ["whk_1"], flags: {} }, noSince.io)).toBe(EXIT.usage);
    expect(noSince.err.join("\n")).toMatch(/--since/);
    const help = io(acct.key);
    expect(await run({ command: "help", args: ["recover"], flags: {} }, help.io)).toBe(EXIT.ok);
    expect(help.out.join("\n")).toMatch(/tender recover <whk_…> --since <time>/);
  });

  it("prints the recovery, and with --wait polls it until done", async () => {
    const { acct, endpoint, since } = await missedOne("/cli");
    const cli = io(acct.key);
    expect(await run({ command: "recover", args: [endpoint], flags: { since, wait: true, interval: 50, json: true } }, cli.io)).toBe(EXIT.ok);
    expect(cli.out).toHaveLength(2);
    expect(JSON.parse(cli.out[0])).toMatchObject({ object: "webhook_recovery", endpoint_id: endpoint, status: "running" });
    expect(JSON.parse(cli.out[1])).toMatchObject({ status: "done", total: 1, sent: 1 });
    // Without --wait: one line, the recovery as it started.
    const plain = io(acct.key);
    expect(await run({ command: "recover", args: [endpoint], flags: { since } }, plain.io)).toBe(EXIT.ok);
    expect(plain.out).toHaveLength(1);
    expect(plain.out[0]).toMatch(/^rcv_\S+ {2}running {2}total=0 {2}sent=0 /);
  });

  it("an API refusal exits 1 with the error on stderr", async () => {
    const { acct, endpoint } = await missedOne("/cli-bad");
    const bad = io(acct.key);
    expect(await run({ command: "recover", args: [endpoint], flags: { since: "2026-01-01" } }, bad.io)).toBe(EXIT.apiError);
    expect(bad.err.join("\n")).toMatch(/400 invalid_request_error\/parameter_invalid: .*param since/);
    const missing = io(acct.key);
    expect(await run({ command: "recover", args: ["whk_01jd2x4k5m6n7p8q9r0s1t2v3w"], flags: { since: new Date(Date.now() - 60_000).toISOString() } }, missing.io)).toBe(EXIT.apiError);
    expect(missing.err.join("\n")).toMatch(/404/);
  });
});
