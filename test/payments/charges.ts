// Payments exist only as charges made for subscriptions; there is no public "create payment"
// endpoint. These tests make them the way billing does: charge() against the sandbox, with a
// card validated by readCard, committed as one batch with commitWrites.
import { env } from "cloudflare:workers";
import { createDb } from "../../src/db/client";
import { readCard } from "../../src/payments/card-input";
import { type ChargeResult, charge } from "../../src/payments/charge";
import { sandboxProcessor } from "../../src/processor/sandbox";
import { commitWrites } from "../../src/webhooks/outbox";
import type { Account } from "../helpers";
import { CARDS, cardFields } from "./support";

export interface ChargeOptions {
  pan?: string;
  cvv?: string;
  amount?: number;
  currency?: string;
  subscriptionId?: string | null;
  /** Charge the vaulted token of an earlier charge instead of a card (a renewal). */
  token?: string;
}

export async function chargeCard(acct: Account, customer: { id: string; email: string } | null, options: ChargeOptions = {}): Promise<ChargeResult> {
  const db = createDb(env.DB);
  const at = Date.now();
  const card = await readCard(env, cardFields(options.pan ?? CARDS.visa, options.cvv ?? "864"), at);
  const result = await charge({
    db,
    processor: sandboxProcessor,
    accountId: acct.id,
    customer,
    subscriptionId: options.subscriptionId ?? null,
    amount: options.amount ?? 4000,
    currency: options.currency ?? "usd",
    source: options.token ? { token: options.token } : { card: card.card },
    summary: card.summary,
    fingerprint: card.fingerprint,
    at,
  });
  await commitWrites({ db, queue: env.DELIVERY_QUEUE }, { statements: result.statements, events: result.events });
  return result;
}
