// A form sent with problems is drawn again, not replaced by an error page: every problem beside its
// field (the dashboard's own checks and the API route's schema find them all before anything is
// sent), what was typed kept, the list still on the page, and nothing created. A problem only the
// API can know (its first and only error) is shown beside the field its `param` names, with its code.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createPlan, createUser, subscribed } from "../support/fixtures";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;
beforeAll(async () => {
  acct = await signup("Dash Forms");
  cookie = await signIn(acct.key);
});

/** The problems drawn beside fields, by field key. */
function problemsOf(html: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const m of html.matchAll(/<span class="field-error" id="([^"]+)" data-problem="([^"]+)">([\s\S]*?)<\/span>/g)) found[m[2]] = textOf(m[3]);
  return found;
}

/** The input named `name` (the `index`th of that name) in the form posting to `action`, as HTML. */
function inputOf(html: string, action: string, name: string, index = 0): string {
  const start = html.indexOf(`action="${action}"`);
  const form = html.slice(start, html.indexOf("</form>", start));
  const inputs = [...form.matchAll(new RegExp(`<(input|select)[^>]*name="${name}"[^>]*>`, "g"))].map((m) => m[0]);
  expect(inputs.length, `an input ${name} in ${action}`).toBeGreaterThan(index);
  return inputs[index];
}

async function planNames() {
  const plans = await call("/subscription-plans?limit=100", { key: acct.key });
  return plans.body.data.map((p: { name: string }) => p.name);
}

describe("the plan form", () => {
  it("shows every problem of a fixed plan beside its field, keeps what was typed, and creates nothing", async () => {
    await createPlan(acct, { name: "Already Here" });
    const before = await planNames();
    const page = await submit(cookie, "/dashboard/plans", "/dashboard/plans", { name: "  ", currency: "zzz", interval: "fortnight", pricing_model: "fixed", price: "abc", description: "Kept <as typed>" });
    expect(page.status).toBe(400);
    const problems = problemsOf(page.html);
    expect(Object.keys(problems).sort()).toEqual(["currency", "interval", "name", "price"]);
    expect(problems.name).toContain("Give the plan a name");
    expect(problems.currency).toContain("'zzz' is not a currency");
    expect(problems.interval).toContain("month or year");
    expect(problems.price).toContain("'abc' is not one");
    expect(textOf(page.html)).toContain("4 fields need a change");
    expect(textOf(page.html)).toContain("Nothing was sent to the API");
    // What was typed is still there, escaped; each bad field is marked and described by its problem.
    expect(inputOf(page.html, "/dashboard/plans", "currency")).toContain('value="zzz"');
    expect(inputOf(page.html, "/dashboard/plans", "price")).toContain('value="abc"');
    expect(inputOf(page.html, "/dashboard/plans", "price")).toMatch(/aria-invalid="true" aria-describedby="problem-[\w-]+-price"/);
    expect(inputOf(page.html, "/dashboard/plans", "description")).toContain('value="Kept &lt;as typed&gt;"');
    expect(inputOf(page.html, "/dashboard/plans", "description")).not.toContain("aria-invalid");
    // The page is the plans page, with its list, not an error page; and it can be sent again.
    expect(textOf(page.html)).toContain("Already Here");
    expect(formOf(page.html, "/dashboard/plans").idempotency_key).toMatch(/^dash_[0-9A-Za-z]{32}$/);
    expect(await planNames()).toEqual(before);
  });

  it("shows the problems of several tier rows, each beside its own field, with the currency's decimals checked", async () => {
    const before = await planNames();
    const page = await submit(cookie, "/dashboard/plans", "/dashboard/plans", {
      name: "Broken Seats",
      currency: "usd",
      interval: "month",
      pricing_model: "volume",
      price: "10",
      tier_up_to: ["5", "3", "", "20"],
      tier_unit_price: ["7.001", "", "", "5"],
      tier_flat_price: ["", "1.5", "", ""],
    });
    expect(page.status).toBe(400);
    const problems = problemsOf(page.html);
    expect(Object.keys(problems).sort()).toEqual(["price", "tier_unit_price.0", "tier_unit_price.1", "tier_up_to.1", "tier_up_to.3"]);
    expect(problems.price).toContain("priced by its tiers");
    expect(problems["tier_unit_price.0"]).toContain("USD has 2 decimals");
    expect(problems["tier_up_to.1"]).toContain("more than the tier before it (5)");
    expect(problems["tier_unit_price.1"]).toContain("enter a unit price");
    expect(problems["tier_up_to.3"]).toContain("leave \"up to\" empty");
    // Row by row, what was typed is kept (the empty third row stays empty).
    expect(inputOf(page.html, "/dashboard/plans", "tier_up_to", 1)).toContain('value="3"');
    expect(inputOf(page.html, "/dashboard/plans", "tier_flat_price", 1)).toContain('value="1.5"');
    expect(inputOf(page.html, "/dashboard/plans", "tier_up_to", 3)).toContain('value="20"');
    expect(inputOf(page.html, "/dashboard/plans", "tier_up_to", 2)).toContain('value=""');
    expect(inputOf(page.html, "/dashboard/plans", "pricing_model")).toBe('<select name="pricing_model">');
    expect(page.html).toMatch(/<option value="volume" selected="">volume \(tiers\)<\/option>/);
    expect(await planNames()).toEqual(before);

    // Corrected, the same form goes through.
    const fixed = await submit(cookie, "/dashboard/plans", "/dashboard/plans", {
      name: "Fixed Seats",
      currency: "usd",
      interval: "month",
      pricing_model: "volume",
      tier_up_to: ["5", "10", "", ""],
      tier_unit_price: ["7", "6.5", "6", ""],
    });
    expect(fixed.status, fixed.html.slice(0, 400)).toBe(303);
    expect(await planNames()).toContain("Fixed Seats");
  });

  it("checks the body with the API route's own schema too: a name too long for it is shown beside the name", async () => {
    const page = await submit(cookie, "/dashboard/plans", "/dashboard/plans", { name: "n".repeat(201), currency: "usd", interval: "month", pricing_model: "fixed", price: "abc" });
    expect(page.status).toBe(400);
    expect(Object.keys(problemsOf(page.html)).sort()).toEqual(["name", "price"]);
  });
});

