// Stripe-style cursor pagination over time-ordered ids, newest first.
import { z } from "@hono/zod-openapi";
import { invalidRequest } from "../lib/errors";
import { queryObject } from "./shared";

const cursor = (field: string) => z.string({ error: `${field} must be the id of an object of this list.` }).max(100);

/** Every list's query: a page size and a cursor. Lists extend it with their filters; anything else is refused. */
export const listQuery = queryObject({
  limit: z.coerce
    .number({ error: "limit must be a whole number from 1 to 100." })
    .int()
    .min(1)
    .max(100)
    .default(10)
    .openapi({ description: "How many objects to return, 1 to 100.", example: 10 }),
  starting_after: cursor("starting_after").optional().openapi({ description: "A cursor: the id of the last object of the previous page. Returns older objects." }),
  ending_before: cursor("ending_before").optional().openapi({ description: "A cursor: the id of the first object of the previous page. Returns newer objects." }),
});
export type ListQuery = z.infer<typeof listQuery>;

export function listSchema<T extends z.ZodTypeAny>(item: T, name: string) {
  return z
    .object({
      object: z.literal("list"),
      data: z.array(item),
      has_more: z.boolean().openapi({ description: "Whether more objects lie beyond this page in the direction paged." }),
    })
    .openapi(name);
}

export interface Page<T> {
  object: "list";
  data: T[];
  has_more: boolean;
}

/** Where a page starts: the newest objects, older than a cursor, or newer than one. */
export type PageDirection = "first" | "after" | "before";

/**
 * One page, newest first, of objects with time-ordered ids. `validCursor` checks the form of a
 * cursor id; `fetch` reads up to `limit` rows in the direction asked (`before`: oldest first).
 */
export async function paginate<Row, T>(options: {
  query: ListQuery;
  validCursor: (id: string) => boolean;
  serialize: (row: Row) => T;
  fetch: (direction: PageDirection, cursor: string | undefined, limit: number) => Promise<Row[]>;
}): Promise<Page<T>> {
  const { limit, starting_after: after, ending_before: before } = options.query;
  if (after !== undefined && before !== undefined) throw invalidRequest("parameter_conflict", "Send starting_after or ending_before, not both.");
  const cursor = after ?? before;
  if (cursor !== undefined && !options.validCursor(cursor)) {
    throw invalidRequest("invalid_cursor", `'${cursor}' is not an id of this kind of object.`, after !== undefined ? "starting_after" : "ending_before");
  }
  const rows = await options.fetch(after ? "after" : before ? "before" : "first", cursor, limit + 1);
  const has_more = rows.length > limit;
  const page = rows.slice(0, limit);
  if (before) page.reverse();
  return { object: "list", data: page.map(options.serialize), has_more };
}
