// The permissions a restricted key or access token can carry. A secret key holds "*".
export const SCOPES = [
  "request_ids:read",
  "request_ids:write",
  "users:read",
  "users:write",
  "keys:read",
  "keys:write",
  "payouts:read",
  "payouts:write",
  "payments:read",
  "refunds:read",
  "refunds:write",
  "plans:read",
  "plans:write",
  "subscriptions:read",
  "subscriptions:write",
  "webhooks:read",
  "webhooks:write",
  "events:read",
  "events:write",
  "test_clocks:read",
  "test_clocks:write",
] as const;
export type Scope = (typeof SCOPES)[number];
export const ALL_SCOPES = "*";

/** `x:write` implies `x:read`; "*" holds every scope. */
export function hasScope(held: readonly string[], needed: Scope): boolean {
  if (held.includes(ALL_SCOPES) || held.includes(needed)) return true;
  const [resource, action] = needed.split(":");
  return action === "read" && held.includes(`${resource}:write`);
}

/** Every scope in `requested` is held by `held`. */
export function scopesWithin(held: readonly string[], requested: readonly string[]): boolean {
  return requested.every((s) => (s === ALL_SCOPES ? held.includes(ALL_SCOPES) : hasScope(held, s as Scope)));
}

/**
 * Every scope `held` grants, for a check written in SQL: a write scope grants its read scope too.
 * "all" for a credential holding every scope.
 */
export function grantedScopes(held: readonly string[]): string[] | "all" {
  if (held.includes(ALL_SCOPES)) return "all";
  const granted = new Set(held);
  for (const scope of held) if (scope.endsWith(":write")) granted.add(`${scope.slice(0, -":write".length)}:read`);
  return [...granted];
}
