// Payments: the list, a payment's page (its customer, subscription, invoice and refunds), and a refund of one, full (amount left empty) or partial (an amount in major
// units, converted to minor units with the payment's currency exponent). POST /refunds decides.
// The form asks first, saying the amount (dashboard.js reads data-refund-left): an empty field
// refunds everything left, which one click must not do unasked. A one-off payment authorized and
// not captured (requires_capture) is captured (all, or an amount in major units) or canceled from
// its page, each asking first (POST /payments/{id}/capture and /cancel decide).
import type { Context, Hono } from "hono";
import { act, apiErrorPage, field, redirectWithNotice } from "../actions";
import { type FormState, FormSummary, Problems, addApiError, addProblem, formStatus, hasProblems, invalid, newFormState, stateFor, valueOf } from "../form-state";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time, cardText, currencyDecimals, formatMoney, majorToMinor } from "../format";
import { AmountRows, BackLink, Fact, Headline } from "../details";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render } from "../layout";
import { ID_PATTERN } from "../lists";
import { apiQuery, listQuery } from "../lists";
import { UserRef, namesFor } from "../names";

export interface Payment {
  id: string;
  subscription_id: string | null;
  invoice_id?: string | null;
  failure_message?: string | null;
  user_id: string | null;
  amount: number;
  currency: string;
  status: string;
  amount_refunded: number;
  failure_code: string | null;
  card: { brand: string; last4: string };
  created_at: string;
  capture_method?: "automatic" | "manual";
  amount_capturable?: number;
  amount_received?: number;
  capture_before?: string | null;
  canceled_at?: string | null;
  cancellation_reason?: string | null;
  description?: string | null;
}

const BACK = "/dashboard/payments";
export const paymentPage = (id: string) => `${BACK}/${encodeURIComponent(id)}`;
export const subscriptionPage = (id: string) => `/dashboard/subscriptions/${encodeURIComponent(id)}`;

interface Refund {
  id: string;
  amount: number;
  currency: string;
  status: string;
  created_at: string;
}
const REFUNDABLE = new Set(["completed", "partially_refunded"]);
/** Statuses a payment may be canceled in: authorized and not captured, or waiting for its payer to authenticate. */
const CANCELABLE = new Set(["requires_capture", "requires_action"]);

/** Capture (all that is capturable, or an amount typed in major units) and cancel, each asking first. */
function HoldForms({ c, payment: p, state, capture, cancel }: { c: Context<DashEnv>; payment: Payment; state?: FormState; capture: boolean; cancel: boolean }) {
  const held = formatMoney(p.amount_capturable ?? 0, p.currency);
  const code = p.currency.toUpperCase();
  return (
    <div class="row" data-section="hold">
      {capture ? (
        <form method="post" action={`${BACK}/${p.id}/capture`} class="row" data-confirm={`Capture this payment? Empty captures all ${held} authorized; a smaller amount releases the rest.`}>
          <FormFields session={c.var.session!} />
          <input
            name="amount"
            size={9}
            inputmode="decimal"
            placeholder={`all (${code})`}
            aria-label={`Amount to capture in ${code}, empty for all ${held}`}
            title={`In ${code} (${currencyDecimals(p.currency)} decimals), at most ${held}; leave empty to capture all of it`}
            value={valueOf(state, "amount")}
            {...invalid(state, "amount")}
          />
          <button type="submit" class="small">
            Capture
          </button>
          <Problems state={state} field="amount" />
        </form>
      ) : null}
      {cancel ? (
        <form method="post" action={`${BACK}/${p.id}/cancel`} class="inline" data-confirm={p.status === "requires_capture" ? `Cancel this payment? The ${held} authorized is released and cannot be captured.` : "Cancel this payment? The payer can no longer authenticate it."}>
          <FormFields session={c.var.session!} />
          <button type="submit" class="small danger">
            Cancel payment
          </button>
        </form>
      ) : null}
    </div>
  );
}

function RefundForm({ c, payment: p, state, from }: { c: Context<DashEnv>; payment: Payment; state?: FormState; from?: "page" }) {
  return (
    <form
      method="post"
      action={`${BACK}/${p.id}/refund`}
      class="row"
      data-refund-left={formatMoney(p.amount - p.amount_refunded, p.currency)}
      data-refund-currency={p.currency.toUpperCase()}
    >
      <FormFields session={c.var.session!} />
      {from ? <input type="hidden" name="from" value={from} /> : null}
      <input
        name="amount"
        size={9}
        inputmode="decimal"
        placeholder={`all (${p.currency.toUpperCase()})`}
        aria-label={`Amount to refund in ${p.currency.toUpperCase()}, empty for everything left`}
        title={`In ${p.currency.toUpperCase()} (${currencyDecimals(p.currency)} decimals); leave empty to refund everything left`}
        value={valueOf(state, "amount")}
        {...invalid(state, "amount")}
      />
      <button type="submit" class="small">
        Refund
      </button>
      <Problems state={state} field="amount" />
    </form>
  );
}

