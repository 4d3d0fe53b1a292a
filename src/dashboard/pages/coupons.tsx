// Coupons: the list (value, duration, redemptions, whether it can still be redeemed), a form to
// create one (a percentage, or an amount in major units of a currency), and delete (which stops
// new redemptions; subscriptions keep their discount).
import type { Context, Hono } from "hono";
import { normalizeCurrency } from "../../domain/money";
import { CreateCouponBody } from "../../routes/coupons/schema";
import { act, apiErrorPage, field, redirectWithNotice } from "../actions";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { Id, Money, Time, majorToMinor } from "../format";
import { type FormState, FormSummary, Problems, addApiError, addProblem, checkWithSchema, formStatus, hasProblems, invalid, newFormState, valueOf } from "../form-state";
import { Empty, FormFields, Pager, StatusBadge, TableWrap, can, render } from "../layout";
import { apiQuery, listQuery } from "../lists";

export interface Coupon {
  id: string;
  name: string;
  percent_off: number | null;
  amount_off: number | null;
  currency: string | null;
  duration: "once" | "repeating" | "forever";
  duration_in_months: number | null;
  max_redemptions: number | null;
  redeem_by: string | null;
  times_redeemed: number;
  valid: boolean;
  created_at: string;
  deleted_at: string | null;
}

const BACK = "/dashboard/coupons";

/** What a coupon takes off, and for how long: "20% off for 2 months", "10.00 USD off once". */
export function CouponTerms({ coupon }: { coupon: Coupon }) {
  const duration =
    coupon.duration === "once" ? "once" : coupon.duration === "forever" ? "forever" : `for ${coupon.duration_in_months} month${coupon.duration_in_months === 1 ? "" : "s"}`;
  return (
    <>
      {coupon.percent_off !== null ? `${coupon.percent_off}%` : <Money minor={coupon.amount_off ?? 0} currency={coupon.currency ?? "usd"} />} off {duration}
    </>
  );
}

function CreateCouponForm({ c, state }: { c: Context<DashEnv>; state?: FormState }) {
  const session = c.var.session!;
  const duration = valueOf(state, "duration", "once");
  return (
    <section class="panel" id="create-coupon">
      <h2>Create a coupon</h2>
      <form method="post" action={BACK}>
        <FormFields session={session} />
        <FormSummary state={state} />
        <div class="row">
          <label>
            Code (optional)
            <input name="id" maxlength={64} placeholder="SUMMER20" value={valueOf(state, "id")} {...invalid(state, "id")} />
            <Problems state={state} field="id" />
          </label>
          <label>
            Name
            <input name="name" required maxlength={200} placeholder="Summer sale" value={valueOf(state, "name")} {...invalid(state, "name")} />
            <Problems state={state} field="name" />
          </label>
        </div>
        <div class="row">
          <label>
            Percent off
            <input name="percent_off" inputmode="decimal" size={6} placeholder="20" value={valueOf(state, "percent_off")} {...invalid(state, "percent_off")} />
            <Problems state={state} field="percent_off" />
          </label>
          <label>
            or amount off
            <input name="amount_off" inputmode="decimal" size={10} placeholder="10.00" value={valueOf(state, "amount_off")} {...invalid(state, "amount_off")} />
            <Problems state={state} field="amount_off" />
          </label>
          <label>
            Currency (with an amount)
            <input name="currency" size={5} placeholder="usd" value={valueOf(state, "currency")} {...invalid(state, "currency")} />
            <Problems state={state} field="currency" />
          </label>
        </div>
        <div class="row">
          <label>
            Duration
            <select name="duration" {...invalid(state, "duration")}>
              {(["once", "repeating", "forever"] as const).map((d) => (
                <option value={d} selected={duration === d}>
                  {d}
                </option>
              ))}
            </select>
            <Problems state={state} field="duration" />
          </label>
          <label>
            Months (repeating)
            <input name="duration_in_months" inputmode="numeric" size={4} value={valueOf(state, "duration_in_months")} {...invalid(state, "duration_in_months")} />
            <Problems state={state} field="duration_in_months" />
          </label>
          <label>
            Max redemptions (optional)
            <input name="max_redemptions" inputmode="numeric" size={6} value={valueOf(state, "max_redemptions")} {...invalid(state, "max_redemptions")} />
            <Problems state={state} field="max_redemptions" />
          </label>
        </div>
        <button class="primary" type="submit">
          Create coupon
        </button>
      </form>
    </section>
  );
}

