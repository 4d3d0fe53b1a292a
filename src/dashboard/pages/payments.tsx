// Payments: the list, and a refund of one, full (amount left empty) or partial (an amount in major
// units, converted to minor units with the payment's currency exponent). POST /refunds decides.
// The form asks first, saying the amount (dashboard.js reads data-refund-left): an empty field
// refunds everything left, which one click must not do unasked.
import type { Context, Hono } from "hono";
import { act, apiErrorPage, field, redirectWithNotice } from "../actions";
import { type FormState, FormSummary, Problems, addApiError, addProblem, formStatus, hasProblems, invalid, newFormState, stateFor, valueOf } from "../form-state";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time, currencyDecimals, formatMoney, majorToMinor } from "../format";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";
import { UserRef, namesFor } from "../names";

interface Payment {
  id: string;
  subscription_id: string | null;
  user_id: string | null;
  amount: number;
  currency: string;
  status: string;
  amount_refunded: number;
  failure_code: string | null;
  card: { brand: string; last4: string };
  created_at: string;
}

const BACK = "/dashboard/payments";
const REFUNDABLE = new Set(["completed", "partially_refunded"]);

function RefundForm({ c, payment: p, state }: { c: Context<DashEnv>; payment: Payment; state?: FormState }) {
  return (
    <form
      method="post"
      action={`${BACK}/${p.id}/refund`}
      class="row"
      data-refund-left={formatMoney(p.amount - p.amount_refunded, p.currency)}
      data-refund-currency={p.currency.toUpperCase()}
    >
      <FormFields session={c.var.session!} />
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
          <Empty title="No payments yet">A payment is recorded each time a subscription is charged.</Empty>
        ) : (
          <TableWrap>
          <table>
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
                  <td>
                    <Id id={p.id} />
                    {p.subscription_id ? (
                      <div class="muted">
                        <Id id={p.subscription_id} />
                      </div>
                    ) : null}
                  </td>
                  <td>
                    <UserRef id={p.user_id} names={names} />
                  </td>
                  <td class="num">
                    <Money minor={p.amount} currency={p.currency} />
                    {p.amount_refunded > 0 ? (
                      <div class="muted">
                        <Money minor={p.amount_refunded} currency={p.currency} /> refunded
                      </div>
                    ) : null}
                  </td>
                  <td>
                    <StatusBadge status={p.status} />
                    {p.failure_code ? <div class="muted mono">{p.failure_code}</div> : null}
                  </td>
                  <td class="nowrap">
                    {p.card.brand} •••• {p.card.last4}
                  </td>
                  <td>
                    <Time iso={p.created_at} />
                  </td>
                  <td>
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

export function registerPaymentPages(dash: Hono<DashEnv>) {
  dash.get("/payments", (c) => listPage(c));
  dash.post("/payments/:id/refund", async (c) => {
    const id = c.req.param("id");
    const state = newFormState(`${BACK}/${id}/refund`, c.var.form);
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
    if (hasProblems(state)) return listPage(c, state);
    return act<{ id: string }>(c, {
      what: "refund this payment",
      back: BACK,
      send: (key) => c.var.api("/refunds", { body: { payment_id: id, ...(amount === undefined ? {} : { amount }) }, idempotencyKey: key }),
      done: (refund) => redirectWithNotice(c, BACK, "refund_created", refund.id),
      failed: (answer) => {
        addApiError(state, answer.status, answer.error, "refund this payment", (param) => (param === "amount" ? "amount" : undefined));
        return listPage(c, state);
      },
    });
  });
}
