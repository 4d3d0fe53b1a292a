// The Pay part of the hosted invoice page (src/pages/invoice.tsx shows the invoice): the payer of
// an open invoice of a past-due subscription pays what is due there, with the subscription's card
// or with another card (test mode: Tender's card form, as hosted checkout has; the card number goes
// to the processor and is never stored or logged), on session, 3-D Secure included: a card whose
// bank asks goes through the challenge page (src/pages/authenticate.tsx) and comes back here
// (?payment_id=…). The first invoice of an incomplete subscription (its first charge asked for
// 3-D Secure) offers only to continue that payment's challenge (?from=invoice: the payer comes back
// here, not to the merchant's return_url): its outcome decides the subscription, and a second
// charge is never made from the page. In live mode another card is given through Stripe's Payment Element with the
// connection's publishable key (hosted checkout's script), so card data never reaches Tender. The money rules are src/billing/invoice-payments.ts's: one charge however many
// clicks, tabs and dunning retries, a decline shown here with the invoice left open.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq, sql } from "drizzle-orm";
import type { AppEnv } from "../context";
import type { InvoiceJson } from "../billing/invoices";
import { type PageCard, type PagePayment, payInvoiceOnPage, payableRowOf, waitingPaymentOf } from "../billing/invoice-payments";
import { waitingFirstPaymentOf } from "../billing/incomplete";
import { createDb } from "../db/client";
import { accounts, invoices, payments } from "../db/schema";
import { findOnAnyShard } from "../db/shards";
import { formatMoney } from "../domain/money";
import type { Bindings } from "../env";
import { clock } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { readCard } from "../payments/card-input";
import { readConnection } from "../processor/connections";
import { CHECKOUT_SCRIPT_PATH, CardFields, readForm, readToken } from "./card-form";
import { crossSite } from "./in-process";
import { stripeJsUrl } from "./hosted";
import { challengeFromInvoice } from "./links";

/** What the page offers the payer of an open invoice. */
export type PayOffer =
  /** Pay now: with the subscription's card (when it has one), or another card (test mode). */
  | {
      kind: "form";
      card: { brand: string; last4: string } | null;
      livemode: boolean;
      message: string | null;
      /** Live mode: Stripe.js and the connection's publishable key, for the Payment Element (null without one: the subscription's card only). */
      stripe: { js: string; publishableKey: string } | null;
    }
  /** A payment of the invoice waits for its payer's 3-D Secure (another tab, or one left half way): its page. */
  | { kind: "waiting"; url: string | null }
  /** An incomplete subscription's first invoice: its first payment waits for the payer's 3-D Secure; the page continues that payment's challenge, never a second charge. */
  | { kind: "authenticate"; url: string | null }
  /** The invoice bills no past-due period: nothing to pay here (the seller charges the card on file). */
  | { kind: "none" };

/** The environment of the shard that holds invoice `id` (where its account lives), or null. */
export async function invoiceShardEnv(env: Bindings, id: string): Promise<Bindings | null> {
  return findOnAnyShard(env, async (view) => {
    const [hit] = await createDb(view.DB)
      .select({ id: invoices.id })
      .from(invoices)
      .innerJoin(accounts, eq(accounts.id, invoices.accountId))
      .where(and(eq(invoices.id, id), sql`${accounts.movedTo} IS NULL`))
      .limit(1);
    return hit ? view : null;
  });
}

/** What the page offers for `invoice`; `returned` is the payment the 3-D Secure page sent the payer back with (?payment_id=…). */
export async function payOfferOf(env: Bindings, invoice: InvoiceJson, returned: string | undefined, message: string | null = null): Promise<PayOffer> {
  if (invoice.status !== "open") return { kind: "none" };
  const shard = await invoiceShardEnv(env, invoice.id);
  if (!shard) return { kind: "none" };
  const db = createDb(shard.DB);
  const row = await payableRowOf(db, invoice.id);
  if (!row) {
    const first = await waitingFirstPaymentOf(db, invoice.id);
    return first ? { kind: "authenticate", url: first.nextAction?.url ?? null } : { kind: "none" };
  }
  const waiting = await waitingPaymentOf(db, row);
  if (waiting) return { kind: "waiting", url: waiting.nextAction?.url ?? null };
  if (row.period && row.period.status === "open" && row.period.attempts > row.sub.dunningAttempts) return { kind: "waiting", url: null };
  let said = message;
  if (!said && returned) {
    // Back from the 3-D Secure page: say how it ended, when it ended without the money.
    const [payment] = await db
      .select({ status: payments.status })
      .from(payments)
      .where(and(eq(payments.id, returned), eq(payments.invoiceId, invoice.id)))
      .limit(1);
    if (payment?.status === "failed") said = "Your bank's check did not succeed, so nothing was charged. Try again, or pay with another card.";
    if (payment?.status === "canceled") said = "That payment was canceled, so nothing was charged. You can pay again below.";
  }
  const card = row.sub.cardLast4 ? { brand: row.sub.cardBrand ?? "card", last4: row.sub.cardLast4 } : null;
  const publishableKey = invoice.livemode ? ((await readConnection(db, row.sub.accountId))?.publishableKey ?? null) : null;
  const stripe = publishableKey ? { js: stripeJsUrl(env), publishableKey } : null;
  return { kind: "form", card, livemode: invoice.livemode, message: said, stripe };
}

