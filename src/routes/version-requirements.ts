// Body fields a dated version (src/domain/api-versions.ts) made required. They stay optional in the
// zod schemas, which validate the requests of every version, and the route refuses them by the
// request's version; the OpenAPI document describes the current version, so it lists them as
// required there (and @tender/client's types, generated from it, require them).
import { CURRENT_API_VERSION, PAYOUT_NEEDS_RECIPIENT, versionAtLeast } from "../domain/api-versions";

type Json = Record<string, any>;

/** Schema name → field → the version since which the field is required. */
const REQUIRED_SINCE: Record<string, Record<string, string>> = {
  CreatePayoutRequest: { recipient_id: PAYOUT_NEEDS_RECIPIENT },
};

/** The document with the current version's required fields listed as required. */
export function withVersionRequirements<T extends Json>(document: T): T {
  for (const [name, fields] of Object.entries(REQUIRED_SINCE)) {
    const schema = document.components?.schemas?.[name];
    if (!schema) continue;
    const now = Object.keys(fields).filter((field) => versionAtLeast(CURRENT_API_VERSION, fields[field]));
    schema.required = [...(schema.required ?? []), ...now.filter((field) => !(schema.required ?? []).includes(field))];
  }
  return document;
}
