// Moving an account between shards (src/accounts/move.ts): everything continues on the new shard,
// keys issued before the move keep working, paused keys answer 503, and a stopped move finishes.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ACCOUNT_TABLES, SHARD_TABLES } from "../../src/accounts/move";
import { renewChunk } from "../../src/billing/renewals";
import { PAYOUT_STALE_MS, settlePayout, sweepStalePayouts } from "../../src/payments/settle-payout";
import { sweepDeliveries } from "../../src/webhooks/sweeper";
import { OTHER_SHARD, TEST_SHARD, envOf } from "../support/env";
import { createPlan, createUser, mintToken, payoutWithoutSettlement, subscribed } from "../support/fixtures";
import { type Account, call, expectError, fetchWith, signup } from "../support/http";
import { type D1FaultRule, type D1Op, faultyD1 } from "../support/faults";
import { installReceiver, RECEIVER_ORIGIN } from "../support/receiver";
import { waitFor } from "../support/wait";
import { useProcessor } from "../../src/processor";
import { card } from "../support/cards";
import { IDEMPOTENCY_LOCK_MS } from "../../src/middleware/idempotency";

const from = TEST_SHARD;
const POINTER_TABLES: string[] = ["accounts", "api_keys", "access_tokens"];
const to = OTHER_SHARD;

