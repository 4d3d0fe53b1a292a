// Review of the one-round-trip saved-card payment (test mode): its payer remembered in this
// isolate, the account paused for a move, then moved to another shard; the payment must answer as
// any write does (503 while paused, nothing written) and then be made on the new shard only.
import { describe, expect, it } from "vitest";
import { OTHER_SHARD, TEST_SHARD, envOf } from "../support/env";
import { createUser } from "../support/fixtures";
import { call, expectError, signup } from "../support/http";

const from = TEST_SHARD;
const to = OTHER_SHARD;
const paymentsOn = async (shard: number, accountId: string) =>
  Number((await envOf(shard).DB.prepare("SELECT count(*) AS n FROM payments WHERE account_id = ?").bind(accountId).first<{ n: number }>())!.n);

describe("a remembered payer across an account's move", () => {
  it("paused: 503 account_moving and nothing written; moved: the payment is made on the new shard only", { timeout: 30_000 }, async () => {
    const acct = await signup("Payer mover");
    const user = await createUser(acct, { email: "payer.mover@example.com" });
    const card = await call(`/api/users/${user.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    expect(card.status, card.text).toBe(201);
    const pay = (idempotencyKey: string) => call("/payments", { key: acct.key, idempotencyKey, body: { amount: 1500, currency: "usd", user_id: user.id, payment_method: card.body.id } });
    expect((await pay("before-move")).status).toBe(201);
    expect(await paymentsOn(from, acct.id)).toBe(1);

    await envOf(from).DB.prepare("UPDATE api_keys SET paused_at = '2026-11-26T00:00:00.000Z' WHERE account_id = ?").bind(acct.id).run();
    expectError(await pay("while-paused"), 503, "api_error", "account_moving");
    expect(await paymentsOn(from, acct.id)).toBe(1);
    await envOf(from).DB.prepare("UPDATE api_keys SET paused_at = NULL WHERE account_id = ?").bind(acct.id).run();

    const moved = await call(`/api/accounts/${acct.id}/move`, { body: { to_shard: to, drain_seconds: 0 } });
    expect(moved.status, moved.text).toBe(200);
    const after = await pay("after-move");
    expect(after.status, after.text).toBe(201);
    expect(after.headers.get("tender-shard")).toBe(String(to));
    expect(await paymentsOn(to, acct.id)).toBe(2);
    expect(await paymentsOn(from, acct.id)).toBe(0);
    // The key recorded on the new shard: a retry replays it there.
    const again = await pay("after-move");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(after.body.id);
    expect(await paymentsOn(to, acct.id)).toBe(2);
  });
});
