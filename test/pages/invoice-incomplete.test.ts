// The hosted page of an incomplete subscription's first invoice (src/pages/invoice-pay.tsx,
// src/billing/incomplete.ts waitingFirstPaymentOf), in test mode: the subscription's first charge
// asked for 3-D Secure, so its payment waits in requires_action and its first invoice is open. The
// page offers to continue that payment's challenge, never a second charge; Complete makes the
// invoice paid (the subscription active), Fail makes it void (incomplete_expired) and the page 410.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE, type Account, browse, call, expectError, signup } from "../support/http";
import { AUTH_CARD, type IncompleteInvoice, createUser, getSubscription, incompleteInvoice } from "../support/fixtures";
import { CARDS, captureLogs, cardFields, expectNoCardData, sentCvvs, sentPans } from "../support/cards";
import { eventsOf } from "../support/db";

const logs = captureLogs();
let acct: Account;
let other: Account;

beforeAll(async () => {
  acct = await signup("Incomplete Invoice Co");
  other = await signup("Other Incomplete Co");
});

afterAll(async () => {
  await expectNoCardData();
  logs.expectNoCardData();
  logs.restore();
});


type Incomplete = IncompleteInvoice;
const incomplete = (owner: Account = acct, returnUrl?: string) => incompleteInvoice(owner, returnUrl);

const paymentsOf = async (owner: Account, d: Incomplete) => (await call(`/payments?subscription_id=${d.sub}&limit=100`, { key: owner.key })).body.data as { id: string; status: string }[];
/** The merchant's own return_url given with the subscription. */
const RETURN = "https://shop.example.com/done";
/** The challenge as the invoice's page links it: the payer is sent back to the invoice. */
const fromInvoice = (challenge: string) => `${challenge}?from=invoice`;
/** A form's action on the sandbox challenge (Complete or Fail), as the browser posts it. */
const actionOf = (html: string, button: "complete" | "fail") => new RegExp(`action="([^"]+/${button}[^"]*)"`).exec(html)?.[1]?.replace(/&amp;/g, "&");
/** The page's link to continue the payment (the only button-styled link besides the PDF's). */
const continueLink = (html: string) => /<a class="button" href="([^"]+)">\s*Continue to your bank/.exec(html)?.[1]?.replace(/&amp;/g, "&");

