import { z } from "@hono/zod-openapi";
import type { requestIds } from "../../db/schema";
import { bodyObject, livemodeField, textField, timestamp } from "../shared";

export const METADATA_MAX_KEYS = 50;
export const METADATA_KEY_MAX = 40;
export const METADATA_VALUE_MAX = 500;

const METADATA = `metadata must be an object of at most ${METADATA_MAX_KEYS} keys, with string, number, boolean or null values.`;
const METADATA_KEY = `Each metadata key must be 1 to ${METADATA_KEY_MAX} characters long.`;
const METADATA_VALUE = `Each metadata value must be a string of at most ${METADATA_VALUE_MAX} characters, a number, true, false or null; objects and lists are not stored.`;

// Free-form keys, by design: the one request object that is not strict.
export const MetadataSchema = z
  .record(
    z.string({ error: METADATA_KEY }).min(1).max(METADATA_KEY_MAX),
    z.union(
      [
        z.string({ error: METADATA_VALUE }).max(METADATA_VALUE_MAX),
        z.number({ error: METADATA_VALUE }).finite(),
        z.boolean({ error: METADATA_VALUE }),
        z.null({ error: METADATA_VALUE }),
      ],
      { error: METADATA_VALUE },
    ),
    { error: (issue) => (issue.code === "invalid_key" ? METADATA_KEY : METADATA) },
  )
  .refine((m) => Object.keys(m).length <= METADATA_MAX_KEYS, { error: `metadata may hold at most ${METADATA_MAX_KEYS} keys.` })
  .openapi({
    description: `Flat key/value pairs: at most ${METADATA_MAX_KEYS} keys of up to ${METADATA_KEY_MAX} characters; values are strings (up to ${METADATA_VALUE_MAX} characters), numbers, booleans or null.`,
    example: { order: "A-1001" },
  });

export const CreateRequestIdBody = bodyObject({
  purpose: textField("purpose", 255, { min: 1, trim: true }).openapi({ example: "checkout" }),
  metadata: MetadataSchema.optional(),
}).openapi("CreateRequestIdRequest");

export const RequestIdSchema = z
  .object({
    id: z.string().uuid().openapi({ description: "A UUID, version 7.", example: "019a8f3e-7c1d-7b2a-9f00-3c4d5e6f7a8b" }),
    object: z.literal("request_id"),
    livemode: livemodeField,
    purpose: z.string(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
    timestamp: timestamp("When the id was generated."),
    status: z.literal("success"),
  })
  .openapi("RequestId");

export function serializeRequestId(row: typeof requestIds.$inferSelect) {
  return {
    id: row.id,
    object: "request_id" as const,
    livemode: row.livemode,
    purpose: row.purpose,
    metadata: row.metadata ?? null,
    timestamp: row.createdAt,
    status: "success" as const,
  };
}
