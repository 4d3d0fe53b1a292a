// Which processor serves a request or a background job. Test mode is the sandbox. The Stripe
// connector (stripe.ts, stripeProcessorFor) serves live mode once an account's processor
// connection holds its key; until that is wired here, a live-mode request gets a clear 400.
import type { Bindings } from "../env";
import { ApiError } from "../lib/errors";
import { isSandboxReference, sandboxProcessor } from "./sandbox";
import type { Processor } from "./types";

/**
 * Tests wrap the sandbox (to count calls, inject a timeout after success, or decline) the same
 * way `useClock` replaces the background clock; production never calls this.
 */
let wrapSandbox: ((processor: Processor) => Processor) | null = null;
export function useProcessor(wrapper?: (processor: Processor) => Processor) {
  wrapSandbox = wrapper ?? null;
}

export function processorFor(_env: Bindings, mode: "test" | "live"): Processor {
  if (mode === "live") throw new Error("No live processor is configured");
  return wrapSandbox ? wrapSandbox(sandboxProcessor) : sandboxProcessor;
}

/** The processor for a request's mode; a 400 when that mode has no processor configured. */
export function processorForRequest(env: Bindings, mode: "test" | "live"): Processor {
  try {
    return processorFor(env, mode);
  } catch {
    throw new ApiError(400, "invalid_request_error", "livemode_unavailable", "No card processor is configured for live mode yet; use a test-mode key.");
  }
}

/**
 * Background work (settlement jobs, renewals) has no request credential to say test or live
 * mode. The processor's own token or charge reference says which processor issued it.
 */
export function processorOfReference(env: Bindings, reference: string): Processor {
  return processorFor(env, isSandboxReference(reference) ? "test" : "live");
}
