// A subscription's row as a renewal run reads it, kept to be renewed later (as a run whose claim
// commits after other writes): the tests of what a claim priced from a stale read does.
import { env } from "./env";
import { eq, inArray } from "drizzle-orm";
import { type BillableRow, selectBillableRows } from "../../src/billing/periods";
import { renewSubscriptions } from "../../src/billing/renewals";
import { createDb } from "../../src/db/client";
import { subscriptions } from "../../src/db/schema";

/** The rows of these subscriptions, read now. */
export async function readBillableRows(...ids: string[]): Promise<BillableRow[]> {
  return selectBillableRows(createDb(env.DB)).where(ids.length === 1 ? eq(subscriptions.id, ids[0]) : inArray(subscriptions.id, ids));
}

/** Renews rows read earlier, at billing time `at` (ms). */
export const renewRows = (rows: BillableRow[], at: number) => renewSubscriptions(env, createDb(env.DB), rows, () => at);
