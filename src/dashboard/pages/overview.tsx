// Overview: counts, and two charts over the last 30 days: payment volume by day (one currency at a
// time, the busiest by default) and the share of webhook delivery attempts answered 2xx by day.
// Each part shows only when the session's key can read what it counts.
import type { Context } from "hono";
import { CURRENCY_EXPONENTS, formatMinor } from "../../domain/money";
import { clock } from "../../lib/clock";
import { BarChart, type Bar } from "../charts";
import type { DashEnv } from "../context";
import { formatMoney } from "../format";
import { Empty, can, render } from "../layout";
import { overviewStats } from "../stats";

export async function overviewPage(c: Context<DashEnv>) {
  const session = c.var.session!;
  const stats = await overviewStats(c.var.db, session.auth, clock.now());
  const volume = stats.volume ?? [];
  const totals = new Map<string, number>();
  for (const row of volume) totals.set(row.currency, (totals.get(row.currency) ?? 0) + row.payments);
  const currencies = [...totals.entries()].sort((a, b) => b[1] - a[1]).map(([code]) => code);
  const asked = c.req.query("currency")?.toLowerCase();
  const currency = asked && currencies.includes(asked) ? asked : currencies[0];

  const volumeBars: Bar[] = stats.days.map((day) => {
    const row = volume.find((r) => r.day === day && r.currency === currency);
    const amount = row?.amount ?? 0;
    if (amount === 0) return { day, value: null, label: "no payments" };
    return { day, value: amount, label: currency ? `${formatMoney(amount, currency)} in ${row?.payments ?? 0} payment(s)` : "no payments" };
  });
  const maxVolume = Math.max(0, ...volumeBars.map((b) => b.value ?? 0));
  const exponent = currency ? (CURRENCY_EXPONENTS[currency] ?? 2) : 2;

  const success = stats.success ?? [];
  const successBars: Bar[] = stats.days.map((day) => {
    const row = success.find((r) => r.day === day);
    if (!row || row.attempts === 0) return { day, value: null, label: "no delivery attempts" };
    const rate = (row.succeeded / row.attempts) * 100;
    return { day, value: rate, label: `${rate.toFixed(1)}% of ${row.attempts} attempt(s) answered 2xx`, tone: rate === 0 ? "zero" : rate < 90 ? "low" : undefined };
  });
  const attempts = success.reduce((n, r) => n + r.attempts, 0);
  const succeededTotal = success.reduce((n, r) => n + r.succeeded, 0);

  return render(c, 200, {
    title: "Overview",
    active: "/dashboard",
    children: (
      <>
        {stats.counts.length ? (
          <div class="cards">
            {stats.counts.map((count) => (
              <div class="card">
                <div class="label">{count.label}</div>
                <div class="value">{count.value.toLocaleString("en-US")}</div>
                {count.sub ? <div class="sub">{count.sub}</div> : null}
              </div>
            ))}
          </div>
        ) : (
          <div class="panel">
            <Empty title="This key cannot read any of the overview's figures">It holds the scopes {session.auth.scopes.join(", ")}.</Empty>
          </div>
        )}
        <section class="panel" aria-labelledby="volume-title">
          <h2 id="volume-title">Payment volume by day, last 30 days {currency ? `(${currency.toUpperCase()})` : ""}</h2>
          {!can(session, "payments:read") ? (
            <Empty title="This key cannot read payments">It needs the payments:read scope.</Empty>
          ) : currencies.length === 0 ? (
            <Empty title="No payments in the last 30 days">Payments appear here when subscriptions are charged.</Empty>
          ) : (
            <>
              {currencies.length > 1 ? (
                <p class="muted">
                  Currency:{" "}
                  {currencies.map((code) => (
                    <>
                      {code === currency ? <strong>{code.toUpperCase()}</strong> : <a href={`/dashboard?currency=${code}`}>{code.toUpperCase()}</a>}{" "}
                    </>
                  ))}
                </p>
              ) : null}
              <BarChart
                bars={volumeBars}
                max={maxVolume}
                title={`Payment volume in ${currency!.toUpperCase()} by day`}
                axisLabel={(v) => formatMinor(Math.round(v), exponent)}
              />
              <p class="muted">
                Total: {formatMoney(volumeBars.reduce((n, b) => n + (b.value ?? 0), 0), currency!)} (successful charges, before refunds)
              </p>
            </>
          )}
        </section>
        <section class="panel" aria-labelledby="success-title">
          <h2 id="success-title">Webhook delivery success rate by day, last 30 days</h2>
          {!can(session, "webhooks:read") ? (
            <Empty title="This key cannot read webhooks">It needs the webhooks:read scope.</Empty>
          ) : attempts === 0 ? (
            <Empty title="No delivery attempts in the last 30 days">
              <a href="/dashboard/webhooks">Register an endpoint</a> to receive events.
            </Empty>
          ) : (
            <>
              <BarChart bars={successBars} max={100} title="Share of delivery attempts answered 2xx by day" axisLabel={(v) => `${Math.round(v)}%`} />
              <p class="muted">
                {succeededTotal} of {attempts} attempts answered 2xx ({((succeededTotal / attempts) * 100).toFixed(1)}%).
              </p>
            </>
          )}
        </section>
      </>
    ),
  });
}
