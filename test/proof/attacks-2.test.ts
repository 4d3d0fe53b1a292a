// Second-round attacks on the review fixes: money-record retries, first-charge references with
// the key's `since`, PUT cancel_at_period_end under a charge, and processor calls made again.
import { env } from "../support/env";
import { afterEach, describe, expect, it } from "vitest";
import { renewChunk } from "../../src/billing/renewals";
import { useProcessor } from "../../src/processor";
import { useClock } from "../../src/lib/clock";
import { expireRecords } from "../../src/jobs/expiry";
import { type Account, call, fetchWith, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { cardFields, CARDS } from "../support/cards";
import { makeDue } from "../support/clock";
import { countRows } from "../support/db";
import { faultyD1, ledgerProcessor, type Ledger, writesTo } from "../support/faults";

afterEach(() => {
  useProcessor();
  useClock();
});

const record = (accountId: string, key: string) =>
  env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?").bind(accountId, key).first<Record<string, any>>();
const ageLock = (accountId: string, key: string) =>
  env.DB.prepare("UPDATE idempotency_keys SET locked_at = locked_at - 120000 WHERE account_id = ? AND key = ?").bind(accountId, key).run();

/** References at which the ledger moved money but no payment row records the charge. */
async function unrecorded(ledger: Ledger, accountId: string) {
  const rows = await env.DB.prepare("SELECT charge_reference FROM payments WHERE account_id = ?").bind(accountId).all<{ charge_reference: string }>();
  const recorded = new Set(rows.results.map((r) => r.charge_reference));
  return ledger.moneyMoved(["chargeCard", "chargeToken"]).map((c) => c.reference).filter((r) => !recorded.has(r));
}

async function setup() {
  const acct = await signup();
  const user = await createUser(acct);
  const plan = await createPlan(acct);
  return { acct, user, plan };
}

async function pastDue(acct: Account, userId: string, planId: string) {
  const sub = await subscribed(acct, userId, planId, CARDS.declineAfterFirst);
  await makeDue(sub.id);
  expect(await renewChunk(env, [sub.id])).toEqual(["past_due"]);
  return sub;
}

describe("first charge: a processor that times out after success on every call", () => {
  it("500 outcome_unknown, key kept (409), then the retry after the lock records the one charge", async () => {
    const { acct, user, plan } = await setup();
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: "chargeCard" }]);
    ledger.install();
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const first = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "to-1" });
    expect(first.status, first.text).toBe(500);
    expect(first.body.error.code).toBe("outcome_unknown");
    expect(ledger.calls.filter((c) => c.method === "chargeCard")).toHaveLength(3);
    expect((await record(acct.id, "to-1"))?.status).toBe("in_flight");
    expect((await call("/subscriptions", { key: acct.key, body, idempotencyKey: "to-1" })).status).toBe(409);
    ledger.inject();
    await ageLock(acct.id, "to-1");
    const retry = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "to-1" });
    expect(retry.status, retry.text).toBe(201);
    expect(ledger.moneyMoved("chargeCard")).toHaveLength(1);
    expect(await unrecorded(ledger, acct.id)).toEqual([]);
    expect((await call(`/subscriptions/${retry.body.id}`, { key: acct.key })).status).toBe(200);
  });

  it("an unknown first charge keeps its key past 24 hours: the same request, retried later, charges the same reference and records it once", async () => {
    const { acct, user, plan } = await setup();
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: "chargeCard" }]);
    ledger.install();
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const first = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "to-exp" });
    expect(first.status).toBe(500);
    ledger.inject();
    // 24 h later: the cron keeps the record of a still-unknown outcome, and its claim is stale.
    await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ?, locked_at = locked_at - 120000 WHERE account_id = ? AND key = ?").bind(Date.now() - 1, acct.id, "to-exp").run();
    await expireRecords(env, Date.now());
    expect(await countRows("idempotency_keys", "account_id = ? AND key = 'to-exp'", acct.id)).toBe(1);
    const retry = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "to-exp" });
    expect(retry.status, retry.text).toBe(201);
    const moved = ledger.moneyMoved("chargeCard");
    expect(await unrecorded(ledger, acct.id), `moved ${moved.length}x: ${moved.map((c) => c.reference).join(" | ")}`).toEqual([]);
  });
});

