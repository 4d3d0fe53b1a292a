// The Cron Trigger (every minute): each task is idempotent and bounded per run, and runs on every
// shard side by side (src/db/shards.ts), each on that shard's database alone.
import type { Bindings, RuntimeBindings } from "./env";
import { shardEnv, shardNumbers } from "./db/shards";
import { renewalsTask, staleClaimsTask, testClocksTask, trialNoticesTask } from "./billing/jobs";
import { expireRecords } from "./jobs/expiry";
import { settleStaleProrationCharges } from "./billing/proration-charges";
import { sweepStalePayouts } from "./payments/settle-payout";
import { sweepStaleRefunds } from "./payments/settle-refund";
import { expireAuthorizations } from "./payments/intents";
import { expireCheckoutSessions } from "./payments/checkout";
import { expireIncompleteSubscriptions } from "./billing/incomplete";
import { sweepDeliveries } from "./webhooks/sweeper";
import { purgeExpiredEvents } from "./webhooks/retention";
import { forgetUsageEventIds } from "./billing/usage-events";
import { resumeStalledRecoveries } from "./webhooks/operations/recovery";
import { reencryptConnections } from "./processor/connections";

type Task = (env: Bindings, scheduledTime: number, ctx: ExecutionContext) => Promise<void>;

const tasks: Record<string, Task> = {
  renewals: renewalsTask,
  testClocks: testClocksTask,
  staleClaims: staleClaimsTask,
  staleProrationCharges: async (env, scheduledTime) => void (await settleStaleProrationCharges(env, scheduledTime)),
  trialNotices: trialNoticesTask,
  expireRecords: async (env, scheduledTime) => void (await expireRecords(env, scheduledTime)),
  settlePayouts: async (env, scheduledTime) => void (await sweepStalePayouts(env, scheduledTime)),
  settleRefunds: async (env, scheduledTime) => void (await sweepStaleRefunds(env, scheduledTime)),
  // Authorizations not captured in 7 days are canceled (cancellation_reason expired).
  expireAuthorizations: async (env, scheduledTime) => void (await expireAuthorizations(env, scheduledTime)),
  // Checkout sessions unused at expires_at (24 hours) are expired (checkout.session.expired).
  expireCheckoutSessions: async (env, scheduledTime) => void (await expireCheckoutSessions(env, scheduledTime)),
  // Incomplete subscriptions whose payer did not authenticate within 23 hours: incomplete_expired.
  expireIncompleteSubscriptions: async (env, scheduledTime) => void (await expireIncompleteSubscriptions(env, scheduledTime)),
  // A PROCESSOR_ENCRYPTION_KEY rotation: connections sealed with an older key id are sealed again.
  reencryptProcessorSecrets: async (env, scheduledTime) => void (await reencryptConnections(env, scheduledTime)),
  // Events, deliveries and attempts older than the account's event_retention_days, a page a run.
  purgeEvents: async (env, scheduledTime) => void (await purgeExpiredEvents(env, scheduledTime)),
  // Usage event ids older than 35 days are forgotten (the usage stays), a page a run.
  forgetUsageEventIds: async (env, scheduledTime) => void (await forgetUsageEventIds(env, scheduledTime)),
  // A webhook recovery whose job message was lost goes on (src/webhooks/operations/recovery.ts).
  resumeRecoveries: async (env, scheduledTime) => void (await resumeStalledRecoveries(env, scheduledTime)),
  sweepDeliveries: async (env) => {
    await sweepDeliveries(env);
  },
};

export async function runScheduled(env: RuntimeBindings, scheduledTime: number, ctx: ExecutionContext): Promise<void> {
  const runs = shardNumbers(env).flatMap((shard) => Object.entries(tasks).map(([name, task]) => ({ name, shard, task })));
  const results = await Promise.allSettled(runs.map(({ shard, task }) => task(shardEnv(env, shard), scheduledTime, ctx)));
  const failures = results.flatMap((r, i) => (r.status === "rejected" ? [{ ...runs[i], reason: r.reason }] : []));
  for (const failure of failures) console.error(JSON.stringify({ message: "cron task failed", task: failure.name, shard: failure.shard, error: String(failure.reason) }));
  if (failures.length > 0) throw new Error(`${failures.length} cron task(s) failed`);
}
