// Plans: the list, and a form to create one: fixed (a price per interval) or tiered (volume or
// graduated, up to four tiers). Prices are typed in major units, as the API takes them.
import type { Context, Hono } from "hono";
import { normalizeCurrency } from "../../domain/money";
import { CreatePlanBody } from "../../routes/plans/schema";
import { act, apiErrorPage, field, fields, redirectWithNotice } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time, majorToMinor } from "../format";
import { type FormState, FormSummary, Problems, addApiError, addProblem, checkWithSchema, formStatus, hasProblems, invalid, newFormState, valueOf } from "../form-state";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";

interface Tier {
  up_to: number | null;
  unit_amount: number | null;
  unit_amount_decimal: string;
  flat_amount: number;
}

interface Plan {
  id: string;
  name: string;
  unit_amount: number | null;
  unit_amount_decimal: string | null;
  currency: string;
  interval: string;
  pricing_model: string;
  tiers: Tier[] | null;
  description: string | null;
  active: boolean;
  created_at: string;
}

const BACK = "/dashboard/plans";
const TIER_ROWS = 4;
const TIER_FIELDS = [
  ["tier_up_to", "Up to (units)"],
  ["tier_unit_price", "Unit price"],
  ["tier_flat_price", "Flat price"],
] as const;
/** A price typed in major units: digits, an optional decimal part (the API checks the currency's decimals). */
const DECIMAL = /^\d{1,12}(\.\d{1,6})?$/;

/** A unit price: in major units, or a sub-cent unit_amount_decimal as it was given, in minor units. */
function UnitPrice({ minor, exact, currency }: { minor: number | null; exact: string | null; currency: string }) {
  if (minor !== null) return <Money minor={minor} currency={currency} />;
  return (
    <span class="mono" title="unit_amount_decimal: an exact price in the currency's minor unit">
      {exact} minor units of {currency.toUpperCase()}
    </span>
  );
}

