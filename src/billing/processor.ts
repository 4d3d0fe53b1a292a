// Which processor charges a subscription's card.
import type { Bindings } from "../env";
import { ApiError } from "../lib/errors";
import { processorFor } from "../processor";
import type { Processor } from "../processor/types";

export { processorOfReference as processorForToken } from "../payments/processor-of";

/** The processor for a request's mode; a 400 when that mode has no processor configured. */
export function processorForRequest(env: Bindings, mode: "test" | "live"): Processor {
  try {
    return processorFor(env, mode);
  } catch {
    throw new ApiError(400, "invalid_request_error", "livemode_unavailable", "No card processor is configured for live mode yet; use a test-mode key.");
  }
}
