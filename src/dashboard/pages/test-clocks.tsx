// Test clocks (test mode only): the list, create (a frozen time and a name), and advance. Times are
// typed in UTC. A live-mode session is told that clocks exist in test mode only (the API's 403
// would say the same), with the switch to test mode.
import type { Context, Hono } from "hono";
import { CreateTestClockBody } from "../../routes/test-clocks/schema";
import { act, apiErrorPage, field, redirectWithNotice } from "../actions";
import { type FormState, FormSummary, Problems, addApiError, addProblem, checkWithSchema, formStatus, hasProblems, invalid, newFormState, stateFor, valueOf } from "../form-state";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Time } from "../format";
import { Empty, FormFields, Pager, StatusBadge, SwitchButton, TableWrap, can, render } from "../layout";
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

async function listPage(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  if (session.auth.mode === "live") {
    return render(c, 403, {
      title: "Test clocks",
      active: BACK,
      children: (
        <section class="panel">
          <Empty title="Test clocks exist in test mode only">
            <p>Live data has no test clocks: switch to test data to use them.</p>
            <SwitchButton session={session} to="test" back={BACK}>
              View test data
            </SwitchButton>
          </Empty>
        </section>
      ),
    });
  }
  const query = listQuery(c);
  const answer = await c.var.api<Page<TestClock>>("/api/test-clocks", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read test clocks", "/dashboard");
  const page = answer.body;
  const write = can(session, "test_clocks:write");
  return render(c, state ? formStatus(state) : 200, {
    title: "Test clocks",
    active: BACK,
    children: (
      <>
        {/* A row's form (advance) is summed up above the list; its problem is also beside its field. */}
        {state && state.action !== BACK ? <FormSummary state={state} /> : null}
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
                        <AdvanceForm c={c} clock={clock} state={stateFor(state, `${BACK}/${clock.id}/advance`)} />
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
            <FormSummary state={stateFor(state, BACK)} />
            <form method="post" action={BACK} class="row">
              <FormFields session={session} />
              <label>
                Frozen time (UTC)
                <input
                  type="datetime-local"
                  step="1"
                  name="frozen_time"
                  required
                  value={valueOf(stateFor(state, BACK), "frozen_time", inputValue(new Date().toISOString()))}
                  {...invalid(stateFor(state, BACK), "frozen_time")}
                />
                <Problems state={stateFor(state, BACK)} field="frozen_time" />
              </label>
              <label>
                Name
                <input name="name" maxlength={200} placeholder="Leap-year renewals" value={valueOf(stateFor(state, BACK), "name")} {...invalid(stateFor(state, BACK), "name")} />
                <Problems state={stateFor(state, BACK)} field="name" />
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

function AdvanceForm({ c, clock, state }: { c: Context<DashEnv>; clock: TestClock; state?: FormState }) {
  return (
    <form method="post" action={`${BACK}/${clock.id}/advance`} class="row">
      <FormFields session={c.var.session!} />
      <input
        type="datetime-local"
        step="1"
        name="frozen_time"
        required
        value={valueOf(state, "frozen_time", inputValue(clock.frozen_time))}
        aria-label="New frozen time (UTC)"
        {...invalid(state, "frozen_time")}
      />
      <button type="submit" class="small">
        Advance
      </button>
      <Problems state={state} field="frozen_time" />
    </form>
  );
}

/** Where a problem with a path of the API's body is shown in the form. */
const clockField = (path: string) => (path === "frozen_time" || path === "name" ? path : undefined);

export function registerTestClockPages(dash: Hono<DashEnv>) {
  dash.get("/test-clocks", (c) => listPage(c));
  dash.post("/test-clocks", (c) => {
    const state = newFormState(BACK, c.var.form);
    const frozen = utcInput(field(c, "frozen_time"));
    if (!frozen) addProblem(state, "frozen_time", "Enter the clock's time as a UTC date and time, such as 2026-01-31T12:00.");
    const name = field(c, "name").trim();
    const body = { frozen_time: frozen, ...(name ? { name } : {}) };
    checkWithSchema(state, CreateTestClockBody, body, clockField);
    if (hasProblems(state)) return listPage(c, state);
    return act<TestClock>(c, {
      what: "create this test clock",
      back: BACK,
      send: (key) => c.var.api("/api/test-clocks", { body, idempotencyKey: key }),
      done: (clock) => redirectWithNotice(c, BACK, "clock_created", clock.id),
      failed: (answer) => {
        addApiError(state, answer.status, answer.error, "create this test clock", clockField);
        return listPage(c, state);
      },
    });
  });
  dash.post("/test-clocks/:id/advance", (c) => {
    const id = c.req.param("id");
    const state = newFormState(`${BACK}/${id}/advance`, c.var.form);
    const frozen = utcInput(field(c, "frozen_time"));
    if (!frozen) addProblem(state, "frozen_time", "Enter the new time as a UTC date and time, such as 2026-02-28T12:00.");
    if (hasProblems(state)) return listPage(c, state);
    return act<TestClock>(c, {
      what: "advance this test clock",
      back: BACK,
      send: (key) => c.var.api(`/api/test-clocks/${encodeURIComponent(id)}/advance`, { body: { frozen_time: frozen }, idempotencyKey: key }),
      done: (clock) => redirectWithNotice(c, BACK, "clock_advanced", clock.id),
      failed: (answer) => {
        addApiError(state, answer.status, answer.error, "advance this test clock", clockField);
        return listPage(c, state);
      },
    });
  });
}
