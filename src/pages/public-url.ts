// The origin payers reach this Tender at, for the hosted pages' URLs that are written without a
// request to take the origin from: an invoice's hosted_invoice_url, made by a renewal the cron ran
// as well as by a request. PUBLIC_URL sets it (wrangler.toml; `npm run dev` sets it to its own
// address). Unset, such URLs are null rather than guessed.
import type { RuntimeBindings } from "../env";

/** PUBLIC_URL as an origin without a trailing slash, or null when it is unset or not an http(s) URL. */
export function publicUrl(env: Pick<RuntimeBindings, "PUBLIC_URL">): string | null {
  const value = env.PUBLIC_URL?.trim();
  if (!value) return null;
  try {
    const url = new URL(value);
    if (url.protocol !== "https:" && url.protocol !== "http:") return null;
    return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
  } catch {
    return null;
  }
}
