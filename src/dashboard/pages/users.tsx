// Users: the list (GET /api/users), newest first, and a user's page with their saved cards
// (GET /api/users/{id}, GET /api/users/{id}/payment-methods), read-only.
import type { Context, Hono } from "hono";
import { apiErrorPage } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Time } from "../format";
import { Empty, Pager, TableWrap, render } from "../layout";
import { apiQuery, listQuery } from "../lists";

interface User {
  id: string;
  name: string;
  email: string;
  test_clock: string | null;
  created_at: string;
  updated_at: string;
}

interface SavedCard {
  id: string;
  card: { brand: string; last4: string; exp_month: number; exp_year: number };
  created_at: string;
}

const BACK = "/dashboard/users";

async function listPage(c: Context<DashEnv>) {
  const query = listQuery(c);
  const answer = await c.var.api<Page<User>>("/api/users", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read users", "/dashboard");
  const page = answer.body;
  return render(c, 200, {
    title: "Users",
    active: BACK,
    children: (
      <section class="panel">
        {page.data.length === 0 ? (
          <Empty title="No users yet">Users are created with POST /api/users.</Empty>
        ) : (
          <TableWrap>
          <table>
            <thead>
              <tr>
                <th>User</th>
                <th>Email</th>
                <th>Test clock</th>
                <th>Created</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {page.data.map((u) => (
                <tr data-user={u.id}>
                  <td>
                    <a href={`${BACK}/${u.id}`} class="wrap">
                      {u.name}
                    </a>
                    <div class="muted">
                      <Id id={u.id} />
                    </div>
                  </td>
                  <td class="wrap">{u.email}</td>
                  <td>{u.test_clock ? <Id id={u.test_clock} /> : <span class="muted">—</span>}</td>
                  <td>
                    <Time iso={u.created_at} />
                  </td>
                  <td>
                    <Time iso={u.updated_at} />
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

async function userPage(c: Context<DashEnv>) {
  const id = c.req.param("id")!;
  const path = `/api/users/${encodeURIComponent(id)}`;
  const user = await c.var.api<User>(path);
  if (!user.ok) return apiErrorPage(c, user, "read this user", BACK);
  const query = listQuery(c);
  const cards = await c.var.api<Page<SavedCard>>(`${path}/payment-methods`, { query: apiQuery(query) });
  if (!cards.ok) return apiErrorPage(c, cards, "read this user's saved cards", BACK);
  const u = user.body;
  return render(c, 200, {
    title: u.name,
    active: BACK,
    children: (
      <>
        <section class="panel">
          <p>
            <span class="wrap">{u.email}</span> · <Id id={u.id} />
          </p>
        </section>
        <section class="panel" aria-label="Saved cards">
          <h2>Saved cards</h2>
          {cards.body.data.length === 0 ? (
            <Empty title="No saved cards">Cards are saved with POST /api/users/{"{id}"}/payment-methods.</Empty>
          ) : (
            <TableWrap>
              <table>
                <thead>
                  <tr>
                    <th>Payment method</th>
                    <th>Card</th>
                    <th>Expires</th>
                    <th>Saved</th>
                  </tr>
                </thead>
                <tbody>
                  {cards.body.data.map((m) => (
                    <tr data-payment-method={m.id}>
                      <td>
                        <Id id={m.id} />
                      </td>
                      <td class="nowrap">
                        {m.card.brand} •••• {m.card.last4}
                      </td>
                      <td class="nowrap">
                        {String(m.card.exp_month).padStart(2, "0")}/{m.card.exp_year}
                      </td>
                      <td>
                        <Time iso={m.created_at} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
          <Pager page={cards.body} query={query} base={`${BACK}/${u.id}`} />
        </section>
      </>
    ),
  });
}

export function registerUserPages(dash: Hono<DashEnv>) {
  dash.get("/users", listPage);
  dash.get("/users/:id", userPage);
}
