// The Stripe connector: Tender's Processor on a Stripe account, one instance per processor
// connection. The README's "Live mode with Stripe" gives the map of each call to Stripe's requests.
//
// Idempotency. Every POST carries an Idempotency-Key derived from the Tender reference and the
// step (`<reference>:payment_intent`, `<reference>:transfer`, ...; src/processor/stripe-keys.ts),
// and every object it creates carries the reference in `metadata[tender_reference]`. Stripe
// forgets a key after 24 hours, so a call that may come later first looks the object up:
//  - refunds, transfers and connected-account payouts: always, by a list that Stripe answers at
//    once and exactly (a refund list of the PaymentIntent, transfers of the `transfer_group`,
//    the account's payouts since the transfer). These are background jobs retried by sweeps,
//    possibly days later, and one GET each costs little.
//  - PaymentIntents and SetupIntents: only when the operation's first attempt may be more than
//    23 hours old (`firstAttemptAt` omitted or older). PaymentIntents are found with the Search
//    API, which lags by up to a minute and is rate-limited, so within the 24 hours the key is the
//    guarantee (a lagging search would find nothing anyway) and a renewal run is not slowed down.
// A timeout or a dropped connection is thrown (StripeOutcomeUnknown); the caller retries with the
// same reference and each step is answered as the first time.
import type Stripe from "stripe";
import {
  type StripeClientOptions,
  type StripeConnection,
  StripeRequestRefused,
  isStripeError,
  newStripeClient,
  stripeApiBase,
  stripeRequest,
} from "./stripe-client";
import {
  type ReferenceKeys,
  cardToken,
  customerKey,
  metadataQuery,
  parseCardToken,
  parsePayoutToken,
  payoutToken,
  referenceKeys,
} from "./stripe-keys";
import { declined, intentOutcome, paymentStateOfIntent, payoutOutcome, refundOutcome, refused } from "./stripe-outcomes";
import type { AttachOutcome, AuthorizationOutcome, CardDetails, NotPayableReason, Outcome, PayoutDestination, Processor, ProcessorCustomer, SavedCardDetails, SettlementOutcome } from "./types";

/** Within this age an operation's Idempotency-Keys are surely still known to Stripe (24 h, less an hour). */
export const KEY_TRUSTED_MS = 23 * 60 * 60 * 1000;
/** Reading a PaymentIntent that is still `processing`: this many reads before the outcome is left unknown. */
const PROCESSING_READS = 2;
/** A lookup reads at most this many pages of 100. */
const MAX_LIST_PAGES = 20;

export interface StripeProcessor extends Processor {
  /** `GET /v1/account`: the Stripe account the key belongs to, or `processor_key_invalid`. */
  verifyKey(): Promise<KeyCheck>;
}

/** `livemode`: a live key (`sk_live_`, `rk_live_`); a test key moves no real money. */
export type KeyCheck = { valid: true; account: string; livemode: boolean } | { valid: false; code: "processor_key_invalid"; message: string };

type Intent = Stripe.PaymentIntent | Stripe.SetupIntent;

const idOf = (value: string | { id: string } | null | undefined) => (typeof value === "string" ? value : (value?.id ?? null));

/**
 * Of the intents made for one reference (a declined attempt and, after Stripe forgot its key, a
 * later one), the one that says most: a success wins, so a charge is never made twice.
 */
function preferSettled<T extends Intent>(intents: T[]): T | null {
  return intents.find((i) => i.status === "succeeded" || i.status === "requires_capture") ?? intents.find((i) => i.status === "processing") ?? intents[0] ?? null;
}

/**
 * An object found by its reference must be for the money asked now: the same reference with
 * another amount is a caller's bug, and paying either amount could be wrong, so nothing is done.
 */
function assertSameMoney(found: { id: string; amount: number; currency: string }, amount: number, currency: string): void {
  if (found.amount !== amount || found.currency !== currency.toLowerCase()) {
    throw new Error(`Stripe ${found.id} was made for this reference with ${found.amount} ${found.currency}, not ${amount} ${currency}; nothing was sent`);
  }
}

/** A Stripe error that is an answer about the card (402, or a card error on another status). */
const isCardError = (error: unknown): error is Stripe.errors.StripeCardError => isStripeError(error) && (error.statusCode === 402 || error.rawType === "card_error");
/** Stripe said no to the request itself (400, 404): nothing was made. */
const isRefusal = (error: unknown): error is Stripe.errors.StripeInvalidRequestError =>
  isStripeError(error) && (error.statusCode === 400 || error.statusCode === 404) && error.rawType !== "idempotency_error";

