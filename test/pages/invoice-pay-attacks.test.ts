// Review of paying an open invoice on its hosted page (issue 34's reviewer line): races, late
// outcomes and secrets, each meant to break src/billing/invoice-payments.ts and its page.
import { env } from "../support/env";
import { afterAll, describe, expect, it } from "vitest";
import { BASE, type Account, browse, call, signup } from "../support/http";
import { createPlan, createUser, getSubscription, subscribed } from "../support/fixtures";
import { CARDS, captureLogs, expectNoCardData, sentCvvs, sentPans } from "../support/cards";
import { eventsOf } from "../support/db";
import { makeDue } from "../support/clock";
import { runJobs } from "../support/queue";
import { OTHER_SHARD, envOf } from "../support/env";

const AUTH_CARD = "4000002760003184";
const logs = captureLogs();

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});


function card(pan: string) {
  sentPans.add(pan);
  sentCvvs.add("987");
  return { source: "card", card_number: pan, exp_month: "12", exp_year: String(new Date().getUTCFullYear() + 3), cvc: "987" };
}
const SAVED = { source: "subscription" };

interface Dunned {
  acct: Account;
  sub: string;
  invoice: { id: string; hosted_invoice_url: string; amount_due: number };
  page: string;
}

async function dunned(pan: string = CARDS.declineAfterFirst, name = "Attack Pay Co"): Promise<Dunned> {
  const acct = await signup(name);
  const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
  const plan = await createPlan(acct, { price: 30, name: "Pro" });
  const sub = await subscribed(acct, user.id, plan.id, pan, pan === AUTH_CARD ? { trial_period_days: 7 } : {});
  await makeDue(sub.id);
  await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
  expect((await getSubscription(acct, sub.id)).status).toBe("past_due");
  const [invoice] = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data;
  return { acct, sub: sub.id, invoice, page: new URL(invoice.hosted_invoice_url).pathname };
}

/** The subscription's card made one that pays (the bank now says yes), as a dunning retry would find it. */
async function cardNowPays(d: Dunned) {
  const s = await getSubscription(d.acct, d.sub);
  const good = await subscribed(d.acct, s.user_id, s.plan_id, CARDS.visa);
  await env.DB.prepare("UPDATE subscriptions SET processor_token = (SELECT processor_token FROM subscriptions WHERE id = ?) WHERE id = ?").bind(good.id, d.sub).run();
}

const invoiceOf = async (d: Dunned) => (await call(`/invoices/${d.invoice.id}`, { key: d.acct.key })).body;
const paymentsOf = async (d: Dunned) =>
  (await call(`/payments?subscription_id=${d.sub}&limit=100`, { key: d.acct.key })).body.data as { id: string; status: string; amount: number; amount_refunded: number; invoice_id: string | null }[];
const moneyTaken = async (d: Dunned) => (await paymentsOf(d)).filter((p) => p.invoice_id === d.invoice.id && (p.status === "completed" || p.status === "refunded"));
const eventCount = async (d: Dunned, type: string, match: (body: any) => boolean = () => true) => (await eventsOf(d.acct.id, type)).filter((e) => match(e.body)).length;

