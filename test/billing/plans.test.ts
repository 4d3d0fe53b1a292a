import { describe, expect, it } from "vitest";
import { call, expectError, signup } from "../support/http";
import { createPlan, DESIGN_TIERS } from "../support/fixtures";

describe("POST /subscription-plans", () => {
  it("creates a fixed plan with an exact decimal price, a lowercase currency and unit_amount in minor units", async () => {
    const acct = await signup();
    const res = await call("/subscription-plans", {
      key: acct.key,
      rawBody: '{"name":"Pro","price":19.90,"currency":"USD","interval":"month","description":"Pro plan"}',
      headers: { "content-type": "application/json" },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^plan_/),
      object: "plan",
      name: "Pro",
      price: 19.9,
      unit_amount: 1990,
      currency: "usd",
      interval: "month",
      pricing_model: "fixed",
      tiers: null,
      description: "Pro plan",
      active: true,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  it("reads prices from the source text, never through floats (0.29 is 29, 1.005 KWD is 1005)", async () => {
    const acct = await signup();
    expect((await createPlan(acct, { price: 0.29 })).unit_amount).toBe(29);
    expect((await createPlan(acct, { price: 1.005, currency: "KWD" })).unit_amount).toBe(1005);
    expect((await createPlan(acct, { price: 500, currency: "jpy", interval: "year" })).unit_amount).toBe(500);
    expect((await createPlan(acct, { price: 19.99 })).price).toBe(19.99);
  });

  it("accepts trailing zeros within the exponent but refuses more decimals than the currency allows", async () => {
    const acct = await signup();
    const zeros = await call("/subscription-plans", {
      key: acct.key,
      rawBody: '{"name":"Pro","price":19.9900,"currency":"usd","interval":"month"}',
      headers: { "content-type": "application/json" },
    });
    expect(zeros.status, zeros.text).toBe(201);
    expect(zeros.body.unit_amount).toBe(1999);

    const usd = await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 19.999, currency: "usd", interval: "month" } });
    expect(expectError(usd, 400, "invalid_request_error", "too_many_decimals").param).toBe("price");
    const jpy = await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 5.5, currency: "JPY", interval: "month" } });
    expect(expectError(jpy, 400, "invalid_request_error", "too_many_decimals").message).toContain("JPY");
  });

  it("creates volume and graduated plans with tiers in major and minor units", async () => {
    const acct = await signup();
    const volume = await createPlan(acct, { price: undefined, pricing_model: "volume", tiers: DESIGN_TIERS });
    expect(volume).toMatchObject({ pricing_model: "volume", price: null, unit_amount: null });
    expect(volume.tiers).toEqual([
      { up_to: 5, unit_price: 7, flat_price: 0, unit_amount: 700, unit_amount_decimal: "700", flat_amount: 0 },
      { up_to: 10, unit_price: 6.5, flat_price: 0, unit_amount: 650, unit_amount_decimal: "650", flat_amount: 0 },
      { up_to: null, unit_price: 6, flat_price: 0, unit_amount: 600, unit_amount_decimal: "600", flat_amount: 0 },
    ]);
    const graduated = await createPlan(acct, {
      price: undefined,
      pricing_model: "graduated",
      tiers: [{ up_to: 1, unit_price: 0, flat_price: 10.25 }, { up_to: null, unit_price: 1.1 }],
    });
    expect(graduated.tiers).toEqual([
      { up_to: 1, unit_price: 0, flat_price: 10.25, unit_amount: 0, unit_amount_decimal: "0", flat_amount: 1025 },
      { up_to: null, unit_price: 1.1, flat_price: 0, unit_amount: 110, unit_amount_decimal: "110", flat_amount: 0 },
    ]);
  });

  it("takes unit_amount (and a tier's unit_amount and flat_amount) in minor units, as every other amount, and answers both units", async () => {
    const acct = await signup();
    const fixed = await createPlan(acct, { price: undefined, unit_amount: 1999 });
    expect(fixed).toMatchObject({ price: 19.99, unit_amount: 1999, unit_amount_decimal: "1999" });
    expect(await createPlan(acct, { price: undefined, unit_amount: 1999, currency: "jpy" })).toMatchObject({ price: 1999, unit_amount: 1999 });
    expect(await createPlan(acct, { price: undefined, unit_amount: 1005, currency: "kwd" })).toMatchObject({ price: 1.005, unit_amount: 1005 });
    const tiered = await createPlan(acct, {
      price: undefined,
      pricing_model: "graduated",
      tiers: [{ up_to: 1, unit_amount: 0, flat_amount: 1025 }, { up_to: null, unit_amount: 110 }],
    });
    expect(tiered.tiers).toEqual([
      { up_to: 1, unit_price: 0, flat_price: 10.25, unit_amount: 0, unit_amount_decimal: "0", flat_amount: 1025 },
      { up_to: null, unit_price: 1.1, flat_price: 0, unit_amount: 110, unit_amount_decimal: "110", flat_amount: 0 },
    ]);

    const base = { name: "Pro", currency: "usd", interval: "month" };
    const both = expectError(await call("/subscription-plans", { key: acct.key, body: { ...base, price: 19.99, unit_amount: 1999 } }), 400, "invalid_request_error", "parameter_unexpected");
    expect(both.param).toBe("unit_amount");
    expect(both.message).toBe("unit_amount: give one of price, unit_amount, unit_amount_decimal, not both price and unit_amount.");
    for (const [unit_amount, param] of [[19.99, "unit_amount"], [0, "unit_amount"], ["1999", "unit_amount"], [1e12, "unit_amount"]] as const) {
      expect(expectError(await call("/subscription-plans", { key: acct.key, body: { ...base, unit_amount } }), 400, "invalid_request_error", "parameter_invalid").param).toBe(param);
    }
    const tierBoth = await call("/subscription-plans", {
      key: acct.key,
      body: { ...base, pricing_model: "volume", tiers: [{ up_to: null, unit_price: 1, unit_amount: 100 }] },
    });
    expect(expectError(tierBoth, 400, "invalid_request_error", "parameter_unexpected").param).toBe("tiers.0.unit_amount");
    const flatBoth = await call("/subscription-plans", {
      key: acct.key,
      body: { ...base, pricing_model: "volume", tiers: [{ up_to: null, unit_amount: 100, flat_price: 1, flat_amount: 100 }] },
    });
    expect(expectError(flatBoth, 400, "invalid_request_error", "parameter_unexpected").param).toBe("tiers.0.flat_amount");
    const tieredWithUnitAmount = await call("/subscription-plans", { key: acct.key, body: { ...base, unit_amount: 100, pricing_model: "volume", tiers: DESIGN_TIERS } });
    expect(expectError(tieredWithUnitAmount, 400, "invalid_request_error", "parameter_unexpected").param).toBe("unit_amount");
    const missing = expectError(await call("/subscription-plans", { key: acct.key, body: base }), 400, "invalid_request_error", "parameter_missing");
    expect(missing.message).toContain("unit_amount in minor units");
  });

  it("answers 400 for every invalid plan", async () => {
    const acct = await signup();
    const base = { name: "Pro", price: 10, currency: "usd", interval: "month" };
    const cases: [Record<string, unknown>, string, string | undefined][] = [
      [{ ...base, currency: "xyz" }, "currency_invalid", "currency"],
      [{ ...base, interval: "week" }, "parameter_invalid", "interval"],
      [{ ...base, name: "" }, "parameter_invalid", "name"],
      [{ ...base, price: -1 }, "parameter_invalid", "price"],
      [{ ...base, price: 0 }, "amount_too_small", "price"],
      [{ ...base, price: "10.00" }, "parameter_invalid", "price"],
      [{ ...base, price: 1e12 }, "amount_too_large", "price"],
      [{ name: "Pro", currency: "usd", interval: "month" }, "parameter_missing", "price"],
      [{ ...base, tiers: DESIGN_TIERS }, "parameter_unexpected", "tiers"],
      [{ ...base, pricing_model: "volume", tiers: DESIGN_TIERS }, "parameter_unexpected", "price"],
      [{ ...base, price: undefined, pricing_model: "volume" }, "parameter_missing", "tiers"],
      [{ ...base, price: undefined, pricing_model: "tiered", tiers: DESIGN_TIERS }, "parameter_invalid", "pricing_model"],
      [{ ...base, price: undefined, pricing_model: "volume", tiers: [] }, "parameter_invalid", "tiers"],
      [{ ...base, price: undefined, pricing_model: "volume", tiers: [{ up_to: 5, unit_price: 1 }, { up_to: 3, unit_price: 1 }, { up_to: null, unit_price: 1 }] }, "tiers_invalid", "tiers"],
      [{ ...base, price: undefined, pricing_model: "graduated", tiers: [{ up_to: null, unit_price: 1 }, { up_to: 5, unit_price: 1 }] }, "tiers_invalid", "tiers"],
      [{ ...base, price: undefined, pricing_model: "graduated", tiers: [{ up_to: 5, unit_price: 1 }] }, "tiers_invalid", "tiers"],
      [{ ...base, price: undefined, pricing_model: "graduated", tiers: [{ up_to: 2.5, unit_price: 1 }, { up_to: null, unit_price: 1 }] }, "parameter_invalid", "tiers.0.up_to"],
      [{ ...base, price: undefined, pricing_model: "volume", tiers: [{ up_to: 5, unit_price: 1.001 }, { up_to: null, unit_price: 1 }] }, "too_many_decimals", "tiers.0.unit_price"],
      [{ ...base, price: undefined, pricing_model: "volume", tiers: [{ up_to: 5, unit_price: 1 }, { up_to: null, unit_price: 1, flat_price: 0.001 }] }, "too_many_decimals", "tiers.1.flat_price"],
    ];
    for (const [body, code, param] of cases) {
      const res = await call("/subscription-plans", { key: acct.key, body });
      const error = expectError(res, 400, "invalid_request_error", code);
      expect(error.param, JSON.stringify(body)).toBe(param);
    }
    const tierMessage = await call("/subscription-plans", {
      key: acct.key,
      body: { ...base, price: undefined, pricing_model: "graduated", tiers: [{ up_to: null, unit_price: 1 }, { up_to: 5, unit_price: 1 }] },
    });
    expect(tierMessage.body.error.message).toContain("up_to");
    expect(tierMessage.body.error.message).not.toContain("upTo");
  });

  it("refuses exponent notation, which is not a plain decimal", async () => {
    const acct = await signup();
    const res = await call("/subscription-plans", {
      key: acct.key,
      rawBody: '{"name":"Pro","price":1e1,"currency":"usd","interval":"month"}',
      headers: { "content-type": "application/json" },
    });
    expectError(res, 400, "invalid_request_error", "parameter_invalid");
  });

  it("needs plans:write, and plans:read to read", async () => {
    const acct = await signup();
    const readOnly = await call("/api/keys", { key: acct.key, body: { scopes: ["plans:read"] } });
    const key = readOnly.body.secret as string;
    expectError(await call("/subscription-plans", { key, body: { name: "Pro", price: 1, currency: "usd", interval: "month" } }), 403, "permission_error", "missing_scope");
    expect((await call("/subscription-plans", { key })).status).toBe(200);
    const none = (await call("/api/keys", { key: acct.key, body: { scopes: ["users:read"] } })).body.secret as string;
    expectError(await call("/subscription-plans", { key: none }), 403, "permission_error", "missing_scope");
    expectError(await call("/subscription-plans"), 401, "authentication_error");
  });
});

