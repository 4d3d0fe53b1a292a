// Issue 34's incomplete subscriptions attacked by a reviewer who did not write them: Complete
// racing the 23-hour expiry and a DELETE, Complete after the expiry, the create retried with its
// Idempotency-Key while incomplete, and the cron's renewal and stale-claim runs meeting an
// incomplete subscription whose first period is long claimed. What must hold whatever the
// interleaving: one outcome each (active with its invoice paid and subscription_created once, or
// ended with its invoice void and no subscription_created), and one charge of the first period.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exports } from "cloudflare:workers";
import { type Account, call, signup } from "../support/http";
import { createPlan, createUser } from "../support/fixtures";
import { cardFields } from "../support/cards";
import { countOf, notificationsOf, one } from "../support/db";
import { runCron } from "../support/queue";
import { advance, createClock } from "../support/clock";
import { INCOMPLETE_EXPIRY_BATCH, INCOMPLETE_LIFETIME_MS, expireIncompleteSubscriptions } from "../../src/billing/incomplete";
import { isoTime, useClock } from "../../src/lib/clock";
import { takePaymentStep } from "../../src/payments/intents";
import { createDb } from "../../src/db/client";

const AUTH_CARD = "4000002760003184";

let acct: Account & { liveKey: string };
let customer: { id: string; email: string };
let plan: Record<string, any>;

beforeAll(async () => {
  acct = await signup("Race Shop");
  customer = await createUser(acct, { name: "Grace Hopper", email: "grace@example.com" });
  plan = await createPlan(acct, { price: 12.5, currency: "usd", interval: "month" });
});
afterAll(() => useClock());

interface Incomplete {
  id: string;
  status: string;
  latest_payment: { id: string; status: string; next_action: { type: string; url: string } };
}

const createBody = () => ({ user_id: customer.id, plan_id: plan.id, return_url: "https://shop.example.com/done", ...cardFields(AUTH_CARD) });

async function incomplete(): Promise<Incomplete> {
  const res = await call("/subscriptions", { key: acct.key, body: createBody() });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("incomplete");
  return res.body as Incomplete;
}

async function press(url: string, button: "complete" | "fail") {
  const res = await exports.default.fetch(`${url}/${button}`, { method: "POST", redirect: "manual" });
  await res.text();
  return res.status;
}

const createdAt = async (id: string) => Date.parse((await one<{ created_at: string }>("SELECT created_at FROM subscriptions WHERE id = ?", id)).created_at);

