// The billing kinds of the job queue (registered in src/jobs/index.ts) and the cron task.
import type { Bindings } from "../env";
import { continueTestClock, enqueueDueRenewals, renewChunk, type RenewalJobMessage, type TestClockJobMessage } from "./renewals";

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
