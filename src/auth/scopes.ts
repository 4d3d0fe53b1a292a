// The permissions a restricted key or access token can carry. A secret key holds "*".
export const SCOPES = [
  "request_ids:read",
  "request_ids:write",
  "users:read",
  "users:write",
  "payment_methods:read",
  "payment_methods:write",
  "keys:read",
  "keys:write",
  "payouts:read",
  "payouts:write",
  "payments:read",
  "payments:write",
  "checkout_sessions:read",
  "checkout_sessions:write",
  "portal_sessions:read",
  "portal_sessions:write",
  "refunds:read",
  "refunds:write",
  "plans:read",
  "plans:write",
  "subscriptions:read",
  "subscriptions:write",
  "invoices:read",
  "invoices:write",
  "coupons:read",
  "coupons:write",
  "tax_rates:read",
  "tax_rates:write",
  "credit_notes:read",
  "credit_notes:write",
  "webhooks:read",
  "webhooks:write",
  "events:read",
  "events:write",
  "test_clocks:read",
  "test_clocks:write",
] as const;
export type Scope = (typeof SCOPES)[number];
export const ALL_SCOPES = "*";

/**
 * Every scope `held` grants: a write scope grants its read scope too; "all" for a credential
 * holding "*". The one statement of the rule: hasScope, scopesWithin and the key revocation's
 * SQL check (src/routes/keys) all read it.
 */
export function grantedScopes(held: readonly string[]): string[] | "all" {
  if (held.includes(ALL_SCOPES)) return "all";
  const granted = new Set(held);
  for (const scope of held) if (scope.endsWith(":write")) granted.add(`${scope.slice(0, -":write".length)}:read`);
  return [...granted];
}

/** `x:write` implies `x:read`; "*" holds every scope. */
export function hasScope(held: readonly string[], needed: Scope): boolean {
  return scopesWithin(held, [needed]);
}

/** Every scope in `requested` is held by `held` ("*" only by a holder of "*"). */
export function scopesWithin(held: readonly string[], requested: readonly string[]): boolean {
  const granted = grantedScopes(held);
  return granted === "all" || requested.every((scope) => granted.includes(scope));
}
