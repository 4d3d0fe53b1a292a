// Records that must not live for good, deleted by the cron: completed idempotency records (which
// hold stored answers) once their 24 hours are over (a claim whose outcome is unknown is kept), and job_runs rows (leases and run markers) after
// theirs. A payout's send marker is kept while the payout is still pending, because it is what
// refuses a cancel once money may be moving. Dashboard sessions go once they have expired. The
// record of a processor's event (processor_events) goes after PROCESSOR_EVENT_TTL_MS, long after
// the processor stops sending it (Stripe retries for up to 3 days). A money claim
// (src/processor/in-flight.ts) left by a worker that died goes a day after its lease ran out. Each
// run deletes a bounded number of rows.
import { sql } from "drizzle-orm";
import { rawStatement, runBatch } from "../db/batch";
import { createDb } from "../db/client";
import { JOB_RUN_TTL_MS } from "../db/leases";
import type { Bindings } from "../env";

/** Rows one run deletes per table at the most; the rest go in the next run. */
export const EXPIRY_BATCH = 1000;
/** How long a processor event's id is kept to refuse a redelivery of it. */
export const PROCESSOR_EVENT_TTL_MS = 30 * 24 * 60 * 60 * 1000;

export async function expireRecords(
  env: Bindings,
  now: number,
): Promise<{ idempotencyKeys: number; jobRuns: number; dashboardSessions: number; processorEvents: number; moneyClaims: number }> {
  const db = createDb(env.DB);
  const legacyCutoff = new Date(now - JOB_RUN_TTL_MS).toISOString();
  const [keys, runs, sessions, processorEvents, claims] = (await runBatch(db, [
    // Completed records only: a claim whose outcome is unknown (money may have moved) keeps its key.
    rawStatement(db, sql`DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE status = 'completed' AND expires_at <= ${now} LIMIT ${EXPIRY_BATCH})`),
    rawStatement(db, sql`DELETE FROM job_runs WHERE rowid IN (
      SELECT rowid FROM job_runs
      WHERE (expires_at <= ${now} OR (expires_at IS NULL AND created_at < ${legacyCutoff}))
        AND (lease_until IS NULL OR lease_until <= ${now})
        AND NOT (key LIKE 'payout_send:%' AND EXISTS (SELECT 1 FROM payouts WHERE payouts.id = substr(job_runs.key, 13) AND payouts.status = 'pending'))
      LIMIT ${EXPIRY_BATCH})`),
    rawStatement(db, sql`DELETE FROM dashboard_sessions WHERE rowid IN (SELECT rowid FROM dashboard_sessions WHERE expires_at <= ${now} LIMIT ${EXPIRY_BATCH})`),
    rawStatement(
      db,
      sql`DELETE FROM processor_events WHERE rowid IN (SELECT rowid FROM processor_events WHERE received_at < ${new Date(now - PROCESSOR_EVENT_TTL_MS).toISOString()} LIMIT ${EXPIRY_BATCH})`,
    ),
    rawStatement(db, sql`DELETE FROM money_claims WHERE rowid IN (SELECT rowid FROM money_claims WHERE lease_until <= ${now - JOB_RUN_TTL_MS} LIMIT ${EXPIRY_BATCH})`),
  ])) as D1Result[];
  return {
    idempotencyKeys: keys.meta.changes,
    jobRuns: runs.meta.changes,
    dashboardSessions: sessions.meta.changes,
    processorEvents: processorEvents.meta.changes,
    moneyClaims: claims.meta.changes,
  };
}
