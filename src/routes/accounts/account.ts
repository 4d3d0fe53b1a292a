// GET and PATCH /api/account: the caller's own account (never its keys), and its settings. The
// account is shared by both modes, so either mode's secret key reads and changes it; a restricted
// key or an access token answers 403 secret_key_required.
import type { OpenAPIHono } from "@hono/zod-openapi";
import { and, eq, isNull, sql } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import { ensureLive } from "../../auth/credentials";
import type { AppEnv } from "../../context";
import { accounts, apiKeys } from "../../db/schema";
import { rowAnswer } from "../../middleware/stored-answers";
import { storedAddress } from "../../domain/parties";
import { ApiError, notFound } from "../../lib/errors";
import { apiRoute, json, jsonBodyOf } from "../openapi";
import { commitAndAnswerRow } from "../write-path";
import { AccountSettingsSchema, UpdateAccountBody } from "./schema";

const tags = ["Accounts"];
const AUTH_NOTE = "Secret key only (sk_test_… or sk_live_…: the account is shared by both modes): a restricted key or an access token answers 403 secret_key_required.";

const secretKeyOnly = createMiddleware<AppEnv>(async (c, next) => {
  // A refusal says something about the key: one revoked meanwhile (still cached here) gets its 401 first.
  if (c.var.auth.credential !== "secret_key") {
    await ensureLive(c.var.db, c.var.auth);
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
  description: `Sets event_retention_days (a whole number from 1 to 365; else 400 naming the field; a shorter retention takes effect at the cron's next runs, a page at a time) and the seller's details its invoices print: business_name, address, tax_id and invoice_footer (each null removes it; an omitted field is kept; address is replaced whole). An invoice copies them when it is finalized, so a change never alters an issued invoice. ${AUTH_NOTE}`,
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
  business_name: row.businessName ?? null,
  address: row.address ?? null,
  tax_id: row.taxId ?? null,
  invoice_footer: row.invoiceFooter ?? null,
});
/** PATCH's answer: the row as its batch commits it (stored so, without the move's bookkeeping). */
const accountAnswer = rowAnswer("account", accounts, serialize, ["movedTo", "moveToken", "moveUntil", "apiVersion"]);

export function registerAccount(app: OpenAPIHono<AppEnv>) {
  app.openapi(get, async function getAccount(c) {
    const { db, auth } = c.var;
    // One round trip: the read is the key's check too (its key live and unpaused, as every scoped read checks).
    const [row] = await db
      .select({ account: accounts })
      .from(accounts)
      .innerJoin(apiKeys, and(eq(apiKeys.id, auth.keyId), eq(apiKeys.accountId, accounts.id), isNull(apiKeys.revokedAt), isNull(apiKeys.pausedAt)))
      .where(eq(accounts.id, auth.accountId));
    if (!row) {
      await ensureLive(db, auth);
      throw notFound("account", auth.accountId);
    }
    return c.json(serialize(row.account), 200);
  });

  app.openapi(update, async function updateAccount(c) {
    const { db, auth } = c.var;
    const body = c.req.valid("json");
    // One round trip: the batch (with the key's guard) returns the account as it commits.
    const where = eq(accounts.id, auth.accountId);
    return commitAndAnswerRow(
      c,
      {
        statements: [],
        returning: db
          .update(accounts)
          .set({
            eventRetentionDays: body.event_retention_days ?? sql`${accounts.eventRetentionDays}`,
            // Omitted: kept; null: removed.
            ...(body.business_name === undefined ? {} : { businessName: body.business_name }),
            ...(body.address === undefined ? {} : { address: storedAddress(body.address) }),
            ...(body.tax_id === undefined ? {} : { taxId: body.tax_id }),
            ...(body.invoice_footer === undefined ? {} : { invoiceFooter: body.invoice_footer }),
          })
          .where(where)
          .returning(),
      },
      accountAnswer,
      where,
    );
  });
}
