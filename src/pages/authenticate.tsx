// The 3-D Secure page: next_action.url of a payment in requires_action,
// /pay/authenticate/{payment id}/{page secret}. No API key: the secret in the URL opens it
// (constant-time compare; a wrong one, another shard's or an unknown payment is the same 404).
//
// - Test mode: the sandbox challenge, with the amount and the merchant's name and two POST forms,
//   Complete and Fail, as Stripe's test page has.
// - Live mode: Stripe.js (`stripeJsUrl`, the connection's publishable key) runs
//   `stripe.handleNextAction({ clientSecret })` (the client secret is read from Stripe as the page
//   is rendered, never stored or logged), then posts back here; Tender reads the PaymentIntent from
//   Stripe and records what Stripe says (never what the browser says).
//
// Either way the outcome is recorded once (src/payments/authentication.ts) and the payer is sent
// (303) to the merchant's return_url with ?payment_id=…, or to this page, which then shows the
// result. A page opened from its invoice's hosted page (?from=invoice, carried by its forms) sends
// its payer back to that payment's own invoice page instead (on this origin, ?payment_id=…). A
// second submit records nothing and lands on the same place. A payment no longer in
// requires_action shows its result and no button. Checkout sessions reuse recordAuthentication and afterAuthentication, and can send their payer here.
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq } from "drizzle-orm";
import type { AppEnv } from "../context";
import { createDb } from "../db/client";
import { invoices } from "../db/schema";
import { formatMoney } from "../domain/money";
import { clock } from "../lib/clock";
import { type AuthenticationResult, type PagePayment, afterAuthentication, paymentOfPage, recordAuthentication, sandboxResult } from "../payments/authentication";
import type { PaymentRow } from "../payments/event-data";
import { processorOf } from "../processor";
import { readConnection } from "../processor/connections";
import { HostedLayout, hostedHeaders, messagePage, pageSecretMatches, stripeJsUrl } from "./hosted";
import { FROM_INVOICE, HOSTED_INVOICE_PATH, pageSecretOf } from "./links";

const PAGE = "/pay/authenticate/:id/:secret";
export const AUTHENTICATE_SCRIPT_PATH = "/pay/assets/authenticate.js";

const notFoundPage = (c: Context) => messagePage(c, 404, "Page not found", "This payment page does not exist, or its link is not complete.");

async function opened(c: Context<AppEnv>): Promise<PagePayment | null> {
  return paymentOfPage(c.env, c.req.param("id") ?? "", c.req.param("secret") ?? "", pageSecretMatches);
}

/** Whether the page was opened from its invoice's hosted page (?from=invoice). */
const fromInvoice = (c: Context) => c.req.query(FROM_INVOICE.name) === FROM_INVOICE.value;

/** The query the page's forms carry on: the marker of a page opened from its invoice, or nothing. */
const carried = (c: Context) => (fromInvoice(c) ? `?${FROM_INVOICE.name}=${FROM_INVOICE.value}` : "");

/**
 * Where the payer goes once the payment is decided, and whether that is its invoice. Opened from
 * its invoice's page: back to that page on this page's origin, as a payment made on the invoice's
 * page returns (the payment's own invoice, of its account and mode, read where the payment lives;
 * never a URL the browser gave). Otherwise the merchant's return_url, or this page's result.
 */
async function destinationOf(c: Context, page: PagePayment, payment: PaymentRow): Promise<{ url: string; toInvoice: boolean }> {
  if (fromInvoice(c) && payment.invoiceId) {
    const [invoice] = await createDb(page.env.DB)
      .select({ url: invoices.hostedInvoiceUrl })
      .from(invoices)
      .where(and(eq(invoices.id, payment.invoiceId), eq(invoices.accountId, payment.accountId), eq(invoices.livemode, payment.livemode)))
      .limit(1);
    if (invoice?.url) {
      const url = new URL(`${HOSTED_INVOICE_PATH}/${payment.invoiceId}/${pageSecretOf(invoice.url)}`, c.req.url);
      url.searchParams.set("payment_id", payment.id);
      return { url: url.toString(), toInvoice: true };
    }
  }
  return { url: afterAuthentication(payment), toInvoice: false };
}

const RESULT: Record<PaymentRow["status"], { title: string; message: string }> = {
  requires_action: { title: "Authentication needed", message: "This payment still waits for the card holder to authenticate." },
  requires_capture: { title: "Payment authorized", message: "You authenticated the payment: the amount is held on your card." },
  completed: { title: "Payment complete", message: "You authenticated the payment and it went through." },
  failed: { title: "Payment failed", message: "The authentication did not succeed, so nothing was charged." },
  canceled: { title: "Payment canceled", message: "This payment was canceled; nothing was charged." },
  refunded: { title: "Payment refunded", message: "This payment was refunded." },
  partially_refunded: { title: "Payment complete", message: "This payment went through (and was partly refunded)." },
};

