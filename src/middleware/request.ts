// The first middleware: a request id, the instrumented database, HTTPS enforcement and HSTS.
import { createMiddleware } from "hono/factory";
import { Sessions, countingInto } from "../db/client";
import { isDevelopment } from "../env";
import { clock } from "../lib/clock";
import type { AppEnv } from "../context";
import { uuidv7Hex } from "../domain/ids";
import { ApiError } from "../lib/errors";

export const REQUEST_ID_HEADER = "Request-Id";
/** Development: the shard the request's account lives on (answers), or sign-up should use (requests). */
export const SHARD_HEADER = "Tender-Shard";
/**
 * Development: a request that sends this header (any value) is answered with its D1 usage in the
 * Tender-D1-Round-Trips, -Rows-Read, -Rows-Written and -Statements-Built headers. Asked for, not
 * sent on every answer: under wrangler dev each header costs CPU here and in wrangler's dev proxy
 * (bench/RESULTS.md, "readpath").
 */
export const D1_USAGE_HEADER = "Tender-D1-Usage";
/** The D1 session bookmark: answered on every request, and sent back to read at least that fresh. */
export const CONSISTENCY_HEADER = "Tender-Consistency";
const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);
/** D1's bookmark form: three 8-digit and one 32-digit hex groups. */
const BOOKMARK = /^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/;

export const requestContext = createMiddleware<AppEnv>(async (c, next) => {
  c.set("requestId", `req_${uuidv7Hex(clock.now())}`);
  const counter = { count: 0, rowsRead: 0, rowsWritten: 0, statementsBuilt: 0 };
  c.set("d1RoundTrips", counter);
  const development = isDevelopment(c.env);
  if (!development && new URL(c.req.url).protocol !== "https:") {
    throw new ApiError(400, "invalid_request_error", "https_required", "Tender only accepts requests over HTTPS.");
  }
  // D1 read replication: a write starts at the primary (its reads before the write are fresh); a
  // read may be answered by a nearby replica, no older than the bookmark the client sent back.
  const bookmark = c.req.header(CONSISTENCY_HEADER);
  if (bookmark !== undefined && !BOOKMARK.test(bookmark)) {
    throw new ApiError(400, "invalid_request_error", "consistency_invalid", `${CONSISTENCY_HEADER} must be a bookmark from an earlier answer's ${CONSISTENCY_HEADER} header.`);
  }
  // The database (the account's shard, src/db/shards.ts) is chosen once the credential is known.
  const sessions = new Sessions(WRITES.has(c.req.method) ? "first-primary" : (bookmark ?? "first-unconstrained"));
  await countingInto(counter, next, sessions);
  // The headers go on the answer the route built. Hono's c.header() after the handler copies the
  // whole Response (its body and every header) on each call, three or four copies per request;
  // only an answer whose headers cannot change (one passed through from a fetch) is copied so.
  const answer = c.res.headers;
  let mutable = true;
  const set = (name: string, value: string) => {
    if (mutable) {
      try {
        answer.set(name, value);
        return;
      } catch {
        mutable = false;
      }
    }
    c.header(name, value);
  };
  const reached = sessions.bookmarkOf(c.env.DB);
  if (reached) set(CONSISTENCY_HEADER, reached);
  set(REQUEST_ID_HEADER, c.var.requestId);
  if (development) {
    if (c.env.SHARD !== undefined) set(SHARD_HEADER, String(c.env.SHARD));
    if (c.req.header(D1_USAGE_HEADER) !== undefined) {
      set("Tender-D1-Round-Trips", String(counter.count));
      set("Tender-D1-Rows-Read", String(counter.rowsRead));
      set("Tender-D1-Rows-Written", String(counter.rowsWritten));
      set("Tender-D1-Statements-Built", String(counter.statementsBuilt));
    }
  }
  else set("Strict-Transport-Security", "max-age=63072000; includeSubDomains; preload");
});
