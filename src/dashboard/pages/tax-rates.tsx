// Tax rates in the dashboard: a read-only list (create and archive them through the API,
// POST /tax-rates and PATCH /tax-rates/{id}).
import type { Context, Hono } from "hono";
import type { Page } from "../api";
import type { DashEnv } from "../context";
import { apiErrorPage } from "../actions";
import { Id, Time } from "../format";
import { Empty, Pager, StatusBadge, TableWrap, render } from "../layout";
import { apiQuery, listQuery } from "../lists";
import type { TaxRateJson } from "../../routes/tax-rates/schema";

const BACK = "/dashboard/tax-rates";

async function listPage(c: Context<DashEnv>) {
  const query = listQuery(c);
  const answer = await c.var.api<Page<TaxRateJson>>("/tax-rates", { query: apiQuery(query) });
  if (!answer.ok) return apiErrorPage(c, answer, "read tax rates", "/dashboard");
  const page = answer.body;
  return render(c, 200, {
    title: "Tax rates",
    active: BACK,
    children: (
      <section class="panel">
        {page.data.length === 0 ? (
          <Empty title="No tax rates yet">Create one with POST /tax-rates; plans and subscriptions carry them in default_tax_rates.</Empty>
        ) : (
          <TableWrap>
            <table>
              <thead>
                <tr>
                  <th>Tax rate</th>
                  <th class="num">Percentage</th>
                  <th>Applies</th>
                  <th>Where</th>
                  <th>Status</th>
                  <th>Created</th>
                </tr>
              </thead>
              <tbody>
                {page.data.map((rate) => (
                  <tr data-tax-rate={rate.id} id={`tax-rate-${rate.id}`}>
                    <td>
                      <span class="wrap">{rate.display_name}</span>
                      <div class="muted">
                        <Id id={rate.id} />
                      </div>
                    </td>
                    <td class="num">{rate.percentage}%</td>
                    <td>{rate.inclusive ? "inclusive (in the price)" : "exclusive (added)"}</td>
                    <td>{[rate.country, rate.state].filter(Boolean).join(" / ") || "—"}</td>
                    <td>
                      <StatusBadge status={rate.active ? "active" : "archived"} />
                    </td>
                    <td>
                      <Time iso={rate.created_at} />
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

export function registerTaxRatePages(dash: Hono<DashEnv>) {
  dash.get("/tax-rates", (c) => listPage(c));
}
