// POST /usage-events: metered usage at volume, up to 100 events a call, each accepted or rejected
// on its own, deduplicated by the caller's id for 35 days (src/billing/usage-events.ts). A body
// that is not the documented shape answers 400 and writes nothing.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context";
import { MAX_USAGE_EVENTS, parseAnswer, prepareUsageEvents } from "../../billing/usage-events";
import { clock } from "../../lib/clock";
import { commit } from "../write-path";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { bodyObject, livemodeField } from "../shared";

const ID_MESSAGE = "Each event's id must be a string of 1 to 255 characters: your own id for it, unique in your account and mode for 35 days.";

const UsageEventInput = z
  .strictObject(
    {
      id: z.string({ error: ID_MESSAGE }).min(1, { error: ID_MESSAGE }).max(255, { error: ID_MESSAGE }).openapi({
        description: "Your id for the event. An event whose id was accepted in the last 35 days (in this call or an earlier one) counts once: it is answered as a duplicate.",
        example: "evt_2027_01_31_000123",
      }),
      subscription_id: z
        .string({ error: "Each event's subscription_id must be a string: the metered subscription the usage is for." })
        .max(255, { error: "subscription_id must be at most 255 characters." })
        .openapi({ example: "sub_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
      // Required (missing: 400 for the call); its value is checked per event (a bad one is rejected,
      // the others go in): documented with its type.
      quantity: z.unknown().openapi({ type: "integer", minimum: 0, maximum: 1_000_000_000, description: "Units used, added to the period's usage: a whole number from 0 to 1,000,000,000.", example: 25 }),
      timestamp: z.unknown().optional().openapi({
        type: "string",
        format: "date-time",
        description:
          "When the usage happened (ISO 8601 with its offset; default now, on the subscription's test clock if its user has one). At most 5 minutes in the future; its billing period must not be invoiced yet.",
      }),
    },
    { error: (issue) => (issue.code === "invalid_type" ? "Each element of events must be an object." : undefined) },
  )
  .openapi("UsageEventInput");

export const UsageEventsBody = bodyObject({
  events: z
    .array(UsageEventInput, { error: `events must be a list of 1 to ${MAX_USAGE_EVENTS} usage events.` })
    .min(1, { error: `events must be a list of 1 to ${MAX_USAGE_EVENTS} usage events; it is empty.` })
    .max(MAX_USAGE_EVENTS, { error: `events takes at most ${MAX_USAGE_EVENTS} usage events a call; send the rest in another call.` }),
}).openapi("UsageEventsRequest");

const UsageEventsAnswerSchema = z
  .object({
    livemode: livemodeField,
    accepted: z.number().int().openapi({ description: "Events recorded by this call." }),
    duplicates: z.number().int().openapi({ description: "Events whose id was already recorded (in this call, an earlier one or a concurrent one): counted once, not again." }),
    rejected: z
      .array(
        z.object({
          index: z.number().int().openapi({ description: "The event's position in events, from 0." }),
          code: z.string().openapi({
            description:
              "resource_missing (no such subscription in this account and mode), subscription_not_metered, subscription_canceled, subscription_changed (send it again), parameter_missing, parameter_invalid, timestamp_in_future, usage_period_closed or usage_too_large.",
            example: "usage_period_closed",
          }),
          message: z.string(),
          param: z.string().optional().openapi({ example: "timestamp" }),
        }),
      )
      .openapi({ description: "Events not recorded, in order: nothing of them was written; send them again once fixed." }),
  })
  .openapi("UsageEventsResult");

const create = apiRoute({
  method: "post",
  path: "/usage-events",
  tags: ["Subscriptions"],
  operationId: "createUsageEvents",
  summary: "Report metered usage in batches",
  description:
    "Records up to 100 usage events of metered subscriptions in one call, each in the billing period that holds its timestamp, and answers what became of each: accepted, a duplicate (its id was recorded in the last 35 days, in this call or another), or rejected with a code (the others still go in). At the period's end its usage (these events and the records of POST /subscriptions/{id}/usage alike) is invoiced. A body that is not this shape, an empty list or more than 100 events answers 400 and records nothing.",
  scope: "subscriptions:write",
  request: jsonBodyOf(UsageEventsBody),
  responses: { 200: json(UsageEventsAnswerSchema, "What became of each event.") },
});

export function registerUsageEvents(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createUsageEvents(c) {
    const { db, auth } = c.var;
    const { events } = c.req.valid("json");
    const write = await prepareUsageEvents(db, auth, events as { id: string; subscription_id: string; quantity?: unknown; timestamp?: unknown }[], clock.now());
    const { answered } = await commit(c, { statements: write.statements, answer: write.answer }, 200, null, { storedBody: write.storedAnswer });
    return c.json(parseAnswer(answered), 200);
  });
}