async function listPage(c: Context<DashEnv>, state?: FormState) {
  const session = c.var.session!;
  const query = listQuery(c);
  const answer = await c.var.api<Page<Coupon>>("/coupons", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read coupons", "/dashboard");
  const page = answer.body;
  const write = can(session, "coupons:write");
  return render(c, state ? formStatus(state) : 200, {
    title: "Coupons",
    active: BACK,
    children: (
      <>
        <section class="panel">
          {page.data.length === 0 ? (
            <Empty title="No coupons yet">Create one below; a subscription redeems it with its code.</Empty>
          ) : (
            <TableWrap>
              <table>
                <thead>
                  <tr>
                    <th>Coupon</th>
                    <th>Discount</th>
                    <th>Redeemed</th>
                    <th>Status</th>
                    <th>Created</th>
                    {write ? <th></th> : null}
                  </tr>
                </thead>
                <tbody>
                  {page.data.map((coupon) => (
                    <tr data-coupon={coupon.id} id={`coupon-${coupon.id}`}>
                      <td>
                        <span class="wrap">{coupon.name}</span>
                        <div class="muted">
                          <Id id={coupon.id} />
                        </div>
                      </td>
                      <td>
                        <CouponTerms coupon={coupon} />
                      </td>
                      <td>
                        {coupon.times_redeemed}
                        {coupon.max_redemptions !== null ? ` of ${coupon.max_redemptions}` : ""}
                        {coupon.redeem_by ? (
                          <div class="muted">
                            until <Time iso={coupon.redeem_by} />
                          </div>
                        ) : null}
                      </td>
                      <td>
                        <StatusBadge status={coupon.deleted_at ? "deleted" : coupon.valid ? "valid" : "used up"} />
                      </td>
                      <td>
                        <Time iso={coupon.created_at} />
                      </td>
                      {write ? (
                        <td>
                          {coupon.deleted_at ? null : (
                            <form method="post" action={`${BACK}/${encodeURIComponent(coupon.id)}/delete`} class="inline" data-confirm="Delete this coupon? It can no longer be redeemed; subscriptions keep their discount.">
                              <FormFields session={session} />
                              <button type="submit" class="danger">
                                Delete
                              </button>
                            </form>
                          )}
                        </td>
                      ) : null}
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
          <Pager page={page} query={query} base={BACK} />
        </section>
        {write ? <CreateCouponForm c={c} state={state} /> : <p class="muted">This key cannot create coupons (it needs coupons:write).</p>}
      </>
    ),
  });
}

const WHOLE = /^\d{1,10}$/;
const COUPON_FIELDS = ["id", "name", "percent_off", "amount_off", "currency", "duration", "duration_in_months", "max_redemptions", "redeem_by"];

/** Reads the coupon form, checks every field, and sends it only when nothing is wrong. */
async function createCoupon(c: Context<DashEnv>) {
  const state = newFormState(BACK, c.var.form);
  const body: Record<string, unknown> = { name: field(c, "name").trim(), duration: field(c, "duration") };
  const id = field(c, "id").trim();
  if (id) body.id = id;
  if (!body.name) addProblem(state, "name", "Give the coupon a name.");
  const percent = field(c, "percent_off").trim();
  const amount = field(c, "amount_off").trim();
  const currencyText = field(c, "currency").trim();
  if (percent && amount) addProblem(state, "amount_off", "Give a percentage or an amount off, not both.");
  else if (!percent && !amount) addProblem(state, "percent_off", "Give a percentage off (such as 20) or an amount off with its currency.");
  if (percent) {
    if (!/^\d{1,3}(\.\d{1,2})?$/.test(percent) || Number(percent) <= 0 || Number(percent) > 100) {
      addProblem(state, "percent_off", `Percent off is a number greater than 0 and at most 100, with at most 2 decimals ('${percent}' is not one).`);
    } else body.percent_off = Number(percent);
    if (currencyText) addProblem(state, "currency", "Only an amount off has a currency: clear it, or give an amount instead of a percentage.");
  }
  if (amount) {
    const currency = normalizeCurrency(currencyText);
    if (!currencyText) addProblem(state, "currency", "Enter the currency of the amount off, such as usd.");
    else if (!currency) addProblem(state, "currency", `'${currencyText}' is not a currency Tender knows: use an ISO 4217 code such as usd, eur or jpy.`);
    else {
      const minor = majorToMinor(amount, currency);
      if (!minor.ok) addProblem(state, "amount_off", `Amount off: ${minor.message}`);
      else if (minor.minor < 1) addProblem(state, "amount_off", "Amount off must be more than zero.");
      else {
        body.amount_off = minor.minor;
        body.currency = currency;
      }
    }
  }
  const months = field(c, "duration_in_months").trim();
  if (body.duration === "repeating") {
    if (!WHOLE.test(months) || Number(months) < 1) addProblem(state, "duration_in_months", "A repeating coupon needs its number of months, 1 or more.");
    else body.duration_in_months = Number(months);
  } else if (months) addProblem(state, "duration_in_months", "Months are for a repeating coupon only: clear them, or pick repeating.");
  const max = field(c, "max_redemptions").trim();
  if (max) {
    if (!WHOLE.test(max) || Number(max) < 1) addProblem(state, "max_redemptions", `Max redemptions is a whole number, 1 or more ('${max}' is not).`);
    else body.max_redemptions = Number(max);
  }
  const fieldOf = (path: string) => (COUPON_FIELDS.includes(path) ? path : undefined);
  checkWithSchema(state, CreateCouponBody, body, fieldOf);
  if (hasProblems(state)) return listPage(c, state);
  return act<Coupon>(c, {
    what: "create this coupon",
    back: BACK,
    send: (key) => c.var.api("/coupons", { body, idempotencyKey: key }),
    done: (coupon) => redirectWithNotice(c, BACK, "coupon_created", coupon.id),
    failed: (answer) => {
      addApiError(state, answer.status, answer.error, "create this coupon", fieldOf);
      return listPage(c, state);
    },
  });
}

export function registerCouponPages(dash: Hono<DashEnv>) {
  dash.get("/coupons", (c) => listPage(c));
  dash.post("/coupons", createCoupon);
  dash.post("/coupons/:id/delete", (c) => {
    const id = c.req.param("id")!;
    return act<Coupon>(c, {
      what: "delete this coupon",
      back: BACK,
      send: (key) => c.var.api(`/coupons/${encodeURIComponent(id)}`, { method: "DELETE", idempotencyKey: key }),
      done: (coupon) => redirectWithNotice(c, BACK, "coupon_deleted", coupon.id),
    });
  });
}
