// What the list pages show: a subscription's, payment's or payout's user by name and email and its
// plan by name (the id on hover), read for the whole page in one batch, and only where the key may
// read users or plans; long ids cut in the middle with the full id kept; and the favicon.
import { env } from "../support/env";
import { beforeAll, describe, expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import { namesFor } from "../../src/dashboard/names";
import type { Auth } from "../../src/context";
import { type Account, call, signup } from "../support/http";
import { createKey, createPlan, createUser, payoutWithoutSettlement, subscribed } from "../support/fixtures";
import { dashboardFetch, signIn, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Names");
  cookie = await signIn(acct.key);
});

/** The row of the list whose data attribute names `id`, as HTML. */
function rowOf(html: string, attribute: string, id: string): string {
  const start = html.indexOf(`<tr ${attribute}="${id}"`);
  expect(start, `a row for ${id}`).toBeGreaterThan(-1);
  return html.slice(start, html.indexOf("</tr>", start));
}

describe("names, not ids", () => {
  it("subscriptions, payments and payouts show the user's name and email and the plan's name, with the id as the title", async () => {
    const grace = await createUser(acct, { name: "Grace Hopper", email: "grace@navy.example" });
    const plan = await createPlan(acct, { name: "Compiler Pro" });
    const sub = await subscribed(acct, grace.id, plan.id);
    const payout = await payoutWithoutSettlement(acct, { recipient_id: grace.id });

    const subscriptions = await dashboardFetch("/dashboard/subscriptions", { cookie });
    const subRow = rowOf(subscriptions.html, "data-subscription", sub.id);
    expect(textOf(subRow)).toContain("Grace Hopper grace@navy.example Compiler Pro");
    expect(subRow).toContain(`title="${grace.id}"`);
    expect(subRow).toContain(`title="${plan.id}"`);

    const payments = await call(`/payments?subscription_id=${sub.id}`, { key: acct.key });
    const paymentsPage = await dashboardFetch("/dashboard/payments", { cookie });
    expect(textOf(rowOf(paymentsPage.html, "data-payment", payments.body.data[0].id))).toContain("Grace Hopper grace@navy.example");

    const payouts = await dashboardFetch("/dashboard/payouts", { cookie });
    const payoutRow = rowOf(payouts.html, "data-payout", payout.id);
    expect(textOf(payoutRow)).toContain("Grace Hopper grace@navy.example");
    expect(payoutRow).toContain(`title="${grace.id}"`);
  });

  it("a key that cannot read users or plans sees their ids, not their names", async () => {
    const user = await createUser(acct, { name: "Hidden Name", email: "hidden@example.com" });
    const plan = await createPlan(acct, { name: "Hidden Plan" });
    const sub = await subscribed(acct, user.id, plan.id);
    const reader = await createKey(acct, ["subscriptions:read"], "subscriptions only");
    const limited = await signIn(reader.secret);
    const page = await dashboardFetch("/dashboard/subscriptions", { cookie: limited });
    expect(page.status).toBe(200);
    const row = rowOf(page.html, "data-subscription", sub.id);
    expect(textOf(row)).not.toContain("Hidden Name");
    expect(textOf(row)).not.toContain("hidden@example.com");
    expect(textOf(row)).not.toContain("Hidden Plan");
    expect(row).toContain(`<span class="id" title="${user.id}">`);
    expect(row).toContain(`<span class="id" title="${plan.id}">`);
  });

  it("reads the names of a whole page in one batch of two queries, scoped to the account", async () => {
    const other = await signup("Dash Names Other");
    const stranger = await createUser(other, { name: "Someone Else", email: "else@example.com" });
    const users: { id: string }[] = [];
    for (let i = 0; i < 5; i++) users.push(await createUser(acct, { name: `Batch User ${i}`, email: `batch${i}@example.com` }));
    const plan = await createPlan(acct, { name: "Batch Plan" });
    const keys = await call("/api/keys?limit=100", { key: acct.key });
    const keyId = keys.body.data.find((k: { kind: string }) => k.kind === "secret").id;
    const auth: Auth = { accountId: acct.id, keyId, mode: "test", scopes: ["*"], credential: "secret_key", apiVersion: "2026-11-01" } as Auth;

    const db = createDb(env.DB);
    const calls = { batch: 0, select: 0 };
    const counted = new Proxy(db, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop === "batch" || prop === "select") {
          return (...args: unknown[]) => {
            calls[prop] += 1;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return value;
      },
    });
    // Twenty rows naming five users (and one of another account) and one plan, as a page would.
    const rowUsers = Array.from({ length: 20 }, (_, i) => users[i % 5].id);
    const names = await namesFor(counted as typeof db, auth, { users: [...rowUsers, stranger.id, null], plans: Array(20).fill(plan.id) });
    expect(calls).toEqual({ batch: 1, select: 2 });
    expect([...names.users.keys()].sort()).toEqual(users.map((u) => u.id).sort());
    expect(names.users.get(users[3].id)).toEqual({ name: "Batch User 3", email: "batch3@example.com" });
    expect(names.users.has(stranger.id)).toBe(false);
    expect(names.plans.get(plan.id)).toEqual({ name: "Batch Plan" });

    // Nothing to look up, or nothing the key may read: no query at all.
    calls.batch = calls.select = 0;
    await namesFor(counted as typeof db, { ...auth, scopes: ["subscriptions:read"] }, { users: rowUsers, plans: [plan.id] });
    await namesFor(counted as typeof db, auth, { users: [], plans: [] });
    expect(calls).toEqual({ batch: 0, select: 0 });
  });
});

describe("ids", () => {
  it("a long id is cut in the middle on screen and kept whole in the text and the title", async () => {
    const user = await createUser(acct, { name: "Id Person", email: "id@example.com" });
    const page = await dashboardFetch("/dashboard/users", { cookie });
    const row = rowOf(page.html, "data-user", user.id);
    expect(row).toContain(`<span class="id" title="${user.id}"><span class="id-head">${user.id.slice(0, -6)}</span><span class="id-tail">${user.id.slice(-6)}</span></span>`);
  });
});

describe("GET /favicon.ico", () => {
  it("answers an icon from this origin, cacheable", async () => {
    const res = await call("/favicon.ico");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/x-icon");
    expect(res.headers.get("cache-control")).toMatch(/max-age=\d+/);
  });
});
