// Webhooks: the endpoints (URL, events, status, success rate over 30 days) with a form to register
// one; an endpoint's page with its deliveries and every attempt (time, status code, duration,
// response excerpt); and the actions: send a test event, rotate the secret (the new secret shown
// once), disable / enable, delete, and redeliver a delivery that has not been delivered. A disabled
// endpoint's page says why and since when, with Enable.
import type { Context, Hono } from "hono";
import { clock } from "../../lib/clock";
import { isDevelopment } from "../../env";
import { CreateWebhookBody } from "../../routes/webhooks/schema";
import { checkWebhookUrl } from "../../webhooks/url-policy";
import { act, apiErrorPage, field, fields, redirectWithNotice, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { type FormState, FormSummary, Problems, addApiError, addProblem, checkWithSchema, checked, formStatus, hasProblems, invalid, newFormState, valueOf } from "../form-state";
import { Id, Time } from "../format";
import { Empty, FormFields, Pager, SecretOnce, StatusBadge, StatusFilter, TableWrap, can, render } from "../layout";
import { ID_PATTERN, apiQuery, listQuery } from "../lists";
import { namesFor } from "../names";
import { endpointSuccessRates } from "../stats";
import { RATE_LIMIT_MAX, RATE_LIMIT_MIN } from "../../domain/webhook-throttle";

interface Endpoint {
  id: string;
  url: string;
  events: string[];
  status: "active" | "disabled";
  disabled_reason: "failing" | "gone" | "manual" | null;
  disabled_at: string | null;
  ordering: string;
  rate_limit: number | null;
  created_at: string;
  secret?: string | null;
}

interface Attempt {
  attempt_number: number;
  attempted_at: string;
  status_code: number | null;
  duration_ms: number;
  response_excerpt: string | null;
  error: string | null;
}

interface Delivery {
  id: string;
  event_id: string;
  status: "pending" | "delivered" | "failed";
  attempt_count: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  waiting_for: string | null;
  created_at: string;
  delivered_at: string | null;
  attempts: Attempt[];
}

interface EventType {
  type: string;
  description: string;
}

const BACK = "/dashboard/webhooks";

/** Why an endpoint is disabled, in words (the API answers the code). */
const DISABLED_BECAUSE: Record<NonNullable<Endpoint["disabled_reason"]>, string> = {
  failing: "Every attempt to deliver to it failed for 5 days.",
  gone: "It answered 410 Gone.",
  manual: "It was disabled by hand (through the API or this dashboard).",
};

/** A disabled endpoint's reason and since when, with Enable (it resends nothing: a redelivery does). */
function DisabledNotice({ c, e, base, write }: { c: Context<DashEnv>; e: Endpoint; base: string; write: boolean }) {
  if (e.status !== "disabled") return null;
  return (
    <div class="warning" role="alert" data-disabled-reason={e.disabled_reason ?? ""}>
      <p>
        <strong>Disabled</strong> since <Time iso={e.disabled_at} />. {e.disabled_reason ? DISABLED_BECAUSE[e.disabled_reason] : null} It receives no events, and the
        deliveries that were pending ended failed, unsent; enabling it does not send them again (redeliver them from the failed deliveries below).
      </p>
      {write ? (
        <form method="post" action={`${base}/status`} class="inline">
          <FormFields session={c.var.session!} />
          <input type="hidden" name="status" value="active" />
          <button type="submit" class="primary">
            Enable
          </button>
        </form>
      ) : null}
    </div>
  );
}
/** A delivery id is dlv_, its event's time-ordered part, then its endpoint's (the same on one endpoint's page). */
const DELIVERY_DISTINCT = "dlv_".length + 26;

function CreateEndpointForm({ c, types, state }: { c: Context<DashEnv>; types: EventType[] | null; state?: FormState }) {
  const session = c.var.session!;
  const ordering = valueOf(state, "ordering", "none");
  return (
    <section class="panel" id="register-endpoint">
      <h2>Register an endpoint</h2>
      <form method="post" action="/dashboard/webhooks">
        <FormFields session={session} />
        <FormSummary state={state} />
        <div class="row">
          <label>
            URL
            <input name="url" type="url" required size={50} placeholder="https://example.com/webhooks/tender" value={valueOf(state, "url")} {...invalid(state, "url")} />
            <Problems state={state} field="url" />
          </label>
          <label>
            Ordering
            <select name="ordering" {...invalid(state, "ordering")}>
              <option value="none" selected={ordering === "none"}>
                none (fastest)
              </option>
              <option value="per_object" selected={ordering === "per_object"}>
                per_object (one object's events in order)
              </option>
            </select>
            <Problems state={state} field="ordering" />
          </label>
        </div>
        {types ? (
          <fieldset {...invalid(state, "events")}>
            <legend>Events</legend>
            <Problems state={state} field="events" />
            <div class="scopes">
              <label class="check">
                <input type="checkbox" name="events" value="*" checked={checked(state, "events", "*")} /> every event (*)
              </label>
              {types.map((t) => (
                <label class="check" title={t.description}>
                  <input type="checkbox" name="events" value={t.type} checked={checked(state, "events", t.type)} /> {t.type}
                </label>
              ))}
            </div>
          </fieldset>
        ) : (
          <label>
            Events (comma separated, or *)
            <input name="events_text" size={60} placeholder="customer.created, payment.completed" value={valueOf(state, "events_text")} {...invalid(state, "events")} />
            <Problems state={state} field="events" />
          </label>
        )}
        <button class="primary" type="submit">
          Register endpoint
        </button>
      </form>
    </section>
  );
}

function rateText(rate: { succeeded: number; attempts: number } | undefined) {
  if (!rate || rate.attempts === 0) return <span class="muted">no attempts</span>;
  const pct = (rate.succeeded / rate.attempts) * 100;
  return (
    <span class={`badge ${pct >= 99 ? "ok" : pct >= 90 ? "warn" : "bad"}`} title={`${rate.succeeded} of ${rate.attempts} attempts answered 2xx in 30 days`}>
      {pct.toFixed(1)}%
    </span>
  );
}

async function listPage(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<Endpoint>>("/api/webhooks", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read webhook endpoints", "/dashboard");
  const page = answer.body;
  const rates = await endpointSuccessRates(c.var.db, session.auth, page.data.map((e) => e.id), clock.now());
  let types: EventType[] | null = null;
  if (can(session, "webhooks:write") && can(session, "events:read")) {
    const catalog = await c.var.api<Page<EventType>>("/api/event-types");
    if (catalog.ok) types = catalog.body.data;
  }
  return render(c, state ? formStatus(state) : 200, {
    title: "Webhooks",
    active: BACK,
    children: (
      <>
        <section class="panel">
          <h2>Endpoints</h2>
          {page.data.length === 0 ? (
            <Empty title="No webhook endpoints yet">Register one below: Tender signs every delivery and retries for 24 hours.</Empty>
          ) : (
            <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>URL</th>
                  <th>Events</th>
                  <th>Status</th>
                  <th>Success (30 days)</th>
                  <th>Created</th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((e) => (
                  <tr>
                    <td>
                      <a href={`/dashboard/webhooks/${e.id}`} class="mono wrap">
                        {e.url}
                      </a>
                      <div class="muted">
                        <Id id={e.id} />
                      </div>
                    </td>
                    <td class="mono scope-list">{e.events.join(", ")}</td>
                    <td title={e.disabled_reason ? DISABLED_BECAUSE[e.disabled_reason] : undefined}>
                      <StatusBadge status={e.status} />
                      {e.disabled_reason ? <div class="muted">{e.disabled_reason}</div> : null}
                    </td>
                    <td>{rateText(rates.get(e.id))}</td>
                    <td>
                      <Time iso={e.created_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            </TableWrap>
          )}
          <Pager page={page} query={query} base={BACK} />
        </section>
        {can(session, "webhooks:write") ? <CreateEndpointForm c={c} types={types} state={state} /> : <p class="muted">This key cannot register endpoints (it needs webhooks:write).</p>}
      </>
    ),
  });
}

/** Where a problem with a path of the API's body is shown in the form. */
const endpointField = (path: string) => (path.startsWith("events") ? "events" : path === "url" || path === "ordering" ? path : undefined);

async function createEndpoint(c: Context<DashEnv>) {
  const url = field(c, "url").trim();
  const picked = fields(c, "events");
  const typed = field(c, "events_text")
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);
  const events = [...new Set([...picked, ...typed])];
  const state = newFormState(BACK, c.var.form);
  if (!url) addProblem(state, "url", "Enter the URL that should receive the events.");
  else {
    // The API's own URL policy (https, no credentials, no private hosts outside development).
    const policy = checkWebhookUrl(url, isDevelopment(c.env));
    if (!policy.ok) addProblem(state, "url", policy.message);
  }
  if (events.length === 0) addProblem(state, "events", "Pick at least one event type (or * for every event).");
  const ordering = field(c, "ordering") || "none";
  const body = { url, events, ordering };
  checkWithSchema(state, CreateWebhookBody, body, endpointField);
  if (hasProblems(state)) return listPage(c, state);
  return act<Endpoint>(c, {
    what: "register this endpoint",
    back: BACK,
    send: (key) => c.var.api("/api/webhooks", { body, idempotencyKey: key }),
    failed: (answer) => {
      addApiError(state, answer.status, answer.error, "register this endpoint", endpointField);
      return listPage(c, state);
    },
    done: (endpoint) => secretPage(c, endpoint, "Endpoint registered"),
  });
}

function secretPage(c: Context<DashEnv>, endpoint: Endpoint, title: string) {
  c.header("Cache-Control", "no-store");
  return render(c, 200, {
    title,
    active: BACK,
    children: (
      <section class="panel">
        <p>
          Endpoint <span class="mono wrap">{endpoint.id}</span> → <span class="mono wrap">{endpoint.url}</span>
        </p>
        <SecretOnce label="signing secret" secret={endpoint.secret ?? null} />
        <p>
          <a href={`/dashboard/webhooks/${endpoint.id}`}>Continue to the endpoint →</a>
        </p>
      </section>
    ),
  });
}

function AttemptsTable({ attempts }: { attempts: Attempt[] }) {
  if (attempts.length === 0) return <span class="muted">No attempt yet.</span>;
  return (
    <table class="attempts">
      <thead>
        <tr>
          <th>#</th>
          <th>Time</th>
          <th>Status code</th>
          <th class="num">Duration</th>
          <th>Response excerpt</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a) => (
          <tr data-attempt={a.attempt_number}>
            <td>{a.attempt_number}</td>
            <td>
              <Time iso={a.attempted_at} />
            </td>
            <td>
              {a.status_code === null ? (
                <span class="badge bad">no answer</span>
              ) : (
                <span class={`badge ${a.status_code >= 200 && a.status_code < 300 ? "ok" : "bad"}`}>{a.status_code}</span>
              )}
            </td>
            <td class="num">{a.duration_ms} ms</td>
            <td class="mono wrap excerpt">{a.error ? `${a.error}${a.response_excerpt ? ` — ${a.response_excerpt}` : ""}` : (a.response_excerpt ?? "")}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

async function endpointPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const id = c.req.param("id")!;
  if (!ID_PATTERN.test(id)) return refuse(c, 404, `No such webhook endpoint: '${id.slice(0, 100)}'.`, BACK, "resource_missing", "id");
  const base = `/dashboard/webhooks/${id}`;
  const query = listQuery(c, ["status"]);
  if (query.status && !["pending", "delivered", "failed"].includes(query.status)) {
    return refuse(c, 400, "status must be pending, delivered or failed.", base, "parameter_invalid", "status");
  }
  const [endpoint, deliveries, recoveries] = await Promise.all([
    c.var.api<Endpoint>(`/api/webhooks/${encodeURIComponent(id)}`),
    c.var.api<Page<Delivery>>(`/api/webhooks/${encodeURIComponent(id)}/deliveries`, { query: apiQuery(query) }),
    c.var.api<Page<Recovery>>(`/api/webhooks/${encodeURIComponent(id)}/recoveries`, { query: { limit: RECOVERIES_SHOWN } }),
  ]);
  if (!endpoint.ok) return apiErrorPage(c, endpoint, "read this endpoint", BACK);
  if (!deliveries.ok) return apiErrorPage(c, deliveries, "read this endpoint's deliveries", BACK);
  if (!recoveries.ok) return apiErrorPage(c, recoveries, "read this endpoint's recoveries", BACK);
  const e = endpoint.body;
  // Each delivery's event type, read for the whole page at once (the delivery answers only its id).
  const types = (await namesFor(c.var.db, session.auth, { events: deliveries.body.data.map((d) => d.event_id) })).eventTypes;
  const page = deliveries.body;
  const write = can(session, "webhooks:write");
  const redeliver = can(session, "events:write");
  return render(c, 200, {
    title: "Webhook endpoint",
    active: BACK,
    children: (
      <>
        <DisabledNotice c={c} e={e} base={base} write={write} />
        <section class="panel">
          <h2 class="mono wrap">{e.url}</h2>
          <TableWrap>
          <table>
            <tbody>
              <tr>
                <th>Id</th>
                <td class="mono wrap">
                  {e.id}{" "}
                  <button type="button" class="small" data-copy={e.id}>
                    Copy
                  </button>
                </td>
              </tr>
              <tr>
                <th>Status</th>
                <td>
                  <StatusBadge status={e.status} />{" "}
                  {e.disabled_reason ? (
                    <span class="muted">
                      {e.disabled_reason}, since <Time iso={e.disabled_at} />
                    </span>
                  ) : null}
                </td>
              </tr>
              <tr>
                <th>Events</th>
                <td class="mono scope-list">{e.events.join(", ")}</td>
              </tr>
              <tr>
                <th>Ordering</th>
                <td>{e.ordering}</td>
              </tr>
              <tr>
                <th>Rate limit</th>
                <td data-rate-limit={e.rate_limit ?? ""}>
                  {e.rate_limit === null ? <span class="muted">none</span> : `${e.rate_limit} deliveries a second`}
                  {write ? (
                    <form method="post" action={`${base}/rate-limit`} class="inline">
                      <FormFields session={session} />
                      <input name="rate_limit" type="number" min={RATE_LIMIT_MIN} max={RATE_LIMIT_MAX} step={1} size={6} placeholder="none" value={e.rate_limit ?? ""} aria-label="Deliveries a second (empty for none)" />
                      <button type="submit" class="small">
                        Set
                      </button>
                    </form>
                  ) : null}
                </td>
              </tr>
              <tr>
                <th>Created</th>
                <td>
                  <Time iso={e.created_at} />
                </td>
              </tr>
            </tbody>
          </table>
          </TableWrap>
          {write ? (
            <div class="actions">
              <form method="post" action={`${base}/test`} class="inline">
                <FormFields session={session} />
                <button type="submit" disabled={e.status !== "active"}>
                  Send test event
                </button>
              </form>
              <form method="post" action={`${base}/rotate-secret`} class="inline" data-confirm="Rotate the signing secret? The old one keeps signing for 24 hours.">
                <FormFields session={session} />
                <button type="submit">Rotate secret</button>
              </form>
              <form method="post" action={`${base}/status`} class="inline">
                <FormFields session={session} />
                <input type="hidden" name="status" value={e.status === "active" ? "disabled" : "active"} />
                <button type="submit">{e.status === "active" ? "Disable" : "Enable"}</button>
              </form>
              <form method="post" action={`${base}/delete`} class="inline" data-confirm="Delete this endpoint? Its delivery history stays visible.">
                <FormFields session={session} />
                <button type="submit" class="danger">
                  Delete
                </button>
              </form>
            </div>
          ) : (
            <p class="muted">This key cannot change endpoints (it needs webhooks:write).</p>
          )}
        </section>
        <RecoveryPanel base={base} endpoint={e} recoveries={recoveries.body.data} write={write} session={session} />
        <section class="panel">
          <div class="row">
            <h2>Deliveries</h2>
            <span class="muted">
              <StatusFilter statuses={["pending", "delivered", "failed"]} current={query.status} base={base} />
            </span>
            <label class="check live" hidden>
              <input type="checkbox" data-live-refresh="3" hidden /> Live refresh
            </label>
          </div>
          {page.data.length === 0 ? (
            <Empty title={query.status ? `No ${query.status} deliveries` : "No deliveries yet"}>
              {write && e.status === "active" ? "Send a test event to see one." : "Deliveries appear when events of the endpoint's types happen."}
            </Empty>
          ) : (
            <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Delivery</th>
                  <th>Event</th>
                  <th>Status</th>
                  <th class="num">Attempts</th>
                  <th>Next attempt</th>
                  <th>Created</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((d) => (
                  <>
                    <tr data-delivery={d.id} data-status={d.status}>
                      <td>
                        <Id id={d.id} distinctEnd={DELIVERY_DISTINCT} />
                      </td>
                      <td>
                        {types.has(d.event_id) ? (
                          <div class="mono" data-event-type={types.get(d.event_id)}>
                            {types.get(d.event_id)}
                          </div>
                        ) : null}
                        <div class={types.has(d.event_id) ? "muted" : undefined}>
                          {can(session, "events:read") ? <Id id={d.event_id} href={`/dashboard/events/${d.event_id}`} /> : <Id id={d.event_id} />}
                        </div>
                      </td>
                      <td>
                        <StatusBadge status={d.status} />
                        {d.waiting_for ? <div class="muted">waiting for {d.waiting_for}</div> : null}
                      </td>
                      <td class="num">{d.attempt_count}</td>
                      <td>{d.status === "pending" ? <Time iso={d.next_attempt_at} /> : <span class="muted">—</span>}</td>
                      <td>
                        <Time iso={d.created_at} />
                      </td>
                      <td>
                        {redeliver && d.status !== "delivered" && e.status === "active" ? (
                          <form method="post" action={`${base}/redeliver`} class="inline">
                            <FormFields session={session} />
                            <input type="hidden" name="event_id" value={d.event_id} />
                            <button type="submit" class="small">
                              Redeliver
                            </button>
                          </form>
                        ) : null}
                      </td>
                    </tr>
                    <tr class="sub-row">
                      <td colspan={7}>
                        <AttemptsTable attempts={d.attempts} />
                      </td>
                    </tr>
                  </>
                ))}
              </tbody>
            </table>
            </TableWrap>
          )}
          <Pager page={page} query={query} base={base} />
        </section>
      </>
    ),
  });
}

interface Recovery {
  id: string;
  since: string;
  until: string;
  status: string;
  total: number;
  sent: number;
  created_at: string;
  completed_at: string | null;
}

const RECOVERIES_SHOWN = 5;

/** A time from a datetime-local field, read as UTC (the form says so); full ISO 8601 text passes as typed. */
const utcInstant = (value: string) => (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(value) ? `${value.length === 16 ? `${value}:00` : value}Z` : value);

/** The endpoint's recoveries (POST /api/webhooks/{id}/recover): a form for a range, and the latest ones. */
function RecoveryPanel({ base, endpoint, recoveries, write, session }: { base: string; endpoint: Endpoint; recoveries: Recovery[]; write: boolean; session: Parameters<typeof FormFields>[0]["session"] }) {
  const dayAgo = new Date(clock.now() - 24 * 60 * 60 * 1000).toISOString().slice(0, 16);
  return (
    <section class="panel" data-recoveries>
      <h2>Recover missed events</h2>
      <p class="muted">Sends this endpoint, once more, every event of the range it takes and has no 2xx for, oldest first. Times are UTC; until is now when left empty.</p>
      {write ? (
        endpoint.status === "active" ? (
          <form method="post" action={`${base}/recover`} class="inline">
            <FormFields session={session} />
            <label>
              Since (UTC) <input type="datetime-local" name="since" step="1" value={dayAgo} required />
            </label>{" "}
            <label>
              Until (UTC) <input type="datetime-local" name="until" step="1" />
            </label>{" "}
            <button type="submit">Recover</button>
          </form>
        ) : (
          <p class="muted">Enable the endpoint to recover what it missed.</p>
        )
      ) : null}
      {recoveries.length === 0 ? null : (
        <TableWrap>
          <table>
            <thead>
              <tr>
                <th>Recovery</th>
                <th>Range</th>
                <th>Status</th>
                <th class="num">Events</th>
                <th class="num">Sent</th>
                <th>Started</th>
              </tr>
            </thead>
            <tbody>
              {recoveries.map((r) => (
                <tr data-recovery={r.id} data-status={r.status}>
                  <td>
                    <Id id={r.id} />
                  </td>
                  <td>
                    <Time iso={r.since} /> – <Time iso={r.until} />
                  </td>
                  <td>
                    <StatusBadge status={r.status} />
                  </td>
                  <td class="num">{r.total}</td>
                  <td class="num">{r.sent}</td>
                  <td>
                    <Time iso={r.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}

export function registerWebhookPages(dash: Hono<DashEnv>) {
  dash.get("/webhooks", (c) => listPage(c));
  dash.post("/webhooks", createEndpoint);
  dash.get("/webhooks/:id", endpointPage);
  dash.post("/webhooks/:id/test", (c) => {
    const id = c.req.param("id");
    const back = `${BACK}/${id}`;
    return act<{ event_id: string }>(c, {
      what: "send a test event",
      back,
      send: (key) => c.var.api(`/api/webhooks/${encodeURIComponent(id)}/test`, { method: "POST", idempotencyKey: key }),
      done: (result) => redirectWithNotice(c, back, "webhook_test_sent", result.event_id),
    });
  });
  dash.post("/webhooks/:id/rotate-secret", (c) => {
    const id = c.req.param("id");
    return act<Endpoint>(c, {
      what: "rotate this endpoint's secret",
      back: `${BACK}/${id}`,
      send: (key) => c.var.api(`/api/webhooks/${encodeURIComponent(id)}/rotate-secret`, { method: "POST", idempotencyKey: key }),
      done: (endpoint) => secretPage(c, endpoint, "Secret rotated"),
    });
  });
  dash.post("/webhooks/:id/status", (c) => {
    const id = c.req.param("id");
    const back = `${BACK}/${id}`;
    const status = field(c, "status");
    if (status !== "active" && status !== "disabled") return refuse(c, 400, "status must be active or disabled.", back, "parameter_invalid", "status");
    return act<Endpoint>(c, {
      what: status === "active" ? "enable this endpoint" : "disable this endpoint",
      back,
      send: (key) => c.var.api(`/api/webhooks/${encodeURIComponent(id)}`, { method: "PATCH", body: { status }, idempotencyKey: key }),
      done: (endpoint) => redirectWithNotice(c, back, endpoint.status === "active" ? "webhook_enabled" : "webhook_disabled", endpoint.id),
    });
  });
  dash.post("/webhooks/:id/rate-limit", (c) => {
    const id = c.req.param("id");
    const back = `${BACK}/${id}`;
    const text = field(c, "rate_limit").trim();
    // Empty removes the limit; anything else must be a whole number the API accepts (it checks again).
    const rateLimit = text === "" ? null : /^\d{1,4}$/.test(text) ? Number(text) : NaN;
    if (rateLimit !== null && !(rateLimit >= RATE_LIMIT_MIN && rateLimit <= RATE_LIMIT_MAX)) {
      return refuse(c, 400, `rate_limit must be a whole number from ${RATE_LIMIT_MIN} to ${RATE_LIMIT_MAX}, or empty for no limit.`, back, "parameter_invalid", "rate_limit");
    }
    return act<Endpoint>(c, {
      what: "set this endpoint's rate limit",
      back,
      send: (key) => c.var.api(`/api/webhooks/${encodeURIComponent(id)}`, { method: "PATCH", body: { rate_limit: rateLimit }, idempotencyKey: key }),
      done: (endpoint) => redirectWithNotice(c, back, "webhook_rate_limit_set", endpoint.id),
    });
  });
  dash.post("/webhooks/:id/delete", (c) => {
    const id = c.req.param("id");
    return act<{ id: string }>(c, {
      what: "delete this endpoint",
      back: `${BACK}/${id}`,
      send: (key) => c.var.api(`/api/webhooks/${encodeURIComponent(id)}`, { method: "DELETE", idempotencyKey: key }),
      done: (deleted) => redirectWithNotice(c, BACK, "webhook_deleted", deleted.id),
    });
  });
  dash.post("/webhooks/:id/recover", (c) => {
    const id = c.req.param("id");
    const back = `${BACK}/${id}`;
    const since = field(c, "since");
    const until = field(c, "until");
    if (!since) return refuse(c, 400, "Since when? Give the start of the range.", back, "parameter_missing", "since");
    return act<Recovery>(c, {
      what: "recover this endpoint's missed events",
      back,
      send: (key) =>
        c.var.api(`/api/webhooks/${encodeURIComponent(id)}/recover`, { body: { since: utcInstant(since), ...(until ? { until: utcInstant(until) } : {}) }, idempotencyKey: key }),
      done: (recovery) => redirectWithNotice(c, back, "recovery_started", recovery.id),
    });
  });
  dash.post("/webhooks/:id/redeliver", (c) => {
    const id = c.req.param("id");
    const back = `${BACK}/${id}`;
    const eventId = field(c, "event_id");
    if (!ID_PATTERN.test(eventId)) return refuse(c, 400, "Which event? The form names none.", back, "parameter_missing", "event_id");
    return act<{ event_id: string }>(c, {
      what: "redeliver this event",
      back,
      send: (key) => c.var.api(`/api/events/${encodeURIComponent(eventId)}/redeliver`, { body: { endpoint_id: id }, idempotencyKey: key }),
      done: (result) => redirectWithNotice(c, back, "redelivered", result.event_id),
    });
  });
}
