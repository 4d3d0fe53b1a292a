// A one-off payment's page in the dashboard: what was authorized and until when, a capture (all,
// or an amount in major units) and a cancel, each asking first, the API's refusal shown beside
// the field, and no such forms once the payment is captured, canceled or in another state.
import { beforeAll, describe, expect, it } from "vitest";
import { type Account, call, signup } from "../support/http";
import { createUser } from "../support/fixtures";
import { CARDS, cardFields } from "../support/cards";
import { dashboardFetch, formOf, signIn, submit, textOf } from "./support";

let acct: Account;
let cookie: string;
let customer: { id: string };
beforeAll(async () => {
  acct = await signup("Dash One-off");
  cookie = await signIn(acct.key);
  customer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
});

async function authorize(amount: number, currency = "usd") {
  const res = await call("/payments", { key: acct.key, body: { amount, currency, user_id: customer.id, capture_method: "manual", description: "Order 1042", ...cardFields(CARDS.visa) } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe("requires_capture");
  return res.body as { id: string; capture_before: string };
}

const page = (id: string) => `/dashboard/payments/${id}`;

describe("a one-off payment's page", () => {
  it("shows what is authorized and until when, and captures part of it after asking", async () => {
    const p = await authorize(2500);
    const before = await dashboardFetch(page(p.id), { cookie });
    expect(before.status).toBe(200);
    const text = textOf(before.html);
    expect(text).toContain("Manual (authorize, then capture)");
    expect(text).toContain("25.00 USD capturable");
    expect(before.html).toContain(`datetime="${p.capture_before}"`);
    expect(text).toContain("Order 1042");
    // Both forms ask first, and say how much is held.
    expect(before.html).toMatch(/action="\/dashboard\/payments\/[^"]+\/capture"[^>]*data-confirm="Capture this payment\? Empty captures all 25\.00 USD authorized/);
    expect(before.html).toMatch(/action="\/dashboard\/payments\/[^"]+\/cancel"[^>]*data-confirm="Cancel this payment\? The 25\.00 USD authorized is released/);

    const done = await submit(cookie, page(p.id), `${page(p.id)}/capture`, { amount: "15.50" });
    expect(done.status, done.html.slice(0, 400)).toBe(303);
    expect(done.location).toBe(`${page(p.id)}?done=payment_captured&id=${p.id}`);
    const api = await call(`/payments/${p.id}`, { key: acct.key });
    expect(api.body).toMatchObject({ status: "completed", amount_received: 1550, amount_capturable: 0 });

    const after = await dashboardFetch(done.location!, { cookie });
    expect(textOf(after.html)).toContain(`Payment ${p.id} captured.`);
    expect(textOf(after.html)).toContain("Captured 15.50 USD");
    expect(after.html).not.toContain(`${page(p.id)}/capture"`);
    expect(after.html).not.toContain(`${page(p.id)}/cancel"`);
  });

  it("captures everything when the amount is left empty", async () => {
    const p = await authorize(1200);
    const done = await submit(cookie, page(p.id), `${page(p.id)}/capture`);
    expect(done.status).toBe(303);
    expect((await call(`/payments/${p.id}`, { key: acct.key })).body).toMatchObject({ status: "completed", amount_received: 1200 });
  });

  it("shows the API's refusal of a capture above what is held beside the field, and captures nothing", async () => {
    const p = await authorize(1000);
    const refused = await submit(cookie, page(p.id), `${page(p.id)}/capture`, { amount: "10.01" });
    expect(refused.status).toBe(400);
    expect(textOf(refused.html)).toMatch(/amount_too_large|at most/i);
    expect(refused.html).toContain('aria-invalid="true"');
    expect((await call(`/payments/${p.id}`, { key: acct.key })).body).toMatchObject({ status: "requires_capture", amount_capturable: 1000 });
  });

  it("refuses an amount it cannot read before asking the API", async () => {
    const p = await authorize(1000);
    const refused = await submit(cookie, page(p.id), `${page(p.id)}/capture`, { amount: "ten" });
    expect(refused.status).toBe(400);
    expect((await call(`/payments/${p.id}`, { key: acct.key })).body.status).toBe("requires_capture");
  });

  it("cancels an authorization after asking, and a second submit of the same form cancels nothing more", async () => {
    const p = await authorize(900);
    const loaded = await dashboardFetch(page(p.id), { cookie });
    const form = formOf(loaded.html, `${page(p.id)}/cancel`);
    const first = await dashboardFetch(`${page(p.id)}/cancel`, { cookie, form });
    expect(first.status).toBe(303);
    expect(first.location).toBe(`${page(p.id)}?done=payment_canceled&id=${p.id}`);
    // The same form again (a double click) carries the same Idempotency-Key: the API replays.
    const again = await dashboardFetch(`${page(p.id)}/cancel`, { cookie, form });
    expect(again.status).toBe(303);
    const api = await call(`/payments/${p.id}`, { key: acct.key });
    expect(api.body).toMatchObject({ status: "canceled", cancellation_reason: null, amount_capturable: 0 });
    const after = await dashboardFetch(page(p.id), { cookie });
    expect(textOf(after.html)).toContain("Canceled");
    expect(after.html).not.toContain(`${page(p.id)}/cancel"`);
  });

  it("offers neither form on a completed payment, and answers the API's 409 when one is posted anyway", async () => {
    const res = await call("/payments", { key: acct.key, body: { amount: 700, currency: "usd", user_id: customer.id, ...cardFields(CARDS.visa) } });
    expect(res.body.status).toBe("completed");
    const loaded = await dashboardFetch(page(res.body.id), { cookie });
    expect(loaded.html).not.toContain(`${page(res.body.id)}/capture"`);
    expect(textOf(loaded.html)).toContain("Automatic");
    // A form drawn for another payment, posted to this one's capture.
    const p = await authorize(500);
    const form = formOf((await dashboardFetch(page(p.id), { cookie })).html, `${page(p.id)}/capture`);
    const refused = await dashboardFetch(`${page(res.body.id)}/capture`, { cookie, form });
    expect(refused.status).toBe(409);
    expect(textOf(refused.html)).toContain("completed");
  });
});