describe("the key, endpoint and test clock forms", () => {
  it("a key with no scope: the problem beside the scopes, the name kept", async () => {
    const page = await submit(cookie, "/dashboard/keys", "/dashboard/keys", { name: "nothing ticked" });
    expect(page.status).toBe(400);
    expect(Object.keys(problemsOf(page.html))).toEqual(["scopes"]);
    expect(inputOf(page.html, "/dashboard/keys", "name")).toContain('value="nothing ticked"');
  });

  it("an endpoint with a bad URL and no events: both problems, the ticked events and ordering kept", async () => {
    const page = await submit(cookie, "/dashboard/webhooks", "/dashboard/webhooks", { url: "ftp://user:pw@example.com/x", ordering: "per_object" });
    expect(page.status).toBe(400);
    const problems = problemsOf(page.html);
    expect(Object.keys(problems).sort()).toEqual(["events", "url"]);
    expect(problems.url).toContain("credentials");
    expect(page.html).toMatch(/<option value="per_object" selected="">/);

    const oneBad = await submit(cookie, "/dashboard/webhooks", "/dashboard/webhooks", { url: "http://example.com/hook", events: ["customer.created", "payout.paid"] });
    expect(oneBad.status).toBe(400);
    expect(Object.keys(problemsOf(oneBad.html))).toEqual(["url"]);
    expect(inputOf(oneBad.html, "/dashboard/webhooks", "events", 0)).toBe('<input type="checkbox" name="events" value="*"/>');
    expect(oneBad.html).toContain('<input type="checkbox" name="events" value="customer.created" checked=""/>');
    expect(oneBad.html).toContain('<input type="checkbox" name="events" value="payout.paid" checked=""/>');
  });

  it("a test clock moved backwards: the API's one problem beside that clock's field, with its code; the other clocks' forms untouched", async () => {
    const created = await submit(cookie, "/dashboard/test-clocks", "/dashboard/test-clocks", { frozen_time: "2026-05-01T00:00", name: "forward only" });
    expect(created.status).toBe(303);
    await submit(cookie, "/dashboard/test-clocks", "/dashboard/test-clocks", { frozen_time: "2026-05-01T00:00", name: "bystander" });
    const clocks = (await call("/api/test-clocks?limit=100", { key: acct.key })).body.data;
    const clock = clocks.find((k: { name: string }) => k.name === "forward only");
    const bystander = clocks.find((k: { name: string }) => k.name === "bystander");
    const action = `/dashboard/test-clocks/${clock.id}/advance`;
    const page = await submit(cookie, "/dashboard/test-clocks", action, { frozen_time: "2020-01-01T00:00" });
    expect(page.status).toBe(400);
    const problems = problemsOf(page.html);
    expect(Object.keys(problems)).toEqual(["frozen_time"]);
    expect(problems.frozen_time).toContain("frozen_time_not_forward");
    expect(inputOf(page.html, action, "frozen_time")).toContain('value="2020-01-01T00:00"');
    expect(inputOf(page.html, action, "frozen_time")).toContain('aria-invalid="true"');
    expect(inputOf(page.html, `/dashboard/test-clocks/${bystander.id}/advance`, "frozen_time")).not.toContain("aria-invalid");
    expect(textOf(page.html)).toMatch(/The API refused the form \(request id req_[0-9a-f]+ ?\)/);
    expect((await call(`/api/test-clocks/${clock.id}`, { key: acct.key })).body.frozen_time).toBe("2026-05-01T00:00:00.000Z");
  });
});

