// The 7-day expiry of one-off authorizations pages past the payments it must skip (a capture or
// cancel of theirs at the processor, a live one whose connection is gone): a page of them at the
// front never keeps the ones behind from being canceled, run after run (found by the reviewer of
// incomplete subscriptions, whose expiry had the same pattern).
import { env } from "../support/env";
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { CARDS, cardFields } from "../support/cards";
import { EXPIRY_BATCH, expireAuthorizations, takePaymentStep } from "../../src/payments/intents";
import { createDb } from "../../src/db/client";

let acct: Account;
let customer: { id: string };

beforeAll(async () => {
  acct = await signup("Expiry pages");
  customer = await createUser(acct, { name: "Grace Hopper", email: "grace@example.com" });
});

async function authorized() {
  const res = await call("/payments", { key: acct.key, body: { amount: 1000, currency: "usd", user_id: customer.id, capture_method: "manual", ...cardFields(CARDS.visa) } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("requires_capture");
  return res.body as { id: string; capture_before: string };
}

const statusOf = async (id: string) => (await call(`/payments/${id}`, { key: acct.key })).body as { status: string; cancellation_reason: string | null };

describe("the authorization expiry run's pages", () => {
  it("a page of authorizations it must skip does not keep the one behind them from being canceled", async () => {
    const original = await authorized();
    const columns = (await env.DB.prepare("PRAGMA table_info(payments)").all<{ name: string }>()).results.map((c) => c.name);
    const copies = Array.from({ length: EXPIRY_BATCH - 1 }, (_, i) => `${original.id}c${i}`);
    await env.DB.batch(
      copies.map((id) =>
        env.DB.prepare(
          `INSERT INTO payments (${columns.join(", ")}) SELECT ${columns.map((c) => (c === "id" ? "?1" : c === "charge_reference" ? "charge_reference || ?1" : c)).join(", ")} FROM payments WHERE id = ?2`,
        ).bind(id, original.id),
      ),
    );
    const behind = await authorized();
    expect(Date.parse(behind.capture_before)).toBeGreaterThanOrEqual(Date.parse(original.capture_before));
    const due = Date.parse(behind.capture_before) + 60_000;
    // The first page's steps are held (a capture or cancel of each at the processor).
    const db = createDb(env.DB);
    for (const id of [original.id, ...copies]) expect(await takePaymentStep(db, id, due)).toBe(true);
    const run = await expireAuthorizations(env, due);
    expect(run).toEqual({ canceled: 1, skipped: EXPIRY_BATCH });
    expect(await statusOf(behind.id)).toMatchObject({ status: "canceled", cancellation_reason: "expired" });
    expect((await statusOf(original.id)).status).toBe("requires_capture");
  });
});
