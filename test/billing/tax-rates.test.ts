// Tax rates (issue 37): /tax-rates, default_tax_rates on plans and subscriptions, and the tax on
// the invoices they make, with hand-computed amounts beside Stripe's documented examples (20%
// exclusive on 10.00 adds 2.00 on a 12.00 total; 19% inclusive in 11.90 is 1.90 of it). Each line's
// tax is taken after its discount and rounded once, half away from zero.
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createPlan, createUser, subscribe, subscribed } from "../support/fixtures";
import { advance, createClock } from "../support/clock";
import { countRows } from "../support/db";
import { invoicePdfText } from "../support/pdf";

async function createRate(acct: Account, body: Record<string, unknown>, key = acct.key) {
  const res = await call("/tax-rates", { key, body: { display_name: "VAT", inclusive: false, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, any>;
}

async function invoicesOf(acct: Account, subscriptionId: string) {
  const res = await call(`/invoices?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse(); // oldest first
}

async function paymentsOf(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Record<string, any>[]).reverse();
}

describe("POST /tax-rates, GET /tax-rates, GET /tax-rates/{id}, PATCH /tax-rates/{id}", () => {
  it("creates, lists newest first, reads and renames or archives a rate; the percentage is exact to 4 decimals", async () => {
    const acct = await signup();
    const vat = await createRate(acct, { display_name: "VAT", percentage: "20", inclusive: false, country: "gb", description: "UK standard rate" });
    expect(vat).toEqual({
      id: expect.stringMatching(/^txr_[0-9a-z]{26}$/),
      object: "tax_rate",
      active: true,
      display_name: "VAT",
      percentage: "20",
      inclusive: false,
      country: "GB",
      state: null,
      description: "UK standard rate",
      livemode: false,
      created_at: expect.any(String),
    });
    const ny = await createRate(acct, { display_name: "Sales tax", percentage: "8.8750", inclusive: false, country: "US", state: "NY" });
    expect(ny.percentage).toBe("8.875");
    const smallest = await createRate(acct, { percentage: "0.0001", inclusive: true });
    expect(smallest).toMatchObject({ percentage: "0.0001", inclusive: true, country: null });

    const list = await call("/tax-rates?limit=2", { key: acct.key });
    expect(list.status).toBe(200);
    expect(list.body.data.map((r: any) => r.id)).toEqual([smallest.id, ny.id]);
    expect(list.body.has_more).toBe(true);
    const next = await call(`/tax-rates?starting_after=${ny.id}`, { key: acct.key });
    expect(next.body.data.map((r: any) => r.id)).toEqual([vat.id]);

    expect((await call(`/tax-rates/${vat.id}`, { key: acct.key })).body).toEqual(vat);
    const archived = await call(`/tax-rates/${vat.id}`, { key: acct.key, method: "PATCH", body: { active: false, display_name: "VAT (old)", description: null } });
    expect(archived.status, archived.text).toBe(200);
    expect(archived.body).toEqual({ ...vat, active: false, display_name: "VAT (old)", description: null });
  });

  it("refuses a percentage out of 0 to 100, with 5 decimals or as a number, and writes nothing", async () => {
    const acct = await signup();
    for (const percentage of ["100.0001", "101", "-1", "19.12345", "0.00001", "1e1", "", 20]) {
      const res = await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage, inclusive: false } });
      const error = expectError(res, 400, "invalid_request_error");
      expect(error.param, String(percentage)).toBe("percentage");
    }
    expect(expectError(await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "19.12345", inclusive: false } }), 400, "invalid_request_error").message).toContain("4 decimals");
    expectError(await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "20" } }), 400, "invalid_request_error");
    expect(expectError(await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "20", inclusive: false, country: "GBR" } }), 400, "invalid_request_error").param).toBe("country");
    expect(await countRows("tax_rates", "account_id = ?", acct.id)).toBe(0);
  });

  it("never changes the percentage or inclusive: sending one to PATCH is 400 naming it, and changes nothing", async () => {
    const acct = await signup();
    const vat = await createRate(acct, { percentage: "20" });
    for (const field of ["percentage", "inclusive"]) {
      const res = await call(`/tax-rates/${vat.id}`, { key: acct.key, method: "PATCH", body: { [field]: field === "percentage" ? "21" : true, display_name: "Changed" } });
      const error = expectError(res, 400, "invalid_request_error", "parameter_unknown");
      expect(error.param).toBe(field);
    }
    expect((await call(`/tax-rates/${vat.id}`, { key: acct.key })).body).toEqual(vat);
  });

  it("another account's rate, or the other mode's, answers 404 to reads, updates, plans and subscriptions", async () => {
    const owner = await signup("Owner");
    const other = await signup("Other");
    const rate = await createRate(owner, { percentage: "20" });
    expectError(await call(`/tax-rates/${rate.id}`, { key: other.key }), 404, "not_found_error");
    expectError(await call(`/tax-rates/${rate.id}`, { key: other.key, method: "PATCH", body: { active: false } }), 404, "not_found_error");
    expectError(await call(`/tax-rates/${rate.id}`, { key: owner.liveKey }), 404, "not_found_error");
    expect((await call("/tax-rates", { key: other.key })).body.data).toEqual([]);
    expect((await call("/tax-rates", { key: owner.liveKey })).body.data).toEqual([]);

    const plan = await call("/subscription-plans", { key: other.key, body: { name: "Pro", price: 10, currency: "usd", interval: "month", default_tax_rates: [rate.id] } });
    expect(expectError(plan, 404, "not_found_error").param).toBe("default_tax_rates.0");
    const otherPlan = await createPlan(other, { price: 10 });
    const user = await createUser(other);
    const sub = await subscribe(other, user.id, otherPlan.id, undefined, { default_tax_rates: [rate.id] });
    expect(expectError(sub, 404, "not_found_error").param).toBe("default_tax_rates.0");
    expect(await countRows("subscriptions", "account_id = ?", other.id)).toBe(0);
    expect(await countRows("payments", "account_id = ?", other.id)).toBe(0);
    expect((await call(`/tax-rates/${rate.id}`, { key: owner.key })).body.active).toBe(true);
  });

  it("an archived rate is refused on a new plan (400 naming the field), and one a plan holds stays on it", async () => {
    const acct = await signup();
    const rate = await createRate(acct, { percentage: "20" });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [rate.id] });
    expect(plan.default_tax_rates).toEqual([rate.id]);
    await call(`/tax-rates/${rate.id}`, { key: acct.key, method: "PATCH", body: { active: false } });
    const refused = await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 10, currency: "usd", interval: "month", default_tax_rates: [rate.id] } });
    expect(expectError(refused, 400, "invalid_request_error", "tax_rate_inactive").param).toBe("default_tax_rates.0");
    expect(expectError(await call("/subscription-plans", { key: acct.key, body: { name: "Pro", price: 10, currency: "usd", interval: "month", default_tax_rates: ["txr_nope"] } }), 404, "not_found_error").param).toBe("default_tax_rates.0");
    expect((await call(`/subscription-plans/${plan.id}`, { key: acct.key })).body.default_tax_rates).toEqual([rate.id]);
    expect(await countRows("plans", "account_id = ?", acct.id)).toBe(1);
  });
});

describe("tax on invoices", () => {
  it("20% exclusive on 10.00 is 2.00: the first invoice totals 12.00 and the card is charged 12.00", async () => {
    const acct = await signup();
    const vat = await createRate(acct, { percentage: "20", inclusive: false });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    expect(sub.default_tax_rates).toBeNull();
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ subtotal: 1000, discount: 0, tax: 200, total: 1200, amount_due: 1200, amount_paid: 1200, status: "paid" });
    expect(invoice.total_tax_amounts).toMatchObject([{ tax_rate: vat.id, amount: 200, inclusive: false }]);
    expect(invoice.lines[0]).toMatchObject({ amount: 1000, tax_amounts: [{ tax_rate: vat.id, amount: 200, inclusive: false }] });
    const [payment] = await paymentsOf(acct, sub.id);
    expect(payment.amount).toBe(1200);
  });

  it("19% inclusive in 11.90 is 1.90, and the card is charged 11.90; the subscription's rates win over the plan's", async () => {
    const acct = await signup();
    const vat = await createRate(acct, { percentage: "20", inclusive: false });
    const de = await createRate(acct, { display_name: "MwSt", percentage: "19", inclusive: true, country: "DE" });
    const plan = await createPlan(acct, { price: 11.9, currency: "eur", default_tax_rates: [vat.id] });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id, undefined, { default_tax_rates: [de.id] });
    expect(sub.default_tax_rates).toEqual([de.id]);
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ subtotal: 1190, tax: 190, total: 1190, amount_paid: 1190 });
    expect(invoice.total_tax_amounts).toMatchObject([{ tax_rate: de.id, amount: 190, inclusive: true }]);
    expect((await paymentsOf(acct, sub.id))[0].amount).toBe(1190);
  });

  it("a discount comes off before the tax, and two rates on one line are each rounded once", async () => {
    const acct = await signup();
    const gst = await createRate(acct, { display_name: "GST", percentage: "5" });
    const qst = await createRate(acct, { display_name: "QST", percentage: "9.975" });
    const coupon = await call("/coupons", { key: acct.key, body: { name: "Quarter off", percent_off: 25, duration: "once" } });
    expect(coupon.status, coupon.text).toBe(201);
    // 26.65 less 25% (6.66, half away from zero of 6.6625) is 19.99; GST 5% = 99.95 -> 1.00, QST 9.975% = 199.40 -> 1.99.
    const plan = await createPlan(acct, { price: 26.65, currency: "cad", default_tax_rates: [gst.id, qst.id] });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id, undefined, { coupon: coupon.body.id });
    const [invoice] = await invoicesOf(acct, sub.id);
    expect(invoice).toMatchObject({ subtotal: 2665, discount: 666, tax: 299, total: 2298, amount_paid: 2298 });
    expect(invoice.lines[0].tax_amounts).toEqual([
      { tax_rate: gst.id, amount: 100, inclusive: false },
      { tax_rate: qst.id, amount: 199, inclusive: false },
    ]);
    expect((await paymentsOf(acct, sub.id))[0].amount).toBe(2298);
  });

  it("zero-decimal JPY and three-decimal KWD: 10% on ¥1,005 is ¥101; 5% on 1.010 KWD is 0.051", async () => {
    const acct = await signup();
    const jct = await createRate(acct, { display_name: "JCT", percentage: "10" });
    const kw = await createRate(acct, { display_name: "VAT", percentage: "5" });
    const user = await createUser(acct);
    const yen = await subscribed(acct, user.id, (await createPlan(acct, { price: 1005, currency: "jpy", default_tax_rates: [jct.id] })).id);
    expect((await invoicesOf(acct, yen.id))[0]).toMatchObject({ subtotal: 1005, tax: 101, total: 1106 });
    expect((await paymentsOf(acct, yen.id))[0].amount).toBe(1106);
    const dinar = await subscribed(acct, user.id, (await createPlan(acct, { price: 1.01, currency: "kwd", default_tax_rates: [kw.id] })).id);
    expect((await invoicesOf(acct, dinar.id))[0]).toMatchObject({ subtotal: 1010, tax: 51, total: 1061 });
    expect((await paymentsOf(acct, dinar.id))[0].amount).toBe(1061);
  });

  it("a renewal is taxed, and a proration credit carries negative tax on the next invoice", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2026-01-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const vat = await createRate(acct, { percentage: "20" });
    const small = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const big = await createPlan(acct, { price: 30, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, user.id, small.id);
    // Half-way through January (31 days: 15.5 days left at 2026-01-16T12:00Z), 10.00 -> 30.00:
    // credit -5.00 (tax -1.00) and charge 15.00 (tax 3.00).
    await advance(acct, clock.id, "2026-01-16T12:00:00.000Z");
    const changed = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: big.id } });
    expect(changed.status, changed.text).toBe(200);
    await advance(acct, clock.id, "2026-02-01T00:01:00.000Z");
    const invoices = await invoicesOf(acct, sub.id);
    expect(invoices).toHaveLength(2);
    const renewal = invoices[1];
    const byType = (type: string, sign: number) => renewal.lines.find((l: any) => l.type === type && Math.sign(l.amount) === sign);
    expect(byType("proration", -1)).toMatchObject({ amount: -500, tax_amounts: [{ tax_rate: vat.id, amount: -100, inclusive: false }] });
    expect(byType("proration", 1)).toMatchObject({ amount: 1500, tax_amounts: [{ tax_rate: vat.id, amount: 300, inclusive: false }] });
    expect(byType("subscription", 1)).toMatchObject({ amount: 3000, tax_amounts: [{ tax_rate: vat.id, amount: 600, inclusive: false }] });
    // 30.00 + 15.00 − 5.00 = 40.00; tax 6.00 + 3.00 − 1.00 = 8.00; 48.00 in all, charged.
    expect(renewal).toMatchObject({ subtotal: 4000, tax: 800, total: 4800, amount_paid: 4800, status: "paid" });
    expect(renewal.total_tax_amounts).toMatchObject([{ tax_rate: vat.id, amount: 800, inclusive: false }]);
    const payments = await paymentsOf(acct, sub.id);
    expect(payments.map((p) => p.amount)).toEqual([1200, 4800]);
  });

  it("an issued invoice keeps its tax when the rate is archived and the plan re-taxed", async () => {
    const acct = await signup();
    const vat = await createRate(acct, { percentage: "20" });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const [before] = await invoicesOf(acct, sub.id);
    await call(`/tax-rates/${vat.id}`, { key: acct.key, method: "PATCH", body: { active: false } });
    const retaxed = await call(`/subscription-plans/${plan.id}`, { key: acct.key, method: "PATCH", body: { default_tax_rates: [] } });
    expect(retaxed.status, retaxed.text).toBe(200);
    expect(retaxed.body.default_tax_rates).toEqual([]);
    const [after] = await invoicesOf(acct, sub.id);
    expect(after).toEqual(before);
  });

  it("the invoice's PDF and hosted page show a row per rate, with its name and percentage as issued", async () => {
    const acct = await signup("Taxed Co");
    const vat = await createRate(acct, { display_name: "VAT", percentage: "20" });
    const levy = await createRate(acct, { display_name: "Levy", percentage: "2.5", inclusive: true });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id, levy.id] });
    const user = await createUser(acct);
    const sub = await subscribed(acct, user.id, plan.id);
    const [invoice] = await invoicesOf(acct, sub.id);
    // 10.00 holds 2.5% inclusive: 1000 × 2.5 / 102.5 = 24.39 -> 0.24; VAT on the price net of it: 1000 × 20 / 102.5 = 195.12 -> 1.95.
    expect(invoice.total_tax_amounts).toEqual([
      { tax_rate: vat.id, amount: 195, inclusive: false, display_name: "VAT", percentage: "20" },
      { tax_rate: levy.id, amount: 24, inclusive: true, display_name: "Levy", percentage: "2.5" },
    ]);
    expect(invoice).toMatchObject({ subtotal: 1000, tax: 219, total: 1195 });
    // A rename later never alters the issued invoice.
    await call(`/tax-rates/${vat.id}`, { key: acct.key, method: "PATCH", body: { display_name: "Renamed" } });
    const text = await invoicePdfText(acct.key, invoice.id);
    expect(text).toContain("VAT 20%");
    expect(text).toContain("1.95");
    expect(text).toContain("Levy 2.5% (included)");
    expect(text).not.toContain("Renamed");
    const page = await call(new URL(invoice.hosted_invoice_url).pathname);
    expect(page.status).toBe(200);
    expect(page.text).toContain("VAT 20%");
    expect(page.text).toContain("Levy 2.5% (included)");
    expect(page.text).toContain("11.95");
  });
});

describe("a subscription's own tax rates", () => {
  it("PUT default_tax_rates taxes the next invoice; null goes back to the plan's; another account's rate is 404 and changes nothing", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2026-01-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const vat = await createRate(acct, { percentage: "20" });
    const reduced = await createRate(acct, { display_name: "VAT reduced", percentage: "5" });
    const plan = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, user.id, plan.id);
    const stranger = await createRate(await signup("Stranger"), { percentage: "1" });

    const refused = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { default_tax_rates: [stranger.id] } });
    expect(expectError(refused, 404, "not_found_error").param).toBe("default_tax_rates.0");
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key })).body.default_tax_rates).toBeNull();

    const own = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { default_tax_rates: [reduced.id] } });
    expect(own.status, own.text).toBe(200);
    expect(own.body.default_tax_rates).toEqual([reduced.id]);
    await advance(acct, clock.id, "2026-02-01T00:01:00.000Z");
    const back = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { default_tax_rates: null } });
    expect(back.status, back.text).toBe(200);
    expect(back.body.default_tax_rates).toBeNull();
    await advance(acct, clock.id, "2026-03-01T00:01:00.000Z");
    const invoices = await invoicesOf(acct, sub.id);
    // January at 20% (12.00), February at the subscription's 5% (10.50), March at the plan's 20% again.
    expect(invoices.map((i) => [i.tax, i.total])).toEqual([[200, 1200], [50, 1050], [200, 1200]]);
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([1200, 1050, 1200]);
  });
});

describe("a change invoiced at once carries its tax", () => {
  it("an upgrade's invoice charges its lines' tax; a downgrade's credit, tax included, goes to the balance for the next invoice", async () => {
    const acct = await signup();
    const clock = await createClock(acct, "2026-01-01T00:00:00.000Z");
    const user = await createUser(acct, { testClock: clock.id });
    const vat = await createRate(acct, { percentage: "20" });
    const small = await createPlan(acct, { price: 10, default_tax_rates: [vat.id] });
    const big = await createPlan(acct, { price: 30, default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, user.id, small.id);
    await advance(acct, clock.id, "2026-01-16T12:00:00.000Z");
    // Up, half-way: −5.00 (tax −1.00) and +15.00 (tax 3.00): 12.00 charged now.
    const up = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: big.id, proration_behavior: "always_invoice" } });
    expect(up.status, up.text).toBe(200);
    let invoices = await invoicesOf(acct, sub.id);
    expect(invoices[1]).toMatchObject({ subtotal: 1000, tax: 200, total: 1200, amount_paid: 1200, status: "paid" });
    // Back down at the same moment: −15.00 (tax −3.00) and +5.00 (tax 1.00): −12.00, carried on as a credit.
    const down = await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "PUT", body: { plan_id: small.id, proration_behavior: "always_invoice" } });
    expect(down.status, down.text).toBe(200);
    invoices = await invoicesOf(acct, sub.id);
    expect(invoices[2]).toMatchObject({ tax: -200, total: 0, amount_due: 0, status: "paid" });
    expect(invoices[2].lines.find((l: any) => l.type === "credit")).toMatchObject({ amount: 1200, tax_amounts: [] });
    // The 12.00 is a credit note to the balance (issue 37), tax included, with no tax of its own.
    expect((await call(`/credit-notes?invoice_id=${invoices[2].id}`, { key: acct.key })).body.data.map((n: any) => [n.amount, n.tax])).toEqual([[1200, 0]]);
    // February: 10.00 + 2.00 tax, taken from the 12.00 on the balance: nothing to charge.
    await advance(acct, clock.id, "2026-02-01T00:01:00.000Z");
    invoices = await invoicesOf(acct, sub.id);
    expect(invoices[3]).toMatchObject({ subtotal: 1000, tax: 200, total: 1200, starting_balance: -1200, ending_balance: 0 });
    expect(invoices[3]).toMatchObject({ amount_due: 0, status: "paid" });
    expect((await paymentsOf(acct, sub.id)).map((p) => p.amount)).toEqual([1200, 1200]);
  });
});
