// Invoices (issue 21, phase A): every subscription charge is for an invoice with lines; a period's
// dunning retries and Pay now charge the same invoice; numbers are gap-free per account and mode;
// void and Pay now move the subscription as they say; the routes' errors and isolation.
import { env } from "../support/env";
import { describe, expect, it } from "vitest";
import { type Account, call, expectError, signup } from "../support/http";
import { createKey, createPlan, createUser, getSubscription, subscribe, subscribed } from "../support/fixtures";
import { CARDS } from "../support/cards";
import { advance, createClock } from "../support/clock";
import { eventsOf } from "../support/db";

const PREFIX = (acct: Account) => acct.id.slice(-8).toUpperCase();

async function invoicesOf(acct: Account, query = "", key = acct.key) {
  const res = await call(`/invoices${query}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data as Record<string, any>[];
}

async function paymentsOfSubscription(acct: Account, subscriptionId: string) {
  const res = await call(`/payments?subscription_id=${subscriptionId}&limit=100`, { key: acct.key });
  expect(res.status, res.text).toBe(200);
  return res.body.data as Record<string, any>[];
}

/** The invoice events of one invoice, in order, as `type:status:number`. */
async function invoiceEvents(acct: Account, invoiceId: string) {
  return (await eventsOf(acct.id))
    .filter((e) => e.type.startsWith("invoice.") && e.body.object_id === invoiceId)
    .sort((a, b) => a.body.sequence - b.body.sequence)
    .map((e) => `${e.type}:${e.body.data.status}:${e.body.data.number ?? "-"}`);
}

/** A user on a test clock subscribed to a 19.99 monthly plan with `pan`. */
async function onClock(pan: string, start = "2026-01-31T12:00:00.000Z") {
  const acct = await signup("Clocked Co");
  const clock = await createClock(acct, start);
  const user = await createUser(acct, { name: "Grace Hopper", testClock: clock.id });
  const plan = await createPlan(acct);
  const sub = await subscribed(acct, user.id, plan.id, pan);
  return { acct, clock, user, plan, sub };
}

/** A past-due subscription (its renewal on Feb 28 declined) and the period's open invoice. */
async function pastDue() {
  const made = await onClock(CARDS.declineAfterFirst);
  await advance(made.acct, made.clock.id, "2026-02-28T12:01:00.000Z");
  expect((await getSubscription(made.acct, made.sub.id)).status).toBe("past_due");
  const [open] = await invoicesOf(made.acct, "?status=open");
  expect(open).toBeDefined();
  return { ...made, open };
}

/** The subscription's vaulted card starts to succeed (its holder's bank now accepts it). */
const cardNowSucceeds = (subscriptionId: string) =>
  env.DB.prepare("UPDATE subscriptions SET processor_token = 'tok_sandbox_succeed_0123456789abcdef' WHERE id = ?").bind(subscriptionId).run();

describe("a subscription's first charge is for an invoice", () => {
  it("paid, numbered, with one line for the period; the payment names it; created, finalized and paid events", async () => {
    const acct = await signup("Invoicing Ltd");
    const user = await createUser(acct);
    const plan = await createPlan(acct, { price: 19.99 });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { quantity: 2 });
    const [payment] = await paymentsOfSubscription(acct, sub.id);

    const [invoice] = await invoicesOf(acct);
    expect(invoice).toEqual({
      id: expect.stringMatching(/^in_[0-9a-z]{26}$/),
      object: "invoice",
      livemode: false,
      number: `${PREFIX(acct)}-0001`,
      status: "paid",
      subscription_id: sub.id,
      user_id: user.id,
      // The parties as the invoice was finalized with them.
      customer_name: user.name,
      customer_email: user.email,
      customer_address: null,
      customer_tax_ids: [],
      account_name: "Invoicing Ltd",
      account_email: expect.stringContaining("@"),
      account_address: null,
      account_tax_ids: [],
      footer: null,
      currency: "usd",
      period_start: sub.start_date,
      period_end: sub.next_billing_date,
      lines: [
        {
          id: expect.stringMatching(/^il_[0-9a-z]{26}$/),
          type: "subscription",
          description: "2 × Pro",
          quantity: 2,
          unit_amount_decimal: "1999",
          amount: 3998,
          proration: false,
          tax_amounts: [],
          period_start: sub.start_date,
          period_end: sub.next_billing_date,
        },
      ],
      subtotal: 3998,
      discount: 0,
      coupon: null,
      tax: 0,
      total_tax_amounts: [],
      total: 3998,
      amount_paid: 3998,
      amount_due: 3998,
      starting_balance: 0,
      ending_balance: 0,
      payment_id: payment.id,
      hosted_invoice_url: expect.stringMatching(new RegExp(`^http://127\\.0\\.0\\.1:8787/pay/invoices/${invoice.id}/[0-9A-Za-z]{40}$`)),
      test_clock: null,
      created_at: expect.any(String),
      finalized_at: invoice.created_at,
      paid_at: invoice.created_at,
    });
    expect(payment).toMatchObject({ invoice_id: invoice.id, amount: 3998, status: "completed" });
    expect((await call(`/invoices/${invoice.id}`, { key: acct.key })).body).toEqual(invoice);
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.invoice_id).toBe(invoice.id);

    // Each event shows the invoice as it was at that step: the draft, the finalized one, the paid one.
    expect(await invoiceEvents(acct, invoice.id)).toEqual(["invoice.created:draft:-", `invoice.finalized:open:${invoice.number}`, `invoice.paid:paid:${invoice.number}`]);
    const paid = (await eventsOf(acct.id, "invoice.paid"))[0].body;
    expect(paid).toMatchObject({ type: "invoice.paid", object_id: invoice.id, sequence: 3, livemode: false, data: invoice });
  });

  it("a tiered plan's line has no unit price: the tiers price it as a whole", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct, {
      price: undefined,
      pricing_model: "graduated",
      tiers: [
        { up_to: 5, unit_price: 7.0 },
        { up_to: null, unit_price: 6.5 },
      ],
    });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.visa, { quantity: 6 });
    const [invoice] = await invoicesOf(acct, `?subscription_id=${sub.id}`);
    expect(invoice.lines).toMatchObject([{ description: "6 × Pro", quantity: 6, unit_amount_decimal: null, amount: 4150 }]);
    expect(invoice).toMatchObject({ subtotal: 4150, total: 4150, amount_paid: 4150 });
  });

  it("a declined first charge creates no subscription; its invoice was finalized (it keeps its number) and is void", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const declined = await subscribe(acct, user.id, plan.id, CARDS.declined);
    expectError(declined, 402, "card_error", "card_declined");
    const ok = await subscribed(acct, user.id, plan.id);

    const invoices = await invoicesOf(acct);
    expect(invoices.map((i) => [i.number, i.status, i.subscription_id])).toEqual([
      [`${PREFIX(acct)}-0002`, "paid", ok.id],
      [`${PREFIX(acct)}-0001`, "void", null],
    ]);
    const voided = invoices[1];
    const failed = (await call(`/payments?user_id=${user.id}`, { key: acct.key })).body.data.find((p: any) => p.status === "failed");
    expect(voided).toMatchObject({ user_id: user.id, payment_id: failed.id, amount_paid: 0, amount_due: 1999, total: 1999, paid_at: null, lines: [{ description: "1 × Pro", amount: 1999 }] });
    expect(failed.invoice_id).toBe(voided.id);
    expect(await invoiceEvents(acct, voided.id)).toEqual([
      "invoice.created:draft:-",
      `invoice.finalized:open:${voided.number}`,
      `invoice.payment_failed:void:${voided.number}`,
      `invoice.voided:void:${voided.number}`,
    ]);
  });
});

