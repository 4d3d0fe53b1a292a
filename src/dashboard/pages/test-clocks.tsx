// Test clocks (test mode only): the list, create (a frozen time and a name), and advance. Times are
// typed in UTC. A live-mode session is told that clocks exist in test mode only; the API's 403
// would say the same.
import type { Context, Hono } from "hono";
import { act, apiErrorPage, field, redirectWithNotice, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Time } from "../format";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";

interface TestClock {
  id: string;
  name: string | null;
  frozen_time: string;
  status: string;
  created_at: string;
}

const BACK = "/dashboard/test-clocks";
const UTC_INPUT = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(:\d{2}(\.\d{1,3})?)?Z?$/;

/** "2026-01-31T12:00" (a datetime-local field, read as UTC) -> "2026-01-31T12:00:00.000Z". */
export function utcInput(text: string): string | undefined {
  const m = UTC_INPUT.exec(text.trim());
  if (!m) return undefined;
  const iso = `${m[1]}T${m[2]}${m[3] ?? ":00"}Z`;
  const ms = Date.parse(iso);
  // February 30 is not a day: the parsed instant must say what was typed.
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 16) !== iso.slice(0, 16)) return undefined;
  return new Date(ms).toISOString();
}

const inputValue = (iso: string) => iso.slice(0, 19);

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  if (session.auth.mode === "live") {
    return render(c, 403, {
      title: "Test clocks",
      active: BACK,
      children: (
        <section class="panel">
          <Empty title="Test clocks exist in test mode only">Sign in with a test-mode key (sk_test_…) to use them.</Empty>
        </section>
      ),
    });
  }
  const query = listQuery(c);
  const answer = await c.var.api<Page<TestClock>>("/api/test-clocks", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read test clocks", "/dashboard");
  const page = answer.body;
  const write = can(session, "test_clocks:write");
  return render(c, 200, {
    title: "Test clocks",
    active: BACK,
    children: (
      <>
        <section class="panel">
          {page.data.length === 0 ? (
            <Empty title="No test clocks yet">A clock lets subscriptions of its users renew as if time had passed.</Empty>
          ) : (
            <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Clock</th>
                  <th>Frozen time</th>
                  <th>Status</th>
                  <th>Advance to (UTC)</th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((clock) => (
                  <tr data-clock={clock.id}>
                    <td>
                      {clock.name ?? <span class="muted">unnamed</span>}
                      <div class="muted">
                        <Id id={clock.id} />
                      </div>
                    </td>
                    <td>
                      <Time iso={clock.frozen_time} />
                    </td>
                    <td>
                      <StatusBadge status={clock.status} />
                    </td>
                    <td>
                      {write ? (
                        <form method="post" action={`${BACK}/${clock.id}/advance`} class="row">
                          <FormFields session={session} />
                          <input type="datetime-local" step="1" name="frozen_time" required value={inputValue(clock.frozen_time)} aria-label="New frozen time (UTC)" />
                          <button type="submit" class="small">
                            Advance
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
        {write ? (
          <section class="panel">
            <h2>Create a test clock</h2>
            <form method="post" action={BACK} class="row">
              <FormFields session={session} />
              <label>
                Frozen time (UTC)
                <input type="datetime-local" step="1" name="frozen_time" required value={inputValue(new Date().toISOString())} />
              </label>
              <label>
                Name
                <input name="name" maxlength={200} placeholder="Leap-year renewals" />
              </label>
              <button class="primary" type="submit">
                Create clock
              </button>
            </form>
          </section>
        ) : (
          <p class="muted">This key cannot create or advance clocks (it needs test_clocks:write).</p>
        )}
      </>
    ),
  });
}

export function registerTestClockPages(dash: Hono<DashEnv>) {
  dash.get("/test-clocks", listPage);
  dash.post("/test-clocks", (c) => {
    const frozen = utcInput(field(c, "frozen_time"));
    if (!frozen) return refuse(c, 400, "Enter the clock's time as a UTC date and time, such as 2026-01-31T12:00.", BACK, "parameter_invalid", "frozen_time");
    const name = field(c, "name").trim();
    return act<TestClock>(c, {
      what: "create this test clock",
      back: BACK,
      send: (key) => c.var.api("/api/test-clocks", { body: { frozen_time: frozen, ...(name ? { name } : {}) }, idempotencyKey: key }),
      done: (clock) => redirectWithNotice(c, BACK, "clock_created", clock.id),
    });
  });
  dash.post("/test-clocks/:id/advance", (c) => {
    const id = c.req.param("id");
    const frozen = utcInput(field(c, "frozen_time"));
    if (!frozen) return refuse(c, 400, "Enter the new time as a UTC date and time, such as 2026-02-28T12:00.", BACK, "parameter_invalid", "frozen_time");
    return act<TestClock>(c, {
      what: "advance this test clock",
      back: BACK,
      send: (key) => c.var.api(`/api/test-clocks/${encodeURIComponent(id)}/advance`, { body: { frozen_time: frozen }, idempotencyKey: key }),
      done: (clock) => redirectWithNotice(c, BACK, "clock_advanced", clock.id),
    });
  });
}
