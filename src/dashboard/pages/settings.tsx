// The account's settings (GET and PATCH /api/account): the seller's details its invoices print
// (business name, address, tax id, invoice footer) and how long events are kept. The API allows
// only a secret key; a restricted key's session sees the API's refusal. An empty field sends null
// (removes the value); an invoice copies the details when it is finalized, so a change here never
// alters an issued invoice.
import type { Context, Hono } from "hono";
import { UpdateAccountBody } from "../../routes/accounts/schema";
import { act, apiErrorPage, field, redirectWithNotice } from "../actions";
import type { DashEnv } from "../context";
import { type FormState, FormSummary, Problems, addApiError, checkWithSchema, formStatus, hasProblems, invalid, newFormState, valueOf } from "../form-state";
import { FormFields, render } from "../layout";

interface Address {
  line1: string | null;
  line2: string | null;
  city: string | null;
  postal_code: string | null;
  state: string | null;
  country: string | null;
}

interface AccountSettings {
  id: string;
  name: string;
  business_name: string | null;
  address: Address | null;
  tax_id: string | null;
  invoice_footer: string | null;
  event_retention_days: number;
}

const BACK = "/dashboard/settings";
const ADDRESS_PARTS = ["line1", "line2", "city", "postal_code", "state", "country"] as const;
const LABELS: Record<(typeof ADDRESS_PARTS)[number], string> = {
  line1: "Address line 1",
  line2: "Address line 2",
  city: "City",
  postal_code: "Postal code",
  state: "State, county or region",
  country: "Country (ISO code, such as GB)",
};
/** The form's field for a path of the API's body: `address.city` is the field `address_city`. */
const fieldOf = (path: string) => {
  if (["business_name", "tax_id", "invoice_footer", "event_retention_days"].includes(path)) return path;
  const part = path.startsWith("address.") ? path.slice("address.".length) : undefined;
  return part && (ADDRESS_PARTS as readonly string[]).includes(part) ? `address_${part}` : undefined;
};

async function page(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const answer = await c.var.api<AccountSettings>("/api/account");
  if (!answer.ok) return apiErrorPage(c, answer, "read the account's settings", "/dashboard");
  const account = answer.body;
  const text = (name: string, current: string | null | undefined) => valueOf(state, name, current ?? "");
  return render(c, state ? formStatus(state) : 200, {
    title: "Settings",
    active: BACK,
    children: (
      <section class="panel" data-settings={account.id}>
        <h2>Invoices</h2>
        <p class="muted">
          What your invoices, their PDFs and hosted pages say about you. An invoice copies these when it is finalized: a change applies to invoices issued
          after it, never to those already issued. An empty field removes the value.
        </p>
        <form method="post" action={BACK}>
          <FormFields session={session} />
          <FormSummary state={state} />
          <label>
            Business name (else the account's name, {account.name})
            <input name="business_name" maxlength={200} value={text("business_name", account.business_name)} {...invalid(state, "business_name")} />
            <Problems state={state} field="business_name" />
          </label>
          {ADDRESS_PARTS.map((part) => (
            <label>
              {LABELS[part]}
              <input name={`address_${part}`} value={text(`address_${part}`, account.address?.[part])} {...invalid(state, `address_${part}`)} />
              <Problems state={state} field={`address_${part}`} />
            </label>
          ))}
          <label>
            Tax id (VAT, GST, EIN)
            <input name="tax_id" maxlength={50} value={text("tax_id", account.tax_id)} {...invalid(state, "tax_id")} />
            <Problems state={state} field="tax_id" />
          </label>
          <label>
            Invoice footer
            <textarea name="invoice_footer" maxlength={500} rows={3} {...invalid(state, "invoice_footer")}>
              {text("invoice_footer", account.invoice_footer)}
            </textarea>
            <Problems state={state} field="invoice_footer" />
          </label>
          <label>
            Days events are kept (1 to 365)
            <input name="event_retention_days" inputmode="numeric" value={text("event_retention_days", String(account.event_retention_days))} {...invalid(state, "event_retention_days")} />
            <Problems state={state} field="event_retention_days" />
          </label>
          <button class="primary" type="submit">
            Save
          </button>
        </form>
      </section>
    ),
  });
}

async function save(c: Context<DashEnv>) {
  const names = ["business_name", "tax_id", "invoice_footer", "event_retention_days", ...ADDRESS_PARTS.map((part) => `address_${part}`)];
  const values = Object.fromEntries(names.map((name) => [name, field(c, name)]));
  const state = newFormState(BACK, values);
  const orNull = (value: string) => (value.trim() === "" ? null : value.trim());
  const address = Object.fromEntries(ADDRESS_PARTS.map((part) => [part, orNull(values[`address_${part}`])]));
  const days = values.event_retention_days.trim();
  const body = {
    business_name: orNull(values.business_name),
    address: Object.values(address).every((part) => part === null) ? null : address,
    tax_id: orNull(values.tax_id),
    invoice_footer: orNull(values.invoice_footer),
    ...(days === "" ? {} : { event_retention_days: /^\d+$/.test(days) ? Number(days) : days }),
  };
  checkWithSchema(state, UpdateAccountBody, body, fieldOf);
  if (hasProblems(state)) return page(c, state);
  return act<AccountSettings>(c, {
    what: "save the account's settings",
    back: BACK,
    send: (key) => c.var.api("/api/account", { method: "PATCH", body, idempotencyKey: key }),
    failed: (answer) => {
      addApiError(state, answer.status, answer.error, "save the account's settings", fieldOf);
      return page(c, state);
    },
    done: (account) => redirectWithNotice(c, BACK, "settings_saved", account.id),
  });
}

export function registerSettingsPages(dash: Hono<DashEnv>) {
  dash.get("/settings", (c) => page(c));
  dash.post("/settings", save);
}