describe("double charging", () => {
  it("Pay on the page racing POST /invoices/{id}/pay charges once", async () => {
    const d = await dunned();
    await cardNowPays(d);
    const [page, api] = await Promise.all([browse(`${d.page}/pay`, SAVED), call(`/invoices/${d.invoice.id}/pay`, { key: d.acct.key, method: "POST" })]);
    expect([303, 409]).toContain(page.status);
    expect([200, 409]).toContain(api.status);
    expect(await moneyTaken(d)).toHaveLength(1);
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: d.invoice.amount_due });
    expect(await eventCount(d, "invoice.paid", (b) => b.data.id === d.invoice.id)).toBe(1);
  });

  it("Pay racing a stale claim whose worker died: the page charges nothing while the claim stands; the takeover charges once", async () => {
    const d = await dunned();
    await cardNowPays(d);
    // A dunning worker claimed the next attempt and died before the processor answered.
    const old = new Date(Date.now() - 60 * 60_000).toISOString();
    await env.DB.prepare("UPDATE subscription_periods SET attempts = attempts + 1, updated_at = ? WHERE subscription_id = ?").bind(old, d.sub).run();
    const { settleStaleClaims } = await import("../../src/billing/claims");
    const [page] = await Promise.all([browse(`${d.page}/pay`, card(CARDS.visa)), settleStaleClaims(env as any)]);
    expect([303, 409]).toContain(page.status);
    await browse(`${d.page}/pay`, card(CARDS.visa));
    await settleStaleClaims(env as any);
    expect(await moneyTaken(d)).toHaveLength(1);
    expect((await invoiceOf(d)).status).toBe("paid");
  });

  it("two tabs, one with the saved card and one with a new card that asks for 3-D Secure: one payment only", async () => {
    const d = await dunned();
    await cardNowPays(d);
    const answers = await Promise.all([browse(`${d.page}/pay`, SAVED), browse(`${d.page}/pay`, card(AUTH_CARD))]);
    for (const a of answers) if (a.location?.includes("/pay/authenticate/")) await browse(`${new URL(a.location).pathname}/complete`, {});
    expect(await moneyTaken(d)).toHaveLength(1);
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: d.invoice.amount_due });
    expect(await eventCount(d, "invoice.paid", (b) => b.data.id === d.invoice.id)).toBe(1);
  });
});

describe("3-D Secure outcomes", () => {
  async function waiting() {
    const d = await dunned(AUTH_CARD);
    const res = await browse(`${d.page}/pay`, SAVED);
    expect(res.status).toBe(303);
    const challenge = new URL(res.location!).pathname;
    return { d, challenge, paymentId: challenge.split("/")[3] };
  }

  it("Complete twice at once, and Fail beside them: one outcome, the period paid once, its events once", async () => {
    const { d, challenge, paymentId } = await waiting();
    await Promise.all([browse(`${challenge}/complete`, {}), browse(`${challenge}/complete`, {}), browse(`${challenge}/fail`, {})]);
    const payment = (await call(`/payments/${paymentId}`, { key: d.acct.key })).body;
    const invoice = await invoiceOf(d);
    if (payment.status === "completed") {
      expect(invoice).toMatchObject({ status: "paid", amount_paid: d.invoice.amount_due, payment_id: paymentId });
      expect(payment.amount).toBe(d.invoice.amount_due);
      expect(await eventCount(d, "invoice.paid", (b) => b.data.id === d.invoice.id)).toBe(1);
      expect(await eventCount(d, "payment.completed", (b) => b.data.transaction_id === paymentId)).toBe(1);
      expect((await getSubscription(d.acct, d.sub)).status).toBe("active");
    } else {
      expect(payment.status).toBe("failed");
      expect(invoice.status).toBe("open");
      expect(await eventCount(d, "payment.completed", (b) => b.data.transaction_id === paymentId)).toBe(0);
    }
  });

  it("Fail then Complete: nothing charged, the invoice open, one attempt counted", async () => {
    const { d, challenge, paymentId } = await waiting();
    await browse(`${challenge}/fail`, {});
    await browse(`${challenge}/complete`, {});
    expect((await call(`/payments/${paymentId}`, { key: d.acct.key })).body.status).toBe("failed");
    expect((await invoiceOf(d)).status).toBe("open");
    expect(await moneyTaken(d)).toHaveLength(0);
    expect((await env.DB.prepare("SELECT dunning_attempts AS n FROM subscriptions WHERE id = ?").bind(d.sub).first<{ n: number }>())!.n).toBe(2);
  });

  it("Complete after the hour's abandonment charges nothing and the invoice stays open", async () => {
    const { d, challenge, paymentId } = await waiting();
    const { expireAuthorizations } = await import("../../src/payments/intents");
    await expireAuthorizations(env as any, Date.now() + 61 * 60_000);
    await browse(`${challenge}/complete`, {});
    expect((await call(`/payments/${paymentId}`, { key: d.acct.key })).body.status).toBe("canceled");
    expect((await invoiceOf(d)).status).toBe("open");
    expect(await moneyTaken(d)).toHaveLength(0);
    expect(await eventCount(d, "invoice.paid")).toBe(0);
  });

  it("the merchant's cancel racing Complete: paid once or canceled, never both, never the period paid without money", async () => {
    const { d, challenge, paymentId } = await waiting();
    await Promise.all([call(`/payments/${paymentId}/cancel`, { key: d.acct.key, method: "POST" }), browse(`${challenge}/complete`, {})]);
    const payment = (await call(`/payments/${paymentId}`, { key: d.acct.key })).body;
    const invoice = await invoiceOf(d);
    if (payment.status === "completed") expect(invoice.status).toBe("paid");
    else {
      expect(payment.status).toBe("canceled");
      expect(invoice.status).toBe("open");
      expect(await eventCount(d, "invoice.paid")).toBe(0);
    }
  });

  it("voiding the invoice or canceling the subscription while its payer authenticates is refused, and Complete then pays once", async () => {
    const { d, challenge } = await waiting();
    expect((await call(`/invoices/${d.invoice.id}/void`, { key: d.acct.key, method: "POST" })).status).toBe(409);
    expect((await call(`/subscriptions/${d.sub}`, { key: d.acct.key, method: "DELETE" })).status).toBe(409);
    await browse(`${challenge}/complete`, {});
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: d.invoice.amount_due });
    expect(await moneyTaken(d)).toHaveLength(1);
  });

  it("a new card that asks for 3-D Secure and fails it is not saved on the subscription; one that completes is", async () => {
    const d = await dunned();
    const before = await getSubscription(d.acct, d.sub);
    const first = await browse(`${d.page}/pay`, card(AUTH_CARD));
    expect(first.location).toContain("/pay/authenticate/");
    await browse(`${new URL(first.location!).pathname}/fail`, {});
    expect((await getSubscription(d.acct, d.sub)).card.last4).toBe(before.card.last4);
    const second = await browse(`${d.page}/pay`, card(AUTH_CARD));
    expect(second.location).toContain("/pay/authenticate/");
    await browse(`${new URL(second.location!).pathname}/complete`, {});
    const after = await getSubscription(d.acct, d.sub);
    expect(after.status).toBe("active");
    expect(after.card.last4).toBe("3184");
  });
});

