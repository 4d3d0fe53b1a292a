// Dated API versions on the way in and out. A request is answered in the version its
// Tender-Version header names, or else in the version its account is pinned to; every answer of
// an authenticated route says which in Tender-Version. Routes produce only the current shape:
// a successful JSON answer for an older version is downgraded here (src/domain/api-versions.ts).
// Idempotency records are stored in the current shape (this runs outside that middleware), so a
// replay is shaped for the version of the request that replays it.
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context";
import { API_VERSIONS, CURRENT_API_VERSION, answerForVersion, isApiVersion } from "../domain/api-versions";
import { invalidRequest } from "../lib/errors";

export const VERSION_HEADER = "Tender-Version";

export const apiVersion = createMiddleware<AppEnv>(async (c, next) => {
  const asked = c.req.header(VERSION_HEADER);
  if (asked !== undefined && !isApiVersion(asked.trim())) {
    throw invalidRequest(
      "api_version_invalid",
      `Unknown ${VERSION_HEADER} '${asked.slice(0, 40)}'. Known versions: ${API_VERSIONS.map((v) => v.version).join(", ")}. Leave the header out to use your account's version.`,
      VERSION_HEADER,
    );
  }
  const version = asked?.trim() ?? c.var.auth.apiVersion;
  c.set("apiVersion", version);
  await next();
  if (version !== CURRENT_API_VERSION && c.res.status < 300 && c.res.headers.get("content-type")?.startsWith("application/json")) {
    // The route's answer is replaced whole: its body read once (not a copy of it), and the new
    // answer, which takes its headers, set as it is (Hono's setter would copy it and its headers again).
    const answered = c.res;
    const body = answerForVersion(await answered.json(), version);
    c.res = undefined;
    c.res = new Response(JSON.stringify(body), { status: answered.status, headers: answered.headers });
  }
  c.res.headers.set(VERSION_HEADER, version);
});