export function createStripeProcessor(connection: StripeConnection, options: StripeClientOptions = {}): StripeProcessor {
  const stripe = newStripeClient(connection, options);
  const now = options.now ?? Date.now;
  const request = <T>(label: string, send: () => Promise<T>) => stripeRequest(label, options, send);
  /** Whether a call may come after Stripe forgot the operation's keys, so it must look first. */
  const mayBeLate = (firstAttemptAt: number | undefined) => firstAttemptAt === undefined || now() - firstAttemptAt > KEY_TRUSTED_MS;

  /** Every item of a Stripe list, page by page, each page one retried request. */
  async function listAll<T extends { id: string }>(label: string, page: (startingAfter: string | undefined) => Promise<Stripe.ApiList<T>>): Promise<T[]> {
    const items: T[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < MAX_LIST_PAGES; pages++) {
      const list = await request(label, () => page(after));
      items.push(...list.data);
      if (!list.has_more || list.data.length === 0) return items;
      after = list.data[list.data.length - 1].id;
    }
    throw new Error(`Stripe ${label}: more than ${MAX_LIST_PAGES} pages`);
  }

  // ---- customers and cards ------------------------------------------------------------------

  /** The one Stripe Customer of a Tender user: found by `metadata[tender_user]`, else created once. */
  async function customerOf(customer: ProcessorCustomer): Promise<string> {
    const found = await request("GET /v1/customers/search", () =>
      stripe.customers.search({ query: metadataQuery("tender_user", customer.id), limit: 1 }),
    );
    if (found.data[0]) return found.data[0].id;
    const key = await customerKey(customer);
    const created = await request("POST /v1/customers", () =>
      stripe.customers.create({ ...(customer.email ? { email: customer.email } : {}), metadata: { tender_user: customer.id } }, { idempotencyKey: key }),
    );
    return created.id;
  }

  /**
   * The card becomes a PaymentMethod (raw card data: needs Stripe's raw card data access), or the
   * decline Stripe answered: an incorrect number, expiry or CVC is a card error on the
   * PaymentMethod itself. Anything else Stripe refuses is thrown.
   */
  async function paymentMethodOf(card: CardDetails, keys: ReferenceKeys): Promise<{ method: string; declined?: undefined } | { declined: Outcome & { status: "failed" } }> {
    try {
      const method = await request("POST /v1/payment_methods", () =>
        stripe.paymentMethods.create(
          {
            type: "card",
            card: { number: card.number, exp_month: card.expMonth, exp_year: card.expYear, cvc: card.cvv },
            metadata: { tender_reference: keys.tag },
          },
          { idempotencyKey: keys.key("payment_method") },
        ),
      );
      return { method: method.id };
    } catch (error) {
      if (isCardError(error)) return { declined: declined(error) };
      throw refusedOrRethrown("POST /v1/payment_methods", error);
    }
  }

  async function findPaymentIntent(keys: ReferenceKeys): Promise<Stripe.PaymentIntent | null> {
    const found = await request("GET /v1/payment_intents/search", () =>
      stripe.paymentIntents.search({ query: metadataQuery("tender_reference", keys.tag), limit: 10 }),
    );
    return preferSettled(found.data.filter((intent) => intent.metadata?.tender_reference === keys.tag));
  }

  /** An intent's outcome; one still `processing` is read again, and left unknown if it stays so. */
  async function settledOutcome(intent: Intent): Promise<Outcome> {
    let current = intent;
    for (let read = 0; ; read++) {
      const outcome = intentOutcome(current);
      if (outcome !== "processing") return outcome;
      if (read >= PROCESSING_READS || current.object !== "payment_intent") {
        throw new Error(`Stripe ${current.id} is still processing; the outcome is not known yet`);
      }
      const id = current.id;
      current = await request("GET /v1/payment_intents/{intent}", () => stripe.paymentIntents.retrieve(id));
    }
  }

  /** Creates (or replays) a confirmed PaymentIntent; a decline is an answer, not an error. */
  async function confirmPayment(params: Stripe.PaymentIntentCreateParams, keys: ReferenceKeys): Promise<{ intent: Stripe.PaymentIntent | null; outcome: Outcome }> {
    try {
      const intent = await request("POST /v1/payment_intents", () =>
        stripe.paymentIntents.create(params, { idempotencyKey: keys.key("payment_intent") }),
      );
      return { intent, outcome: await settledOutcome(intent) };
    } catch (error) {
      if (isCardError(error)) return { intent: (error.payment_intent as Stripe.PaymentIntent | undefined) ?? null, outcome: declined(error) };
      // Refused before anything was charged (an amount below Stripe's minimum, a customer or
      // card deleted at Stripe): the payment failed, with Stripe's reason.
      if (isRefusal(error)) return { intent: null, outcome: refused("payment", error) };
      throw refusedOrRethrown("POST /v1/payment_intents", error);
    }
  }

  /** A card token from a succeeded intent: its customer and payment method. */
  const tokenOf = (intent: Intent | null, outcome: Outcome): string | null => {
    if (outcome.status !== "succeeded" || !intent) return null;
    const customer = idOf(intent.customer);
    const method = idOf(intent.payment_method);
    return customer && method ? cardToken(customer, method) : null;
  };

  // ---- payouts ------------------------------------------------------------------------------

  async function findTransfer(account: string, keys: ReferenceKeys): Promise<Stripe.Transfer | null> {
    const transfers = await listAll("GET /v1/transfers", (starting_after) =>
      stripe.transfers.list({ transfer_group: keys.tag, destination: account, limit: 100, ...(starting_after ? { starting_after } : {}) }),
    );
    return transfers.find((transfer) => transfer.metadata?.tender_reference === keys.tag) ?? null;
  }

  /** The account's payout for this reference: among its payouts since the transfer was made (ours follows it). */
  async function findPayout(account: string, keys: ReferenceKeys, since: number): Promise<Stripe.Payout | null> {
    const payouts = await listAll("GET /v1/payouts", (starting_after) =>
      stripe.payouts.list({ created: { gte: since }, limit: 100, ...(starting_after ? { starting_after } : {}) }, { stripeAccount: account }),
    );
    return payouts.find((payout) => payout.metadata?.tender_reference === keys.tag) ?? null;
  }

  /** Reverses what is left of a transfer: the recipient's account gives the money back. */
  async function reverse(transfer: Stripe.Transfer, keys: ReferenceKeys): Promise<Outcome> {
    if (transfer.amount_reversed >= transfer.amount) return { status: "succeeded", reference: transfer.reversals?.data?.[0]?.id ?? transfer.id };
    try {
      const reversal = await request("POST /v1/transfers/{id}/reversals", () =>
        stripe.transfers.createReversal(transfer.id, { metadata: { tender_reference: keys.tag } }, { idempotencyKey: keys.key("reversal") }),
      );
      return { status: "succeeded", reference: reversal.id };
    } catch (error) {
      if (isRefusal(error)) return refused("transfer reversal", error);
      throw error;
    }
  }

  /** A saved card's token and what a response may show of it, or why it is no card. */
  function savedCardOf(stripeCustomer: string, method: Stripe.PaymentMethod): { token: string; card: SavedCardDetails } | { invalid: string } {
    if (method.type !== "card" || !method.card) return { invalid: `Stripe PaymentMethod ${method.id} is a ${method.type}, not a card: Tender takes cards only.` };
    const card = method.card;
    return {
      token: cardToken(stripeCustomer, method.id),
      card: { brand: card.brand, last4: card.last4, expMonth: card.exp_month, expYear: card.exp_year, fingerprintSource: `stripe:${card.fingerprint ?? method.id}` },
    };
  }

  /**
   * A SetupIntent (`seti_…`) the holder confirmed with Stripe.js on the user's Customer (a setup
   * checkout session's 3-D Secure, or a merchant's own page): its card is saved once it succeeded.
   * Nothing is sent: it is read (`GET /v1/setup_intents/{intent}`, its PaymentMethod expanded).
   */
  async function setUpAlready(setupIntent: string, customer: ProcessorCustomer): Promise<AttachOutcome> {
    const stripeCustomer = await customerOf(customer);
    let intent: Stripe.SetupIntent;
    try {
      intent = await request("GET /v1/setup_intents/{intent}", () => stripe.setupIntents.retrieve(setupIntent, { expand: ["payment_method"] }));
    } catch (error) {
      if (isRefusal(error)) return { status: "invalid", message: `Stripe has no SetupIntent ${setupIntent}.` };
      throw error;
    }
    const method = intent.payment_method;
    if (idOf(intent.customer) !== stripeCustomer || !method || typeof method === "string") {
      return { status: "invalid", message: `Stripe SetupIntent ${setupIntent} sets up no card for this user's Customer.` };
    }
    const saved = savedCardOf(stripeCustomer, method);
    if ("invalid" in saved) return { status: "invalid", message: saved.invalid };
    if (intent.status === "requires_action") return { status: "requires_action", reference: intent.id, clientSecret: intent.client_secret ?? null, ...saved };
    const outcome = intentOutcome(intent);
    if (outcome === "processing") throw new Error(`Stripe ${intent.id} is still processing; the outcome is not known yet`);
    if (outcome.status === "failed") return outcome;
    return { status: "attached", ...saved };
  }

  function notPayable(reason: NotPayableReason, message: string): PayoutDestination {
    return { payable: false, code: "recipient_not_payable", reason, message };
  }

  const processor: StripeProcessor = {
    async verifyKey() {
      try {
        const account = await request("GET /v1/account", () => stripe.accounts.retrieveCurrent());
        return { valid: true, account: account.id, livemode: /^(sk|rk)_live_/.test(connection.secretKey) };
      } catch (error) {
        if (isStripeError(error) && error.statusCode === 401) {
          return { valid: false, code: "processor_key_invalid", message: "Stripe refused this secret key (401)." };
        }
        if (isStripeError(error) && error.statusCode === 403) {
          return {
            valid: false,
            code: "processor_key_invalid",
            message: "Stripe does not let this key read its account (403): use a secret key, or a restricted key with the permissions Tender needs.",
          };
        }
        throw error;
      }
    },

    async chargeCard({ card, amount, currency, reference, customer, firstAttemptAt }) {
      if (!customer) throw new Error("The Stripe connector keeps cards on the Tender user's customer: chargeCard needs the customer");
      const keys = await referenceKeys(reference);
      if (mayBeLate(firstAttemptAt)) {
        const earlier = await findPaymentIntent(keys);
        if (earlier) {
          assertSameMoney(earlier, amount, currency);
          const outcome = await settledOutcome(earlier);
          return { token: tokenOf(earlier, outcome), outcome };
        }
      }
      const stripeCustomer = await customerOf(customer);
      const made = await paymentMethodOf(card, keys);
      if (made.declined) return { token: null, outcome: made.declined };
      const { method } = made;
      const { intent, outcome } = await confirmPayment(
        {
          amount,
          currency,
          customer: stripeCustomer,
          payment_method: method,
          // A card needs no redirect, and there is no page to return to.
          automatic_payment_methods: { enabled: true, allow_redirects: "never" },
          confirm: true,
          // Kept on the customer once the charge succeeds, for renewals without the holder.
          setup_future_usage: "off_session",
          // Tender has no session with the holder to authenticate in: fail instead of waiting.
          error_on_requires_action: true,
          metadata: { tender_reference: keys.tag, tender_user: customer.id },
        },
        keys,
      );
      return { token: tokenOf(intent, outcome) ?? (outcome.status === "succeeded" ? cardToken(stripeCustomer, method) : null), outcome };
    },

    async chargeToken({ token, amount, currency, reference, firstAttemptAt, customerPresent }) {
      const { customer, paymentMethod } = parseCardToken(token);
      const keys = await referenceKeys(reference);
      if (mayBeLate(firstAttemptAt)) {
        const earlier = await findPaymentIntent(keys);
        if (earlier) {
          assertSameMoney(earlier, amount, currency);
          return settledOutcome(earlier);
        }
      }
      const { outcome } = await confirmPayment(
        {
          amount,
          currency,
          customer,
          payment_method: paymentMethod,
          automatic_payment_methods: { enabled: true, allow_redirects: "never" },
          confirm: true,
          // A saved card's first charge is made while its holder pays (on-session), and sets the
          // card up for the renewals; renewals are off-session.
          ...(customerPresent ? { setup_future_usage: "off_session" as const, error_on_requires_action: true } : { off_session: true }),
          metadata: { tender_reference: keys.tag },
        },
        keys,
      );
      return outcome;
    },

    async vaultCard({ card, customer, reference, firstAttemptAt }) {
      const keys = await referenceKeys(reference);
      const stripeCustomer = await customerOf(customer);
      if (mayBeLate(firstAttemptAt)) {
        const intents = await listAll("GET /v1/setup_intents", (starting_after) =>
          stripe.setupIntents.list({ customer: stripeCustomer, limit: 100, ...(starting_after ? { starting_after } : {}) }),
        );
        const earlier = preferSettled(intents.filter((intent) => intent.metadata?.tender_reference === keys.tag));
        if (earlier) {
          const outcome = await settledOutcome(earlier);
          return { token: tokenOf(earlier, outcome), outcome };
        }
      }
      const made = await paymentMethodOf(card, keys);
      if (made.declined) return { token: null, outcome: made.declined };
      const { method } = made;
      try {
        const intent = await request("POST /v1/setup_intents", () =>
          stripe.setupIntents.create(
            {
              customer: stripeCustomer,
              payment_method: method,
              automatic_payment_methods: { enabled: true, allow_redirects: "never" },
              confirm: true,
              usage: "off_session",
              metadata: { tender_reference: keys.tag, tender_user: customer.id },
            },
            { idempotencyKey: keys.key("setup_intent") },
          ),
        );
        const outcome = await settledOutcome(intent);
        return { token: tokenOf(intent, outcome) ?? (outcome.status === "succeeded" ? cardToken(stripeCustomer, method) : null), outcome };
      } catch (error) {
        if (isCardError(error)) return { token: null, outcome: declined(error) };
        throw refusedOrRethrown("POST /v1/setup_intents", error);
      }
    },

    async attachPaymentMethod({ processorToken, customer, reference, setup, checkoutSession }): Promise<AttachOutcome> {
      if (/^seti_[A-Za-z0-9]{1,200}$/.test(processorToken)) return setUpAlready(processorToken, customer);
      if (!/^pm_[A-Za-z0-9]{1,200}$/.test(processorToken)) {
        return { status: "invalid", message: "Live mode takes a Stripe PaymentMethod id (pm_…), made by Stripe.js (or the Payment Element) with the connection's publishable key." };
      }
      const keys = await referenceKeys(reference);
      const stripeCustomer = await customerOf(customer);
      let method: Stripe.PaymentMethod;
      try {
        method = await request("POST /v1/payment_methods/{payment_method}/attach", () =>
          stripe.paymentMethods.attach(processorToken, { customer: stripeCustomer }, { idempotencyKey: keys.key("attach") }),
        );
      } catch (error) {
        if (isCardError(error)) return declined(error);
        // No such PaymentMethod on this Stripe account, or one already another customer's.
        if (isRefusal(error)) return { status: "invalid", message: `Stripe refused PaymentMethod ${processorToken}: ${error.message}` };
        throw refusedOrRethrown("POST /v1/payment_methods/{payment_method}/attach", error);
      }
      const saved = savedCardOf(stripeCustomer, method);
      if ("invalid" in saved) return { status: "invalid", message: saved.invalid };
      if (!setup) return { status: "attached", ...saved };
      // Set up for charges made without the holder (Stripe's recommended way to save a card): a
      // SetupIntent confirmed at once, under the same reference. Its bank may decline it, or ask
      // the holder to authenticate (requires_action: the holder's to finish, with Stripe.js).
      let intent: Stripe.SetupIntent;
      try {
        intent = await request("POST /v1/setup_intents", () =>
          stripe.setupIntents.create(
            {
              customer: stripeCustomer,
              payment_method: method.id,
              automatic_payment_methods: { enabled: true, allow_redirects: "never" },
              confirm: true,
              usage: "off_session",
              metadata: { tender_reference: keys.tag, tender_user: customer.id, ...(checkoutSession ? { tender_checkout_session: checkoutSession } : {}) },
            },
            { idempotencyKey: keys.key("setup_intent") },
          ),
        );
      } catch (error) {
        if (isCardError(error)) return declined(error);
        throw refusedOrRethrown("POST /v1/setup_intents", error);
      }
      if (intent.status === "requires_action") return { status: "requires_action", reference: intent.id, clientSecret: intent.client_secret ?? null, ...saved };
      const outcome = intentOutcome(intent);
      if (outcome === "processing") throw new Error(`Stripe ${intent.id} is still processing; the outcome is not known yet`);
      if (outcome.status === "failed") return outcome;
      return { status: "attached", ...saved };
    },

    async detachPaymentMethod({ token, reference }) {
      const { paymentMethod } = parseCardToken(token);
      const keys = await referenceKeys(reference);
      try {
        await request("POST /v1/payment_methods/{payment_method}/detach", () => stripe.paymentMethods.detach(paymentMethod, {}, { idempotencyKey: keys.key("detach") }));
      } catch (error) {
        // Detached already (or gone): what was asked is so.
        if (isRefusal(error)) return;
        throw error;
      }
    },

    async payoutDestination({ card, currency, recipient }) {
      if (!recipient) return notPayable("no_recipient", "A live payout needs a recipient_id: a user linked to a Stripe connected account.");
      const accountId = recipient.processorAccount;
      if (!accountId) return notPayable("no_processor_account", `User ${recipient.id} is not linked to a Stripe connected account, so it cannot be paid out.`);
      let account: Stripe.Account;
      try {
        account = await request("GET /v1/accounts/{account}", () => stripe.accounts.retrieve(accountId));
      } catch (error) {
        if (isStripeError(error) && (error.statusCode === 404 || error.statusCode === 403 || error.statusCode === 400)) {
          return notPayable("account_not_found", `Stripe account ${accountId} of user ${recipient.id} is not a connected account of this platform.`);
        }
        throw error;
      }
      if (account.capabilities?.transfers !== "active") {
        return notPayable("transfers_inactive", `Stripe account ${accountId} cannot receive transfers yet (its transfers capability is ${account.capabilities?.transfers ?? "not requested"}).`);
      }
      if (!account.payouts_enabled) return notPayable("payouts_disabled", `Stripe account ${accountId} has payouts disabled.`);
      const last4 = card.number.slice(-4);
      const externals = await listAll("GET /v1/accounts/{account}/external_accounts", (starting_after) =>
        stripe.accounts.listExternalAccounts(accountId, { limit: 100, ...(starting_after ? { starting_after } : {}) }),
      );
      const cards = externals.filter((external): external is Stripe.Card => external.object === "card");
      const match = cards
        .filter((c) => c.last4 === last4 && c.exp_month === card.expMonth && c.exp_year === card.expYear && c.currency === currency && c.funding !== "credit")
        .sort((a, b) => Number(b.default_for_currency ?? false) - Number(a.default_for_currency ?? false))[0];
      if (!match) {
        return notPayable(
          "no_matching_debit_card",
          `Stripe account ${accountId} has no debit card ending ${last4} (${String(card.expMonth).padStart(2, "0")}/${card.expYear}) for ${currency.toUpperCase()} payouts.`,
        );
      }
      return { payable: true, token: payoutToken(accountId, match.id) };
    },

    // A one-off payment: a PaymentIntent on the user's Customer, confirmed at once, captured now
    // (automatic) or held (manual: Stripe's requires_capture), then captured or canceled.
    async authorizeCard({ card, token, amount, currency, reference, capture, customer, onSession, keepCard, firstAttemptAt }) {
      if (!customer) throw new Error("The Stripe connector keeps cards on the Tender user's customer: authorizeCard needs the customer");
      const keys = await referenceKeys(reference);
      // A kept card's reusable token: the saved card's, or the intent's customer and PaymentMethod.
      const keptToken = (intent: Intent | null): { token?: string | null } => {
        if (!keepCard) return {};
        if (token !== undefined) return { token };
        const owner = intent ? idOf(intent.customer) : null;
        const pm = intent ? idOf(intent.payment_method) : null;
        return { token: owner && pm ? cardToken(owner, pm) : null };
      };
      const authorization = (intent: Intent | null, outcome: Outcome): AuthorizationOutcome => {
        // On session, Stripe's requires_action is the payer's to finish (the 3-D Secure page runs
        // Stripe.js handleNextAction with the client secret); off session it stays a failure.
        if (onSession && intent?.object === "payment_intent" && intent.status === "requires_action") {
          return { status: "requires_action", reference: intent.id, clientSecret: (intent as Stripe.PaymentIntent).client_secret ?? null, ...keptToken(intent) };
        }
        return outcome.status === "succeeded" ? { status: "succeeded", reference: outcome.reference, authorized: intent?.status === "requires_capture", ...keptToken(intent) } : outcome;
      };
      if (mayBeLate(firstAttemptAt)) {
        const earlier = await findPaymentIntent(keys);
        if (earlier) {
          assertSameMoney(earlier, amount, currency);
          return authorization(earlier, await settledOutcome(earlier));
        }
      }
      // A saved card is already its customer's; card fields become a PaymentMethod on the user's.
      let stripeCustomer: string;
      let method: string;
      if (token !== undefined) {
        ({ customer: stripeCustomer, paymentMethod: method } = parseCardToken(token));
      } else {
        stripeCustomer = await customerOf(customer);
        const made = await paymentMethodOf(card, keys);
        if (made.declined) return made.declined;
        method = made.method;
      }
      const { intent, outcome } = await confirmPayment(
        {
          amount,
          currency,
          customer: stripeCustomer,
          payment_method: method,
          automatic_payment_methods: { enabled: true, allow_redirects: "never" },
          confirm: true,
          capture_method: capture,
          // On session the payer is sent to authenticate (3-D Secure); off session nobody could be.
          ...(onSession ? {} : { error_on_requires_action: true }),
          // A subscription's first charge keeps the card for its renewals, made without the payer.
          ...(keepCard ? { setup_future_usage: "off_session" as const } : {}),
          metadata: { tender_reference: keys.tag, tender_user: customer.id },
        },
        keys,
      );
      return authorization(intent, outcome);
    },

    async paymentStateOf({ chargeReference }) {
      const intent = await request("GET /v1/payment_intents/{intent}", () => stripe.paymentIntents.retrieve(chargeReference));
      return paymentStateOfIntent(intent);
    },

    async capturePayment({ chargeReference, amount, reference }) {
      const keys = await referenceKeys(reference);
      try {
        const intent = await request("POST /v1/payment_intents/{intent}/capture", () =>
          stripe.paymentIntents.capture(chargeReference, { amount_to_capture: amount }, { idempotencyKey: keys.key("capture") }),
        );
        const outcome = intentOutcome(intent) as Outcome;
        // What Stripe captured (a replay of the first capture answers its amount), not what was asked.
        return outcome.status === "succeeded" ? { status: "succeeded", reference: outcome.reference, amountReceived: intent.amount_received } : outcome;
      } catch (error) {
        // Captured already (a retry after Stripe forgot the key): the intent says so, and how much.
        if (isStripeError(error) && error.code === "payment_intent_unexpected_state") {
          const intent = await request("GET /v1/payment_intents/{intent}", () => stripe.paymentIntents.retrieve(chargeReference));
          if (intent.status === "succeeded") return { status: "succeeded", reference: intent.id, amountReceived: intent.amount_received };
          return refused("capture", error);
        }
        if (isRefusal(error)) return refused("capture", error);
        throw error;
      }
    },

    async cancelPayment({ chargeReference, reference }) {
      const keys = await referenceKeys(reference);
      try {
        const intent = await request("POST /v1/payment_intents/{intent}/cancel", () =>
          stripe.paymentIntents.cancel(chargeReference, {}, { idempotencyKey: keys.key("cancel") }),
        );
        return intent.status === "canceled" ? { status: "succeeded", reference: intent.id } : refused("cancel", { message: `the PaymentIntent is ${intent.status}` });
      } catch (error) {
        if (isStripeError(error) && error.code === "payment_intent_unexpected_state") {
          const intent = await request("GET /v1/payment_intents/{intent}", () => stripe.paymentIntents.retrieve(chargeReference));
          if (intent.status === "canceled") return { status: "succeeded", reference: intent.id };
          // Captured already (a capture whose answer was lost): refused, saying how much Stripe holds.
          if (intent.status === "succeeded") return { ...refused("cancel", error), capturedAmount: intent.amount_received };
          return refused("cancel", error);
        }
        if (isRefusal(error)) return refused("cancel", error);
        throw error;
      }
    },

    async tokenizeDestination() {
      throw new Error("The Stripe connector needs a customer or a recipient to vault a card: call vaultCard or payoutDestination");
    },

    async sendPayout({ token, amount, currency, reference }): Promise<SettlementOutcome> {
      const { account, card } = parsePayoutToken(token);
      const keys = await referenceKeys(reference);
      // 1. The money moves from the platform to the recipient's connected account.
      let transfer = await findTransfer(account, keys);
      if (transfer) assertSameMoney(transfer, amount, currency);
      if (!transfer) {
        try {
          transfer = await request("POST /v1/transfers", () =>
            stripe.transfers.create(
              { amount, currency, destination: account, transfer_group: keys.tag, metadata: { tender_reference: keys.tag } },
              { idempotencyKey: keys.key("transfer") },
            ),
          );
        } catch (error) {
          if (isRefusal(error)) {
            return refused("transfer to the recipient's account", error, error.code === "balance_insufficient" ? "insufficient_funds" : "processing_error");
          }
          throw error;
        }
      }
      // A transfer already taken back (a payout refused or failed earlier) is not paid out again.
      if (transfer.reversed || transfer.amount_reversed >= transfer.amount) {
        return { status: "failed", code: "processing_error", message: `The payout failed earlier and its transfer ${transfer.id} was reversed.` };
      }
      // 2. The connected account pays it out to its debit card.
      const transferred = transfer;
      let payout = await findPayout(account, keys, transferred.created);
      if (!payout) {
        try {
          payout = await request("POST /v1/payouts", () =>
            stripe.payouts.create(
              { amount, currency, destination: card, method: "standard", metadata: { tender_reference: keys.tag } },
              { idempotencyKey: keys.key("payout"), stripeAccount: account },
            ),
          );
        } catch (error) {
          if (!isRefusal(error) && !isCardError(error)) throw error;
          // Refused: the money goes back to the platform, then the payout is failed.
          const back = await reverse(transferred, keys);
          if (back.status !== "succeeded") throw new Error(`Stripe refused payout ${reference} and its transfer ${transferred.id} could not be reversed: ${back.message}`);
          return refused("payout to the recipient's card", error, error.code === "insufficient_funds" ? "insufficient_funds" : "card_declined");
        }
      }
      const outcome = payoutOutcome(payout);
      if (outcome.status === "failed") {
        const back = await reverse(transferred, keys);
        if (back.status !== "succeeded") throw new Error(`Stripe payout ${payout.id} failed and its transfer ${transferred.id} could not be reversed: ${back.message}`);
      }
      return outcome;
    },

    async reclaimFailedPayout({ token, reference }) {
      const { account } = parsePayoutToken(token);
      const keys = await referenceKeys(reference);
      const transfer = await findTransfer(account, keys);
      // No transfer: nothing left the platform.
      if (!transfer) return { status: "succeeded", reference: keys.tag };
      return reverse(transfer, keys);
    },

    async refund({ chargeReference, amount, currency, reference }) {
      const keys = await referenceKeys(reference);
      const refunds = await listAll("GET /v1/refunds", (starting_after) =>
        stripe.refunds.list({ payment_intent: chargeReference, limit: 100, ...(starting_after ? { starting_after } : {}) }),
      );
      const earlier = refunds.find((made) => made.metadata?.tender_reference === keys.tag);
      if (earlier) {
        assertSameMoney(earlier, amount, currency);
        return refundOutcome(earlier);
      }
      try {
        const made = await request("POST /v1/refunds", () =>
          stripe.refunds.create({ payment_intent: chargeReference, amount, metadata: { tender_reference: keys.tag } }, { idempotencyKey: keys.key("refund") }),
        );
        return refundOutcome(made);
      } catch (error) {
        if (isRefusal(error)) return refused("refund", error);
        throw error;
      }
    },
  };
  return processor;
}

/** A 400 that is not a decline is a request Tender should never make: say so, do not retry. */
function refusedOrRethrown(label: string, error: unknown): unknown {
  if (isStripeError(error) && (error.statusCode === 400 || error.statusCode === 401 || error.statusCode === 403 || error.statusCode === 404)) {
    return new StripeRequestRefused(label, error);
  }
  return error;
}

/** `GET /v1/account` with a key about to be stored: the account id, or `processor_key_invalid`. */
export function verifyStripeKey(connection: StripeConnection, options: StripeClientOptions = {}): Promise<KeyCheck> {
  return createStripeProcessor(connection, options).verifyKey();
}

/**
 * The connector for a connection's secret key, pointed at `STRIPE_API_BASE` in development only
 * (stripeApiBase): what the routes and jobs call once they have read the connection.
 */
export function stripeProcessorFor(env: { ENVIRONMENT: string; STRIPE_API_BASE?: string }, secretKey: string, options: StripeClientOptions = {}): StripeProcessor {
  return createStripeProcessor({ secretKey, apiBase: stripeApiBase(env) }, options);
}
