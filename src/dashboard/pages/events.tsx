// Events: the catch-up feed (GET /api/events), filtered by type, each with the exact JSON body that
// was delivered to endpoints; and one event's page.
import type { Context, Hono } from "hono";
import { apiErrorPage, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Time } from "../format";
import { Empty, Pager, TableWrap, render } from "../layout";
import { ID_PATTERN, apiQuery, listQuery } from "../lists";

interface EventItem {
  id: string;
  type: string;
  created_at: string;
  object_id: string | null;
  sequence: number | null;
  payload: Record<string, unknown>;
}

const BACK = "/dashboard/events";

/** The body as delivered: the feed gives it parsed; serialised again it is the same bytes (compact JSON, same key order). */
const delivered = (payload: unknown) => JSON.stringify(payload);

function Payload({ event }: { event: EventItem }) {
  const body = delivered(event.payload);
  return (
    <details>
      <summary>Delivered JSON</summary>
      <pre class="json" data-event={event.id}>
        {body}
      </pre>
      <button type="button" class="small" data-copy={body}>
        Copy JSON
      </button>
    </details>
  );
}

async function feedPage(c: Context<DashEnv>) {
  const query = listQuery(c, ["type", "object_id"]);
  const [answer, catalog] = await Promise.all([
    c.var.api<Page<EventItem>>("/api/events", { query: apiQuery(query) }),
    c.var.api<Page<{ type: string }>>("/api/event-types"),
  ]);
  if (!answer.ok) return apiErrorPage(c, answer, "read events", "/dashboard");
  const types = catalog.ok ? catalog.body.data.map((t) => t.type) : [];
  const page = answer.body;
  return render(c, 200, {
    title: "Events",
    active: BACK,
    children: (
      <section class="panel">
        <form method="get" action={BACK} class="row">
          <label>
            Type
            <select name="type">
              <option value="">every type</option>
              {[...types, "webhook.test"].map((t) => (
                <option value={t} selected={query.type === t}>
                  {t}
                </option>
              ))}
            </select>
          </label>
          <label>
            Object id
            <input name="object_id" value={query.object_id ?? ""} placeholder="po_…, sub_…, usr_…" />
          </label>
          <button type="submit">Filter</button>
        </form>
        {page.data.length === 0 ? (
          <Empty title={query.type || query.object_id ? "No events match this filter" : "No events yet"}>
            Events are recorded when users, payouts, payments, refunds and subscriptions change.
          </Empty>
        ) : (
          <TableWrap>
          <table>
            <thead>
              <tr>
                <th>Event</th>
                <th>Type</th>
                <th>Object</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {page.data.map((e) => (
                <tr>
                  <td>
                    <Id id={e.id} href={`${BACK}/${e.id}`} />
                    <Payload event={e} />
                  </td>
                  <td class="mono">{e.type}</td>
                  <td class="nowrap">
                    {e.object_id ? (
                      <>
                        <Id id={e.object_id} href={`${BACK}?object_id=${e.object_id}`} /> <span class="muted">#{e.sequence}</span>
                      </>
                    ) : (
                      <span class="muted">—</span>
                    )}
                  </td>
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
    ),
  });
}

async function eventPage(c: Context<DashEnv>) {
  const id = c.req.param("id")!;
  if (!ID_PATTERN.test(id)) return refuse(c, 404, `No such event: '${id.slice(0, 100)}'.`, BACK, "resource_missing", "id");
  const answer = await c.var.api<EventItem>(`/api/events/${encodeURIComponent(id)}`);
  if (!answer.ok) return apiErrorPage(c, answer, "read this event", BACK);
  const e = answer.body;
  const body = delivered(e.payload);
  return render(c, 200, {
    title: `Event ${e.type}`,
    active: BACK,
    children: (
      <section class="panel">
        <TableWrap>
        <table>
          <tbody>
            <tr>
              <th>Id</th>
              <td class="mono wrap">{e.id}</td>
            </tr>
            <tr>
              <th>Type</th>
              <td class="mono">{e.type}</td>
            </tr>
            <tr>
              <th>Object</th>
              <td class="mono wrap">{e.object_id ? <a href={`${BACK}?object_id=${e.object_id}`}>{`${e.object_id} #${e.sequence}`}</a> : "—"}</td>
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
        <h2>The exact JSON body delivered</h2>
        <pre class="json" data-event={e.id}>
          {body}
        </pre>
        <button type="button" data-copy={body}>
          Copy JSON
        </button>
        <h2>Formatted</h2>
        <pre>{JSON.stringify(e.payload, null, 2)}</pre>
      </section>
    ),
  });
}

export function registerEventPages(dash: Hono<DashEnv>) {
  dash.get("/events", feedPage);
  dash.get("/events/:id", eventPage);
}
