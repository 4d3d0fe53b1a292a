import { expect, it } from "vitest";
import { connectToFake, cardOf, STRIPE_CARDS } from "../support/fake-stripe-env";

it("smoke", async () => {
  const { fake, stripe } = connectToFake();
  const first = await stripe.chargeCard({ card: cardOf(STRIPE_CARDS.succeeds), amount: 1000, currency: "usd", reference: "ref_1", customer: { id: "usr_1", email: "a@example.com" } });
  console.log(first);
  const renewal = await stripe.chargeToken({ token: first.token!, amount: 1000, currency: "usd", reference: "sub_1:period:1:attempt:0" });
  console.log(renewal);
  const refund = await stripe.refund({ chargeReference: (first.outcome as any).reference, amount: 300, currency: "usd", reference: "re_tender_1" });
  console.log(refund);
  const acct = fake.createConnectedAccount();
  const dest = await stripe.payoutDestination({ card: cardOf(STRIPE_CARDS.succeeds), currency: "usd", recipient: { id: "usr_2", processorAccount: acct } });
  console.log(dest);
  const payout = await stripe.sendPayout({ token: (dest as any).token, amount: 500, currency: "usd", reference: "po_tender_1" });
  console.log(payout);
  console.log(await stripe.verifyKey());
  console.log(fake.specViolations());
  console.log(fake.requests.map((r) => `${r.operation} ${r.status} ${r.idempotencyKey}`));
  expect(fake.specViolations()).toEqual([]);
});
