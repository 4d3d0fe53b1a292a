import { z } from "@hono/zod-openapi";
import type { testClocks } from "../../db/schema";
import { bodyObject, livemodeField, textField, timestamp } from "../shared";

const frozenTime = z.iso
  .datetime({ offset: true, error: "frozen_time must be an ISO 8601 date-time with a time zone, such as 2028-01-31T12:00:00.000Z." })
  .openapi({ description: "ISO 8601 date-time. Subscriptions of the clock's users bill as if this were now.", example: "2028-01-31T12:00:00.000Z" });

export const CreateTestClockBody = bodyObject({
  frozen_time: frozenTime,
  name: textField("name", 200, { min: 1, trim: true }).optional().openapi({ example: "Leap-year renewals" }),
}).openapi("TestClockRequest");

export const AdvanceTestClockBody = bodyObject({
  frozen_time: frozenTime.openapi({ description: "The new time: after the current frozen_time, and at most two intervals of the shortest subscription on the clock later (any distance for a clock without subscriptions)." }),
}).openapi("TestClockAdvanceRequest");

export const TestClockSchema = z
  .object({
    id: z.string().openapi({ example: "clock_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("test_clock"),
    livemode: livemodeField,
    name: z.string().nullable(),
    frozen_time: timestamp("The clock's current time."),
    status: z
      .enum(["ready", "advancing"])
      .openapi({ description: "advancing while renewals due by frozen_time are still being run in the background; then ready." }),
    created_at: timestamp("When the clock was created."),
  })
  .openapi("TestClock");
export type TestClockJson = z.infer<typeof TestClockSchema>;

export function serializeTestClock(row: typeof testClocks.$inferSelect, status: "ready" | "advancing"): TestClockJson {
  return { id: row.id, object: "test_clock", livemode: row.livemode, name: row.name, frozen_time: row.frozenTime, status, created_at: row.createdAt };
}
