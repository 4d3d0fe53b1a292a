// The pages of one object: a user (their test clock's time, the cards seen on their charges, their
// subscriptions, payments and payouts), a payment (with a refund that comes back to it), a payout
// and a subscription (with its payments), each linked from every list that names it; another
// account's id answers 404. Users on a test clock are shown with the clock's time in every list.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createKey, createPlan, createUser, payoutWithoutSettlement, subscribed } from "../support/fixtures";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Details");
  cookie = await signIn(acct.key);
});

/** The row of a list whose data attribute names `id`, as HTML. */
function rowOf(html: string, attribute: string, id: string): string {
  const start = html.indexOf(`<tr ${attribute}="${id}"`);
  expect(start, `a row for ${id}`).toBeGreaterThan(-1);
  return html.slice(start, html.indexOf("</tr>", start));
}

describe("an object's page, linked from every list", () => {
  it("a user's page shows their cards, subscriptions, payments and payouts, each linked to its own page", async () => {
    const ada = await createUser(acct, { name: "Ada Details", email: "ada.details@example.com" });
    const plan = await createPlan(acct, { name: "Detail Plan" });
    const sub = await subscribed(acct, ada.id, plan.id);
    const payout = await payoutWithoutSettlement(acct, { recipient_id: ada.id });
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    const userHref = `/dashboard/users/${ada.id}`;

    // Every list that names the user links to their page; every list links its objects to theirs.
    for (const [list, attribute, id, own] of [
      ["/dashboard/users", "data-user", ada.id, userHref],
      ["/dashboard/subscriptions", "data-subscription", sub.id, `/dashboard/subscriptions/${sub.id}`],
      ["/dashboard/payments", "data-payment", payment.id, `/dashboard/payments/${payment.id}`],
      ["/dashboard/payouts", "data-payout", payout.id, `/dashboard/payouts/${payout.id}`],
    ] as const) {
      const row = rowOf((await dashboardFetch(list, { cookie })).html, attribute, id);
      expect(row, list).toContain(`href="${userHref}"`);
      expect(row, list).toContain(`href="${own}"`);
    }

    const page = await dashboardFetch(userHref, { cookie });
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Ada Details");
    expect(text).toContain("ada.details@example.com");
    expect(page.html).toContain('data-section="cards"');
    expect(textOf(page.html.slice(page.html.indexOf('data-section="cards"')))).toMatch(new RegExp(`^[^]*?Cards charged ${payment.card.brand} •••• ${payment.card.last4}`));
    expect(rowOf(page.html, "data-subscription", sub.id)).toContain(`href="/dashboard/subscriptions/${sub.id}"`);
    expect(textOf(rowOf(page.html, "data-subscription", sub.id))).toContain("Detail Plan");
    expect(rowOf(page.html, "data-payment", payment.id)).toContain(`href="/dashboard/payments/${payment.id}"`);
    expect(rowOf(page.html, "data-payout", payout.id)).toContain(`href="/dashboard/payouts/${payout.id}"`);
  });

  it("a payment's page shows amount and status first, its customer and subscription, and refunds back to itself", async () => {
    const user = await createUser(acct, { name: "Pay Details", email: "pay.details@example.com" });
    const plan = await createPlan(acct, { name: "Refundable", price: 20, currency: "usd" });
    const sub = await subscribed(acct, user.id, plan.id);
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    const path = `/dashboard/payments/${payment.id}`;
    const page = await dashboardFetch(path, { cookie });
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toMatch(/Payment 20\.00 USD completed/);
    expect(page.html).toContain(`href="/dashboard/users/${user.id}"`);
    expect(page.html).toContain(`href="/dashboard/subscriptions/${sub.id}"`);

    const refunded = await dashboardFetch(`${path}/refund`, { cookie, form: { ...formOf(page.html, `${path}/refund`), amount: "5" } });
    expect(refunded.status, refunded.html.slice(0, 300)).toBe(303);
    expect(refunded.location).toMatch(new RegExp(`^${path}\\?done=refund_created`));
    const after = await dashboardFetch(path, { cookie });
    expect(textOf(after.html)).toContain("5.00 USD refunded");
    expect(after.html).toMatch(/<tr data-refund="re_[^"]+"/);
  });

  it("a payout's and a subscription's pages show their facts and actions", async () => {
    const user = await createUser(acct, { name: "Sub Details", email: "sub.details@example.com" });
    const plan = await createPlan(acct, { name: "Sub Page Plan" });
    const sub = await subscribed(acct, user.id, plan.id);
    const subPage = await dashboardFetch(`/dashboard/subscriptions/${sub.id}`, { cookie });
    expect(subPage.status).toBe(200);
    expect(textOf(subPage.html)).toMatch(/Subscription 1 × Sub Page Plan active Cancel now At period end/);
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect(rowOf(subPage.html, "data-payment", payment.id)).toContain(`href="/dashboard/payments/${payment.id}"`);
    expect(subPage.html).toContain(`href="/dashboard/invoices?subscription_id=${sub.id}"`);

    const payout = await payoutWithoutSettlement(acct, { recipient_id: user.id });
    const payoutPage = await dashboardFetch(`/dashboard/payouts/${payout.id}`, { cookie });
    expect(payoutPage.status).toBe(200);
    expect(payoutPage.html).toContain(`data-payout-page="${payout.id}"`);
    expect(textOf(payoutPage.html)).toMatch(/pending Cancel/);
    expect(payoutPage.html).toContain(`href="/dashboard/users/${user.id}"`);
  });

  it("another account's object has no page here (404), and a key without users:read sees no user link", async () => {
    const other = await signup("Dash Details Other");
    const stranger = await createUser(other, { name: "Stranger", email: "stranger@example.com" });
    const plan = await createPlan(other);
    const sub = await subscribed(other, stranger.id, plan.id);
    const payout = await payoutWithoutSettlement(other, { recipient_id: stranger.id });
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: other.key })).body.data[0];
    for (const path of [`/dashboard/users/${stranger.id}`, `/dashboard/subscriptions/${sub.id}`, `/dashboard/payments/${payment.id}`, `/dashboard/payouts/${payout.id}`]) {
      const page = await dashboardFetch(path, { cookie });
      expect(page.status, path).toBe(404);
      expect(page.html, path).not.toContain("Stranger");
    }

    const mine = await createUser(acct, { name: "Hidden Link", email: "hidden.link@example.com" });
    const myPlan = await createPlan(acct);
    const mySub = await subscribed(acct, mine.id, myPlan.id);
    const reader = await createKey(acct, ["subscriptions:read"], "no users");
    const limited = await signIn(reader.secret);
    const row = rowOf((await dashboardFetch("/dashboard/subscriptions", { cookie: limited })).html, "data-subscription", mySub.id);
    expect(row).not.toContain(`href="/dashboard/users/${mine.id}"`);
    expect((await dashboardFetch(`/dashboard/users/${mine.id}`, { cookie: limited })).status).toBe(403);
  });
});

