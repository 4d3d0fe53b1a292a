// Leases over background work, kept in job_runs. Queues, alarms and cron are at-least-once, and
// two workers can hold the same message at once; a worker calls the processor for a key only
// while it holds that key's lease. The claim is one conditional upsert: it takes a key that is
// free or whose lease ran out, and returns the row only to the worker that took it.
import { type SQL, eq, sql } from "drizzle-orm";
import type { Db } from "./client";
import { rawStatement, type Statement } from "./batch";
import { jobRuns } from "./schema";

/** How long a job_runs row is kept after it was first written. */
export const JOB_RUN_TTL_MS = 24 * 60 * 60 * 1000;

/** Takes the lease on `key` until `now + leaseMs`, unless another worker holds it; RETURNING says who won. */
export function claimLease(db: Db, key: string, now: number, leaseMs: number): Statement {
  return rawStatement(
    db,
    sql`INSERT INTO ${jobRuns} (key, created_at, lease_until, expires_at)
      VALUES (${key}, ${new Date(now).toISOString()}, ${now + leaseMs}, ${now + JOB_RUN_TTL_MS})
      ON CONFLICT (key) DO UPDATE SET lease_until = excluded.lease_until
        WHERE job_runs.lease_until IS NULL OR job_runs.lease_until <= ${now}
      RETURNING key`,
  );
}

/** Whether the claim statement's batch result shows this worker took the lease. */
export const leaseTaken = (result: unknown): boolean => ((result as { results?: unknown[] }).results?.length ?? 0) > 0;

/** SQL: some worker holds a live lease on `key` at `now`. */
export const leaseLive = (key: SQL, now: number): SQL =>
  sql`EXISTS (SELECT 1 FROM ${jobRuns} AS lease WHERE lease.key = ${key} AND lease.lease_until > ${now})`;

/**
 * Gives a lease back once its worker's processor call has ended without an answer it could
 * record (the call threw): no call is in flight any more, so the queue's retry may call again,
 * with the same reference, at once. The row itself stays (a payout's send marker refuses cancels).
 */
export async function releaseLease(db: Db, key: string): Promise<void> {
  await db.update(jobRuns).set({ leaseUntil: 0 }).where(eq(jobRuns.key, key));
}
