// Background work (settlement jobs, sweeps) has no request credential to say test or live mode.
// The processor's own token or charge reference says which processor issued it, so the job asks
// that one: sandbox tokens start `tok_sandbox_`, sandbox charge references `sbx_`.
import type { Bindings } from "../env";
import { processorFor } from "../processor";
import type { Processor } from "../processor/types";

export function modeOfProcessorReference(reference: string): "test" | "live" {
  return reference.startsWith("tok_sandbox_") || reference.startsWith("sbx_") ? "test" : "live";
}

export const processorOfReference = (env: Bindings, reference: string): Processor =>
  processorFor(env, modeOfProcessorReference(reference));