describe("the refund field", () => {
  it("a refund larger than what is left: the API's problem beside that payment's amount, the amount kept", async () => {
    const user = await createUser(acct, { name: "Form Payer", email: "form-payer@example.com" });
    const plan = await createPlan(acct, { price: 10, currency: "usd" });
    const sub = await subscribed(acct, user.id, plan.id);
    const payment = (await call(`/payments?subscription_id=${sub.id}`, { key: acct.key })).body.data[0];
    const action = `/dashboard/payments/${payment.id}/refund`;
    const page = await submit(cookie, "/dashboard/payments", action, { amount: "10.01" });
    expect(page.status).toBe(400);
    expect(problemsOf(page.html).amount).toContain("refund_exceeds_payment");
    expect(inputOf(page.html, action, "amount")).toContain('value="10.01"');
    expect(textOf(page.html)).toContain("One field needs a change");

    const local = await submit(cookie, "/dashboard/payments", action, { amount: "1.234" });
    expect(local.status).toBe(400);
    expect(problemsOf(local.html).amount).toContain("USD has 2 decimals");
    expect((await call(`/payments/${payment.id}`, { key: acct.key })).body.amount_refunded).toBe(0);
  });

  it("an API refusal that names no field (another account's payment) is shown above the list", async () => {
    const page = await dashboardFetch("/dashboard/payments", { cookie });
    const csrf = /name="csrf_token" value="([0-9a-f]{64})"/.exec(page.html)![1];
    const refused = await dashboardFetch("/dashboard/payments/pay_01jd2x4k5m6n7p8q9r0s1t2v3w/refund", { cookie, form: { csrf_token: csrf, mode: "test", idempotency_key: `dash_${"f".repeat(32)}` } });
    expect(refused.status).toBe(404);
    expect(textOf(refused.html)).toContain("resource_missing");
    expect(textOf(refused.html)).toContain("Payments");
  });
});
