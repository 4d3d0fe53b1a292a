// Names for the ids a list shows: a subscription, payment or payout names its user and plan by id,
// and a person looks for the user's name or email and the plan's name. The users and plans named on
// one page are read at once (one D1 batch of at most two queries, `id IN (…)`, never a query per
// row), each scoped to the session's account and live key through owned() (src/db/scope.ts), and
// each only when the key holds the scope that reads it: without users:read a list shows the ids.
// A user on a test clock is shown with the clock's time (its subscriptions, payments and invoices
// follow that time, not the wall clock's), read by the same query; a delivery names its event's type.
import { inArray, sql } from "drizzle-orm";
import { hasScope } from "../auth/scopes";
import type { Auth } from "../context";
import type { Db } from "../db/client";
import { events, plans, testClocks, users } from "../db/schema";
import { owned } from "../db/scope";
import { Email, Id, Time } from "./format";

export interface Names {
  users: Map<string, { name: string; email: string }>;
  plans: Map<string, { name: string }>;
  /** The test clock of each user (named in `users`) that is on one: its id, name and current time. */
  clocks: Map<string, TestClockTime>;
  /** The type of each event named. */
  eventTypes: Map<string, string>;
}

export interface TestClockTime {
  id: string;
  name: string | null;
  frozenTime: string;
}

const distinct = (ids: (string | null | undefined)[]) => [...new Set(ids.filter((id): id is string => typeof id === "string" && id !== ""))];

/** The names of the users and plans with these ids that the session's key may read. */
export async function namesFor(
  db: Db,
  auth: Auth,
  ids: { users?: (string | null | undefined)[]; plans?: (string | null | undefined)[]; events?: (string | null | undefined)[] },
): Promise<Names> {
  const names: Names = { users: new Map(), plans: new Map(), clocks: new Map(), eventTypes: new Map() };
  const userIds = hasScope(auth.scopes, "users:read") ? distinct(ids.users ?? []) : [];
  const planIds = hasScope(auth.scopes, "plans:read") ? distinct(ids.plans ?? []) : [];
  // A delivery's event type is shown to whoever may read the endpoint's deliveries or the events.
  const eventIds = hasScope(auth.scopes, "webhooks:read") || hasScope(auth.scopes, "events:read") ? distinct(ids.events ?? []) : [];
  const queries = [];
  if (userIds.length) {
    queries.push(
      db
        .select({
          id: users.id,
          name: users.name,
          email: users.email,
          clockId: users.testClockId,
          // Scalar subqueries, not a join: a join's two "id" columns collide in D1's batch answer.
          clockName: sql<string | null>`(SELECT ${testClocks.name} FROM ${testClocks} WHERE ${testClocks.id} = ${users.testClockId})`,
          frozenTime: sql<string | null>`(SELECT ${testClocks.frozenTime} FROM ${testClocks} WHERE ${testClocks.id} = ${users.testClockId})`,
        })
        .from(users)
        .where(owned(users, auth, inArray(users.id, userIds))),
    );
  }
  if (planIds.length) queries.push(db.select({ id: plans.id, name: plans.name }).from(plans).where(owned(plans, auth, inArray(plans.id, planIds))));
  if (eventIds.length) queries.push(db.select({ id: events.id, name: events.type }).from(events).where(owned(events, auth, inArray(events.id, eventIds))));
  if (queries.length === 0) return names;
  type Row = { id: string; name: string; email?: string; clockId?: string | null; clockName?: string | null; frozenTime?: string | null };
  const results = (await db.batch(queries as [(typeof queries)[number], ...(typeof queries)[number][]])) as Row[][];
  let at = 0;
  if (userIds.length) {
    for (const u of results[at++]) {
      names.users.set(u.id, { name: u.name, email: u.email! });
      if (u.clockId && u.frozenTime) names.clocks.set(u.id, { id: u.clockId, name: u.clockName ?? null, frozenTime: u.frozenTime });
    }
  }
  if (planIds.length) for (const p of results[at++]) names.plans.set(p.id, { name: p.name });
  if (eventIds.length) for (const e of results[at++]) names.eventTypes.set(e.id, e.name);
  return names;
}

/** A user's test clock and its time: what the user's subscriptions, payments and invoices follow. */
export function ClockTime({ clock }: { clock: TestClockTime | undefined }) {
  if (!clock) return null;
  return (
    <div class="muted clock" data-clock-time={clock.frozenTime}>
      test clock{clock.name ? ` ${clock.name}` : ""}: <Time iso={clock.frozenTime} />
    </div>
  );
}

/** Where a user's page is. */
export const userPage = (id: string) => `/dashboard/users/${encodeURIComponent(id)}`;

/** A user by name with the email beneath, the id on hover; the id alone when the name is not known. */
export function UserRef({ id, names }: { id: string | null; names: Names }) {
  if (!id) return <span class="muted">—</span>;
  const user = names.users.get(id);
  // Without users:read there is no user's page to open either.
  if (!user) return <Id id={id} />;
  return (
    <div class="ref" title={id} data-user-ref={id}>
      <a href={userPage(id)} class="wrap">
        {user.name}
      </a>
      <div class="muted">
        <Email email={user.email} />
      </div>
      <ClockTime clock={names.clocks.get(id)} />
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
