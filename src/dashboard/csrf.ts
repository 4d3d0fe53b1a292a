// Cross-site request forgery: every POST to the dashboard must come from a page of this origin
// (its Origin header, or Sec-Fetch-Site: same-origin when a browser sends no Origin), and every
// POST made in a session must carry the session's CSRF token in the hidden `csrf_token` field. The
// token is derived from the session token (which only the session's cookie holds), so it is
// per-session, never stored, and useless without the cookie. A refused POST gets a 403 page.
import type { Context } from "hono";
import { timingSafeEqual } from "../lib/crypto";
import type { DashEnv } from "./context";

export type CsrfRefusal = "cross_origin" | "csrf_token_missing" | "csrf_token_invalid";

/** Whether a POST comes from this origin. */
export function fromSameOrigin(c: Context<DashEnv>): boolean {
  const origin = c.req.header("origin");
  if (origin !== undefined) return origin === new URL(c.req.url).origin;
  return c.req.header("sec-fetch-site") === "same-origin";
}

/** Why this session POST must be refused, or null when its token is right. */
export function csrfRefusal(expected: string, submitted: unknown): Exclude<CsrfRefusal, "cross_origin"> | null {
  if (typeof submitted !== "string" || submitted === "") return "csrf_token_missing";
  return submitted.length === expected.length && timingSafeEqual(submitted, expected) ? null : "csrf_token_invalid";
}

export const CSRF_MESSAGES: Record<CsrfRefusal, string> = {
  cross_origin: "This form was sent from another site. The dashboard only accepts forms from its own pages.",
  csrf_token_missing: "This form has no CSRF token. Reload the page and submit the form again.",
  csrf_token_invalid: "This form's CSRF token does not belong to your session (it may be from an earlier sign-in). Reload the page and submit it again.",
};