/** The scripts the page loads for `offer` (Stripe.js and the Payment Element's script on a live page), and the Stripe.js its CSP allows. */
export function offerScripts(offer: PayOffer): { scripts: string[]; stripeJs: string | null } {
  if (offer.kind !== "form" || !offer.stripe) return { scripts: [], stripeJs: null };
  return { scripts: [offer.stripe.js, CHECKOUT_SCRIPT_PATH], stripeJs: offer.stripe.js };
}

const brandName = (brand: string) => (brand === "amex" ? "American Express" : brand === "mastercard" ? "Mastercard" : brand.charAt(0).toUpperCase() + brand.slice(1));

/** A payment of the invoice that waits: a link to its bank's check, or (none to give) a word that it is being processed. */
function PaymentWaiting({ kind, heading, ask, url, processing }: { kind: string; heading: string; ask: string; url: string | null; processing: string }) {
  return (
    <section class="pay" data-pay={kind}>
      <h2>{heading}</h2>
      {url ? (
        <>
          <p>{ask}</p>
          <a class="button" href={url}>
            Continue to your bank's check
          </a>
        </>
      ) : (
        <p>{processing}</p>
      )}
    </section>
  );
}

/** The Pay part of an open invoice's page. `action` is the page's own path. */
export function InvoicePayment({ invoice, offer, action }: { invoice: InvoiceJson; offer: PayOffer; action: string }) {
  if (offer.kind === "none") return null;
  const due = formatMoney(invoice.amount_due, invoice.currency);
  if (offer.kind === "authenticate") {
    return (
      <PaymentWaiting
        kind="authenticate"
        heading="This payment needs authentication"
        ask={`Your bank asks you to confirm the payment of ${due} (3-D Secure) before the subscription starts. Continuing finishes that payment: nothing is charged twice.`}
        url={offer.url ? challengeFromInvoice(offer.url) : null}
        processing="The payment of this invoice is being processed. Reload this page in a minute to see how it ended."
      />
    );
  }
  if (offer.kind === "waiting") {
    return (
      <PaymentWaiting
        kind="waiting"
        heading="Payment in progress"
        ask="A payment of this invoice is waiting for your bank's check (3-D Secure)."
        url={offer.url}
        processing="A payment of this invoice is being processed. Reload this page in a minute to see how it ended."
      />
    );
  }
  return (
    <section class="pay" data-pay="form">
      <h2>Pay {due}</h2>
      {offer.message ? (
        <p class="error" role="alert">
          {offer.message}
        </p>
      ) : null}
      {offer.card ? (
        <form method="post" action={`${action}/pay`}>
          <input type="hidden" name="source" value="subscription" />
          <button type="submit">
            Pay {due} with {brandName(offer.card.brand)} •••• {offer.card.last4}
          </button>
        </form>
      ) : null}
      {offer.livemode ? (
        offer.stripe ? (
          // Stripe's Payment Element, driven by hosted checkout's script (src/pages/checkout.tsx): Stripe.js makes the
          // PaymentMethod in the browser and the form posts only its id.
          <form
            method="post"
            action={`${action}/pay`}
            id="checkout-form"
            data-publishable-key={offer.stripe.publishableKey}
            data-mode="payment"
            data-amount={String(invoice.amount_due)}
            data-currency={invoice.currency}
            data-client-secret=""
            data-return-url=""
          >
            <input type="hidden" name="source" value="processor_token" />
            <p class="muted">{offer.card ? "Or pay with another card:" : "Pay with a card:"}</p>
            <p class="error" role="alert" id="checkout-error"></p>
            <div id="payment-element"></div>
            <input type="hidden" name="processor_token" id="processor_token" value="" />
            <button type="submit" class={offer.card ? "secondary" : undefined}>
              Pay {due} with this card
            </button>
          </form>
        ) : null
      ) : (
        <form method="post" action={`${action}/pay`} autocomplete="on">
          <input type="hidden" name="source" value="card" />
          <p class="muted">{offer.card ? "Or pay with another card:" : "Pay with a card:"}</p>
          <CardFields />
          <button type="submit" class={offer.card ? "secondary" : undefined}>
            Pay {due} with this card
          </button>
        </form>
      )}
    </section>
  );
}

