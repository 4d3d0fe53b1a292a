// Sub-cent unit prices (issue 21): unit_amount_decimal on fixed plans and on tiers, exact decimal
// arithmetic of the minor unit, one rounding per line (half away from zero), and the invoice's
// line showing the exact unit price. Every refusal is a 400 naming its parameter, writing nothing.
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createUser, subscribed, subscribe } from "../support/fixtures";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";
import { countOf } from "../support/db";

async function plan(acct: Account, body: Record<string, unknown>) {
  const res = await call("/subscription-plans", { key: acct.key, body: { name: "Metered-ish", currency: "usd", interval: "month", ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

async function firstInvoice(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}`, { key: acct.key });
  expect(res.status).toBe(200);
  return res.body.data.at(-1) as Record<string, any>;
}

describe("a fixed plan at 0.35 cent per unit", () => {
  it("is kept exactly, charges 1,000 units 3.50 at once and at renewal, and its invoice line shows the exact unit price", async () => {
    const acct = await signup("Sub-cent");
    const priced = await plan(acct, { unit_amount_decimal: "0.350" });
    expect(priced).toMatchObject({ pricing_model: "fixed", price: null, unit_amount: null, unit_amount_decimal: "0.35" });
    expect((await call(`/subscription-plans/${priced.id}`, { key: acct.key })).body.unit_amount_decimal).toBe("0.35");

    const user = await createUser(acct, { name: "Sue Cent", email: "sue@example.com" });
    const sub = await subscribed(acct, user.id, priced.id, undefined, { quantity: 1000 });
    const invoice = await firstInvoice(acct, sub.id);
    expect(invoice).toMatchObject({ subtotal: 350, discount: 0, total: 350, amount_paid: 350, status: "paid" });
    expect(invoice.lines).toMatchObject([{ type: "subscription", quantity: 1000, unit_amount_decimal: "0.35", amount: 350 }]);
    const payments = await call(`/payments?subscription_id=${sub.id}`, { key: acct.key });
    expect(payments.body.data.map((p: { amount: number }) => p.amount)).toEqual([350]);

    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    const renewed = await call(`/payments?subscription_id=${sub.id}`, { key: acct.key });
    expect(renewed.body.data.map((p: { amount: number; status: string }) => [p.amount, p.status])).toEqual([
      [350, "completed"],
      [350, "completed"],
    ]);
  });

  it("rounds each line once, half away from zero: 3 units at 0.5 cost 2; 1 unit at 0.35 costs nothing and is refused", async () => {
    const acct = await signup("Sub-cent rounding");
    const user = await createUser(acct, { name: "Rory Round", email: "rory@example.com" });
    const half = await plan(acct, { unit_amount_decimal: "0.5" });
    const sub = await subscribed(acct, user.id, half.id, undefined, { quantity: 3 });
    expect((await firstInvoice(acct, sub.id)).total).toBe(2);

    const tiny = await plan(acct, { unit_amount_decimal: "0.35" });
    const before = await countOf("SELECT count(*) AS n FROM payments WHERE account_id = ?", acct.id);
    expectError(await subscribe(acct, user.id, tiny.id, undefined, { quantity: 1 }), 400, "invalid_request_error", "amount_too_small");
    expect(await countOf("SELECT count(*) AS n FROM payments WHERE account_id = ?", acct.id)).toBe(before);
  });

  it("is exact in JPY (no decimals) and KWD (three): the decimal is of each currency's minor unit", async () => {
    const acct = await signup("Sub-cent currencies");
    const user = await createUser(acct, { name: "Yuki Yen", email: "yuki@example.com" });
    const yen = await plan(acct, { currency: "jpy", unit_amount_decimal: "0.125" });
    expect((await firstInvoice(acct, (await subscribed(acct, user.id, yen.id, undefined, { quantity: 8000 })).id)).total).toBe(1000);
    // 3,000 units at 0.0005 fils: 1.5 fils, rounded once, half away from zero, to 2 fils (0.002 KWD).
    const fils = await plan(acct, { currency: "kwd", unit_amount_decimal: "0.0005" });
    const sub = await subscribed(acct, user.id, fils.id, undefined, { quantity: 3000 });
    expect(await firstInvoice(acct, sub.id)).toMatchObject({ currency: "kwd", total: 2, lines: [{ unit_amount_decimal: "0.0005", amount: 2 }] });
  });
});

describe("tiers with sub-cent unit prices", () => {
  it("price graduated tiers exactly and round the line once: 1,000 units at 0.5 and 500 at 0.25 cost 6.25", async () => {
    const acct = await signup("Sub-cent tiers");
    const tiered = await plan(acct, {
      pricing_model: "graduated",
      tiers: [
        { up_to: 1000, unit_amount_decimal: "0.5" },
        { up_to: null, unit_amount_decimal: "0.25", flat_price: 1 },
      ],
    });
    expect(tiered.tiers).toMatchObject([
      { up_to: 1000, unit_price: null, unit_amount: null, unit_amount_decimal: "0.5", flat_amount: 0 },
      { up_to: null, unit_price: null, unit_amount: null, unit_amount_decimal: "0.25", flat_amount: 100 },
    ]);
    const user = await createUser(acct, { name: "Tia Tier", email: "tia@example.com" });
    const sub = await subscribed(acct, user.id, tiered.id, undefined, { quantity: 1500 });
    const invoice = await firstInvoice(acct, sub.id);
    // 1,000 × 0.5 + 500 × 0.25 + 100 (the second tier's flat fee) = 725, one line, no unit price.
    expect(invoice.lines).toMatchObject([{ quantity: 1500, unit_amount_decimal: null, amount: 725 }]);
    expect(invoice.total).toBe(725);
  });
});

describe("refusals", () => {
  it("answer 400 naming the parameter and create nothing", async () => {
    const acct = await signup("Sub-cent refusals");
    const cases: [Record<string, unknown>, string, string][] = [
      [{ price: 1, unit_amount_decimal: "0.35" }, "parameter_unexpected", "unit_amount_decimal"],
      [{ unit_amount_decimal: "0.0000000000001" }, "parameter_invalid", "unit_amount_decimal"],
      [{ unit_amount_decimal: "-1" }, "parameter_invalid", "unit_amount_decimal"],
      [{ unit_amount_decimal: "1e-3" }, "parameter_invalid", "unit_amount_decimal"],
      [{ unit_amount_decimal: " 0.35" }, "parameter_invalid", "unit_amount_decimal"],
      [{ unit_amount_decimal: "0" }, "amount_too_small", "unit_amount_decimal"],
      [{ unit_amount_decimal: "100000000000" }, "amount_too_large", "unit_amount_decimal"],
      [{ unit_amount_decimal: 0.35 }, "parameter_invalid", "unit_amount_decimal"],
      [{ pricing_model: "volume", unit_amount_decimal: "0.35", tiers: [{ up_to: null, unit_price: 1 }] }, "parameter_unexpected", "unit_amount_decimal"],
      [{ pricing_model: "volume", tiers: [{ up_to: null, unit_price: 1, unit_amount_decimal: "0.5" }] }, "parameter_unexpected", "tiers.0.unit_amount_decimal"],
      [{ pricing_model: "volume", tiers: [{ up_to: null }] }, "parameter_missing", "tiers.0.unit_price"],
      [{ pricing_model: "volume", tiers: [{ up_to: null, unit_amount_decimal: "0.5.5" }] }, "parameter_invalid", "tiers.0.unit_amount_decimal"],
      [{}, "parameter_missing", "price"],
    ];
    for (const [body, code, param] of cases) {
      const res = await call("/subscription-plans", { key: acct.key, body: { name: "Bad", currency: "usd", interval: "month", ...body } });
      const error = expectError(res, 400, "invalid_request_error", code);
      expect(error.param, JSON.stringify(body)).toBe(param);
    }
    expect(await countOf("SELECT count(*) AS n FROM plans WHERE account_id = ?", acct.id)).toBe(0);
  });
});