describe("renewals and dunning charge one invoice per period", () => {
  it("a renewal is paid by the period's own invoice", async () => {
    const { acct, sub } = await onClock(CARDS.visa);
    await advance(acct, (await call(`/api/test-clocks?limit=1`, { key: acct.key })).body.data[0].id, "2026-03-01T00:00:00.000Z");
    const invoices = await invoicesOf(acct, `?subscription_id=${sub.id}`);
    expect(invoices.map((i) => [i.number, i.status, i.period_start, i.period_end])).toEqual([
      [`${PREFIX(acct)}-0002`, "paid", "2026-02-28T12:00:00.000Z", "2026-03-31T12:00:00.000Z"],
      [`${PREFIX(acct)}-0001`, "paid", "2026-01-31T12:00:00.000Z", "2026-02-28T12:00:00.000Z"],
    ]);
    const payments = await paymentsOfSubscription(acct, sub.id);
    expect(payments.map((p) => p.invoice_id).sort()).toEqual(invoices.map((i) => i.id).sort());
  });

  it("every dunning retry charges the same invoice; used up, it is uncollectible", async () => {
    const { acct, clock, sub, open } = await pastDue();
    expect(open).toMatchObject({ number: `${PREFIX(acct)}-0002`, period_start: "2026-02-28T12:00:00.000Z", amount_paid: 0, paid_at: null });
    // Retries on Mar 1, 3 and 5, all declined: then canceled.
    await advance(acct, clock.id, "2026-03-10T00:00:00.000Z");
    expect((await getSubscription(acct, sub.id)).status).toBe("canceled");

    const invoices = await invoicesOf(acct, `?subscription_id=${sub.id}`);
    expect(invoices).toHaveLength(2);
    const period = invoices[0];
    expect(period).toMatchObject({ id: open.id, number: open.number, status: "uncollectible", amount_paid: 0 });
    const attempts = (await paymentsOfSubscription(acct, sub.id)).filter((p) => p.status === "failed");
    expect(attempts).toHaveLength(4);
    expect(new Set(attempts.map((p) => p.invoice_id))).toEqual(new Set([open.id]));
    expect(period.payment_id).toBe(attempts[0].id); // newest first: the last attempt
    expect(await invoiceEvents(acct, open.id)).toEqual([
      "invoice.created:draft:-",
      `invoice.finalized:open:${open.number}`,
      `invoice.payment_failed:open:${open.number}`,
      `invoice.payment_failed:open:${open.number}`,
      `invoice.payment_failed:open:${open.number}`,
      `invoice.payment_failed:uncollectible:${open.number}`,
    ]);
  });

  it("a past-due card update pays the period's open invoice", async () => {
    const { acct, sub, open } = await pastDue();
    const updated = await call(`/subscriptions/${sub.id}`, {
      key: acct.key,
      method: "PUT",
      body: { payment_method: "card", card_number: CARDS.visa, expiration_month: 12, expiration_year: 2035, cvv: "123" },
    });
    expect(updated.status, updated.text).toBe(200);
    const [invoice] = await invoicesOf(acct, `?subscription_id=${sub.id}&status=paid&limit=1`);
    expect(invoice).toMatchObject({ id: open.id, number: open.number, status: "paid", amount_paid: 1999 });
    expect(await invoicesOf(acct, "?status=open")).toEqual([]);
  });

  it("canceling a past-due subscription leaves its open invoice uncollectible", async () => {
    const { acct, sub, open } = await pastDue();
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    expect((await call(`/invoices/${open.id}`, { key: acct.key })).body.status).toBe("uncollectible");
  });
});

