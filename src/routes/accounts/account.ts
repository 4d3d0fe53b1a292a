// GET and PATCH /api/account: the caller's own account (never its keys), and its settings. The
// account is shared by both modes, so either mode's secret key reads and changes it; a restricted
// key or an access token answers 403 secret_key_required.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { ensureLive } from "../../auth/credentials";
import type { AppEnv } from "../../context";
import { accounts } from "../../db/schema";
import { ApiError, notFound } from "../../lib/errors";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { commitAndRespond } from "../write-path";
import { AccountSettingsSchema, UpdateAccountBody } from "./schema";

const tags = ["Accounts"];
const AUTH_NOTE = "Secret key only (sk_test_… or sk_live_…: the account is shared by both modes): a restricted key or an access token answers 403 secret_key_required.";

const secretKeyOnly = createMiddleware<AppEnv>(async (c, next) => {
  // The key is checked first (the read below is not scoped by it): one revoked meanwhile, still
  // cached in this isolate, answers 401, whatever it is.
  await ensureLive(c.var.db, c.var.auth);
  if (c.var.auth.credential !== "secret_key") {
    throw new ApiError(403, "permission_error", "secret_key_required", "Only the account's secret key (sk_test_… or sk_live_…) reads or changes the account: not a restricted key, nor an access token.");
  }
  return next();
});

const get = apiRoute({
  method: "get",
  path: "/api/account",
  tags,
  operationId: "getAccount",
  summary: "Read your account",
  description: `The caller's account and its settings (never its keys). ${AUTH_NOTE}`,
  middleware: [secretKeyOnly] as const,
  responses: { 200: json(AccountSettingsSchema, "The account.") },
});

const update = apiRoute({
  method: "patch",
  path: "/api/account",
  tags,
  operationId: "updateAccount",
  summary: "Change your account's settings",
  description: `Sets event_retention_days (a whole number from 1 to 365; else 400 naming the field). A shorter retention takes effect at the cron's next runs, a page at a time. ${AUTH_NOTE}`,
  middleware: [secretKeyOnly] as const,
  request: jsonBodyOf(UpdateAccountBody),
  responses: { 200: json(AccountSettingsSchema, "The account, as changed.") },
});

type AccountRow = typeof accounts.$inferSelect;
const serialize = (row: AccountRow) => ({
  id: row.id,
  object: "account" as const,
  name: row.name,
  email: row.email,
  created_at: row.createdAt,
  event_retention_days: row.eventRetentionDays,
});

async function accountOf(c: Context<AppEnv>): Promise<AccountRow> {
  const [row] = await c.var.db.select().from(accounts).where(eq(accounts.id, c.var.auth.accountId));
  if (!row) throw notFound("account", c.var.auth.accountId);
  return row;
}

export function registerAccount(app: OpenAPIHono<AppEnv>) {
  app.openapi(get, async function getAccount(c) {
    return c.json(serialize(await accountOf(c)), 200);
  });

  app.openapi(update, async function updateAccount(c) {
    const body = c.req.valid("json");
    const row = await accountOf(c);
    const next = { ...row, eventRetentionDays: body.event_retention_days ?? row.eventRetentionDays };
    const statements = body.event_retention_days === undefined ? [] : [c.var.db.update(accounts).set({ eventRetentionDays: next.eventRetentionDays }).where(eq(accounts.id, row.id))];
    return commitAndRespond(c, { statements }, 200, serialize(next));
  });
}
