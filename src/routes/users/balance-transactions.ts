// GET /api/users/{id}/balance-transactions: the ledger of a user's balance (Stripe's customer
// balance transactions), newest first, paginated as every list. Each change of `users.balance` is
// one row, written in the batch that changed it (src/billing/credit-notes.ts, periods.ts
// balanceTaken, balance-credits.ts), with the balance after it.
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { customerBalanceTransactions, users } from "../../db/schema";
import { hasPrefix } from "../../domain/ids";
import type { AppEnv } from "../../context";
import { listQuery, listSchema } from "../pagination";
import { listOwned, readById } from "../reads";
import { apiRoute, idParam, json } from "../openapi";
import { livemodeField, timestamp } from "../shared";

export const BalanceTransactionSchema = z
  .object({
    id: z.string().openapi({ example: "cbtxn_01jd2x4k5m6n7p8q9r0s1t2v3w" }),
    object: z.literal("customer_balance_transaction"),
    livemode: livemodeField,
    user_id: z.string().openapi({ description: "The user whose balance changed." }),
    amount: z.number().int().openapi({ description: "The change, in the smallest unit of `currency`: negative credits the user (as Stripe's), positive takes a credit (an invoice used it, or a credit note was voided).", example: -4000 }),
    currency: z.string().openapi({ example: "usd" }),
    type: z.enum(["credit_note", "credit_note_void", "applied_to_invoice", "unapplied_from_invoice"]).openapi({
      description:
        "credit_note: a credit note credited the balance (refund: false, or a downgrade's credit beyond its invoice); credit_note_void: that note was voided; applied_to_invoice: a renewal's invoice took from the balance; unapplied_from_invoice: that invoice was voided and gave it back.",
    }),
    credit_note_id: z.string().nullable().openapi({ description: "The credit note of a credit_note or credit_note_void row; null otherwise." }),
    invoice_id: z.string().nullable().openapi({ description: "The invoice the row concerns (a credit note's, or the voided one's); null for applied_to_invoice (see the invoice's starting_balance and ending_balance)." }),
    ending_balance: z.number().int().openapi({ description: "The user's balance after this change.", example: -4000 }),
    created_at: timestamp("When the balance changed."),
  })
  .openapi("CustomerBalanceTransaction");
export type BalanceTransactionJson = z.infer<typeof BalanceTransactionSchema>;

export function serializeBalanceTransaction(row: typeof customerBalanceTransactions.$inferSelect): BalanceTransactionJson {
  return {
    id: row.id,
    object: "customer_balance_transaction",
    livemode: row.livemode,
    user_id: row.userId,
    amount: row.amount,
    currency: row.currency,
    type: row.type,
    credit_note_id: row.creditNoteId ?? null,
    invoice_id: row.invoiceId ?? null,
    ending_balance: row.endingBalance,
    created_at: row.createdAt,
  };
}

const list = apiRoute({
  method: "get",
  path: "/api/users/{id}/balance-transactions",
  tags: ["Users"],
  operationId: "listBalanceTransactions",
  summary: "List a user's balance transactions",
  description:
    "The changes of the user's `balance` (Stripe's customer balance transactions), newest first: each credit note to the balance, each void of one, what each renewal's invoice took and what a voided invoice gave back, with the balance after it. Another account's user (or the other mode's) answers 404.",
  scope: "users:read",
  request: { params: idParam("user", "usr_01jd2x4k5m6n7p8q9r0s1t2v3w"), query: listQuery },
  responses: { 200: json(listSchema(BalanceTransactionSchema, "CustomerBalanceTransactionList"), "A page of the user's balance transactions, newest first.") },
});

export function registerBalanceTransactions(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async function listBalanceTransactions(c) {
    const { id: userId } = c.req.valid("param");
    await readById(c, users, userId, "user");
    const page = await listOwned(c, {
      table: customerBalanceTransactions,
      query: c.req.valid("query"),
      filters: [[customerBalanceTransactions.userId, userId]],
      validCursor: (id) => hasPrefix(id, "balanceTransaction"),
      serialize: serializeBalanceTransaction,
    });
    return c.json(page, 200);
  });
}
