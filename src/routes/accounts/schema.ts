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
    api_key: z.string().openapi({ description: "A test-mode secret key, sk_test_…. Shown once: store it now.", example: "sk_test_…" }),
  })
  .openapi("Account");
