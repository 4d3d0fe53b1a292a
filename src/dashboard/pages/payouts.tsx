// Payouts: the list (filter by status), a payout's page, and cancel, for a payout still pending (POST
// /payouts/{id}/cancel; the API answers 409 once the payout has been handed to the processor).
import type { Context, Hono } from "hono";
import { act, apiErrorPage, redirectWithNotice } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time, cardText } from "../format";
import { BackLink, Fact, Headline } from "../details";
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
const payoutPage = (id: string) => `${BACK}/${encodeURIComponent(id)}`;

function CancelForm({ c, payout }: { c: Context<DashEnv>; payout: Payout }) {
  return (
    <form method="post" action={`${BACK}/${payout.id}/cancel`} class="inline">
      <FormFields session={c.var.session!} />
      <button type="submit" class="small danger">
        Cancel
      </button>
    </form>
  );
}
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
          <table class="stack">
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
                  <td data-label="Payout">
                    <Id id={p.id} href={payoutPage(p.id)} />
                    {p.description ? <div class="muted wrap">{p.description}</div> : null}
                  </td>
                  <td class="num lead">
                    <Money minor={p.amount} currency={p.currency} />
                  </td>
                  <td class="lead">
                    <StatusBadge status={p.status} />
                    {p.failure_code ? <div class="muted mono">{p.failure_code}</div> : null}
                  </td>
                  <td data-label="Recipient">
                    <UserRef id={p.recipient_id} names={names} />
                  </td>
                  <td class="nowrap" data-label="Card">
                    {cardText(p.card)}
                  </td>
                  <td data-label="Created">
                    <Time iso={p.created_at} />
                  </td>
                  <td class="lead">{write && p.status === "pending" ? <CancelForm c={c} payout={p} /> : null}</td>
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

async function payoutDetail(c: Context<DashEnv>) {
  const session = c.var.session!;
  const id = c.req.param("id")!;
  const answer = await c.var.api<Payout>(`/payouts/${encodeURIComponent(id)}`);
  if (!answer.ok) return apiErrorPage(c, answer, "read this payout", BACK);
  const p = answer.body;
  const names = await namesFor(c.var.db, session.auth, { users: [p.recipient_id] });
  return render(c, 200, {
    title: "Payout",
    active: BACK,
    children: (
      <>
        <section class="panel" data-payout-page={p.id}>
          <Headline amount={<Money minor={p.amount} currency={p.currency} />} status={p.status}>
            {can(session, "payouts:write") && p.status === "pending" ? <CancelForm c={c} payout={p} /> : null}
          </Headline>
          <dl class="facts">
            <Fact term="Payout">
              <Id id={p.id} />
            </Fact>
            <Fact term="Recipient">
              <UserRef id={p.recipient_id} names={names} />
            </Fact>
            <Fact term="Card">{cardText(p.card)}</Fact>
            <Fact term="Description" class="wrap">
              {p.description ?? <span class="muted">—</span>}
            </Fact>
            <Fact term="Date">{p.date}</Fact>
            {p.failure_code ? (
              <Fact term="Failure" class="mono">
                {p.failure_code}
              </Fact>
            ) : null}
            <Fact term="Created">
              <Time iso={p.created_at} />
            </Fact>
          </dl>
        </section>
        <BackLink href={BACK}>All payouts</BackLink>
      </>
    ),
  });
}

export function registerPayoutPages(dash: Hono<DashEnv>) {
  dash.get("/payouts", listPage);
  dash.get("/payouts/:id", payoutDetail);
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
