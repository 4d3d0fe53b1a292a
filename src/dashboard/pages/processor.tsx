// The processor connection (live mode only): the account's Stripe connection as GET /api/processor
// answers it (never a secret beyond the key's last 4), a form to connect or replace it (PUT
// /api/processor: Stripe checks the key), and disconnect (DELETE /api/processor). The API allows
// only the live secret key; a restricted key's session sees the API's refusal. The secrets typed
// into the form are sent once and never drawn again, not even when the form is refused.
import type { Context, Hono } from "hono";
import { ConnectProcessorBody, webhookUrlOf } from "../../routes/processor/schema";
import { act, apiErrorPage, field, redirectWithNotice } from "../actions";
import type { DashEnv } from "../context";
import { type FormState, FormSummary, Problems, addApiError, checkWithSchema, formStatus, hasProblems, invalid, newFormState } from "../form-state";
import { Time } from "../format";
import { FormFields, SwitchButton, TableWrap, render } from "../layout";

interface Connection {
  provider: string;
  processor_account: string;
  secret_key_last4: string;
  webhook_url: string;
  created_at: string;
}

const BACK = "/dashboard/processor";
const SECRET_FIELDS = ["secret_key", "webhook_secret", "connect_webhook_secret"] as const;
/** The form's field for a path of the API's body (all of them are fields of this form). */
const fieldOf = (path: string) => (SECRET_FIELDS as readonly string[]).includes(path) ? path : undefined;

async function page(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  if (session.auth.mode !== "live") {
    // A form posted anyway is the API's to refuse (403 livemode_required): its answer is shown here.
    return render(c, state ? formStatus(state) : 200, {
      title: "Processor",
      active: BACK,
      children: (
        <section class="panel">
          <FormSummary state={state} />
          <p>
            A processor moves real money, so it belongs to live mode. Test mode always uses Tender's sandbox, where the card number decides each
            outcome, and needs no Stripe key.
          </p>
          <p>
            <SwitchButton session={session} to="live" back={BACK}>
              View live data to connect Stripe
            </SwitchButton>
          </p>
        </section>
      ),
    });
  }
  const answer = await c.var.api<Connection>("/api/processor");
  const missing = !answer.ok && answer.status === 404;
  if (!answer.ok && !missing) return apiErrorPage(c, answer, "read the processor connection", "/dashboard");
  const connection = answer.ok ? answer.body : undefined;
  const webhookUrl = webhookUrlOf(new URL(c.req.url).origin, session.auth.accountId);
  return render(c, state ? formStatus(state) : 200, {
    title: "Processor",
    active: BACK,
    children: (
      <>
        <section class="panel" data-connection={connection ? "connected" : "none"}>
          <h2>Stripe</h2>
          {connection ? (
            <>
              <TableWrap>
                <table>
                  <tbody>
                    <tr>
                      <th>Stripe account</th>
                      <td class="mono">{connection.processor_account}</td>
                    </tr>
                    <tr>
                      <th>Secret key</th>
                      <td class="mono">…{connection.secret_key_last4}</td>
                    </tr>
                    <tr>
                      <th>Webhook URL</th>
                      <td class="mono">{connection.webhook_url}</td>
                    </tr>
                    <tr>
                      <th>Connected</th>
                      <td>
                        <Time iso={connection.created_at} />
                      </td>
                    </tr>
                  </tbody>
                </table>
              </TableWrap>
              <p class="muted">In Stripe, point a webhook endpoint and a Connect webhook endpoint at the webhook URL; their signing secrets go in the form below.</p>
              <form method="post" action={`${BACK}/disconnect`} class="inline" data-confirm="Disconnect Stripe? Live payments, refunds and payouts stop until you connect again.">
                <FormFields session={session} />
                <button type="submit" class="danger">
                  Disconnect
                </button>
              </form>
            </>
          ) : (
            <>
              <p>Not connected: live mode cannot charge, refund or pay out until a Stripe account is connected.</p>
              {/* Stripe's endpoints must exist before the form below can be filled: it asks for their signing secrets. */}
              <p>First, in Stripe's dashboard (live mode, Developers → Webhooks), create two endpoints at this webhook URL:</p>
              <p class="secret" data-webhook-url={webhookUrl}>
                <code>{webhookUrl}</code>
                <button type="button" class="small" data-copy={webhookUrl}>
                  Copy
                </button>
              </p>
              <ol class="steps">
                <li>
                  one for events on your account (<code>refund.updated</code>, <code>refund.failed</code>, <code>charge.refund.updated</code>,{" "}
                  <code>charge.dispute.created</code>): its signing secret is the webhook signing secret below;
                </li>
                <li>
                  one for events on <strong>Connected accounts</strong> (<code>payout.paid</code>, <code>payout.failed</code>, <code>payout.canceled</code>): its
                  signing secret is the Connect webhook signing secret, without which live payouts never leave pending.
                </li>
              </ol>
            </>
          )}
        </section>
        <section class="panel">
          <h2>{connection ? "Replace the keys" : "Connect Stripe"}</h2>
          <form method="post" action={BACK} autocomplete="off">
            <FormFields session={session} />
            <FormSummary state={state} />
            <label>
              Stripe secret key
              <input name="secret_key" type="password" required placeholder="sk_live_…" {...invalid(state, "secret_key")} />
              <Problems state={state} field="secret_key" />
            </label>
            <label>
              Webhook signing secret
              <input name="webhook_secret" type="password" required placeholder="whsec_…" {...invalid(state, "webhook_secret")} />
              <Problems state={state} field="webhook_secret" />
            </label>
            <label>
              Connect webhook signing secret (for payouts)
              <input name="connect_webhook_secret" type="password" placeholder="whsec_…" {...invalid(state, "connect_webhook_secret")} />
              <Problems state={state} field="connect_webhook_secret" />
            </label>
            <button class="primary" type="submit">
              {connection ? "Replace" : "Connect"}
            </button>
          </form>
        </section>
      </>
    ),
  });
}

async function connect(c: Context<DashEnv>) {
  // The secrets are not kept in the form state: a refused form is drawn again with empty fields.
  const state = newFormState(BACK, {});
  const connectSecret = field(c, "connect_webhook_secret").trim();
  const body = {
    provider: "stripe",
    secret_key: field(c, "secret_key").trim(),
    webhook_secret: field(c, "webhook_secret").trim(),
    ...(connectSecret ? { connect_webhook_secret: connectSecret } : {}),
  };
  checkWithSchema(state, ConnectProcessorBody, body, fieldOf);
  if (hasProblems(state)) return page(c, state);
  return act<Connection>(c, {
    what: "connect Stripe",
    back: BACK,
    send: (key) => c.var.api("/api/processor", { method: "PUT", body, idempotencyKey: key }),
    failed: (answer) => {
      addApiError(state, answer.status, answer.error, "connect Stripe", fieldOf);
      return page(c, state);
    },
    done: (connected) => redirectWithNotice(c, BACK, "processor_connected", connected.processor_account),
  });
}

export function registerProcessorPages(dash: Hono<DashEnv>) {
  dash.get("/processor", (c) => page(c));
  dash.post("/processor", connect);
  dash.post("/processor/disconnect", (c) =>
    act<{ processor_account: string }>(c, {
      what: "disconnect Stripe",
      back: BACK,
      send: (key) => c.var.api("/api/processor", { method: "DELETE", idempotencyKey: key }),
      done: (removed) => redirectWithNotice(c, BACK, "processor_disconnected", removed.processor_account),
    }),
  );
}
