// The billing kinds of the job queue (registered in src/jobs/index.ts) and the cron tasks.
import type { Bindings } from "../env";
import { enqueueDueRenewals, renewChunk, type RenewalJobMessage } from "./renewals";
import { continueTestClock, resumeTestClocks, type TestClockJobMessage } from "./test-clocks";

export type BillingJobMessage = RenewalJobMessage | TestClockJobMessage;

export const billingJobHandlers = {
  "billing.renew": async (message: RenewalJobMessage, env: Bindings) => {
    await renewChunk(env, message.subscriptionIds);
  },
  "billing.advance_test_clock": async (message: TestClockJobMessage, env: Bindings) => {
    await continueTestClock(env, message);
  },
};

/** Cron task: enqueue the subscriptions that are due. */
export async function renewalsTask(env: Bindings, scheduledTime: number): Promise<void> {
  await enqueueDueRenewals(env, scheduledTime);
}

/** Cron task: resume test clocks whose advance did not finish (a continuation that died). */
export async function testClocksTask(env: Bindings): Promise<void> {
  await resumeTestClocks(env);
}
