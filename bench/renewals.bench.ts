// Renewal throughput: 10,000 due subscriptions renewed by the renewal job (the cron's chunks of
// RENEWAL_CHUNK_SIZE, run LANES at a time as the queue consumer would). A measurement, not a
// timed test: it prints the figure and only asserts that every subscription renewed once.
//
//   npx vitest run --config bench/vitest.renewals.config.ts
//
// Optional: BENCH_SUBSCRIPTIONS=2000 to try another size.
import { env } from "../test/support/env";
import { expect, it } from "vitest";
import { renewChunk, RENEWAL_CHUNK_SIZE, enqueueDueRenewals } from "../src/billing/renewals";
import { call, signup } from "../test/support/http";

const SUBSCRIPTIONS = Number((env as unknown as Record<string, string>).BENCH_SUBSCRIPTIONS ?? 10_000);
const LANES = 6;

it(`renews ${SUBSCRIPTIONS} due subscriptions`, async () => {
  const acct = await signup("Bench");
  const user = (await call("/api/users", { key: acct.key, body: { name: "Subscriber", email: "s@example.com" } })).body;
  const plan = (await call("/subscription-plans", { key: acct.key, body: { name: "Bench", price: 10, currency: "usd", interval: "month" } })).body;
  const template = (
    await call("/subscriptions", {
      key: acct.key,
      body: { user_id: user.id, plan_id: plan.id, payment_method: "card", card_number: "4242424242424242", expiration_month: 12, expiration_year: 2035, cvv: "123" },
    })
  ).body;
  expect(template.status).toBe("active");

  // Clone the template N times, all due an hour ago (ids keep the sub_ prefix and stay unique).
  const seedStarted = performance.now();
  const dueAt = Date.now() - 3_600_000;
  const columns = (await env.DB.prepare("SELECT name FROM pragma_table_info('subscriptions')").all<{ name: string }>()).results.map((c) => c.name);
  const values = columns.map((c) => (c === "id" ? "'sub_bench' || printf('%021d', n.i)" : c === "due_at" ? String(dueAt) : `t.${c}`));
  await env.DB.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${SUBSCRIPTIONS})
     INSERT INTO subscriptions (${columns.join(", ")}) SELECT ${values.join(", ")} FROM subscriptions AS t, n WHERE t.id = ?`,
  )
    .bind(template.id)
    .run();
  const seedMs = performance.now() - seedStarted;

  // The cron's selection, measured on its own (it sends to the queue, whose consumer would renew
  // in the background; the bench drives the chunks itself instead, so they are read back here).
  const selectStarted = performance.now();
  const ids = (
    await env.DB.prepare("SELECT id FROM subscriptions WHERE due_at <= ? AND status IN ('active', 'past_due') ORDER BY due_at, id").bind(Date.now()).all<{ id: string }>()
  ).results.map((r) => r.id);
  const selectMs = performance.now() - selectStarted;
  expect(ids).toHaveLength(SUBSCRIPTIONS);

  const chunks: string[][] = [];
  for (let i = 0; i < ids.length; i += RENEWAL_CHUNK_SIZE) chunks.push(ids.slice(i, i + RENEWAL_CHUNK_SIZE));
  const started = performance.now();
  let next = 0;
  const chunkMs: number[] = [];
  await Promise.all(
    Array.from({ length: LANES }, async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++];
        const t0 = performance.now();
        const outcomes = await renewChunk(env, chunk);
        chunkMs.push(performance.now() - t0);
        if (outcomes.some((o) => o !== "renewed")) throw new Error(`unexpected outcomes ${outcomes.join(",")}`);
      }
    }),
  );
  const renewMs = performance.now() - started;

  const { renewed } = (await env.DB.prepare("SELECT count(*) AS renewed FROM subscriptions WHERE id LIKE 'sub_bench%' AND periods_billed = 2").first<{ renewed: number }>())!;
  const { payments } = (await env.DB.prepare("SELECT count(*) AS payments FROM payments WHERE subscription_id LIKE 'sub_bench%'").first<{ payments: number }>())!;
  expect(renewed).toBe(SUBSCRIPTIONS);
  expect(payments).toBe(SUBSCRIPTIONS);
  // Nothing is due any more: a second cron run finds nothing to send.
  expect(await enqueueDueRenewals(env, Date.now())).toEqual({ subscriptions: 0, messages: 0, next: null });

  chunkMs.sort((a, b) => a - b);
  const p = (q: number) => chunkMs[Math.min(chunkMs.length - 1, Math.floor(q * chunkMs.length))];
  console.log(
    [
      `renewals: ${SUBSCRIPTIONS} subscriptions in ${(renewMs / 1000).toFixed(2)} s = ${Math.round(SUBSCRIPTIONS / (renewMs / 1000))} renewals/s`,
      `  ${chunks.length} chunks of ${RENEWAL_CHUNK_SIZE}, ${LANES} at a time; per chunk p50 ${p(0.5).toFixed(0)} ms, p99 ${p(0.99).toFixed(0)} ms`,
      `  seeding ${seedMs.toFixed(0)} ms; selecting the due set ${selectMs.toFixed(0)} ms`,
    ].join("\n"),
  );
});
