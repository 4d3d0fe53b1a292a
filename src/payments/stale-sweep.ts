// The cron sweep shared by payout and refund settlement: the pending rows old enough that their
// settlement message was lost, or whose worker died holding the send lease, and whose lease is
// not live (a live lease means a worker is at the processor now). Bounded per run.
import { type SQL, and, asc, eq, lt, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { leaseLive } from "../db/leases";
import { isoTime } from "../lib/clock";
import { livesHere } from "../db/scope";

export const SWEEP_LIMIT = 500;

export async function stalePendingIds(
  db: Db,
  table: SQLiteTable & { id: SQLiteColumn; accountId: SQLiteColumn; status: SQLiteColumn; createdAt: SQLiteColumn },
  options: { leasePrefix: string; staleAfterMs: number; now: number },
): Promise<string[]> {
  const leaseKey: SQL = sql`${options.leasePrefix} || ${table.id}`;
  const rows = await db
    .select({ id: table.id })
    .from(table)
    .where(
      and(
        eq(table.status, "pending"),
        lt(table.createdAt, isoTime(options.now - options.staleAfterMs)),
        sql`NOT ${leaseLive(leaseKey, options.now)}`,
        livesHere(table.accountId),
      ),
    )
    .orderBy(asc(table.createdAt))
    .limit(SWEEP_LIMIT);
  return rows.map((row) => row.id as string);
}