describe("first charge: record retries and duplicates", () => {
  it("processor throws once, commit lost on try 0 and try 1: 201 for a subscription that exists, one payment", async () => {
    const { acct, user, plan } = await setup();
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: "chargeCard", nth: 0, times: 1 }]);
    ledger.install();
    const db = faultyD1(env.DB, [
      { kind: "fail_before_commit", when: (op) => writesTo(op, "payments"), nth: 0, times: 1 },
      { kind: "commit_then_throw", when: (op) => writesTo(op, "payments"), nth: 1, times: 1 },
    ]);
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const res = await fetchWith({ DB: db }, "/subscriptions", { key: acct.key, json: body, headers: { "idempotency-key": "rr-1" } });
    expect(res.status, res.text).toBe(201);
    expect((await call(`/subscriptions/${res.body.id}`, { key: acct.key })).status).toBe(200);
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(1);
    expect(ledger.moneyMoved("chargeCard")).toHaveLength(1);
    const replay = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "rr-1" });
    expect(replay.status).toBe(201);
    expect(replay.body.id).toBe(res.body.id);
  });

  it("every record try fails before commit: 500 unknown, key kept; the retry after the lock records once", async () => {
    const { acct, user, plan } = await setup();
    const ledger = ledgerProcessor();
    ledger.install();
    const db = faultyD1(env.DB, { kind: "fail_before_commit", when: (op) => writesTo(op, "payments"), times: 3 });
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const res = await fetchWith({ DB: db }, "/subscriptions", { key: acct.key, json: body, headers: { "idempotency-key": "rr-2" } });
    expect(res.status, res.text).toBe(500);
    expect((await record(acct.id, "rr-2"))?.status).toBe("in_flight");
    await ageLock(acct.id, "rr-2");
    const retry = await call("/subscriptions", { key: acct.key, body, idempotencyKey: "rr-2" });
    expect(retry.status, retry.text).toBe(201);
    expect(ledger.moneyMoved("chargeCard")).toHaveLength(1);
    expect(await countRows("payments", "account_id = ?", acct.id)).toBe(1);
  });

  it("two identical requests with one key at once: one subscription, one charge", async () => {
    const { acct, user, plan } = await setup();
    const ledger = ledgerProcessor([{ kind: "slow", ms: 50 }]);
    ledger.install();
    const body = { user_id: user.id, plan_id: plan.id, ...cardFields(CARDS.visa) };
    const results = await Promise.all([1, 2].map(() => call("/subscriptions", { key: acct.key, body, idempotencyKey: "dup-1" })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(await countRows("subscriptions", "account_id = ?", acct.id)).toBe(1);
    expect(ledger.moneyMoved("chargeCard")).toHaveLength(1);
  });
});

describe("renewals through charge(): a processor that throws, then succeeds", () => {
  it("a connection error before the charge, then success: renewed, one charge, recorded", async () => {
    const { acct, user, plan } = await setup();
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const ledger = ledgerProcessor();
    let first = true;
    useProcessor((sandbox) => {
      const inner = ledger.wrap(sandbox);
      return {
        ...inner,
        chargeToken: async (args) => {
          if (first) {
            first = false;
            throw new Error("connection reset");
          }
          return inner.chargeToken(args);
        },
      };
    });
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    expect(ledger.moneyMoved("chargeToken")).toHaveLength(1);
    expect(await unrecorded(ledger, acct.id)).toEqual([]);
  });

  it("a timeout after success, then the retry's replay: renewed once, recorded once", async () => {
    const { acct, user, plan } = await setup();
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: "chargeToken", nth: 0, times: 1 }]);
    ledger.install();
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    expect(ledger.calls.filter((c) => c.method === "chargeToken")).toHaveLength(2);
    expect(ledger.moneyMoved("chargeToken")).toHaveLength(1);
    expect(await countRows("payments", "subscription_id = ? AND status = 'completed'", sub.id)).toBe(2);
    expect(await renewChunk(env, [sub.id])).toEqual(["skipped"]);
  });
});

describe("renewal whose charge stays unknown, then cancel_at_period_end", () => {
  async function unknownRenewal() {
    const { acct, user, plan } = await setup();
    const sub = await subscribed(acct, user.id, plan.id);
    await makeDue(sub.id);
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: "chargeToken" }]);
    ledger.install();
    await expect(renewChunk(env, [sub.id])).rejects.toThrow();
    expect(ledger.moneyMoved("chargeToken")).toHaveLength(1);
    ledger.inject();
    return { acct, sub, ledger };
  }
  const ageClaim = (subId: string) =>
    env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ? AND status = 'open'").bind(new Date(Date.now() - 11 * 60_000).toISOString(), subId).run();

  it("PUT cancel_at_period_end=true is refused while the claim is young", async () => {
    const { acct, sub } = await unknownRenewal();
    const res = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: true } });
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.code).toBe("charge_in_progress");
  });

  it("without a cancel, the takeover after CLAIM_STALE_MS records the charge", async () => {
    const { acct, sub, ledger } = await unknownRenewal();
    await ageClaim(sub.id);
    expect(await renewChunk(env, [sub.id])).toEqual(["renewed"]);
    expect(await unrecorded(ledger, acct.id)).toEqual([]);
  });

  it("after CLAIM_STALE_MS the PUT passes, the run cancels, and the moved charge is never recorded", async () => {
    const { acct, sub, ledger } = await unknownRenewal();
    await ageClaim(sub.id);
    const put = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { cancel_at_period_end: true } });
    const outcome = await renewChunk(env, [sub.id]);
    expect(await unrecorded(ledger, acct.id), `PUT ${put.status}; renewal run ${JSON.stringify(outcome)}`).toEqual([]);
  });
});

describe("past-due card update whose charge stays unknown", () => {
  it("the same request retried after the lock gets 409 subscription_changed and frees the key; the charge stays unrecorded", async () => {
    const { acct, user, plan } = await setup();
    const sub = await pastDue(acct, user.id, plan.id);
    // The card update charges the new card once vaulted (chargeToken), under the period's reference.
    const ledger = ledgerProcessor([{ kind: "timeout_after_success", method: ["chargeCard", "chargeToken"] }]);
    ledger.install();
    const body = cardFields(CARDS.visa);
    const first = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body, idempotencyKey: "pd-unknown" });
    expect(first.status, first.text).toBe(500);
    expect(first.body.error.code).toBe("outcome_unknown");
    ledger.inject();
    await ageLock(acct.id, "pd-unknown");
    const retry = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body, idempotencyKey: "pd-unknown" });
    const missing = await unrecorded(ledger, acct.id);
    const kept = await record(acct.id, "pd-unknown");
    expect(
      missing.length === 0 || kept !== null,
      `retry answered ${retry.status} ${retry.body?.error?.code}; key record ${JSON.stringify(kept)}; unrecorded charges ${missing.join(", ")}`,
    ).toBe(true);
  });
});
