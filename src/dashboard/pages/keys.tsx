// API keys: the list, a form to create a restricted key (its scopes ticked; the key shown once), and
// revoke. The API allows a key to create or revoke only keys whose scopes it holds itself.
// Revoking the key this session was opened with ends the session.
import type { Context, Hono } from "hono";
import { SCOPES } from "../../auth/scopes";
import { act, apiErrorPage, field, fields, redirectWithNotice, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Time } from "../format";
import { Empty, FormFields, Pager, SecretOnce, StatusBadge, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";

interface ApiKey {
  id: string;
  name: string | null;
  kind: string;
  mode: string;
  prefix: string;
  scopes: string[];
  created_at: string;
  revoked_at: string | null;
  secret?: string | null;
}

const BACK = "/dashboard/keys";

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<ApiKey>>("/api/keys", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read API keys", "/dashboard");
  const page = answer.body;
  const write = can(session, "keys:write");
  return render(c, 200, {
    title: "API keys",
    active: BACK,
    children: (
      <>
        <section class="panel">
          {page.data.length === 0 ? (
            <Empty title="No keys to show" />
          ) : (
            <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Key</th>
                  <th>Kind</th>
                  <th>Scopes</th>
                  <th>Status</th>
                  <th>Created</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((k) => (
                  <tr data-key={k.id}>
                    <td>
                      {k.name ?? <span class="muted">unnamed</span>}
                      {k.id === session.auth.keyId ? <strong> (this session)</strong> : null}
                      <div class="muted mono">{k.prefix}</div>
                    </td>
                    <td>
                      {k.kind} · {k.mode}
                    </td>
                    <td class="mono scope-list">{k.scopes.join(", ")}</td>
                    <td>{k.revoked_at ? <StatusBadge status="revoked" /> : <StatusBadge status="active" />}</td>
                    <td>
                      <Time iso={k.created_at} />
                    </td>
                    <td>
                      {write && !k.revoked_at ? (
                        <form
                          method="post"
                          action={`${BACK}/${k.id}/revoke`}
                          class="inline"
                          data-confirm={k.id === session.auth.keyId ? "Revoke the key you are signed in with? This ends your session." : "Revoke this key? It stops working at once."}
                        >
                          <FormFields session={session} />
                          <button type="submit" class="small danger">
                            Revoke
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
            <h2>Create a restricted key</h2>
            <form method="post" action={BACK}>
              <FormFields session={session} />
              <label>
                Name
                <input name="name" maxlength={200} placeholder="reporting" />
              </label>
              <fieldset>
                <legend>Scopes (write implies read)</legend>
                <div class="scopes">
                  {SCOPES.map((scope) => (
                    <label class="check">
                      <input type="checkbox" name="scopes" value={scope} /> {scope}
                    </label>
                  ))}
                </div>
              </fieldset>
              <button class="primary" type="submit">
                Create key
              </button>
            </form>
          </section>
        ) : (
          <p class="muted">This key cannot create or revoke keys (it needs keys:write).</p>
        )}
      </>
    ),
  });
}

async function createKey(c: Context<DashEnv>) {
  const scopes = fields(c, "scopes");
  if (scopes.length === 0) return refuse(c, 400, "Tick at least one scope for the new key.", BACK, "parameter_missing", "scopes");
  const name = field(c, "name").trim();
  return act<ApiKey>(c, {
    what: "create this key",
    back: BACK,
    send: (key) => c.var.api("/api/keys", { body: { ...(name ? { name } : {}), scopes }, idempotencyKey: key }),
    done: (created) => {
      c.header("Cache-Control", "no-store");
      return render(c, 200, {
        title: "Key created",
        active: BACK,
        children: (
          <section class="panel">
            <p>
              Restricted key <span class="mono">{created.id}</span> with scopes <span class="mono">{created.scopes.join(", ")}</span>.
            </p>
            <SecretOnce label="API key" secret={created.secret ?? null} />
            <p>
              <a href={BACK}>Back to the keys →</a>
            </p>
          </section>
        ),
      });
    },
  });
}

export function registerKeyPages(dash: Hono<DashEnv>) {
  dash.get("/keys", listPage);
  dash.post("/keys", createKey);
  dash.post("/keys/:id/revoke", (c) => {
    const id = c.req.param("id");
    return act<ApiKey>(c, {
      what: "revoke this key",
      back: BACK,
      send: (key) => c.var.api(`/api/keys/${encodeURIComponent(id)}`, { method: "DELETE", idempotencyKey: key }),
      done: (revoked) => redirectWithNotice(c, BACK, "key_revoked", revoked.id),
    });
  });
}
