// Payouts: the list (filter by status) and cancel, for a payout still pending (POST
// /payouts/{id}/cancel; the API answers 409 once the payout has been handed to the processor).
import type { Context, Hono } from "hono";
import { act, apiErrorPage, redirectWithNotice } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time } from "../format";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render, StatusFilter } from "../layout";
import { apiQuery, listQuery } from "../lists";
import { UserRef, namesFor } from "../names";

interface Payout {
  id: string;
  recipient_id: string | null;
  amount: number;
  currency: string;
  description: string | null;
  status: string;
  date: string;
  card: { brand: string; last4: string };
  failure_code: string | null;
  created_at: string;
}

const BACK = "/dashboard/payouts";
const STATUSES = ["pending", "paid", "failed", "canceled"];

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const query = listQuery(c, ["status"]);
  const answer = await c.var.api<Page<Payout>>("/payouts", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read payouts", "/dashboard");
  const page = answer.body;
  const write = can(session, "payouts:write");
  const names = await namesFor(c.var.db, session.auth, { users: page.data.map((p) => p.recipient_id) });
  return render(c, 200, {
    title: "Payouts",
    active: BACK,
    children: (
      <section class="panel">
        <p class="muted">
          <StatusFilter statuses={STATUSES} current={query.status} base={BACK} />
        </p>
        {page.data.length === 0 ? (
          <Empty title={query.status ? `No ${query.status} payouts` : "No payouts yet"}>Payouts are made with POST /payout; a new one can be canceled for its first 5 seconds.</Empty>
        ) : (
          <TableWrap>
          <table>
            <thead>
              <tr>
                <th>Payout</th>
                <th class="num">Amount</th>
                <th>Status</th>
                <th>Recipient</th>
                <th>Card</th>
                <th>Created</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {page.data.map((p) => (
                <tr data-payout={p.id}>
                  <td>
                    <Id id={p.id} />
                    {p.description ? <div class="muted wrap">{p.description}</div> : null}
                  </td>
                  <td class="num">
                    <Money minor={p.amount} currency={p.currency} />
                  </td>
                  <td>
                    <StatusBadge status={p.status} />
                    {p.failure_code ? <div class="muted mono">{p.failure_code}</div> : null}
                  </td>
                  <td>
                    <UserRef id={p.recipient_id} names={names} />
                  </td>
                  <td class="nowrap">
                    {p.card.brand} •••• {p.card.last4}
                  </td>
                  <td>
                    <Time iso={p.created_at} />
                  </td>
                  <td>
                    {write && p.status === "pending" ? (
                      <form method="post" action={`${BACK}/${p.id}/cancel`} class="inline">
                        <FormFields session={session} />
                        <button type="submit" class="small danger">
                          Cancel
                        </button>
                      </form>
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
    ),
  });
}

export function registerPayoutPages(dash: Hono<DashEnv>) {
  dash.get("/payouts", listPage);
  dash.post("/payouts/:id/cancel", (c) => {
    const id = c.req.param("id");
    return act<Payout>(c, {
      what: "cancel this payout",
      back: BACK,
      send: (key) => c.var.api(`/payouts/${encodeURIComponent(id)}/cancel`, { method: "POST", idempotencyKey: key }),
      done: (payout) => redirectWithNotice(c, BACK, "payout_canceled", payout.id),
    });
  });
}
