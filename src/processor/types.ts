// The card processor, as Tender sees it. Routes and billing talk only to this interface, so a
// live connector can replace the sandbox without touching them. Card numbers and CVVs are
// passed through to the processor and never kept: the processor returns a reusable token.

/**
 * Why a charge (or a payout, or a refund) failed. `authentication_required`: the card needs its
 * holder to authenticate (3D Secure, Stripe's `requires_action`), which Tender, holding no
 * session with the holder, cannot ask for; no money moved. A renewal counts it as a failed
 * attempt (dunning), a first charge answers 402 with it as the `decline_code`.
 */
export type DeclineCode = "card_declined" | "insufficient_funds" | "expired_card" | "processing_error" | "authentication_required";

export type Outcome =
  | {
      status: "succeeded";
      reference: string;
      /**
       * The charge was disputed at once: the sandbox's dispute card (test mode's stand-in for a
       * processor's dispute event, which live mode receives later by webhook).
       */
      disputed?: { id: string; reason: string };
    }
  | { status: "failed"; code: DeclineCode; message: string };

/**
 * What capturePayment answers: a success says how much the processor holds as captured, which
 * is what Tender records (a capture retried under the payment's fixed reference with another
 * amount, after the first one's answer was lost, is answered with the first capture's amount).
 */
export type CaptureOutcome = { status: "succeeded"; reference: string; amountReceived: number } | { status: "failed"; code: DeclineCode; message: string };

/**
 * What cancelPayment answers. A refusal because the payment was captured already (a capture whose
 * answer was lost) says how much the processor holds as captured, so the cron can record it.
 */
export type CancelOutcome = { status: "succeeded"; reference: string } | { status: "failed"; code: DeclineCode; message: string; capturedAmount?: number };

/**
 * What authorizeCard answers: a charge's outcome, where a success may be an authorization only; or,
 * for an on-session payment only (`onSession`), `requires_action`: the card asks its holder to
 * authenticate (3-D Secure) before anything moves. `reference` is the processor's intent (Stripe's
 * `pi_…`), `clientSecret` what Stripe.js needs to run the challenge (null in the sandbox); it is
 * never stored: a page asks for it again (paymentStateOf).
 */
export type AuthorizationOutcome =
  | { status: "succeeded"; reference: string; authorized: boolean; token?: string | null }
  | { status: "failed"; code: DeclineCode; message: string }
  | { status: "requires_action"; reference: string; clientSecret: string | null; token?: string | null };

/**
 * Where a payment that asked for authentication stands at the processor, read there (never taken
 * from a browser): still `requires_action` (with the client secret Stripe.js needs), `succeeded`
 * (captured, or only authorized for a manual capture), `failed` (the authentication failed or the
 * card was then declined), `canceled`, or `processing` (not decided yet: look again later).
 */
export type PaymentState =
  | { status: "requires_action"; clientSecret: string | null }
  | { status: "succeeded"; authorized: boolean; amount: number; amountReceived: number; currency: string }
  | { status: "failed"; code: DeclineCode | "authentication_failed"; message: string }
  | { status: "canceled" }
  | { status: "processing" };

/**
 * Payouts and refunds may be accepted by the processor without having settled yet (a Stripe
 * payout is `pending` or `in_transit` until its `payout.paid` event): `pending` carries the
 * processor's reference, and the settlement arrives later as a ProcessorSettlement.
 */
export type SettlementOutcome = Outcome | { status: "pending"; reference: string };

export interface CardDetails {
  number: string;
  expMonth: number;
  expYear: number;
  cvv: string;
}

/** What a saved card shows, as the processor read it: never the number. */
export interface SavedCardDetails {
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
  /**
   * Identifies the card number without holding it, for Tender's keyed fingerprint: the test card's
   * number in the sandbox, Stripe's own card fingerprint in live mode (prefixed `stripe:`).
   */
  fingerprintSource: string;
}

/**
 * What attaching a processor token answered: the card is the customer's now (`token` charges it);
 * or the token names no card this processor account can attach (`invalid`: 400
 * processor_token_invalid); or the card's bank refused it (`failed`: 402).
 */
export type AttachOutcome =
  | { status: "attached"; token: string; card: SavedCardDetails }
  /** Set up asked for: the card's bank asks its holder to authenticate (3-D Secure) first; `reference` is the SetupIntent. */
  | { status: "requires_action"; reference: string; clientSecret: string | null; token: string; card: SavedCardDetails }
  | { status: "invalid"; message: string }
  | { status: "failed"; code: DeclineCode; message: string };

/** The Tender user a card belongs to: a live processor keeps one customer per user. */
export interface ProcessorCustomer {
  id: string;
  email: string | null;
}