describe("money", () => {
  it("with tax and a coupon, the page charges exactly the invoice's amount_due, once, and pays it in full", async () => {
    const acct = await signup("Taxed Pay Co");
    const user = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
    const vat = (await call("/tax-rates", { key: acct.key, body: { display_name: "VAT", percentage: "20", inclusive: false } })).body;
    const coupon = await call("/coupons", { key: acct.key, body: { name: "Odd", percent_off: 15, duration: "forever" } });
    expect(coupon.status, coupon.text).toBe(201);
    const plan = await createPlan(acct, { price: 19.99, name: "Pro", default_tax_rates: [vat.id] });
    const sub = await subscribed(acct, user.id, plan.id, CARDS.declineAfterFirst, { coupon: coupon.body.id });
    await makeDue(sub.id);
    await runJobs({ kind: "billing.renew", subscriptionIds: [sub.id] });
    const [invoice] = (await call(`/invoices?subscription_id=${sub.id}&status=open`, { key: acct.key })).body.data;
    expect(invoice.discount).toBeGreaterThan(0);
    expect(invoice.tax).toBeGreaterThan(0);
    expect(invoice.amount_due).toBe(invoice.subtotal - invoice.discount + invoice.tax);
    const d: Dunned = { acct, sub: sub.id, invoice, page: new URL(invoice.hosted_invoice_url).pathname };
    expect((await browse(d.page)).text).toContain(`Pay ${(invoice.amount_due / 100).toFixed(2)} USD`);
    expect((await browse(`${d.page}/pay`, card(CARDS.visa))).status).toBe(303);
    const taken = await moneyTaken(d);
    expect(taken).toHaveLength(1);
    expect(taken[0].amount).toBe(invoice.amount_due);
    expect(await invoiceOf(d)).toMatchObject({ status: "paid", amount_paid: invoice.amount_due, amount_due: invoice.amount_due });
  });
});

