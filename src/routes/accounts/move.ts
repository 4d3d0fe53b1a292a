// POST /api/accounts/{account_id}/move: moves an account to another shard (src/accounts/move.ts),
// for the operator: open in development, behind ADMIN_TOKEN elsewhere, like sign-up.
// `npm run move-account -- <account_id> <shard>` (scripts/move-account.mjs) calls it.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "@hono/zod-openapi";
import { moveAccount } from "../../accounts/move";
import type { AppEnv } from "../../context";
import { clock } from "../../lib/clock";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { requireAdmin } from "./post";
import { MoveBody, MoveResultSchema } from "./schema";

const route = apiRoute({
  method: "post",
  path: "/api/accounts/{account_id}/move",
  tags: ["Accounts"],
  operationId: "moveAccount",
  summary: "Move an account to another shard (operators)",
  description:
    "Pauses the account's keys (their requests answer 503 account_moving with Retry-After meanwhile), waits drain_seconds, then until no request of the account has a charge at Stripe (however long: a charge holds a money claim until its commit), copies every row of the account to the shard `to_shard` names, proves the copy (each table's rows counted and hashed on both shards), then switches the account over. Keys and tokens issued before the move keep working. One move of an account at a time (409 move_in_progress). A move that fails before its switch puts everything back; one whose switch's outcome is unknown leaves the account paused, and calling this again finishes it. Open in development; elsewhere it needs 'Authorization: Bearer <ADMIN_TOKEN>'.",
  public: true,
  extraErrors: [404, 409],
  request: {
    params: z.object({ account_id: z.string().max(100).openapi({ param: { name: "account_id", in: "path" }, example: "acct_01jd2x4k5m6n7p8q9r0s1t2v3w" }) }),
    ...jsonBodyOf(MoveBody),
  },
  responses: { 200: json(MoveResultSchema, "The account lives on the target shard now, with the proof of its copy.") },
});

export function registerMoveAccount(app: OpenAPIHono<AppEnv>) {
  app.openapi(route, async function moveAccountRoute(c) {
    requireAdmin(c, "Moving an account");
    const { account_id } = c.req.valid("param");
    const { to_shard, drain_seconds } = c.req.valid("json");
    return c.json(await moveAccount(c.env, account_id, to_shard, { drainMs: drain_seconds === undefined ? undefined : drain_seconds * 1000, now: () => clock.now() }), 200);
  });
}
