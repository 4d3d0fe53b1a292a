// The events feed (GET /api/events): the account's events in the order they committed, newest
// first. Each event takes its place (events.feed_position) when its INSERT commits
// (src/webhooks/outbox.ts), so a reader that pages with the cursors the feed gave it never skips
// an event, even one whose id carries a time long before a newer event committed. A cursor is an
// event id, resolved to its place inside the page's own query; the check that it names an event of
// the account rides in the same batch (one round trip).
import type { Context } from "hono";
import { type SQL, and, asc, desc, eq, gt, lt, sql } from "drizzle-orm";
import { events } from "../../db/schema";
import { prepared, preparedBy } from "../../db/prepared";
import { callerPlaceholders, callerValues, owned } from "../../db/scope";
import type { Statement } from "../../db/batch";
import { hasPrefix } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { invalidRequest } from "../../lib/errors";
import { type ListQuery, type Page, type PageDirection, paginate } from "../pagination";
import { withLiveKeyAll } from "../reads";

type EventRow = typeof events.$inferSelect;

/** The shape of a feed page's statement: its direction, and which filters are present. */
interface FeedShape {
  direction: PageDirection;
  type: boolean;
  object: boolean;
}

/** SQL: the place of the cursor event in the caller's feed (NULL when the account has no such event). */
const cursorPlace = sql`(SELECT cursor_event.feed_position FROM ${events} AS cursor_event
  WHERE cursor_event.account_id = ${sql.placeholder("accountId")} AND cursor_event.livemode = ${sql.placeholder("livemode")} AND cursor_event.id = ${sql.placeholder("cursor")})`;

const feedPage = preparedBy(
  (db, { direction, type, object }: FeedShape) => {
    const conditions: (SQL | undefined)[] = [
      type ? eq(events.type, sql.placeholder("type")) : undefined,
      object ? eq(events.objectId, sql.placeholder("objectId")) : undefined,
      direction === "after" ? lt(events.feedPosition, cursorPlace) : undefined,
      direction === "before" ? gt(events.feedPosition, cursorPlace) : undefined,
    ];
    return db
      .select()
      .from(events)
      .where(owned(events, callerPlaceholders, ...conditions))
      .orderBy(direction === "before" ? asc(events.feedPosition) : desc(events.feedPosition))
      .limit(sql.placeholder("limit"));
  },
  ({ direction, type, object }) => `${direction}|${type}|${object}`,
);

const cursorEvent = prepared((db) =>
  db
    .select({ id: events.id })
    .from(events)
    .where(and(eq(events.accountId, sql.placeholder("accountId")), eq(events.livemode, sql.placeholder("livemode")), eq(events.id, sql.placeholder("cursor")))),
);

/** A page of the caller's feed, newest first; an empty filter value (`?type=`) filters nothing. */
export function feedPageOf<Item>(
  c: Context<AppEnv>,
  query: ListQuery & { type?: string; object_id?: string },
  serialize: (row: EventRow) => Item,
): Promise<Page<Item>> {
  const type = query.type || undefined;
  const objectId = query.object_id || undefined;
  return paginate({
    query,
    validCursor: (id) => hasPrefix(id, "event"),
    serialize,
    fetch: async (direction, cursor, limit) => {
      const { db, auth } = c.var;
      const values = { ...callerValues(auth), cursor, limit, type, objectId };
      const page = feedPage(db, { direction, type: type !== undefined, object: objectId !== undefined }).with(values) as Statement & { result?: EventRow[] };
      if (cursor === undefined) {
        const [rows] = await withLiveKeyAll<[EventRow[]]>(c, [page]);
        return rows;
      }
      const [rows, found] = await withLiveKeyAll<[EventRow[], { id: string }[]]>(c, [page, cursorEvent(db).with({ accountId: auth.accountId, livemode: auth.livemode ? 1 : 0, cursor }) as Statement & { result?: { id: string }[] }]);
      if (found.length === 0) {
        const param = query.starting_after !== undefined ? "starting_after" : "ending_before";
        throw invalidRequest("invalid_cursor", `No event ${cursor} in this account and mode: ${param} must be the id of an event the feed returned.`, param);
      }
      return rows;
    },
  });
}