describe("tokens and secrets", () => {
  it("the page and the 3-D Secure page carry no API key, and a cross-site POST charges nothing", async () => {
    const d = await dunned(AUTH_CARD);
    const page = await browse(d.page);
    expect(page.text).not.toContain(d.acct.key);
    expect(page.text).not.toMatch(/sk_(test|live)_/);
    expect(page.headers.get("content-security-policy") ?? "").toContain("frame-ancestors 'none'");
    const crossSite = await browse(`${d.page}/pay`, SAVED, { "sec-fetch-site": "cross-site" });
    expect(crossSite.status).toBe(400);
    const res = await browse(`${d.page}/pay`, SAVED);
    const challenge = await browse(res.location!);
    expect(challenge.text).not.toContain(d.acct.key);
    expect(challenge.headers.get("content-security-policy") ?? "").toContain("frame-ancestors 'none'");
  });

  it("another invoice's secret, and the page of an invoice whose account is another, answer 404 and charge nothing", async () => {
    const d = await dunned();
    const other = await dunned(CARDS.declineAfterFirst, "Other Attack Co");
    const otherSecret = other.page.split("/").pop()!;
    const mine = d.page.split("/").slice(0, -1).join("/");
    expect((await browse(`${mine}/${otherSecret}`)).status).toBe(404);
    expect((await browse(`${mine}/${otherSecret}/pay`, SAVED)).status).toBe(404);
    expect(await moneyTaken(d)).toHaveLength(0);
    expect(await moneyTaken(other)).toHaveLength(0);
  });
});

describe("another's card or payment posted to the page", () => {
  it("another user's saved-card token, or a PaymentMethod that is no test name, is refused and charges nothing; another invoice's payment_id says nothing", async () => {
    const d = await dunned();
    const other = await dunned(AUTH_CARD, "Other Token Co");
    const token = (await env.DB.prepare("SELECT processor_token AS t FROM subscriptions WHERE id = ?").bind(other.sub).first<{ t: string }>())!.t;
    for (const processor_token of [token, `pm_${token}`, "pm_1Other000000000000000000"]) {
      const res = await browse(`${d.page}/pay`, { source: "processor_token", processor_token });
      expect(res.status, processor_token).toBe(400);
      expect(res.text).not.toContain(token);
    }
    expect(await moneyTaken(d)).toHaveLength(0);
    // The other invoice's payment that failed 3-D Secure: its id on this invoice's page says nothing of it.
    const pay = await browse(`${other.page}/pay`, SAVED);
    await browse(`${new URL(pay.location!).pathname}/fail`, {});
    const otherPayment = new URL(pay.location!).pathname.split("/")[3];
    expect((await browse(`${other.page}?payment_id=${otherPayment}`)).text).toContain("did not succeed");
    expect((await browse(`${d.page}?payment_id=${otherPayment}`)).text).not.toContain("did not succeed");
  });
});

describe("an account move while a page payment waits", () => {
  it("the move goes through, and Complete then pays the invoice once on the new shard", { timeout: 60_000 }, async () => {
    const d = await dunned(AUTH_CARD, "Moving Pay Co");
    const res = await browse(`${d.page}/pay`, SAVED);
    const challenge = new URL(res.location!).pathname;
    const paymentId = challenge.split("/")[3];
    const moved = await call(`/api/accounts/${d.acct.id}/move`, { body: { to_shard: OTHER_SHARD, drain_seconds: 0 } });
    expect(moved.status, moved.text).toBe(200);
    // The page still offers to continue the challenge, from the new shard.
    expect((await browse(d.page)).text).toContain("Continue to your bank");
    const done = await browse(`${challenge}/complete`, {});
    expect(done.status, done.text).toBe(303);
    const there = envOf(OTHER_SHARD).DB;
    expect(await there.prepare("SELECT status, amount_paid AS paid FROM invoices WHERE id = ?").bind(d.invoice.id).first()).toEqual({ status: "paid", paid: d.invoice.amount_due });
    expect(await there.prepare("SELECT status FROM payments WHERE id = ?").bind(paymentId).first()).toEqual({ status: "completed" });
    expect(await there.prepare("SELECT status FROM subscriptions WHERE id = ?").bind(d.sub).first()).toEqual({ status: "active" });
    expect((await browse(d.page)).text).toContain("paid");
    // Nothing left on the old shard to charge or settle again.
    expect(await env.DB.prepare("SELECT count(*) AS n FROM payments WHERE id = ?").bind(paymentId).first()).toEqual({ n: 0 });
  });
});