describe("an incomplete subscription's open invoice", () => {
  it("says the payment needs authentication, with a button to that payment's challenge, and no form to pay again", async () => {
    const d = await incomplete();
    const page = await browse(d.page);
    expect(page.status).toBe(200);
    expect(page.text).toContain("This payment needs authentication");
    expect(continueLink(page.text)).toBe(fromInvoice(d.challenge));
    expect(page.text).not.toContain("<form");
    expect(page.text).not.toContain("will charge the card on file again");
    // The challenge it opens is the sandbox's, for this payment's amount.
    const challenge = await browse(continueLink(page.text)!);
    expect(challenge.status).toBe(200);
    expect(challenge.text).toContain("30.00 USD");
    expect(challenge.text).toContain(`action="${new URL(d.challenge).pathname}/complete?from=invoice"`);
  });

  it("Complete through the page's button makes the page show paid, the subscription active, with that one payment", async () => {
    const d = await incomplete();
    const link = continueLink((await browse(d.page)).text)!;
    const done = await browse(`${new URL(link).pathname}/complete`, {});
    expect(done.status).toBe(303);
    const after = await browse(d.page);
    expect(after.status).toBe(200);
    expect(after.text).toContain("30.00 USD paid");
    expect(after.text).not.toContain("needs authentication");
    expect(after.text).not.toContain("<form");
    expect((await getSubscription(acct, d.sub)).status).toBe("active");
    expect((await call(`/invoices/${d.invoice.id}`, { key: acct.key })).body).toMatchObject({ status: "paid", payment_id: d.payment, amount_paid: 3000 });
    expect((await paymentsOf(acct, d)).map((p) => [p.id, p.status])).toEqual([[d.payment, "completed"]]);
  });

  it("while the payment waits, a post to the page's Pay charges nothing: 409 with the same challenge", async () => {
    const d = await incomplete();
    sentPans.add(CARDS.visa);
    sentCvvs.add("987");
    const typed = { source: "card", card_number: CARDS.visa, exp_month: "12", exp_year: String(new Date().getUTCFullYear() + 3), cvc: "987" };
    const answers = await Promise.all([
      browse(`${d.page}/pay`, { source: "subscription" }),
      browse(`${d.page}/pay`, typed),
      browse(`${d.page}/pay`, { source: "processor_token", processor_token: "pm_card_visa" }),
    ]);
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(409);
      expect(continueLink(answer.text)).toBe(fromInvoice(d.challenge));
      expect(answer.text).not.toContain(CARDS.visa);
    }
    expect((await paymentsOf(acct, d)).map((p) => [p.id, p.status])).toEqual([[d.payment, "requires_action"]]);
    expect((await call(`/invoices/${d.invoice.id}`, { key: acct.key })).body.status).toBe("open");
    expect((await getSubscription(acct, d.sub)).status).toBe("incomplete");
  });

  it("POST /invoices/{id}/pay while the first payment waits: 409 charge_in_progress naming that payment and its challenge; nothing charged or written", async () => {
    const d = await incomplete();
    const events = (await eventsOf(acct.id)).length;
    for (const idempotencyKey of [undefined, `pay-${d.invoice.id}`]) {
      const res = await call(`/invoices/${d.invoice.id}/pay`, { key: acct.key, method: "POST", ...(idempotencyKey ? { idempotencyKey } : {}) });
      const error = expectError(res, 409, "invalid_request_error", "charge_in_progress");
      expect(error.message).toContain(d.payment);
      expect(error.message).toContain(d.challenge);
    }
    expect((await paymentsOf(acct, d)).map((p) => [p.id, p.status])).toEqual([[d.payment, "requires_action"]]);
    expect((await call(`/invoices/${d.invoice.id}`, { key: acct.key })).body).toMatchObject({ status: "open", amount_paid: 0, payment_id: null });
    expect((await getSubscription(acct, d.sub)).status).toBe("incomplete");
    expect((await eventsOf(acct.id)).length).toBe(events);
    // Another account's key still cannot see it at all.
    expect((await call(`/invoices/${d.invoice.id}/pay`, { key: other.key, method: "POST" })).status).toBe(404);
  });

  it("Fail expires the subscription: the invoice is void and its page says so (410), taking nothing", async () => {
    const d = await incomplete();
    const link = continueLink((await browse(d.page)).text)!;
    expect((await browse(`${new URL(link).pathname}/fail`, {})).status).toBe(303);
    expect((await getSubscription(acct, d.sub)).status).toBe("incomplete_expired");
    const page = await browse(d.page);
    expect(page.status).toBe(410);
    expect(page.text).toContain("voided");
    expect(page.text).not.toContain("<form");
    const pay = await browse(`${d.page}/pay`, { source: "subscription" });
    expect(pay.status).toBe(410);
    expect((await paymentsOf(acct, d)).map((p) => p.status)).toEqual(["failed"]);
  });

  it("another account's invoice or payment under this page's secrets answers 404", async () => {
    const mine = await incomplete();
    const theirs = await incomplete(other);
    const secret = mine.page.split("/").pop()!;
    const challengeSecret = new URL(mine.challenge).pathname.split("/").pop()!;
    for (const path of [`/pay/invoices/${theirs.invoice.id}/${secret}`, `/pay/authenticate/${theirs.payment}/${challengeSecret}`]) {
      const res = await browse(path);
      expect(res.status, path).toBe(404);
      expect(res.text).not.toContain(theirs.challenge);
    }
    expect((await browse(`/pay/invoices/${theirs.invoice.id}/${secret}/pay`, { source: "subscription" })).status).toBe(404);
    expect((await browse(`/pay/authenticate/${theirs.payment}/${challengeSecret}/complete`, {})).status).toBe(404);
    expect((await getSubscription(other, theirs.sub)).status).toBe("incomplete");
    // Each page still opens its own.
    expect(continueLink((await browse(theirs.page)).text)).toBe(fromInvoice(theirs.challenge));
  });
});

