// subscription_trial_will_end: sent once per trial, when its notice falls due (three days before
// the trial ends, src/domain/trials.ts), by the cron for subscriptions on the wall clock and by a
// test clock's advance for those on it. The notice and its event commit in one batch guarded by
// the subscription's `trial_will_end_sent`, so two runs at once, or a run repeated, send it once.
// The trial's end itself is charged by the renewal run, as any due period is (src/billing/periods.ts).
import { type SQL, and, eq, isNull, lte, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { failureReason, guard } from "../db/batch";
import { subscriptions, users } from "../db/schema";
import type { Bindings } from "../env";
import { isoTime } from "../lib/clock";
import { commitWrites, emitEvent } from "../webhooks/outbox";
import { livesHere } from "../db/scope";

/** Notices one run sends at most; the rest go in the next run. */
export const TRIAL_NOTICES_PER_RUN = 100;
const NOTICE_ALREADY_SENT = "trial_notice_already_sent";

/** Sends one subscription's notice, unless it was sent (or its trial ended) meanwhile. */
export async function sendTrialNotice(env: Bindings, db: Db, sub: { id: string; accountId: string; livemode: boolean }, realNow: number): Promise<boolean> {
  try {
    await commitWrites(
      { db, queue: env.DELIVERY_QUEUE },
      {
        statements: [
          guard(db, NOTICE_ALREADY_SENT, sql`EXISTS (SELECT 1 FROM subscriptions WHERE id = ${sub.id} AND status = 'trialing' AND trial_will_end_sent = 0)`),
          db.update(subscriptions).set({ trialWillEndSent: true, updatedAt: isoTime(realNow) }).where(eq(subscriptions.id, sub.id)),
        ],
        events: [emitEvent(db, sub, { type: "subscription_trial_will_end", subscriptionId: sub.id, status: "trialing" }, realNow)],
      },
    );
    return true;
  } catch (error) {
    // Sent meanwhile by another run, or the trial ended or was canceled: nothing to send.
    if (failureReason(error) === NOTICE_ALREADY_SENT) return false;
    throw error;
  }
}

/** Sends the due notices of the trialing subscriptions that `where` selects (joined with their users). */
async function sendTrialNotices(env: Bindings, db: Db, where: SQL, realNow: number): Promise<number> {
  const rows = await db
    .select({ id: subscriptions.id, accountId: subscriptions.accountId, livemode: subscriptions.livemode })
    .from(subscriptions)
    .innerJoin(users, eq(users.id, subscriptions.userId))
    .where(and(eq(subscriptions.status, "trialing"), eq(subscriptions.trialWillEndSent, false), livesHere(subscriptions.accountId), where))
    .limit(TRIAL_NOTICES_PER_RUN);
  let sent = 0;
  let failure: unknown = null;
  for (const sub of rows) {
    try {
      if (await sendTrialNotice(env, db, sub, realNow)) sent++;
    } catch (error) {
      failure ??= error;
    }
  }
  if (failure) throw failure;
  return sent;
}

/** Cron: the due notices of subscriptions whose users follow the wall clock. */
export const sendWallClockTrialNotices = (env: Bindings, db: Db, now: number) =>
  sendTrialNotices(env, db, and(isNull(users.testClockId), lte(subscriptions.trialWillEndAt, now)) as SQL, now);

/** A test clock's advance: the due notices of its users' subscriptions, at its frozen time. */
export const sendTestClockTrialNotices = (env: Bindings, db: Db, clockId: string, frozenMs: number, realNow: number) =>
  sendTrialNotices(env, db, and(eq(users.testClockId, clockId), lte(subscriptions.trialWillEndAt, frozenMs)) as SQL, realNow);