describe("test clocks", () => {
  it("a user on a test clock, and what they are billed for, show the clock's time", async () => {
    const clock = await call("/api/test-clocks", { key: acct.key, body: { frozen_time: "2031-03-04T05:06:07.000Z", name: "spring" } });
    expect(clock.status, clock.text).toBe(201);
    const user = await createUser(acct, { name: "Clocked User", email: "clocked@example.com", testClock: clock.body.id });
    const plan = await createPlan(acct, { name: "Clocked Plan" });
    const sub = await subscribed(acct, user.id, plan.id);
    const clockText = "test clock spring: 2031-03-04 05:06:07 UTC";

    const userPage = await dashboardFetch(`/dashboard/users/${user.id}`, { cookie });
    expect(textOf(userPage.html)).toContain(clockText);
    expect(textOf(rowOf((await dashboardFetch("/dashboard/users", { cookie })).html, "data-user", user.id))).toContain(clockText);
    expect(textOf(rowOf((await dashboardFetch("/dashboard/subscriptions", { cookie })).html, "data-subscription", sub.id))).toContain(clockText);
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    expect(textOf(rowOf((await dashboardFetch("/dashboard/payments", { cookie })).html, "data-payment", payment.id))).toContain(clockText);

    // Advanced, the clock's new time is what every page shows.
    const advanced = await call(`/api/test-clocks/${clock.body.id}/advance`, { key: acct.key, body: { frozen_time: "2031-03-10T00:00:00.000Z" } });
    expect(advanced.status, advanced.text).toBe(200);
    expect(textOf((await dashboardFetch(`/dashboard/subscriptions/${sub.id}`, { cookie })).html)).toContain("test clock spring: 2031-03-10 00:00:00 UTC");
  });
});