describe("the challenge opened from the invoice's page sends its payer back there", () => {
  it("Complete lands on the invoice's page (not the merchant's return_url), which shows it paid; a second submit and the challenge's result lead there too", async () => {
    const d = await incomplete(acct, RETURN);
    const link = continueLink((await browse(d.page)).text)!;
    const challenge = await browse(link);
    const complete = actionOf(challenge.text, "complete")!;
    const done = await browse(complete, {});
    expect(done.status).toBe(303);
    const back = `${d.invoice.hosted_invoice_url}?payment_id=${d.payment}`;
    expect(done.location).toBe(back);
    const landing = await browse(done.location!);
    expect(landing.status).toBe(200);
    expect(landing.text).toContain("30.00 USD paid");
    expect((await getSubscription(acct, d.sub)).status).toBe("active");
    // Another tab's submit records nothing and lands on the same place.
    expect((await browse(complete, {})).location).toBe(back);
    // The challenge, opened again from the invoice, shows its result with a link back to the invoice, not to the shop.
    const result = await browse(link);
    expect(result.text).toContain("Payment complete");
    expect(result.text).toContain(`href="${back}"`);
    expect(result.text).not.toContain(RETURN);
  });

  it("Fail lands on the invoice's page, which says the invoice is void", async () => {
    const d = await incomplete(acct, RETURN);
    const challenge = await browse(continueLink((await browse(d.page)).text)!);
    const failed = await browse(actionOf(challenge.text, "fail")!, {});
    expect(failed.status).toBe(303);
    expect(failed.location).toBe(`${d.invoice.hosted_invoice_url}?payment_id=${d.payment}`);
    const landing = await browse(failed.location!);
    expect(landing.status).toBe(410);
    expect(landing.text).toContain("voided");
    expect((await getSubscription(acct, d.sub)).status).toBe("incomplete_expired");
  });

  it("opened from next_action.url (the merchant's own flow), the challenge still returns to the merchant's return_url, or shows its result", async () => {
    const d = await incomplete(acct, RETURN);
    const challenge = await browse(d.challenge);
    expect(actionOf(challenge.text, "complete")).toBe(`${new URL(d.challenge).pathname}/complete`);
    const done = await browse(`${new URL(d.challenge).pathname}/complete`, {});
    expect(done.location).toBe(`${RETURN}?payment_id=${d.payment}`);
    const bare = await incomplete();
    const shown = await browse(`${new URL(bare.challenge).pathname}/complete`, {});
    expect(shown.location).toBe(new URL(bare.challenge).pathname);
  });

  it("another account's invoice is never a destination: the marker only ever leads to the payment's own invoice", async () => {
    const theirs = await incomplete(other, RETURN);
    const mine = await incomplete(acct, RETURN);
    const done = await browse(`${new URL(mine.challenge).pathname}/complete?from=invoice`, {});
    expect(done.location).toBe(`${mine.invoice.hosted_invoice_url}?payment_id=${mine.payment}`);
    expect(done.location).not.toContain(theirs.invoice.id);
    // A marker on a one-off payment (no invoice) changes nothing: return_url as before.
    const payer = await createUser(acct, { name: "Ada Lovelace", email: "ada@example.com" });
    const oneOff = await call("/payments", { key: acct.key, body: { amount: 1200, currency: "usd", user_id: payer.id, ...cardFields(AUTH_CARD), return_url: RETURN } });
    expect(oneOff.status, oneOff.text).toBe(201);
    const path = new URL(oneOff.body.next_action.url).pathname;
    expect((await browse(`${path}/complete?from=invoice`, {})).location).toBe(`${RETURN}?payment_id=${oneOff.body.id}`);
  });
});
