// A payment's row is written into the indexes it is found by, and no others: a one-off payment that
// completes writes no entry into the subscription index, nor into the two the cron reads (the
// authorizations to expire, the 3-D Secure payments to cancel as abandoned), which are partial
// (src/db/schema.ts). The cron's queries, as src/payments/intents.ts builds them, still use those
// indexes: EXPLAIN QUERY PLAN of each.
import { and, desc, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { env } from "../support/env";
import { call, d1Usage, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { createDb } from "../../src/db/client";
import { payments } from "../../src/db/schema";
import { abandonedAuthentications, duePage, lapsedAuthorizations } from "../../src/payments/intents";

const written = (res: { headers: Headers }) => d1Usage(res, "rows-written");

describe("the payments' indexes", () => {
  it("a completed one-off payment writes two index entries more than a payout (four and two), not four", async () => {
    const acct = await signup("Indexes");
    const ada = await createUser(acct, { name: "Ada", email: "ada@example.com" });
    const card = await call(`/api/users/${ada.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    expect(card.status, card.text).toBe(201);
    const pay = (n: number) =>
      call("/payments", { key: acct.key, idempotencyKey: `ix-pay-${n}`, body: { user_id: ada.id, amount: 1000, currency: "usd", payment_method: card.body.id } });
    const payout = (n: number) =>
      call("/payout", {
        key: acct.key,
        idempotencyKey: `ix-payout-${n}`,
        body: { recipient_id: ada.id, amount: 1000, currency: "usd", payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2031, cvv: "123" },
      });
    // Warm: the first of each reads its payer or prepares its statements.
    expect((await pay(0)).status).toBe(201);
    expect((await payout(0)).status).toBe(201);
    const [payment, sent] = [await pay(1), await payout(1)];
    expect(payment.status, payment.text).toBe(201);
    expect(payment.body.status).toBe("completed");
    expect(sent.status, sent.text).toBe(201);
    // Rows written count index entries. Each request writes its row, its Idempotency-Key's record
    // and its event alike; the payment's row has 4 index entries (charge reference, account, user,
    // processor reference), the payout's 2 (account, status). With every index full it was 4 more.
    expect(written(payment) - written(sent)).toBe(2);
  });

  it("the cron's two queries read the partial indexes, first page and after a cursor", async () => {
    const db = createDb(env.DB);
    const planOf = async (query: { toSQL(): { sql: string; params: unknown[] } }) => {
      const { sql, params } = query.toSQL();
      const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>();
      return rows.results.map((r) => r.detail).join(" | ");
    };
    const now = Date.parse("2026-11-27T12:00:00Z");
    const after = { at: "2026-11-20T12:00:00.000Z", id: "pay_01m8000000000000000000000" };
    for (const cursor of [null, after]) {
      expect(await planOf(duePage(db, lapsedAuthorizations(now), payments.captureBefore, cursor))).toMatch(/SEARCH payments USING INDEX payments_capture_due \(\(?capture_before/);
      expect(await planOf(duePage(db, abandonedAuthentications(now), payments.createdAt, cursor))).toMatch(/SEARCH payments USING INDEX payments_action_waiting \(\(?created_at/);
    }
    // Listing a subscription's payments still finds them through its (partial) index.
    const listed = db
      .select()
      .from(payments)
      .where(and(eq(payments.accountId, "acct_x"), eq(payments.livemode, false), eq(payments.subscriptionId, "sub_x")))
      .orderBy(desc(payments.id))
      .limit(11);
    expect(await planOf(listed)).toMatch(/SEARCH payments USING INDEX payments_subscription/);
  });
});
