// The first middleware: a request id, the instrumented database, HTTPS enforcement and HSTS.
import { createMiddleware } from "hono/factory";
import { countingInto, createDb } from "../db/client";
import { isDevelopment } from "../env";
import { clock } from "../lib/clock";
import type { AppEnv } from "../context";
import { uuidv7 } from "../domain/ids";
import { ApiError } from "../lib/errors";

export const REQUEST_ID_HEADER = "Request-Id";

export const requestContext = createMiddleware<AppEnv>(async (c, next) => {
  c.set("requestId", `req_${uuidv7(clock.now()).replaceAll("-", "")}`);
  const counter = { count: 0, rowsRead: 0, rowsWritten: 0 };
  c.set("d1RoundTrips", counter);
  c.set("db", createDb(c.env.DB));
  const development = isDevelopment(c.env);
  if (!development && new URL(c.req.url).protocol !== "https:") {
    throw new ApiError(400, "invalid_request_error", "https_required", "Tender only accepts requests over HTTPS.");
  }
  await countingInto(counter, next);
  c.header(REQUEST_ID_HEADER, c.var.requestId);
  if (development) {
    c.header("Tender-D1-Round-Trips", String(counter.count));
    c.header("Tender-D1-Rows-Read", String(counter.rowsRead));
    c.header("Tender-D1-Rows-Written", String(counter.rowsWritten));
  }
  else c.header("Strict-Transport-Security", "max-age=63072000; includeSubDomains; preload");
});