const rowsOn = async (shard: number, table: string, accountId: string) =>
  Number(
    (await envOf(shard).DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${table === "accounts" ? "id" : "account_id"} = ?`).bind(accountId).first<{ n: number }>())!.n,
  );

// No drain: nothing in these tests is in flight when a move pauses its account.
const move = (accountId: string, shard: number, drain = 0) => call(`/api/accounts/${accountId}/move`, { body: { to_shard: shard, drain_seconds: drain } });

let receiver: ReturnType<typeof installReceiver>;
beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.restore());

describe("moving an account to another shard", () => {
  it("copies every table of the schema: ACCOUNT_TABLES names each one that holds an account's rows", async () => {
    const { results } = await envOf(from).DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all<{ name: string }>();
    const tables = results.map((r) => r.name).filter((name) => !SHARD_TABLES.includes(name));
    expect([...tables].sort()).toEqual([...ACCOUNT_TABLES].sort());
  });

  it("moves an account with payouts, subscriptions, events and pending deliveries mid-flight; everything continues on the new shard", { timeout: 30_000 }, async () => {
    const acct = await signup("Mover");
    const token = await mintToken(acct.key);
    const user = await createUser(acct, { email: "mover@example.com" });
    const plan = await createPlan(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    // A payout whose settlement message was lost: the cron's sweep settles it.
    const payout = await payoutWithoutSettlement(acct, { recipient_id: user.id });
    // A webhook endpoint that fails: its delivery is pending, with a retry scheduled.
    receiver.answer(500);
    const hook = (await call("/api/webhooks", { key: acct.key, body: { url: `${RECEIVER_ORIGIN}/moved`, events: ["customer.created"] } })).body;
    const watched = await createUser(acct, { name: "Ada Moved", email: "watched@example.com" });
    await waitFor(async () => expect((await envOf(from).DB.prepare("SELECT count(*) AS n FROM delivery_attempts WHERE account_id = ?").bind(acct.id).first("n")) as number).toBeGreaterThan(0), 8000, 25);
    const pending = await envOf(from).DB.prepare("SELECT id FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending'").bind(hook.id).all<{ id: string }>();
    expect(pending.results).toHaveLength(1);
    const before = Object.fromEntries(await Promise.all(ACCOUNT_TABLES.map(async (t) => [t, await rowsOn(from, t, acct.id)] as const)));

    const moved = await move(acct.id, to);
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toMatchObject({ account_id: acct.id, from_shard: from, to_shard: to });
    expect(moved.body.rounds).toBeGreaterThanOrEqual(1);
    // The proof: every table, its rows counted and hashed, as the source held them.
    expect(moved.body.tables.map((t: { table: string }) => t.table)).toEqual([...ACCOUNT_TABLES]);
    for (const proof of moved.body.tables) {
      expect(proof.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(proof.rows, proof.table).toBe(await rowsOn(to, proof.table, acct.id));
    }
    expect(moved.body.tables.find((t: { table: string }) => t.table === "subscriptions").rows).toBe(1);
    expect(moved.body.tables.find((t: { table: string }) => t.table === "webhook_deliveries").rows).toBe(before.webhook_deliveries);
    // The source keeps only pointers: the account row (moved_to) and its keys and tokens, paused.
    for (const table of ACCOUNT_TABLES) {
      expect(await rowsOn(from, table, acct.id), table).toBe(["accounts", "api_keys", "access_tokens"].includes(table) ? before[table] : 0);
    }
    expect(await envOf(from).DB.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(acct.id).first("moved_to")).toBe(to);
    expect(await envOf(from).DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND paused_at IS NULL").bind(acct.id).first("n")).toBe(0);
    expect(await envOf(to).DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND paused_at IS NOT NULL").bind(acct.id).first("n")).toBe(0);

    // The key and the token issued before the move name the old shard, and keep working.
    expect(acct.key.charAt(8)).toBe(String(from));
    const read = await call(`/api/users/${watched.id}`, { key: acct.key });
    expect(read.status, read.text).toBe(200);
    expect(read.body.name).toBe("Ada Moved");
    expect(read.headers.get("tender-shard")).toBe(String(to));
    expect((await call(`/subscriptions/${sub.id}`, { key: token })).status).toBe(200);
    const created = await call("/api/users", { key: acct.key, body: { name: "After", email: "after@example.com" } });
    expect(created.status, created.text).toBe(201);
    expect(await rowsOn(to, "users", acct.id)).toBe(3);
    expect(await rowsOn(from, "users", acct.id)).toBe(0);

    // The pending delivery is delivered from the new shard: its sweep finds it overdue.
    receiver.answer(200);
    await envOf(to).DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = 0, updated_at = 0 WHERE id = ?").bind(pending.results[0].id).run();
    expect(await sweepDeliveries(envOf(from))).toBe(0);
    expect(await sweepDeliveries(envOf(to))).toBeGreaterThanOrEqual(1);
    await waitFor(async () => expect(await envOf(to).DB.prepare("SELECT status FROM webhook_deliveries WHERE id = ?").bind(pending.results[0].id).first("status")).toBe("delivered"), 10_000, 50);

    // The payout's lost settlement is swept on the new shard, and settles there.
    expect(await sweepStalePayouts(envOf(from), Date.now() + PAYOUT_STALE_MS * 2)).toBe(0);
    expect(await sweepStalePayouts(envOf(to), Date.now() + PAYOUT_STALE_MS * 2)).toBe(1);
    await waitFor(async () => expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).not.toBe("pending"), 10_000, 50);

    // The next renewal charges once, on the new shard; the old one has nothing left to renew.
    await envOf(to).DB.prepare("UPDATE subscriptions SET due_at = 0 WHERE id = ?").bind(sub.id).run();
    expect(await renewChunk(envOf(from), [sub.id])).toEqual([]);
    expect(await renewChunk(envOf(to), [sub.id])).toEqual(["renewed"]);
    await renewChunk(envOf(to), [sub.id]);
    const payments = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data;
    expect(payments).toHaveLength(2);
    expect(payments.every((p: { status: string }) => p.status === "completed")).toBe(true);
  });

  it("a first charge whose answer outlasted the move is not recorded on the shard the account left (issue 33): 500 outcome_unknown, and its retry records it where the account lives", { timeout: 30_000 }, async () => {
    const acct = await signup("Charge outlasts move");
    const user = await createUser(acct, { email: "outlast@example.com" });
    const plan = await createPlan(acct);
    // The sandbox's answer to the charge is held (polled flags: the request runs as another request of workerd).
    const gate = { arrived: false, released: false };
    const charged: string[] = [];
    useProcessor((inner) => ({
      ...inner,
      chargeCard: async (args) => {
        const answer = await inner.chargeCard(args);
        charged.push(args.reference);
        if (charged.length === 1) {
          gate.arrived = true;
          while (!gate.released) await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return answer;
      },
    }));
    try {
      const key = "charge-outlasts-move";
      const body = { user_id: user.id, plan_id: plan.id, ...card("4242424242424242") };
      const creating = call("/subscriptions", { key: acct.key, body, idempotencyKey: key });
      await waitFor(() => expect(gate.arrived).toBe(true), 5000, 10);
      const moved = await move(acct.id, to);
      expect(moved.status, moved.text).toBe(200);
      gate.released = true;
      const first = await creating;
      expectError(first, 500, "api_error", "outcome_unknown");
      expect(await rowsOn(from, "subscriptions", acct.id)).toBe(0);
      expect(await rowsOn(to, "subscriptions", acct.id)).toBe(0);
      // The client's retry with its key, once the lock has run out: the same reference, recorded where the account lives.
      await envOf(to).DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - ? WHERE account_id = ? AND key = ?").bind(IDEMPOTENCY_LOCK_MS + 1000, acct.id, key).run();
      const retried = await call("/subscriptions", { key: acct.key, body, idempotencyKey: key });
      expect(retried.status, retried.text).toBe(201);
      expect(charged).toHaveLength(2);
      expect(new Set(charged).size).toBe(1);
      expect(await rowsOn(to, "subscriptions", acct.id)).toBe(1);
      expect(await rowsOn(to, "payments", acct.id)).toBe(1);
    } finally {
      gate.released = true;
      useProcessor();
    }
  });

  it("without an Idempotency-Key, a first charge whose answer outlasted the move never answers 201 for a subscription that exists nowhere (issue 33)", { timeout: 30_000 }, async () => {
    const acct = await signup("Unkeyed charge outlasts move");
    const user = await createUser(acct, { email: "unkeyed@example.com" });
    const plan = await createPlan(acct);
    const gate = { arrived: false, released: false };
    useProcessor((inner) => ({
      ...inner,
      chargeCard: async (args) => {
        const answer = await inner.chargeCard(args);
        gate.arrived = true;
        while (!gate.released) await new Promise((resolve) => setTimeout(resolve, 10));
        return answer;
      },
    }));
    try {
      const creating = call("/subscriptions", { key: acct.key, body: { user_id: user.id, plan_id: plan.id, ...card("4242424242424242") } });
      await waitFor(() => expect(gate.arrived).toBe(true), 5000, 10);
      expect((await move(acct.id, to)).status).toBe(200);
      gate.released = true;
      const first = await creating;
      expect(first.status, first.text).toBe(500);
      expect(first.text).not.toMatch(/stack|Error:/);
      expect(await rowsOn(to, "subscriptions", acct.id)).toBe(0);
    } finally {
      gate.released = true;
      useProcessor();
    }
  });

  it("answers 503 with Retry-After while the account's keys are paused, and writes nothing", async () => {
    const acct = await signup("Paused");
    const user = await createUser(acct, { email: "paused@example.com" });
    await envOf(from).DB.prepare("UPDATE api_keys SET paused_at = '2026-11-26T00:00:00.000Z' WHERE account_id = ?").bind(acct.id).run();
    // Cached or not, reads and writes answer the same: the cache's entry fails the query's own check.
    for (const attempt of [1, 2]) {
      const read = await call(`/api/users/${user.id}`, { key: acct.key });
      expectError(read, 503, "api_error", "account_moving");
      expect(read.headers.get("retry-after"), `attempt ${attempt}`).toBe("2");
      const write = await call("/api/users", { key: acct.key, body: { name: "During", email: "during@example.com" } });
      expectError(write, 503, "api_error", "account_moving");
    }
    expect(await rowsOn(from, "users", acct.id)).toBe(1);
    await envOf(from).DB.prepare("UPDATE api_keys SET paused_at = NULL WHERE account_id = ?").bind(acct.id).run();
    expect((await call(`/api/users/${user.id}`, { key: acct.key })).status).toBe(200);
  });

  it("finishes a move that stopped after its switch; answers 503 meanwhile; moves back; refuses what it cannot do", async () => {
    const acct: Account = await signup("Stopped");
    const user = await createUser(acct, { email: "stopped@example.com" });
    const first = await move(acct.id, to);
    expect(first.status, `first move: ${first.text}`).toBe(200);
    // As if the Worker died between the source's switch and the target's: the copy still points back, paused.
    await envOf(to).DB.batch([
      envOf(to).DB.prepare("UPDATE accounts SET moved_to = ? WHERE id = ?").bind(from, acct.id),
      envOf(to).DB.prepare("UPDATE api_keys SET paused_at = '2026-11-26T00:00:00.000Z' WHERE account_id = ?").bind(acct.id),
    ]);
    // A fresh credential lookup (a new key, never cached) finds the account paused.
    const fresh = (await envOf(to).DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ?").bind(acct.id).first("n")) as number;
    expect(fresh).toBe(2);
    expectError(await call(`/api/users/${user.id}`, { key: acct.key }), 503, "api_error", "account_moving");
    const again = await move(acct.id, to);
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ from_shard: from, to_shard: to, finished_only: true });
    const finished = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(finished.status, `after finishing: ${finished.text}`).toBe(200);

    // Back to where it came from: the source's pointer rows are replaced by the account again.
    const back = await move(acct.id, from);
    expect(back.status, back.text).toBe(200);
    expect(back.body).toMatchObject({ from_shard: to, to_shard: from });
    const home = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(home.status, `moved back: ${home.text}`).toBe(200);
    expect(home.headers.get("tender-shard")).toBe(String(from));

    expectError(await move(acct.id, 7), 400, "invalid_request_error", "shard_invalid");
    expectError(await call(`/api/accounts/${acct.id}/move`, { body: { to_shard: 1, drain_seconds: 301 } }), 400, "invalid_request_error");
    expectError(await move("acct_01jd2x4k5m6n7p8q9r0s1t2v3w", to), 404, "not_found_error", "resource_missing");
    expectError(await call(`/api/accounts/${acct.id}/move`, { body: { to_shard: "one" } }), 400, "invalid_request_error");
  });
});

describe("a move under D1 faults on the source shard", () => {
  const isSwitch = (op: D1Op) => op.kind === "batch" && op.sql.some((s) => /UPDATE accounts SET moved_to = \?/.test(s));
  const isPause = (op: D1Op) => op.kind === "batch" && op.sql.some((s) => /UPDATE api_keys SET paused_at = \? WHERE account_id = \? AND paused_at IS NULL/.test(s));
  const isCopyRead = (op: D1Op) => op.kind === "statement" && op.sql.some((s) => /^SELECT .* FROM "subscriptions" WHERE account_id = \?/.test(s));
  const moveWith = (db: D1Database, accountId: string) => fetchWith({ DB: db }, `/api/accounts/${accountId}/move`, { json: { to_shard: to, drain_seconds: 0 } });

  async function account(name: string) {
    const acct = await signup(name);
    const user = await createUser(acct, { email: `${name.toLowerCase()}@example.com` });
    const plan = await createPlan(acct);
    await subscribed(acct, user.id, plan.id);
    return { acct, user };
  }

  for (const [name, rule] of [
    ["the claim and pause fail", { kind: "fail_before_commit", on: "batch", when: isPause }],
    ["a read of the copy fails", { kind: "fail_before_commit", on: "statement", when: isCopyRead }],
  ] as const) {
    it(`${name}: the account stays where it was, unpaused and whole, with no copy left; the move again succeeds`, async () => {
      const { acct, user } = await account(`Fault${name.length}`);
      const before = Object.fromEntries(await Promise.all(ACCOUNT_TABLES.map(async (t) => [t, await rowsOn(from, t, acct.id)] as const)));
      const faulty = faultyD1(envOf(from).DB, [rule as D1FaultRule]);
      const failed = await moveWith(faulty, acct.id);
      expect(faulty.fired, name).toHaveLength(1);
      expectError(failed, 500, "api_error");
      for (const table of ACCOUNT_TABLES) {
        expect(await rowsOn(from, table, acct.id), `${name}: ${table} on the source`).toBe(before[table]);
        // At most pointers back to the source stay on the target: its account row, keys and tokens.
        if (!POINTER_TABLES.includes(table)) expect(await rowsOn(to, table, acct.id), `${name}: ${table} on the target`).toBe(0);
      }
      const left = await envOf(to).DB.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(acct.id).first<{ moved_to: number }>();
      if (left) expect(left.moved_to, `${name}: the target's row points back`).toBe(from);
      expect(await envOf(from).DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND paused_at IS NOT NULL").bind(acct.id).first("n")).toBe(0);
      const read = await call(`/api/users/${user.id}`, { key: acct.key });
      expect(read.status, read.text).toBe(200);
      expect(read.headers.get("tender-shard")).toBe(String(from));
      expect((await move(acct.id, to)).status).toBe(200);
      expect((await call(`/api/users/${user.id}`, { key: acct.key })).headers.get("tender-shard")).toBe(String(to));
    });
  }

  for (const fault of ["commit_then_throw", "fail_before_commit"] as const) {
    it(`the switch's answer is lost (${fault}): the account answers 503, unchanged, until the move is run again, which ends it`, async () => {
      const { acct, user } = await account(`Lost${fault.length}`);
      const faulty = faultyD1(envOf(from).DB, [{ kind: fault, on: "batch", when: isSwitch }]);
      const failed = await moveWith(faulty, acct.id);
      expect(faulty.fired).toHaveLength(1);
      expectError(failed, 500, "api_error");
      // Whether the switch committed is not known: the account stays paused, on one shard or the
      // other, and its copy stays on the target (pointing back), so nothing is lost either way.
      const committed = fault === "commit_then_throw";
      expect(await envOf(from).DB.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(acct.id).first("moved_to")).toBe(committed ? to : null);
      expect(await envOf(to).DB.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(acct.id).first("moved_to")).toBe(from);
      expect(await rowsOn(to, "subscriptions", acct.id)).toBe(1);
      // The source keeps its rows until the switch is known: the finish deletes them.
      expect(await rowsOn(from, "subscriptions", acct.id)).toBe(1);
      const paused = await call(`/api/users/${user.id}`, { key: acct.key });
      expectError(paused, 503, "api_error", "account_moving");
      const again = await move(acct.id, to);
      expect(again.status, again.text).toBe(200);
      expect(again.body.finished_only ?? false).toBe(committed);
      expect(await rowsOn(from, "subscriptions", acct.id)).toBe(0);
      const read = await call(`/api/users/${user.id}`, { key: acct.key });
      expect(read.status, read.text).toBe(200);
      expect(read.headers.get("tender-shard")).toBe(String(to));
    });
  }
});

