// The client under test, pointed at the Worker in this isolate (no network): its fetch is the
// Worker's own fetch handler, as a service binding would be.
import { exports } from "cloudflare:workers";
import { Tender, type TenderOptions } from "@tender/client";
import { BASE } from "../support/http";

/** Calls the Worker; also records every request the client sent, and its answer's status. */
export function workerFetch() {
  const sent: { method: string; url: string; headers: Headers; status: number }[] = [];
  const fetch = async (request: Request) => {
    const copy = { method: request.method, url: request.url, headers: new Headers(request.headers), status: 0 };
    sent.push(copy);
    const response = await exports.default.fetch(request);
    copy.status = response.status;
    return response;
  };
  return { fetch, sent };
}

/** A client for `apiKey` against the Worker, with instant retries (the waits are recorded). */
export function tenderFor(apiKey: string, options: Partial<TenderOptions> = {}) {
  const { fetch, sent } = workerFetch();
  const sleeps: number[] = [];
  const tender = new Tender({
    apiKey,
    baseUrl: BASE,
    fetch,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...options,
  });
  return { tender, sent, sleeps };
}
