import { z } from "@hono/zod-openapi";
import { listQuery } from "../pagination";
import { MetadataField } from "../payments/schema";
import { AmountField, CurrencyField } from "../../payments/money-input";
import { bodyObject, closedSet, closedSetFilter, idField, livemodeField, timestamp } from "../shared";

export const CHECKOUT_MODES = ["payment", "subscription", "setup"] as const;
export const CHECKOUT_STATUSES = ["open", "complete", "expired"] as const;

const URL_MESSAGE = (field: string) => `${field} must be an http(s) URL of at most 2048 characters (http only for localhost or 127.0.0.1 in development).`;
const urlField = (field: string) => z.string({ error: URL_MESSAGE(field) }).max(2048, { error: URL_MESSAGE(field) });

export const CheckoutSessionSchema = z
  .object({
    id: z.string().openapi({ example: "cs_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("checkout_session"),
    url: z.string().nullable().openapi({ description: "The hosted page to send the payer to (no API key: its secret is in the URL). Null once the session is complete or expired.", example: "https://tender.example.com/pay/checkout/cs_01jd2x4k5m6n7p8q9r0s1t2v3w/7rQ…" }),
    status: z.enum(CHECKOUT_STATUSES).openapi({ description: "open: waiting for the payer; complete: paid (or the card saved, in setup mode); expired: unused at expires_at." }),
    mode: z.enum(CHECKOUT_MODES).openapi({ description: "payment: a one-off payment of amount; subscription: a subscription to plan_id; setup: only a saved card." }),
    livemode: livemodeField,
    user_id: z.string().openapi({ description: "The paying user." }),
    amount: z.number().int().nullable().openapi({ description: "payment mode: what is charged, in the currency's smallest unit; null otherwise.", example: 1999 }),
    currency: z.string().nullable().openapi({ description: "payment mode: the amount's currency; subscription mode: the plan's; null in setup mode.", example: "usd" }),
    plan_id: z.string().nullable().openapi({ description: "subscription mode: the plan subscribed to; null otherwise." }),
    metadata: z.record(z.string(), z.string()).openapi({ description: "Your key-value pairs ({} when none)." }),
    expires_at: timestamp("When an unused session expires: 24 hours after it was made."),
    payment_id: z.string().nullable().openapi({ description: "The payment it made (payment mode, and a subscription's first charge), once complete." }),
    subscription_id: z.string().nullable().openapi({ description: "subscription mode: the subscription it made, once complete." }),
    payment_method_id: z.string().nullable().openapi({ description: "The card saved for the user (pmt_…), once complete." }),
    success_url: z.string().openapi({ description: "Where the payer goes once it is complete; {CHECKOUT_SESSION_ID} in it is replaced by the session's id." }),
    cancel_url: z.string().openapi({ description: "Where the page's cancel link goes." }),
    created_at: timestamp("When the session was made."),
    completed_at: z.string().nullable().openapi({ description: "When it was completed." }),
  })
  .openapi("CheckoutSession");

export const CreateCheckoutSessionBody = bodyObject({
  mode: closedSet("mode", CHECKOUT_MODES).openapi({ description: "payment (amount and currency), subscription (plan_id) or setup (save a card only).", example: "payment" }),
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").openapi({ description: "The paying user, of this account and mode." }),
  plan_id: idField("plan_id", "a plan", "plan_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "subscription mode only: the plan, of this account and mode." }),
  amount: AmountField.optional().openapi({ description: "payment mode only: an integer in the currency's smallest unit.", example: 1999 }),
  currency: CurrencyField.optional().openapi({ description: "payment mode only: an ISO 4217 code.", example: "usd" }),
  success_url: urlField("success_url").openapi({ description: "Where the payer goes once paid; {CHECKOUT_SESSION_ID} is replaced by the session's id.", example: "https://shop.example.com/thanks?session={CHECKOUT_SESSION_ID}" }),
  cancel_url: urlField("cancel_url").openapi({ description: "Where the page's cancel link goes.", example: "https://shop.example.com/cart" }),
  metadata: MetadataField.optional(),
}).openapi("CheckoutSessionRequest");

export const CheckoutSessionListQuery = listQuery.extend({
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only this user's sessions." }),
  status: closedSetFilter("status", CHECKOUT_STATUSES, "Only sessions in this status."),
});