export interface PayRouteDeps {
  /** The invoice of the page's URL, or the page that says why it cannot be shown (404, 410). */
  load: (c: Context<AppEnv>) => Promise<InvoiceJson | Response>;
  /** The invoice's page, with `offer` in its Pay part, answered with `status`. */
  render: (c: Context<AppEnv>, invoice: InvoiceJson, offer: PayOffer, status: 200 | 400 | 402 | 409) => Response | Promise<Response>;
  /** A page that says something (no form). */
  message: (c: Context<AppEnv>, status: 400 | 409, title: string, text: string, livemode: boolean) => Response | Promise<Response>;
}

/** POST <page>/pay: the Pay buttons. */
export function registerInvoicePayment(app: OpenAPIHono<AppEnv>, pagePath: string, deps: PayRouteDeps) {
  app.post(`${pagePath}/pay`, async (c) => {
    if (crossSite(c)) return deps.message(c, 400, "Refused", "This form was sent from another site.", false);
    const invoice = await deps.load(c);
    if (invoice instanceof Response) return invoice;
    const page = new URL(c.req.url).pathname.replace(/\/pay$/, "");
    // Paid already (a second click, another tab): the page says so.
    if (invoice.status !== "open") return c.redirect(page, 303);
    const form = (await c.req.parseBody()) as Record<string, unknown>;
    const again = async (status: 400 | 402 | 409, message: string) => deps.render(c, invoice, await payOfferOf(c.env, invoice, undefined, message), status);
    const env = await invoiceShardEnv(c.env, invoice.id);
    if (!env) return c.redirect(page, 303);
    const realNow = clock.now();
    let card: PageCard | null = null;
    if (form.source === "processor_token") {
      // Stripe.js's PaymentMethod (or, in test mode, one of Stripe's test PaymentMethod names): never card fields.
      const read = readToken(form, ["source"]);
      if (!read.ok) return again(400, read.message);
      card = { kind: "processor_token", token: read.card.processor_token };
    } else if (form.source === "card") {
      if (invoice.livemode) return again(400, "This page takes no card number in live mode.");
      const read = readForm(form);
      if (!read.ok) return again(400, read.message);
      try {
        card = { kind: "fields", card: await readCard(env, read.card, realNow) };
      } catch (error) {
        if (error instanceof ApiError) return again(400, error.message);
        throw error;
      }
    } else if (form.source !== "subscription") {
      return again(400, "Choose how to pay.");
    }
    let paid: PagePayment;
    try {
      paid = await payInvoiceOnPage(env, invoice.id, card, {
        origin: new URL(c.req.url).origin,
        returnUrl: new URL(page, c.req.url).toString(),
        realNow,
        waitUntil: (p) => c.executionCtx.waitUntil(p),
      });
    } catch (error) {
      console.error(JSON.stringify({ message: "invoice page payment's outcome unknown; the cron settles it", invoice: invoice.id, error: String(error).slice(0, 300) }));
      return deps.message(c, 409, "Please try again", "Your payment could not be confirmed just now. Nothing will be charged twice: reload the invoice in a few minutes to see whether it was paid.", invoice.livemode);
    }
    switch (paid.kind) {
      case "paid":
        return c.redirect(page, 303);
      case "authenticate":
        return c.redirect(paid.url, 303);
      case "declined":
        return again(402, `Your card was declined: ${paid.message} Nothing was charged.`);
      case "invalid":
        return again(400, paid.message);
      case "in_progress":
        return deps.render(c, invoice, { kind: "waiting", url: paid.authenticateUrl }, 409);
      case "first_charge_waits":
        return deps.render(c, invoice, { kind: "authenticate", url: paid.url }, 409);
      case "unavailable":
        return deps.message(c, 409, "Payment unavailable", "This invoice cannot be paid online right now. Contact the seller.", invoice.livemode);
      case "not_payable":
        return c.redirect(page, 303);
    }
  });
}
