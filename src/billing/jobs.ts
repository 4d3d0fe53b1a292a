// The billing kinds of the job queue (registered in src/jobs/index.ts) and the cron tasks.
import type { Bindings } from "../env";
import { fanOutRenewals, type RenewalFanoutMessage, renewChunk, type RenewalJobMessage, startRenewalFanout } from "./renewals";
import { continueTestClock, resumeTestClocks, type TestClockJobMessage } from "./test-clocks";
import { settleStaleClaims } from "./claims";
import { sendWallClockTrialNotices } from "./trials";
import { createDb } from "../db/client";

export type BillingJobMessage = RenewalJobMessage | RenewalFanoutMessage | TestClockJobMessage;

export const billingJobHandlers = {
  "billing.renew": async (message: RenewalJobMessage, env: Bindings) => {
    await renewChunk(env, message.subscriptionIds);
  },
  "billing.enqueue_due": async (message: RenewalFanoutMessage, env: Bindings) => {
    await fanOutRenewals(env, message);
  },
  "billing.advance_test_clock": async (message: TestClockJobMessage, env: Bindings) => {
    await continueTestClock(env, message);
  },
};

/** Cron task: start the fan-out of the subscriptions that are due (no cap: it continues on the queue). */
export async function renewalsTask(env: Bindings, scheduledTime: number): Promise<void> {
  await startRenewalFanout(env, scheduledTime);
}

/** Cron task: resume test clocks whose advance did not finish (a continuation that died). */
export async function testClocksTask(env: Bindings): Promise<void> {
  await resumeTestClocks(env);
}

/** Cron task: settle the period charges claimed and never settled, once their lease ran out (src/billing/claims.ts). */
export async function staleClaimsTask(env: Bindings): Promise<void> {
  await settleStaleClaims(env);
}

/** Cron task: the subscription_trial_will_end notices that fell due (src/billing/trials.ts). */
export async function trialNoticesTask(env: Bindings, scheduledTime: number): Promise<void> {
  await sendWallClockTrialNotices(env, createDb(env.DB), scheduledTime);
}
