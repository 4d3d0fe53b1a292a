// Field schemas used by several resources.
import { z } from "@hono/zod-openapi";

export const timestamp = (description: string) =>
  z.string().openapi({ description: `${description} ISO 8601 UTC with milliseconds.`, example: "2026-11-21T12:00:00.000Z" });

/** Every object's mode: true in live mode, false in test mode. */
export const livemodeField = z
  .boolean()
  .openapi({ description: "true for an object of live mode, false for test mode. Each mode sees only its own objects.", example: false });

export const nameField = z.string().trim().min(1).max(200).openapi({ example: "Ada Lovelace" });
export const emailField = z
  .string()
  .trim()
  .max(254)
  .pipe(z.email({ error: "must be a valid e-mail address" }))
  .openapi({ type: "string", format: "email", example: "ada@example.com" });
