// The card processor, as Tender sees it. Routes and billing talk only to this interface, so a
// live connector can replace the sandbox without touching them. Card numbers and CVVs are
// passed through to the processor and never kept: the processor returns a reusable token.

export type DeclineCode = "card_declined" | "insufficient_funds" | "expired_card" | "processing_error";

export type Outcome =
  | { status: "succeeded"; reference: string }
  | { status: "failed"; code: DeclineCode; message: string };

export interface CardDetails {
  number: string;
  expMonth: number;
  expYear: number;
  cvv: string;
}

/**
 * Every call carries a `reference`: the processor's idempotency key. Background work is
 * at-least-once (a redelivered settlement message, a renewal claim taken over after a crash), so
 * a connector must treat a second call with the same reference as the first one and return its
 * outcome, never move money twice. Tender derives references that stay fixed across retries: the
 * payout id, the refund id, (subscription, period, attempt) for renewals, and (account,
 * Idempotency-Key) for first charges.
 */
export interface Processor {
  /** Vaults the card and charges it. The token charges the same card later, without the PAN. */
  chargeCard(args: { card: CardDetails; amount: number; currency: string; reference: string }): Promise<{ token: string; outcome: Outcome }>;
  /** Charges a vaulted card, as renewals do. */
  chargeToken(args: { token: string; amount: number; currency: string; reference: string }): Promise<Outcome>;
  /** Vaults a payout destination card; the payout itself settles later through sendPayout. */
  tokenizeDestination(card: CardDetails): Promise<string>;
  sendPayout(args: { token: string; amount: number; currency: string; reference: string }): Promise<Outcome>;
  refund(args: { chargeReference: string; amount: number; currency: string; reference: string }): Promise<Outcome>;
}
