// Names for the ids a list shows: a subscription, payment or payout names its user and plan by id,
// and a person looks for the user's name or email and the plan's name. The users and plans named on
// one page are read at once (one D1 batch of at most two queries, `id IN (…)`, never a query per
// row), each scoped to the session's account and live key through owned() (src/db/scope.ts), and
// each only when the key holds the scope that reads it: without users:read a list shows the ids.
import { inArray } from "drizzle-orm";
import { hasScope } from "../auth/scopes";
import type { Auth } from "../context";
import type { Db } from "../db/client";
import { plans, users } from "../db/schema";
import { owned } from "../db/scope";
import { Id } from "./format";

export interface Names {
  users: Map<string, { name: string; email: string }>;
  plans: Map<string, { name: string }>;
}

const distinct = (ids: (string | null | undefined)[]) => [...new Set(ids.filter((id): id is string => typeof id === "string" && id !== ""))];

/** The names of the users and plans with these ids that the session's key may read. */
export async function namesFor(db: Db, auth: Auth, ids: { users?: (string | null | undefined)[]; plans?: (string | null | undefined)[] }): Promise<Names> {
  const names: Names = { users: new Map(), plans: new Map() };
  const userIds = hasScope(auth.scopes, "users:read") ? distinct(ids.users ?? []) : [];
  const planIds = hasScope(auth.scopes, "plans:read") ? distinct(ids.plans ?? []) : [];
  const queries = [];
  if (userIds.length) queries.push(db.select({ id: users.id, name: users.name, email: users.email }).from(users).where(owned(users, auth, inArray(users.id, userIds))));
  if (planIds.length) queries.push(db.select({ id: plans.id, name: plans.name }).from(plans).where(owned(plans, auth, inArray(plans.id, planIds))));
  if (queries.length === 0) return names;
  const results = (await db.batch(queries as [(typeof queries)[number], ...(typeof queries)[number][]])) as { id: string; name: string; email?: string }[][];
  let at = 0;
  if (userIds.length) for (const u of results[at++]) names.users.set(u.id, { name: u.name, email: u.email! });
  if (planIds.length) for (const p of results[at++]) names.plans.set(p.id, { name: p.name });
  return names;
}

/** A user by name with the email beneath, the id on hover; the id alone when the name is not known. */
export function UserRef({ id, names }: { id: string | null; names: Names }) {
  if (!id) return <span class="muted">—</span>;
  const user = names.users.get(id);
  if (!user) return <Id id={id} />;
  return (
    <div class="ref" title={id} data-user-ref={id}>
      <span class="wrap">{user.name}</span>
      <div class="muted wrap">{user.email}</div>
    </div>
  );
}

/** A plan by name, the id on hover; the id alone when the name is not known. */
export function PlanRef({ id, names }: { id: string; names: Names }) {
  const plan = names.plans.get(id);
  if (!plan) return <Id id={id} />;
  return (
    <div class="ref wrap" title={id} data-plan-ref={id}>
      {plan.name}
    </div>
  );
}