function Pricing({ plan }: { plan: Plan }) {
  if (plan.pricing_model === "fixed" && plan.unit_amount === null) {
    return (
      <>
        <UnitPrice minor={null} exact={plan.unit_amount_decimal} currency={plan.currency} /> each / {plan.interval}
      </>
    );
  }
  if (plan.unit_amount !== null) {
    return (
      <>
        <Money minor={plan.unit_amount} currency={plan.currency} /> / {plan.interval}
      </>
    );
  }
  return (
    <ul>
      {(plan.tiers ?? []).map((t, i, all) => (
        <li>
          {i === 0 ? 1 : (all[i - 1].up_to ?? 0) + 1}–{t.up_to ?? "∞"}: <UnitPrice minor={t.unit_amount} exact={t.unit_amount_decimal} currency={plan.currency} /> each
          {t.flat_amount ? (
            <>
              {" "}+ <Money minor={t.flat_amount} currency={plan.currency} /> flat
            </>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

function CreatePlanForm({ c, state }: { c: Context<DashEnv>; state?: FormState }) {
  const session = c.var.session!;
  const model = valueOf(state, "pricing_model", "fixed");
  const interval = valueOf(state, "interval", "month");
  return (
    <section class="panel" id="create-plan">
      <h2>Create a plan</h2>
      <form method="post" action={BACK}>
        <FormFields session={session} />
        <FormSummary state={state} />
        <div class="row">
          <label>
            Name
            <input name="name" required maxlength={200} placeholder="Pro" value={valueOf(state, "name")} {...invalid(state, "name")} />
            <Problems state={state} field="name" />
          </label>
          <label>
            Currency
            <input name="currency" required size={5} value={valueOf(state, "currency", "usd")} {...invalid(state, "currency")} />
            <Problems state={state} field="currency" />
          </label>
          <label>
            Interval
            <select name="interval" {...invalid(state, "interval")}>
              <option value="month" selected={interval === "month"}>
                month
              </option>
              <option value="year" selected={interval === "year"}>
                year
              </option>
            </select>
            <Problems state={state} field="interval" />
          </label>
          <label>
            Pricing
            <select name="pricing_model" {...invalid(state, "pricing_model")}>
              <option value="fixed" selected={model === "fixed"}>
                fixed
              </option>
              <option value="volume" selected={model === "volume"}>
                volume (tiers)
              </option>
              <option value="graduated" selected={model === "graduated"}>
                graduated (tiers)
              </option>
            </select>
            <Problems state={state} field="pricing_model" />
          </label>
          <label>
            Price per interval (fixed)
            <input name="price" inputmode="decimal" size={10} placeholder="19.99" value={valueOf(state, "price")} {...invalid(state, "price")} />
            <Problems state={state} field="price" />
          </label>
        </div>
        <label>
          Description
          <input name="description" size={60} maxlength={1000} value={valueOf(state, "description")} {...invalid(state, "description")} />
          <Problems state={state} field="description" />
        </label>
        <fieldset {...invalid(state, "tiers")}>
          <legend>Tiers (volume and graduated plans; leave "up to" empty on the last tier)</legend>
          <Problems state={state} field="tiers" />
          {Array.from({ length: TIER_ROWS }, (_, i) => (
            <div class="row">
              {TIER_FIELDS.map(([name, label]) => (
                <label>
                  {label}
                  <input
                    name={name}
                    inputmode={name === "tier_up_to" ? "numeric" : "decimal"}
                    size={8}
                    aria-label={`Tier ${i + 1} ${label.toLowerCase()}`}
                    value={valueOf(state, name, "", i)}
                    {...invalid(state, `${name}.${i}`)}
                  />
                  <Problems state={state} field={`${name}.${i}`} />
                </label>
              ))}
            </div>
          ))}
        </fieldset>
        <button class="primary" type="submit">
          Create plan
        </button>
      </form>
    </section>
  );
}

async function listPage(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<Plan>>("/subscription-plans", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read plans", "/dashboard");
  const page = answer.body;
  return render(c, state ? formStatus(state) : 200, {
    title: "Plans",
    active: BACK,
    children: (
      <>
        <section class="panel">
          {page.data.length === 0 ? (
            <Empty title="No plans yet">Create a fixed or tiered plan below.</Empty>
          ) : (
            <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Plan</th>
                  <th>Model</th>
                  <th>Pricing</th>
                  <th>Status</th>
                  <th>Created</th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((p) => (
                  <tr data-plan={p.id}>
                    <td>
                      <span class="wrap">{p.name}</span>
                      <div class="muted">
                        <Id id={p.id} />
                      </div>
                    </td>
                    <td>{p.pricing_model}</td>
                    <td>
                      <Pricing plan={p} />
                    </td>
                    <td>
                      <StatusBadge status={p.active ? "active" : "archived"} />
                    </td>
                    <td>
                      <Time iso={p.created_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            </TableWrap>
          )}
          <Pager page={page} query={query} base={BACK} />
        </section>
        {can(session, "plans:write") ? <CreatePlanForm c={c} state={state} /> : <p class="muted">This key cannot create plans (it needs plans:write).</p>}
      </>
    ),
  });
}

/** Where a problem with a path of the API's body (`tiers.1.unit_price`) is shown in the form. */
function planField(rows: number[]) {
  return (path: string): string | undefined => {
    const [head, index, leaf] = path.split(".");
    if (head !== "tiers") return ["name", "currency", "interval", "pricing_model", "price", "description"].includes(head) ? head : undefined;
    if (index === undefined) return "tiers";
    const row = rows[Number(index)];
    if (row === undefined) return "tiers";
    return `${leaf === "up_to" ? "tier_up_to" : leaf === "flat_price" ? "tier_flat_price" : "tier_unit_price"}.${row}`;
  };
}

/**
 * A price typed in major units, checked with the currency's decimals when the currency is known
 * (the API checks the same); the number the API takes, or undefined after adding the problem.
 */
function readPrice(state: FormState, key: string, text: string, currency: string | undefined, what: string): number | undefined {
  if (currency !== undefined) {
    const minor = majorToMinor(text, currency);
    if (!minor.ok) return void addProblem(state, key, `${what}: ${minor.message}`);
  } else if (!DECIMAL.test(text)) {
    return void addProblem(state, key, `${what}: write an amount in major units, such as 19.99 ('${text}' is not one).`);
  }
  return Number(text.replaceAll(",", ""));
}

/** Reads the plan form, checks every field, and sends it only when nothing is wrong. */
async function createPlan(c: Context<DashEnv>) {
  const state = newFormState(BACK, c.var.form);
  const model = field(c, "pricing_model") || "fixed";
  const name = field(c, "name").trim();
  const currencyText = field(c, "currency").trim();
  const currency = normalizeCurrency(currencyText);
  const interval = field(c, "interval");
  if (!name) addProblem(state, "name", "Give the plan a name.");
  if (!currencyText) addProblem(state, "currency", "Enter the currency's ISO 4217 code, such as usd.");
  else if (!currency) addProblem(state, "currency", `'${currencyText}' is not a currency Tender knows: use an ISO 4217 code such as usd, eur or jpy.`);
  if (interval !== "month" && interval !== "year") addProblem(state, "interval", "Pick month or year.");
  if (!["fixed", "volume", "graduated"].includes(model)) addProblem(state, "pricing_model", "Pick fixed, volume or graduated.");

  const body: Record<string, unknown> = { name, currency: currencyText, interval, pricing_model: model };
  const description = field(c, "description").trim();
  if (description) body.description = description;

  // The tier rows that were filled in, in order; rows[i] is the form row of the body's tiers[i].
  const upTo = fields(c, "tier_up_to").map((v) => v.trim());
  const unit = fields(c, "tier_unit_price").map((v) => v.trim());
  const flat = fields(c, "tier_flat_price").map((v) => v.trim());
  const rows: number[] = [];
  for (let i = 0; i < Math.max(upTo.length, unit.length, flat.length); i++) if (upTo[i] || unit[i] || flat[i]) rows.push(i);
  const price = field(c, "price").trim();

  if (model === "fixed") {
    if (!price) addProblem(state, "price", "Enter the price per interval, such as 19.99.");
    else {
      const value = readPrice(state, "price", price, currency, "The price");
      if (value === 0) addProblem(state, "price", "A fixed plan must charge more than zero.");
      if (value !== undefined) body.price = value;
    }
    if (rows.length) addProblem(state, "tiers", "Tiers are for volume and graduated plans: pick one of those as the pricing, or clear the tiers.");
  } else if (model === "volume" || model === "graduated") {
    if (price) addProblem(state, "price", `A ${model} plan is priced by its tiers: clear the price per interval.`);
    if (rows.length === 0) addProblem(state, "tiers", `A ${model} plan needs at least one tier.`);
    const tiers: Record<string, unknown>[] = [];
    let previous = 0;
    rows.forEach((row, n) => {
      const last = n === rows.length - 1;
      const tier: Record<string, unknown> = {};
      const u = upTo[row] ?? "";
      if (!u) {
        if (!last) addProblem(state, `tier_up_to.${row}`, `Tier ${row + 1}: only the last tier is unbounded; enter how many units this tier goes up to.`);
        tier.up_to = null;
      } else if (!/^\d{1,9}$/.test(u) || Number(u) < 1) {
        addProblem(state, `tier_up_to.${row}`, `Tier ${row + 1}: "up to" is a whole number of units, 1 or more ('${u}' is not).`);
      } else if (last) {
        addProblem(state, `tier_up_to.${row}`, `Tier ${row + 1}: the last tier has no limit; leave "up to" empty.`);
      } else if (Number(u) <= previous) {
        addProblem(state, `tier_up_to.${row}`, `Tier ${row + 1}: "up to" must be more than the tier before it (${previous}).`);
      } else {
        tier.up_to = Number(u);
        previous = Number(u);
      }
      const p = unit[row] ?? "";
      if (!p) addProblem(state, `tier_unit_price.${row}`, `Tier ${row + 1}: enter a unit price, such as 6.50.`);
      else {
        const value = readPrice(state, `tier_unit_price.${row}`, p, currency, `Tier ${row + 1}`);
        if (value !== undefined) tier.unit_price = value;
      }
      const f = flat[row] ?? "";
      if (f) {
        const value = readPrice(state, `tier_flat_price.${row}`, f, currency, `Tier ${row + 1}`);
        if (value !== undefined) tier.flat_price = value;
      }
      tiers.push(tier);
    });
    if (tiers.length) body.tiers = tiers;
  }

  const fieldOf = planField(rows);
  // Every field the dashboard could read is checked against the route's own schema too.
  checkWithSchema(state, CreatePlanBody, body, fieldOf);
  if (hasProblems(state)) return listPage(c, state);
  return act<Plan>(c, {
    what: "create this plan",
    back: BACK,
    send: (key) => c.var.api("/subscription-plans", { body, idempotencyKey: key }),
    done: (plan) => redirectWithNotice(c, BACK, "plan_created", plan.id),
    failed: (answer) => {
      addApiError(state, answer.status, answer.error, "create this plan", fieldOf);
      return listPage(c, state);
    },
  });
}

export function registerPlanPages(dash: Hono<DashEnv>) {
  dash.get("/plans", (c) => listPage(c));
  dash.post("/plans", createPlan);
}
