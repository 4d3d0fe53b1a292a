import { z } from "@hono/zod-openapi";
import { subscriptions } from "../../db/schema";
import { rowAnswer } from "../../middleware/stored-answers";
import { CardFields, CardSummarySchema, OptionalCardFields } from "../../payments/card-input";
import { cardOf } from "../../payments/serialize";
import { livemodeField, timestamp } from "../shared";

const quantity = z
  .number()
  .int()
  .min(1)
  .max(1_000_000)
  .openapi({ description: "Units subscribed to: tiered plans price by it; a fixed plan charges its price times the quantity.", example: 1 });
const id = (example: string) => z.string().max(100).openapi({ example });

export const CreateSubscriptionBody = z
  .object({
    user_id: id("usr_01jd2x4k5m6n7p8q9r0s1t2v3w"),
    plan_id: id("plan_01jd2x4k5m6n7p8q9r0s1t2v3w"),
    quantity: quantity.default(1),
    ...CardFields,
  })
  .openapi("SubscriptionRequest");

export const UpdateSubscriptionBody = z
  .object({
    ...OptionalCardFields,
    plan_id: id("plan_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "A plan with the same currency and interval; it prices the next period on." }),
    quantity: quantity.optional().openapi({ description: "Takes effect from the next period, without proration." }),
    cancel_at_period_end: z.boolean().optional().openapi({ description: "true cancels when the current period ends; false undoes that." }),
  })
  .openapi("SubscriptionUpdateRequest");

export const SubscriptionStatus = z.enum(["incomplete", "active", "past_due", "canceled"]);

export const SubscriptionSchema = z
  .object({
    id: z.string().openapi({ example: "sub_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("subscription"),
    livemode: livemodeField,
    user_id: z.string(),
    plan_id: z.string(),
    status: SubscriptionStatus.openapi({ description: "active; past_due while a failed renewal is retried; canceled." }),
    quantity: z.number().int(),
    card: CardSummarySchema,
    start_date: timestamp("When the subscription started."),
    current_period_start: timestamp("Start of the last paid period."),
    next_billing_date: z.string().nullable().openapi({ description: "When the next period is charged (null once canceled). ISO 8601 UTC." }),
    cancel_at_period_end: z.boolean(),
    canceled_at: z.string().nullable(),
    created_at: timestamp("When the subscription was created."),
    updated_at: timestamp("When the subscription last changed."),
  })
  .openapi("Subscription");
export type SubscriptionJson = z.infer<typeof SubscriptionSchema>;

export function serializeSubscription(row: typeof subscriptions.$inferSelect): SubscriptionJson {
  return {
    id: row.id,
    object: "subscription",
    livemode: row.livemode,
    user_id: row.userId,
    plan_id: row.planId,
    status: row.status,
    quantity: row.quantity,
    card: cardOf(row),
    start_date: row.startDate,
    current_period_start: row.currentPeriodStart,
    next_billing_date: row.status === "canceled" ? null : row.nextBillingDate,
    cancel_at_period_end: row.cancelAtPeriodEnd,
    canceled_at: row.canceledAt,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export const ListSubscriptionsQuery = z.object({
  user_id: z.string().max(100).optional().openapi({ description: "Only this user's subscriptions." }),
  status: SubscriptionStatus.optional().openapi({ description: "Only subscriptions in this status." }),
});

export const CancelQuery = z.object({
  at_period_end: z
    .enum(["true", "false"])
    .optional()
    .openapi({ description: "true: keep the subscription active until the current period ends, then cancel instead of renewing." }),
});

/**
 * A subscription as a write's answer, stored by its idempotency record as the committed row
 * (src/middleware/stored-answers.ts), without the processor's token and the card's fingerprint.
 */
export const subscriptionAnswer = rowAnswer("subscription", subscriptions, serializeSubscription, ["processorToken", "cardFingerprint"]);
