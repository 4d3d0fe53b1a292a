// The test-mode processor. The card number decides the outcome, as Stripe's test cards do.
// Its tokens name the behaviour, not the card: nothing here keeps a PAN.
import { detectBrand } from "../domain/cards";
import { randomToken } from "../lib/crypto";
import type { DeclineCode, Outcome, Processor } from "./types";

// authentication_required: 3-D Secure on every charge (Stripe's 4000 0027 6000 3184);
// authentication_required_3ds2: the same, with a 3-D Secure 2 challenge (4000 0000 0000 3220);
// authentication_on_setup: 3-D Secure on the first on-session charge, then off-session charges
// succeed (4000 0025 0000 3155). An on-session one-off payment (POST /payments) answers
// requires_action and the sandbox challenge page (src/pages/authenticate.tsx) decides; any other
// charge fails authentication_required, as a live card asking for authentication off session does.
type Behaviour = "succeed" | DeclineCode | "decline_after_first" | "dispute" | "authentication_required_3ds2" | "authentication_on_setup";

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
  "4000002760003184": "authentication_required",
  "4000000000003220": "authentication_required_3ds2",
  "4000002500003155": "authentication_on_setup",
};

/**
 * Stripe's test PaymentMethods, as test mode's processor tokens: each behaves as its test card
 * number does, so code written against test mode runs unchanged against Stripe.js in live mode.
 */
export const TEST_PAYMENT_METHODS: Record<string, string> = {
  pm_card_visa: "4242424242424242",
  pm_card_mastercard: "5555555555554444",
  pm_card_chargeDeclined: "4000000000000002",
  pm_card_chargeDeclinedInsufficientFunds: "4000000000009995",
  pm_card_authenticationRequired: "4000002760003184",
  pm_card_threeDSecure2Required: "4000000000003220",
  pm_card_authenticationRequiredOnSetup: "4000002500003155",
};

const DECLINE_MESSAGES: Record<DeclineCode, string> = {
  card_declined: "The card was declined.",
  insufficient_funds: "The card has insufficient funds.",
  expired_card: "The card has expired.",
  processing_error: "An error occurred while processing the card. Try again.",
  authentication_required: "The card needs its holder to authenticate the payment.",
};

/** Any other valid card number succeeds, as in Stripe's test mode. */
const behaviourOf = (number: string): Behaviour => TEST_CARDS[number] ?? "succeed";

const succeeded = (): Outcome => ({ status: "succeeded", reference: `sbx_${randomToken(24)}` });
const failed = (code: DeclineCode): Outcome => ({ status: "failed", code, message: DECLINE_MESSAGES[code] });
/** A behaviour that fails every charge, as the code it fails with. */
const failureOf = (behaviour: Exclude<Behaviour, "succeed" | "decline_after_first" | "dispute">): DeclineCode =>
  behaviour === "authentication_required_3ds2" || behaviour === "authentication_on_setup" ? "authentication_required" : behaviour;

/** Whether a card with this behaviour asks its holder for 3-D Secure on an on-session charge. */
const asksAuthentication = (behaviour: Behaviour) => behaviour.startsWith("authentication_");

function tokenFor(behaviour: Behaviour) {
  return `tok_sandbox_${behaviour}_${randomToken(16)}`;
}

function behaviourOfToken(token: string): Behaviour {
  const match = /^tok_sandbox_([a-z0-9_]+)_[0-9A-Za-z]{16}$/.exec(token);
  return (match?.[1] as Behaviour | undefined) ?? "processing_error";
}

export const sandboxProcessor: Processor = {
  async chargeCard({ card }) {
    const behaviour = behaviourOf(card.number);
    if (behaviour === "dispute") return { token: tokenFor(behaviour), outcome: { ...succeeded(), disputed: { id: `dp_sandbox_${randomToken(16)}`, reason: "fraudulent" } } };
    const outcome = behaviour === "succeed" || behaviour === "decline_after_first" ? succeeded() : failed(failureOf(behaviour));
    return { token: tokenFor(behaviour), outcome };
  },
  // An authorization behaves as the charge would: the card number decides whether it is declined.
  async authorizeCard({ card, token, capture, onSession, keepCard }) {
    const behaviour = card ? behaviourOf(card.number) : behaviourOfToken(token);
    // A kept card's reusable token: the given one, or one vaulted from the card fields.
    const kept = keepCard ? { token: token ?? tokenFor(behaviour) } : {};
    if (onSession && asksAuthentication(behaviour)) return { status: "requires_action", reference: `sbx_${randomToken(24)}`, clientSecret: null, ...kept };
    if (behaviour === "succeed" || behaviour === "decline_after_first" || behaviour === "dispute") {
      return { status: "succeeded", reference: `sbx_${randomToken(24)}`, authorized: capture === "manual", ...kept };
    }
    const code = failureOf(behaviour);
    return { status: "failed", code, message: DECLINE_MESSAGES[code] };
  },
  // Authorizations never lapse at the sandbox; Tender's cron cancels them after 7 days.
  async capturePayment({ amount }) {
    return { ...succeeded(), amountReceived: amount };
  },
  async cancelPayment() {
    return succeeded();
  },
  // The sandbox's payments that ask for authentication are decided by its challenge page.
  async paymentStateOf() {
    return { status: "requires_action", clientSecret: null };
  },
  async chargeToken({ token, customerPresent }) {
    const behaviour = behaviourOfToken(token);
    // The dispute card's holder disputes the first charge only.
    if (behaviour === "succeed" || behaviour === "dispute") return succeeded();
    // Set up once with its holder, the card is charged off session without asking again.
    if (behaviour === "authentication_on_setup" && !customerPresent) return succeeded();
    return failed(behaviour === "decline_after_first" ? "card_declined" : failureOf(behaviour));
  },
  // A test PaymentMethod name attaches as its card: a later expiry than any test needs, as Stripe's do.
  async attachPaymentMethod({ processorToken }) {
    const number = Object.hasOwn(TEST_PAYMENT_METHODS, processorToken) ? TEST_PAYMENT_METHODS[processorToken] : undefined;
    if (!number) {
      return {
        status: "invalid",
        message: `Test mode takes Stripe's test PaymentMethods as processor_token: ${Object.keys(TEST_PAYMENT_METHODS).join(", ")}.`,
      };
    }
    const expYear = new Date().getUTCFullYear() + 3;
    return {
      status: "attached",
      token: tokenFor(behaviourOf(number)),
      card: { brand: detectBrand(number), last4: number.slice(-4), expMonth: 12, expYear, fingerprintSource: number },
    };
  },
  async detachPaymentMethod() {},
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
    // 3-D Secure guards charges, not payouts to the card.
    if (behaviour === "succeed" || behaviour === "decline_after_first" || behaviour === "dispute" || asksAuthentication(behaviour)) return succeeded();
    return failed(failureOf(behaviour as Parameters<typeof failureOf>[0]));
  },
  async refund() {
    return succeeded();
  },
  // A sandbox payout never fails after it was sent, so there is nothing to bring back.
  async reclaimFailedPayout() {
    return succeeded();
  },
};
