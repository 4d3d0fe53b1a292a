// The dashboard's internal principal. The dashboard (src/dashboard/) runs every read and action
// through the API's own routes, in process, as the API key its session was opened with. It cannot
// send that key (the key is never stored), so it hands the key's resolved credential to the API
// in the request's environment under a Symbol: nothing that arrives over HTTP (a header, a query,
// a body, a wrangler var) can carry a Symbol-keyed field, so outsiders can never present it.
// The auth middleware accepts it exactly as the key it came from: same account, mode and scopes;
// every query and write batch still checks that the key is live (src/db/scope.ts).
import type { Auth } from "../context";

export const DASHBOARD_PRINCIPAL: unique symbol = Symbol("tender.dashboardPrincipal");

/** The environment for an in-process API request made on behalf of `auth`. */
export function withPrincipal<E extends object>(env: E, auth: Auth): E {
  return { ...env, [DASHBOARD_PRINCIPAL]: Object.freeze({ ...auth, scopes: [...auth.scopes] }) };
}

/** The principal an in-process request carries, if any. */
export function principalOf(env: object): Auth | undefined {
  return (env as { [DASHBOARD_PRINCIPAL]?: Auth })[DASHBOARD_PRINCIPAL];
}