/** The page of a payment that no longer asks for authentication: its result, no button. */
async function resultPage(c: Context, page: PagePayment) {
  const { payment, merchantName } = page;
  const result = RESULT[payment.status];
  const back = await destinationOf(c, page, payment);
  return c.html(
    <HostedLayout title={result.title} livemode={payment.livemode}>
      <h1>{result.title}</h1>
      <p class="amount">{formatMoney(payment.amount, payment.currency)}</p>
      <p>{result.message}</p>
      <p class="muted">
        {merchantName} · {payment.id}
      </p>
      {back.toInvoice ? <a href={back.url}>Back to the invoice</a> : payment.returnUrl ? <a href={back.url}>Return to {merchantName}</a> : null}
    </HostedLayout>,
    200,
    hostedHeaders(null),
  );
}

/** The sandbox challenge: Complete and Fail, each a POST form. */
function sandboxPage(c: Context, page: PagePayment, action: string) {
  const { payment, merchantName } = page;
  return c.html(
    <HostedLayout title="Authenticate your payment" livemode={false}>
      <h1>Authenticate your payment</h1>
      <p>{merchantName} asks you to confirm this payment with your bank (3-D Secure).</p>
      <p class="amount">{formatMoney(payment.amount, payment.currency)}</p>
      <p class="muted">
        {payment.cardBrand} •••• {payment.cardLast4}
      </p>
      <p class="muted">This is the test-mode challenge: choose how the authentication ends.</p>
      <form method="post" action={`${action}/complete${carried(c)}`}>
        <button type="submit">Complete</button>
      </form>
      <form method="post" action={`${action}/fail${carried(c)}`}>
        <button type="submit" class="secondary">
          Fail
        </button>
      </form>
    </HostedLayout>,
    200,
    hostedHeaders(null),
  );
}

/** The live page: Stripe.js runs the challenge, then the form posts back here. */
function livePage(c: Context, page: PagePayment, action: string, stripeJs: string, publishableKey: string, clientSecret: string) {
  const { payment, merchantName } = page;
  return c.html(
    <HostedLayout title="Authenticate your payment" livemode={true} scripts={[stripeJs, AUTHENTICATE_SCRIPT_PATH]}>
      <h1>Authenticate your payment</h1>
      <p>{merchantName} asks you to confirm this payment with your bank (3-D Secure).</p>
      <p class="amount">{formatMoney(payment.amount, payment.currency)}</p>
      <p class="muted" id="authenticate-status">
        Opening your bank's check…
      </p>
      <form method="post" action={`${action}/return${carried(c)}`} id="authenticate-return" data-publishable-key={publishableKey} data-client-secret={clientSecret}>
        <button type="submit">Continue</button>
      </form>
    </HostedLayout>,
    200,
    hostedHeaders(stripeJs),
  );
}

/** The live page's script: handleNextAction, then post back (whatever happened: Tender asks Stripe). */
export const AUTHENTICATE_SCRIPT = `"use strict";
(function () {
  var form = document.getElementById("authenticate-return");
  var status = document.getElementById("authenticate-status");
  if (!form || typeof Stripe !== "function") return;
  var stripe = Stripe(form.getAttribute("data-publishable-key"));
  stripe.handleNextAction({ clientSecret: form.getAttribute("data-client-secret") }).then(function () {
    if (status) status.textContent = "Finishing…";
    form.submit();
  }, function () {
    if (status) status.textContent = "The check could not be opened: continue to try again.";
  });
})();
`;

/** A 303 with every hosted page's headers: its Location may hold a page's secret (the invoice's), so it is never cached, framed or sent on as a Referer. */
const redirectTo = (c: Context, url: string) => c.body(null, 303, { Location: url, ...hostedHeaders(null) });

/** Sends the payer on (303) once the payment is decided: destinationOf. */
async function sendOn(c: Context, page: PagePayment, payment: PaymentRow) {
  return redirectTo(c, (await destinationOf(c, page, payment)).url);
}

/** Records `result` (once) and sends the payer on: 303 to return_url (or the invoice's page), or this page's result. */
async function finish(c: Context<AppEnv>, page: PagePayment, result: AuthenticationResult) {
  const recorded = await recordAuthentication(page.env, page.payment, result, clock.now(), { waitUntil: (p) => c.executionCtx.waitUntil(p), fromProcessor: page.payment.livemode });
  return sendOn(c, page, recorded.payment);
}

