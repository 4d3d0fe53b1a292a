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

/** The query that marks a 3-D Secure page opened from its invoice's hosted page. */
export const FROM_INVOICE = { name: "from", value: "invoice" } as const;

/**
 * The 3-D Secure page as an invoice's hosted page links it (an incomplete subscription's first
 * payment, continued there): `?from=invoice` sends its payer back to that payment's own invoice
 * page once the payment is decided, not to the merchant's return_url (src/pages/authenticate.tsx).
 */
export function challengeFromInvoice(challengeUrl: string): string {
  const url = new URL(challengeUrl);
  url.searchParams.set(FROM_INVOICE.name, FROM_INVOICE.value);
  return url.toString();
}

/** The page secret of a stored hosted page URL (its last path segment), or undefined for none. */
export const pageSecretOf = (url: string | null | undefined): string | undefined => url?.slice(url.lastIndexOf("/") + 1);
