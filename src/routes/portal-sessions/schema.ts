import { z } from "@hono/zod-openapi";
import { listQuery } from "../pagination";
import { bodyObject, idField, livemodeField, timestamp } from "../shared";

const URL_MESSAGE = "return_url must be an http(s) URL of at most 2048 characters (http only for localhost or 127.0.0.1 in development).";

export const PortalSessionSchema = z
  .object({
    id: z.string().openapi({ example: "bps_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("portal_session"),
    url: z.string().openapi({
      description: "The customer portal to send the user to (no API key: its secret is in the URL), for one hour.",
      example: "https://tender.example.com/portal/bps_01jd2x4k5m6n7p8q9r0s1t2v3w/7rQ…",
    }),
    livemode: livemodeField,
    user_id: z.string().openapi({ description: "The user the portal is for." }),
    return_url: z.string().openapi({ description: "Where the portal's link back goes." }),
    expires_at: timestamp("When the link stops working: one hour after it was made."),
    created_at: timestamp("When the session was made."),
  })
  .openapi("PortalSession");

export const CreatePortalSessionBody = bodyObject({
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").openapi({ description: "The user whose portal it is, of this account and mode." }),
  return_url: z
    .string({ error: URL_MESSAGE })
    .max(2048, { error: URL_MESSAGE })
    .openapi({ description: "Where the portal's link back to your site goes.", example: "https://shop.example.com/account" }),
}).openapi("PortalSessionRequest");

export const PortalSessionListQuery = listQuery.extend({
  user_id: idField("user_id", "a user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w").optional().openapi({ description: "Only this user's sessions." }),
});
