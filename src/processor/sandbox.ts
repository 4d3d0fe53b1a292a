// The test-mode processor. The card number decides the outcome, as Stripe's test cards do.
// Its tokens name the behaviour, not the card: nothing here keeps a PAN.
import { randomToken } from "../lib/crypto";
import type { DeclineCode, Outcome, Processor } from "./types";

type Behaviour = "succeed" | DeclineCode | "decline_after_first" | "dispute";

const TEST_CARDS: Record<string, Behaviour> = {
  "4242424242424242": "succeed",
  "5555555555554444": "succeed",
  "4000000000000002": "card_declined",
  "4000000000009995": "insufficient_funds",
  "4000000000000069": "expired_card",
  "4000000000000119": "processing_error",
  "4000000000000341": "decline_after_first",
  // As Stripe's 4000000000000259: the charge succeeds, then its holder disputes it (fraudulent).
  "4000000000000259": "dispute",
};

const DECLINE_MESSAGES: Record<DeclineCode, string> = {
  card_declined: "The card was declined.",
  insufficient_funds: "The card has insufficient funds.",
  expired_card: "The card has expired.",
  processing_error: "An error occurred while processing the card. Try again.",
  // No sandbox card asks for authentication; the code exists for live processors.
  authentication_required: "The card needs its holder to authenticate the payment.",
};

/** Any other valid card number succeeds, as in Stripe's test mode. */
const behaviourOf = (number: string): Behaviour => TEST_CARDS[number] ?? "succeed";

const succeeded = (): Outcome => ({ status: "succeeded", reference: `sbx_${randomToken(24)}` });
const failed = (code: DeclineCode): Outcome => ({ status: "failed", code, message: DECLINE_MESSAGES[code] });

function tokenFor(behaviour: Behaviour) {
  return `tok_sandbox_${behaviour}_${randomToken(16)}`;
}

function behaviourOfToken(token: string): Behaviour {
  const match = /^tok_sandbox_([a-z_]+)_[0-9A-Za-z]{16}$/.exec(token);
  return (match?.[1] as Behaviour | undefined) ?? "processing_error";
}

export const sandboxProcessor: Processor = {
  async chargeCard({ card }) {
    const behaviour = behaviourOf(card.number);
    if (behaviour === "dispute") return { token: tokenFor(behaviour), outcome: { ...succeeded(), disputed: { id: `dp_sandbox_${randomToken(16)}`, reason: "fraudulent" } } };
    const outcome = behaviour === "succeed" || behaviour === "decline_after_first" ? succeeded() : failed(behaviour);
    return { token: tokenFor(behaviour), outcome };
  },
  // An authorization behaves as the charge would: the card number decides whether it is declined.
  async authorizeCard({ card, capture }) {
    const behaviour = behaviourOf(card.number);
    if (behaviour === "succeed" || behaviour === "decline_after_first" || behaviour === "dispute") {
      return { status: "succeeded", reference: `sbx_${randomToken(24)}`, authorized: capture === "manual" };
    }
    return { status: "failed", code: behaviour, message: DECLINE_MESSAGES[behaviour] };
  },
  // Authorizations never lapse at the sandbox; Tender's cron cancels them after 7 days.
  async capturePayment() {
    return succeeded();
  },
  async cancelPayment() {
    return succeeded();
  },
  async chargeToken({ token }) {
    const behaviour = behaviourOfToken(token);
    // The dispute card's holder disputes the first charge only.
    if (behaviour === "succeed" || behaviour === "dispute") return succeeded();
    return failed(behaviour === "decline_after_first" ? "card_declined" : behaviour);
  },
  async tokenizeDestination(card) {
    return tokenFor(behaviourOf(card.number));
  },
  // Vaulting never declines in the sandbox, as tokenizeDestination never did.
  async vaultCard({ card }) {
    const token = tokenFor(behaviourOf(card.number));
    return { token, outcome: { status: "succeeded", reference: token } };
  },
  // Every recipient (or none) can be paid out in test mode: the card number decides the outcome.
  async payoutDestination({ card }) {
    return { payable: true, token: tokenFor(behaviourOf(card.number)) };
  },
  async sendPayout({ token }) {
    const behaviour = behaviourOfToken(token);
    if (behaviour === "succeed" || behaviour === "decline_after_first" || behaviour === "dispute") return succeeded();
    return failed(behaviour);
  },
  async refund() {
    return succeeded();
  },
  // A sandbox payout never fails after it was sent, so there is nothing to bring back.
  async reclaimFailedPayout() {
    return succeeded();
  },
};
