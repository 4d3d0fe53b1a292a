import { DefaultTaxRatesField } from "../../billing/tax";
import { z } from "@hono/zod-openapi";
import { subscriptions } from "../../db/schema";
import { PaymentSchema } from "../payments/schema";
import { CardFields, CardSummarySchema, OptionalCardFields } from "../../payments/card-input";
import { MAX_TRIAL_DAYS } from "../../domain/trials";
import { PRORATION_BEHAVIORS } from "../../domain/proration";
import { bodyObject, booleanField, closedSet, closedSetFilter, idField, livemodeField, queryObject, timestamp, wholeNumber } from "../shared";
import { RETURN_URL } from "../payments/schema";

const quantity = wholeNumber("quantity", 1, 1_000_000).openapi({ description: "Units subscribed to: tiered plans price by it; a fixed plan charges its price times the quantity.", example: 1 });
const userId = idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w");
const planId = idField("plan_id", "a plan", "plan_01jd2x4k5m6n7p8q9r0s1t2v3w");
const couponField = idField("coupon", "a coupon", "SUMMER20").openapi({
  description: "A coupon's id: its discount applies to the subscription's invoices from now (the first one included, on create), for the coupon's duration.",
});

export const CreateSubscriptionBody = bodyObject({
  user_id: userId,
  plan_id: planId,
  quantity: quantity.default(1),
  coupon: couponField.optional(),
  default_tax_rates: DefaultTaxRatesField.optional().openapi({ description: "Tax rates (txr_…) its invoices carry instead of the plan's default_tax_rates (an empty list: none). Each line's tax is taken after its discount and rounded once." }),
  trial_period_days: wholeNumber("trial_period_days", 0, MAX_TRIAL_DAYS)
    .optional()
    .openapi({ description: "Days of free trial (0 for none), instead of the plan's trial_period_days. The card is vaulted, not charged; the first period is charged when the trial ends.", example: 14 }),
  trial_end: z
    .string({ error: "trial_end must be a future date and time in ISO 8601, such as 2027-01-31T00:00:00Z." })
    .max(40)
    .optional()
    .openapi({ description: "When the trial ends (ISO 8601, on the user's test clock if it has one), instead of trial_period_days: at most 730 days away.", example: "2027-01-31T00:00:00Z" }),
  // payment_method "card" with the card fields, or a saved card's id ("pmt_…") alone.
  ...OptionalCardFields,
  payment_method: CardFields.payment_method,
  return_url: z
    .string({ error: RETURN_URL })
    .max(2048, { error: RETURN_URL })
    .optional()
    .openapi({
      description:
        "Where the payer lands (with ?payment_id=…) after 3-D Secure, when the first charge asks for it (the subscription is then incomplete): an https URL (http://localhost in development).",
      example: "https://shop.example/subscribed",
    }),
}).openapi("SubscriptionRequest");

export const UpdateSubscriptionBody = bodyObject({
  ...OptionalCardFields,
  plan_id: planId.optional().openapi({ description: "A plan with the same currency and interval. On an active subscription it applies now, prorated as proration_behavior says; it prices every period after." }),
  quantity: quantity.optional().openapi({ description: "Applies now, prorated as proration_behavior says, and prices every period after." }),
  proration_behavior: closedSet("proration_behavior", PRORATION_BEHAVIORS)
    .optional()
    .openapi({
      description:
        "How a change of plan_id or quantity on an active subscription is billed. create_prorations (the default): a credit for the unused time of what the current period was charged and a charge for the time left at the new price, as lines of the next invoice (seconds left over the period's seconds, each line rounded once). always_invoice: those lines, with any already pending, are invoiced and charged at once, and the change is made only if that invoice is paid (a decline answers 402 and changes nothing; an invoice of nothing or a credit is paid at once, the credit to the user's balance as a credit note). none: the new price from the next period, nothing prorated. A trialing or past_due subscription's change is never prorated.",
    }),
  at_period_end: booleanField("at_period_end")
    .optional()
    .openapi({
      description:
        "true schedules the plan_id and quantity sent for the next period, with no proration: the subscription keeps its plan until then, and pending_update shows the change. A later change of plan_id or quantity replaces it.",
    }),
  cancel_at_period_end: booleanField("cancel_at_period_end").optional().openapi({ description: "true cancels when the current period ends, after a final invoice of what the period still owes (metered usage, pending prorations), if anything; false undoes that, except while that final invoice is open (400 final_invoice_open)." }),
  coupon: couponField
    .nullable()
    .optional()
    .openapi({ description: "A coupon's id: its discount replaces any other from now, starting with the next invoice. null removes the discount." }),
  default_tax_rates: DefaultTaxRatesField.nullable()
    .optional()
    .openapi({ description: "Replaces the subscription's tax rates from the next invoice (an empty list: none); null goes back to the plan's. Issued invoices keep theirs." }),
}).openapi("SubscriptionUpdateRequest");

