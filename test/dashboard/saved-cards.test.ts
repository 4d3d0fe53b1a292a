// A user's page in the dashboard lists their saved cards (read-only): brand, last 4 and expiry,
// never a detached one, and another account's user is not found.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { dashboardFetch, signIn, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Cards");
  cookie = await signIn(acct.key);
});

describe("a user's saved cards", () => {
  it("lists the attached ones, linked from the users list", async () => {
    const grace = await createUser(acct, { name: "Grace Hopper", email: "grace@navy.example" });
    const visa = await call(`/api/users/${grace.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_visa" } });
    const mastercard = await call(`/api/users/${grace.id}/payment-methods`, { key: acct.key, body: { processor_token: "pm_card_mastercard" } });
    expect((await call(`/api/users/${grace.id}/payment-methods/${mastercard.body.id}`, { method: "DELETE", key: acct.key })).status).toBe(200);

    const list = await dashboardFetch("/dashboard/users", { cookie });
    expect(list.html).toContain(`href="/dashboard/users/${grace.id}"`);
    const page = await dashboardFetch(`/dashboard/users/${grace.id}`, { cookie });
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Saved cards");
    expect(text).toContain(`visa •••• 4242 12/${visa.body.card.exp_year}`);
    expect(page.html).toContain(`data-payment-method="${visa.body.id}"`);
    expect(page.html).not.toContain(mastercard.body.id);
  });

  it("answers 404 for another account's user", async () => {
    const other = await signup("Dash Cards Other");
    const stranger = await createUser(other, { name: "Not Yours" });
    const page = await dashboardFetch(`/dashboard/users/${stranger.id}`, { cookie });
    expect(page.status).toBe(404);
    // The API's own answer (the user is not this account's), not a page that does not exist.
    expect(textOf(page.html)).toContain(`No such user: '${stranger.id}'`);
    expect(page.html).not.toContain("Not Yours");
  });
});