/** The processor of the page's payment (its account and mode), or null (a live account without a connection). */
async function processorOfPage(page: PagePayment) {
  return processorOf(page.env, createDb(page.env.DB), { accountId: page.payment.accountId, livemode: page.payment.livemode });
}

/** The page could not reach the processor, or the account is being moved: nothing was recorded, the payer tries again. */
const tryAgain = (c: Context, livemode: boolean) =>
  messagePage(c, 409, "Please try again", "Your payment could not be confirmed just now. Nothing was charged twice: reload this page in a minute.", livemode);

/** Runs a page's work; an error (Stripe unreachable, the account moving) answers a page, never JSON or internals. */
async function asPage(c: Context, livemode: boolean, work: () => Promise<Response>): Promise<Response> {
  try {
    return await work();
  } catch (error) {
    console.error(JSON.stringify({ message: "3-D Secure page failed; the payer may try again", error: String(error).slice(0, 300) }));
    return tryAgain(c, livemode);
  }
}

export function registerAuthenticationPage(app: OpenAPIHono<AppEnv>) {
  app.get(AUTHENTICATE_SCRIPT_PATH, (c) =>
    c.body(AUTHENTICATE_SCRIPT, 200, { "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff" }),
  );

  app.get(PAGE, async (c) => {
    const page = await opened(c);
    if (!page) return notFoundPage(c);
    if (page.payment.status !== "requires_action") return asPage(c, page.payment.livemode, () => resultPage(c, page));
    const action = new URL(c.req.url).pathname;
    if (!page.payment.livemode) return sandboxPage(c, page, action);
    return asPage(c, true, () => livePageOf(c, page, action));
  });

  async function livePageOf(c: Context<AppEnv>, page: PagePayment, action: string): Promise<Response> {
    const db = createDb(page.env.DB);
    const connection = await readConnection(db, page.payment.accountId);
    const processor = await processorOfPage(page);
    if (!connection?.publishableKey || !processor || !page.payment.processorReference) {
      return messagePage(c, 409, "Payment unavailable", "This payment cannot be authenticated right now. Ask the merchant to try again.", true);
    }
    const state = await processor.paymentStateOf({ chargeReference: page.payment.processorReference });
    if (state.status !== "requires_action" || !state.clientSecret) {
      // Decided at Stripe already (the event has not arrived yet): record it now, and show it.
      if (state.status === "succeeded" || state.status === "failed" || state.status === "canceled") {
        const recorded = await recordAuthentication(page.env, page.payment, state, clock.now(), { waitUntil: (p) => c.executionCtx.waitUntil(p), fromProcessor: true });
        return resultPage(c, { ...page, payment: recorded.payment });
      }
      return resultPage(c, page);
    }
    return livePage(c, page, action, stripeJsUrl(page.env), connection.publishableKey, state.clientSecret);
  }

  // The sandbox's buttons. Live mode has none (its outcome is read from Stripe): 404.
  for (const button of ["complete", "fail"] as const) {
    app.post(`${PAGE}/${button}`, async (c) => {
      const page = await opened(c);
      if (!page || page.payment.livemode) return notFoundPage(c);
      // Decided already (the other button, another tab, a cancel): nothing moved at the sandbox, so nothing to record.
      if (page.payment.status !== "requires_action") return asPage(c, false, () => sendOn(c, page, page.payment));
      return asPage(c, false, () => finish(c, page, sandboxResult(page.payment, button)));
    });
  }

  // The live page's return, after Stripe.js: what Stripe says the PaymentIntent is, never the browser.
  app.post(`${PAGE}/return`, async (c) => {
    const page = await opened(c);
    if (!page || !page.payment.livemode) return notFoundPage(c);
    if (page.payment.status !== "requires_action") return asPage(c, true, () => sendOn(c, page, page.payment));
    return asPage(c, true, () => returnOf(c, page));
  });

  async function returnOf(c: Context<AppEnv>, page: PagePayment): Promise<Response> {
    const processor = await processorOfPage(page);
    if (!processor || !page.payment.processorReference) return messagePage(c, 409, "Payment unavailable", "This payment cannot be authenticated right now. Ask the merchant to try again.", true);
    const state = await processor.paymentStateOf({ chargeReference: page.payment.processorReference });
    // Not finished (the payer closed the challenge): back to the page, to try again.
    if (state.status === "requires_action") return redirectTo(c, `${new URL(c.req.url).pathname.replace(/\/return$/, "")}${carried(c)}`);
    // Not decided yet at Stripe: its event records it; the merchant's page reads the payment.
    if (state.status === "processing") return sendOn(c, page, page.payment);
    return finish(c, page, state);
  }
}
