// A customer portal session: its row, its answer and where its page is. The API route is
// src/routes/portal-sessions; the page is src/pages/portal.tsx.
import type { portalSessions } from "../db/schema";

export type PortalSessionRow = typeof portalSessions.$inferSelect;

/** A portal link works this long (DESIGN.md: one hour); then its page answers 410. */
export const PORTAL_SESSION_LIFETIME_MS = 60 * 60 * 1000;

/** Where the session's page is: `<origin>/portal/<id>/<secret>`. */
export const portalPagePath = (row: Pick<PortalSessionRow, "id" | "pageSecret">) => `/portal/${row.id}/${row.pageSecret}`;

export function serializePortalSession(row: PortalSessionRow, origin: string) {
  return {
    id: row.id,
    object: "portal_session" as const,
    url: `${origin}${portalPagePath(row)}`,
    livemode: row.livemode,
    user_id: row.userId,
    return_url: row.returnUrl,
    expires_at: row.expiresAt,
    created_at: row.createdAt,
  };
}