describe("moves that meet each other, and what a move carries", () => {
  it("two moves of one account at once: the second answers 409 move_in_progress, the first completes, nothing is lost", async () => {
    const acct = await signup("Twice");
    const user = await createUser(acct, { email: "twice@example.com" });
    const first = move(acct.id, to, 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expectError(await move(acct.id, to), 409, "invalid_request_error", "move_in_progress");
    // Moving it where it is (the way to unpause an abandoned move) waits for the claim too.
    expectError(await move(acct.id, from), 409, "invalid_request_error", "move_in_progress");
    const done = await first;
    expect(done.status, done.text).toBe(200);
    const read = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(read.status).toBe(200);
    expect(read.headers.get("tender-shard")).toBe(String(to));
  });

  it("a move whose claim another move took meanwhile stops with 409 and leaves both shards to it; moving the account where it is unpauses it once that claim ends", async () => {
    const acct = await signup("Stolen");
    const user = await createUser(acct, { email: "stolen@example.com" });
    const first = move(acct.id, to, 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // As if this move's claim had run out and another move had taken it.
    await envOf(from).DB.prepare("UPDATE accounts SET move_token = 'another', move_until = ? WHERE id = ?").bind(Date.now() + 60_000, acct.id).run();
    expectError(await first, 409, "invalid_request_error", "move_in_progress");
    expect(await envOf(from).DB.prepare("SELECT move_token FROM accounts WHERE id = ?").bind(acct.id).first("move_token")).toBe("another");
    expectError(await call(`/api/users/${user.id}`, { key: acct.key }), 503, "api_error", "account_moving");
    // That other move died: once its claim has run out, moving the account where it is unpauses it.
    await envOf(from).DB.prepare("UPDATE accounts SET move_until = 0 WHERE id = ?").bind(acct.id).run();
    const back = await move(acct.id, from);
    expect(back.status, back.text).toBe(200);
    expect(back.body.finished_only).toBe(true);
    expect((await call(`/api/users/${user.id}`, { key: acct.key })).status).toBe(200);
  });

  it("back and forth: the keys issued before each move keep working, and a failed move back keeps the pointers", { timeout: 20_000 }, async () => {
    const acct = await signup("Shuttle");
    const user = await createUser(acct, { email: "shuttle@example.com" });
    for (const shard of [to, from, to]) {
      expect((await move(acct.id, shard)).status).toBe(200);
      const read = await call(`/api/users/${user.id}`, { key: acct.key });
      expect(read.status, read.text).toBe(200);
      expect(read.headers.get("tender-shard")).toBe(String(shard));
    }
    // Now on `to`, with pointers on `from`. A move back that fails on the target (`from`) mid-copy
    // leaves `from` holding pointers again, so the key naming `from` still finds the account.
    const faulty = faultyD1(envOf(from).DB, [{ kind: "fail_before_commit", on: "batch", when: (op) => op.sql.some((s) => /INSERT INTO "users"/.test(s)) }]);
    const failed = await fetchWith({ DB: faulty }, `/api/accounts/${acct.id}/move`, { json: { to_shard: from, drain_seconds: 0 } });
    expect(faulty.fired).toHaveLength(1);
    expectError(failed, 500, "api_error");
    expect(await rowsOn(from, "users", acct.id)).toBe(0);
    expect(await envOf(from).DB.prepare("SELECT moved_to FROM accounts WHERE id = ?").bind(acct.id).first("moved_to")).toBe(to);
    const read = await call(`/api/users/${user.id}`, { key: acct.key });
    expect(read.status, read.text).toBe(200);
    expect(read.headers.get("tender-shard")).toBe(String(to));
  });

  it("a payout already handed to the processor stays uncancelable on the new shard (its send marker moves with it)", async () => {
    const acct = await signup("Sent");
    const user = await createUser(acct, { email: "sent@example.com" });
    const payout = await payoutWithoutSettlement(acct, { recipient_id: user.id });
    // As the settlement does when it hands the payout to the processor (src/payments/settle-payout.ts).
    await envOf(from).DB.prepare("INSERT INTO job_runs (key, created_at, lease_until, expires_at) VALUES (?, ?, 0, ?)").bind(`payout_send:${payout.id}`, new Date().toISOString(), Date.now() + 86_400_000).run();
    expect((await move(acct.id, to)).status).toBe(200);
    expect(await envOf(to).DB.prepare("SELECT count(*) AS n FROM job_runs WHERE key = ?").bind(`payout_send:${payout.id}`).first("n")).toBe(1);
    const cancel = await call(`/payouts/${payout.id}/cancel`, { method: "POST", key: acct.key });
    expect(cancel.status, cancel.text).toBe(409);
    expect((await call(`/payouts/${payout.id}`, { key: acct.key })).body.status).toBe("pending");
  });

  it("a payout's settlement message handled on the shard its account left sends nothing there: the new shard sends it, with its marker", async () => {
    const acct = await signup("Left");
    const user = await createUser(acct, { email: "left@example.com" });
    const payout = await payoutWithoutSettlement(acct, { recipient_id: user.id });
    // The move's switch, as if the source's rows were still there (the delete after it had failed).
    await envOf(from).DB.prepare("UPDATE accounts SET moved_to = ? WHERE id = ?").bind(to, acct.id).run();
    expect(await settlePayout({ kind: "settlePayout", payoutId: payout.id }, envOf(from))).toBe("skipped");
    expect(await envOf(from).DB.prepare("SELECT count(*) AS n FROM job_runs WHERE key = ?").bind(`payout_send:${payout.id}`).first("n")).toBe(0);
    await envOf(from).DB.prepare("UPDATE accounts SET moved_to = NULL WHERE id = ?").bind(acct.id).run();
  });

  it("a run that would finish a switched move waits (409) while the move that switched still holds its claim", async () => {
    const acct = await signup("Midway");
    // Between the two halves of a switch: the source points at the target and still holds its claim; the copy points back.
    expect((await move(acct.id, to)).status).toBe(200);
    await envOf(to).DB.prepare("UPDATE accounts SET moved_to = ?, move_token = 'switching', move_until = ? WHERE id = ?").bind(from, Date.now() + 60_000, acct.id).run();
    await envOf(from).DB.prepare("UPDATE accounts SET moved_to = ?, move_token = 'switching', move_until = ? WHERE id = ?").bind(to, Date.now() + 60_000, acct.id).run();
    expectError(await move(acct.id, to), 409, "invalid_request_error", "move_in_progress");
    expectError(await move(acct.id, from), 409, "invalid_request_error", "move_in_progress");
    // Stripe's events wait too.
    expectError(await call(`/processor-webhooks/stripe/${acct.id}`, { body: { id: "evt_2", object: "event", type: "payout.paid" }, headers: { "stripe-signature": wellFormedSignature() } }), 503, "api_error", "account_moving");
    await envOf(from).DB.prepare("UPDATE accounts SET move_until = 0 WHERE id = ?").bind(acct.id).run();
    await envOf(to).DB.prepare("UPDATE accounts SET move_until = 0 WHERE id = ?").bind(acct.id).run();
    const finished = await move(acct.id, to);
    expect(finished.status, finished.text).toBe(200);
    expect(finished.body.finished_only).toBe(true);
  });

  it("Stripe's events for an account being moved answer 503, so Stripe sends them again later", async () => {
    const acct = await signup("Webhooked");
    await envOf(from).DB.prepare("UPDATE accounts SET move_token = 'held', move_until = ? WHERE id = ?").bind(Date.now() + 60_000, acct.id).run();
    const res = await call(`/processor-webhooks/stripe/${acct.id}`, { body: { id: "evt_1", object: "event", type: "payout.paid" }, headers: { "stripe-signature": wellFormedSignature() } });
    expectError(res, 503, "api_error", "account_moving");
    await envOf(from).DB.prepare("UPDATE accounts SET move_token = NULL, move_until = NULL WHERE id = ?").bind(acct.id).run();
    // Not moving: the usual answer for an account without a connection.
    expectError(await call(`/processor-webhooks/stripe/${acct.id}`, { body: { id: "evt_1", object: "event", type: "payout.paid" }, headers: { "stripe-signature": wellFormedSignature() } }), 400, "invalid_request_error", "no_processor_connection");
  });
});

/** A Stripe-Signature that could verify (current, well formed): the route then looks for the account. */
const wellFormedSignature = () => `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}`;

describe("a move of more rows than a page", () => {
  it("copies and proves 1,234 events and 1,234 request ids page by page (500 a page), then deletes them from the source", async () => {
    const acct = await signup("Large");
    const db = envOf(from).DB;
    // As if made over time: clones of a real row inserted straight into the source, more than two pages of each.
    const clone = async (table: string, id: string, count: number) => {
      const columns = (await db.prepare(`SELECT name FROM pragma_table_info('${table}')`).all<{ name: string }>()).results.map((c) => c.name);
      const value = (c: string) => (c === "id" ? "t.id || printf('%06d', n.i)" : c === "feed_position" || c === "sequence" ? `t.${c} + n.i` : `t.${c}`);
      await db
        .prepare(
          `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
           INSERT INTO ${table} (${columns.join(", ")}) SELECT ${columns.map(value).join(", ")} FROM ${table} AS t, n WHERE t.id = ?`,
        )
        .bind(id)
        .run();
    };
    await createUser(acct, { email: "large@example.com" });
    const event = (await db.prepare("SELECT id FROM events WHERE account_id = ?").bind(acct.id).first<{ id: string }>())!;
    await clone("events", event.id, 1233);
    const rid = (await call("/api/request-id", { key: acct.key, body: { purpose: "large" } })).body;
    expect(rid.id).toBeDefined();
    await clone("request_ids", rid.id, 1233);
    const before = { events: await rowsOn(from, "events", acct.id), request_ids: await rowsOn(from, "request_ids", acct.id) };
    expect(before.events).toBe(1234);
    expect(before.request_ids).toBe(1234);
    const moved = await move(acct.id, to);
    expect(moved.status, moved.text).toBe(200);
    const proof = (table: string) => moved.body.tables.find((t: { table: string }) => t.table === table);
    expect(proof("events").rows).toBe(before.events);
    expect(proof("request_ids").rows).toBe(1234);
    expect(await rowsOn(to, "events", acct.id)).toBe(before.events);
    expect(await rowsOn(to, "request_ids", acct.id)).toBe(1234);
    expect(await rowsOn(from, "events", acct.id)).toBe(0);
    expect(await rowsOn(from, "request_ids", acct.id)).toBe(0);
    // The same rows, byte for byte: the last page's last row is there, as it was.
    const last = `${event.id}001233`;
    expect(await envOf(to).DB.prepare("SELECT payload FROM events WHERE id = ?").bind(last).first("payload")).toBe(await envOf(to).DB.prepare("SELECT payload FROM events WHERE id = ?").bind(event.id).first("payload"));
    const page = await call("/api/events?limit=100", { key: acct.key });
    expect(page.status, page.text).toBe(200);
    expect(page.body.data).toHaveLength(100);
  }, 60_000);
});
