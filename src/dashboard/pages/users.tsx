// Users: the list (GET /api/users), newest first.
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
                    <span class="wrap">{u.name}</span>
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

export function registerUserPages(dash: Hono<DashEnv>) {
  dash.get("/users", listPage);
}