/**
 * The Tender user a payout is for. In live mode a user can be paid out once it is linked to an
 * account at the processor (for Stripe, a Connect connected account `acct_…`).
 */
export interface PayoutRecipient {
  id: string;
  processorAccount: string | null;
}

/** Why a recipient cannot be paid out (the route answers 400 `recipient_not_payable`). */
export type NotPayableReason =
  | "no_recipient"
  | "no_processor_account"
  | "account_not_found"
  | "transfers_inactive"
  | "payouts_disabled"
  | "no_matching_debit_card";

export type PayoutDestination =
  | { payable: true; token: string }
  | { payable: false; code: "recipient_not_payable"; reason: NotPayableReason; message: string };

/**
 * Optional on every money-moving call: a time no later than the first time this `reference` was
 * sent to the processor (ms since the epoch), e.g. the payout's or refund's `created_at`. Stripe
 * forgets an Idempotency-Key after 24 hours; a call whose reference may be older than that looks
 * the object up first. Omitted, the connector assumes it may be.
 */
export interface FirstAttempt {
  firstAttemptAt?: number;
}

/**
 * Every call carries a `reference`: the processor's idempotency key. Background work is
 * at-least-once (a redelivered settlement message, a renewal claim taken over after a crash), so
 * a connector must treat a second call with the same reference as the first one and return its
 * outcome, never move money twice. Tender derives references that stay fixed across retries: the
 * payout id, the refund id, (subscription, period, attempt) for renewals, and (account,
 * Idempotency-Key) for first charges.
 *
 * A call that throws has an unknown outcome (a timeout, a dropped connection): the money may have
 * moved. The caller calls again with the same reference, which the processor answers as the same
 * operation. Declines and refusals are answered, never thrown.
 */
export interface Processor {
  /**
   * Vaults the card and charges it. The token charges the same card later, without the PAN (null
   * when nothing was vaulted, e.g. a declined card). `customer` is the Tender user the card is
   * for: a live processor keeps the card on that user's customer, so renewals can charge it.
   */
  chargeCard(args: { card: CardDetails; amount: number; currency: string; reference: string; customer?: ProcessorCustomer | null } & FirstAttempt): Promise<{ token: string | null; outcome: Outcome }>;
  /**
   * A one-off payment (src/payments/intents.ts): charges the card (the card fields, or `token`, a
   * saved card's as attachPaymentMethod or vaultCard made it), or with `capture: "manual"`
   * only authorizes it (Stripe: a PaymentIntent with `capture_method: manual`, then
   * `requires_capture`), which `authorized: true` on the outcome says. Idempotent by reference.
   */
  authorizeCard(
    args: ({ card: CardDetails; token?: undefined } | { token: string; card?: undefined }) & {
      amount: number;
      currency: string;
      reference: string;
      capture: "automatic" | "manual";
      customer?: ProcessorCustomer | null;
      /**
       * The payer is there (POST /payments): a card that asks for 3-D Secure answers
       * `requires_action` instead of failing authentication_required. Off-session work never sets it.
       */
      onSession?: boolean;
      /**
       * The card is kept for later off-session charges (a subscription's first charge: Stripe's
       * setup_future_usage off_session), and an outcome of card fields carries its reusable `token`.
       */
      keepCard?: boolean;
    } & FirstAttempt,
  ): Promise<AuthorizationOutcome>;
  /**
   * Where a payment that answered `requires_action` stands now (`chargeReference`: that outcome's
   * reference), read at the processor. The sandbox has no state of its own (its challenge page
   * decides) and answers `requires_action`.
   */
  paymentStateOf(args: { chargeReference: string }): Promise<PaymentState>;
  /**
   * Captures `amount` (at most what was authorized) of an authorization made by authorizeCard
   * (`chargeReference` is its outcome's reference) and releases the rest. Idempotent by reference.
   */
  capturePayment(args: { chargeReference: string; amount: number; reference: string } & FirstAttempt): Promise<CaptureOutcome>;
  /** Releases an uncaptured authorization. Idempotent by reference. */
  cancelPayment(args: { chargeReference: string; reference: string } & FirstAttempt): Promise<CancelOutcome>;
  /**
   * Charges a vaulted card, as renewals do (off-session: the holder is not there). `customerPresent`:
   * the holder is paying now (a first charge with a saved card), so the charge is on-session and
   * sets the card up for later off-session charges.
   */
  chargeToken(args: { token: string; amount: number; currency: string; reference: string; customerPresent?: boolean } & FirstAttempt): Promise<Outcome>;
  /**
   * Makes a card tokenized elsewhere (Stripe.js's PaymentMethod `pm_…`; in the sandbox, Stripe's
   * test PaymentMethod names such as `pm_card_visa`) the customer's, for later charges. Idempotent
   * by reference. Moves no money.
   */
  attachPaymentMethod(args: {
    processorToken: string;
    customer: ProcessorCustomer;
    reference: string;
    /** Also set the card up for charges made without its holder (Stripe: a SetupIntent, usage off_session). */
    setup?: boolean;
    /** The setup checkout session it is saved for: kept on the SetupIntent (metadata tender_checkout_session). */
    checkoutSession?: string;
  }): Promise<AttachOutcome>;
  /** Takes a saved card off its customer: it can be charged no more. Idempotent (detaching a detached card is done). */
  detachPaymentMethod(args: { token: string; reference: string }): Promise<void>;
  /**
   * Vaults a card for later charges without charging it (new card details on an active
   * subscription). A live processor validates the card with its bank, which may decline it.
   */
  vaultCard(args: { card: CardDetails; customer: ProcessorCustomer; reference: string } & FirstAttempt): Promise<{ token: string | null; outcome: Outcome }>;
  /**
   * Where a payout to `recipient` goes: a token for sendPayout, or why the recipient cannot be
   * paid out. The card is the one the payout request names; it must belong to the recipient.
   */
  payoutDestination(args: { card: CardDetails; currency: string; recipient: PayoutRecipient | null }): Promise<PayoutDestination>;
  /**
   * Vaults a card as it is, with no customer and no recipient: what test mode does for card
   * updates and payout destinations. A live connector cannot, and throws: call vaultCard or
   * payoutDestination instead.
   * @deprecated for new call sites; kept while the routes still call it.
   */
  tokenizeDestination(card: CardDetails): Promise<string>;
  sendPayout(args: { token: string; amount: number; currency: string; reference: string } & FirstAttempt): Promise<SettlementOutcome>;
  /**
   * Brings back the money of a payout that failed after it was sent (its `payout.failed` event):
   * for Stripe, the transfer to the recipient's account is reversed. Idempotent by reference.
   */
  reclaimFailedPayout(args: { token: string; reference: string }): Promise<Outcome>;
  refund(args: { chargeReference: string; amount: number; currency: string; reference: string } & FirstAttempt): Promise<SettlementOutcome>;
}

