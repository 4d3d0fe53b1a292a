// Dated API versions: the one list of what changed in each version, and how an answer in today's
// shape is turned back into an older version's shape. An account is pinned to the current version
// when it signs up; a request may ask for another with `Tender-Version: YYYY-MM-DD`.
//
// To make a breaking change: add a version (dated the day it ships) at the end of API_VERSIONS,
// with `downgrade`, which turns an answer of this version into the previous version's shape. The
// routes keep producing only the newest shape; answers for older versions are downgraded one
// version at a time, newest first. A change to what a request must carry has no downgrade: the
// route asks `versionAtLeast(c.var.apiVersion, <the version>)` with a constant named here.

type Json = unknown;

export interface ApiVersion {
  version: string;
  /** What changed in this version, for the changelog (README). */
  changes: string[];
  /** Turns an answer of this version into the shape of the version before it. */
  downgrade?: (body: Json) => Json;
}

type JsonObject = Record<string, Json>;
const isObject = (value: Json): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Applies `change` to the answer's own objects of `kind`: the answer itself, or each item of a list
 * answer (`{ object: "list", data: [...] }`). Those are the positions the API's schema gives its
 * objects; nothing inside them is walked, so a caller's metadata, an event's `data` or its
 * delivered `payload` is never reshaped, however much it looks like an object of `kind`.
 */
function eachObject(body: Json, kind: string, change: (object: JsonObject) => JsonObject): Json {
  if (!isObject(body)) return body;
  if (body.object === kind) return change(body);
  if (body.object === "list" && Array.isArray(body.data)) {
    return { ...body, data: body.data.map((item) => (isObject(item) && item.object === kind ? change(item) : item)) };
  }
  return body;
}

export const API_VERSIONS: readonly ApiVersion[] = [
  {
    version: "2026-11-01",
    changes: ["The first version."],
  },
  {
    version: "2026-11-22",
    changes: [
      "Event objects (GET /api/events, GET /api/events/{id}) carry `object_id` and `sequence`: the object the event is about and the event's place among that object's events.",
    ],
    downgrade: (body) =>
      eachObject(body, "event", ({ object_id: _objectId, sequence: _sequence, ...rest }) => rest),
  },
  {
    version: "2026-11-27",
    changes: [
      "POST /payout needs `recipient_id` in test mode too, as in live mode: without it, 400 parameter_missing naming recipient_id. Earlier versions keep paying a test-mode card with no recipient (the interface document's sample).",
    ],
    // Only what a request must carry changed (PAYOUT_NEEDS_RECIPIENT); answers are the same.
    downgrade: (body) => body,
  },
];

/** Since this version, a payout names its recipient in test mode as in live mode. */
export const PAYOUT_NEEDS_RECIPIENT = "2026-11-27";

/**
 * Whether a request answered in `version` gets what `since` (a version of API_VERSIONS) changed
 * in what requests must carry: the routes' one test for a version's request rules. Versions are
 * ISO dates, so they compare as strings.
 */
export const versionAtLeast = (version: string, since: string) => version >= since;

export const CURRENT_API_VERSION = API_VERSIONS[API_VERSIONS.length - 1].version;

export const isApiVersion = (value: string) => API_VERSIONS.some((v) => v.version === value);

/** An answer in the current shape, as `version` shows it. */
export function answerForVersion(body: Json, version: string): Json {
  let shaped = body;
  for (let i = API_VERSIONS.length - 1; i > 0 && API_VERSIONS[i].version > version; i--) {
    const downgrade = API_VERSIONS[i].downgrade;
    if (downgrade) shaped = downgrade(shaped);
  }
  return shaped;
}
