// How a hosted page is reached: its path, and the unguessable secret in its URL. Billing and
// payments code makes these links (an invoice's hosted_invoice_url is written with the invoice);
// the pages (src/pages/*.tsx) check them.
import { randomToken, timingSafeEqual } from "../lib/crypto";

/** An invoice's hosted page: `${PUBLIC_URL}/pay/invoices/<invoice id>/<secret>`. */
export const HOSTED_INVOICE_PATH = "/pay/invoices";

/** A page's secret: 40 base62 characters (~238 bits). */
export const newPageSecret = () => randomToken(40);

/** Whether the secret in a URL is the object's; constant time, and false for anything missing. */
export function pageSecretMatches(stored: string | null | undefined, given: string | null | undefined): boolean {
  if (!stored || !given) return false;
  return timingSafeEqual(stored, given);
}