export const SUBSCRIPTION_STATUSES = ["incomplete", "incomplete_expired", "trialing", "active", "past_due", "canceled"] as const;
export const SubscriptionStatus = z.enum(SUBSCRIPTION_STATUSES);

export const SubscriptionSchema = z
  .object({
    id: z.string().openapi({ example: "sub_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("subscription"),
    livemode: livemodeField,
    user_id: z.string(),
    plan_id: z.string(),
    status: SubscriptionStatus.openapi({
      description:
        "incomplete while its first charge waits for the payer's 3-D Secure (latest_payment.next_action.url on the create answer), then active, or incomplete_expired when the payer failed, did not finish within 23 hours, or it was canceled meanwhile; trialing until its trial ends; active; past_due while a failed charge is retried; canceled.",
    }),
    quantity: z.number().int(),
    card: CardSummarySchema,
    payment_method: z
      .string()
      .nullable()
      .openapi({ description: "The saved card (pmt_…) the subscription charges, when it was given one; null when it was given the card fields." }),
    start_date: timestamp("When the subscription started."),
    current_period_start: timestamp("Start of the last paid period."),
    trial_start: z.string().nullable().openapi({ description: "When its trial began, or null when it had none." }),
    trial_end: z.string().nullable().openapi({ description: "When its trial ends (or ended): the first period is charged then, and the billing day is anchored there." }),
    next_billing_date: z.string().nullable().openapi({ description: "When the next period is charged (null once canceled). ISO 8601 UTC." }),
    discount: z
      .object({
        coupon: z.string().openapi({ description: "The coupon's id (GET /coupons/{id})." }),
        start: z.string().openapi({ description: "When the discount began (ISO 8601 UTC, on the subscription's clock)." }),
        end: z.string().nullable().openapi({ description: "When a repeating discount ends; null for once and forever." }),
      })
      .nullable()
      .openapi({ description: "The coupon whose discount applies to the subscription's invoices, or null." }),
    default_tax_rates: z
      .array(z.string())
      .nullable()
      .openapi({ description: "The subscription's own tax rates (txr_…), which its invoices carry instead of the plan's; null: the plan's default_tax_rates apply." }),
    pending_update: z
      .object({
        plan_id: z.string(),
        quantity: z.number().int(),
        effective_at: z.string().openapi({ description: "When the change takes effect: the start of the next period, which is invoiced at it." }),
      })
      .nullable()
      .openapi({ description: "A change scheduled for the next period (PUT with at_period_end true), or null." }),
    cancel_at_period_end: z.boolean().openapi({ description: "true while the subscription is set to cancel when the current period ends; false once it is canceled." }),
    canceled_at: z.string().nullable(),
    created_at: timestamp("When the subscription was created."),
    updated_at: timestamp("When the subscription last changed."),
    latest_payment: PaymentSchema.optional().openapi({
      description: "On the create answer of an incomplete subscription only: its first payment, requires_action, whose next_action.url the payer is sent to.",
    }),
  })
  .openapi("Subscription");
export type SubscriptionJson = z.infer<typeof SubscriptionSchema>;

export const ListSubscriptionsQuery = {
  user_id: userId.optional().openapi({ description: "Only this user's subscriptions." }),
  status: closedSetFilter("status", SUBSCRIPTION_STATUSES, "Only subscriptions in this status."),
};

export const CancelQuery = queryObject({
  at_period_end: closedSet("at_period_end", ["true", "false"])
    .optional()
    .openapi({ description: "true: keep the subscription active until the current period ends, then cancel instead of renewing." }),
});

// A subscription's JSON, and a write's stored answer of it, live below the routes (the event
// outbox writes them too): src/billing/subscription-answer.ts.
export { serializeSubscription, subscriptionAnswer } from "../../billing/subscription-answer";