describe("reading and archiving plans", () => {
  it("lists newest first, reads by id, and 404s another account's plan", async () => {
    const acct = await signup();
    const other = await signup("Other");
    const first = await createPlan(acct, { name: "A" });
    const second = await createPlan(acct, { name: "B" });
    const list = await call("/subscription-plans?limit=1", { key: acct.key });
    expect(list.body).toMatchObject({ object: "list", has_more: true, data: [{ id: second.id }] });
    const next = await call(`/subscription-plans?limit=1&starting_after=${second.id}`, { key: acct.key });
    expect(next.body.data.map((p: { id: string }) => p.id)).toEqual([first.id]);
    expect((await call(`/subscription-plans/${first.id}`, { key: acct.key })).body).toEqual(first);
    expectError(await call(`/subscription-plans/${first.id}`, { key: other.key }), 404, "not_found_error", "resource_missing");
    expectError(await call(`/subscription-plans/${first.id}`, { key: other.key, method: "PATCH", body: { active: false } }), 404, "not_found_error");
    expect((await call("/subscription-plans", { key: other.key })).body.data).toEqual([]);
  });

  it("PATCH renames, re-describes and archives; prices stay", async () => {
    const acct = await signup();
    const plan = await createPlan(acct);
    const res = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { active: false, name: "Legacy", description: null } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: plan.id, name: "Legacy", description: null, active: false, unit_amount: 1999 });
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key })).body).toEqual(res.body);
    const invalid = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { active: "no" } });
    expectError(invalid, 400, "invalid_request_error", "parameter_invalid");
  });
});
