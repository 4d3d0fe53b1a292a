// POST /payout's one write batch, statement by statement: the caller's key and the recipient are
// checked by one guard statement (a statement fewer for D1 to run on every payout), and each
// failure still answers as its own check did: a revoked key 401, a recipient not of this account 404.
import { describe, expect, it } from "vitest";
import { call, expectError, fetchWith, signup } from "../support/http";
import { createUser, warm } from "../support/fixtures";
import { faultyD1 } from "../support/faults";
import { CARDS } from "../support/cards";
import { env } from "../support/env";

const payout = (recipient: string) => ({ recipient_id: recipient, amount: 1000, currency: "usd", payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2031, cvv: "123" });

describe("POST /payout's write batch", () => {
  it("checks the key and the recipient in one guard statement: six statements in its one round trip", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    await warm(acct.key);
    const DB = faultyD1(env.DB);
    const res = await fetchWith({ DB }, "/payout", { key: acct.key, json: payout(user.id), headers: { "idempotency-key": "payout-batch-1" } });
    expect(res.status, res.text).toBe(201);
    expect(DB.ops).toHaveLength(1);
    const [batch] = DB.ops;
    expect(batch.kind).toBe("batch");
    const guards = batch.sql.filter((s) => /^\s*INSERT INTO batch_guards/i.test(s));
    // The key with the recipient, then the idempotency record's holder.
    expect(guards).toHaveLength(2);
    expect(batch.sql).toHaveLength(6);
    // Its event's statement holds the branch of the one data source it reads (the data as JSON),
    // not every registered source's (about 14,000 characters sent and parsed with every write).
    const events = batch.sql.filter((s) => /^\s*INSERT INTO "events"/i.test(s));
    expect(events).toHaveLength(1);
    expect(events[0].length).toBeLessThan(3000);
    const event = await env.DB.prepare("SELECT payload FROM events WHERE object_id = ?").bind(res.body.id).first<{ payload: string }>();
    expect(JSON.parse(event!.payload)).toMatchObject({ type: "payout.created", object_id: res.body.id, sequence: 1, livemode: false, data: res.body });
  });

  it("a recipient of another account answers 404 recipient_id; a revoked key answers 401, before the recipient is looked at", async () => {
    const acct = await signup();
    const other = await createUser(await signup("Other"));
    const mine = await createUser(acct);
    await warm(acct.key);
    const foreign = await call("/payout", { key: acct.key, body: payout(other.id), idempotencyKey: "payout-batch-foreign" });
    expectError(foreign, 404, "not_found_error", "resource_missing");
    expect(foreign.body.error.param).toBe("recipient_id");
    // Revoked in the database only: this isolate's credential cache still holds the key, so the batch's guard is what refuses it.
    await env.DB.prepare("UPDATE api_keys SET revoked_at = ? WHERE account_id = ?").bind(new Date().toISOString(), acct.id).run();
    for (const recipient of [mine.id, other.id]) {
      const revoked = await call("/payout", { key: acct.key, body: payout(recipient), idempotencyKey: `payout-batch-revoked-${recipient}` });
      expect(revoked.status, revoked.text).toBe(401);
    }
    const written = await env.DB.prepare("SELECT COUNT(*) AS n FROM payouts WHERE account_id = ?").bind(acct.id).first<{ n: number }>();
    expect(written?.n).toBe(0);
  });
});