describe("POST /invoices/{id}/pay", () => {
  it("a decline answers 402 and counts as an attempt on the same invoice; once the card works, it is paid and the subscription active", async () => {
    const { acct, sub, open } = await pastDue();
    const declined = await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST" });
    expect(expectError(declined, 402, "card_error", "card_declined")).toBeDefined();
    let payments = await paymentsOfSubscription(acct, sub.id);
    expect(payments.filter((p) => p.status === "failed").map((p) => p.invoice_id)).toEqual([open.id, open.id]);
    expect((await call(`/invoices/${open.id}`, { key: acct.key })).body).toMatchObject({ status: "open", payment_id: payments[0].id });
    // The scheduled retry stands (Mar 1).
    const still = await getSubscription(acct, sub.id);
    expect(still).toMatchObject({ status: "past_due" });

    await cardNowSucceeds(sub.id);
    const paid = await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST", idempotencyKey: `pay-${open.id}` });
    expect(paid.status, paid.text).toBe(200);
    payments = await paymentsOfSubscription(acct, sub.id);
    expect(paid.body).toMatchObject({ id: open.id, number: open.number, status: "paid", amount_paid: 1999, payment_id: payments[0].id, paid_at: expect.any(String) });
    expect(payments[0]).toMatchObject({ status: "completed", invoice_id: open.id, amount: 1999 });
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "active", current_period_start: "2026-02-28T12:00:00.000Z", next_billing_date: "2026-03-31T12:00:00.000Z" });
    // The replay answers the same; a second Pay now is refused: nothing is charged twice.
    const replay = await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST", idempotencyKey: `pay-${open.id}` });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(paid.body);
    expectError(await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_paid");
    expectError(await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_paid");
    expect((await paymentsOfSubscription(acct, sub.id)).filter((p) => p.status === "completed")).toHaveLength(2);
    expect(await invoiceEvents(acct, open.id)).toEqual([
      "invoice.created:draft:-",
      `invoice.finalized:open:${open.number}`,
      `invoice.payment_failed:open:${open.number}`,
      `invoice.payment_failed:open:${open.number}`,
      `invoice.paid:paid:${open.number}`,
    ]);
  });

  it("a void, uncollectible or paid invoice is not charged: 409", async () => {
    const { acct, sub, open } = await pastDue();
    expect((await call(`/subscriptions/${sub.id}`, { key: acct.key, method: "DELETE" })).status).toBe(200);
    const before = (await paymentsOfSubscription(acct, sub.id)).length;
    expectError(await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_not_open");
    const [first] = await invoicesOf(acct, "?status=paid");
    expectError(await call(`/invoices/${first.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_paid");
    expect(await paymentsOfSubscription(acct, sub.id)).toHaveLength(before);
  });

  it("while a charge of the period is at the processor: 409 charge_in_progress, nothing charged", async () => {
    const { acct, sub, open } = await pastDue();
    // A dunning retry has claimed the next attempt and not settled yet.
    await env.DB.prepare("UPDATE subscription_periods SET attempts = attempts + 1 WHERE subscription_id = ? AND status = 'open'").bind(sub.id).run();
    const before = (await paymentsOfSubscription(acct, sub.id)).length;
    expectError(await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "charge_in_progress");
    expectError(await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "charge_in_progress");
    expect(await paymentsOfSubscription(acct, sub.id)).toHaveLength(before);
    expect((await call(`/invoices/${open.id}`, { key: acct.key })).body.status).toBe("open");
  });
});

describe("POST /invoices/{id}/void", () => {
  it("voids the open invoice and forgives its period: the subscription is active, billed from the next period on", async () => {
    const { acct, clock, sub, open } = await pastDue();
    const voided = await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST", idempotencyKey: `void-${open.id}` });
    expect(voided.status, voided.text).toBe(200);
    // A void invoice has no hosted page any more (its page answers 410).
    expect(voided.body).toEqual({ ...open, status: "void", hosted_invoice_url: null });
    expect(open.hosted_invoice_url).toMatch(/\/pay\/invoices\//);
    expect(await getSubscription(acct, sub.id)).toMatchObject({ status: "active", current_period_start: open.period_start, next_billing_date: open.period_end });
    const replay = await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST", idempotencyKey: `void-${open.id}` });
    expect(replay.body).toEqual(voided.body);
    expectError(await call(`/invoices/${open.id}/void`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_not_open");
    expectError(await call(`/invoices/${open.id}/pay`, { key: acct.key, method: "POST" }), 409, "invalid_request_error", "invoice_not_open");

    // The old retry dates pass with no charge; the next period is a new invoice.
    const failedBefore = (await paymentsOfSubscription(acct, sub.id)).length;
    await advance(acct, clock.id, "2026-03-20T00:00:00.000Z");
    expect(await paymentsOfSubscription(acct, sub.id)).toHaveLength(failedBefore);
    await advance(acct, clock.id, "2026-04-01T00:00:00.000Z");
    const invoices = await invoicesOf(acct, `?subscription_id=${sub.id}`);
    expect(invoices.map((i) => [i.number, i.status, i.period_start])).toEqual([
      [`${PREFIX(acct)}-0003`, "open", "2026-03-31T12:00:00.000Z"],
      [`${PREFIX(acct)}-0002`, "void", "2026-02-28T12:00:00.000Z"],
      [`${PREFIX(acct)}-0001`, "paid", "2026-01-31T12:00:00.000Z"],
    ]);
    const types = (await eventsOf(acct.id)).filter((e) => e.body.object_id === open.id || e.body.subscription_id === sub.id).map((e) => e.type);
    expect(types).toContain("invoice.voided");
    expect(types.filter((t) => t === "subscription_updated")).toHaveLength(1);
  });
});

describe("invoice numbers", () => {
  it("are gap-free per account and mode under concurrent finalizations, unique, in commit order", async () => {
    const acct = await signup();
    const user = await createUser(acct);
    const plan = await createPlan(acct);
    const pans = [...Array(8).fill(CARDS.visa), CARDS.declined, CARDS.insufficientFunds, CARDS.visa, CARDS.declined];
    const answers = await Promise.all(pans.map((pan) => subscribe(acct, user.id, plan.id, pan)));
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(9).fill(201), ...Array(3).fill(402)].sort());
    const invoices = await invoicesOf(acct, "?limit=100");
    expect(invoices).toHaveLength(12);
    const sequences = invoices.map((i) => Number(i.number.split("-")[1])).sort((a, b) => a - b);
    expect(sequences).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(invoices.every((i) => i.number.startsWith(`${PREFIX(acct)}-`))).toBe(true);

    // Live mode counts on its own, from 1; another account too.
    const other = await signup();
    const otherUser = await createUser(other);
    const otherPlan = await createPlan(other);
    await subscribed(other, otherUser.id, otherPlan.id);
    expect((await invoicesOf(other)).map((i) => i.number)).toEqual([`${PREFIX(other)}-0001`]);
  });
});

describe("GET /invoices", () => {
  it("filters by subscription, user and status, pages newest first", async () => {
    const acct = await signup();
    const ada = await createUser(acct);
    const bob = await createUser(acct, { name: "Bob Smith" });
    const plan = await createPlan(acct);
    const a1 = await subscribed(acct, ada.id, plan.id);
    const a2 = await subscribed(acct, ada.id, plan.id);
    await subscribed(acct, bob.id, plan.id);
    expectError(await subscribe(acct, bob.id, plan.id, CARDS.declined), 402, "card_error");

    expect((await invoicesOf(acct, `?subscription_id=${a1.id}`)).map((i) => i.subscription_id)).toEqual([a1.id]);
    expect((await invoicesOf(acct, `?user_id=${ada.id}`)).map((i) => i.subscription_id)).toEqual([a2.id, a1.id]);
    expect((await invoicesOf(acct, `?user_id=${bob.id}&status=void`)).map((i) => i.status)).toEqual(["void"]);
    expect(await invoicesOf(acct, "?status=open")).toEqual([]);
    expect(await invoicesOf(acct, "?status=")).toHaveLength(4);

    const first = await call("/invoices?limit=2", { key: acct.key });
    expect(first.body).toMatchObject({ object: "list", has_more: true });
    const second = await call(`/invoices?limit=2&starting_after=${first.body.data[1].id}`, { key: acct.key });
    expect(second.body.has_more).toBe(false);
    const all = [...first.body.data, ...second.body.data].map((i: any) => i.id);
    expect(all).toEqual((await invoicesOf(acct)).map((i) => i.id));
    const back = await call(`/invoices?limit=2&ending_before=${second.body.data[0].id}`, { key: acct.key });
    expect(back.body.data.map((i: any) => i.id)).toEqual(first.body.data.map((i: any) => i.id));
  });

  it("refuses a status outside the set, an unknown parameter and a cursor that is not an invoice", async () => {
    const acct = await signup();
    const bad = expectError(await call("/invoices?status=unpaid", { key: acct.key }), 400, "invalid_request_error", "parameter_invalid");
    expect(bad.param).toBe("status");
    expect(bad.message).toBe('status must be draft, open, paid, uncollectible or void; "unpaid" is not one.');
    const unknown = expectError(await call("/invoices?stauts=paid", { key: acct.key }), 400, "invalid_request_error", "parameter_unknown");
    expect(unknown.message).toContain("Did you mean status?");
    expectError(await call("/invoices?starting_after=pay_01m7z2d8n7zgev6x3n0epk9rxn", { key: acct.key }), 400, "invalid_request_error", "invalid_cursor");
    expectError(await call("/invoices?limit=101", { key: acct.key }), 400, "invalid_request_error", "parameter_invalid");
  });
});

describe("tenancy, modes and scopes", () => {
  it("another account's invoice and the other mode's answer 404 on every route; lists show neither", async () => {
    const owner = await signup();
    const user = await createUser(owner);
    const plan = await createPlan(owner);
    await subscribed(owner, user.id, plan.id);
    const [invoice] = await invoicesOf(owner);
    const stranger = await signup();
    for (const key of [stranger.key, owner.liveKey]) {
      for (const [path, method] of [
        [`/invoices/${invoice.id}`, "GET"],
        [`/invoices/${invoice.id}/pdf`, "GET"],
        [`/invoices/${invoice.id}/void`, "POST"],
        [`/invoices/${invoice.id}/pay`, "POST"],
      ]) {
        const res = await call(path, { key, method });
        expect(expectError(res, 404, "not_found_error", "resource_missing").message, `${method} ${path}`).toContain(invoice.id);
      }
      expect(await invoicesOf(owner, "", key)).toEqual([]);
    }
    expect((await call(`/invoices/${invoice.id}`, { key: owner.key })).status).toBe(200);
    expectError(await call("/invoices/in_nothing", { key: owner.key }), 404, "not_found_error");
  });

  it("a restricted key needs invoices:read to read and invoices:write to void or pay", async () => {
    const { acct, open } = await pastDue();
    const reader = await createKey(acct, ["invoices:read"]);
    const other = await createKey(acct, ["subscriptions:write", "payments:read"]);
    expect((await call("/invoices", { key: reader.secret })).status).toBe(200);
    expect((await call(`/invoices/${open.id}`, { key: reader.secret })).status).toBe(200);
    expect((await call(`/invoices/${open.id}/pdf`, { key: reader.secret })).status).toBe(200);
    for (const action of ["void", "pay"]) expectError(await call(`/invoices/${open.id}/${action}`, { key: reader.secret, method: "POST" }), 403, "permission_error");
    for (const path of ["/invoices", `/invoices/${open.id}`, `/invoices/${open.id}/pdf`]) expectError(await call(path, { key: other.secret }), 403, "permission_error");
    const writer = await createKey(acct, ["invoices:write"]);
    expect((await call(`/invoices/${open.id}/void`, { key: writer.secret, method: "POST" })).body.status).toBe("void");
  });

  it("void and pay take no body", async () => {
    const { acct, open } = await pastDue();
    const res = await call(`/invoices/${open.id}/void`, { key: acct.key, body: { reason: "mistake" } });
    expect(expectError(res, 400, "invalid_request_error", "parameter_unknown").param).toBe("reason");
    expect((await call(`/invoices/${open.id}`, { key: acct.key })).body.status).toBe("open");
  });
});
