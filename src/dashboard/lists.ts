// The query of a list page, passed to the API as is: its cursors (starting_after / ending_before),
// a page size of 20, and the filters the page offers. Anything else in the URL is ignored.
import type { Context } from "hono";
import type { DashEnv } from "./context";

export const PAGE_SIZE = 20;

export function listQuery(c: Context<DashEnv>, filters: string[] = []): Record<string, string | undefined> {
  const query: Record<string, string | undefined> = {};
  for (const name of ["starting_after", "ending_before", ...filters]) {
    const value = c.req.query(name);
    if (value !== undefined && value !== "") query[name] = value;
  }
  return query;
}

/** The API's query: the page's, with the page size. */
export const apiQuery = (query: Record<string, string | undefined>) => ({ ...query, limit: PAGE_SIZE });

/** An id as it may appear in a dashboard path (the API decides whether it exists). */
export const ID_PATTERN = /^[A-Za-z0-9_]{1,100}$/;
