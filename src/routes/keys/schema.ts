import { z } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import { SCOPES } from "../../auth/scopes";
import { apiKeys } from "../../db/schema";
import { livemodeJsonSql } from "../../db/scope";
import { bodyObject, listOf, livemodeField, quoted, textField, timestamp } from "../shared";

const scope = z.enum(SCOPES, { error: (issue) => `Each item of scopes must be one of ${listOf(SCOPES, "or")}; ${quoted(issue.input)} is not one.` });

export const CreateKeyBody = bodyObject({
  name: textField("name", 200, { min: 1, trim: true }).optional(),
  scopes: z
    .array(scope, { error: `scopes must be a list of 1 to ${SCOPES.length} scopes, such as ["users:read"].` })
    .min(1)
    .max(SCOPES.length)
    .openapi({ example: ["users:read", "payouts:write"] }),
}).openapi("CreateKeyRequest");

export const KeySchema = z
  .object({
    id: z.string().openapi({ example: "key_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("api_key"),
    livemode: livemodeField,
    name: z.string().nullable(),
    kind: z.enum(["secret", "restricted"]),
    mode: z.enum(["test", "live"]),
    prefix: z.string().openapi({ description: "The start and end of the key, to recognise it." }),
    scopes: z.array(z.string()),
    created_at: timestamp("When the key was created."),
    revoked_at: z.string().nullable(),
  })
  .openapi("ApiKey");

export const CreatedKeySchema = KeySchema.extend({
  secret: z.string().nullable().openapi({ description: "The key itself, rk_test_… or rk_live_…: shown in this answer only (null in an idempotent replay)." }),
}).openapi("CreatedApiKey");

export function serializeKey(row: Omit<typeof apiKeys.$inferSelect, "livemode">) {
  return {
    id: row.id,
    object: "api_key" as const,
    livemode: row.mode === "live",
    name: row.name,
    kind: row.kind,
    mode: row.mode,
    prefix: row.prefix,
    scopes: row.scopes,
    created_at: row.createdAt,
    revoked_at: row.revokedAt,
  };
}

/** serializeKey inside SQL, for the stored answer built within a batch (the row as committed). */
export const keyJsonSql = (id: string) => sql`(SELECT json_object(
  'id', ${apiKeys.id}, 'object', 'api_key', 'livemode', ${livemodeJsonSql(apiKeys.livemode)}, 'name', ${apiKeys.name}, 'kind', ${apiKeys.kind}, 'mode', ${apiKeys.mode},
  'prefix', ${apiKeys.prefix}, 'scopes', json(${apiKeys.scopes}), 'created_at', ${apiKeys.createdAt}, 'revoked_at', ${apiKeys.revokedAt}
) FROM ${apiKeys} WHERE ${apiKeys.id} = ${id})`;