/**
 * What a processor's own webhook event settles, in Tender's terms: the route finds Tender's
 * object by `reference` (the payout or refund id Tender passed as the call's reference) or, for a
 * dispute, by `chargeReference` (the payment's processor reference), and applies the outcome once
 * (by `eventId`), in any order. `ignore` changes nothing.
 */
/** What a payout event says its payout is: checked against Tender's while Tender has not recorded its id. */
export interface PayoutNamed {
  /** Minor units, or null when the event does not say. */
  amount: number | null;
  currency: string | null;
  /** The card (Stripe: `card_…`) it pays, or null. */
  destination: string | null;
}

export type ProcessorSettlement =
  | (SettlementEvent & PayoutNamed & { kind: "payout"; reference: string; processorObject: string; outcome: "paid" })
  | (SettlementEvent & PayoutNamed & { kind: "payout"; reference: string; processorObject: string; outcome: "failed"; code: DeclineCode; message: string })
  | (SettlementEvent & { kind: "refund"; reference: string; processorObject: string; outcome: "succeeded" })
  | (SettlementEvent & { kind: "refund"; reference: string; processorObject: string; outcome: "failed"; message: string })
  | (SettlementEvent & {
      kind: "dispute";
      chargeReference: string;
      processorObject: string;
      amount: number;
      currency: string;
      reason: string;
      status: string;
    })
  | (SettlementEvent & {
      kind: "setup_intent";
      /** The SetupIntent (`seti_…`) that succeeded, and the setup checkout session and Tender user its metadata names. */
      processorObject: string;
      checkoutSession: string;
      user: string;
    })
  | (SettlementEvent & {
      kind: "payment_intent";
      /** The PaymentIntent (`pi_…`): the processor reference of the payment that asked for authentication. */
      chargeReference: string;
      processorObject: string;
      /** Where the PaymentIntent stands, as the event's copy of it says. */
      state: PaymentState;
    })
  | (SettlementEvent & { kind: "ignore"; reason: string });

export interface SettlementEvent {
  /** The processor's event id: apply each once. */
  eventId: string;
  /** The processor's event type, e.g. `payout.paid`. */
  type: string;
  /** When the processor created the event (ms): later events about one object win. */
  occurredAt: number;
  /** The processor account the event is about (Stripe: the connected account, for payouts). */
  account: string | null;
  /** The event's own mode (Stripe's `livemode`): a test-mode event never settles what a live key made, nor the reverse. */
  livemode: boolean;
}
