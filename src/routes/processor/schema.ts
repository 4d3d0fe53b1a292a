import { z } from "@hono/zod-openapi";
import type { ConnectionRow } from "../../processor/connections";
import { bodyObject, booleanField, closedSet, timestamp } from "../shared";

const SECRET_KEY = "secret_key must be a Stripe secret key (sk_live_…, or a restricted key rk_live_…) of your Stripe account.";
const WEBHOOK_SECRET = "webhook_secret must be the signing secret (whsec_…) of the Stripe webhook endpoint that sends to webhook_url.";
const PUBLISHABLE_KEY = "publishable_key must be your Stripe account's publishable key: pk_live_… (pk_test_… with a Stripe test key, in development).";
const CONNECT_WEBHOOK_SECRET = "connect_webhook_secret must be the signing secret (whsec_…) of the Stripe Connect webhook endpoint that sends to webhook_url.";

const signingSecret = (message: string) =>
  z.string({ error: message }).regex(/^whsec_[0-9A-Za-z+/=_-]{8,200}$/, { error: message });

export const ConnectProcessorBody = bodyObject({
  provider: closedSet("provider", ["stripe"]).openapi({ description: "The processor: stripe.", example: "stripe" }),
  secret_key: z
    .string({ error: SECRET_KEY })
    .regex(/^(sk|rk)_(live|test)_[0-9A-Za-z]{8,240}$/, { error: SECRET_KEY })
    .openapi({
      description:
        "Your Stripe account's secret key. Checked with Stripe (GET /v1/account) before it is stored; stored encrypted, never answered (only its last 4 characters). Outside development it must be a live key.",
      example: "sk_live_51Nv0FGQ9RKHgCVdK…",
    }),
  webhook_secret: signingSecret(WEBHOOK_SECRET).openapi({
    description:
      "The signing secret of the Stripe webhook endpoint you create for webhook_url (events of your own account: refunds, disputes). Stored encrypted, never answered.",
    example: "whsec_…",
  }),
  connect_webhook_secret: signingSecret(CONNECT_WEBHOOK_SECRET)
    .optional()
    .openapi({
      description:
        "The signing secret of a second Stripe endpoint for webhook_url, created with 'Listen to events on Connected accounts': Stripe sends payout.paid and payout.failed, which happen on your recipients' connected accounts, only there, signed with that endpoint's own secret. Needed for live payouts to settle; stored encrypted, never answered.",
      example: "whsec_…",
    }),
  publishable_key: z
    .string({ error: PUBLISHABLE_KEY })
    .regex(/^pk_(live|test)_[0-9A-Za-z]{8,240}$/, { error: PUBLISHABLE_KEY })
    .optional()
    .openapi({
      description:
        "Your Stripe account's publishable key, of the same mode as secret_key: what the hosted pages and your own page's Stripe.js use to turn a card into a PaymentMethod, so card numbers never reach Tender. Not a secret: answered back. Omitted on a replacement, the connection keeps its own.",
      example: "pk_live_51Nv0FGQ9RKHgCVdKa2b3c4d5",
    }),
  raw_card_data: booleanField("raw_card_data")
    .optional()
    .openapi({
      description:
        "true only if Stripe granted your account raw card data access (and you accept PCI DSS SAQ D): then the card fields (card_number, …) work in live mode as in test mode. false (the default for a new connection): live mode takes saved payment methods (payment_method: \"pmt_…\") and answers card fields with 400 raw_card_data_unavailable. Omitted on a replacement, the connection keeps its own; connections made before this field existed are true.",
      example: false,
    }),
}).openapi("ConnectProcessorRequest");

export const ProcessorConnectionSchema = z
  .object({
    object: z.literal("processor_connection"),
    provider: z.literal("stripe"),
    livemode: z.literal(true).openapi({ description: "A connection serves live mode only; test mode always uses the sandbox." }),
    processor_account: z.string().openapi({ description: "The Stripe account the key belongs to.", example: "acct_1Nv0FGQ9RKHgCVdK" }),
    secret_key_last4: z.string().openapi({ description: "The last 4 characters of the connected secret key.", example: "x4Zq" }),
    webhook_url: z.string().openapi({
      description: "Where Stripe must send its events for this account: create a webhook endpoint (and a Connect one, for payouts) with this URL.",
      example: "https://tender.example.com/processor-webhooks/stripe/acct_01jd2x4k5m6n7p8q9r0s1t2v3w",
    }),
    publishable_key: z.string().nullable().openapi({ description: "The Stripe publishable key the hosted pages and Stripe.js use, or null when none was given.", example: "pk_live_51Nv0FGQ9RKHgCVdKa2b3c4d5" }),
    raw_card_data: z.boolean().openapi({ description: "Whether live mode takes card numbers (the card fields) on this connection; see the request's raw_card_data." }),
    created_at: timestamp("When the account was first connected."),
  })
  .openapi("ProcessorConnection");

export const DeletedProcessorConnectionSchema = z
  .object({
    object: z.literal("processor_connection"),
    provider: z.literal("stripe"),
    livemode: z.literal(true),
    processor_account: z.string(),
    deleted: z.literal(true),
  })
  .openapi("DeletedProcessorConnection");

export const webhookUrlOf = (origin: string, accountId: string) => `${origin}/processor-webhooks/stripe/${accountId}`;

export function serializeConnection(row: ConnectionRow, origin: string): z.infer<typeof ProcessorConnectionSchema> {
  return {
    object: "processor_connection",
    provider: row.provider,
    livemode: true,
    processor_account: row.processorAccount,
    secret_key_last4: row.secretKeyLast4,
    webhook_url: webhookUrlOf(origin, row.accountId),
    publishable_key: row.publishableKey ?? null,
    raw_card_data: row.rawCardData,
    created_at: row.createdAt,
  };
}
