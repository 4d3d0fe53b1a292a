// Plans: the list, and a form to create one: fixed (a price per interval) or tiered (volume or
// graduated, up to four tiers). Prices are typed in major units, as the API takes them.
import type { Context, Hono } from "hono";
import { act, apiErrorPage, field, fields, redirectWithNotice, refuse } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time } from "../format";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";

interface Tier {
  up_to: number | null;
  unit_amount: number;
  flat_amount: number;
}

interface Plan {
  id: string;
  name: string;
  unit_amount: number | null;
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
/** A price typed in major units: digits, an optional decimal part (the API checks the currency's decimals). */
const DECIMAL = /^\d{1,12}(\.\d{1,6})?$/;

function Pricing({ plan }: { plan: Plan }) {
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
          {i === 0 ? 1 : (all[i - 1].up_to ?? 0) + 1}–{t.up_to ?? "∞"}: <Money minor={t.unit_amount} currency={plan.currency} /> each
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

function CreatePlanForm({ c }: { c: Context<DashEnv> }) {
  const session = c.var.session!;
  return (
    <section class="panel">
      <h2>Create a plan</h2>
      <form method="post" action={BACK}>
        <FormFields session={session} />
        <div class="row">
          <label>
            Name
            <input name="name" required maxlength={200} placeholder="Pro" />
          </label>
          <label>
            Currency
            <input name="currency" required size={5} value="usd" />
          </label>
          <label>
            Interval
            <select name="interval">
              <option value="month">month</option>
              <option value="year">year</option>
            </select>
          </label>
          <label>
            Pricing
            <select name="pricing_model">
              <option value="fixed">fixed</option>
              <option value="volume">volume (tiers)</option>
              <option value="graduated">graduated (tiers)</option>
            </select>
          </label>
          <label>
            Price per interval (fixed)
            <input name="price" inputmode="decimal" size={10} placeholder="19.99" />
          </label>
        </div>
        <label>
          Description
          <input name="description" size={60} maxlength={1000} />
        </label>
        <fieldset>
          <legend>Tiers (volume and graduated plans; leave "up to" empty on the last tier)</legend>
          {Array.from({ length: TIER_ROWS }, (_, i) => (
            <div class="row">
              <label>
                Up to (units)
                <input name="tier_up_to" inputmode="numeric" size={8} aria-label={`Tier ${i + 1} up to`} />
              </label>
              <label>
                Unit price
                <input name="tier_unit_price" inputmode="decimal" size={8} aria-label={`Tier ${i + 1} unit price`} />
              </label>
              <label>
                Flat price
                <input name="tier_flat_price" inputmode="decimal" size={8} aria-label={`Tier ${i + 1} flat price`} />
              </label>
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

async function listPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<Plan>>("/subscription-plans", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read plans", "/dashboard");
  const page = answer.body;
  return render(c, 200, {
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
        {can(session, "plans:write") ? <CreatePlanForm c={c} /> : <p class="muted">This key cannot create plans (it needs plans:write).</p>}
      </>
    ),
  });
}

async function createPlan(c: Context<DashEnv>) {
  const model = field(c, "pricing_model") || "fixed";
  if (!["fixed", "volume", "graduated"].includes(model)) return refuse(c, 400, "Pricing must be fixed, volume or graduated.", BACK, "parameter_invalid", "pricing_model");
  const body: Record<string, unknown> = {
    name: field(c, "name"),
    currency: field(c, "currency").trim(),
    interval: field(c, "interval"),
    pricing_model: model,
  };
  const description = field(c, "description").trim();
  if (description) body.description = description;
  if (model === "fixed") {
    const price = field(c, "price").trim();
    if (!DECIMAL.test(price)) return refuse(c, 400, `Enter the price per interval in major units, such as 19.99${price ? ` ('${price}' is not one)` : ""}.`, BACK, "parameter_invalid", "price");
    body.price = Number(price);
  } else {
    const upTo = fields(c, "tier_up_to");
    const unit = fields(c, "tier_unit_price");
    const flat = fields(c, "tier_flat_price");
    const tiers: Record<string, unknown>[] = [];
    for (let i = 0; i < Math.max(upTo.length, unit.length, flat.length); i++) {
      const [u, p, f] = [(upTo[i] ?? "").trim(), (unit[i] ?? "").trim(), (flat[i] ?? "").trim()];
      if (!u && !p && !f) continue;
      if (u && !/^\d{1,9}$/.test(u)) return refuse(c, 400, `Tier ${i + 1}: "up to" must be a whole number of units ('${u}' is not).`, BACK, "parameter_invalid", `tiers.${i}.up_to`);
      if (!DECIMAL.test(p)) return refuse(c, 400, `Tier ${i + 1}: enter a unit price in major units, such as 6.50.`, BACK, "parameter_invalid", `tiers.${i}.unit_price`);
      if (f && !DECIMAL.test(f)) return refuse(c, 400, `Tier ${i + 1}: the flat price must be an amount in major units.`, BACK, "parameter_invalid", `tiers.${i}.flat_price`);
      tiers.push({ up_to: u ? Number(u) : null, unit_price: Number(p), ...(f ? { flat_price: Number(f) } : {}) });
    }
    if (tiers.length === 0) return refuse(c, 400, "A tiered plan needs at least one tier.", BACK, "parameter_missing", "tiers");
    body.tiers = tiers;
  }
  return act<Plan>(c, {
    what: "create this plan",
    back: BACK,
    send: (key) => c.var.api("/subscription-plans", { body, idempotencyKey: key }),
    done: (plan) => redirectWithNotice(c, BACK, "plan_created", plan.id),
  });
}

export function registerPlanPages(dash: Hono<DashEnv>) {
  dash.get("/plans", listPage);
  dash.post("/plans", createPlan);
}
