import { DurableObject } from "cloudflare:workers";
import type { Bindings } from "../env";

/** One per webhook endpoint: keeps the endpoint's due retries and wakes for the earliest. */
export class WebhookRetryScheduler extends DurableObject<Bindings> {}
