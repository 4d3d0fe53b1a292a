// How a Tender processor reference becomes Stripe's Idempotency-Keys and the `tender_reference`
// metadata that finds the object again, and how Tender's tokens name Stripe objects. Pure.
//
// One Tender operation may make several Stripe POSTs (a payout: a transfer, then a payout): each
// gets its own key, `<reference>:<step>`, fixed for that step, so a retry of the operation repeats
// each step with the key it had. Stripe keys are at most 255 characters and metadata values 500;
// a longer reference (a first charge's carries the caller's own Idempotency-Key) is replaced by
// its SHA-256, as is one holding a quote or backslash, which Stripe's search syntax would need
// escaped.

/** Where a money-moving Stripe request stands within its Tender operation. */
export type StripeStep =
  | "customer"
  | "payment_method"
  | "attach"
  | "detach"
  | "payment_intent"
  | "setup_intent"
  | "refund"
  | "transfer"
  | "payout"
  | "reversal";

const STRIPE_KEY_MAX = 255;
const SAFE_TAG = /^[\x21-\x7e]{1,200}$/;
const UNSAFE_IN_SEARCH = /['"\\]/;

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

export interface ReferenceKeys {
  /** The value written into `metadata[tender_reference]` (and a transfer's `transfer_group`). */
  tag: string;
  /** The Idempotency-Key of one step of the operation. */
  key(step: StripeStep): string;
}

/** The metadata tag and the per-step Idempotency-Keys of a Tender processor reference. */
export async function referenceKeys(reference: string): Promise<ReferenceKeys> {
  const tag = SAFE_TAG.test(reference) && !UNSAFE_IN_SEARCH.test(reference) ? reference : `sha256_${await sha256Hex(reference)}`;
  return {
    tag,
    key(step) {
      const key = `${tag}:${step}`;
      if (key.length > STRIPE_KEY_MAX) throw new Error(`Idempotency-Key longer than ${STRIPE_KEY_MAX} characters`);
      return key;
    },
  };
}

/**
 * The Idempotency-Key of the one customer kept per Tender user. It is not an operation's: two
 * first charges of one user made before Stripe's search has indexed the customer (about a
 * minute) create it once. The e-mail is part of the key because Stripe refuses a key replayed
 * with other parameters: a changed e-mail is a new key (at worst a second customer, which
 * nothing depends on: each card token names its own customer).
 */
export async function customerKey(customer: { id: string; email: string | null }): Promise<string> {
  return `customer:${customer.id}:${(await sha256Hex(customer.email ?? "")).slice(0, 16)}`;
}

/** Search query values are quoted with single quotes; the tags above never hold one. */
export const metadataQuery = (field: string, value: string) => {
  if (UNSAFE_IN_SEARCH.test(value)) throw new Error(`A search value may not hold quotes or backslashes: ${field}`);
  return `metadata['${field}']:'${value}'`;
};

// Tokens Tender keeps. Stripe ids are [A-Za-z0-9_]; the colons separate them.
const CARD_TOKEN = /^stripe:(cus_[A-Za-z0-9]+):(pm_[A-Za-z0-9]+)$/;
const PAYOUT_TOKEN = /^stripe:(acct_[A-Za-z0-9]+):(card_[A-Za-z0-9]+)$/;

/** A vaulted card: the Stripe Customer and its PaymentMethod. Never card data. */
export const cardToken = (customer: string, paymentMethod: string) => `stripe:${customer}:${paymentMethod}`;
/** A payout destination: the recipient's connected account and its debit card external account. */
export const payoutToken = (account: string, card: string) => `stripe:${account}:${card}`;

export function parseCardToken(token: string): { customer: string; paymentMethod: string } {
  const match = CARD_TOKEN.exec(token);
  if (!match) throw new Error("Not a Stripe card token (stripe:cus_…:pm_…)");
  return { customer: match[1], paymentMethod: match[2] };
}

export function parsePayoutToken(token: string): { account: string; card: string } {
  const match = PAYOUT_TOKEN.exec(token);
  if (!match) throw new Error("Not a Stripe payout token (stripe:acct_…:card_…)");
  return { account: match[1], card: match[2] };
}
