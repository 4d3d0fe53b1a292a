import { z } from "@hono/zod-openapi";
import { bodyObject, emailField, nameField, timestamp } from "../shared";

export const SignupBody = bodyObject({ name: nameField, email: emailField }).openapi("SignupRequest");

export const AccountSchema = z
  .object({
    id: z.string().openapi({ example: "acct_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("account"),
    name: z.string(),
    email: z.string(),
    created_at: timestamp("When the account was created."),
    api_key: z.string().openapi({ description: "A test-mode secret key, sk_test_…: it sees and touches test-mode objects only. Shown once: store it now.", example: "sk_test_…" }),
    live_api_key: z.string().openapi({
      description: "A live-mode secret key, sk_live_…: it sees and touches live-mode objects only, and alone creates live restricted keys. Shown once: store it now.",
      example: "sk_live_…",
    }),
  })
  .openapi("Account");
