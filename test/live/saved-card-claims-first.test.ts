// Review of the one-round-trip saved-card payment (test mode only): live mode must still claim the
// Idempotency-Key and the money before Stripe is asked, even for a saved card whose payer this
// isolate remembers from test mode's path.
import { env } from "../support/env";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, signup } from "../support/http";
import { type LiveAccount, STRIPE_CARDS, connectStripe, holdStripe, installFakeStripe, paymentIntent } from "../support/live";

const stripe = installFakeStripe();
const { fake } = stripe;
let acct: LiveAccount;

beforeAll(async () => {
  acct = await signup("Live saved card claims first");
  await connectStripe(acct, { rawCardData: false, publishableKey: "pk_live_51AcmeClaimsFirst0000000" });
});

afterAll(() => stripe.restore());

describe("a live saved card's payment", () => {
  it("holds its key (in_flight) and a money claim while Stripe is asked, and ends both in its batch", async () => {
    const user = await call("/api/users", { key: acct.liveKey, body: { name: "Grace Hopper", email: "grace@example.com" } });
    const pm = fake.tokenize({ number: STRIPE_CARDS.succeeds, expMonth: 11, expYear: 2031 });
    const card = await call(`/api/users/${user.body.id}/payment-methods`, { key: acct.liveKey, body: { processor_token: pm } });
    expect(card.status, card.text).toBe(201);
    const pay = (idempotencyKey: string) =>
      call("/payments", { key: acct.liveKey, idempotencyKey, body: { amount: 3000, currency: "usd", user_id: user.body.id, payment_method: card.body.id } });
    expect((await pay("live-saved-warm")).status).toBe(201);

    const hold = holdStripe(fake, paymentIntent);
    const pending = pay("live-saved-held");
    await hold.reached;
    const key = await env.DB.prepare("SELECT status FROM idempotency_keys WHERE account_id = ? AND livemode = 1 AND key = ?").bind(acct.id, "live-saved-held").first<{ status: string }>();
    expect(key?.status).toBe("in_flight");
    const claims = await env.DB.prepare("SELECT COUNT(*) AS n FROM money_claims WHERE account_id = ? AND livemode = 1").bind(acct.id).first<{ n: number }>();
    expect(claims?.n).toBe(1);
    hold.release();
    const res = await pending;
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ livemode: true, status: "completed", payment_method_id: card.body.id });
    const after = await env.DB.prepare("SELECT status FROM idempotency_keys WHERE account_id = ? AND livemode = 1 AND key = ?").bind(acct.id, "live-saved-held").first<{ status: string }>();
    expect(after?.status).toBe("completed");
    const left = await env.DB.prepare("SELECT COUNT(*) AS n FROM money_claims WHERE account_id = ? AND livemode = 1").bind(acct.id).first<{ n: number }>();
    expect(left?.n).toBe(0);
  });
});
