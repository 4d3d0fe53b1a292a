// Users: the list (GET /api/users), newest first, and a user's page: who they are, the test clock
// they follow (with its time), their saved cards (GET /api/users/{id}/payment-methods, read-only),
// the cards seen on their subscriptions and payments, their subscriptions, their payments and the
// payouts made to them. Each part is read through the API as
// the session's key and shown only when the key may read it.
import type { Context, Hono } from "hono";
import { type PostalAddress, type TaxIdValue, addressLines, taxIdLabel } from "../../domain/parties";
import { apiErrorPage } from "../actions";
import type { ApiAnswer, Page } from "../api";
import type { DashEnv } from "../context";
import { Email, Id, Time, cardText } from "../format";
import { Empty, Pager, StatusBadge, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";
import { AmountRows, BackLink, Fact, PaymentRows, StackTable } from "../details";
import { ClockTime, PlanRef, namesFor, userPage } from "../names";

interface User {
  id: string;
  name: string;
  email: string;
  test_clock: string | null;
  address?: PostalAddress | null;
  tax_ids?: TaxIdValue[];
  created_at: string;
  updated_at: string;
}

interface Card {
  brand: string;
  last4: string;
}

interface SavedCard {
  id: string;
  card: { brand: string; last4: string; exp_month: number; exp_year: number };
  created_at: string;
}

interface UserSubscription {
  id: string;
  plan_id: string;
  status: string;
  quantity: number;
  card: Card;
  next_billing_date: string | null;
  created_at: string;
}

interface UserPayment {
  id: string;
  amount: number;
  currency: string;
  status: string;
  card: Card;
  created_at: string;
}

interface UserPayout {
  id: string;
  amount: number;
  currency: string;
  status: string;
  card: Card;
  created_at: string;
}

const BACK = "/dashboard/users";
/** How many of a user's subscriptions, payments and payouts their page shows (the lists page the rest). */
const SHOWN = 10;

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<User>>("/api/users", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read users", "/dashboard");
  const page = answer.body;
  const names = await namesFor(c.var.db, session.auth, { users: page.data.filter((u) => u.test_clock).map((u) => u.id) });
  return render(c, 200, {
    title: "Users",
    active: BACK,
    children: (
      <section class="panel">
        {page.data.length === 0 ? (
          <Empty title="No users yet">Users are created with POST /api/users.</Empty>
        ) : (
          <StackTable columns={["User", "Email", "Test clock", "Created", "Updated"]}>
            {page.data.map((u) => (
              <tr data-user={u.id}>
                <td class="lead">
                  <a href={userPage(u.id)} class="wrap">
                    {u.name}
                  </a>
                  <div class="muted">
                    <Id id={u.id} />
                  </div>
                </td>
                <td class="lead">
                  <Email email={u.email} />
                </td>
                <td data-label="Test clock">
                  {u.test_clock ? (
                    <>
                      <Id id={u.test_clock} />
                      <ClockTime clock={names.clocks.get(u.id)} />
                    </>
                  ) : (
                    <span class="muted">—</span>
                  )}
                </td>
                <td data-label="Created">
                  <Time iso={u.created_at} />
                </td>
                <td data-label="Updated">
                  <Time iso={u.updated_at} />
                </td>
              </tr>
            ))}
          </StackTable>
        )}
        <Pager page={page} query={query} base={BACK} />
      </section>
    ),
  });
}

/** A list the key may read, or nothing: a restricted key's user page leaves out what it cannot see. */
const readable = <T,>(answer: ApiAnswer<Page<T>> | undefined): T[] | undefined => (answer?.ok ? answer.body.data : undefined);

async function userDetail(c: Context<DashEnv>) {
  const session = c.var.session!;
  const id = c.req.param("id")!;
  const answer = await c.var.api<User>(`/api/users/${encodeURIComponent(id)}`);
  if (!answer.ok) return apiErrorPage(c, answer, "read this user", BACK);
  const user = answer.body;
  const query = { limit: SHOWN };
  // The saved cards page with the API's cursors on this page's own URL.
  const cardsQuery = listQuery(c);
  const [savedAnswer, subscriptionsAnswer, paymentsAnswer, payoutsAnswer] = await Promise.all([
    c.var.api<Page<SavedCard>>(`/api/users/${encodeURIComponent(user.id)}/payment-methods`, { query: apiQuery(cardsQuery) }),
    can(session, "subscriptions:read") ? c.var.api<Page<UserSubscription>>("/subscriptions", { query: { ...query, user_id: user.id } }) : undefined,
    can(session, "payments:read") ? c.var.api<Page<UserPayment>>("/payments", { query: { ...query, user_id: user.id } }) : undefined,
    can(session, "payouts:read") ? c.var.api<Page<UserPayout>>("/payouts", { query: { ...query, recipient_id: user.id } }) : undefined,
  ]);
  const subscriptions = readable(subscriptionsAnswer);
  const payments = readable(paymentsAnswer);
  const payouts = readable(payoutsAnswer);
  const names = await namesFor(c.var.db, session.auth, { users: [user.id], plans: (subscriptions ?? []).map((s) => s.plan_id) });
  // The cards this user was charged with: those on their subscriptions and payments, newest first, each once.
  const cards = new Map<string, { card: Card; seen: string }>();
  for (const { card, created_at } of [...(subscriptions ?? []), ...(payments ?? [])].sort((a, b) => b.created_at.localeCompare(a.created_at))) {
    const key = `${card.brand}:${card.last4}`;
    if (!cards.has(key)) cards.set(key, { card, seen: created_at });
  }
  return render(c, 200, {
    title: user.name,
    active: BACK,
    children: (
      <>
        <section class="panel" data-user-page={user.id}>
          <dl class="facts">
            <Fact term="Email">
              <Email email={user.email} />
            </Fact>
            <Fact term="User">
              <Id id={user.id} />
            </Fact>
            {user.address ? (
              <Fact term="Address" data-address>
                {addressLines(user.address).join(", ")}
              </Fact>
            ) : null}
            {user.tax_ids?.length ? (
              <Fact term="Tax ids" data-tax-ids>
                {user.tax_ids.map(taxIdLabel).join(", ")}
              </Fact>
            ) : null}
            {user.test_clock ? (
              <Fact term="Test clock">
                <Id id={user.test_clock} href="/dashboard/test-clocks" />
                <ClockTime clock={names.clocks.get(user.id)} />
              </Fact>
            ) : null}
            <Fact term="Created">
              <Time iso={user.created_at} />
            </Fact>
          </dl>
        </section>
        {savedAnswer.ok ? (
          <section class="panel" aria-label="Saved cards" data-section="saved-cards">
            <h2>Saved cards</h2>
            {savedAnswer.body.data.length === 0 ? (
              <Empty title="No saved cards">Cards are saved with POST /api/users/{"{id}"}/payment-methods.</Empty>
            ) : (
              <StackTable columns={["Card", "Expires", "Payment method", "Saved"]}>
                {savedAnswer.body.data.map((m) => (
                  <tr data-payment-method={m.id}>
                    <td class="nowrap lead">{cardText(m.card)}</td>
                    <td class="nowrap lead">
                      {String(m.card.exp_month).padStart(2, "0")}/{m.card.exp_year}
                    </td>
                    <td data-label="Payment method">
                      <Id id={m.id} />
                    </td>
                    <td data-label="Saved">
                      <Time iso={m.created_at} />
                    </td>
                  </tr>
                ))}
              </StackTable>
            )}
            <Pager page={savedAnswer.body} query={cardsQuery} base={userPage(user.id)} />
          </section>
        ) : null}
        <section class="panel" data-section="cards">
          <h2>Cards charged</h2>
          {cards.size === 0 ? (
            <p class="muted">No card seen yet: a card appears here once a subscription or payment of this user uses it.</p>
          ) : (
            <ul class="plain" data-cards>
              {[...cards.values()].map(({ card, seen }) => (
                <li data-card={card.last4}>
                  {cardText(card)} <span class="muted">(last used <Time iso={seen} />)</span>
                </li>
              ))}
            </ul>
          )}
        </section>
        {subscriptions ? (
          <section class="panel" data-section="subscriptions">
            <h2>Subscriptions</h2>
            {subscriptions.length === 0 ? (
              <Empty title="No subscriptions">Subscriptions are created with POST /subscriptions.</Empty>
            ) : (
              <StackTable columns={["Plan", "Status", "Subscription", "Next billing", "Card"]}>
                {subscriptions.map((s) => (
                  <tr data-subscription={s.id}>
                    <td class="lead">
                      <span class="inline-ref">
                        {s.quantity} × <PlanRef id={s.plan_id} names={names} />
                      </span>
                    </td>
                    <td class="lead">
                      <StatusBadge status={s.status} />
                    </td>
                    <td data-label="Subscription">
                      <Id id={s.id} href={`/dashboard/subscriptions/${encodeURIComponent(s.id)}`} />
                    </td>
                    <td data-label="Next billing">
                      <Time iso={s.next_billing_date} />
                    </td>
                    <td class="nowrap" data-label="Card">
                      {cardText(s.card)}
                    </td>
                  </tr>
                ))}
              </StackTable>
            )}
            {subscriptionsAnswer?.ok && subscriptionsAnswer.body.has_more ? (
              <p>
                <a href={`/dashboard/subscriptions?user_id=${encodeURIComponent(user.id)}`}>All their subscriptions</a>
              </p>
            ) : null}
          </section>
        ) : null}
        {payments ? (
          <section class="panel" data-section="payments">
            <h2>Payments</h2>
            {payments.length === 0 ? <Empty title="No payments">A payment is recorded each time this user is charged.</Empty> : <PaymentRows payments={payments} />}
            {paymentsAnswer?.ok && paymentsAnswer.body.has_more ? (
              <p>
                <a href={`/dashboard/payments?user_id=${encodeURIComponent(user.id)}`}>All their payments</a>
              </p>
            ) : null}
          </section>
        ) : null}
        {payouts && payouts.length > 0 ? (
          <section class="panel" data-section="payouts">
            <h2>Payouts to them</h2>
            <AmountRows rows={payouts} kind="payout" label="Payout" href={(id) => `/dashboard/payouts/${encodeURIComponent(id)}`} />
          </section>
        ) : null}
        <BackLink href={BACK}>All users</BackLink>
      </>
    ),
  });
}

export function registerUserPages(dash: Hono<DashEnv>) {
  dash.get("/users", listPage);
  dash.get("/users/:id", userDetail);
}