async function listPage(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const query = listQuery(c, ["user_id", "subscription_id"]);
  const answer = await c.var.api<Page<Payment>>("/payments", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read payments", "/dashboard");
  const page = answer.body;
  const refund = can(session, "refunds:write");
  const names = await namesFor(c.var.db, session.auth, { users: page.data.map((p) => p.user_id) });
  return render(c, state ? formStatus(state) : 200, {
    title: "Payments",
    active: BACK,
    children: (
      <>
      {/* A row's refund form is summed up above the list; its problem is also beside its field. */}
      <FormSummary state={state} />
      <section class="panel">
        {page.data.length === 0 ? (
          <Empty title="No payments yet">A payment is recorded each time a subscription is charged, and by POST /payments.</Empty>
        ) : (
          <TableWrap>
          <table class="stack">
            <thead>
              <tr>
                <th>Payment</th>
                <th>Customer</th>
                <th class="num">Amount</th>
                <th>Status</th>
                <th>Card</th>
                <th>Created</th>
                <th>Refund</th>
              </tr>
            </thead>
            <tbody>
              {page.data.map((p) => (
                <tr data-payment={p.id}>
                  <td data-label="Payment">
                    <Id id={p.id} href={paymentPage(p.id)} />
                    {p.subscription_id ? (
                      <div class="muted">
                        <Id id={p.subscription_id} href={subscriptionPage(p.subscription_id)} />
                      </div>
                    ) : null}
                  </td>
                  <td data-label="Customer">
                    <UserRef id={p.user_id} names={names} />
                  </td>
                  <td class="num lead">
                    <Money minor={p.amount} currency={p.currency} />
                    {p.amount_refunded > 0 ? (
                      <div class="muted">
                        <Money minor={p.amount_refunded} currency={p.currency} /> refunded
                      </div>
                    ) : null}
                  </td>
                  <td class="lead">
                    <StatusBadge status={p.status} />
                    {p.failure_code ? <div class="muted mono">{p.failure_code}</div> : null}
                  </td>
                  <td class="nowrap" data-label="Card">
                    {cardText(p.card)}
                  </td>
                  <td data-label="Created">
                    <Time iso={p.created_at} />
                  </td>
                  <td class="lead">
                    {refund && REFUNDABLE.has(p.status) ? (
                      <RefundForm c={c} payment={p} state={stateFor(state, `${BACK}/${p.id}/refund`)} />
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          </TableWrap>
        )}
        <Pager page={page} query={query} base={BACK} />
      </section>
      </>
    ),
  });
}

async function paymentDetail(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const id = c.req.param("id")!;
  const answer = await c.var.api<Payment>(`/payments/${encodeURIComponent(id)}`);
  if (!answer.ok) return apiErrorPage(c, answer, "read this payment", BACK);
  const p = answer.body;
  const refunds = can(session, "refunds:read") ? await c.var.api<Page<Refund>>("/refunds", { query: { payment_id: p.id, limit: 20 } }) : undefined;
  const names = await namesFor(c.var.db, session.auth, { users: [p.user_id] });
  const refund = can(session, "refunds:write") && REFUNDABLE.has(p.status);
  const writes = can(session, "payments:write");
  const capture = writes && p.status === "requires_capture";
  const cancel = writes && CANCELABLE.has(p.status);
  return render(c, state ? formStatus(state) : 200, {
    title: "Payment",
    active: BACK,
    children: (
      <>
        <FormSummary state={state} />
        <section class="panel" data-payment-page={p.id}>
          <Headline amount={<Money minor={p.amount} currency={p.currency} />} status={p.status}>
            {p.amount_refunded > 0 ? (
              <span class="muted">
                <Money minor={p.amount_refunded} currency={p.currency} /> refunded
              </span>
            ) : null}
          </Headline>
          {refund ? <RefundForm c={c} payment={p} state={stateFor(state, `${BACK}/${p.id}/refund`)} from="page" /> : null}
          {capture || cancel ? <HoldForms c={c} payment={p} state={stateFor(state, `${BACK}/${p.id}/capture`)} capture={capture} cancel={cancel} /> : null}
        </section>
        <section class="panel">
          <dl class="facts">
            <Fact term="Payment">
              <Id id={p.id} />
            </Fact>
            <Fact term="Customer">
              <UserRef id={p.user_id} names={names} />
            </Fact>
            <Fact term="Card">{cardText(p.card)}</Fact>
            {p.description ? <Fact term="Description">{p.description}</Fact> : null}
            {p.capture_method ? <Fact term="Capture">{p.capture_method === "manual" ? "Manual (authorize, then capture)" : "Automatic"}</Fact> : null}
            {p.status === "requires_capture" ? (
              <Fact term="Authorized">
                <Money minor={p.amount_capturable ?? 0} currency={p.currency} /> capturable
                {p.capture_before ? (
                  <div class="muted">
                    Canceled unless captured by <Time iso={p.capture_before} />
                  </div>
                ) : null}
              </Fact>
            ) : null}
            {p.amount_received !== undefined && p.amount_received !== p.amount && p.status !== "requires_capture" && p.status !== "failed" ? (
              <Fact term="Captured">
                <Money minor={p.amount_received} currency={p.currency} />
              </Fact>
            ) : null}
            {p.canceled_at ? (
              <Fact term="Canceled">
                <Time iso={p.canceled_at} />
                {p.cancellation_reason ? <div class="muted mono">{p.cancellation_reason}</div> : null}
              </Fact>
            ) : null}
            <Fact term="Subscription">{p.subscription_id ? <Id id={p.subscription_id} href={subscriptionPage(p.subscription_id)} /> : <span class="muted">—</span>}</Fact>
            <Fact term="Invoice">{p.invoice_id ? <Id id={p.invoice_id} href={`/dashboard/invoices/${encodeURIComponent(p.invoice_id)}`} /> : <span class="muted">—</span>}</Fact>
            {p.failure_code ? (
              <Fact term="Failure">
                <span class="mono">{p.failure_code}</span>
                {p.failure_message ? <div class="muted">{p.failure_message}</div> : null}
              </Fact>
            ) : null}
            <Fact term="Created">
              <Time iso={p.created_at} />
            </Fact>
          </dl>
        </section>
        {refunds?.ok && refunds.body.data.length ? (
          <section class="panel">
            <h2>Refunds</h2>
            <AmountRows rows={refunds.body.data} kind="refund" label="Refund" />
          </section>
        ) : null}
        <BackLink href={BACK}>All payments</BackLink>
      </>
    ),
  });
}

export function registerPaymentPages(dash: Hono<DashEnv>) {
  dash.get("/payments", (c) => listPage(c));
  dash.get("/payments/:id", (c) => paymentDetail(c));
  dash.post("/payments/:id/capture", async (c) => {
    const id = c.req.param("id");
    const state = newFormState(`${BACK}/${id}/capture`, c.var.form);
    const typed = field(c, "amount").trim();
    let amount: number | undefined;
    if (typed !== "") {
      // The payment's currency says how to read the amount typed in major units.
      const payment = await c.var.api<Payment>(`/payments/${encodeURIComponent(id)}`);
      if (!payment.ok) return apiErrorPage(c, payment, "capture this payment", BACK);
      const minor = majorToMinor(typed, payment.body.currency);
      if (!minor.ok) addProblem(state, "amount", minor.message);
      else if (minor.minor === 0) addProblem(state, "amount", "A capture must be more than zero.");
      else amount = minor.minor;
    }
    if (hasProblems(state)) return paymentDetail(c, state);
    return act<Payment>(c, {
      what: "capture this payment",
      back: paymentPage(id),
      send: (key) => c.var.api(`/payments/${encodeURIComponent(id)}/capture`, { body: amount === undefined ? {} : { amount }, idempotencyKey: key }),
      done: (payment) => redirectWithNotice(c, paymentPage(payment.id), "payment_captured", payment.id),
      failed: (answer) => {
        addApiError(state, answer.status, answer.error, "capture this payment", (param) => (param === "amount" ? "amount" : undefined));
        return paymentDetail(c, state);
      },
    });
  });
  dash.post("/payments/:id/cancel", (c) => {
    const id = c.req.param("id");
    return act<Payment>(c, {
      what: "cancel this payment",
      back: paymentPage(id),
      send: (key) => c.var.api(`/payments/${encodeURIComponent(id)}/cancel`, { body: {}, idempotencyKey: key }),
      done: (payment) => redirectWithNotice(c, paymentPage(payment.id), "payment_canceled", payment.id),
    });
  });
  dash.post("/payments/:id/refund", async (c) => {
    const id = c.req.param("id");
    const state = newFormState(`${BACK}/${id}/refund`, c.var.form);
    // A refund asked from the payment's page goes back there; from the list, to the list.
    const fromPage = field(c, "from") === "page" && ID_PATTERN.test(id);
    const back = fromPage ? paymentPage(id) : BACK;
    const again = (s2: FormState) => (fromPage ? paymentDetail(c, s2) : listPage(c, s2));
    const typed = field(c, "amount").trim();
    let amount: number | undefined;
    if (typed !== "") {
      // The payment's currency says how to read the amount typed in major units.
      const payment = await c.var.api<Payment>(`/payments/${encodeURIComponent(id)}`);
      if (!payment.ok) return apiErrorPage(c, payment, "refund this payment", BACK);
      const minor = majorToMinor(typed, payment.body.currency);
      if (!minor.ok) addProblem(state, "amount", minor.message);
      else if (minor.minor === 0) addProblem(state, "amount", "A refund must be more than zero.");
      else amount = minor.minor;
    }
    if (hasProblems(state)) return again(state);
    return act<{ id: string }>(c, {
      what: "refund this payment",
      back,
      send: (key) => c.var.api("/refunds", { body: { payment_id: id, ...(amount === undefined ? {} : { amount }) }, idempotencyKey: key }),
      done: (refund) => redirectWithNotice(c, back, "refund_created", refund.id),
      failed: (answer) => {
        addApiError(state, answer.status, answer.error, "refund this payment", (param) => (param === "amount" ? "amount" : undefined));
        return again(state);
      },
    });
  });
}
