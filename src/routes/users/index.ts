// User profiles: create (customer.created), read, list, and replace (customer.updated), each
// change with its event in one batch.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq, sql } from "drizzle-orm";
import { guard, guardExists } from "../../db/batch";
import { insertRow } from "../../db/prepared";
import { testClocks, users } from "../../db/schema";
import { owned, ownedBy } from "../../db/scope";
import { hasPrefix, newId } from "../../domain/ids";
import { storedAddress } from "../../domain/parties";
import { clock, isoTime } from "../../lib/clock";
import type { AppEnv } from "../../context";
import { invalidRequest, notFound } from "../../lib/errors";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { commit, commitAndRespond } from "../write-path";
import { emitEvent } from "../../webhooks/outbox";
import { apiRoute, idParam, json, jsonBodyOf } from "../openapi";
import { CreateUserBody, serializeUser, UserBody, UserSchema, userJsonSql } from "./schema";

const tags = ["Users"];
const userId = idParam("user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w");

const create = apiRoute({
  method: "post",
  path: "/api/users",
  tags,
  operationId: "createUser",
  summary: "Create a user",
  description:
    "Creates a user profile and emits customer.created. `address` and `tax_ids` are what the user's invoices print as the buyer. In live mode, `stripe_account` links the user to a Stripe connected account, so that payouts to the user can be sent there.",
  scope: "users:write",
  request: jsonBodyOf(CreateUserBody),
  responses: { 201: json(UserSchema, "The new user.") },
});

const list = apiRoute({
  method: "get",
  path: "/api/users",
  tags,
  operationId: "listUsers",
  summary: "List users",
  scope: "users:read",
  request: { query: listQuery },
  responses: { 200: json(listSchema(UserSchema, "UserList"), "A page of users, newest first.") },
});

const get = apiRoute({
  method: "get",
  path: "/api/users/{id}",
  tags,
  operationId: "getUser",
  summary: "Read a user's profile",
  scope: "users:read",
  request: { params: userId },
  responses: { 200: json(UserSchema, "The user.") },
});

const update = apiRoute({
  method: "put",
  path: "/api/users/{id}",
  tags,
  operationId: "updateUser",
  summary: "Update a user's profile",
  description:
    "Replaces the user's name and email, and emits customer.updated. `address` and `tax_ids` (what the user's invoices print) are replaced when sent, kept when omitted, removed with null; an issued invoice keeps what it was finalized with. In live mode `stripe_account` sets (or, with null, removes) the Stripe connected account the user is paid out to; omitted, it is kept.",
  scope: "users:write",
  request: { params: userId, ...jsonBodyOf(UserBody) },
  responses: { 200: json(UserSchema, "The updated user.") },
});

const USER_MISSING = "user_missing";

/** A user is paid out through a Stripe connected account in live mode only: test mode pays any card. */
const stripeAccountLiveOnly = () =>
  invalidRequest(
    "livemode_required",
    "stripe_account is for live mode only, where payouts go through Stripe Connect: in test mode any user can be paid out to a test card. Use a live-mode key (sk_live_…).",
    "stripe_account",
  );
const TEST_CLOCK_MISSING = "test_clock_missing";

export function registerUsers(app: OpenAPIHono<AppEnv>) {
  app.openapi(create, async function createUser(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    const now = clock.now();
    const row = {
      id: newId("user", now),
      accountId: auth.accountId,
      livemode: auth.livemode,
      name: body.name,
      email: body.email,
      testClockId: body.test_clock ?? null,
      stripeAccount: body.stripe_account ?? null,
      address: storedAddress(body.address),
      taxIds: body.tax_ids ?? [],
      defaultPaymentMethodId: null,
      balance: 0,
      currency: null,
      createdAt: isoTime(now),
      updatedAt: isoTime(now),
    };
    const user = serializeUser(row);
    // A test clock must be one of this account's, and only a test-mode key may attach one.
    const clockMissing = () => notFound("test_clock", body.test_clock ?? "", "test_clock");
    if (body.stripe_account && !auth.livemode) throw stripeAccountLiveOnly();
    if (body.test_clock !== undefined && auth.mode === "live") throw clockMissing();
    const clockId = body.test_clock;
    return commitAndRespond(
      c,
      {
        statements: [
          ...(clockId === undefined
            ? []
            : [guard(db, TEST_CLOCK_MISSING, sql`EXISTS (SELECT 1 FROM ${testClocks} WHERE ${testClocks.id} = ${clockId} AND ${ownedBy(testClocks, auth)})`)]),
          insertRow(db, users, row),
        ],
        events: [emitEvent(db, auth, { type: "customer.created", data: user }, now)],
      },
      201,
      user,
      { failures: { [TEST_CLOCK_MISSING]: clockMissing } },
    );
  });

  app.openapi(list, async function listUsers(c) {
    const page = await listOwned(c, {
      table: users,
      query: c.req.valid("query"),
      validCursor: (id) => hasPrefix(id, "user"),
      serialize: serializeUser,
    });
    return c.json(page, 200);
  });

  app.openapi(get, async function getUser(c) {
    const { id } = c.req.valid("param");
    const row = await readById(c, users, id, "user");
    return c.json(serializeUser(row), 200);
  });

  app.openapi(update, async function updateUser(c) {
    const { db, auth } = c.var;
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = clock.now();
    if (body.stripe_account && !auth.livemode) throw stripeAccountLiveOnly();
    // One batch: the user must exist in this account; the update, its event (with the user
    // as committed) and the stored answer all read the same row.
    const { returned } = await commit(
      c,
      {
        statements: [guardExists(db, USER_MISSING, users, owned(users, auth, eq(users.id, id)))],
        returning: db
          .update(users)
          .set({
            name: body.name,
            email: body.email,
            ...(body.stripe_account === undefined ? {} : { stripeAccount: body.stripe_account }),
            // The buyer's details: omitted, kept; null, removed.
            ...(body.address === undefined ? {} : { address: storedAddress(body.address) }),
            ...(body.tax_ids === undefined ? {} : { taxIds: body.tax_ids ?? [] }),
            updatedAt: isoTime(now),
          })
          .where(owned(users, auth, eq(users.id, id)))
          .returning(),
        events: [emitEvent(db, auth, { type: "customer.updated", dataSql: userJsonSql(id), objectId: id }, now)],
      },
      200,
      userJsonSql(id),
      { failures: { [USER_MISSING]: () => notFound("user", id, "id") } },
    );
    const [updated] = returned as (typeof users.$inferSelect)[];
    return c.json(serializeUser(updated), 200);
  });
}
