// Which processor handles a subscription's card. Resources carry no mode of their own, so a
// renewal picks the processor that issued the vaulted token.
import type { Bindings } from "../env";
import { ApiError } from "../lib/errors";
import { processorFor } from "../processor";
import type { Processor } from "../processor/types";

const SANDBOX_TOKEN = /^tok_sandbox_/;

/** The processor for a request's mode; a 400 when that mode has no processor configured. */
export function processorForRequest(env: Bindings, mode: "test" | "live"): Processor {
  try {
    return processorFor(env, mode);
  } catch {
    throw new ApiError(400, "invalid_request_error", "livemode_unavailable", "No card processor is configured for live mode yet; use a test-mode key.");
  }
}

export const processorForToken = (env: Bindings, token: string): Processor =>
  processorFor(env, SANDBOX_TOKEN.test(token) ? "test" : "live");
