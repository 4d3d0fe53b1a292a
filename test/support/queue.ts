// The job queue and the Cron Trigger driven by hand, and queue stand-ins for a Worker whose
// enqueue is lost or refused. (Queues that record, repeat or lag are in faults.ts.)
import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult } from "cloudflare:test";
import { env } from "./env";
import worker from "../../src/index";
import type { JobMessage } from "../../src/jobs";

let messageCount = 0;

/** Runs job messages through the Worker's queue consumer, as the tender-jobs queue would. */
export async function runJobs(...bodies: JobMessage[]) {
  const batch = createMessageBatch<JobMessage>(
    "tender-jobs",
    bodies.map((body) => ({ id: `job-${++messageCount}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch as MessageBatch, env, ctx);
  return getQueueResult(batch, ctx);
}

/** Runs the Worker's Cron Trigger once, at `scheduledTime`. */
export async function runCron(scheduledTime = Date.now()) {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime, cron: "* * * * *" }), env, ctx);
}

/** A queue whose sends are silently lost, as if the Worker died right after its commit. */
export const droppingQueue = () => ({ send: async () => {}, sendBatch: async () => {} }) as unknown as Queue;

/** A queue that refuses every send. */
export const failingQueue = () =>
  ({
    send: async () => {
      throw new Error("queue unavailable");
    },
    sendBatch: async () => {
      throw new Error("queue unavailable");
    },
  }) as unknown as Queue;
