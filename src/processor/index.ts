import type { Bindings } from "../env";
import { sandboxProcessor } from "./sandbox";
import type { Processor } from "./types";

/** The processor for a mode. Only the sandbox exists today; live mode has no connector yet. */
export function processorFor(_env: Bindings, mode: "test" | "live"): Processor {
  if (mode === "live") throw new Error("No live processor is configured");
  return sandboxProcessor;
}
