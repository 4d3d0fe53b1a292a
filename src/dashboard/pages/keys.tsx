// API keys: the list, a form to create a restricted key (its scopes ticked; the key shown once), and
// revoke. The API allows a key to create or revoke only keys whose scopes it holds itself.
// Revoking the key this session was opened with ends the session.
import type { Context, Hono } from "hono";
import { SCOPES } from "../../auth/scopes";
import { CreateKeyBody } from "../../routes/keys/schema";
import { act, apiErrorPage, field, fields, redirectWithNotice } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { type FormState, FormSummary, Problems, addApiError, addProblem, checkWithSchema, checked, formStatus, hasProblems, invalid, newFormState, valueOf } from "../form-state";
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

async function listPage(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<ApiKey>>("/api/keys", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read API keys", "/dashboard");
  const page = answer.body;
  const write = can(session, "keys:write");
  return render(c, state ? formStatus(state) : 200, {
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
              <FormSummary state={state} />
              <label>
                Name
                <input name="name" maxlength={200} placeholder="reporting" value={valueOf(state, "name")} {...invalid(state, "name")} />
                <Problems state={state} field="name" />
              </label>
              <fieldset {...invalid(state, "scopes")}>
                <legend>Scopes (write implies read)</legend>
                <Problems state={state} field="scopes" />
                <div class="scopes">
                  {SCOPES.map((scope) => (
                    <label class="check">
                      <input type="checkbox" name="scopes" value={scope} checked={checked(state, "scopes", scope)} /> {scope}
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

/** Where a problem with a path of the API's body is shown in the form. */
const keyField = (path: string) => (path.startsWith("scopes") ? "scopes" : path === "name" ? "name" : undefined);

async function createKey(c: Context<DashEnv>) {
  const state = newFormState(BACK, c.var.form);
  const scopes = fields(c, "scopes");
  if (scopes.length === 0) addProblem(state, "scopes", "Tick at least one scope for the new key.");
  const name = field(c, "name").trim();
  const body = { ...(name ? { name } : {}), scopes };
  checkWithSchema(state, CreateKeyBody, body, keyField);
  if (hasProblems(state)) return listPage(c, state);
  return act<ApiKey>(c, {
    what: "create this key",
    back: BACK,
    send: (key) => c.var.api("/api/keys", { body, idempotencyKey: key }),
    failed: (answer) => {
      addApiError(state, answer.status, answer.error, "create this key", keyField);
      return listPage(c, state);
    },
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
  dash.get("/keys", (c) => listPage(c));
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