/** The one outcome a subscription may have reached, checked across its payment, invoice, period and events. */
async function oneOutcome(sub: Incomplete, ended: "incomplete_expired" | "canceled") {
  const status = (await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status as string;
  const payment = await one<{ status: string }>("SELECT status FROM payments WHERE id = ?", sub.latest_payment.id);
  const invoice = await one<{ status: string }>("SELECT status FROM invoices WHERE subscription_id = ?", sub.id);
  const period = await one<{ status: string }>("SELECT status FROM subscription_periods WHERE subscription_id = ? AND period_index = 0", sub.id);
  const notifications = await notificationsOf(acct.id, sub.id);
  if (status === "active") {
    expect({ payment: payment.status, invoice: invoice.status, period: period.status, notifications }).toEqual({
      payment: "completed",
      invoice: "paid",
      period: "paid",
      notifications: ["subscription_created:active"],
    });
  } else {
    expect(status).toBe(ended);
    expect({ payment: payment.status, invoice: invoice.status, period: period.status, notifications }).toEqual({
      payment: "canceled",
      invoice: "void",
      period: "void",
      notifications: [ended === "canceled" ? "subscription_canceled:canceled" : "subscription_updated:incomplete_expired"],
    });
  }
  expect(await countOf("SELECT COUNT(*) AS n FROM payments WHERE subscription_id = ?", sub.id)).toBe(1);
  return status;
}

describe("Complete racing the end of an incomplete subscription", () => {
  it("Complete and the 23-hour expiry at the same moment: one outcome, never both", async () => {
    for (let round = 0; round < 3; round++) {
      const sub = await incomplete();
      const due = (await createdAt(sub.id)) + INCOMPLETE_LIFETIME_MS;
      const complete = () => press(sub.latest_payment.next_action.url, "complete");
      const expire = () => expireIncompleteSubscriptions(env, due);
      // Each started first in turn.
      await (round % 2 === 0 ? Promise.all([complete(), expire()]) : Promise.all([expire(), complete()]));
      await oneOutcome(sub, "incomplete_expired");
    }
  });

  it("Complete and DELETE at the same moment: one outcome; a DELETE that lost to Complete cancels the active subscription as any, or answers 409", async () => {
    for (let round = 0; round < 2; round++) {
      const sub = await incomplete();
      const complete = () => press(sub.latest_payment.next_action.url, "complete");
      const remove = () => call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" });
      const deleted = round === 0 ? (await Promise.all([complete(), remove()]))[1] : (await Promise.all([remove(), complete()]))[0];
      const payment = await one<{ status: string }>("SELECT status FROM payments WHERE id = ?", sub.latest_payment.id);
      if (payment.status === "completed") {
        // Complete won: activated once; the DELETE then canceled it as an active one (200) or asked for a retry (409).
        expect((await one<{ status: string }>("SELECT status FROM invoices WHERE subscription_id = ?", sub.id)).status).toBe("paid");
        const notifications = await notificationsOf(acct.id, sub.id);
        expect(notifications[0]).toBe("subscription_created:active");
        expect(notifications.filter((n) => n.startsWith("subscription_created"))).toHaveLength(1);
        if (deleted.status === 200) expect(notifications).toEqual(["subscription_created:active", "subscription_canceled:canceled"]);
        else expect(deleted.status, deleted.text).toBe(409);
        expect(await countOf("SELECT COUNT(*) AS n FROM payments WHERE subscription_id = ?", sub.id)).toBe(1);
      } else {
        expect(deleted.status, deleted.text).toBe(200);
        expect(await oneOutcome(sub, "canceled")).toBe("canceled");
      }
    }
  });

  it("Complete after the expiry records nothing: still incomplete_expired, no subscription_created, the invoice void", async () => {
    const sub = await incomplete();
    await expireIncompleteSubscriptions(env, (await createdAt(sub.id)) + INCOMPLETE_LIFETIME_MS);
    await press(sub.latest_payment.next_action.url, "complete");
    expect(await oneOutcome(sub, "incomplete_expired")).toBe("incomplete_expired");
  });
});

describe("the create retried while incomplete", () => {
  it("with the same Idempotency-Key (after and during the first): the first answer replayed, one subscription, one payment", async () => {
    const before = await countOf("SELECT COUNT(*) AS n FROM subscriptions WHERE account_id = ?", acct.id);
    const first = await call("/subscriptions", { key: acct.key, body: createBody(), idempotencyKey: "incomplete-create-1" });
    expect(first.status, first.text).toBe(201);
    const again = await call("/subscriptions", { key: acct.key, body: createBody(), idempotencyKey: "incomplete-create-1" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    // Two at once under another key: one creates, the other is refused (409 in flight) or replays it.
    const [a, b] = await Promise.all([
      call("/subscriptions", { key: acct.key, body: createBody(), idempotencyKey: "incomplete-create-2" }),
      call("/subscriptions", { key: acct.key, body: createBody(), idempotencyKey: "incomplete-create-2" }),
    ]);
    const created = [a, b].filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const r of [a, b]) expect([201, 409]).toContain(r.status);
    expect(new Set(created.map((r) => r.body.id)).size).toBe(1);
    expect(await countOf("SELECT COUNT(*) AS n FROM subscriptions WHERE account_id = ?", acct.id)).toBe(before + 2);
    for (const id of [first.body.id, created[0].body.id]) expect(await countOf("SELECT COUNT(*) AS n FROM payments WHERE subscription_id = ?", id)).toBe(1);
    // Completed, the replay still answers the create as it was (Stripe's replay too), and charges nothing.
    expect(await press(first.body.latest_payment.next_action.url, "complete")).toBe(303);
    const late = await call("/subscriptions", { key: acct.key, body: createBody(), idempotencyKey: "incomplete-create-1" });
    expect(late.body).toEqual(first.body);
    expect(await countOf("SELECT COUNT(*) AS n FROM payments WHERE subscription_id = ?", first.body.id)).toBe(1);
    expect(await notificationsOf(acct.id, first.body.id)).toEqual(["subscription_created:active"]);
  });
});

describe("the cron meeting an incomplete subscription", () => {
  it("renewals and the stale-claim sweep never charge it, however old its open first period; only the expiry ends it", async () => {
    const sub = await incomplete();
    // Its open period 0 looks like a claim whose lease ran out, and its next billing date has passed.
    const old = isoTime(Date.now() - 40 * 24 * 60 * 60 * 1000);
    await env.DB.prepare("UPDATE subscription_periods SET updated_at = ? WHERE subscription_id = ?").bind(old, sub.id).run();
    await env.DB.prepare("UPDATE subscriptions SET next_billing_date = ? WHERE id = ?").bind(old, sub.id).run();
    await runCron(Date.now() + 15 * 60_000);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete");
    expect(await countOf("SELECT COUNT(*) AS n FROM payments WHERE subscription_id = ?", sub.id)).toBe(1);
    expect((await one<{ attempts: number }>("SELECT attempts FROM subscription_periods WHERE subscription_id = ? AND period_index = 0", sub.id)).attempts).toBe(1);
    // 23 hours on, the whole cron (renewals, sweeps and the expiry together) ends it once.
    await runCron((await createdAt(sub.id)) + INCOMPLETE_LIFETIME_MS + 60_000);
    await runCron((await createdAt(sub.id)) + INCOMPLETE_LIFETIME_MS + 120_000);
    expect(await oneOutcome(sub, "incomplete_expired")).toBe("incomplete_expired");
  });
});

describe("an incomplete subscription on a test clock", () => {
  it("expires when its clock passes 23 hours from its start (as Stripe's test clocks do), not before, and not by the wall clock", async () => {
    const clock = await createClock(acct, "2027-03-01T10:00:00.000Z");
    const clocked = await createUser(acct, { name: "Clocked Payer", email: "clocked@example.com", testClock: clock.id });
    const res = await call("/subscriptions", { key: acct.key, body: { ...createBody(), user_id: clocked.id } });
    expect(res.status, res.text).toBe(201);
    const sub = res.body as Incomplete;
    expect(sub.status).toBe("incomplete");
    // 22 hours on the clock (and the wall clock a day on): still waiting for its payer.
    await advance(acct, clock.id, "2027-03-02T08:00:00.000Z");
    await expireIncompleteSubscriptions(env, Date.now() + 24 * 60 * 60 * 1000);
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.status).toBe("incomplete");
    // 23 hours on the clock: the cron's next run expires it.
    await advance(acct, clock.id, "2027-03-02T09:00:00.000Z");
    await expireIncompleteSubscriptions(env, Date.now());
    expect(await oneOutcome(sub, "incomplete_expired")).toBe("incomplete_expired");
  });
});

describe("the expiry run's page", () => {
  it("subscriptions it must skip (their payment held elsewhere, or a live one it cannot cancel) do not keep the ones behind them from expiring", async () => {
    // A page's worth (INCOMPLETE_EXPIRY_BATCH) of older incomplete subscriptions the run must skip:
    // one made through the API and its copies, each payment's step held by another worker (a
    // capture or cancel at the processor), as a live account whose connection is gone, or whose
    // intent Stripe will not cancel, holds them for good.
    const original = await incomplete();
    const columns = async (table: string) => (await env.DB.prepare(`PRAGMA table_info(${table})`).all<{ name: string }>()).results.map((c) => c.name);
    const subColumns = await columns("subscriptions");
    const payColumns = await columns("payments");
    const copies = Array.from({ length: INCOMPLETE_EXPIRY_BATCH - 1 }, (_, i) => ({ sub: `${original.id}c${i}`, payment: `${original.latest_payment.id}c${i}` }));
    await env.DB.batch(
      copies.flatMap((copy) => [
        env.DB.prepare(`INSERT INTO subscriptions (${subColumns.join(", ")}) SELECT ${subColumns.map((c) => (c === "id" ? "?1" : c)).join(", ")} FROM subscriptions WHERE id = ?2`).bind(copy.sub, original.id),
        env.DB.prepare(
          `INSERT INTO payments (${payColumns.join(", ")}) SELECT ${payColumns.map((c) => (c === "id" ? "?1" : c === "subscription_id" ? "?2" : c === "charge_reference" ? "charge_reference || ?1" : c)).join(", ")} FROM payments WHERE id = ?3`,
        ).bind(copy.payment, copy.sub, original.latest_payment.id),
      ]),
    );
    const behind = await incomplete();
    // The run, a minute past everyone's 23 hours; the steps held at that moment.
    const due = (await createdAt(behind.id)) + INCOMPLETE_LIFETIME_MS + 60_000;
    const db = createDb(env.DB);
    for (const payment of [original.latest_payment.id, ...copies.map((c) => c.payment)]) expect(await takePaymentStep(db, payment, due)).toBe(true);
    const run = await expireIncompleteSubscriptions(env, due);
    expect(run).toEqual({ expired: 1, skipped: INCOMPLETE_EXPIRY_BATCH });
    expect(await oneOutcome(behind, "incomplete_expired")).toBe("incomplete_expired");
    expect((await call(`/subscriptions/${original.id}`, { key: acct.key })).body.status).toBe("incomplete");
  });
});
